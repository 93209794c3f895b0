"""The page cache and fair shares in words, said where a page's figures must be read with them.

What :func:`benchlib.views.buffered` and :func:`benchlib.views.equal_shares_assumed` found.
"""

from __future__ import annotations

from benchlib.caveats import PAGE_CACHE, Caveat
from benchlib.tables import inline
from benchlib.views import Buffered


def buffered_note(found: Buffered | None) -> str:
    """Say which configurations fio ran buffered (``direct=0``) and what the disk counted of them; "" if none."""
    if found is None:
        return ""
    which = _which(found, "jobs", "these")
    if not found.shares:
        return (
            f"{which} ran buffered (fio's direct=0, its default): the page cache could answer reads and absorb "
            "writes, so their IOPS and latency may be the cache's as much as the storage's; --direct=1 measures "
            "the storage."
        )
    parts = [_share_words(direction, low, high) for direction, (low, high) in found.shares.items()]
    said = (
        "The disk's own counters (fio's disk statistics, median over runs; they count all the disk's I/O, not "
        "fio's alone) hold " + "; and ".join(parts)
    )
    return (
        f"{which} ran buffered (fio's direct=0, its default): the page cache could answer reads and absorb writes. "
        f"{said}. Where it did, IOPS and latency are the cache's as much as the storage's; --direct=1 measures "
        "the storage."
    )


def buffered_caveat(found: Buffered | None) -> Caveat | None:
    """Return :func:`buffered_note` as a page prints it, flagged so that an index says it once; None if none."""
    said = buffered_note(found)
    return Caveat(PAGE_CACHE, said) if said else None


def buffered_in_short(found: Buffered | None) -> str:
    """Say in one sentence that the compared runs ran buffered, for an answer the pages qualify; "" if none."""
    if found is None:
        return ""
    which = _which(found, "runs", "the", " compared")
    return (
        f"{which} ran buffered (fio's direct=0): the page cache could answer them, so the change may be the "
        "cache's as much as the storage's."
    )


def _which(found: Buffered, what: str, of: str, kind: str = "") -> str:
    """Say which ran buffered: ``These jobs`` where all did, else ``In 2 of these 5 configurations the jobs``."""
    if found.buffered == found.configurations:
        return f"These {what}"
    return f"In {found.buffered} of {of} {found.configurations} configurations{kind} the {what}"


def _share_words(direction: str, low: float, high: float) -> str:
    """Say a share of fio's I/Os the disk counted, ``low`` to ``high`` (a run's members sharing a disk, or not)."""

    def pct(share: float) -> str:  # two significant digits, never 1e+02
        return f"{100 * share:.2g}%" if share < 1 else f"{100 * share:,.0f}%"

    said = (
        pct(low)
        if high <= low * 1.05
        else f"{pct(low)} (if a run's {inline('vm')}s shared one disk) to {pct(high)} (if each had its own)"
    )
    if low >= 0.9:
        return f"{said} as many {direction}s as fio did: the cache answered few of them"
    words = "absorbed most" if direction == "write" else "answered most"
    rest = f"the cache {words}" if high < 0.5 else "the cache took the rest"
    return f"{said} as many {direction}s as fio did: {rest}"


def equal_shares_note(assumed: bool) -> str:
    """Say that fair is read as equal shares (:func:`benchlib.views.equal_shares_assumed`), "" where it is not."""
    if not assumed:
        return ""
    return (
        "The study declares no per-VM disk shares, so fair is read as equal shares (VMs given different disk shares, "
        "which each ESXi host honours and SIOC extends across hosts when the datastore is congested, are meant to "
        "get different throughput)."
    )
