"""What else changed with a setting, in words, said beside a comparison it qualifies.

What :func:`benchlib.views.confounders` and :func:`benchlib.views.unlike_sizes` found.
"""

from __future__ import annotations

from benchlib.tables import inline, label, level

#: each confounder (:data:`benchlib.views.CONFOUNDERS`) as a reader knows it, and how it comes about
CONFOUNDER_WORDS = {
    "configured_depth": ("I/Os in flight per host", "iodepth x jobs; a synchronous engine keeps 1"),
    "block_size_bytes": ("block size (bytes)", ""),
    "rw": ("I/O pattern", ""),
    "rwmixread_pct": ("read share (%)", ""),
}


def confounded_note(found: list[dict], factor: str) -> str:
    """Say which job parameters changed with ``factor`` (:func:`benchlib.views.confounders`), in Markdown."""
    if not found:
        return ""
    said = []
    for one in found:
        param = one["param"]
        values = ", ".join(
            f"{level(factor, side)}: " + " or ".join(f"{v:g}" if isinstance(v, float) else level(param, v) for v in vs)
            for side, vs in one["values"].items()  # the same sentence whichever level a page takes as baseline
        )
        where = (
            "every compared group"
            if one["groups"] == one["compared"]
            else f"{one['groups']} of {one['compared']} groups"
        )
        name, how = CONFOUNDER_WORDS[param]
        said.append(f"{name} ({values}; in {where}{f'; {how}' if how else ''})")
    return (
        f"**Besides {inline(factor)}, the sides differ in** "
        + ", and in ".join(said)
        + f". A change here is not the {inline(factor)}'s alone."
    )


def size(n: int) -> str:
    """Return a block size as fio writes it: ``4k``, ``64k``, ``1m``, ``512``."""
    for unit, scale in (("m", 1 << 20), ("k", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def unlike_work_note(sizes: list[int], value: str) -> str:
    """Say that a per-I/O figure compares different work across ``sizes`` (:func:`benchlib.views.unlike_sizes`)."""
    if not sizes:
        return ""
    low, high = sizes[0], sizes[-1]
    return (
        f"**Not the same work.** The sides ran different block sizes ({', '.join(size(b) for b in sizes)}): "
        f"one I/O of {size(high)} moves {high / low:g} times the bytes of one of {size(low)}, so "
        f"{label(value)} compares different work; bandwidth (MiB/s) compares the bytes moved."
    )
