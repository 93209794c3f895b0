"""How many runs a comparison needs, longer runs or more, and tables a reader can take in."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from scipy import stats

from benchlib.stats.compare import (
    SETTLE_MOST,
    SETTLE_POWER,
    comparison_table,
    runs_for,
    runs_to_settle,
    two_level_table,
)
from benchlib.tables import MISSING, comparison_rows, label, number, show, verdict_lines
from benchlib.views import run_seconds
from benchlib.words.compare import design_summary, settle_why, two_level_notes, untestable_caveat, with_notes


def _sides(base: list[float], new: list[float]) -> pl.DataFrame:
    return pl.DataFrame({"controller": ["LSI"] * len(base) + ["PVSCSI"] * len(new), "iops": [*base, *new], "bs": "4k"})


def _lognormal(effect: float, runs: int, cv: float, seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return _sides(list(1000 * rng.lognormal(0, cv, runs)), list(1000 * (1 + effect) * rng.lognormal(0, cv, runs)))


def test_runs_to_settle_is_the_first_n_that_reaches_the_verdict_80_percent_of_the_time() -> None:
    frame = _lognormal(0.20, 3, 0.10, seed=3)
    row = runs_to_settle(frame, "iops", factor="controller", baseline="LSI", by=["bs"]).row(0, named=True)
    logs = {k: np.log(frame.filter(controller=k)["iops"].to_numpy()) for k in ("LSI", "PVSCSI")}
    s = math.sqrt((logs["LSI"].var(ddof=1) + logs["PVSCSI"].var(ddof=1)) / 2)
    ratio = comparison_table(frame, "iops", factor="controller", baseline="LSI")["ratio"][0]
    margin = abs(math.log(ratio)) - math.log(1.02)  # the comparison's own (Hodges-Lehmann) change
    n = row["runs"]

    def enough(k: int, spread: float = s) -> bool:  # the interval clear of the edge 80% of the time
        sigma = spread * math.sqrt(2 / k) * math.sqrt(math.pi / 3)  # the rank estimate's standard error
        return (stats.t.ppf(0.975, 2 * k - 2) + stats.norm.ppf(0.8)) * sigma <= margin

    assert row["spread_pct"] == pytest.approx(100 * s) and row["reason"] == "outside" and row["power"] == 0.8
    assert settle_why(row) == "to show the change outside the ±2% band"
    assert enough(n) and (n == 4 or not enough(n - 1))  # 4: the exact test's floor
    # 3 runs a side measure the spread loosely: its 80% upper bound (χ² on 4 degrees of freedom) plans more
    high = s * math.sqrt(4 / stats.chi2.ppf(0.2, 4))
    assert row["runs_high"] > n and enough(row["runs_high"], high) and not enough(row["runs_high"] - 1, high)


@pytest.mark.parametrize(
    ("cv", "change", "verdict"), [(0.05, 0.05, "improved"), (0.02, 0.0, "equivalent"), (0.10, -0.10, "regressed")]
)
def test_the_runs_planned_reach_the_verdict_as_often_as_promised(cv: float, change: float, verdict: str) -> None:
    """Calibration (issue 40): with the true spread and change, the runs planned give the verdict 80% of the
    time, within 10 points (seeded Monte Carlo, 150 fresh experiments; measured 80-85%)."""
    n, _ = runs_for(cv, math.log1p(change))
    rng = np.random.default_rng(11)
    reps = 150
    hits = sum(
        comparison_table(
            _sides(list(1000 * rng.lognormal(0, cv, n)), list(1000 * (1 + change) * rng.lognormal(0, cv, n))),
            "iops",
            factor="controller",
            baseline="LSI",
        )["verdict"][0]
        == verdict
        for _ in range(reps)
    )
    assert hits / reps >= SETTLE_POWER - 0.10 - 2 * math.sqrt(SETTLE_POWER * (1 - SETTLE_POWER) / reps)


def test_the_dry_runs_power_is_the_runs_to_settle_turned_round() -> None:
    """The change n runs a side show 80% of the time (the dry run's power line) is the one the comparison
    page's plan would give n runs for; fresh experiments at that change read improved about 80% of the time
    (seeded, 150 at 10 runs a side, CV 2%); 3 runs a side, or 4 in a family of 2, can show none."""
    from benchlib.runner.describe import power_line
    from benchlib.stats.compare import detectable_change

    for cv, n, family in ((0.02, 10, 1), (0.05, 6, 1), (0.02, 20, 8), (0.10, 12, 3)):
        change = detectable_change(cv, n, family=family)
        assert runs_for(cv, math.log1p(change) + 1e-9, family=family)[0] == n
        assert runs_for(cv, math.log1p(0.95 * change), family=family)[0] > n
    assert detectable_change(0.02, 3) is None and detectable_change(0.02, 4, family=2) is None
    change, rng, reps = detectable_change(0.02, 10), np.random.default_rng(4), 150
    hits = sum(
        comparison_table(
            _sides(list(1000 * rng.lognormal(0, 0.02, 10)), list(1000 * (1 + change) * rng.lognormal(0, 0.02, 10))),
            "iops",
            factor="controller",
            baseline="LSI",
        )["verdict"][0]
        == "improved"
        for _ in range(reps)
    )
    assert hits / reps >= SETTLE_POWER - 0.10 - 2 * math.sqrt(SETTLE_POWER * (1 - SETTLE_POWER) / reps)
    said = power_line(10, 1)
    assert said.startswith("power: at 10 runs a side, a comparison calls a change improved or regressed 80% of")
    assert f"{100 * change:.0f}% or more where the runs spread by 2% (CV)" in said


def test_runs_to_settle_says_when_it_cannot() -> None:
    one = runs_to_settle(_sides([1000.0], [1100.0]), "iops", factor="controller", baseline="LSI")
    assert one["runs"][0] is None and "no spread" in settle_why(one.row(0, named=True))
    base = [1000.0, 1010, 990, 1005]
    edge = _sides(base, [1.02 * v for v in base])  # exactly +2%: on the ±2% band's edge
    row = runs_to_settle(edge, "iops", factor="controller", baseline="LSI", band=0.02).row(0, named=True)
    assert row["runs"] is None and f"{SETTLE_MOST:,}" in settle_why(row)
    # well inside the band, but the runs spread 30%: equivalence is what is out of reach, and said so
    wide = [1000.0, 1500, 700, 1300]
    far = runs_to_settle(_sides(wide, [1.004 * v for v in wide]), "iops", factor="controller", baseline="LSI")
    assert settle_why(far.row(0, named=True)) == "to show the change inside the ±2% band: more than 1,000 runs per side"
    same = runs_to_settle(_lognormal(0.0, 30, 0.02, seed=2), "iops", factor="controller", baseline="LSI")
    # no change: equivalence is sought, two one-sided tests each clear of their edge (more runs than one)
    assert same["reason"][0] == "inside" and same["runs"][0] <= same["runs_high"][0] < SETTLE_MOST


def test_two_level_table_recovers_the_variances_of_a_known_hierarchy() -> None:
    rng = np.random.default_rng(5)
    rows = [
        {"config": c, "run": f"{c}{r}", "iops": 1000 + shift + noise}
        for c in ("a", "b")
        for r, shift in enumerate(rng.normal(0, 20, 80))
        for noise in rng.normal(0, 30, 20)
    ]
    table = two_level_notes(two_level_table(pl.DataFrame(rows), "iops", by=["config"], cost_of_run=100))
    for row in table.iter_rows(named=True):
        assert row["within_variance"] == pytest.approx(900, rel=0.15)
        assert row["between_variance"] == pytest.approx(400, rel=0.4)
        assert 10 <= row["iterations_per_run"] <= 25 and row["runs"] >= 5  # sqrt(100 x 900 / 400) = 15
        assert abs(row["lag1"]) < 0.2 and "too few" not in row["note"]
    short = two_level_table(pl.DataFrame(rows).filter(pl.col("iops") > 0).head(6), "iops", by=["config"], cost_of_run=1)
    assert short["check"][0] == "too few runs"
    short = two_level_notes(short)
    assert short["runs"][0] is None and "at least 2 runs" in short["note"][0]


def test_run_seconds_keeps_only_seconds_every_host_logged() -> None:
    factors = ["profile", "block_size", "ioengine", "rate_cap"]
    seconds = run_seconds("loopback-fio", factors, only={"profile": ["randread"], "rate_cap": ["on"]})
    assert seconds.height > 0
    # four servers capped at 500 IOPS each: every kept second is their sum, none a lone host's last interval
    assert seconds["iops"].min() > 1900 and seconds["iops"].max() < 2100


def test_a_mixed_jobs_seconds_add_its_reads_and_writes() -> None:
    """A read/write mix logs a read and a write row at each stamp: each second is the job's rate, both
    directions added (they once made the interval look like 0 ms, and no second was kept)."""
    from benchlib.views import run_totals

    factors = ["profile", "write_pct"]
    only = {"profile": ["rwmix-sweep"], "write_pct": ["50"]}
    seconds = run_seconds("loopback-fio", factors, only=only)
    assert seconds["run"].n_unique() == 3  # every run has its seconds
    totals = run_totals("loopback-fio", "iops", factors, only=only)["iops"]
    assert 0.7 < seconds["iops"].median() / totals.median() < 1.3  # reads and writes, not their mean


def test_show_prints_every_row_and_character_and_says_unknown() -> None:
    long = "x" * 300
    frame = pl.DataFrame(
        {"name": [f"vm{i}" for i in range(40)] + ["<script>alert(1)</script>"], "iops": [*range(40), None]}
    ).with_columns(pl.lit(long).alias("note"), pl.lit(float("nan")).alias("p"))
    shown = show(frame)
    text, page = repr(shown), shown._repr_html_()
    assert text.count("\n") == 42 and long in text and "…" not in text  # header, rule, 41 rows
    assert "&lt;script&gt;" in page and "<script>" not in page
    assert MISSING in text and "nan" not in text.lower() and "None" not in text
    assert number(44646.45) == "44,646" and number(0.0767412) == "0.0767" and number(3) == "3"
    assert number(1.5e-9) == "0.00000000150" and number(float("inf")) == MISSING


def test_columns_of_one_quantity_share_their_decimals() -> None:
    """fio's latency, the block layer's await and their difference (ms) read to one number of decimals."""
    frame = pl.DataFrame(
        {"seen": [1.229, 12.822, 0.077], "await": [0.893, 12.806, 0.056], "above": [0.3355, 0.0158, 0.0211]}
    )
    assert [r[2] for r in show(frame).rows] == ["0.3355", "0.0158", "0.0211"]  # to its own largest value
    shared = show(frame, alike=[("seen", "await", "above")]).rows
    assert shared == [["1.229", "0.893", "0.336"], ["12.822", "12.806", "0.016"], ["0.077", "0.056", "0.021"]]
    # the page cache's 0.0031 ms beside a 14.9 ms await: one number of decimals would print 0.003, a single
    # digit beside five; each value then gets its own three
    cached = pl.DataFrame({"seen": [0.0888, 0.00312], "await": [0.0600, 14.929]})
    assert show(cached, alike=[("seen", "await")]).rows == [["0.0888", "0.0600"], ["0.00312", "14.9"]]
    # a histogram's percentiles, each to its own three digits: one page reads like the next
    tails = pl.DataFrame({"p50_ms": [0.1009, 0.224], "p99_ms": [2.0726, 27.394]})
    assert show(tails, significant=["p50_ms", "p99_ms"]).rows == [["0.101", "2.07"], ["0.224", "27.4"]]


def test_comparison_rows_put_the_interval_beside_the_change() -> None:
    table = comparison_table(_lognormal(0.20, 10, 0.10, seed=1), "iops", factor="controller", baseline="LSI", by=["bs"])
    row = comparison_rows(table, by=["bs"], factor="controller").row(0, named=True)
    low, high = table["ratio_low"][0], table["ratio_high"][0]
    assert row["runs_pair"] == "10 / 10" and row["verdict"] == "improved"
    assert row["change"] == f"{table['change_pct'][0]:+.2f}% ({100 * (low - 1):+.2f}% to {100 * (high - 1):+.2f}%)"
    one = comparison_table(_sides([1000.0], [1100.0]), "iops", factor="controller", baseline="LSI")
    # one run a side: no p and no effect size can exist, so no columns of "—" for them
    assert {"p_holm", "effect"}.isdisjoint(comparison_rows(one, by=[], factor="controller").columns)
    # with no interval anywhere the column's title says why, once, and its cells hold the change alone
    three = comparison_table(_lognormal(0.20, 3, 0.10, seed=1), "iops", factor="controller", baseline="LSI", by=["bs"])
    shown = comparison_rows(three, by=["bs"], factor="controller")
    assert "change" not in shown.columns and shown["change_alone"][0] == f"{three['change_pct'][0]:+.2f}%"
    # a p is printed, so is δ (what share of run pairs one side won); its size in words only where a test decides
    assert (
        three["verdict"][0] == "not testable at this n" and shown["effect"][0] == f"δ {three['cliffs_delta'][0]:+.2f}"
    )
    assert comparison_rows(table, by=["bs"], factor="controller")["effect"][0].startswith("large (δ +")
    assert "too few runs" in label("change_alone") and "95% interval" not in shown["change_alone"][0]
    # one run a side: no median, no run-to-run ratios to take the median of; the column says what it is
    assert comparison_rows(one, by=[], factor="controller")["change_single"][0] == "+10.00%"
    assert "the two runs' ratio" in label("change_single") and "median" not in label("change_single")


def _block_sizes(runs: int) -> pl.DataFrame:
    parts = [
        _lognormal(effect, runs, 0.10, seed=i).with_columns(bs=pl.lit(f"{4 << i}k"))
        for i, effect in enumerate([0.2, 0.3, 0.0])
    ]
    return pl.concat(parts)


def test_identical_verdicts_are_said_once() -> None:
    three = comparison_table(_block_sizes(3), "iops", factor="controller", baseline="LSI", by=["bs"])
    # all 3 not testable for one reason: the design summary says it once, in full, and no line repeats it
    assert three.height == 3 and verdict_lines(three, by=["bs"], factor="controller") == []
    said = design_summary(three) + untestable_caveat(three).text
    assert "3 runs per configuration" not in said and "would make every row testable" in said
    mixed = three.with_columns(
        pl.when(pl.col("bs") == "4k").then(pl.lit("inconclusive")).otherwise("verdict").alias("verdict")
    )
    lines = verdict_lines(mixed, by=["bs"], factor="controller")
    untestable = [line for line in lines if "not testable" in line]
    assert len(lines) == 2 and untestable[0].startswith("- **2 comparisons**: not testable at this n. 3 vs 3 runs")
    ten = comparison_table(_block_sizes(10), "iops", factor="controller", baseline="LSI", by=["bs"])
    said = verdict_lines(ten, by=["bs"], factor="controller")
    assert len(said) == len({*zip(ten["verdict"], with_notes(ten)["note"], strict=True)}) > 1 and all(
        s.count("**") == 2 for s in said
    )


def test_a_clause_every_note_shares_is_said_once() -> None:
    from benchlib.tables import shared_clauses

    frame = pl.DataFrame({"cell": ["a", "b", "c"], "note": ["x 1; a first plan", "x 2; a first plan", "a first plan"]})
    rows, said = shared_clauses(frame)
    assert rows["note"].to_list() == ["x 1", "x 2", MISSING] and said == "Every row: a first plan."
    alone, nothing = shared_clauses(frame.head(1))
    assert alone.equals(frame.head(1)) and nothing == ""


def test_a_change_far_from_the_medians_ratio_is_explained() -> None:
    """Medians 60 and 200 give +233%; the median of the nine run-to-run ratios is +159%: the page says why."""
    from benchlib.words.compare import change_line

    table = comparison_table(
        _sides([100.0, 60.0, 58.0], [200.0, 150.0, 220.0]), "iops", factor="controller", baseline="LSI"
    )
    said = change_line(table, by=[], factor="controller")
    assert "(Hodges-Lehmann)" in said and "controller PVSCSI: +158.62% against +233.33%" in said
    close = comparison_table(
        _sides([100.0, 90.0, 95.0], [200.0, 190.0, 195.0]), "iops", factor="controller", baseline="LSI"
    )
    assert change_line(close, by=[], factor="controller") == ""
    one = comparison_table(_sides([60.0], [210.0]), "iops", factor="controller", baseline="LSI")
    assert change_line(one, by=[], factor="controller") == ""  # one run a side: the ratio is the medians' ratio
