"""What a design can show before it runs (plain arithmetic, no scipy: ``benchlib run`` says it at once).

The smallest p its runs allow, the runs a test needs, how long a run must be for the steady-state check
(the SNIA PTS window, :mod:`benchlib.stats.steady`) and the two-level plan (:mod:`benchlib.stats.compare`).
"""

from __future__ import annotations

import math

#: Rounds (whole logged seconds) in the SNIA PTS steady-state window (:mod:`benchlib.stats.steady`).
PTS_ROUNDS = 5

#: Iterations per run from which the two-level plan measures their lag-1 autocorrelation
#: (:func:`benchlib.stats.compare.two_level_table`).
LAG_FROM = 10


def min_p(n_base: int, n_new: int) -> float:
    """Return the smallest two-sided exact Mann–Whitney p with these runs per side: ``2 / C(n1 + n2, n1)`` (G3b)."""
    return min(1.0, 2 / math.comb(n_base + n_new, n_base))


def runs_to_test(family: int = 1, alpha: float = 0.05) -> int:
    """Return the runs per side with which a family of ``family`` comparisons can reject at ``alpha`` (Holm).

    The smallest n with ``family x 2 / C(2n, n) <= alpha``: 4 alone, 6 for a family of 8 (G3b, test V-1).
    """
    n = 1
    while family * min_p(n, n) > alpha:
        n += 1
    return n
