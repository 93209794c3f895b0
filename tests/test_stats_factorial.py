"""Two-factor ART and the permutation test: ARTool's own checks, and behaviour on known structure."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from scipy import stats

from benchlib.stats.factorial import (
    align,
    anova_two_way,
    art_anova,
    at_floor,
    interaction_anova_type_test,
    interaction_floor,
    interaction_p,
    interaction_permutation_test,
)


def _design(rng: np.random.Generator, interaction: float, reps: int = 5) -> pl.DataFrame:
    rows = []
    for i, controller in enumerate(["LSI", "PVSCSI", "NVMe"]):
        for j, sioc in enumerate(["off", "on"]):
            base = 1000 + 100 * i + 50 * j + interaction * (i == 2) * (j == 1)
            rows += [{"controller": controller, "sioc": sioc, "iops": v} for v in base + rng.normal(0, 20, reps)]
    return pl.DataFrame(rows)


def test_two_way_anova_f_matches_hand_computed_sums_of_squares() -> None:
    """Balanced design: F_A = (SS_A / df_A) / (SS_error / df_error), p from the F distribution."""
    rng = np.random.default_rng(3)
    frame = _design(rng, 0)
    y = frame["iops"].to_numpy()
    a, b = frame["controller"].to_numpy(), frame["sioc"].to_numpy()
    two_way = anova_two_way(y, a, b)
    grand = y.mean()
    ss_a = sum((a == lv).sum() * (y[a == lv].mean() - grand) ** 2 for lv in np.unique(a))
    cells = {(x, z): y[(a == x) & (b == z)] for x in np.unique(a) for z in np.unique(b)}
    ss_error = sum(((v - v.mean()) ** 2).sum() for v in cells.values())
    f_a = (ss_a / 2) / (ss_error / (len(y) - 6))
    assert two_way["A"][0] == pytest.approx(f_a, rel=1e-9)
    assert two_way["A"][3] == pytest.approx(stats.f.sf(f_a, 2, len(y) - 6), rel=1e-9)


def test_art_checks_hold() -> None:
    """ARTool's checks: aligned responses sum to 0; on aligned data the other effects' F is ~0."""
    table = art_anova(_design(np.random.default_rng(1), 300), "iops", "controller", "sioc")
    assert table["effect"].to_list() == ["controller", "sioc", "controller:sioc"]
    assert (table["aligned_sum"].abs() < 1e-6).all()
    assert (table["other_effects_max_F"] < 1e-6).all()


def test_alignment_keeps_the_effect_of_interest() -> None:
    """For a balanced design, ANOVA on the aligned response gives the effect's original F."""
    frame = _design(np.random.default_rng(2), 300)
    y, a, b = frame["iops"].to_numpy(), frame["controller"].to_numpy(), frame["sioc"].to_numpy()
    original = anova_two_way(y, a, b)
    for effect in ("A", "B", "A:B"):
        assert anova_two_way(align(y, a, b, effect), a, b)[effect][0] == pytest.approx(original[effect][0], rel=1e-6)


def test_art_finds_an_interaction_only_where_there_is_one() -> None:
    with_interaction = art_anova(_design(np.random.default_rng(4), 300), "iops", "controller", "sioc")
    without = art_anova(_design(np.random.default_rng(4), 0), "iops", "controller", "sioc")
    assert with_interaction.filter(pl.col("effect") == "controller:sioc")["p"][0] < 0.001
    assert without.filter(pl.col("effect") == "controller:sioc")["p"][0] > 0.05
    assert (without.filter(pl.col("effect") != "controller:sioc")["p"] < 0.001).all()


def test_permutation_test_agrees() -> None:
    f, p = interaction_permutation_test(
        _design(np.random.default_rng(5), 300),
        "iops",
        "controller",
        "sioc",
        rng=np.random.default_rng(0),
        n_resamples=999,
    )
    assert p == pytest.approx(1 / 1000) and f > 50
    f0, p0 = interaction_permutation_test(
        _design(np.random.default_rng(5), 0),
        "iops",
        "controller",
        "sioc",
        rng=np.random.default_rng(0),
        n_resamples=999,
    )
    assert p0 > 0.05
    again = interaction_permutation_test(
        _design(np.random.default_rng(5), 0),
        "iops",
        "controller",
        "sioc",
        rng=np.random.default_rng(0),
        n_resamples=999,
    )
    assert again == (f0, p0)


