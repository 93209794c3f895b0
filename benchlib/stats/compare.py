"""Comparing configurations soundly (METHODS.md A2, A3, G1, G2, G3b).

The experimental unit is the run: every function here takes one value per
run (IOPS, bandwidth, mean latency of that run), never per-second samples and
never the VMs of one run. Every comparison is of ``new`` against ``base`` (the
baseline): a positive change, shift or δ means ``new`` is higher. Randomness only
through an explicit ``numpy.random.Generator`` (the bootstrap functions; the
comparison table itself is exact and needs none).

A comparison's verdict says only what its design can support (G3b):

* ``improved`` / ``regressed``: significant after the family's correction, and the
  interval of the change lies outside the practical band;
* ``equivalent``: the interval lies inside the band;
* ``inconclusive``: neither;
* ``not testable at this n``: even the most extreme data could not reach α after
  the correction (the smallest attainable p says why, and how many runs would do);
* ``descriptive only``: one run per configuration: no test, no interval;
* ``rate-capped``: every run on both sides ran under a rate cap (the frame's ``rate_capped``
  column): the totals are what the cap allowed, so the row measures the cap, not the factor. It
  gets no p, no effect, and is not in the family the correction counts;
* ``confounded with time``: it would be improved, regressed or equivalent, but its two sides ran in
  blocks of time (:mod:`benchlib.stats.order`), so a drift over time would read the same.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy import optimize, stats

from benchlib.stats.design import LAG_FROM, min_p, runs_to_test
from benchlib.stats.order import sides_in_time
from benchlib.stats.sequential import Looks

#: Below this many runs no 95% order-statistic interval for the median exists.
MIN_RUNS_FOR_MEDIAN_CI = 6
#: Exact Mann–Whitney p (ties included) while both sides have at most this many runs: benchstat's limit
#: without ties (with ties it stops at 25; the exact distribution with ties costs milliseconds at 50 here).
EXACT_LIMIT = 50
#: The verdicts of :func:`comparison_table`.
VERDICTS = (
    "improved",
    "regressed",
    "equivalent",
    "inconclusive",
    "not testable at this n",
    "descriptive only",
    "rate-capped",
    "confounded with time",
)
#: the verdicts of rows no test was made for: no p, no effect, no delta
UNTESTED = ("not testable at this n", "descriptive only", "rate-capped")


@dataclass(frozen=True)
class MedianCI:
    """A median with its exact, distribution-free confidence interval [x_(j), x_(k)]."""

    median: float
    low: float | None
    high: float | None
    j: int | None
    k: int | None
    level: float | None


def median_ci(values: np.ndarray | list[float], confidence: float = 0.95) -> MedianCI:
    """Median with the exact order-statistic interval (Le Boudec 2010, Thm 2.1).

    The interval is [x_(j), x_(k)] (1-based order statistics) with the
    narrowest symmetric ranks such that P(j <= rank of the median < k) under
    Binomial(n, 1/2) is at least ``confidence``. None exists for n <= 5 at 95%;
    then ``low``/``high`` are None.
    """
    x = np.sort(np.asarray(values, dtype=float))
    n = len(x)
    median = float(np.median(x))
    best = None
    for j in range(n // 2, 0, -1):
        k = n + 1 - j
        level = stats.binom.cdf(k - 1, n, 0.5) - stats.binom.cdf(j - 1, n, 0.5)
        if level >= confidence:
            best = (j, k, float(level))
            break
    if best is None:
        return MedianCI(median, None, None, None, None, None)
    j, k, level = best
    return MedianCI(median, float(x[j - 1]), float(x[k - 1]), j, k, level)


def mann_whitney(x: np.ndarray | list[float], y: np.ndarray | list[float]) -> tuple[float, float]:
    """Two-sided Mann–Whitney U of x against y: ``(U_x, p)``.

    As benchstat: exact p, ties included, while both sides have at most
    ``EXACT_LIMIT`` runs (the exact conditional distribution of the rank sum
    given the ties, counted by dynamic programming, so 25 + 25 runs cost
    milliseconds); the normal approximation with tie and continuity
    corrections beyond. Two-sided p = min(1, 2·min(P(U ≤ u), P(U ≥ u))).
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    _check_values(x, "x")
    _check_values(y, "y")
    if max(len(x), len(y)) > EXACT_LIMIT:
        result = stats.mannwhitneyu(x, y, alternative="two-sided", method="asymptotic")
        return float(result.statistic), float(result.pvalue)
    return _exact_u(x, y)


def _check_values(values: np.ndarray, name: str) -> None:
    if len(values) == 0:
        raise ValueError(f"{name}: no values (one value per run is needed)")
    if not np.isfinite(values).all():
        raise ValueError(
            f"{name}: {int((~np.isfinite(values)).sum())} value(s) are NaN or infinite; a run without "
            "a value must be left out, not compared"
        )


def _u_distribution(n1: int, n2: int) -> np.ndarray:
    """Return P(U = u) for u = 0..n1·n2 under no difference and no ties (U: pairs with the x above the y).

    The values are placed in increasing order; an x placed when k x's and r - 1 - k y's
    are below it adds r - 1 - k to U. Vectorised over U, so 50 + 50 runs take milliseconds.
    """
    total = n1 * n2
    ways = np.zeros((n1 + 1, total + 1))
    ways[0, 0] = 1.0
    for r in range(1, n1 + n2 + 1):
        for k in range(min(r - 1, n1 - 1), max(-1, r - 2 - n2), -1):  # k x's below; at most n2 y's below
            below = r - 1 - k
            ways[k + 1, below:] += ways[k, : total + 1 - below]
    return ways[n1] / ways[n1].sum()


