"""Two-factor effects without normality: the aligned rank transform and a permutation test (METHODS.md G3).

For controller x SIOC, block size x queue depth and the like, with one value
per run in each cell. ``art_anova`` follows ARTool (Wobbrock et al., CHI'11):
for each effect, align the response (residual from the cell means plus that
effect's estimate), round to 8 decimals, rank with average ties, run the full
factorial ANOVA on the ranks and keep only that effect's F.
``interaction_permutation_test`` is the Freedman–Lane alternative for small
cells: exact when every cell has the same spread, whatever its shape, and
liberal when the spreads differ (9-27% false alarms at alpha = 0.05 with a
fourfold spread in one cell of a 2 x 2 at 3-6 runs a cell).
``interaction_anova_type_test`` (Brunner, Dette & Munk 1997) lets each cell
have its own spread; ``interaction_p`` takes the larger p of the two, so an
interaction is called only where neither test's assumption is needed alone.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
from scipy import stats

#: ARTool compares aligned values at -floor(log10(sqrt(machine epsilon))) = 8 decimals before ranking.
ALIGN_DIGITS = 8


def _design(a: np.ndarray, b: np.ndarray, terms: tuple[str, ...]) -> tuple[np.ndarray, dict[str, slice]]:
    """Sum-to-zero (effect) coded design matrix with an intercept, and each term's columns."""

    def effect_columns(codes: np.ndarray) -> np.ndarray:
        levels = np.unique(codes)
        cols = [(codes == lv).astype(float) - (codes == levels[-1]).astype(float) for lv in levels[:-1]]
        return np.column_stack(cols) if cols else np.empty((len(codes), 0))

    blocks = {"A": effect_columns(a), "B": effect_columns(b)}
    blocks["A:B"] = np.column_stack(
        [
            blocks["A"][:, i] * blocks["B"][:, j]
            for i in range(blocks["A"].shape[1])
            for j in range(blocks["B"].shape[1])
        ]
    )
    columns = [np.ones((len(a), 1))]
    where: dict[str, slice] = {}
    start = 1
    for term in terms:
        columns.append(blocks[term])
        where[term] = slice(start, start + blocks[term].shape[1])
        start += blocks[term].shape[1]
    return np.column_stack(columns), where


def _rss(x: np.ndarray, y: np.ndarray) -> float:
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    residual = y - x @ coef
    return float(residual @ residual)


def anova_two_way(y: np.ndarray, a: np.ndarray, b: np.ndarray) -> dict[str, tuple[float, int, int, float]]:
    """Full-factorial two-way ANOVA with type III sums of squares: term -> (F, df, df_residual, p)."""
    terms = ("A", "B", "A:B")
    full, where = _design(a, b, terms)
    rss_full = _rss(full, y)
    df_res = len(y) - np.linalg.matrix_rank(full)
    out = {}
    for term in terms:
        keep = [i for i in range(full.shape[1]) if not (where[term].start <= i < where[term].stop)]
        df = where[term].stop - where[term].start
        f = ((_rss(full[:, keep], y) - rss_full) / df) / (rss_full / df_res)
        out[term] = (float(f), df, int(df_res), float(stats.f.sf(f, df, df_res)))
    return out


def align(y: np.ndarray, a: np.ndarray, b: np.ndarray, effect: str) -> np.ndarray:
    """ARTool's aligned response for ``effect`` ("A", "B" or "A:B"): cell residual + estimated effect."""
    frame = pl.DataFrame({"y": y, "a": a, "b": b})
    grand = frame["y"].mean()
    with_means = frame.with_columns(
        pl.col("y").mean().over("a", "b").alias("cell"),
        pl.col("y").mean().over("a").alias("mean_a"),
        pl.col("y").mean().over("b").alias("mean_b"),
    )
    estimate = {
        "A": pl.col("mean_a") - grand,
        "B": pl.col("mean_b") - grand,
        "A:B": pl.col("cell") - pl.col("mean_a") - pl.col("mean_b") + grand,
    }[effect]
    return with_means.select(pl.col("y") - pl.col("cell") + estimate).to_series().to_numpy()


