"""Runs with a known truth for the calibration suite (issue 40) and ``bench/bench_calibration.py --suite``.

Each kind is a way real runs spread, every one multiplicative (a change of ``change`` is the same shift of
log run totals whatever the noise): ``normal`` (CV ``cv``), ``lognormal``, ``tied`` (lognormal rounded to
steps of 2% of the level: a tool that prints two digits), ``heavy-tailed`` (lognormal, one run in ten 30%
down: a stalled run) and ``drifting`` (AR(1) noise, lag-1 correlation 0.6, over the runs in the order they
ran). The two sides alternate in a random order within each repetition, as benchlib's plans run them.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import numpy as np
import polars as pl

from benchlib.runner.repetitions import SETTLED
from benchlib.stats.compare import comparison_table
from benchlib.stats.sequential import Looks

KINDS = ("normal", "lognormal", "tied", "heavy-tailed", "drifting")
START = datetime(2026, 11, 28, 9, 0)


def _noise(rng: np.random.Generator, kind: str, count: int, cv: float) -> np.ndarray:
    """Return ``count`` multiplicative noise factors of ``kind``, in run order."""
    if kind == "normal":
        return 1 + cv * rng.normal(size=count)
    if kind == "heavy-tailed":
        return rng.lognormal(0, cv, count) * np.where(rng.random(count) < 0.1, 0.7, 1.0)
    if kind == "drifting":
        drift = np.zeros(count)
        drift[0] = rng.normal()
        for i in range(1, count):
            drift[i] = 0.6 * drift[i - 1] + rng.normal() * math.sqrt(1 - 0.36)
        return np.exp(cv * drift)
    return rng.lognormal(0, cv, count)  # lognormal, and tied before its rounding


def calibration_study(
    rng: np.random.Generator, kind: str, change: float, *, groups: int = 8, runs: int = 10, cv: float = 0.03
) -> pl.DataFrame:
    """Return ``groups`` comparisons of side ``a`` with ``b`` (truly ``1 + change`` times ``a``), a row per run.

    Columns: ``group``, ``side``, ``iops``, ``run_unit`` and ``start_time`` (a minute apart, in the order run).
    """
    rows = []
    for group in range(groups):
        order = [side for _ in range(runs) for side in (("a", "b") if rng.random() < 0.5 else ("b", "a"))]
        noise = _noise(rng, kind, 2 * runs, cv)
        for i, (side, factor) in enumerate(zip(order, noise, strict=True)):
            value = 1000 * factor * (1 + change if side == "b" else 1)
            if kind == "tied":
                value = round(value / 20) * 20
            rows.append(
                {
                    "group": group,
                    "side": side,
                    "iops": value,
                    "run_unit": f"{group}-{i}",
                    "start_time": START + timedelta(minutes=i),
                }
            )
    return pl.DataFrame(rows)


def sequential_table(study: pl.DataFrame, looks: Looks, band: float, *, spend: bool = True) -> pl.DataFrame:
    """Return the comparison table a ``settled`` rule ends with on ``study`` (runs in the order they ran).

    Every group starts with ``looks.first`` runs a side; after each look a group whose verdict is settled
    (:data:`benchlib.runner.repetitions.SETTLED`) keeps the runs it has, and the others take one more run a
    side, up to ``looks.last``.
    ``spend=False``: each look read as a fixed design's table (what peeking without spending does).
    """
    study = study.sort("start_time").with_columns(nth=pl.int_range(pl.len()).over("group", "side") + 1)
    upto = dict.fromkeys(study["group"].unique().to_list(), looks.first)
    while True:
        taken = study.filter(pl.col("nth") <= pl.col("group").replace_strict(upto))
        table = comparison_table(
            taken, "iops", factor="side", baseline="a", by=["group"], band=band, looks=looks if spend else None
        )
        going = [
            g
            for g, verdict in zip(table["group"], table["verdict"], strict=True)
            if verdict not in SETTLED and upto[g] < looks.last
        ]
        if not going:
            return table
        upto |= {g: upto[g] + 1 for g in going}
