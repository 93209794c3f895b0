"""Repetitions until a comparison is settled (issue 40): the looks' boundaries, the verdicts read at a look,
the rule in a plan, and a real fio plan that stops once its comparison is settled, read the same way by the
report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from benchlib.errors import FormatError
from benchlib.ingest import ingest_study
from benchlib.runner import PlanError, load_plan, run_plan
from benchlib.runner.repetitions import SettleRule, comparisons, parse_rule, recorded_looks, recorded_rule
from benchlib.stats.compare import comparison_table
from benchlib.stats.design import min_p
from benchlib.stats.sequential import Looks, boundaries
from benchlib.words.compare import design_summary, verdict_key, verdict_note

# ---------------------------------------------------------------- the boundaries


def test_the_boundaries_are_gsdesigns_obrien_fleming_spending() -> None:
    # gsDesign::gsDesign(k = 5, test.type = 2, alpha = 0.025, sfu = sfLDOF)$upper$bound
    assert boundaries((1, 2, 3, 4, 5), 0.05) == pytest.approx((4.8769, 3.3569, 2.6803, 2.2898, 2.0310), abs=2e-4)


def test_the_looks_together_pass_their_boundaries_alpha_of_the_time() -> None:
    """Brownian motion at the looks' information: the first passage at each look is that look's share of α."""
    looks = (4, 5, 6, 8, 10)
    z = np.array(boundaries(looks, 0.05))
    t = np.array(looks) / looks[-1]
    steps = np.random.default_rng(3).standard_normal((400_000, len(looks))) * np.sqrt(np.diff(t, prepend=0))
    passed = np.abs(np.cumsum(steps, axis=1) / np.sqrt(t)) >= z
    assert passed.any(axis=1).mean() == pytest.approx(0.05, abs=0.0015)


def test_boundaries_refuse_an_alpha_they_cannot_spend() -> None:
    for alpha in (0.0, 0.6, 1.0, float("nan")):
        with pytest.raises(ValueError, match="alpha must be above 0 and at most 0.5"):
            boundaries((2, 3), alpha)


def test_a_looks_level_is_stricter_early_in_a_family_and_never_past_alpha() -> None:
    looks = Looks(5, 20)
    alone = [looks.level(n, n) for n in range(5, 21)]
    assert alone == sorted(alone) and alone[-1] < 0.05 and alone[0] < 1e-4
    assert looks.level(20, 20, family=8) < looks.level(20, 20) / 7  # the family shares α
    assert looks.level(9, 14) == looks.level(9, 9)  # the look is the fewer side's
    assert looks.level(2, 2) == looks.level(5, 5) == looks.level(30, 30)  # outside the looks: the strictest


# ---------------------------------------------------------------- the verdicts at a look


def _frame(base: list[float], new: list[float]) -> pl.DataFrame:
    rows = [("a", v) for v in base] + [("b", v) for v in new]
    return pl.DataFrame({"side": [s for s, _ in rows], "iops": [v for _, v in rows], "run_unit": range(len(rows))})


def test_a_clear_change_waits_for_a_look_that_can_spend_enough() -> None:
    looks = Looks(4, 6)
    rng = np.random.default_rng(1)
    at = {}
    for n in (4, 5):
        frame = _frame(list(1000 + rng.normal(0, 5, n)), list(2000 + rng.normal(0, 5, n)))
        row = comparison_table(frame, "iops", factor="side", baseline="a", looks=looks).row(0, named=True)
        at[n] = row
    assert min_p(4, 4) > looks.level(4, 4) and at[4]["verdict"] == "not testable at this n"
    assert at[5]["verdict"] == "improved" and at[5]["look_level"] == pytest.approx(looks.level(5, 5))
    fixed = comparison_table(
        _frame([1000, 1001, 999, 1002], [2000, 2001, 1999, 2002]), "iops", factor="side", baseline="a"
    )
    assert fixed["verdict"][0] == "improved" and fixed["look_level"][0] is None  # a fixed design: Holm, as before
    note = verdict_note(at[5])
    assert "its look's" in note and "after Holm" not in note and "+" in note
    summary = design_summary(
        comparison_table(
            _frame([1000] * 5, [2000, 2001, 2002, 2003, 2004]), "iops", factor="side", baseline="a", looks=looks
        )
    )
    assert "repeated until this factor's comparisons settled" in summary and "Holm-corrected" not in summary


def test_the_verdict_key_says_what_a_look_decides() -> None:
    looks = Looks(4, 6)
    table = comparison_table(
        _frame([1000, 1001, 999, 1002, 1000], [1000, 1002, 998, 1001, 999]),
        "iops",
        factor="side",
        baseline="a",
        looks=looks,
        band=0.05,
    )
    assert table["verdict"][0] == "equivalent"
    key = verdict_key(
        comparison_table(
            _frame([1000, 1010, 990, 1020, 1005], [1200, 1000, 1100, 1050, 1001]),
            "iops",
            factor="side",
            baseline="a",
            looks=looks,
        )
    )
    assert "at its look" in key and "Holm" not in key


# ---------------------------------------------------------------- the rule


@pytest.mark.parametrize(
    ("text", "factor", "metric", "baseline", "band"),
    [
        ("controller settled", "controller", "iops", None, 0.02),
        ("controller settled on latency against PVSCSI band 5%", "controller", "latency", "PVSCSI", 0.05),
        ("rate_cap Settled on Bandwidth band 0%", "rate_cap", "bandwidth", None, 0.0),
        ('disk settled against "fast disk" band 5%', "disk", "iops", "fast disk", 0.05),
    ],
)
def test_settled_rules_parse(text: str, factor: str, metric: str, baseline: str | None, band: float) -> None:
    rule = parse_rule(text)
    assert isinstance(rule, SettleRule)
    assert (rule.factor, rule.metric, rule.baseline, rule.band) == (factor, metric, baseline, band)


def test_a_settled_rule_on_something_it_cannot_read_says_what_it_can() -> None:
    problem = parse_rule("controller settled on p99")
    assert isinstance(problem, str) and "iops, bandwidth, latency" in problem and "'p99'" in problem


def _cells(values: dict[str, list[float]]) -> tuple[dict, dict]:
    """Cells ``profile/c=<level>/bs=<size>`` of a controller comparison, with their run totals."""
    cells = {key: ("p", dict(part.split("=") for part in key.split("/")), False) for key in values}
    return cells, {k: tuple(v) for k, v in values.items()}


def test_each_comparison_is_between_cells_alike_in_all_else_and_shares_its_baseline() -> None:
    rng = np.random.default_rng(2)
    values = {
        "c=lsi/bs=4k": list(1000 + rng.normal(0, 3, 6)),
        "c=pv/bs=4k": list(1500 + rng.normal(0, 3, 6)),  # clear: settled
        "c=nv/bs=4k": list(1000 + rng.normal(0, 60, 6)),  # not yet
        "c=lsi/bs=64k": list(300 + rng.normal(0, 1, 6)),
        "c=pv/bs=64k": list(300 + rng.normal(0, 1, 6)),  # equivalent within ±5%
    }
    rule = SettleRule("c", "iops", "lsi", 0.05, "c settled against lsi band 5%")
    looked = {(c.baseline, c.other): c for c in comparisons(rule, *_cells(values), Looks(4, 8))}
    assert set(looked) == {
        ("c=lsi/bs=4k", "c=pv/bs=4k"),
        ("c=lsi/bs=4k", "c=nv/bs=4k"),
        ("c=lsi/bs=64k", "c=pv/bs=64k"),
    }
    assert looked[("c=lsi/bs=4k", "c=pv/bs=4k")].verdict == "improved"
    assert looked[("c=lsi/bs=64k", "c=pv/bs=64k")].verdict == "equivalent"
    assert not looked[("c=lsi/bs=4k", "c=nv/bs=4k")].settled
    assert {c.level for c in looked.values()} == {Looks(4, 8).level(6, 6, family=3)}  # the family of three


def test_a_settled_comparison_stays_settled_while_its_shared_baseline_runs_on() -> None:
    """The baseline runs on for another level's comparison: the settled one is judged on its own look (each
    side's first n runs), never on the baseline's later runs, so it cannot come open again."""
    rng = np.random.default_rng(4)
    values = {"c=lsi": list(1000 + rng.normal(0, 3, 6)), "c=pv": list(1500 + rng.normal(0, 3, 6))}
    values["c=nv"] = list(1000 + rng.normal(0, 60, 6))
    rule = SettleRule("c", "iops", "lsi", 0.05, "c settled against lsi band 5%")
    looks = Looks(4, 8)
    first = {(c.baseline, c.other): c for c in comparisons(rule, *_cells(values), looks)}
    values["c=lsi"] += [1600.0, 1700.0]  # the baseline's later runs, wild: the nv comparison's looks
    values["c=nv"] += list(1000 + rng.normal(0, 60, 2))
    later = {(c.baseline, c.other): c for c in comparisons(rule, *_cells(values), looks)}
    assert first[("c=lsi", "c=pv")].verdict == later[("c=lsi", "c=pv")].verdict == "improved"
    assert later[("c=lsi", "c=pv")].level == first[("c=lsi", "c=pv")].level  # still the look at 6 runs a side
    assert later[("c=lsi", "c=nv")].runs == (8, 8)


def test_a_comparison_a_side_of_which_has_no_complete_run_is_not_settled() -> None:
    values = {"c=lsi/bs=4k": [], "c=pv/bs=4k": [1000.0] * 5, "c=lsi/bs=8k": [900.0, 901, 899, 902], "c=pv/bs=8k": []}
    rule = SettleRule("c", "iops", "lsi", 0.05, "c settled")
    looked = comparisons(rule, *_cells(values), Looks(4, 8))
    assert len(looked) == 2 and not any(c.settled for c in looked)
    assert {c.verdict for c in looked} == {"not judged: a side has no complete run"}


def test_comparisons_of_two_rate_capped_cells_are_settled_at_once() -> None:
    """Both sides under a rate cap: more runs measure the cap again."""
    rule = SettleRule("c", "iops", "lsi", 0.02, "c settled")
    cells = {key: ("p", {"c": key}, True) for key in ("lsi", "pv")}
    (found,) = comparisons(rule, cells, {"lsi": (200.0, 201, 199, 200), "pv": (200.0, 199, 201, 202)}, Looks(4, 8))
    assert found.verdict == "rate-capped" and found.settled


PLAN = """
[study]
name = "settled"
[run]
runtime_s = 1
repetitions = {repetitions}
seed = 11
output = "study"
[target]
file = "{targets}/{{host}}.dat"
size = "8MiB"
[options]
ioengine = "psync"
direct = 0
[matrix.rate_cap]
levels = ["on", "off"]
options.on = {{ rate_iops = 200 }}
[[profiles]]
use = "randread-4k"
"""


def _plan_file(tmp_path: Path, repetitions: str) -> Path:
    path = tmp_path / "plan.toml"
    path.write_text(PLAN.format(repetitions=repetitions, targets=tmp_path / "targets"), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("until", "says"),
    [
        ("controller settled", "not a matrix factor with two levels or more (the plan's: rate_cap)"),
        ("rate_cap settled against half", "rate_cap has no level 'half' (its levels: ['on', 'off'])"),
    ],
)
def test_a_settled_rule_names_a_factor_and_level_of_the_plan(tmp_path: Path, until: str, says: str) -> None:
    with pytest.raises(PlanError, match="repetitions until") as error:
        load_plan(_plan_file(tmp_path, f'{{ min = 4, max = 6, until = "{until}" }}'))
    assert says in str(error.value)


def test_a_plan_whose_settled_rule_cannot_compare_or_look_so_often_says_why(tmp_path: Path) -> None:
    held = _plan_file(tmp_path, '{ min = 4, max = 6, until = "rate_cap settled" }')
    held.write_text(held.read_text().replace('use = "randread-4k"', 'use = "randread-4k"\nhold = { rate_cap = "off" }'))
    with pytest.raises(PlanError, match="no two cells differ only in rate_cap.*no comparison to settle"):
        load_plan(held)
    with pytest.raises(PlanError, match="at most 100 rounds: max - min is 196"):
        load_plan(_plan_file(tmp_path, '{ min = 4, max = 200, until = "rate_cap settled" }'))
    marked = _plan_file(tmp_path, "3")
    marked.write_text(marked.read_text().replace('levels = ["on", "off"]', 'levels = ["on", "[x](a.html)"]'))
    with pytest.raises(PlanError, match=r"a level may not hold '\['"):
        load_plan(marked)


@pytest.mark.parametrize(
    ("repetitions", "says"),
    [
        (
            {"min": 4, "max": 6, "until": "x settled", "settled": {"factor": "x", "metric": "iops", "band": 0.02}},
            "baseline",
        ),
        (
            {"min": 4, "max": 10**9, "settled": {"factor": "x", "metric": "iops", "baseline": "a", "band": 0.02}},
            "1000000000",
        ),
        ({"min": True, "max": 6, "settled": {"factor": "x", "metric": "iops", "baseline": "a", "band": 0.02}}, "true"),
        ({"min": 4, "max": 6, "settled": {"factor": "x", "metric": "p99", "baseline": "a", "band": 0.02}}, "p99"),
        ({"min": 4, "max": 6, "settled": "x settled"}, "x settled"),
    ],
)
def test_a_record_of_a_settled_rule_that_is_not_whole_is_refused_not_read_as_a_fixed_design(
    repetitions: dict, says: str, tmp_path: Path
) -> None:
    (tmp_path / "benchlib-plan.json").write_text(json.dumps({"repetitions": repetitions}))
    with pytest.raises(FormatError, match="a settled rule's factor, metric, baseline and band") as error:
        recorded_rule(tmp_path)
    assert says in str(error.value) and "benchlib-plan.json" in str(error.value)
    (tmp_path / "benchlib-plan.json").write_text("[1, 2")
    with pytest.raises(FormatError, match="as JSON"):
        recorded_rule(tmp_path)
    (tmp_path / "benchlib-plan.json").write_text(
        json.dumps({"repetitions": {"min": 3, "max": 9, "until": "iops within 5%"}})
    )
    assert recorded_rule(tmp_path) is None  # a precision rule's study: a fixed design's reading


def test_the_baseline_left_out_is_the_factors_first_level(tmp_path: Path) -> None:
    plan = load_plan(_plan_file(tmp_path, '{ min = 4, max = 6, until = "rate_cap settled" }'))
    assert plan.adaptive is not None and plan.adaptive.rule.baseline == "on"


# ---------------------------------------------------------------- real fio


@pytest.mark.fio
def test_a_plan_stops_once_its_comparison_is_settled_and_the_report_reads_it_at_that_look(
    fio_binary: str, tmp_path: Path
) -> None:
    """Capped at 200 IOPS against psync reads from the page cache: settled at the first look that can spend
    enough (5 runs a side of 4 to 6), not before, not after."""
    summary = run_plan(load_plan(_plan_file(tmp_path, '{ min = 4, max = 6, until = "rate_cap settled" }')))
    assert summary.done == 10 and not summary.missing
    assert {cell: state.runs for cell, (state, _) in summary.stopping.items()} == {
        "randread-4k/rate_cap=on": 5,
        "randread-4k/rate_cap=off": 5,
    }
    study = tmp_path / "study"
    assert not (study / "randread-4k/rate_cap=on/r6").exists()
    record = json.loads((study / "benchlib-repetitions.json").read_text())
    (comparison,) = record["comparisons"]
    assert comparison["verdict"] == "improved" and comparison["runs"] == [5, 5] and comparison["settled"]
    assert [(look["at"], look["verdict"]) for look in comparison["looks"]] == [
        (4, "not testable at this n"),
        (5, "improved"),
    ]
    assert comparison["look_level"] == pytest.approx(Looks(4, 6).level(5, 5))
    settled = json.loads((study / "benchlib-plan.json").read_text())["repetitions"]["settled"]
    assert settled == {"factor": "rate_cap", "metric": "iops", "baseline": "on", "band": 0.02}  # the baseline named
    looks = recorded_looks(study, "rate_cap")
    assert looks == Looks(4, 6, band=0.02) and recorded_looks(study, "block_size") is None
    report = ingest_study(study, tmp_path / "processed")
    assert report.ok
    from benchlib.store import open_study
    from benchlib.views import run_totals, settled_looks, settled_rule
    from benchlib.words.design import settled_words
    from benchlib.words.interaction import settled_caveat

    processed = open_study(study, tmp_path / "processed")
    assert settled_looks(processed, "rate_cap") == looks
    said = settled_words(settled_rule(processed))
    assert "ran 4 to 6 times" in said and "comparison of rate cap against on (iops, band ±2%)" in said
    assert "repeated until rate cap's comparisons settled" in settled_caveat(settled_rule(processed))
    units = run_totals(processed, "iops", ["rate_cap"])
    table = comparison_table(units, "iops", factor="rate_cap", baseline="on", looks=looks)
    # the report's row: the cap's side is rate-capped, the other is not, so the row is tested at the same look
    assert table["runs_baseline"][0] == table["runs"][0] == 5
    assert table["look_level"][0] == pytest.approx(comparison["look_level"])
    assert table["verdict"][0] == "improved"