def shift_interval(
    base: np.ndarray | list[float], new: np.ndarray | list[float], confidence: float = 0.95
) -> tuple[float, float | None, float | None]:
    """Return the Hodges–Lehmann ratio of ``new`` to ``base`` with its exact distribution-free interval.

    On the log scale (so the change is a ratio, as a percent change is): the
    estimate is the median of the pairwise ``log(new_j) - log(base_i)``, the
    interval Moses' ``[D_(c+1), D_(N-c)]`` with ``c`` the largest count that
    ``P(U <= c) <= (1 - confidence) / 2`` allows (Hollander & Wolfe, ch. 4.3). Exact
    for any continuous distribution that differs only by a factor; no resampling, so
    the same runs give the same interval in any order. ``(ratio, None, None)`` when
    no interval at this confidence exists with so few runs (then neither can the
    test reject), or when a value is not positive.
    """
    base, new = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    _check_values(base, "baseline")
    _check_values(new, "new")
    if (base <= 0).any() or (new <= 0).any():
        return float(np.median(new) / np.median(base)), None, None
    differences = np.sort((np.log(new)[None, :] - np.log(base)[:, None]).ravel())
    estimate = float(np.exp(np.median(differences)))
    cdf = np.cumsum(_u_distribution(len(base), len(new)))
    allowed = np.flatnonzero(cdf <= (1 - confidence) / 2 + 1e-12)
    if len(allowed) == 0:
        return estimate, None, None
    c = int(allowed[-1])
    return estimate, float(np.exp(differences[c])), float(np.exp(differences[len(differences) - c - 1]))


