"""The calibration suite (issue 40): what the comparison page promises, checked by seeded simulation over the
ways real runs spread (:data:`tests.calibration_cases.KINDS`), 8 comparisons of 10 runs a side in a table.

Each promise is asserted within two standard errors of its simulation: the family's false *improved* or
*regressed* at most α under no change; the change interval covering the true change at least 95% of the
time; a change exactly on the band's edge called *improved* or *equivalent* (both wrong) at most α of the
tables. The rates themselves are in ``bench/results.md`` (``bench/bench_calibration.py --suite``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchlib.stats.compare import comparison_table
from tests.calibration_cases import KINDS, calibration_study

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
