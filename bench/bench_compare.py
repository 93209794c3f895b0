"""Benchmark: the comparison table for 50 configurations x 10 runs, 10,000 bootstrap resamples each.

Synthetic per-run IOPS (seeded) in 50 configurations (25 pairs of controller
levels across 25 block-size x queue-depth cells), compared with
``benchlib.stats.compare.comparison_table``. The bootstrap is vectorised: no
Python loop over resamples. Appends the time to ``bench/results.md``.
"""

from __future__ import annotations

import platform
import time
from pathlib import Path

import numpy as np
import polars as pl

from benchlib.stats.compare import comparison_table

HERE = Path(__file__).resolve().parent


def main() -> None:
    rng = np.random.default_rng(2026)
    rows = []
    for cell in range(25):
        for controller, scale in (("LSI", 1.0), ("PVSCSI", 1.0 + 0.02 * (cell % 5))):
            rows += [{"cell": f"c{cell:02d}", "controller": controller, "iops": v} for v in rng.normal(10_000 * scale, 150, 10)]
    runs = pl.DataFrame(rows)
    start = time.perf_counter()
    table = comparison_table(runs, "iops", factor="controller", baseline="LSI", by=["cell"], rng=np.random.default_rng(1), n_resamples=10_000)
    seconds = time.perf_counter() - start
    significant = (table["delta"] != "~").sum()
    text = (
        f"\n## {time.strftime('%Y-%m-%d %H:%M')} comparison table ({platform.machine()}, Python {platform.python_version()})\n\n"
        "| measure | value |\n|---|---|\n"
        f"| configurations x runs | {runs['cell'].n_unique() * 2} x 10 |\n"
        f"| bootstrap resamples per comparison | 10,000 |\n"
        f"| comparisons | {table.height} |\n"
        f"| significant after Holm | {significant} |\n"
        f"| seconds | {seconds:.2f} |\n"
    )
    print(text)
    with open(HERE / "results.md", "a") as handle:
        handle.write(text)


if __name__ == "__main__":
    main()
