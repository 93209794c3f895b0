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

Stopping on precision, never on the effect, keeps the later comparison honest. A rare slow
run fools the mean's interval (a cell that has not met one yet looks precise and stops high);
the median's is not fooled.

Or until a factor's comparisons are settled: ``until = "controller settled [on <metric>] [against
<level>] [band <p>%]"`` (:class:`SettleRule`) stops each comparison's two cells once it is improved,
regressed or equivalent, each look spending part of α (:mod:`benchlib.stats.sequential`), so that the
report, which reads the recorded rule, judges each at its look's level.
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
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from benchlib.errors import FormatError, quoted

if TYPE_CHECKING:
    from benchlib.stats.sequential import Looks

#: What a rule may read, and the column of the ``results`` table behind it.
METRICS = {"iops": "iops", "bandwidth": "bandwidth_bytes_per_s", "latency": "lat_mean_ns"}
_RULE = re.compile(
    r"\s*(?P<metric>[a-z0-9_]+)\s+(?:(?P<statistic>mean|median)\s+)?within\s+(?P<within>\d+(?:\.\d+)?)\s*%"
    r"(?:\s+at\s+(?P<confidence>\d+(?:\.\d+)?)\s*%)?\s*"
)
RULE_EXAMPLES = '"iops within 5%", "latency median within 3%", "bandwidth within 2% at 99%"'
_SETTLE = re.compile(
    r"\s*(?P<factor>[A-Za-z0-9_-]+)\s+settled(?:\s+on\s+(?P<metric>[A-Za-z0-9_]+))?"
    r"(?:\s+against\s+(?:\"(?P<quoted>[^\"]+)\"|(?P<baseline>\S+?)))?(?:\s+band\s+(?P<band>\d+(?:\.\d+)?)\s*%)?\s*",
    re.IGNORECASE,
)
SETTLE_EXAMPLES = (
    '"controller settled", "controller settled on latency against pvscsi band 5%", '
    "'disk settled against \"fast disk\"' (a level with spaces, in double quotes)"
)
#: the most rounds a settled rule looks after (max - min + 1): each look's boundary costs a pass over the ones before
MOST_LOOKS = 100


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


@dataclass(frozen=True)
class SettleRule:
    """Stop repeating a comparison's cells once its verdict is settled (:mod:`benchlib.stats.sequential`).

    Each comparison of ``factor`` against ``baseline`` (None: the factor's first level), between cells alike
    in all else, on the run total of ``metric``; settled when it is improved, regressed or equivalent against
    the band of ±``band``, each look spending part of ``alpha`` (the family's, split over its comparisons).
    """

    factor: str
    metric: str
    baseline: str | None
    band: float  # fraction: 0.02 for 2%
    text: str
    alpha: float = 0.05

    def recorded(self) -> dict[str, object]:
        """Return the rule's parts as ``benchlib-plan.json`` keeps them (the baseline named, the band exact)."""
        return {"factor": self.factor, "metric": self.metric, "baseline": self.baseline, "band": self.band}

    def describe(self) -> str:
        """Say the rule in words."""
        against = f"against {self.baseline}" if self.baseline else "against its first level"
        return (
            f"each comparison of {self.factor} {against} on the {self.metric} run total stops once it is improved, "
            f"regressed or equivalent (band ±{self.band * 100:.4g}%), each look spending part of α = {self.alpha:g} "
            "(O'Brien-Fleming-type)"
        )


def parse_rule(text: str) -> PrecisionRule | SettleRule | str:
    """Return the rule ``text`` states, or a sentence saying what is wrong with it."""
    if settle := _SETTLE.fullmatch(text):
        metric = (settle["metric"] or "iops").lower()
        if metric not in METRICS:
            return f"{text!r}: a comparison can be settled on {', '.join(METRICS)}, not {metric!r}"
        band = float(settle["band"] or 2) / 100
        if not 0 <= band < 1:
            return f"{text!r}: 'band' must be a percentage from 0 to below 100"
        return SettleRule(settle["factor"], metric, settle["quoted"] or settle["baseline"], band, text.strip())
    match = _RULE.fullmatch(text.lower())
    if not match:
        return (
            f"{text!r} is neither a precision rule (like {RULE_EXAMPLES}) nor a comparison's (like {SETTLE_EXAMPLES})"
        )
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
        **_record_head(rule, minimum, maximum),
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
    _write_record(path, record)


