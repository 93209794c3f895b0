"""How many repetitions a cell gets: a fixed number, or until its run metric is precise enough.

A plan asks for adaptive repetitions with a table::

    [run]
    repetitions = { min = 3, max = 10, until = "iops within 5%" }

Every cell runs ``min`` times (in the shuffled order of a fixed plan); then, round
after round, each cell whose rule is not met runs once more, until the rule holds
or the cell has ``max`` runs. The rule reads the **run total** (every host of one
repetition together: IOPS and bandwidth add, latency is I/O-weighted), never a
host or a job, because the run is the experimental unit.

A rule is ``"<metric> [mean|median] within <p>% [at <c>%]"``:

* metric: ``iops``, ``bandwidth`` or ``latency`` (mean completion latency);
* ``mean`` (default): Student's t interval of the mean run total (Hoefler & Belli,
  rule 5: "measured until the 99% CI was within 5% of the reported mean");
  ``median``: the exact order-statistic interval of the median (none at 95% below
  6 runs), its half-width benchstat's ``±``;
* ``within <p>%``: the interval's larger half, relative to the centre, at most p%;
* ``at <c>%``: the interval's confidence (default 95%).

Stopping on precision, never on the effect, keeps the later comparison honest.
Each decision is written to ``benchlib-repetitions.json`` beside the study: the
runs, their totals, the half-width, and whether the rule was met or the cell hit
``max`` first (pbench-fio and the Phoronix Test Suite stop on a standard
deviation and say nothing when they give up; benchlib says so).
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchlib.errors import FormatError

#: What a rule may read, and the column of the ``results`` table behind it.
METRICS = {"iops": "iops", "bandwidth": "bandwidth_bytes_per_s", "latency": "lat_mean_ns"}
_RULE = re.compile(
    r"\s*(?P<metric>[a-z0-9_]+)\s+(?:(?P<statistic>mean|median)\s+)?within\s+(?P<within>\d+(?:\.\d+)?)\s*%"
    r"(?:\s+at\s+(?P<confidence>\d+(?:\.\d+)?)\s*%)?\s*"
)
RULE_EXAMPLES = '"iops within 5%", "latency median within 3%", "bandwidth within 2% at 99%"'


@dataclass(frozen=True)
class PrecisionRule:
    """Stop repeating a cell once the interval of its run metric is this narrow."""

    metric: str
    statistic: str
    within: float  # fraction: 0.05 for 5%
    confidence: float  # fraction: 0.95
    text: str

    def describe(self) -> str:
        """Say the rule in words."""
        kind = "t interval of the mean" if self.statistic == "mean" else "order-statistic interval of the median"
        return f"{self.metric} run total: {self.confidence:.0%} {kind} within ±{self.within * 100:.4g}% of it"


def parse_rule(text: str) -> PrecisionRule | str:
    """Return the rule ``text`` states, or a sentence saying what is wrong with it."""
    match = _RULE.fullmatch(text.lower())
    if not match:
        return f"{text!r} is not a precision rule; write one like {RULE_EXAMPLES}"
    metric = match["metric"]
    if metric not in METRICS:
        return f"{text!r}: the rule can read {', '.join(METRICS)}, not {metric!r}"
    within = float(match["within"]) / 100
    confidence = float(match["confidence"] or 95) / 100
    if not 0 < within < 1:
        return f"{text!r}: 'within' must be a percentage above 0 and below 100"
    if not 0.5 <= confidence < 1:
        return f"{text!r}: 'at' must be a confidence from 50% to below 100%"
    return PrecisionRule(metric, match["statistic"] or "mean", within, confidence, text.strip())


def half_width(values: list[float], rule: PrecisionRule) -> float | None:
    """Return the interval's larger half relative to its centre, or None where none exists.

    None for fewer than 2 runs, a centre of 0, or (median) too few runs for an
    order-statistic interval at the rule's confidence.
    """
    x = np.asarray(values, dtype=float)
    if len(x) < 2 or not np.all(np.isfinite(x)):
        return None
    if rule.statistic == "mean":
        centre = float(x.mean())
        if centre <= 0:
            return None
        from scipy import stats  # here, not at import: `benchlib run` starts without scipy

        t = stats.t.ppf(0.5 + rule.confidence / 2, len(x) - 1)
        return float(t * x.std(ddof=1) / math.sqrt(len(x)) / centre)
    from benchlib.stats.compare import median_ci

    ci = median_ci(x, rule.confidence)
    if ci.low is None or ci.high is None or ci.median <= 0:
        return None
    return max(ci.high / ci.median - 1, 1 - ci.low / ci.median)


def run_total(folder: Path, hosts: tuple[str, ...], metric: str, manifest: str) -> float | None:
    """Return the run total of ``metric`` for one repetition folder, or None until every host has a result.

    Each host's result comes from the attempt that completed it (a rerun fills in only missing hosts).
    """
    from benchlib.sources import read
    from benchlib.stats.aggregate import total_expr

    column = METRICS[metric]
    frames = []
    covered: set[str] = set()
    for path in sorted(folder.glob(f"attempt-*/{manifest}")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            tables = read(path.parent / "fio.json", "fio-json")
        except (OSError, ValueError, FormatError):
            continue
        ok = set(record.get("hosts_ok", [])) - covered
        if not ok:
            continue
        rows = tables.results.filter(~tables.results["is_aggregate"]).join(
            tables.runs.select("run_id", "host"), on="run_id"
        )
        if hosts != ("local",):
            rows = rows.filter(rows["host"].is_in(sorted(ok)))
        if column == "lat_mean_ns":
            rows = rows.with_columns(lat_mean_ns=rows["lat_mean_ns"].fill_null(rows["clat_mean_ns"]))
        frames.append(rows.select(column, "io_count"))
        covered |= ok
    if not set(hosts) <= covered or not frames:
        return None
    import polars as pl

    value = pl.concat(frames).select(total_expr(column)).item()
    return float(value) if value is not None else None


@dataclass(frozen=True)
class CellStopping:
    """Where one cell stands against the rule after its complete runs."""

    cell: str
    values: tuple[float, ...]
    half_width: float | None
    met: bool
    complete: bool  # every repetition so far has every host's result

    @property
    def runs(self) -> int:
        """Runs the decision rests on."""
        return len(self.values)


def stopping(
    cell: str, folders: list[Path], rule: PrecisionRule, total: Callable[[Path], float | None]
) -> CellStopping:
    """Judge one cell from its repetition folders ``r1 .. rk`` (in order); ``total`` reads one folder's run total."""
    values = []
    for folder in folders:
        value = total(folder)
        if value is None:
            return CellStopping(cell, tuple(values), half_width(values, rule), False, complete=False)
        values.append(value)
    width = half_width(values, rule)
    return CellStopping(cell, tuple(values), width, width is not None and width <= rule.within, complete=True)


