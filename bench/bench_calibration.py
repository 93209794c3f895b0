"""Issue 40's calibration: the rates a reader gets from the comparison page's plan and the interaction test.

With the true spread and change plugged into :func:`benchlib.stats.compare.runs_for`, fresh experiments of
that many runs per side (lognormal runs, seeded) are compared by :func:`comparison_table`; the share that
reads the verdict sought is what a reader can expect from the page's 80% plan.

The interaction page's test (:func:`benchlib.stats.factorial.interaction_p`) on run totals without any
interaction, each combination with its own run-to-run spread: the share of experiments with p <= 0.05, its
own and the permutation test's alone; and with a true interaction, the share it finds.

The suite (``--suite``): the rates ``tests/test_calibration_suite.py`` asserts, over more tables, for each way runs
spread (:data:`tests.calibration_cases.KINDS`).

Repeated until settled (``--sequential``): 8 comparisons looked at after every round from 5 to 20 runs a side
(lognormal, CV 3%), each stopping once improved, regressed or equivalent: the family's false verdicts with the
looks' spending (:mod:`benchlib.stats.sequential`) and with each look read as a fixed table (peeking); and per
comparison, the share reaching the right verdict and the runs a side it took, against a fixed 20 runs.

Precision rules (``--precision``): one cell's runs (lognormal, CV 2%, and heavy-tailed: one run in ten 30% down)
stopped by ``iops within 5%`` (the mean's t interval) or ``iops median within 5%`` (the median's exact
interval), 3 to 12 runs: the runs it took, the stopped estimate's bias, and how often the stopped interval
covers the true mean or median.

Run order: 8 comparisons of two identical levels, 10 runs a side under AR(1) drift (lag-1 correlation 0.6,
CV 3%), any change counting (band 0): the share of tables with a false *improved* or *regressed*, run in two
blocks and shuffled within each repetition, and the share the test alone would have called.

    .venv/bin/python bench/bench_calibration.py [--reps 400] [--interaction | --order | --suite | --sequential | --precision]
"""

from __future__ import annotations

import argparse
import math
import sys
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
from _results import record

from benchlib.stats.compare import SETTLE_POWER, comparison_table, runs_for
from benchlib.stats.factorial import interaction_p

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the suite's cases live beside its tests
from benchlib.stats.sequential import Looks  # noqa: E402
from tests.calibration_cases import KINDS, calibration_study, sequential_table  # noqa: E402

START = datetime(2026, 11, 28, 9, 0)

#: (run-to-run CV, true change, the verdict planned for)
CASES = ((0.05, 0.05, "improved"), (0.02, 0.0, "equivalent"), (0.10, -0.10, "regressed"), (0.03, 0.08, "improved"))


def _experiment(rng: np.random.Generator, runs: int, cv: float, change: float) -> pl.DataFrame:
    base = 1000 * rng.lognormal(0, cv, runs)
    new = 1000 * (1 + change) * rng.lognormal(0, cv, runs)
    return pl.DataFrame({"side": ["a"] * runs + ["b"] * runs, "iops": [*base, *new]})


#: (what it is, levels of a and b, runs per combination in a-major order, CV of each, noise, interaction)
INTERACTION_CASES = (
    ("2 x 2, 3 runs each, every CV 2%", 2, 2, [3] * 4, [0.02] * 4, "normal", 0.0),
    ("2 x 2, 3 runs each, one CV 8%, the others 2%", 2, 2, [3] * 4, [0.02, 0.02, 0.02, 0.08], "normal", 0.0),
    ("2 x 2, 5 runs each, one CV 8%", 2, 2, [5] * 4, [0.02, 0.02, 0.02, 0.08], "normal", 0.0),
    ("2 x 2, 6 runs, the one at CV 8% 3 runs", 2, 2, [6, 6, 6, 3], [0.02, 0.02, 0.02, 0.08], "normal", 0.0),
    ("3 x 2, 3 runs each, CVs 2, 2, 4, 4, 8, 8%", 3, 2, [3] * 6, [0.02, 0.02, 0.04, 0.04, 0.08, 0.08], "normal", 0.0),
    ("2 x 2, 3 runs each, one CV 8%, t(3) noise", 2, 2, [3] * 4, [0.02, 0.02, 0.02, 0.08], "t3", 0.0),
    ("2 x 2, 3 runs each, every CV 2%, a true +8% in one", 2, 2, [3] * 4, [0.02] * 4, "normal", 0.08),
)


def interaction_experiment(
    rng: np.random.Generator, a: int, b: int, runs: list[int], cvs: list[float], noise: str, change: float
) -> pl.DataFrame:
    """One experiment's log run totals: main effects, each combination's own spread, ``change`` in the first."""
    rows = []
    for cell, (count, cv) in enumerate(zip(runs, cvs, strict=True)):
        i, j = divmod(cell, b)
        draws = rng.standard_t(3, count) / math.sqrt(3) if noise == "t3" else rng.normal(size=count)
        centre = math.log(1000) + 0.3 * i + 0.2 * j + (math.log1p(change) if cell == 0 else 0.0)
        rows += [{"a": f"a{i}", "b": f"b{j}", "log_iops": centre + cv * d} for d in draws]
    return pl.DataFrame(rows)


