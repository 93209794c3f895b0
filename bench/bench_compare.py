"""Benchmark: the comparison table for 50 configurations x 10 runs.

Synthetic per-run IOPS (seeded) in 50 configurations (25 pairs of controller
levels across 25 block-size x queue-depth cells), compared with
``benchlib.stats.compare.comparison_table``: exact Mann-Whitney p, Moses'
exact interval of the change, Cliff's delta with its interval (until 2026-11-23
a vectorised bootstrap of 10,000 resamples per comparison made the interval).
Appends the time to ``bench/results.md``.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import polars as pl
from _results import record

from benchlib.stats.compare import comparison_table


def main() -> None:
    rng = np.random.default_rng(2026)
    rows = []
    for cell in range(25):
        for controller, scale in (("LSI", 1.0), ("PVSCSI", 1.0 + 0.02 * (cell % 5))):
            rows += [{"cell": f"c{cell:02d}", "controller": controller, "iops": v} for v in rng.normal(10_000 * scale, 150, 10)]
    runs = pl.DataFrame(rows)
    start = time.perf_counter()
    table = comparison_table(runs, "iops", factor="controller", baseline="LSI", by=["cell"])
    seconds = time.perf_counter() - start
    if table.height != 25 or table["runs"].min() != 10:  # every comparison made, from every run
        raise SystemExit(f"{table.height} comparisons of {table['runs'].min()} runs, expected 25 of 10; no figure")
    if sys.argv[1:] == ["--smoke"]:
        print(f"smoke: {table.height} comparisons in {seconds:.2f} s")
        return
    record("comparison table", [
        ("configurations x runs", f"{runs['cell'].n_unique() * 2} x 10"),
        ("interval of the change", "exact (Moses), no resampling"),
        ("comparisons", table.height),
        ("significant after Holm", int((table["delta"] != "~").sum())),
        ("verdicts", ", ".join(f"{n} {v}" for v, n in table["verdict"].value_counts().sort("verdict").iter_rows())),
        ("seconds", round(seconds, 2)),
    ])


if __name__ == "__main__":
    main()