def _two_by_two(reps: int, interaction: float) -> pl.DataFrame:
    rng = np.random.default_rng(7)
    rows = []
    for i, controller in enumerate(["LSI", "PVSCSI"]):
        for j, sioc in enumerate(["off", "on"]):
            base = 1000 + 100 * i + 50 * j + interaction * (i == j)
            rows += [{"controller": controller, "sioc": sioc, "iops": v} for v in base + rng.normal(0, 20, reps)]
    return pl.DataFrame(rows)


@pytest.mark.parametrize(("reps", "exact"), [(2, 2 / 70), (3, 2 / 924)])
def test_a_clear_interaction_is_as_significant_as_the_runs_allow_and_no_more(reps: int, exact: float) -> None:
    """2 x 2 with n runs per combination: of the ways to deal the residuals to the combinations, a share of
    2 / C(4n, 2n) keep a clear interaction's pattern (enumerated for the loopback study at n = 3: exactly
    800 of the 369,600 deals, 2 / 924). That is the p the test gives a clear interaction; with 2 runs it is
    above 0.025, so a family of two tests cannot reject."""
    clear = _two_by_two(reps, 1000)
    f, p = interaction_permutation_test(clear, "iops", "controller", "sioc", rng=np.random.default_rng(1))
    floor = interaction_floor(clear, "iops", "controller", "sioc", rng=np.random.default_rng(1))
    monte_carlo = 3 * (exact / 9999) ** 0.5  # three standard errors of a 9,999-permutation estimate
    assert f > 100 and floor == pytest.approx(exact, abs=monte_carlo) and p <= floor + monte_carlo
    weak = _two_by_two(reps, 30)
    _, p_weak = interaction_permutation_test(weak, "iops", "controller", "sioc", rng=np.random.default_rng(1))
    weak_floor = interaction_floor(weak, "iops", "controller", "sioc", rng=np.random.default_rng(1))
    assert p_weak > weak_floor
    # the floor's own Monte Carlo error: an estimate within two standard errors of it is at it, one beyond is not
    assert at_floor(exact + 2 * monte_carlo / 3, exact) and not at_floor(exact + 4 * monte_carlo, exact)


# Higgins, Blair & Tashtoush (1990), Table 1: a synthetic 3x3 factorial with main effects and no
# interaction, four observations per cell (rows r1..r3, columns c1..c3, in that order), as
# distributed with ARTool (dataset Higgins1990Table1).
HIGGINS_1990_TABLE1 = [
    11.5,
    10.1,
    9.9,
    10.6,
    9.0,
    7.4,
    8.8,
    8.8,
    3.8,
    6.3,
    4.9,
    5.3,
    9.9,
    9.8,
    9.3,
    9.1,
    9.3,
    7.4,
    7.7,
    7.9,
    4.1,
    6.3,
    5.5,
    5.4,
    13.9,
    16.0,
    14.2,
    15.2,
    13.0,
    13.4,
    11.2,
    12.8,
    9.6,
    9.6,
    11.0,
    13.4,
]


def test_art_matches_the_published_artool_result() -> None:
    """ARTool's reference for Higgins1990Table1 (its test suite, "matches results of the original ARTool"):
    Row F(2, 27) = 29.9925, Column F(2, 27) = 77.8668, Row:Column F(4, 27) = 0.6417, p = 0.6374."""
    frame = pl.DataFrame(
        {
            "Row": [f"r{1 + i // 12}" for i in range(36)],
            "Column": [f"c{1 + (i % 12) // 4}" for i in range(36)],
            "Response": HIGGINS_1990_TABLE1,
        }
    )
    table = {r["effect"]: r for r in art_anova(frame, "Response", "Row", "Column").iter_rows(named=True)}
    assert round(table["Row"]["F"], 4) == 29.9925 and round(table["Column"]["F"], 4) == 77.8668
    assert round(table["Row:Column"]["F"], 4) == 0.6417 and round(table["Row:Column"]["p"], 4) == 0.6374
    assert [table[e]["df"] for e in ("Row", "Column", "Row:Column")] == [2, 2, 4]
    assert {table[e]["df_residual"] for e in table} == {27}
    assert round(table["Row"]["p"], 4) == 0 and round(table["Column"]["p"], 4) == 0


