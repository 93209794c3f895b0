"""Adaptive repetitions: the rule's grammar and arithmetic, and real fio plans that stop when the
run total is precise enough, or say that it never was."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats

from benchlib.cli import main
from benchlib.ingest import ingest_study
from benchlib.runner import PlanError, load_plan, run_plan
from benchlib.runner.repetitions import half_width, parse_rule
from benchlib.stats.compare import runs_needed
from benchlib.store import scan_table

PLAN = """
[study]
name = "adaptive"
[run]
runtime_s = 1
repetitions = {repetitions}
seed = 7
output = "study"
[target]
file = "{targets}/{{host}}.dat"
size = "8MiB"
[options]
ioengine = "psync"
direct = 0
[matrix.rate_cap]
levels = [{cap}]
options.on = {{ rate_iops = 200 }}
[[profiles]]
use = "randread-4k"
"""


def _plan_file(tmp_path: Path, repetitions: str, cap: str = '"on"') -> Path:
    path = tmp_path / "plan.toml"
    path.write_text(PLAN.format(repetitions=repetitions, targets=tmp_path / "targets", cap=cap), encoding="utf-8")
    return path


# ---------------------------------------------------------------- the rule


@pytest.mark.parametrize(
    ("text", "metric", "statistic", "within", "confidence"),
    [
        ("iops within 5%", "iops", "mean", 0.05, 0.95),
        ("latency median within 3%", "latency", "median", 0.03, 0.95),
        ("Bandwidth within 2.5 % at 99%", "bandwidth", "mean", 0.025, 0.99),
    ],
)
def test_rules_parse(text: str, metric: str, statistic: str, within: float, confidence: float) -> None:
    rule = parse_rule(text)
    assert not isinstance(rule, str)
    assert (rule.metric, rule.statistic, rule.within, rule.confidence) == (metric, statistic, within, confidence)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("iops < 5%", "is neither a precision rule"),
        ("cpu within 5%", "not 'cpu'"),
        ("iops within 0%", "above 0"),
        ("iops within 5% at 30%", "50%"),
        ("__import__('os') within 5%", "is neither a precision rule"),
    ],
)
def test_bad_rules_say_what_to_write(text: str, says: str) -> None:
    problem = parse_rule(text)
    assert isinstance(problem, str) and says in problem


def test_half_width_is_the_t_interval_and_the_exact_median_interval() -> None:
    values = [100.0, 104.0, 97.0, 101.0]
    rule = parse_rule("iops within 5%")
    assert not isinstance(rule, str)
    low, high = stats.t.interval(0.95, 3, loc=np.mean(values), scale=stats.sem(values))
    assert half_width(values, rule) == pytest.approx((high - low) / 2 / np.mean(values))
    median = parse_rule("iops median within 5%")
    assert not isinstance(median, str)
    assert half_width(values, median) is None  # no 95% order-statistic interval below 6 runs
    six = [100.0, 104.0, 97.0, 101.0, 99.0, 103.0]  # n = 6: [x(1), x(6)] at 96.9%
    assert half_width(six, median) == pytest.approx(max(104 / 100.5 - 1, 1 - 97 / 100.5))
    assert half_width([100.0], rule) is None
    assert half_width([0.0, 0.0], rule) is None


def test_runs_needed_is_the_smallest_n_that_meets_the_precision() -> None:
    values = [100.0, 130.0, 70.0, 110.0, 90.0]
    cv = np.std(values, ddof=1) / np.mean(values)
    n = runs_needed(values, relative_error=0.05)
    assert stats.t.ppf(0.975, n - 1) * cv / np.sqrt(n) <= 0.05 < stats.t.ppf(0.975, n - 2) * cv / np.sqrt(n - 1)
    # 3 runs at 8.4% half-width need more than 3, not fewer (a fixed-point iteration once returned 3)
    three = [100.0, 103.0, 97.5]
    width = stats.t.ppf(0.975, 2) * np.std(three, ddof=1) / np.sqrt(3) / np.mean(three)
    assert width > 0.05 and runs_needed(three, relative_error=0.05) > 3
    with pytest.raises(ValueError, match="at least 2"):
        runs_needed([100.0])


# ---------------------------------------------------------------- the plan


@pytest.mark.parametrize(
    ("repetitions", "says"),
    [
        ("{ min = 3, max = 10 }", "missing until"),
        ('{ min = 3, max = 3, until = "iops within 5%" }', "max above min"),
        ('{ min = 1, max = 5, until = "iops within 5%" }', "at least 2"),
        ('{ min = 3, max = 10, until = "iops within 5", extra = 1 }', "unknown keys"),
        ('{ min = 3, max = 10, until = "p99 within 5%" }', "can read iops, bandwidth, latency"),
        ('{ min = 3, max = 20000, until = "iops within 5%" }', "at most 10,000"),
    ],
)
def test_adaptive_plans_that_cannot_run_say_why(tmp_path: Path, repetitions: str, says: str) -> None:
    with pytest.raises(PlanError, match="repetitions") as error:
        load_plan(_plan_file(tmp_path, repetitions))
    assert says in str(error.value)


def test_a_fixed_number_still_means_what_it_did(tmp_path: Path) -> None:
    plan = load_plan(_plan_file(tmp_path, "4"))
    assert plan.repetitions == plan.max_repetitions == 4 and plan.adaptive is None


# ---------------------------------------------------------------- real fio


@pytest.mark.fio
def test_a_precise_cell_stops_at_min_and_says_so(fio_binary: str, tmp_path: Path) -> None:
    plan = load_plan(_plan_file(tmp_path, '{ min = 2, max = 4, until = "iops within 25%" }'))
    summary = run_plan(plan)
    assert summary.done == 2 and not summary.missing  # rate-capped at 200 IOPS: two runs agree within 25%
    state, words = summary.stopping["randread-4k/rate_cap=on"]
    assert state.met and state.runs == 2 and words.startswith("rule met after 2 runs")
    study = tmp_path / "study"
    assert not (study / "randread-4k/rate_cap=on/r3").exists()
    record = json.loads((study / "benchlib-repetitions.json").read_text())
    cell = record["cells"]["randread-4k/rate_cap=on"]
    assert cell["met"] and cell["runs"] == 2 and all(180 < v < 220 for v in cell["run_totals"])
    assert json.loads((study / "benchlib-plan.json").read_text())["repetitions"]["until"] == "iops within 25%"


@pytest.mark.fio
def test_an_unreachable_rule_runs_to_max_says_not_met_and_resumes_to_nothing(
    fio_binary: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _plan_file(tmp_path, '{ min = 2, max = 3, until = "iops within 0.0001%" }', cap='"on", "off"')
    plan = load_plan(path)
    summary = run_plan(plan)
    assert summary.done == sum(state.runs for state, _ in summary.stopping.values())
    state, words = summary.stopping["randread-4k/rate_cap=off"]
    assert not state.met and state.runs == 3 and "NOT met" in words and "maximum of 3" in words
    again = run_plan(load_plan(path))  # a rerun decides the same from the same files: nothing to run
    assert again.done == 0 and again.stopping["randread-4k/rate_cap=off"][0].values == state.values
    assert again.already == summary.done  # the adaptive rounds' runs count as done before
    record = json.loads((tmp_path / "study" / "benchlib-repetitions.json").read_text())
    steps = record["cells"]["randread-4k/rate_cap=off"]["decisions"]
    assert [d["runs"] for d in steps] == [2, 3] and [d["decided"] for d in steps] == [
        "run once more",
        "stop: maximum reached",
    ]
    report = ingest_study(tmp_path / "study", tmp_path / "processed")
    assert report.ok
    runs = scan_table(report.processed, "runs").filter(format="fio-json+").collect()
    capped_runs = summary.stopping["randread-4k/rate_cap=on"][0].runs
    assert sorted(zip(runs["rate_cap"], runs["repetition"], strict=True)) == [
        ("off", 1),
        ("off", 2),
        ("off", 3),
        *(("on", r) for r in range(1, capped_runs + 1)),
    ]  # one run per repetition, the adaptive one included
    results = scan_table(report.processed, "results").collect().join(runs.select("run_id", "rate_cap"), on="run_id")
    capped = dict(results.group_by("rate_cap").agg(pl.col("rate_limited").unique()).iter_rows())
    assert capped == {"on": [True], "off": [False]}  # fio's rate_iops, read from its own json+
    assert main(["run", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "adaptive, 2 to 3 per cell" in out and "3 runs" in out and "up to 0 more runs" in out
    met = sum(state.met for state, _ in summary.stopping.values())
    assert f"{met} of 2 cells meet the rule now" in out
    assert "power: 2 runs a side cannot show any change as an effect, however large" in out  # the design's fewest
    assert "  power: at the spread these cells show (median CV " in out  # the runs a 5% and a 10% change need
