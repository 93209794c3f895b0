"""The one-run caveats summary pages print, in one place.

A page whose runs were each run once says so beside its finding. The report's index states the
design once for the whole study ("One run per configuration: ..."), so it leaves these sentences
out of the findings it quotes (:func:`without_one_run`): the pages and the index share the
sentences here rather than the index matching their wording.
"""

from __future__ import annotations

import re

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
ONE_RUN = (COMPARISON_ONCE, SWEEP_ONCE, CLAIMS_ONCE)


def _pattern(template: str) -> str:
    """Return ``template`` as a regular expression, each ``{field}`` a whole number."""
    return re.sub(r"\\\{\w+\\\}", r"\\d+", re.escape(template))


_ONE_RUN_SAID = re.compile("|".join(rf"\s*{_pattern(sentence)}" for sentence in ONE_RUN))


def without_one_run(text: str) -> str:
    """Return a page's finding without the one-run caveats of :data:`ONE_RUN` (the index says it once)."""
    return _ONE_RUN_SAID.sub("", text).strip()
