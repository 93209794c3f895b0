"""The calibration suite (issue 40): what the comparison page promises, checked by seeded simulation over the
ways real runs spread (:data:`tests.calibration_cases.KINDS`), 8 comparisons of 10 runs a side in a table.

Each promise is asserted within two standard errors of its simulation: the family's false *improved* or
*regressed* at most α under no change; the change interval covering the true change at least 95% of the
time; a change exactly on the band's edge called *improved* or *equivalent* (both wrong) at most α of the
tables. The first and the last hold too where the runs are repeated until each comparison settles
(:mod:`benchlib.stats.sequential`), looked at after every round. The rates themselves are in
``bench/results.md`` (``bench/bench_calibration.py --suite`` and ``--sequential``).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from benchlib.runner.repetitions import PrecisionRule, parse_rule, stopping
from benchlib.stats.compare import comparison_table, median_ci
from benchlib.stats.sequential import Looks
from tests.calibration_cases import KINDS, calibration_study, sequential_table

ALPHA = 0.05


def _table(study, band: float):  # noqa: ANN001, ANN202 - a frame of calibration_study, its comparison table
    return comparison_table(study, "iops", factor="side", baseline="a", by=["group"], band=band)


def _two_se(promised: float, trials: int) -> float:
    """Return two standard errors of a rate of ``promised`` measured over ``trials``."""
    return 2 * math.sqrt(promised * (1 - promised) / trials)


@pytest.mark.parametrize("kind", KINDS)
def test_no_change_reads_as_a_change_in_at_most_alpha_of_the_tables(kind: str) -> None:
    rng, reps = np.random.default_rng(7), 120
    false = sum(
        bool(set(_table(calibration_study(rng, kind, 0.0), band=0)["verdict"]) & {"improved", "regressed"})
        for _ in range(reps)
    )
    assert false / reps <= ALPHA + _two_se(ALPHA, reps)


@pytest.mark.parametrize("kind", KINDS)
def test_the_change_interval_covers_the_true_change(kind: str) -> None:
    rng, reps, covered, intervals = np.random.default_rng(8), 60, 0, 0
    for _ in range(reps):
        table = _table(calibration_study(rng, kind, 0.05), band=0)
        covered += int(((table["ratio_low"] <= 1.05) & (table["ratio_high"] >= 1.05)).sum())
        intervals += table.height
    assert covered / intervals >= 0.95 - _two_se(0.95, intervals)


@pytest.mark.parametrize("kind", KINDS)
def test_a_change_on_the_band_edge_is_called_improved_or_equivalent_in_at_most_alpha_of_the_tables(
    kind: str,
) -> None:
    rng, reps = np.random.default_rng(9), 100
    wrong = sum(
        bool(
            set(_table(calibration_study(rng, kind, 0.02, cv=0.02), band=0.02)["verdict"]) & {"improved", "equivalent"}
        )
        for _ in range(reps)
    )
    assert wrong / reps <= ALPHA + _two_se(ALPHA, reps)


#: the looks of the sequential promises: 5 to 12 runs a side, a look after every round
LOOKS = Looks(5, 12)


@pytest.mark.parametrize("kind", KINDS)
def test_runs_repeated_until_settled_read_no_change_as_a_change_in_at_most_alpha_of_the_tables(kind: str) -> None:
    """Looking after every round and stopping a comparison once it is settled: the family's rate stays at α."""
    rng, reps = np.random.default_rng(17), 60
    false = sum(
        bool(
            set(sequential_table(calibration_study(rng, kind, 0.0, runs=12), LOOKS, 0)["verdict"])
            & {"improved", "regressed"}
        )
        for _ in range(reps)
    )
    assert false / reps <= ALPHA + _two_se(ALPHA, reps)


@pytest.mark.parametrize("kind", ["normal", "tied"])
def test_runs_repeated_until_settled_call_a_change_on_the_band_edge_improved_or_equivalent_in_at_most_alpha(
    kind: str,
) -> None:
    rng, reps = np.random.default_rng(18), 60
    wrong = sum(
        bool(
            set(sequential_table(calibration_study(rng, kind, 0.02, runs=12, cv=0.02), LOOKS, 0.02)["verdict"])
            & {"improved", "equivalent"}
        )
        for _ in range(reps)
    )
    assert wrong / reps <= ALPHA + _two_se(ALPHA, reps)


def test_a_clear_change_settles_before_the_last_look() -> None:
    """+20% at a 3% spread: every comparison improved, most of them at the first look that can spend enough."""
    rng = np.random.default_rng(19)
    tables = [sequential_table(calibration_study(rng, "lognormal", 0.2, runs=12), LOOKS, 0.02) for _ in range(10)]
    verdicts = [v for t in tables for v in t["verdict"]]
    runs = np.array([n for t in tables for n in t["runs"]])
    assert set(verdicts) == {"improved"} and np.mean(runs) < 10 and runs.max() <= LOOKS.last


def _stopped(values: np.ndarray, rule: PrecisionRule, first: int = 3) -> np.ndarray:
    """Return the runs the runner's precision rule (:func:`benchlib.runner.repetitions.stopping`) stops at."""
    folders = [Path(f"r{i + 1}") for i in range(len(values))]
    total = dict(zip(folders, values.tolist(), strict=True)).get
    for k in range(first, len(values) + 1):
        if stopping("cell", folders[:k], rule, total).met:
            return values[:k]
    return values


def test_the_median_rule_stops_with_an_interval_that_covers_the_median_of_heavy_tailed_runs() -> None:
    """One run in ten 30% down: the median's exact interval at the stop covers the true median 95% of the time.

    (The mean's t interval does not: it stops on a cell that has not yet seen a slow run; bench/results.md.)
    """
    rng, reps = np.random.default_rng(21), 600
    population = rng.lognormal(0, 0.02, 10**6) * np.where(rng.random(10**6) < 0.1, 0.7, 1.0)
    truth = float(np.median(population))
    rule = parse_rule("iops median within 5%")
    assert isinstance(rule, PrecisionRule)
    covered = 0
    for _ in range(reps):
        runs = _stopped(rng.lognormal(0, 0.02, 12) * np.where(rng.random(12) < 0.1, 0.7, 1.0), rule)
        interval = median_ci(runs, rule.confidence)
        covered += interval.low is not None and interval.low <= truth <= interval.high
    assert covered / reps >= 0.95 - _two_se(0.95, reps)
