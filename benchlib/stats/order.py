"""Run order: whether two sides of a comparison ran mixed in time or one block after the other (issue 40).

A comparison's test takes its runs as independent draws of each side. Where every baseline run came first
and every other run after (or nearly so), anything that drifts with time (a cache warming, a thin disk
filling, a neighbour's backup) moves one side and not the other, and the test reads the drift as the
setting's effect: with AR(1) noise of lag-1 correlation 0.6, 10 runs a side run in two blocks, a family of 8
comparisons held a false *improved* or *regressed* 58% of the time in the audit, 62% in
``bench/bench_calibration.py --order`` (any change counting). benchlib's own plans shuffle the cells
within every repetition, so each repetition holds one run of each side and the sides never fall in blocks.

:func:`sides_in_time` reads the order from the runs' start times: ``in blocks`` where the sequence of sides
in time has fewer alternations than chance would give at alpha (the Wald-Wolfowitz runs test, exact) or
none at all (one side wholly before the other, two runs a side or more); ``mixed`` otherwise; None where a
run has no start time (a published table, a format without one), which the page says as unknown.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

#: the order codes :func:`sides_in_time` returns
ORDERS = ("in blocks", "mixed")


def alternation_p(sides: Sequence[bool]) -> float:
    """Return the exact one-sided p of the Wald-Wolfowitz runs test: so few alternations or fewer by chance.

    ``sides``: in time order, True for a run of one side, False for the other. Under a random order of the
    m and n runs, the chance of r runs (maximal stretches of one side) or fewer.
    """
    m = sum(sides)
    n = len(sides) - m
    if not m or not n:
        return 1.0
    observed = 1 + sum(a != b for a, b in zip(sides, sides[1:], strict=False))
    total = math.comb(m + n, m)

    def ways(r: int) -> int:  # arrangements with exactly r runs
        if r % 2 == 0:
            k = r // 2
            return 2 * math.comb(m - 1, k - 1) * math.comb(n - 1, k - 1)
        k = (r - 1) // 2
        return math.comb(m - 1, k) * math.comb(n - 1, k - 1) + math.comb(m - 1, k - 1) * math.comb(n - 1, k)

    return sum(ways(r) for r in range(2, observed + 1)) / total


def sides_in_time(
    baseline: Sequence[datetime | None], other: Sequence[datetime | None], alpha: float = 0.05
) -> str | None:
    """Return how two sides' runs fell in time: a code of :data:`ORDERS`, None where a start time is missing.

    ``in blocks``: each side has two runs or more and every run of one started before every run of the other,
    or the sides alternate less often than a random order would at ``alpha`` (:func:`alternation_p`).
    """
    if not baseline or not other or any(t is None for t in (*baseline, *other)):
        return None
    ordered = sorted([(t, True) for t in baseline] + [(t, False) for t in other], key=lambda pair: pair[0])
    sides = [side for _, side in ordered]
    apart = 1 + sum(a != b for a, b in zip(sides, sides[1:], strict=False)) == 2
    if (apart and min(len(baseline), len(other)) >= 2) or alternation_p(sides) <= alpha:
        return "in blocks"
    return "mixed"