def _exact_u(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    n1 = len(x)
    doubled = np.rint(2 * stats.rankdata(np.concatenate([x, y]))).astype(np.int64)  # midranks x 2: integers
    observed = int(doubled[:n1].sum())
    top = int(np.sort(doubled)[-n1:].sum())
    ways = np.zeros((n1 + 1, top + 1))  # ways[k, s]: subsets of k items whose doubled ranks sum to s
    ways[0, 0] = 1.0
    for value in doubled:
        ways[1:, value:] = ways[1:, value:] + ways[:-1, : top + 1 - value]
    distribution = ways[n1] / ways[n1].sum()
    below = distribution[: observed + 1].sum()
    above = distribution[observed:].sum()
    u = observed / 2 - n1 * (n1 + 1) / 2
    return float(u), float(min(1.0, 2 * min(below, above)))


def cliffs_delta(base: np.ndarray | list[float], new: np.ndarray | list[float]) -> float:
    """Return Cliff's δ of ``new`` against ``base``: P(new > base) − P(new < base), in [−1, 1]."""
    base, new = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    return float(np.sign(new[None, :] - base[:, None]).mean())


def cliffs_delta_interval(
    base: np.ndarray | list[float], new: np.ndarray | list[float], confidence: float = 0.95
) -> tuple[float, float | None, float | None]:
    """Return Cliff's δ of ``new`` against ``base`` with Cliff's (1996) asymmetric interval.

    The consistent variance estimate of δ from the dominance matrix, and the
    interval ``(δ − δ³ ± z·s·√((1 − δ²)² + z²s²)) / (1 − δ² + z²s²)`` (as R's
    ``effsize::cliff.delta``); None below 2 runs per side. Where every pair of runs compares alike (complete
    separation, δ = ±1, or every run tied) that variance is 0 and Cliff's interval a point, which covered a
    true +10% change 65% of the time at 5 runs a side: there the interval is Newcombe's (2006, method 5)
    score interval for P(new > base), as δ (:func:`_dominance_score_interval`).
    """
    base, new = np.sort(np.asarray(base, dtype=float)), np.sort(np.asarray(new, dtype=float))  # sums in one order
    dominance = np.sign(new[None, :] - base[:, None])  # rows: base runs, columns: new runs
    delta = float(dominance.mean())
    n1, n2 = dominance.shape
    if n1 < 2 or n2 < 2:
        return delta, None, None
    by_base, by_new = dominance.mean(axis=1), dominance.mean(axis=0)
    s_base = ((by_base - delta) ** 2).sum() / (n1 - 1)
    s_new = ((by_new - delta) ** 2).sum() / (n2 - 1)
    s_all = ((dominance - delta) ** 2).sum() / ((n1 - 1) * (n2 - 1))
    variance = max(((n2 - 1) * s_base + (n1 - 1) * s_new + s_all) / (n1 * n2), 0.0)
    z = stats.norm.ppf(1 - (1 - confidence) / 2)
    if variance == 0:  # every pair alike: Cliff's interval is a point, whatever the runs
        low, high = _dominance_score_interval((delta + 1) / 2, n1, n2, z)
        return delta, 2 * low - 1, 2 * high - 1
    spread = z * math.sqrt(variance) * math.sqrt((1 - delta**2) ** 2 + z**2 * variance)
    scale = 1 - delta**2 + z**2 * variance
    low, high = (delta - delta**3 - spread) / scale, (delta - delta**3 + spread) / scale
    return delta, float(max(-1.0, low)), float(min(1.0, high))


def _dominance_score_interval(theta: float, m: int, n: int, z: float) -> tuple[float, float]:
    """Return Newcombe's (2006) method-5 score interval for θ = P(new > base) + P(tie)/2, observed ``theta``.

    Every θ' with ``(theta − θ')² ≤ z²·V(θ')``, where ``V(θ') = θ'(1 − θ')/(mn) · (1 + (N* − 1)((1 − θ')/(2 − θ')
    + θ'/(1 + θ')))`` and ``N* = (m + n)/2 − 1``: the variance is taken at the θ' tested, so an observed 0 or 1
    still has an interval (at 5 runs a side, complete separation gives δ from 0.378 to 1).
    """

    def outside(t: float) -> float:
        share = (1 - t) / (2 - t) + t / (1 + t)
        return (theta - t) ** 2 - z**2 * t * (1 - t) / (m * n) * (1 + ((m + n) / 2 - 2) * share)

    tiny = 1e-12
    low = 0.0 if theta <= 0 else optimize.brentq(outside, tiny, theta if theta < 1 else 1 - 1e-9)
    high = 1.0 if theta >= 1 else optimize.brentq(outside, theta if theta > 0 else 1e-9, 1 - tiny)
    return float(low), float(high)


def cliffs_magnitude(delta: float) -> str:
    """Hess & Kromrey's words for |δ|: negligible, small, medium, large."""
    size = abs(delta)
    return "negligible" if size < 0.147 else "small" if size < 0.33 else "medium" if size < 0.474 else "large"


def hodges_lehmann(base: np.ndarray | list[float], new: np.ndarray | list[float]) -> float:
    """Return the Hodges–Lehmann shift of ``new`` against ``base``: the median of all differences new_j − base_i."""
    base, new = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    return float(np.median(new[None, :] - base[:, None]))


def ratio_of_medians_ci(
    old: np.ndarray | list[float],
    new: np.ndarray | list[float],
    *,
    rng: np.random.Generator,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """Return median(new) / median(old) with a percentile bootstrap interval.

    Each group is resampled independently, all resamples at once (no Python
    loop over resamples). Returns ``(ratio, low, high)``; ``low`` and ``high``
    are None when the runs allow fewer than ``MIN_DISTINCT_RESAMPLES`` different
    resamples. The values are sorted first, so row order does not move it.
    """
    old, new = np.sort(np.asarray(old, dtype=float)), np.sort(np.asarray(new, dtype=float))  # any row order
    ratio = float(np.median(new) / np.median(old))
    if distinct_resamples(len(old)) * distinct_resamples(len(new)) < MIN_DISTINCT_RESAMPLES:
        return ratio, None, None  # too few different resamples for a percentile interval to mean its level
    low, high = _bootstrap_ratio(old, new, np.median, rng=rng, n_resamples=n_resamples, confidence=confidence)
    return ratio, low, high


#: Fewer distinct bootstrap resamples than this and a 95% percentile interval is not drawn
#: (at 3 runs a side there are 10 × 10 = 100; its "95%" interval covered 91% in simulation).
MIN_DISTINCT_RESAMPLES = 1000


def distinct_resamples(n: int) -> int:
    """Return how many different resamples (multisets) of ``n`` values a bootstrap can draw: C(2n − 1, n)."""
    return math.comb(2 * n - 1, n)


def _bootstrap_ratio(
    base: np.ndarray,
    new: np.ndarray,
    reduce: Callable[..., np.ndarray],
    *,
    rng: np.random.Generator,
    n_resamples: int,
    confidence: float,
) -> tuple[float, float]:
    """Return the percentile interval of ``reduce(new*) / reduce(base*)``.

    Each group is resampled on its own, all resamples at once.
    """
    base_star = reduce(base[rng.integers(0, len(base), size=(n_resamples, len(base)))], axis=1)
    new_star = reduce(new[rng.integers(0, len(new), size=(n_resamples, len(new)))], axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(new_star / base_star, [tail, 1 - tail])
    return float(low), float(high)


# ---------------------------------------------------------------- Criterion.rs's comparison (METHODS.md A4)


def _welch_t(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Welch's t of y against x along the last axis (the statistic Criterion bootstraps)."""
    mean_x, mean_y = x.mean(axis=-1), y.mean(axis=-1)
    var_x, var_y = x.var(axis=-1, ddof=1), y.var(axis=-1, ddof=1)
    return (mean_y - mean_x) / np.sqrt(var_x / x.shape[-1] + var_y / y.shape[-1])


def mixed_bootstrap_t(
    base: np.ndarray | list[float],
    new: np.ndarray | list[float],
    *,
    rng: np.random.Generator,
    n_resamples: int = 100_000,
) -> tuple[float, float]:
    """Criterion's test: Welch's t of ``new`` against ``base`` and its p from a mixed bootstrap.

    Both samples are pooled, resampled with replacement and split back into
    groups of the original sizes, which draws t under "no difference";
    ``p = 2 * min(#{t* < t}, #{t* >= t}) / N``. All resamples at once.
    """
    base, new = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    if len(base) < 2 or len(new) < 2:
        raise ValueError("the mixed bootstrap needs at least 2 runs on each side")
    t = float(_welch_t(base, new))
    pooled = np.concatenate([base, new])
    draws = pooled[rng.integers(0, len(pooled), size=(n_resamples, len(pooled)))]
    t_star = _welch_t(draws[:, : len(base)], draws[:, len(base) :])
    t_star = t_star[np.isfinite(t_star)]
    below = int((t_star < t).sum())
    return t, 2 * min(below, len(t_star) - below) / len(t_star)


def relative_change_ci(
    base: np.ndarray | list[float],
    new: np.ndarray | list[float],
    *,
    rng: np.random.Generator,
    statistic: str = "mean",
    n_resamples: int = 100_000,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """Return ``new / base - 1`` of the mean (or median) with a percentile bootstrap interval.

    Each group is resampled on its own.
    """
    base, new = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    reduce = np.mean if statistic == "mean" else np.median
    low, high = _bootstrap_ratio(base, new, reduce, rng=rng, n_resamples=n_resamples, confidence=confidence)
    return float(reduce(new) / reduce(base) - 1), low - 1, high - 1


def change_verdict(
    low: float, high: float, p: float, *, noise: float = 0.01, alpha: float = 0.05, lower_is_better: bool = True
) -> str:
    """Criterion's verdict on a relative change with interval ``[low, high]`` and test p.

    ``p >= alpha``: "no change"; an interval wholly beyond the noise band on the
    good side: "improved", on the bad side: "regressed"; anything else "within
    noise". Criterion measures time (lower is better); for IOPS or bandwidth
    pass ``lower_is_better=False``.
    """
    if p >= alpha:
        return "no change"
    if high < -noise:
        return "improved" if lower_is_better else "regressed"
    if low > noise:
        return "regressed" if lower_is_better else "improved"
    return "within noise"


def throughput_change(time_change: float) -> float:
    """Return a relative change of time per operation as the relative change of throughput: ``1 / (1 + dt) - 1``."""
    return 1 / (1 + time_change) - 1


def holm(p_values: np.ndarray | list[float]) -> np.ndarray:
    """Holm step-down adjusted p-values (family-wise error), in the input order."""
    p = np.asarray(p_values, dtype=float)
    m = len(p)
    order = np.argsort(p)
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adjusted
    return out


def benjamini_hochberg(p_values: np.ndarray | list[float]) -> np.ndarray:
    """Benjamini–Hochberg step-up adjusted p-values (false discovery rate), in the input order."""
    return stats.false_discovery_control(np.asarray(p_values, dtype=float), method="bh")


def runs_needed(
    values: np.ndarray | list[float], *, relative_error: float = 0.05, confidence: float = 0.95, most: int = 100_000
) -> int:
    """Return the runs needed for the mean's CI half-width to be ``relative_error`` of the mean.

    Hoefler & Belli: the smallest n >= 2 with n >= (s·t(n−1)/(e·x̄))², using the observed spread of
    ``values`` (at least 2 of them, with a positive mean). ``most`` caps the search.
    """
    x = np.asarray(values, dtype=float)
    if len(x) < 2 or not np.all(np.isfinite(x)) or x.mean() <= 0:
        raise ValueError("runs_needed: give at least 2 finite values with a positive mean")
    cv = x.std(ddof=1) / x.mean()
    n = np.arange(2, most + 1)
    t = stats.t.ppf(0.5 + confidence / 2, n - 1)
    enough = n >= (cv * t / relative_error) ** 2
    return int(n[np.argmax(enough)]) if enough.any() else most


@dataclass(frozen=True)
class TwoLevelPlan:
    """How to spend a benchmark's time over two levels: iterations within a run, and runs (KJ13, Eq. 3)."""

    #: iterations per run that minimise the cost of a given precision
    iterations_per_run: int
    #: runs for the mean's interval half-width to be the asked fraction of the mean
    runs: int
    #: T1² (variance among iterations within a run) and T2² (what runs add beyond it), in the value's unit squared
    within_variance: float
    between_variance: float
    #: whether runs add variance beyond their iterations (T2² > 0); where not, iterations are kept as they are
    runs_add_variance: bool
    #: what one run costs, in iterations (``cost_of_run / cost_of_iteration``)
    cost_ratio: float


def plan_two_levels(
    frame: pl.DataFrame,
    value: str,
    *,
    run: str = "run_id",
    cost_of_run: float,
    cost_of_iteration: float,
    relative_error: float = 0.05,
    confidence: float = 0.95,
    min_runs: int = 5,
) -> TwoLevelPlan:
    """Return Kalibera & Jones' plan for a two-level experiment from a dimensioning study.

    ``frame`` holds one row per iteration (a per-second sample, an inner
    repetition) with its ``run``. ``T1² = S1²`` (pooled variance within runs),
    ``T2² = S2² − S1²/n1`` (variance of run means beyond what n1 iterations
    explain); iterations per run ``r1 = ⌈√((c_run/c_iteration) · T1²/T2²)⌉``; then
    the runs for the interval of the mean, ``t · √((T2² + T1²/r1)/r2) ≤ e · mean``,
    at least ``min_runs`` (KJ recommend 5 top-level repetitions). Iterations must
    be independent (check the lag-1 autocorrelation, :mod:`benchlib.stats.steady`):
    per-second samples of one run usually are not.
    """
    per_run = frame.group_by(run).agg(
        pl.col(value).mean().alias("mean"), pl.col(value).var(ddof=1).alias("var"), pl.len().alias("n")
    )
    if per_run.height < 2 or per_run["n"].min() < 2:
        raise ValueError(f"{value}: a dimensioning study needs at least 2 runs of at least 2 iterations each")
    within = float(((per_run["n"] - 1) * per_run["var"]).sum() / (per_run["n"] - 1).sum())
    iterations = float(per_run["n"].mean())
    between = float(per_run["mean"].var(ddof=1)) - within / iterations
    mean = float(per_run["mean"].mean())
    adds = between > 0
    if not adds:  # more iterations per run buy precision as well as more runs: they are kept as they are
        r1 = int(per_run["n"].max())
        between = 0.0
    else:
        r1 = max(1, math.ceil(math.sqrt(cost_of_run / cost_of_iteration * within / between)))
    variance = between + within / r1
    runs = max(min_runs, 2)
    for _ in range(1000):
        t = stats.t.ppf(1 - (1 - confidence) / 2, runs - 1)
        if t * math.sqrt(variance / runs) <= relative_error * abs(mean):
            break
        runs += 1
    return TwoLevelPlan(r1, runs, within, between, adds, cost_of_run / cost_of_iteration)


def two_level_table(
    frame: pl.DataFrame,
    value: str,
    *,
    by: list[str],
    run: str = "run",
    cost_of_run: float,
    cost_of_iteration: float = 1.0,
    relative_error: float = 0.05,
    confidence: float = 0.95,
) -> pl.DataFrame:
    """Return :func:`plan_two_levels` for every group of ``by``: whether to run longer or more often.

    ``frame``: one row per iteration (a per-second sample of a run's total) with its ``run``. Groups
    with fewer than 2 runs of 2 iterations get no plan and say so. ``lag1`` is the mean lag-1
    autocorrelation of the iterations within a run: KJ's plan assumes independent iterations, and
    per-second samples seldom are (positive ``lag1`` makes the plan ask for too few runs).

    Columns: ``by``, ``runs_now``, ``iterations_now`` (mean per run), ``within_variance``,
    ``between_variance``, ``iterations_per_run``, ``runs``, ``lag1``, ``cost_ratio``, ``runs_add_variance``
    and ``check``: ``"too few runs"`` (no plan), ``"too few iterations"`` (under :data:`LAG_FROM` a run: their
    independence cannot be checked, a first plan), ``"autocorrelated"`` (lag-1 r over 0.2: the runs are a
    lower bound) or null (:func:`benchlib.words.compare.two_level_notes` says them).
    """
    rows = []
    for key, group in frame.sort([*by, run]).group_by(by, maintain_order=True):
        where = dict(zip(by, key, strict=True))
        per_run = [g[value].to_numpy() for _, g in group.group_by(run, maintain_order=True)]
        lags = [
            float(np.corrcoef(x[:-1], x[1:])[0, 1])
            for x in per_run
            if len(x) >= LAG_FROM and x[:-1].std() and x[1:].std()
        ]
        out = {
            **where,
            "runs_now": len(per_run),
            "iterations_now": float(np.mean([len(x) for x in per_run])),
            "lag1": float(np.mean(lags)) if lags else None,
        }
        try:
            plan = plan_two_levels(
                group,
                value,
                run=run,
                cost_of_run=cost_of_run,
                cost_of_iteration=cost_of_iteration,
                relative_error=relative_error,
                confidence=confidence,
            )
        except ValueError:  # fewer than 2 runs of 2 iterations
            rows.append(
                out
                | {
                    "within_variance": None,
                    "between_variance": None,
                    "iterations_per_run": None,
                    "runs": None,
                    "cost_ratio": None,
                    "runs_add_variance": None,
                    "check": "too few runs",
                }
            )
            continue
        check = None
        if out["iterations_now"] < LAG_FROM:
            check = "too few iterations"
        elif out["lag1"] is not None and out["lag1"] > 0.2:
            check = "autocorrelated"
        rows.append(
            out
            | {
                "within_variance": plan.within_variance,
                "between_variance": plan.between_variance,
                "iterations_per_run": plan.iterations_per_run,
                "runs": plan.runs,
                "cost_ratio": plan.cost_ratio,
                "runs_add_variance": plan.runs_add_variance,
                "check": check,
            }
        )
    return pl.DataFrame(rows)


def _describe(values: np.ndarray) -> tuple[float, float | None]:
    """Median and benchstat's ± (the larger relative distance to the interval's ends), if an interval exists."""
    ci = median_ci(values)
    if ci.low is None or ci.high is None or ci.median == 0:
        return ci.median, None
    return ci.median, max(ci.high / ci.median - 1, 1 - ci.low / ci.median)


def _higher_is_better(value: str) -> bool:
    """Throughput is better higher; latency, time and CPU lower; work per CPU higher, CPU cycles per I/O lower."""
    if "_per_cpu" in value:  # iops_per_cpu_pct: I/Os for each percent of a CPU, an efficiency
        return True
    if "cycles" in value:  # cycles_per_io: CPU spent on each I/O
        return False
    return not any(part in value for part in ("lat", "_ns", "_ms", "_us", "cpu", "time"))


def comparison_table(
    frame: pl.DataFrame,
    value: str,
    *,
    factor: str,
    baseline: str,
    by: list[str] | None = None,
    alpha: float = 0.05,
    band: float = 0.02,
    higher_is_better: bool | None = None,
    confidence: float = 0.95,
    run: str = "run_unit",
    time: str = "start_time",
    looks: Looks | None = None,
) -> pl.DataFrame:
    """Return a benchstat-style comparison of ``value`` between levels of ``factor``, per ``by`` group.

    Parameters
    ----------
    frame
        One row per run (the experimental unit: one invocation across all its
        hosts, never a VM of one): the ``value`` column and the factor columns;
        optionally ``rate_capped`` (:func:`benchlib.views.run_totals`): a comparison
        whose every run on both sides was capped is ``rate-capped``, outside the family.
    value
        What to compare (IOPS, bandwidth, latency).
    factor, baseline
        The factor whose levels are compared, and the level the others are compared with.
    by
        The other factors: one comparison per combination of their levels.
    alpha
        Significance level, for Holm-adjusted p over the whole table: the family
        is every comparison in the table but the rate-capped ones, and the table says so.
    band
        Practical band: a change within ±``band`` (a fraction) is no practical
        change; ``equivalent`` needs the whole interval inside it, ``improved`` or
        ``regressed`` the whole interval outside.
    higher_is_better
        Whether a higher ``value`` is an improvement (default: from the name;
        latency, time and CPU are better lower).
    confidence
        Of the intervals (the change's, Cliff's δ's, the medians').
    run
        The column naming each row's run, where the frame has it (:func:`benchlib.views.run_totals` gives
        ``run_unit``): a run with several rows in one group (its VMs, or its phases pooled) is refused,
        since a run's members are not replicates and would make p too small.
    time
        The column of each run's start time, where the frame has it (:func:`benchlib.views.run_totals` gives
        ``start_time``): each row's ``order`` (:func:`benchlib.stats.order.sides_in_time`: ``in blocks``,
        ``mixed``, or None where a time is missing). A row whose sides ran in blocks cannot tell a drift over
        time from the change: an *improved*, *regressed* or *equivalent* it would have is *confounded with
        time*.
    looks
        Where the runs were repeated until the comparisons settled (:mod:`benchlib.stats.sequential`): each
        verdict rests on the row's repeated confidence interval, at the nominal level ``look_level`` its look
        may spend (the family's α split evenly, O'Brien–Fleming-type spending over the looks), not on the
        Holm-adjusted p, which assumes the runs were not counted while they came in. The look is at the
        fewer side's n runs: each side's first n in the order run (``time``), as the runner judged it.

    Returns
    -------
    polars.DataFrame
        One row per group and non-baseline level, sorted by the group: runs on
        each side; medians with benchstat's ± (``*_ci_pct``, None below 6 runs);
        ``median_change_pct`` and ``delta`` (benchstat's ``~`` or ``%+.2f%%``);
        the change ``change_pct`` (Hodges–Lehmann ratio of new to baseline, in
        percent) with its exact interval ``ratio_low``/``ratio_high``;
        Mann–Whitney ``u``, ``p``, ``p_holm``, the smallest attainable ``p_min``
        and the ``family`` size; Cliff's δ with ``cliffs_low``/``cliffs_high``
        and its ``effect`` word (``negligible`` where the row is equivalent; none where no test was made);
        ``hodges_lehmann`` (the shift in the value's unit); ``verdict`` (see the
        module documentation); ``alpha`` and ``band`` as given (:func:`benchlib.words.compare.verdict_note`
        says what the design can say of each row).

    Raises
    ------
    ValueError
        When the baseline is not a level of the factor (the message names the
        levels), a column is missing, a value is NaN or infinite, or a run has several rows in one group.

    """
    by = by or []
    missing = [c for c in (value, factor, *by) if c not in frame.columns]
    if missing:
        raise ValueError(f"no column {', '.join(map(repr, missing))}; the frame has {', '.join(frame.columns)}")
    if run in frame.columns:
        repeated = frame.group_by(run, factor, *by).len().filter(pl.col("len") > 1).sort(run)  # the first named
        if repeated.height:
            raise ValueError(
                f"{run} {repeated[run][0]!r} has {repeated['len'][0]} rows in one comparison group: a comparison "
                "takes one value per run (its VMs are not replicates; stonewalled phases go in by as 'phase'); "
                "add each run's rows up first (benchlib.views.run_totals)"
            )
    levels = frame[factor].drop_nulls().unique().sort().to_list()
    if baseline not in levels:
        raise ValueError(f"baseline {baseline!r} is not a level of {factor}; its levels: {', '.join(map(str, levels))}")
    better = _higher_is_better(value) if higher_is_better is None else higher_is_better
    rows, sides = [], []
    for key, group in frame.sort([*by, factor]).group_by(by or [pl.lit(0).alias("_all")], maintain_order=True):
        where = dict(zip(by, key, strict=False)) if by else {}
        # each level's runs, split once: a 1,000-configuration table filtered each group's rows per pair (6 s)
        side = {lv: rows_of for (lv,), rows_of in group.partition_by(factor, as_dict=True, maintain_order=True).items()}
        base = _values(side.get(baseline), value, factor, baseline, where)
        for level in [lv for lv in side if lv != baseline and lv is not None]:  # a run without the factor: none
            new = _values(side[level], value, factor, level, where)
            if looks is not None:  # the look: each side's first n runs (a shared baseline ran on for others)
                base, new = _at_look(side.get(baseline), side[level], value, time, base, new)
            if len(base) and len(new):
                capped = "rate_capped" in group.columns and bool(
                    pl.concat([side[baseline], side[level]])["rate_capped"].fill_null(False).all()
                )
                order = _order(side[baseline], side[level], value, time)
                rows.append(
                    {**where, factor: level, **_compare_pair(base, new, confidence), "rate_capped": capped} | order
                )
                sides.append((base, new))
    if not rows:
        return pl.DataFrame()
    table = pl.DataFrame(
        _with_band_intervals(rows, sides, confidence, looks), schema_overrides={"look_level": pl.Float64}
    )
    return _verdicts(table, alpha=alpha, band=band, better=better)


def _at_look(
    base_side: pl.DataFrame | None, new_side: pl.DataFrame, value: str, time: str, base: np.ndarray, new: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Return each side's first n runs, n the fewer side's count, in the order run (the rows' order without times).

    A comparison repeated until settled stops at a look of n runs a side; the baseline may run on for
    another comparison of the same factor, and its later runs are no part of this comparison's look.
    """
    n = min(len(base), len(new))

    def first(side: pl.DataFrame | None, values: np.ndarray) -> np.ndarray:
        if side is None or len(values) == n:
            return values
        kept = side.filter(pl.col(value).is_not_null())
        kept = kept.sort(time, nulls_last=True, maintain_order=True) if time in kept.columns else kept
        return kept[value].head(n).to_numpy().astype(float)

    return first(base_side, base), first(new_side, new)


def _with_band_intervals(
    rows: list[dict], sides: list[tuple], confidence: float, looks: Looks | None = None
) -> list[dict]:
    """Add the interval each row's band verdict rests on: ``band_low``, ``band_high``, ``band_confidence``.

    The band's verdicts are under the family's control too (Bonferroni): with m comparisons (the rate-capped
    ones left out) each rests on the interval at ``1 - (1 - confidence) / m``, the table's own where m is 1.
    With ``looks``, at ``1 - look_level``: the row's repeated confidence interval at its look.
    """
    family = max(1, sum(not row["rate_capped"] for row in rows))
    wider = 1 - (1 - confidence) / family
    for row, (base, new) in zip(rows, sides, strict=True):
        low, high, level, at = row["ratio_low"], row["ratio_high"], None, wider
        if looks is not None and not row["rate_capped"]:
            level = looks.level(len(base), len(new), family)
            at = 1 - level
        if at != confidence and not row["rate_capped"]:
            _, low, high = shift_interval(np.sort(base), np.sort(new), at)
        row |= {"band_low": low, "band_high": high, "band_confidence": at, "look_level": level}
    return rows


def _order(base: pl.DataFrame, new: pl.DataFrame, value: str, time: str) -> dict:
    """``order``: how the two sides' runs fell in time (:func:`benchlib.stats.order.sides_in_time`)."""
    if time not in base.columns:
        return {"order": None}
    times = [side.filter(pl.col(value).is_not_null())[time].to_list() for side in (base, new)]
    return {"order": sides_in_time(*times)}


def _values(side: pl.DataFrame | None, value: str, factor: str, level: object, where: dict) -> np.ndarray:
    """Return one side's values (its runs at ``level``; none where the group has no run of it)."""
    if side is None:
        return np.array([], dtype=float)
    values = side[value].drop_nulls().to_numpy().astype(float)
    if not np.isfinite(values).all():
        place = ", ".join(f"{k} {v}" for k, v in {**where, factor: level}.items())
        raise ValueError(
            f"{value} at {place}: NaN or infinite values; leave a run without a value out, do not compare it"
        )
    return values


def _compare_pair(base: np.ndarray, new: np.ndarray, confidence: float) -> dict:
    base, new = np.sort(base), np.sort(new)  # every sum in one order: the same runs in any row order, the same bits
    base_median, base_pct = _describe(base)
    new_median, new_pct = _describe(new)
    u, p = mann_whitney(new, base)
    ratio, low, high = shift_interval(base, new, confidence)
    delta, delta_low, delta_high = cliffs_delta_interval(base, new, confidence)
    return {
        "runs_baseline": len(base),
        "runs": len(new),
        "median_baseline": base_median,
        "median_baseline_ci_pct": None if base_pct is None else 100 * base_pct,
        "median": new_median,
        "median_ci_pct": None if new_pct is None else 100 * new_pct,
        "median_change_pct": 100 * (new_median / base_median - 1) if base_median else None,
        "change_pct": 100 * (ratio - 1),
        "ratio": ratio,
        "ratio_low": low,
        "ratio_high": high,
        "u": u,
        "p": p,
        "p_min": min_p(len(base), len(new)),
        "cliffs_delta": delta,
        "cliffs_low": delta_low,
        "cliffs_high": delta_high,
        "hodges_lehmann": hodges_lehmann(base, new),
    }


def _verdicts(table: pl.DataFrame, *, alpha: float, band: float, better: bool) -> pl.DataFrame:
    capped = table["rate_capped"].to_numpy()
    family = max(1, int((~capped).sum()))  # the capped rows test nothing: they do not dilute the others' alpha
    p_holm = np.full(table.height, np.nan)
    if (~capped).any():
        p_holm[~capped] = holm(table["p"].to_numpy()[~capped])
    table = table.with_columns(pl.Series("p_holm", p_holm).fill_nan(None), pl.lit(family).alias("family"))
    verdicts, effects, deltas = [], [], []
    for row in table.iter_rows(named=True):
        verdict = "rate-capped" if row["rate_capped"] else _verdict(row, alpha=alpha, band=band, better=better)
        if row.get("order") == "in blocks" and verdict in ("improved", "regressed", "equivalent"):
            verdict = "confounded with time"  # a drift over time would read the same
        verdicts.append(verdict)
        # negligible only where the interval shows it (equivalent): an inconclusive change inside the band may
        # still be one side's runs beating the other's in most pairs, which Cliff's δ then names
        inside = abs(row["ratio"] - 1) < band and verdict == "equivalent"
        effects.append("negligible" if inside else cliffs_magnitude(row["cliffs_delta"]))
        significant = verdict not in (*UNTESTED, "confounded with time") and (
            verdict in ("improved", "regressed") if row["look_level"] is not None else row["p_holm"] <= alpha
        )
        change = row["median_change_pct"]
        deltas.append(f"{change:+.2f}%" if significant and change is not None else "~")
    table = table.with_columns(
        pl.Series("delta", deltas),
        pl.Series("verdict", verdicts),
        pl.Series("effect", effects),
        pl.lit(alpha).alias("alpha"),
        pl.lit(band).alias("band"),
    )
    # one run each, or the cap's numbers: a p or an effect size would say nothing
    alone = pl.col("verdict").is_in(["descriptive only", "rate-capped"])
    table = table.with_columns(
        pl.when(~alone).then(pl.col(c)).alias(c) for c in ("p", "p_holm", "u", "cliffs_delta", "effect")
    )
    # an effect word beside a row no test could decide reads as a finding ("negligible": as if equivalent)
    return table.with_columns(pl.when(~pl.col("verdict").is_in(UNTESTED)).then(pl.col("effect")).alias("effect"))


def _verdict(row: dict, *, alpha: float, band: float, better: bool) -> str:
    """Return a comparison's verdict (METHODS.md G3b); :func:`benchlib.words.compare.verdict_note` says why."""
    if row["runs_baseline"] == 1 and row["runs"] == 1:
        return "descriptive only"
    sequential = row.get("look_level") is not None  # the look's interval decides: its level spent α already
    if (row["p_min"] > row["look_level"]) if sequential else min(1.0, row["family"] * row["p_min"]) > alpha:
        return "not testable at this n"
    low, high = row["band_low"], row["band_high"]  # at the family's confidence: a band claim is one of m
    if low is None or high is None:
        return "inconclusive"
    low, high = low - 1, high - 1
    above, below = _past(low, band), _past(-band, high)
    if (sequential or row["p_holm"] <= alpha) and (above or below):
        return "improved" if above == better else "regressed"
    if _past(low, -band) and _past(band, high):  # wholly inside: an end on the edge may be a change of the band
        return "equivalent"
    return "inconclusive"


def _past(value: float, edge: float) -> bool:
    """Return whether ``value`` lies beyond ``edge``, not on it.

    Runs a tool prints to a few digits give intervals whose ends fall on the band's edge (1020 / 1000) up to
    the last bit of a float: on the edge is not past it, however the division rounded.
    """
    return value > edge and not math.isclose(value, edge, rel_tol=1e-9, abs_tol=1e-12)


def summarised_verdicts(table: pl.DataFrame) -> set[str]:
    """Return the verdicts :func:`design_summary` explains in full, so the page need not say them again.

    Rate-capped rows always; *not testable at this n* and *descriptive only* when every tested row has it.
    """
    tested = table.filter(pl.col("verdict") != "rate-capped")["verdict"] if table.height else table
    said = {"rate-capped"}
    for verdict in ("not testable at this n", "descriptive only"):
        if len(tested) and (tested == verdict).all():
            said.add(verdict)
    return said


#: The most runs per side :func:`runs_to_settle` searches.
SETTLE_MOST = 1000
#: the chance of reaching the verdict :func:`runs_to_settle` plans for
SETTLE_POWER = 0.8
#: the one-sided confidence of the upper bound on the spread :func:`runs_to_settle` also plans with
SPREAD_BOUND = 0.8
#: the variance of the Hodges-Lehmann shift against the mean difference's, for normal runs (1 / (3/π), the
#: rank test's asymptotic relative efficiency): the comparison's interval is the rank test's, a little wider
_RANK_EFFICIENCY = math.pi / 3


def runs_for(
    spread: float,
    change: float,
    *,
    family: int = 1,
    alpha: float = 0.05,
    band: float = 0.02,
    power: float = SETTLE_POWER,
) -> tuple[int | None, str]:
    """Return the runs per side that reach a verdict with probability about ``power``, and the verdict sought.

    ``spread``: the runs' standard deviation on the log scale; ``change``: the true ratio's log. With n runs
    a side the change's estimate has standard error ``σ = spread·√(2/n)·√(π/3)`` (the rank estimate's, for
    normal runs) and its interval half-width ``t(2n−2, 1−α/(2m))·σ`` (m: the family; Holm's worst case).
    *improved*/*regressed* (``"outside"``, where ``|change|`` is past the band's edge ``b``) needs the
    interval clear of it: ``(t + z(power))·σ ≤ |change| − b``; *equivalent* (``"inside"``) needs it within
    both edges, two one-sided tests: ``(t + z((1 + power)/2))·σ ≤ b − |change|``. None where more than
    :data:`SETTLE_MOST` runs would be needed (the change near the band's edge, or the spread wide).
    """
    edge = math.log1p(band)
    goal = "outside" if abs(change) > edge else "inside"
    margin = abs(abs(change) - edge)
    z = stats.norm.ppf(power if goal == "outside" else (1 + power) / 2)
    n = np.arange(2, SETTLE_MOST + 1)
    sigma = spread * np.sqrt(2 / n) * math.sqrt(_RANK_EFFICIENCY)
    enough = (stats.t.ppf(1 - alpha / (2 * family), 2 * n - 2) + z) * sigma <= margin
    return (int(n[np.argmax(enough)]) if enough.any() else None), goal


def detectable_change(
    spread: float,
    runs: int,
    *,
    family: int = 1,
    alpha: float = 0.05,
    band: float = 0.02,
    power: float = SETTLE_POWER,
) -> float | None:
    """Return the smallest change (a fraction) ``runs`` a side show as improved or regressed with ``power``.

    The inverse of :func:`runs_for` for *improved*/*regressed*: the change ``c`` whose log clears the band's
    edge by ``(t(2n−2, 1−α/(2m)) + z(power))·σ``, ``σ = spread·√(2/n)·√(π/3)``. ``spread``: the runs' standard
    deviation on the log scale (about their CV). None with fewer than 2 runs a side, or where no p these runs
    allow can reach α after the family's correction (:func:`benchlib.stats.design.min_p`).
    """
    if runs < 2 or min(1.0, family * min_p(runs, runs)) > alpha:
        return None
    sigma = spread * math.sqrt(2 / runs) * math.sqrt(_RANK_EFFICIENCY)
    t = stats.t.ppf(1 - alpha / (2 * family), 2 * runs - 2)
    return math.expm1(math.log1p(band) + (t + stats.norm.ppf(power)) * sigma)


def runs_to_settle(
    frame: pl.DataFrame,
    value: str,
    *,
    factor: str,
    baseline: str,
    by: list[str] | None = None,
    alpha: float = 0.05,
    band: float = 0.02,
    power: float = SETTLE_POWER,
) -> pl.DataFrame:
    """Return, per comparison of :func:`comparison_table`, about how many runs per side would reach a verdict.

    A plan, not a promise: :func:`runs_for` with the spread and change these runs show, the runs per side
    that reach the verdict about ``power`` of the time if the spread and change stay as measured. The
    spread is the pooled standard deviation ``s`` of the logs of both sides' runs; the change ``d`` the log
    of the comparison's Hodges–Lehmann ratio. A few runs measure ``s`` loosely, so ``runs_high`` plans with
    its :data:`SPREAD_BOUND` upper confidence bound (χ² on the pooled degrees of freedom): between the two
    lies what a reader should expect. Both are at least what makes the exact test possible
    (:func:`runs_to_test`); None with ``reason`` when it cannot be said: one run per side gives no spread,
    or more than :data:`SETTLE_MOST` runs would be needed.

    Columns: ``by``, ``factor``, ``runs_baseline``, ``runs_now``, ``spread_pct`` (``s`` as a
    percentage), ``change_pct`` (``exp(d) − 1``), ``runs`` and ``runs_high`` (per side), ``power``,
    ``reason`` (``"rate-capped"``, ``"one run a side"``, or the verdict sought: ``"outside"`` or
    ``"inside"`` the band; ``runs`` None there: more than :data:`SETTLE_MOST`), ``floor`` (the runs that
    make the test possible) and ``band`` (:func:`benchlib.words.compare.settle_why` says them).
    """
    by = by or []
    table = comparison_table(frame, value, factor=factor, baseline=baseline, by=by, alpha=alpha, band=band)
    if table.is_empty():
        return pl.DataFrame()
    family = int(table["family"][0])
    floor = runs_to_test(family, alpha)
    rows = []
    for row in table.iter_rows(named=True):
        where = {k: row[k] for k in by}
        group = frame.filter(*(pl.col(k) == v for k, v in where.items()))
        base = np.log(_values(group.filter(pl.col(factor) == baseline), value, factor, baseline, where))
        new = np.log(_values(group.filter(pl.col(factor) == row[factor]), value, factor, row[factor], where))
        sides = [x for x in (base, new) if len(x) >= 2]
        out = {**where, factor: row[factor], "runs_baseline": len(base), "runs_now": len(new)}
        unknown = {"spread_pct": None, "change_pct": None, "runs": None, "runs_high": None}
        unknown |= {"power": power, "floor": floor, "band": band}
        if row["verdict"] == "rate-capped":  # more runs would measure the cap again
            rows.append(out | unknown | {"reason": "rate-capped"})
            continue
        if not sides:  # no spread to plan from
            rows.append(out | unknown | {"reason": "one run a side"})
            continue
        df = sum(len(x) - 1 for x in sides)
        s = math.sqrt(sum((len(x) - 1) * x.var(ddof=1) for x in sides) / df)
        s_high = s * math.sqrt(df / stats.chi2.ppf(1 - SPREAD_BOUND, df))
        d = math.log(row["ratio"])  # the table's own estimate (Hodges-Lehmann), so both tables show one change
        plan = {"family": family, "alpha": alpha, "band": band, "power": power}
        found, reason = runs_for(s, d, **plan)
        high, _ = runs_for(s_high, d, **plan)
        rows.append(
            out
            | {
                "spread_pct": 100 * s,
                "change_pct": 100 * math.expm1(d),
                "runs": None if found is None else max(found, floor),
                "runs_high": None if found is None or high is None else max(high, floor),
                "reason": reason,
                "power": power,
                "floor": floor,
                "band": band,
            }
        )
    return pl.DataFrame(rows, schema_overrides={"runs": pl.Int64, "runs_high": pl.Int64})


def geomean_row(table: pl.DataFrame) -> dict[str, float | None]:
    """Return benchstat's bottom row: the geometric means of the baseline and new medians, and their change."""
    if table.is_empty() or (table["median_baseline"] <= 0).any() or (table["median"] <= 0).any():
        return {"median_baseline": None, "median": None, "change_pct": None}
    base = float(np.exp(np.log(table["median_baseline"].to_numpy()).mean()))
    new = float(np.exp(np.log(table["median"].to_numpy()).mean()))
    return {"median_baseline": base, "median": new, "change_pct": 100 * (new / base - 1)}


def comparison_matrix(table: pl.DataFrame, *, rows: str, columns: str, cell: str = "delta") -> pl.DataFrame:
    """Return a comparison table laid out benchstat-style: one factor down, another across.

    ``table`` is the output of :func:`comparison_table` grouped by at least
    ``rows`` and ``columns``; each cell shows ``cell`` (``delta`` by default:
    ``~`` or ``+x.xx%``). Rows and columns are sorted.
    """
    wide = table.sort(rows, columns).pivot(on=columns, index=rows, values=cell, aggregate_function="first")
    ordered = sorted(c for c in wide.columns if c != rows)
    return wide.select(rows, *ordered).sort(rows)