def interaction_rates(reps: int, *, resamples: int = 999, seed: int = 2) -> list[tuple[str, float, float]]:
    """Per case: the share of experiments with the page's p <= 0.05, and with the permutation test's alone."""
    out = []
    for name, a, b, runs, cvs, noise, change in INTERACTION_CASES:
        rng = np.random.default_rng(seed)
        both = alone = 0
        for _ in range(reps):
            found = interaction_p(
                interaction_experiment(rng, a, b, runs, cvs, noise, change),
                "log_iops",
                "a",
                "b",
                rng=rng,
                n_resamples=resamples,
            )
            both += found["p"] <= 0.05
            alone += found["p_permutation"] <= 0.05
        out.append((name, both / reps, alone / reps))
    return out


def drifting(rng: np.random.Generator, blocks: bool, groups: int = 8, runs: int = 10) -> pl.DataFrame:
    """Two identical levels under AR(1) drift, run in two blocks or shuffled within each repetition."""
    rows = []
    for group in range(groups):
        noise = np.zeros(2 * runs)
        noise[0] = rng.normal()
        for i in range(1, 2 * runs):
            noise[i] = 0.6 * noise[i - 1] + rng.normal() * math.sqrt(1 - 0.36)
        sides = ["a"] * runs + ["b"] * runs if blocks else []
        sides = sides or [s for _ in range(runs) for s in (("a", "b") if rng.random() < 0.5 else ("b", "a"))]
        rows += [
            {
                "group": group,
                "side": side,
                "iops": 1000 * math.exp(0.03 * e),
                "start_time": START + timedelta(minutes=i),
            }
            for i, (side, e) in enumerate(zip(sides, noise, strict=True))
        ]
    return pl.DataFrame(rows)


def order_rates(reps: int, seed: int = 5) -> list[tuple[str, float]]:
    """The share of tables with a false improved/regressed, and with a row the order made no verdict."""
    out = []
    for blocks in (True, False):
        rng = np.random.default_rng(seed)
        false = confounded = 0
        for _ in range(reps):
            table = comparison_table(drifting(rng, blocks), "iops", factor="side", baseline="a", by=["group"], band=0)
            verdicts = set(table["verdict"])
            false += bool(verdicts & {"improved", "regressed"})
            confounded += "confounded with time" in verdicts
        name = "two blocks" if blocks else "shuffled within each repetition"
        out += [(f"{name}: tables with a false improved or regressed", false / reps)]
        out += [(f"{name}: tables with a row confounded with time (the test alone: false)", confounded / reps)]
    return out


def suite_rates(reps: int) -> list[tuple[str, float]]:
    """Each kind's family-wise false change (no change, band 0), interval coverage (+5%) and band-edge errors."""
    out = []
    for kind in KINDS:
        rng = np.random.default_rng(17)
        false = wrong = covered = intervals = 0
        for _ in range(reps):
            table = comparison_table(
                calibration_study(rng, kind, 0.0), "iops", factor="side", baseline="a", by=["group"], band=0
            )
            false += bool(set(table["verdict"]) & {"improved", "regressed"})
            table = comparison_table(
                calibration_study(rng, kind, 0.05), "iops", factor="side", baseline="a", by=["group"], band=0
            )
            covered += int(((table["ratio_low"] <= 1.05) & (table["ratio_high"] >= 1.05)).sum())
            intervals += table.height
            edge = calibration_study(rng, kind, 0.02, cv=0.02)
            table = comparison_table(edge, "iops", factor="side", baseline="a", by=["group"], band=0.02)
            wrong += bool(set(table["verdict"]) & {"improved", "equivalent"})
        out += [
            (f"{kind}: no change, tables with a false improved or regressed", false / reps),
            (f"{kind}: a true +5%, intervals that cover it", covered / intervals),
            (f"{kind}: a true +2% on the band's edge, tables with an improved or equivalent", wrong / reps),
        ]
    return out


#: (true change, band, the right verdict) of the sequential rates
SEQUENTIAL_CASES = (
    (0.0, 0.0, None),
    (0.05, 0.02, "improved"),
    (0.10, 0.02, "improved"),
    (0.20, 0.02, "improved"),
    (0.0, 0.05, "equivalent"),
)


def sequential_rates(reps: int) -> list[tuple[str, float]]:
    """Each case's rates repeated until settled (looks 5..20), peeking without spending, and fixed at 20 runs."""
    looks, out = Looks(5, 20), []
    for change, band, right in SEQUENTIAL_CASES:
        rng = np.random.default_rng(23)
        tables = {"settled": [], "peeking": [], "fixed 20": []}
        for _ in range(reps):
            study = calibration_study(rng, "lognormal", change, runs=20)
            tables["settled"].append(sequential_table(study, looks, band))
            tables["peeking"].append(sequential_table(study, looks, band, spend=False))
            tables["fixed 20"].append(
                comparison_table(study, "iops", factor="side", baseline="a", by=["group"], band=band)
            )
        case = f"{change:+.0%}, band {band:.0%}"
        for how, done in tables.items():
            if right is None:
                false = np.mean([bool(set(t["verdict"]) & {"improved", "regressed"}) for t in done])
                out.append((f"{case}, {how}: tables with a false improved or regressed", float(false)))
                continue
            verdicts = [v for t in done for v in t["verdict"]]
            out.append((f"{case}, {how}: comparisons reading {right}", verdicts.count(right) / len(verdicts)))
            out.append((f"{case}, {how}: runs a side, mean", float(np.mean([n for t in done for n in t["runs"]]))))
    return out