def art_anova(frame: pl.DataFrame, value: str, a: str, b: str) -> pl.DataFrame:
    """Aligned rank transform ANOVA of ``value`` on factors ``a`` and ``b`` (full factorial).

    A between-subjects design (one observation per subject): it reproduces
    ARTool's published result on Higgins et al. (1990) Table 1 to four decimals
    (a test checks it). Split-plot and repeated-measures designs (ARTool's
    ``Error(...)`` strata or mixed models) are not covered.

    Returns one row per effect (``a``, ``b``, ``a:b``) with ``F``, ``df``,
    ``df_residual``, ``p``, and two checks ARTool reports: the sum of the
    aligned responses (should be ~0) and the largest F of the *other* effects
    on the aligned (unranked) responses (should be ~0).
    """
    y = frame[value].to_numpy().astype(float)
    codes_a = frame[a].cast(pl.String).to_numpy()
    codes_b = frame[b].cast(pl.String).to_numpy()
    rows = []
    for effect, name in (("A", a), ("B", b), ("A:B", ":".join((a, b)))):
        aligned = align(y, codes_a, codes_b, effect)
        ranks = stats.rankdata(np.round(aligned, ALIGN_DIGITS))
        f, df, df_res, p = anova_two_way(ranks, codes_a, codes_b)[effect]
        on_aligned = anova_two_way(aligned, codes_a, codes_b)
        others = max(on_aligned[t][0] for t in on_aligned if t != effect)
        rows.append(
            {
                "effect": name,
                "F": f,
                "df": df,
                "df_residual": df_res,
                "p": p,
                "aligned_sum": float(aligned.sum()),
                "other_effects_max_F": others,
            }
        )
    return pl.DataFrame(rows)


#: random permutations the interaction test draws: its p is an estimate to about ±0.0004 near 0.002
PERMUTATIONS = 9999


def interaction_permutation_test(
    frame: pl.DataFrame, value: str, a: str, b: str, *, rng: np.random.Generator, n_resamples: int = PERMUTATIONS
) -> tuple[float, float]:
    """Freedman–Lane permutation test of the a x b interaction: ``(F, p)``.

    Fits the main-effects model, permutes its residuals, adds them back to its
    fitted values, and recomputes the interaction F each time;
    p = (1 + #{F* >= F}) / (1 + n_resamples).
    """
    y = frame[value].to_numpy().astype(float)
    codes_a = frame[a].cast(pl.String).to_numpy()
    codes_b = frame[b].cast(pl.String).to_numpy()
    observed = anova_two_way(y, codes_a, codes_b)["A:B"][0]
    reduced, _ = _design(codes_a, codes_b, ("A", "B"))
    coef, *_ = np.linalg.lstsq(reduced, y, rcond=None)
    fitted = reduced @ coef
    residual = y - fitted
    full, where = _design(codes_a, codes_b, ("A", "B", "A:B"))
    keep = [i for i in range(full.shape[1]) if not (where["A:B"].start <= i < where["A:B"].stop)]
    df = where["A:B"].stop - where["A:B"].start
    df_res = len(y) - np.linalg.matrix_rank(full)
    orders = rng.permuted(np.tile(np.arange(len(y)), (n_resamples, 1)), axis=1)
    samples = fitted[None, :] + residual[orders]  # every permuted response at once
    rss_full = _batch_rss(full, samples)
    rss_reduced = _batch_rss(full[:, keep], samples)
    f_star = ((rss_reduced - rss_full) / df) / (rss_full / df_res)
    return float(observed), float((1 + np.sum(f_star >= observed - 1e-12)) / (1 + n_resamples))


def interaction_anova_type_test(frame: pl.DataFrame, value: str, a: str, b: str) -> tuple[float, float, float, float]:
    """ANOVA-type test of the a x b interaction with each cell's own spread: ``(F, df1, df2, p)``.

    Brunner, Dette & Munk (JASA 1997), as the GFD package's ATS: with the cells' means ``m``, the
    variances of those means ``V = diag(s_i^2 / n_i)`` and ``T`` the projection on the interaction
    contrasts, ``F = m'Tm / tr(TV)`` against F(df1, df2) with Box's degrees of freedom
    ``df1 = tr(TV)^2 / tr(TVTV)`` and ``df2 = tr(TV)^2 / sum(T_ii^2 v_i^2 / (n_i - 1))``. Every cell needs
    two values or more. Near-normal cell means are assumed; the spreads may differ. Where no cell has any
    spread, p is 0 for an interaction and 1 for none.
    """
    cells = frame.group_by(a, b).agg(pl.col(value).mean().alias("m"), pl.col(value).var().alias("s2"), pl.len())
    cells = cells.sort(a, b)
    n_a, n_b = cells[a].n_unique(), cells[b].n_unique()
    if cells.height != n_a * n_b or cells["len"].min() < 2:
        raise ValueError("the ANOVA-type test needs every combination of the two factors with 2 values or more")

    def differences(k: int) -> np.ndarray:
        return np.hstack([np.eye(k - 1), -np.ones((k - 1, 1))])

    contrasts = np.kron(differences(n_a), differences(n_b))
    projection = contrasts.T @ np.linalg.pinv(contrasts @ contrasts.T) @ contrasts
    means, n = cells["m"].to_numpy(), cells["len"].to_numpy().astype(float)
    v = cells["s2"].to_numpy() / n
    tv = projection * v[None, :]
    trace = float(np.trace(tv))
    between = float(means @ projection @ means)
    if trace <= 0:
        clear = between > 1e-20 * (1.0 + float(means @ means))
        return (math.inf if clear else math.nan), math.nan, math.nan, 0.0 if clear else 1.0
    df1 = trace**2 / float(np.trace(tv @ tv))
    df2 = trace**2 / float(np.sum(np.diag(projection) ** 2 * v**2 / (n - 1)))
    f = between / trace
    return f, df1, df2, float(stats.f.sf(f, df1, df2))