def outcome(state: CellStopping, rule: PrecisionRule, maximum: int) -> str:
    """Say in words how a cell's repetitions ended (or stand)."""
    width = "no interval yet" if state.half_width is None else f"±{state.half_width * 100:.2f}%"
    if not state.complete:
        return f"incomplete after {state.runs} complete runs (a host's result is missing); {width}"
    if state.met:
        return f"rule met after {state.runs} runs: {width} (asked ±{rule.within * 100:.4g}%)"
    if state.runs >= maximum:
        return (
            f"rule NOT met: stopped at the maximum of {maximum} runs with {width} "
            f"(asked ±{rule.within * 100:.4g}%); report this cell's interval as it is"
        )
    return f"{state.runs} runs so far: {width}, asked ±{rule.within * 100:.4g}%"


def write_record(path: Path, rule: PrecisionRule, minimum: int, maximum: int, states: list[CellStopping]) -> None:
    """Write the stopping decisions (``benchlib-repetitions.json``) atomically."""
    record = {
        "rule": rule.text,
        "meaning": rule.describe(),
        "min": minimum,
        "max": maximum,
        "cells": {
            s.cell: {
                "runs": s.runs,
                "run_totals": list(s.values),
                "half_width_pct": None if s.half_width is None else round(s.half_width * 100, 4),
                "met": s.met,
                "complete": s.complete,
                "outcome": outcome(s, rule, maximum),
                # each decision: the half-width after that many runs (from minimum on), and what it decided
                "decisions": [
                    {
                        "runs": k,
                        "half_width_pct": None
                        if (w := half_width(list(s.values[:k]), rule)) is None
                        else round(w * 100, 4),
                        "decided": "stop: rule met"
                        if w is not None and w <= rule.within
                        else ("stop: maximum reached" if k >= maximum else "run once more"),
                    }
                    for k in range(minimum, s.runs + 1)
                ],
            }
            for s in states
        },
    }
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    with contextlib.suppress(FileNotFoundError):
        partial.replace(path)