def test_the_anova_type_test_of_a_two_by_two_is_welchs_t_of_the_interaction_contrast() -> None:
    """In a 2 x 2 the interaction is one contrast of the four means, m11 - m12 - m21 + m22; with each cell's
    own spread, Welch's t of it with Satterthwaite's degrees of freedom is the ANOVA-type test (F = t^2)."""
    rng = np.random.default_rng(3)
    runs, sds = [3, 4, 5, 3], [1.0, 2.0, 0.5, 4.0]
    cells = [rng.normal(10 + k, sd, n) for k, (n, sd) in enumerate(zip(runs, sds, strict=True))]
    frame = pl.DataFrame([{"a": f"a{k // 2}", "b": f"b{k % 2}", "y": v} for k, cell in enumerate(cells) for v in cell])
    f, df1, df2, p = interaction_anova_type_test(frame, "y", "a", "b")
    contrast = cells[0].mean() - cells[1].mean() - cells[2].mean() + cells[3].mean()
    v = [c.var(ddof=1) / len(c) for c in cells]
    df = sum(v) ** 2 / sum(x**2 / (len(c) - 1) for x, c in zip(v, cells, strict=True))
    t = contrast / math.sqrt(sum(v))
    assert f == pytest.approx(t**2) and df1 == pytest.approx(1) and df2 == pytest.approx(df)
    assert p == pytest.approx(2 * stats.t.sf(abs(t), df))
    # no spread in any cell: an interaction is certain, and so is its absence
    exact = frame.with_columns(pl.col("y").mean().over("a", "b"))
    assert interaction_anova_type_test(exact, "y", "a", "b")[3] == 0.0
    flat = exact.with_columns((pl.col("a").str.slice(1).cast(int) + pl.col("b").str.slice(1).cast(int)).alias("y"))
    assert interaction_anova_type_test(flat, "y", "a", "b")[3] == 1.0
    with pytest.raises(ValueError, match="2 values or more"):
        interaction_anova_type_test(frame.head(3).vstack(frame.tail(9)), "y", "a", "b")


def _null_experiment(rng: np.random.Generator, b: int, runs: int, cvs: list[float]) -> pl.DataFrame:
    """Log run totals with main effects and no interaction, each combination with its own CV."""
    rows = []
    for cell, cv in enumerate(cvs):
        i, j = divmod(cell, b)
        rows += [{"a": i, "b": j, "y": math.log(1000) + 0.3 * i + 0.2 * j + v} for v in rng.normal(0, cv, runs)]
    return pl.DataFrame(rows)


@pytest.mark.parametrize(
    "cvs", [[0.02, 0.02, 0.02, 0.08], [0.02, 0.02, 0.04, 0.04, 0.08, 0.08]], ids=["2x2 one 8%", "3x2 2-8%"]
)
def test_the_interaction_test_holds_alpha_when_the_combinations_spread_unequally(cvs: list[float]) -> None:
    """Calibration (issue 40): no interaction, 3 runs a combination, CVs fourfold apart. The page's test calls
    one in at most alpha + 2 standard errors of the experiments (seeded, 500; measured over 2,000: 5.4% and
    3.6%); the permutation test alone, which assumes every combination spreads alike, in more (9.8%, 8.6%)."""
    rng, reps = np.random.default_rng(9), 500
    both = alone = 0
    for _ in range(reps):
        found = interaction_p(_null_experiment(rng, 2, 3, cvs), "y", "a", "b", rng=rng, n_resamples=999)
        both += found["p"] <= 0.05
        alone += found["p_permutation"] <= 0.05
    bound = 0.05 + 2 * math.sqrt(0.05 * 0.95 / reps)
    assert both / reps <= bound < alone / reps, (both / reps, alone / reps)
