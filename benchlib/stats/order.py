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
from dataclasses import dataclass
from datetime import datetime

import numpy as np

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


@dataclass(frozen=True)
class Drift:
    """How a study's run totals moved with time within its configurations (:func:`drift_within`).

    ``per_hour``: the pooled within-configuration trend, a fraction an hour (``0.01``: totals rose 1% an hour),
    with its interval ``low``..``high`` at ``confidence``; ``configurations`` and ``runs`` it read (each
    configuration three runs or more with start times); ``hours``: the median time a configuration's runs span.
    """

    per_hour: float
    low: float
    high: float
    confidence: float
    configurations: int
    runs: int
    hours: float

    @property
    def drifted(self) -> bool:
        """Whether the interval leaves out no trend: the totals moved with time."""
        return self.low > 0 or self.high < 0


#: a configuration's runs the trend needs, with start times: two give one slope and no interval of their own
DRIFT_RUNS = 3


def drift_within(groups: Sequence[Sequence[tuple[datetime, float]]], confidence: float = 0.95) -> Drift | None:
    """Return the trend of run totals with time within configurations, pooled: the study's drift check.

    ``groups``: each configuration's runs as (start time, total); a configuration with fewer than
    :data:`DRIFT_RUNS` runs of distinct times is left out. The trend is the Theil-Sen slope of log(total)
    against hours over every pair of runs of one configuration (a change between configurations never
    enters), with Sen's interval from Kendall's S, its variance widened by (1 + r) / (1 - r) for the lag-1
    correlation r of the runs' residuals in time order: a drift's neighbouring runs are not independent,
    and an interval that took them so would find a trend in a slow wander. None where no configuration has
    enough runs, or the pairs are too few for the interval.

    It reports, and clears nothing: a trend within the blocks of a blocked comparison does not bound the
    drift between them (with AR(1) drift, ρ 0.6, blocked runs cleared by it held a false verdict in 8.5% of
    tables against α = 5%).
    """
    from scipy.stats import norm

    slopes, variance, kept, spans, series = [], 0.0, 0, [], []
    for runs in groups:
        timed = sorted((t, v) for t, v in runs if t is not None and v is not None and v > 0)
        if len({t for t, _ in timed}) < DRIFT_RUNS:
            continue
        hours = np.array([(t - timed[0][0]).total_seconds() / 3600 for t, _ in timed])
        logs = np.log([v for _, v in timed])
        i, j = np.triu_indices(len(timed), 1)
        apart = hours[j] != hours[i]
        slopes.append((logs[j] - logs[i])[apart] / (hours[j] - hours[i])[apart])
        n = len(timed)
        variance += n * (n - 1) * (2 * n + 5) / 18
        kept += n
        spans.append(float(hours[-1]))
        series.append((hours, logs))
    if not slopes:
        return None
    ordered = np.sort(np.concatenate(slopes))
    slope = float(np.median(ordered))
    residuals = [logs - slope * hours - np.median(logs - slope * hours) for hours, logs in series]
    lagged = sum(float(np.sum(r[1:] * r[:-1])) for r in residuals)
    spread = sum(float(np.sum(r * r)) for r in residuals)
    r = min(0.9, max(0.0, lagged / spread)) if spread > 0 else 0.0
    reach = norm.ppf(1 - (1 - confidence) / 2) * math.sqrt(variance * (1 + r) / (1 - r))
    # Sen (1968): the M1-th smallest slope and the (M2 + 1)-th, M1 = (N - C) / 2 and M2 = (N + C) / 2 (0-based here)
    low, high = round((ordered.size - reach) / 2) - 1, round((ordered.size + reach) / 2)
    if low < 0 or high >= ordered.size:
        return None
    return Drift(
        per_hour=math.expm1(slope),
        low=math.expm1(float(ordered[low])),
        high=math.expm1(float(ordered[high])),
        confidence=confidence,
        configurations=len(slopes),
        runs=kept,
        hours=float(np.median(spans)),
    )
