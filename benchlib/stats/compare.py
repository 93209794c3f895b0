"""Comparing configurations soundly (METHODS.md A2, A3, G1, G2).

The experimental unit is the run: every function here takes one value per
run (IOPS, bandwidth, mean latency of that run), never per-second samples.
Randomness only through an explicit ``numpy.random.Generator``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy import stats

#: Below this many runs per side the Mann–Whitney test cannot reach p < 0.05 (benchstat).
MIN_RUNS_FOR_TEST = 4
#: Below this many runs no 95% order-statistic interval for the median exists.
MIN_RUNS_FOR_MEDIAN_CI = 6
#: Exact (permutation) Mann–Whitney p up to this many runs per side, as benchstat does with ties.
EXACT_LIMIT = 25


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
    if max(len(x), len(y)) > EXACT_LIMIT:
        result = stats.mannwhitneyu(x, y, alternative="two-sided", method="asymptotic")
        return float(result.statistic), float(result.pvalue)
    return _exact_u(x, y)


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


def cliffs_delta(x: np.ndarray | list[float], y: np.ndarray | list[float]) -> float:
    """Cliff's δ = P(X > Y) − P(X < Y), in [−1, 1]."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    diff = np.sign(x[:, None] - y[None, :])
    return float(diff.mean())


def cliffs_magnitude(delta: float) -> str:
    """Hess & Kromrey's words for |δ|: negligible, small, medium, large."""
    size = abs(delta)
    return "negligible" if size < 0.147 else "small" if size < 0.33 else "medium" if size < 0.474 else "large"


