"""How often the runs the comparison page plans give the verdict they plan for (issue 40's calibration).

With the true spread and change plugged into :func:`benchlib.stats.compare.runs_for`, fresh experiments of
that many runs per side (lognormal runs, seeded) are compared by :func:`comparison_table`; the share that
reads the verdict sought is what a reader can expect from the page's 80% plan.

    .venv/bin/python bench/bench_calibration.py [--reps 400]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import polars as pl
from _results import record

from benchlib.stats.compare import SETTLE_POWER, comparison_table, runs_for

#: (run-to-run CV, true change, the verdict planned for)
CASES = ((0.05, 0.05, "improved"), (0.02, 0.0, "equivalent"), (0.10, -0.10, "regressed"), (0.03, 0.08, "improved"))


def _experiment(rng: np.random.Generator, runs: int, cv: float, change: float) -> pl.DataFrame:
    base = 1000 * rng.lognormal(0, cv, runs)
    new = 1000 * (1 + change) * rng.lognormal(0, cv, runs)
    return pl.DataFrame({"side": ["a"] * runs + ["b"] * runs, "iops": [*base, *new]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=400)
    reps = parser.parse_args().reps
    rows: list[tuple[str, object]] = [("experiments per case", reps), ("power planned for", SETTLE_POWER)]
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
