"""Two-factor ART and the permutation test: ARTool's own checks, and behaviour on known structure."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats

from benchlib.stats.factorial import (
    align,
    anova_two_way,
    art_anova,
    at_floor,
    interaction_floor,
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