#: the verdicts that settle a comparison (:class:`SettleRule`): rate-capped runs measure the cap, however many
SETTLED = ("improved", "regressed", "equivalent", "rate-capped")
#: the verdict of a comparison one of whose cells has no complete run yet
UNJUDGED = "not judged: a side has no complete run"


@dataclass(frozen=True)
class Comparison:
    """One comparison a :class:`SettleRule` watches: the baseline's cell and the other level's, at one look."""

    baseline: str  # the cells' keys
    other: str
    runs: tuple[int, int]  # each side's complete runs (the look is at the fewer)
    level: float | None  # the look's nominal two-sided level (None: no test at these runs)
    low: float | None  # the ratio's repeated confidence interval at that level
    high: float | None
    change_pct: float | None
    verdict: str

    @property
    def settled(self) -> bool:
        """Whether its verdict stops its cells."""
        return self.verdict in SETTLED


def comparisons(
    rule: SettleRule,
    cells: dict[str, tuple[str, dict[str, str], bool]],
    values: dict[str, tuple[float, ...]],
    looks: Looks,
) -> list[Comparison]:
    """Return each comparison of ``rule.factor`` against its baseline between cells alike in all else.

    ``cells``: each cell's key, profile, levels and whether it runs under a rate cap; ``values``: its
    complete run totals in the order run. The verdicts are :func:`benchlib.stats.compare.comparison_table`'s
    at each comparison's look (each side's first n runs, n the fewer side's): the report reads the same runs
    the same way. A comparison a side of which has no complete run yet is :data:`UNJUDGED`, never settled.
    """
    import polars as pl

    from benchlib.stats.compare import comparison_table

    rows, keys = [], {}
    for key, (profile, levels, capped) in cells.items():
        if rule.factor not in levels:
            continue
        group = "/".join([profile, *(f"{k}={v}" for k, v in sorted(levels.items()) if k != rule.factor)])
        keys[(group, levels[rule.factor])] = key
        rows += [
            {"group": group, "level": levels[rule.factor], "value": v, "run_unit": f"{key}#{i}", "rate_capped": capped}
            for i, v in enumerate(values.get(key, ()))
        ]
    pairs = [(g, lv) for g, lv in keys if lv != rule.baseline and (g, rule.baseline) in keys]
    judged = {}
    if rows and rule.baseline in {row["level"] for row in rows}:
        table = comparison_table(
            pl.DataFrame(rows),
            "value",
            factor="level",
            baseline=rule.baseline,
            by=["group"],
            band=rule.band,
            alpha=rule.alpha,
            higher_is_better=rule.metric != "latency",
            looks=looks,
        )
        judged = {(row["group"], row["level"]): row for row in table.iter_rows(named=True)}
    out = []
    for group, level in pairs:
        base, other = keys[(group, rule.baseline)], keys[(group, level)]
        sides = (len(values.get(base, ())), len(values.get(other, ())))
        row = judged.get((group, level))
        if row is None:
            out.append(Comparison(base, other, sides, None, None, None, None, UNJUDGED))
            continue
        found = (row["look_level"], row["band_low"], row["band_high"], row["change_pct"], row["verdict"])
        out.append(Comparison(base, other, sides, *found))
    return out


def write_settle_record(
    path: Path,
    rule: SettleRule,
    minimum: int,
    maximum: int,
    states: list[CellStopping],
    looked: list[Comparison],
    history: dict[tuple[str, str], dict[int, Comparison]] | None = None,
) -> None:
    """Write where a :class:`SettleRule`'s comparisons and cells stand (``benchlib-repetitions.json``) atomically.

    ``history``: each comparison's verdict at every look it reached, by its runs a side.
    """

    def look(c: Comparison) -> dict:
        return {
            "runs": list(c.runs),
            "look_level": c.level,
            "interval": [c.low, c.high],
            "change_pct": None if c.change_pct is None else round(c.change_pct, 4),
            "verdict": c.verdict,
        }

    history = history or {}
    record = {
        **_record_head(rule, minimum, maximum),
        "cells": {
            s.cell: {"runs": s.runs, "run_totals": list(s.values), "met": s.met, "complete": s.complete} for s in states
        },
        "comparisons": [
            {
                "baseline": c.baseline,
                "other": c.other,
                **look(c),
                "settled": c.settled,
                "looks": [{"at": n} | look(seen) for n, seen in sorted(history.get((c.baseline, c.other), {}).items())],
            }
            for c in looked
        ],
    }
    _write_record(path, record)