def hodges_lehmann(x: np.ndarray | list[float], y: np.ndarray | list[float]) -> float:
    """Hodges–Lehmann shift of y against x: the median of all pairwise differences y_j − x_i."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    return float(np.median(y[None, :] - x[:, None]))


def ratio_of_medians_ci(
    old: np.ndarray | list[float],
    new: np.ndarray | list[float],
    *,
    rng: np.random.Generator,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """median(new) / median(old) with a percentile bootstrap interval.

    Each group is resampled independently, all resamples at once (no Python
    loop over resamples). Returns ``(ratio, low, high)``.
    """
    old, new = np.asarray(old, dtype=float), np.asarray(new, dtype=float)
    low, high = _bootstrap_ratio(old, new, np.median, rng=rng, n_resamples=n_resamples, confidence=confidence)
    return float(np.median(new) / np.median(old)), low, high


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


def runs_needed(values: np.ndarray | list[float], *, relative_error: float = 0.05, confidence: float = 0.95) -> int:
    """Run needed for the mean's CI half-width to be ``relative_error`` of the mean (HB15: n = (s·t/(e·x̄))²).

    Iterates because t depends on n; uses the observed spread of ``values``.
    """
    x = np.asarray(values, dtype=float)
    s, mean = x.std(ddof=1), x.mean()
    n = max(len(x), 2)
    for _ in range(100):
        t = stats.t.ppf(1 - (1 - confidence) / 2, n - 1)
        needed = int(np.ceil((s * t / (relative_error * mean)) ** 2))
        if needed <= n:
            return max(needed, 2)
        n = needed
    return n


def sample_warnings(n: int) -> list[str]:
    """Return what a reader should know about a sample of ``n`` runs."""
    warnings = []
    if n < MIN_RUNS_FOR_TEST:
        warnings.append(
            f"{n} runs: the Mann-Whitney test cannot reach p < 0.05 below {MIN_RUNS_FOR_TEST} runs per side"
        )
    if n < MIN_RUNS_FOR_MEDIAN_CI:
        warnings.append(f"{n} runs: no 95% interval for the median exists below {MIN_RUNS_FOR_MEDIAN_CI} runs")
    return warnings


def _describe(values: np.ndarray) -> tuple[float, float | None]:
    """Median and benchstat's ± (the larger relative distance to the interval's ends), if an interval exists."""
    ci = median_ci(values)
    if ci.low is None or ci.high is None or ci.median == 0:
        return ci.median, None
    return ci.median, max(ci.high / ci.median - 1, 1 - ci.low / ci.median)


def comparison_table(
    frame: pl.DataFrame,
    value: str,
    *,
    factor: str,
    baseline: str,
    by: list[str] | None = None,
    alpha: float = 0.05,
    rng: np.random.Generator,
    n_resamples: int = 10_000,
    equivalence: float = 0.02,
) -> pl.DataFrame:
    """Return a benchstat-style comparison of ``value`` between levels of ``factor``, per ``by`` group.

    Parameters
    ----------
    frame
        One row per run: the ``value`` column and the factor columns.
    value
        What to compare (IOPS, bandwidth, latency); one value per run.
    factor, baseline
        The factor whose levels are compared, and the level the others are compared with.
    by
        The other factors: one comparison per combination of their levels.
    alpha
        Significance level, applied to Holm-adjusted p over the whole table (the family).
    rng
        The only source of randomness (bootstrap of the ratio of medians).
    n_resamples
        Bootstrap resamples per comparison.
    equivalence
        Practical-equivalence band: a significant change smaller than this
        fraction is reported as ``within noise``.

    Returns
    -------
    polars.DataFrame
        One row per group and non-baseline level: runs on each side, medians
        with their exact 95% intervals (``*_ci_pct`` as benchstat's ±%), the
        change in percent, Mann–Whitney p and its Holm adjustment, Cliff's δ,
        Hodges–Lehmann shift, the ratio of medians with its bootstrap interval,
        ``delta`` (benchstat's column: ``~`` when not significant, else
        ``+x.xx%``), ``verdict`` and ``warnings``; sorted by the group.

    """
    by = by or []
    rows = []
    for key, group in frame.sort([*by, factor]).group_by(by or [pl.lit(0).alias("_all")], maintain_order=True):
        base = group.filter(pl.col(factor) == baseline)[value].drop_nulls().to_numpy()
        for level in [lv for lv in group[factor].unique(maintain_order=True).to_list() if lv != baseline]:
            other = group.filter(pl.col(factor) == level)[value].drop_nulls().to_numpy()
            if len(base) == 0 or len(other) == 0:
                continue
            rows.append(
                _compare_pair(
                    dict(zip(by, key, strict=False)) if by else {}, factor, level, base, other, rng, n_resamples
                )
            )
    if not rows:
        return pl.DataFrame()
    table = pl.DataFrame(rows)
    adjusted = holm(table["p"].to_numpy())
    return table.with_columns(pl.Series("p_holm", adjusted)).with_columns(
        pl.when(pl.col("p_holm") > alpha)
        .then(pl.lit("~"))
        .otherwise(
            pl.format(
                "{}{}%",
                pl.when(pl.col("change_pct") > 0).then(pl.lit("+")).otherwise(pl.lit("")),
                pl.col("change_pct").round(2).cast(pl.String),
            )
        )
        .alias("delta"),
        pl.when(pl.col("p_holm") > alpha)
        .then(pl.lit("no significant change"))
        .when(pl.col("change_pct").abs() < equivalence * 100)
        .then(pl.lit("within noise"))
        .when(pl.col("change_pct") > 0)
        .then(pl.lit("higher"))
        .otherwise(pl.lit("lower"))
        .alias("verdict"),
    )


def _compare_pair(
    group: dict,
    factor: str,
    level: object,
    base: np.ndarray,
    other: np.ndarray,
    rng: np.random.Generator,
    n_resamples: int,
) -> dict:
    base_median, base_pct = _describe(base)
    other_median, other_pct = _describe(other)
    u, p = mann_whitney(other, base)
    ratio, ratio_low, ratio_high = ratio_of_medians_ci(base, other, rng=rng, n_resamples=n_resamples)
    delta = cliffs_delta(other, base)
    return {
        **group,
        factor: level,
        "runs_baseline": len(base),
        "runs": len(other),
        "median_baseline": base_median,
        "median_baseline_ci_pct": None if base_pct is None else 100 * base_pct,
        "median": other_median,
        "median_ci_pct": None if other_pct is None else 100 * other_pct,
        "change_pct": 100 * (other_median / base_median - 1),
        "u": u,
        "p": p,
        "cliffs_delta": delta,
        "effect": cliffs_magnitude(delta),
        "hodges_lehmann": hodges_lehmann(base, other),
        "ratio_of_medians": ratio,
        "ratio_low": ratio_low,
        "ratio_high": ratio_high,
        "warnings": "; ".join(sample_warnings(min(len(base), len(other)))),
    }


def comparison_matrix(table: pl.DataFrame, *, rows: str, columns: str, cell: str = "delta") -> pl.DataFrame:
    """Return a comparison table laid out benchstat-style: one factor down, another across.

    ``table`` is the output of :func:`comparison_table` grouped by at least
    ``rows`` and ``columns``; each cell shows ``cell`` (``delta`` by default:
    ``~`` or ``+x.xx%``). Rows and columns are sorted.
    """
    wide = table.sort(rows, columns).pivot(on=columns, index=rows, values=cell, aggregate_function="first")
    ordered = sorted(c for c in wide.columns if c != rows)
    return wide.select(rows, *ordered).sort(rows)
