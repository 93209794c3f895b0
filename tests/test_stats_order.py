"""Run order (issue 40): sides run in blocks of time are found, and their verdicts say a drift could be it."""

from __future__ import annotations

import itertools
import math
from datetime import datetime, timedelta

import numpy as np
import polars as pl
import pytest

from benchlib.stats.compare import comparison_table
from benchlib.stats.order import alternation_p, sides_in_time
from tests.conftest import ROOT

START = datetime(2026, 11, 28, 9, 0)


@pytest.mark.parametrize(("m", "n"), [(2, 2), (3, 3), (3, 5), (4, 6), (6, 6)])
def test_the_runs_test_is_exact(m: int, n: int) -> None:
    """Every arrangement of m and n runs enumerated: the share with as few alternations or fewer is the p."""
    arrangements = [[i in chosen for i in range(m + n)] for chosen in itertools.combinations(range(m + n), m)]

    def runs(sides: list[bool]) -> int:
        return 1 + sum(a != b for a, b in zip(sides, sides[1:], strict=False))

    for sides in arrangements[:: max(1, len(arrangements) // 25)]:
        expected = sum(runs(other) <= runs(sides) for other in arrangements) / len(arrangements)
        assert alternation_p(sides) == pytest.approx(expected)
    assert alternation_p([True] * m + [False] * n) == pytest.approx(2 / math.comb(m + n, m))


def _times(minutes: list[int]) -> list[datetime]:
    return [START + timedelta(minutes=m) for m in minutes]


def test_sides_are_in_blocks_when_one_ran_before_the_other_and_unknown_without_times() -> None:
    assert sides_in_time(_times([0, 1, 2]), _times([3, 4, 5])) == "in blocks"  # 3 then 3: p = 0.1, but apart
    assert sides_in_time(_times([0, 2, 4]), _times([1, 3, 5])) == "mixed"
    assert sides_in_time(_times([5]), _times([0])) == "mixed"  # one run a side: no block to speak of
    # ten a side, mostly one then the other (3 alternations; chance gives 3 or fewer with p = 0.0005)
    assert sides_in_time(_times([*range(9), 19]), _times(list(range(9, 19)))) == "in blocks"
    assert sides_in_time(_times([0, 1]), [None, START]) is None


def test_a_drift_over_time_is_no_verdict_where_the_sides_ran_in_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Calibration (issue 40): 8 comparisons of two identical levels, 10 runs a side under AR(1) drift, the
    practical band 0 (any change counts). Run in two blocks (all baseline runs first), a table held a false
    improved or regressed about 60% of the time; now none, those rows read *confounded with time*. Shuffled
    within each repetition, as benchlib runs a plan, at most alpha + 2 SE (seeded, 150 tables each)."""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    from bench_calibration import drifting  # the runs bench/bench_calibration.py --order records the rates of

    rng, reps = np.random.default_rng(5), 150
    bound = 0.05 + 2 * math.sqrt(0.05 * 0.95 / reps)
    for order in ("in blocks", "mixed"):
        false = confounded = 0
        for _ in range(reps):
            runs = drifting(rng, blocks=order == "in blocks")
            table = comparison_table(runs, "iops", factor="side", baseline="a", by=["group"], band=0)
            verdicts = set(table["verdict"])
            false += bool(verdicts & {"improved", "regressed"})
            confounded += "confounded with time" in verdicts
            assert set(table["order"]) == {order}
        assert false / reps <= bound, (order, false / reps)
        if order == "in blocks":  # what the test alone would have called: drift read as an effect
            assert confounded / reps > 0.4, confounded / reps
        else:
            assert confounded == 0


def test_without_start_times_the_order_is_unknown_and_the_verdict_stands() -> None:
    runs = pl.DataFrame({"side": ["a"] * 6 + ["b"] * 6, "iops": [100.0, 101, 99, 100.5, 99.5, 100.2] + [120.0] * 6})
    table = comparison_table(runs, "iops", factor="side", baseline="a")
    assert table["order"][0] is None and table["verdict"][0] == "improved"
    timed = runs.with_columns(pl.Series("start_time", _times(list(range(12)))))
    blocked = comparison_table(timed, "iops", factor="side", baseline="a")
    assert blocked["order"][0] == "in blocks" and blocked["verdict"][0] == "confounded with time"
    assert blocked["delta"][0] == "~" and blocked["p_holm"][0] < 0.05  # the test is kept, not taken as a verdict


def test_the_page_says_once_that_tested_runs_without_times_have_no_order_to_check() -> None:
    from benchlib.caveats import ORDER_UNKNOWN
    from benchlib.words.compare import order_caveat, verdict_note

    runs = pl.DataFrame({"side": ["a"] * 6 + ["b"] * 6, "iops": [100.0, 101, 99, 100.5, 99.5, 100.2] + [120.0] * 6})
    caveat = order_caveat(comparison_table(runs, "iops", factor="side", baseline="a"))
    assert caveat is not None and caveat.flag == ORDER_UNKNOWN and "no start times" in caveat.text
    timed = runs.with_columns(pl.Series("start_time", _times(list(range(12)))))
    blocked = comparison_table(timed, "iops", factor="side", baseline="a")
    assert order_caveat(blocked) is None  # the order is known: the row says it
    assert "each side in a block of time of its own" in verdict_note(blocked.row(0, named=True))
    once = comparison_table(runs.head(1).vstack(runs.tail(1)), "iops", factor="side", baseline="a")
    assert once["verdict"][0] == "descriptive only" and order_caveat(once) is None  # nothing tested to doubt


def _shuffled_study(rng: np.random.Generator, per_hour: float) -> list[list[tuple]]:
    """8 configurations x 10 runs, shuffled in time 90 s apart, CV 3% noise, and a trend ``per_hour``."""
    order = [c for c in range(8) for _ in range(10)]
    rng.shuffle(order)
    groups: list[list[tuple]] = [[] for _ in range(8)]
    for k, c in enumerate(order):
        noise = rng.normal()
        hours = 1.5 * k / 60
        groups[c].append(
            (START + timedelta(hours=hours), 1000 * (1 + c / 10) * math.exp(per_hour * hours + 0.03 * noise))
        )
    return groups


def test_the_drift_check_finds_a_trend_within_configurations_and_none_where_there_is_none() -> None:
    """Calibration (issue 40): shuffled studies with no trend are called drifting at most alpha + 2 SE of
    the time; a trend of +5% an hour is found and its interval covers it; a configuration's level never
    enters (the levels differ by 10% each, and no trend is read from them). Seeded, 200 studies each."""
    from benchlib.stats.order import drift_within

    rng, reps = np.random.default_rng(11), 200
    bound = 0.05 + 2 * math.sqrt(0.05 * 0.95 / reps)
    still = [drift_within(_shuffled_study(rng, 0.0)) for _ in range(reps)]
    assert sum(d.drifted for d in still) / reps <= bound
    trend = math.log1p(0.05)
    moving = [drift_within(_shuffled_study(rng, trend)) for _ in range(reps)]
    assert sum(d.drifted for d in moving) / reps > 0.95
    assert sum(d.low <= 0.05 <= d.high for d in moving) / reps >= 0.95 - 2 * math.sqrt(0.05 * 0.95 / reps)
    assert drift_within([[(START, 1.0), (START + timedelta(hours=1), 2.0)]]) is None  # 2 runs: no trend of its own


def test_the_index_says_the_drift_over_a_configurations_span_once() -> None:
    """The bundled loopback study: 3 runs a configuration over about 6 minutes each; the design section says
    the change over that span with its interval. Its 8 rate-capped configurations are left out: a capped total
    is the cap's, and with them in, the pooled trend read 0 (+0.2%, interval from +0.0%), hiding the rest's."""
    from benchlib.pipeline import front_matter
    from benchlib.stats.order import Drift
    from benchlib.store import open_study
    from benchlib.words.design import drift_words

    design = front_matter(open_study("loopback-fio"))["design"]
    assert design.count("**Drift.** Within configurations, run totals moved") == 1
    assert "21 configurations of 3 runs or more, 63 runs): the system changed while the study ran" in design
    moved = Drift(per_hour=0.05, low=0.03, high=0.07, confidence=0.95, configurations=8, runs=80, hours=2.0)
    assert "moved +10.2% over the 2.0 hours" in drift_words(moved) and "the system changed" in drift_words(moved)
    assert drift_words(None) == ""