def _record_head(rule: PrecisionRule | SettleRule, minimum: int, maximum: int) -> dict:
    """Return what both repetition records open with: the rule as written and in words, min and max."""
    return {"rule": rule.text, "meaning": rule.describe(), "min": minimum, "max": maximum}


def _write_record(path: Path, record: dict) -> None:
    """Write ``benchlib-repetitions.json`` atomically: a reader never meets half a record."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    with contextlib.suppress(FileNotFoundError):
        partial.replace(path)


def recorded_rule(folder: Path) -> tuple[SettleRule, Looks] | None:
    """Return the ``settled`` rule the runs under ``folder`` were repeated by, and its looks; None for any other.

    ``benchlib run`` records its plan's repetitions in ``benchlib-plan.json`` (a settled rule's parts under
    ``settled``); a study whose runs were repeated until a factor's comparisons settled must read each of
    them at its look's level (:mod:`benchlib.stats.sequential`). None without a record, or for a fixed or
    precision-rule study. A record that names a settled rule it does not give whole is refused: read as a
    fixed design, its comparisons would claim more than the runs support.

    Raises
    ------
    FormatError
        The record's settled rule is missing a part, or a part is not what ``benchlib run`` writes.
    """
    path = folder / "benchlib-plan.json"
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:
        raise FormatError(path, "whole file", f"benchlib run's record of its plan, as JSON ({exc})") from None
    repetitions = recorded.get("repetitions") if isinstance(recorded, dict) else None
    parts = repetitions.get("settled") if isinstance(repetitions, dict) else None
    if parts is None:
        return None
    return _settled_from(path, repetitions, parts)


def _settled_from(path: Path, repetitions: dict, parts: object) -> tuple[SettleRule, Looks]:
    """Return the rule and looks a record's ``repetitions`` gives, or refuse the record naming what is wrong."""
    from benchlib.stats.sequential import Looks

    first, last = repetitions.get("min"), repetitions.get("max")
    fine = (
        isinstance(parts, dict)
        and all(isinstance(parts.get(k), str) and parts[k] for k in ("factor", "metric", "baseline"))
        and parts.get("metric") in METRICS
        and type(parts.get("band")) in (int, float)
        and 0 <= parts["band"] < 1
        and type(first) is int
        and type(last) is int
        and 2 <= first < last <= first + MOST_LOOKS - 1
    )
    if not fine:
        raise FormatError(
            path,
            "repetitions",
            "a settled rule's factor, metric, baseline and band, with min from 2 and max above it by fewer than "
            f"{MOST_LOOKS}, as benchlib run writes them; run the plan again to rewrite the record",
            found=quoted(json.dumps({"min": first, "max": last, "settled": parts}, default=str), 200),
        )
    assert isinstance(parts, dict)
    rule = SettleRule(parts["factor"], parts["metric"], parts["baseline"], float(parts["band"]), "")
    return rule, Looks(first, last, rule.alpha, rule.band)


def recorded_looks(folder: Path, factor: str) -> Looks | None:
    """Return the looks a recorded ``settled`` rule took at ``factor``'s comparisons (:func:`recorded_rule`)."""
    found = recorded_rule(folder)
    return found[1] if found is not None and found[0].factor == factor else None


def recorded_grouping(folder: Path, factors: Collection[str]) -> str | None:
    """Return the factor ``benchlib run`` grouped each repetition's runs by (``benchlib-plan.json``), or None.

    A plan that sets a hard-to-change factor (the controller: each change stops the VMs) runs each repetition
    as groups of its levels, in random order (:attr:`benchlib.runner.plan.Plan.grouped_by`). A record without
    it, unreadable, or naming none of ``factors`` says nothing of the kind.
    """
    try:
        recorded = json.loads((folder / "benchlib-plan.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # no record (a study of other tools); recorded_rule refuses one
        return None
    factor = recorded.get("grouped_by") if isinstance(recorded, dict) else None
    return factor if isinstance(factor, str) and factor in factors else None