def interaction_floor(
    frame: pl.DataFrame, value: str, a: str, b: str, *, rng: np.random.Generator, n_resamples: int = PERMUTATIONS
) -> float:
    """Return the p :func:`interaction_permutation_test` gives the clearest interaction these runs could show.

    The test's p for the same runs with the spread within each combination shrunk a millionfold: an
    interaction without run-to-run noise. Few runs per combination leave few arrangements of the
    residuals, and every one that keeps the interaction's pattern counts against it: in a 2 x 2 design
    a clear interaction gets 2 in 924 (0.0022) with 3 runs per combination, 2 in 70 (0.029) with 2. Real
    data get about this p or more (a lucky arrangement of the noise a little less).
    Pass a generator seeded as the test's, so that both see the same permutations.
    """
    means = pl.col(value).mean().over(a, b)
    clear = frame.with_columns((means + (pl.col(value) - means) * 1e-6).alias("_clear"))
    return interaction_permutation_test(clear, "_clear", a, b, rng=rng, n_resamples=n_resamples)[1]


def interaction_p(
    frame: pl.DataFrame, value: str, a: str, b: str, *, rng: np.random.Generator, n_resamples: int = PERMUTATIONS
) -> dict[str, float]:
    """Test the a x b interaction twice and keep the larger p: ``F``, ``p_permutation``, ``p_spread``, ``p``.

    ``p_permutation`` is :func:`interaction_permutation_test`'s (exact when every combination has the same
    spread), ``p_spread`` :func:`interaction_anova_type_test`'s (each its own spread, near-normal means);
    ``p``, the larger, is below alpha only where both are, so its rate of false alarms is at most either's
    where that one's assumption holds. Simulated at alpha = 0.05 (``bench/bench_calibration.py --interaction``,
    2,000 experiments): a 2 x 2 at 3 runs a combination with one fourfold spread, 5.4% (the permutation test
    alone 9.8%); every spread alike, 3.0% (4.2%).
    """
    f, p_permutation = interaction_permutation_test(frame, value, a, b, rng=rng, n_resamples=n_resamples)
    p_spread = interaction_anova_type_test(frame, value, a, b)[3]
    return {"F": f, "p_permutation": p_permutation, "p_spread": p_spread, "p": max(p_permutation, p_spread)}


def at_floor(p: float, floor: float, n_resamples: int = PERMUTATIONS) -> bool:
    """Tell whether a permutation p is the floor's (:func:`interaction_floor`) within their Monte Carlo error.

    Both are estimates from ``n_resamples`` permutations, each with a standard error of about
    sqrt(p (1 - p) / n): a p within two standard errors of their difference above the floor cannot be told
    from it (0.0020 and 0.0026 against a floor of 0.0022 both are).
    """
    spread = 2 * math.sqrt(2 * floor * (1 - floor) / n_resamples)
    return p <= floor + spread


#: what an interaction test can call its two factors (:func:`interaction_call`)
INTERACTION_CALLS = ("interacts", "cannot tell", "no evidence")


def interaction_call(p_holm: float, floor: float, family: int, alpha: float = 0.05) -> str:
    """Return what one interaction test calls its factors: a code of :data:`INTERACTION_CALLS`.

    ``p_holm``: its Holm-adjusted p in a family of ``family`` tests; ``floor``: the p these runs give an
    interaction without run-to-run noise (:func:`interaction_floor`). "interacts" at or below ``alpha``;
    "cannot tell" where even the floor, adjusted alike, is above ``alpha`` (the runs could not have shown any
    interaction: never "no evidence"); else "no evidence".
    """
    if p_holm <= alpha:
        return "interacts"
    return "cannot tell" if floor * family > alpha else "no evidence"


def _batch_rss(x: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Residual sums of squares of many responses (rows of ``ys``) on one design."""
    projection = x @ np.linalg.pinv(x)
    residual = ys - ys @ projection.T
    return np.einsum("ij,ij->i", residual, residual)