def precision_rates(reps: int, seed: int = 5) -> list[tuple[str, float]]:
    """Each precision rule's runs, bias and coverage at its stop, on plain and heavy-tailed runs."""
    from scipy import stats

    from benchlib.runner.repetitions import half_width, parse_rule
    from benchlib.stats.compare import median_ci

    rng, out = np.random.default_rng(seed), []
    tail = rng.lognormal(0, 0.02, 10**6) * np.where(rng.random(10**6) < 0.1, 0.7, 1.0)
    for kind, truth in (("lognormal", {"mean": math.exp(0.02**2 / 2), "median": 1.0}), ("heavy-tailed", None)):
        truth = truth or {"mean": float(tail.mean()), "median": float(np.median(tail))}
        for text in ("iops within 5%", "iops median within 5%", "iops within 2%", "iops median within 2%"):
            rule = parse_rule(text)
            runs, bias, covered = [], [], 0
            for _ in range(reps):
                x = rng.lognormal(0, 0.02, 12)
                x = x * np.where(rng.random(12) < 0.1, 0.7, 1.0) if kind == "heavy-tailed" else x
                k = next(
                    k
                    for k in range(3, 13)
                    if k == 12 or ((w := half_width(list(x[:k]), rule)) is not None and w <= rule.within)
                )
                s, true = x[:k], truth[rule.statistic]
                if rule.statistic == "mean":
                    half = stats.t.ppf(0.975, k - 1) * s.std(ddof=1) / math.sqrt(k)
                    centre, covered = s.mean(), covered + bool(abs(s.mean() - true) <= half)
                else:
                    ci = median_ci(s, 0.95)
                    centre, covered = np.median(s), covered + bool(ci.low is not None and ci.low <= true <= ci.high)
                runs.append(k)
                bias.append(centre / true - 1)
            out += [
                (f"{kind}, {text!r}: runs, mean", float(np.mean(runs))),
                (f"{kind}, {text!r}: bias of the stopped estimate (%)", 100 * float(np.mean(bias))),
                (f"{kind}, {text!r}: stopped intervals that cover the truth", covered / reps),
            ]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--interaction", action="store_true", help="the interaction test's rates instead")
    parser.add_argument("--order", action="store_true", help="the comparisons' rates under drift instead")
    parser.add_argument("--suite", action="store_true", help="the calibration suite's rates, every kind of runs")
    parser.add_argument("--sequential", action="store_true", help="repeated until settled: rates and runs")
    parser.add_argument("--precision", action="store_true", help="the precision rules' runs, bias and coverage")
    args = parser.parse_args()
    reps = args.reps
    if args.suite:
        title = "calibration suite: 8 comparisons of 10 runs a side, CV 3% (2% at the band's edge), alpha 0.05"
        record(title, [("tables per kind and case", reps), *suite_rates(reps)])
        return
    if args.precision:
        title = "precision rules: one cell, 3 to 12 runs, CV 2% (heavy-tailed: one run in ten 30% down)"
        record(title, [("cells per case", reps), *precision_rates(reps)])
        return
    if args.sequential:
        title = "repeated until settled: 8 comparisons, 5 to 20 runs a side, lognormal CV 3%, alpha 0.05"
        record(title, [("tables per case", reps), *sequential_rates(reps)])
        return
    if args.order:
        title = "run order: 8 comparisons, 10 runs a side, AR(1) drift, no true change"
        record(title, [("tables per order", reps), *order_rates(reps)])
        return
    if args.interaction:
        rows: list[tuple[str, object]] = [("experiments per case", reps), ("alpha", 0.05)]
        for name, both, alone in interaction_rates(reps):
            rows += [(f"{name}: p <= 0.05, the page's test", both), (f"{name}: the permutation test alone", alone)]
        record("interaction test: the share of experiments that call an interaction", rows)
        return
    rows = [("experiments per case", reps), ("power planned for", SETTLE_POWER)]
    for cv, change, verdict in CASES:
        runs, _ = runs_for(cv, math.log1p(change))
        rng = np.random.default_rng(1)
        hits = sum(
            comparison_table(_experiment(rng, runs, cv, change), "iops", factor="side", baseline="a")["verdict"][0]
            == verdict
            for _ in range(reps)
        )
        rows.append((f"CV {cv:.0%}, change {change:+.0%}: {runs} runs a side, share reading {verdict}", hits / reps))
    record("runs to settle: the verdict's rate at the runs planned, true spread and change", rows)


if __name__ == "__main__":
    main()
