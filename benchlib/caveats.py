"""Caveats a page prints as flagged outputs, so that a report's index gathers them by flag.

A page shows a caveat with :class:`Caveat`: its Markdown on the page, and in the executed notebook the
output's metadata names its flag (``{"benchlib": {"caveat": "one run"}}``). The index quotes each page's
headline without its caveats, leaves out a flag the index itself states once (one run per configuration:
the design says it), and says any other flag once, however many pages carry it. Nothing matches sentences.

The one-run caveats the summary pages print live here with their flag.
"""

from __future__ import annotations

#: the flag of the caveats that say the runs were each run once (the design says it once for the index)
ONE_RUN = "one run"

#: the flag of the caveat that no comparison can reach α with its runs (the index's design statement says it)
TOO_FEW = "too few runs"

#: the flag of the caveats that say fio ran buffered (direct=0): the page cache's figures as much as the storage's
PAGE_CACHE = "page cache"

#: the flag of the caveat that the runs carry no start times, so their order in time cannot be checked
ORDER_UNKNOWN = "run order unknown"

#: the comparison page, where every row is one run per side
COMPARISON_ONCE = (
    "Every configuration was run once: the rows describe single runs, no test or interval is possible, and "
    "nothing here is evidence of an effect of the setting."
)
#: the sweeps page, where every depth ran once
SWEEP_ONCE = "Each depth was run once: these shapes describe single runs, and a dip or a knee may be noise."
#: the claims page: ``once`` of ``total`` claims read configurations run once
CLAIMS_ONCE = (
    "{once} of {total} claims rest on configurations that were run once: for them PASS and FAIL judge the "
    "arithmetic of the write-up's own numbers, not whether a setting had an effect (that needs repeated runs "
    "of each configuration; see the comparison page)."
)


class Caveat:
    """A caveat as a notebook shows it: Markdown, with its flag in the output's metadata.

    ``Caveat(ONE_RUN, COMPARISON_ONCE)`` as a cell's last expression (or through ``display``) prints the
    sentence; :func:`flag_of` reads the flag back from the executed notebook's output.
    """

    def __init__(self, flag: str, text: str) -> None:
        self.flag, self.text = flag, text

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> tuple[dict, dict]:
        return {"text/markdown": self.text, "text/plain": self.text}, {"benchlib": {"caveat": self.flag}}


def flag_of(output: dict) -> str | None:
    """Return the caveat flag of one output of an executed notebook (:class:`Caveat`), None for any other."""
    meta = output.get("metadata", {}).get("benchlib", {})
    flag = meta.get("caveat") if isinstance(meta, dict) else None
    return flag if isinstance(flag, str) else None
