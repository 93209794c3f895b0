"""Claims are data: a write-up's statements, recomputed from the tidy tables.

``claims.toml`` beside a study binds each statement of a write-up
to a declarative computation over the tidy tables; ``verify`` recomputes them.

A claim::

    [tolerances]                 # what the words mean, relative to the stated value
    about = 0.10
    essentially_equal = 0.05

    [[claims]]
    id = "1"
    section = "Without SIOC"
    says = "With LSI, the best VM got 5.6 times the bandwidth of the worst."
    stated = "5.6x"
    metric = "bandwidth_mib_s"
    where = { test = "seqread", controller = "LSI", sioc = "off" }
    compute = "max_over_min"
    expect = { about = 5.6 }     # or above / below / between / equals; tolerance = "<word>"

Computations (``compute``) and their parameters:

===============  ====================================================================
value            the metric of the one selected row
sum, mean,       over the selected rows (the members of a run)
median, min, max
max_over_min     largest / smallest
jain             Jain's fairness index
range            [smallest, largest]
ratio            ``of`` / ``to``: two extra selections, each reduced by ``reduce`` (sum);
                 ``to = "<name>"`` divides by a bound declared in ``[bounds]`` instead
percent_change   from ``from`` to ``to`` (two extra selections), in percent
argmax           the level of ``over`` where the metric is largest
lowest           the ``k`` levels of ``over`` with the smallest metric (sorted)
monotonic        "increasing", "decreasing", "flat" or "neither" along ``over`` (numeric
                 order): every step must change by at least ``step`` (a fraction or a
                 tolerance word; default the ``trend`` tolerance, else 0) to count
                 as a rise or a fall, and a step smaller than that is flat
trails           max of ``lower`` / min of ``higher``: below 1 when every one trails
each             every row's metric; ``expect`` must hold for each
reconcile        every row's ``reported`` column against iops / (usr + sys CPU), the
                 IOPS taken from rows ``iops_from`` matched on ``join``
bounded          every row's ``reported`` column at most iops / (usr + sys CPU), the IOPS
                 the largest run total of rows ``iops_from`` matched on ``join`` (all its
                 members together): a bound that holds whichever member a table used
queue_model      what the queue what-if model (:mod:`benchlib.stats.queuemodel`) predicts for
                 ``stack`` (outstanding, guest_disk, device_queue, dsnro, ...) changed by
                 ``change``: ``iops``, ``lat_mean_ms``, ``gavg_ms``, ``queued_in_guest`` or
                 ``queued_in_kernel`` (``relative = true``: after over before); the
                 device's latency at each ``device`` point's ``active`` commands is
                 ``active`` / the IOPS of the point's rows ``of`` (Little's law at the device)
===============  ====================================================================

Runs are read as the pages read them. A tool's aggregate rows (fio's "All clients") are never a member.
Each member's rows of one run (its jobs, its directions) are totalled first; a figure over members (a sum,
``jain``, ``max_over_min``, a side of a ``ratio``) is taken within each run; the runs of one configuration
(the study's factors and the job's parameters) are then reduced by ``across``: ``"median"`` (the
default), ``"worst"``, ``"best"``, or ``"each"`` (every run must hold). ``argmax``, ``lowest`` and
``monotonic`` work on each level's median; ``each`` and ``range`` on each member's. A published table
(one run per configuration, one row per member) reads exactly as before. Every verdict says how many runs
it rests on and how they were reduced.

``[bounds]`` names ceilings measured outside the study, in the metric's own units (``device_iops =
450000``, from the device's datasheet or fio at the bare device): a ratio ``to = "device_iops"`` is a
fraction of it. A bound not declared leaves its claims unsupported, saying what to declare.

``by = [...]`` repeats the computation per group; the claim passes when every group does.
``[[conclusions]]`` (``id``, ``says``, ``rests_on = ["6", "24b"]``) are what the write-up concludes from its
claims: :func:`weigh_conclusions` finds each standing (every claim it rests on holds), weakened (one fails)
or open (the data cannot decide one).
``reading = "..."`` says, in the claims file author's words, how a claim whose words allow more than one
reading is read (which controllers "roughly 1.4x" covers, how two claims relate); the claims page shows
it beside what benchlib computed, as text.
Metrics are result columns, these derived ones (``bandwidth_mib_s``, ``lat_mean_ms``,
``cpu_pct``, ``iops_per_cpu_pct``, ``outstanding_ios``, ``iops_or_derived``), or any
numeric label of a published table (``iops_per_cpu_pct_reported``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from benchlib.errors import BenchlibError
from benchlib.schema import RUNS, TABLES, UNNAMED_HOST, Tables, label_expr, measured_io_expr, run_unit_expr
from benchlib.stats.efficiency import cpu_pct_expr, iops_per_cpu_pct_expr
from benchlib.stats.fairness import jain_expr, max_min_ratio_expr
from benchlib.stats.queueing import outstanding_ios_expr
from benchlib.tomlfile import read_toml

CLAIMS_FILE = "claims.toml"
PASS, FAIL, UNSUPPORTED = "PASS", "FAIL", "UNSUPPORTED"
_MIB = 1024 * 1024
_REDUCERS = ("sum", "mean", "median", "min", "max", "value")
_COMPUTE = (
    "value",
    "sum",
    "mean",
    "min",
    "max",
    "max_over_min",
    "jain",
    "range",
    "ratio",
    "percent_change",
    "argmax",
    "lowest",
    "monotonic",
    "trails",
    "each",
    "reconcile",
    "bounded",
    "queue_model",
)
#: what a ``queue_model`` claim may predict
MODEL_METRICS = ("iops", "lat_mean_ms", "gavg_ms", "queued_in_guest", "queued_in_kernel")
_EXPECT = ("about", "above", "below", "between", "equals", "tolerance")


class ClaimError(BenchlibError):
    """A claims file is invalid or names a metric, column or computation benchlib does not know."""


class _Unsupported(Exception):
    """The data cannot decide this claim (no rows, or not the rows the computation needs)."""


@dataclass(frozen=True)
class Claim:
    """One statement of a write-up and the computation that checks it."""

    id: str
    section: str
    says: str
    stated: str
    metric: str
    compute: str
    where: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    expect: dict[str, Any] = field(default_factory=dict)
    by: tuple[str, ...] = ()
    #: how the claims file reads words that allow more than one reading (shown as text, never evaluated)
    reading: str = ""


@dataclass(frozen=True)
class Verdict:
    """A claim, what the data give, and PASS / FAIL / UNSUPPORTED."""

    claim: Claim
    recomputed: str
    verdict: str
    tolerance: str = ""
    #: runs the claim's numbers come from (the experimental unit), and the fewest of any configuration read
    runs: int = 0
    runs_per_configuration: int = 0
    #: what those runs can support: the arithmetic of a verdict is not evidence of an effect with one run each
    note: str = ""
    #: what benchlib computed, in words (:func:`computed_as`)
    computed: str = ""


def claims_frame(tables: Tables) -> pl.DataFrame:
    """Run (with every label as a column) joined to results, plus the derived metrics; ``vm`` is the host."""
    runs = tables.runs
    names = sorted(
        set(
            runs.select(pl.col("labels").list.eval(pl.element().struct.field("name")).explode())
            .to_series()
            .drop_nulls()
        )
    )
    runs = runs.with_columns(label_expr(n).alias(n) for n in names if n not in runs.columns)
    frame = tables.results.join(runs.drop("labels"), on="run_id", how="inner", suffix="_run")
    # a study factor (or label) named like a job column (a factor "ioengine" or "rw"): the factor is what
    # the study selects and compares by; the job's own value stays beside it as "<name>_job"
    for name in [c for c in runs.columns if c not in RUNS and c in tables.results.columns]:
        frame = frame.rename({name: f"{name}_job"}).rename({f"{name}_run": name})
    iops = pl.coalesce(pl.col("iops"), pl.col("bandwidth_bytes_per_s") / pl.col("block_size_bytes"))
    frame = frame.with_columns(
        (pl.col("bandwidth_bytes_per_s") / _MIB).alias("bandwidth_mib_s"),
        (pl.col("lat_mean_ns") / 1e6).alias("lat_mean_ms"),
        cpu_pct_expr().alias("cpu_pct"),
        iops.alias("iops_or_derived"),
        iops_per_cpu_pct_expr(),
        # the member: a run's host; a local fio run records none, and is one member all the same
        pl.when(~pl.col("is_aggregate")).then(pl.col("host").fill_null(UNNAMED_HOST)).alias("vm"),
    )
    return frame.with_columns(outstanding_ios_expr("iops_or_derived"))


# ------------------------------------------------------------------ loading


def _claim(path: Path, index: int, entry: dict, bounds: dict[str, float] | None = None) -> Claim:
    where = f"{path}: [[claims]] entry {index + 1}"
    missing = [k for k in ("id", "says", "metric", "compute", "expect") if k not in entry]
    if missing:
        raise ClaimError(f"{where} needs {', '.join(missing)}")
    if entry["compute"] not in _COMPUTE:
        raise ClaimError(
            f"{where} (claim {entry['id']}): unknown compute {entry['compute']!r}; one of {', '.join(_COMPUTE)}"
        )
    if entry["compute"] == "queue_model" and (problem := _model_problem(entry)) is not None:
        raise ClaimError(f"{where} (claim {entry['id']}): {problem}")
    unknown = sorted(set(entry["expect"]) - set(_EXPECT))
    if unknown:
        raise ClaimError(
            f"{where} (claim {entry['id']}): unknown expect key(s) {', '.join(unknown)}; use {', '.join(_EXPECT)}"
        )
    known = {"id", "section", "says", "stated", "metric", "compute", "where", "expect", "by", "reading"}
    params = {k: v for k, v in entry.items() if k not in known}
    if isinstance(params.get("to"), str):  # a ratio to a declared bound, not to a selection
        if entry["compute"] != "ratio":
            raise ClaimError(f'{where} (claim {entry["id"]}): to = "<bound>" divides a ratio; use to = {{ ... }}')
        params["bound"] = params.pop("to")
        params["bound_value"] = (bounds or {}).get(params["bound"])
        params["bounds_declared"] = sorted(bounds or {})
    return Claim(
        id=str(entry["id"]),
        section=str(entry.get("section", "")),
        says=str(entry["says"]),
        stated=str(entry.get("stated", "")),
        metric=str(entry["metric"]),
        compute=str(entry["compute"]),
        where=dict(entry.get("where", {})),
        params=params,
        expect=dict(entry["expect"]),
        by=tuple(entry.get("by", ())),
        reading=str(entry.get("reading", "")),
    )


def load_claims(folder: str | Path) -> tuple[list[Claim], dict[str, float]]:
    """Return the claims and tolerance words of a study folder's ``claims.toml``."""
    path = Path(folder) / CLAIMS_FILE
    if not path.exists():
        raise ClaimError(f"{path}: no claims file; write one (see benchlib/claims.py) beside study.toml")
    data = read_toml(path, ClaimError)
    tolerances = {str(k): float(v) for k, v in data.get("tolerances", {}).items()}
    bounds = data.get("bounds", {})
    if not isinstance(bounds, dict):
        raise ClaimError(f"{path}: [bounds] is a table of names and numbers (device_iops = 450000)")
    for name, value in bounds.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
            raise ClaimError(
                f"{path}: [bounds] {name} = {value!r}: give a positive number in the metric's units "
                "(device_iops = 450000)"
            )
    claims = [_claim(path, i, e, bounds) for i, e in enumerate(data.get("claims", []))]
    ids = [c.id for c in claims]
    if len(set(ids)) != len(ids):
        raise ClaimError(f"{path}: two claims share an id; ids must be unique")
    for claim in claims:
        word = claim.expect.get("tolerance", "about")
        if "about" in claim.expect and word not in tolerances:
            raise ClaimError(f"{path}: claim {claim.id} uses tolerance {word!r}, which [tolerances] does not define")
    return claims, tolerances


@dataclass(frozen=True)
class Conclusion:
    """What a write-up concludes, and the claims (ids) it rests on."""

    id: str
    says: str
    rests_on: tuple[str, ...]


@dataclass(frozen=True)
class ConclusionFinding:
    """A conclusion, and which of the claims it rests on fail or cannot be decided (:func:`weigh_conclusions`)."""

    conclusion: Conclusion
    failed: tuple[str, ...]
    undecided: tuple[str, ...]

    @property
    def status(self) -> str:
        """``"weakened"`` where a claim it rests on fails, ``"open"`` where one cannot be decided, else ``"stands"``."""
        return "weakened" if self.failed else "open" if self.undecided else "stands"


def load_conclusions(folder: str | Path) -> list[Conclusion]:
    """Return the ``[[conclusions]]`` of a study folder's ``claims.toml`` (none: an empty list)."""
    path = Path(folder) / CLAIMS_FILE
    if not path.exists():
        return []
    data = read_toml(path, ClaimError)
    entries = data.get("conclusions", [])
    if not isinstance(entries, list):
        raise ClaimError(f"{path}: [[conclusions]] is a list of tables, each with id, says and rests_on")
    ids = {str(entry.get("id")) for entry in data.get("claims", []) if isinstance(entry, dict)}
    found: list[Conclusion] = []
    for index, entry in enumerate(entries):
        where = f"{path}: conclusion {index + 1}"
        if not isinstance(entry, dict) or set(entry) - {"id", "says", "rests_on"}:
            raise ClaimError(f"{where}: give id, says and rests_on only (rests_on = the ids of its claims)")
        rests = entry.get("rests_on")
        if not (isinstance(entry.get("says"), str) and entry["says"].strip() and isinstance(rests, list) and rests):
            raise ClaimError(f'{where}: says = "..." and rests_on = ["<claim id>", ...] are needed')
        unknown = [str(r) for r in rests if str(r) not in ids]
        if unknown:
            raise ClaimError(f"{where} rests on {', '.join(unknown)}, which no claim of the file has as its id")
        found.append(Conclusion(str(entry.get("id", index + 1)), entry["says"].strip(), tuple(map(str, rests))))
    if len({c.id for c in found}) != len(found):
        raise ClaimError(f"{path}: two conclusions share an id; ids must be unique")
    return found


def weigh_conclusions(conclusions: list[Conclusion], verdicts: dict[str, str]) -> list[ConclusionFinding]:
    """Return each conclusion with the claims it rests on that fail and that cannot be decided.

    ``verdicts``: claim id -> PASS, FAIL or UNSUPPORTED (:func:`verify`).
    """
    return [
        ConclusionFinding(
            c,
            tuple(r for r in c.rests_on if verdicts.get(r) == FAIL),
            tuple(r for r in c.rests_on if verdicts.get(r) == UNSUPPORTED),
        )
        for c in conclusions
    ]


# ------------------------------------------------------------------ computing


def _select(frame: pl.DataFrame, where: dict[str, Any], claim: Claim) -> pl.DataFrame:
    for column, wanted in where.items():
        if column not in frame.columns:
            raise ClaimError(
                f"claim {claim.id}: no column or label {column!r} in the data; "
                f"known: {', '.join(sorted(frame.columns))}"
            )
        values = wanted if isinstance(wanted, list) else [wanted]
        dtype = frame.schema[column]
        if dtype == pl.String:
            frame = frame.filter(pl.col(column).is_in([str(v) for v in values]))
        else:
            frame = frame.filter(pl.col(column).cast(pl.Float64).is_in([float(v) for v in values]))
    return frame


def _metric(frame: pl.DataFrame, claim: Claim, name: str | None = None) -> pl.Series:
    name = name or claim.metric
    if name not in frame.columns:
        raise ClaimError(f"claim {claim.id}: unknown metric {name!r}; known: {', '.join(sorted(frame.columns))}")
    series = frame[name]
    if series.dtype == pl.String:
        series = series.cast(pl.Float64, strict=False)
    if not series.dtype.is_numeric():
        raise ClaimError(f"claim {claim.id}: metric {name!r} is not numeric")
    return series.cast(pl.Float64)


def _values(frame: pl.DataFrame, claim: Claim) -> pl.Series:
    values = _metric(frame, claim).drop_nulls()
    if values.len() == 0:
        raise _Unsupported(f"no {claim.metric} in the selected rows")
    return values


def _reduce(frame: pl.DataFrame, claim: Claim, how: str) -> float:
    values = _values(frame, claim)
    if how == "value":
        if values.len() != 1:
            raise _Unsupported(f"{values.len()} rows selected where one was expected")
        return float(values[0])
    return float(getattr(values, how)())


def _extra(frame: pl.DataFrame, claim: Claim, key: str) -> pl.DataFrame:
    if key not in claim.params or not isinstance(claim.params[key], dict):
        raise ClaimError(f"claim {claim.id}: compute {claim.compute!r} needs {key} = {{ column = level, ... }}")
    return _select(frame, claim.params[key], claim)


def _ordered(frame: pl.DataFrame, claim: Claim) -> pl.DataFrame:
    over = claim.params.get("over")
    if over not in frame.columns:
        raise ClaimError(f'claim {claim.id}: compute {claim.compute!r} needs over = "<column>" (got {over!r})')
    key = pl.col(over).cast(pl.Float64, strict=False)
    return frame.with_columns(_key=key, _metric=_metric(frame, claim)).drop_nulls("_metric").sort("_key", over)


def _reconcile(frame: pl.DataFrame, claim: Claim, base: pl.DataFrame) -> list[tuple[str, float, float | None]]:
    join = list(claim.params.get("join", []))
    rows = _extra(base, claim, "iops_from")
    iops = rows.select(*join, run_unit_expr(rows.columns), pl.col("iops_or_derived").alias("_iops"))
    if claim.compute == "bounded":  # the most any run delivered, all its members together
        iops = iops.group_by(*join, "run_unit").agg(pl.col("_iops").sum()).group_by(join).agg(pl.col("_iops").max())
    else:
        iops = iops.drop("run_unit")
    rows = frame.join(iops, on=join, how="left")
    rows = rows.with_columns(_reported=_metric(rows, claim))
    out = []
    for row in rows.iter_rows(named=True):
        recomputed = row["_iops"] / row["cpu_pct"] if row["_iops"] is not None and row["cpu_pct"] else None
        out.append((_group_name(tuple(join), tuple(row[j] for j in join)), row["_reported"], recomputed))
    return out


def _over(values: pl.Series, expr: pl.Expr) -> float:
    """One of :mod:`benchlib.stats.fairness`' measures over claimed values."""
    return float(pl.DataFrame({"x": values}).select(expr).item())


def _spread(values: pl.Series) -> float:
    return _over(values, max_min_ratio_expr(pl.col("x")))


def _jain(values: pl.Series) -> float:
    return _over(values, jain_expr(pl.col("x")))


_OVER_VALUES = {
    "max_over_min": _spread,
    "jain": _jain,
    "range": lambda v: [float(v.min()), float(v.max())],
    "each": lambda v: [float(x) for x in v],
}


def _two_selections(frame: pl.DataFrame, claim: Claim, keys: tuple = ()) -> float:
    reduce = claim.params.get("reduce", "sum")
    if reduce not in _REDUCERS:
        raise ClaimError(f"claim {claim.id}: reduce must be one of {', '.join(_REDUCERS)}")
    if _across(claim) == "each":
        raise ClaimError(f'claim {claim.id}: across = "each" judges one selection\'s runs; a {claim.compute} has two')

    def side(key: str, how: str) -> float:
        return _over_runs(_extra(frame, claim, key), claim, keys, how)

    if claim.compute == "ratio" and "bound" in claim.params:
        if claim.params["bound_value"] is None:
            declared = claim.params.get("bounds_declared") or []
            others = f" ([bounds] declares {', '.join(declared)}: a typo?)" if declared else ""
            raise _Unsupported(
                f"no bound {claim.params['bound']!r} declared{others}: measure it (the device's datasheet, or fio "
                f"at the bare device) and write it under [bounds] in claims.toml"
            )
        return side("of", reduce) / float(claim.params["bound_value"])
    if claim.compute == "ratio":
        return side("of", reduce) / side("to", reduce)
    if claim.compute == "percent_change":
        start = side("from", reduce)
        return (side("to", reduce) - start) / start * 100
    return side("lower", "max") / side("higher", "min")


def _along(frame: pl.DataFrame, claim: Claim, step: float = 0.0) -> Any:
    ordered = _ordered(frame, claim)
    if ordered.height == 0:
        raise _Unsupported(f"no {claim.metric} in the selected rows")
    over = claim.params["over"]
    if claim.compute == "argmax":
        return str(ordered.sort("_metric", descending=True)[over][0])
    if claim.compute == "lowest":
        k = int(claim.params.get("k", 1))
        return sorted(str(v) for v in ordered.sort("_metric")[over][:k])
    values = ordered["_metric"]
    steps = (values.diff() / values.shift(1).abs()).drop_nulls().to_list()  # relative change per step
    return _shape(steps, step)


def _shape(steps: list[float], step: float) -> str:
    """Say how a sweep moves, with its steps.

    ``increasing`` (every step up by ``step`` or more), ``decreasing``, ``flat`` (no step beyond it), or
    its phases in order (``rises, then flat``).
    """
    if not steps:
        raise _Unsupported("one point: a trend needs two or more")
    kinds = ["rises" if d > 0 and d >= step else "falls" if d < 0 and d <= -step else "flat" for d in steps]
    phases = [kind for i, kind in enumerate(kinds) if i == 0 or kind != kinds[i - 1]]
    said = {"rises": "increasing", "falls": "decreasing", "flat": "flat"}[phases[0]] if len(phases) == 1 else ""
    return _Shape(said or ", then ".join(phases), steps)


class _Shape(str):
    """A sweep's shape as a reader sees it, its word and its steps; a claim is judged by the word alone."""

    word: str

    def __new__(cls, word: str, steps: list[float]) -> _Shape:
        shown = super().__new__(cls, f"{word} (steps {', '.join(f'{d * 100:+.1f}%' for d in steps)})")
        shown.word = word
        return shown


def _compute(frame: pl.DataFrame, claim: Claim, base: pl.DataFrame, step: float = 0.0, keys: tuple = ()) -> Any:
    """Compute a claim over its selected rows the way the pages read runs.

    Each member's rows of a run (its jobs and directions) are totalled first; a figure over members
    (a sum, Jain's index, largest over smallest) is taken within each run; then the runs of each
    configuration (``keys``) are reduced by the claim's ``across`` (median unless it says). A figure along
    ``over`` (argmax, lowest, monotonic) is taken on each level's median; ``each`` and ``range`` on each
    member's median. A published table (one run per configuration) reads as it always did.
    """
    how = claim.compute
    if how == "queue_model":
        return _queue_model(frame, claim, keys)
    if how in ("reconcile", "bounded"):
        return _reconcile(frame, claim, base)
    if how in ("ratio", "percent_change", "trails"):
        return _two_selections(frame, claim, keys)
    if how in _REDUCERS:
        return _over_runs(frame, claim, keys, how)
    if how in ("jain", "max_over_min"):
        return _over_runs(frame, claim, keys, how)
    if how in _OVER_VALUES:  # range, each: every member's figure (its median over runs)
        return _OVER_VALUES[how](_per_member(frame, claim, keys)[claim.metric])
    return _along(_per_level(frame, claim, keys), claim, step)


def _queue_model(frame: pl.DataFrame, claim: Claim, keys: tuple = ()) -> float:
    """Predict a claim's metric with the queue model: its ``stack`` changed by ``change`` (after / before).

    Unsupported where a point's rows have no IOPS, where the prediction needs the device's latency beyond
    the points (an extrapolation would be a guess), or where a ratio's ``before`` is 0.
    """
    from benchlib.stats.queuemodel import DeviceLatency, QueueStack, predict

    p = claim.params
    points = {}
    for point in p["device"]:  # one configuration's run total (its members added), its runs' median
        iops = _over_runs(_select(frame, point["of"], claim), _as(claim, "iops"), keys, "sum")
        if not iops > 0:
            raise _Unsupported(f"no IOPS in the rows of the point at {point['active']} active commands")
        points[float(point["active"])] = float(point["active"]) / iops * 1000  # ms: Little's law at the device
    try:
        stack = QueueStack(**p.get("stack", {}))
        changed = dataclasses.replace(stack, **p.get("change", {}))
    except (TypeError, ValueError) as exc:
        raise ClaimError(f"claim {claim.id}: stack and change name the model's limits ({exc})") from None
    device = DeviceLatency.measured(points)
    before, after = predict(stack, device), predict(changed, device)
    if before.extrapolated or after.extrapolated:
        raise _Unsupported(
            f"the device's latency at {after.active:g} active commands is needed, beyond the points given "
            f"({', '.join(f'{a:g}' for a in points)}): a measured point there would decide it"
        )

    def figure(found: Any) -> float:
        return {
            "iops": found.iops,
            "lat_mean_ms": found.latency_ms,
            "gavg_ms": found.gavg_ms,
            "queued_in_guest": found.waiting["guest"],
            "queued_in_kernel": found.waiting["kernel"],
        }[claim.metric]

    if p.get("relative") is True:
        if figure(before) == 0:
            raise _Unsupported(f"the model's {claim.metric} before the change is 0: a ratio of it is unknown")
        return figure(after) / figure(before)
    return figure(after)


def _model_problem(entry: dict) -> str | None:
    """Say what is wrong with a ``queue_model`` claim's parameters (None: nothing)."""
    if entry["metric"] not in MODEL_METRICS:
        return f"the queue model predicts {', '.join(MODEL_METRICS)}, not {entry['metric']!r}"
    for key in ("stack", "change"):
        table = entry.get(key, {})
        if not isinstance(table, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) or v is None for v in table.values()
        ):
            return f"{key} = {{ outstanding = 96, guest_disk = 64, device_queue = 32 }}: limits as whole numbers"
    points = entry.get("device")
    if (
        not isinstance(points, list)
        or not points
        or not all(
            isinstance(point, dict)
            and isinstance(point.get("active"), int | float)
            and not isinstance(point.get("active"), bool)
            and 0 < point["active"] < math.inf
            and isinstance(point.get("of"), dict)
            and point["of"]
            for point in points
        )
        or len({point["active"] for point in points}) != len(points)
    ):
        return (
            "needs device = [{ active = 32, of = { ... } }, ...]: each point's active commands (above 0, each "
            "once) and the rows of one configuration"
        )
    if not isinstance(entry.get("relative", False), bool):
        return "relative = true or false, without quotes"
    return None


def _as(claim: Claim, metric: str) -> Claim:
    return dataclasses.replace(claim, metric=metric)


#: how a claim's runs of one configuration become its figure (``across = "..."``; median unless it says)
ACROSS = ("median", "worst", "best", "each")


def _lower_is_better(metric: str) -> bool:
    """Whether a smaller ``metric`` is the better one (a latency), for ``across = "worst"`` and ``"best"``."""
    return "lat" in metric or metric.endswith(("_ms", "_ns"))


def _across(claim: Claim) -> str:
    across = str(claim.params.get("across", "median"))
    if across not in ACROSS:
        raise ClaimError(f"claim {claim.id}: across must be one of {', '.join(ACROSS)}, not {across!r}")
    if across == "each" and claim.compute not in (*_REDUCERS, "jain", "max_over_min"):
        raise ClaimError(
            f'claim {claim.id}: across = "each" judges every run of one figure (a sum, a value, Jain\'s index, '
            f"largest over smallest); {claim.compute} is judged on the medians"
        )
    return across


def _member_runs(frame: pl.DataFrame, claim: Claim, keys: tuple) -> pl.DataFrame:
    """Return one row per run and member: the claim's metric totalled over the member's rows of the run.

    Rates add over a member's jobs and directions; a latency is their I/O-weighted mean
    (:func:`benchlib.stats.aggregate.total_expr`). Aggregate rows (fio's "All clients") never reach here.
    """
    from benchlib.stats.aggregate import total_expr

    metric = claim.metric
    numbers = frame.with_columns(_metric(frame, claim).alias(metric), run_unit_expr(frame.columns))
    group = list(dict.fromkeys(["run_unit", *keys, "vm"]))
    members = numbers.group_by(group, maintain_order=True).agg(total_expr(metric, numbers.columns)).drop_nulls(metric)
    if members.is_empty():
        raise _Unsupported(f"no {metric} in the selected rows")
    # repetitions repeat their members; "runs" of one configuration that share no member are one run's
    # members given a run each (a published table's rows with a label of their own): read them as one run
    config = list(dict.fromkeys(k for k in keys if k in members.columns)) or [pl.lit(0)]
    once = members.group_by(config).agg(
        (pl.col("vm").n_unique() == pl.len()).alias("_once"), (pl.col("run_unit").n_unique() > 1).alias("_several")
    )
    joined = members.join(once, on=[c for c in config if isinstance(c, str)], how="left") if keys else members
    if "_once" in joined.columns:
        members = joined.with_columns(
            pl.when(pl.col("_once") & pl.col("_several"))
            .then(pl.lit("one run"))
            .otherwise(pl.col("run_unit"))
            .alias("run_unit")
        ).drop("_once", "_several")
    return members


def _reduced(values: pl.Series, how: str) -> float:
    """Reduce figures (sum, mean, median, min, max, value, jain, max_over_min) to one."""
    if how == "value":
        if values.len() != 1:
            raise _Unsupported(f"{values.len()} rows selected where one was expected")
        return float(values[0])
    if how == "jain":
        return _jain(values)
    if how == "max_over_min":
        return _spread(values)
    return float(getattr(values, how)())


def _over_runs(frame: pl.DataFrame, claim: Claim, keys: tuple, how: str) -> Any:
    """Compute ``how`` over each run's members, then reduce the runs of each configuration (``across``).

    Several configurations selected: a sum, mean, lowest or highest is taken over their figures; a
    figure of one configuration (a value, Jain's index, largest over smallest) is refused.
    """
    members = _member_runs(frame, claim, keys)
    if how in ("jain", "max_over_min"):  # a figure between members: a run of one has none (as on the pages)
        members = members.filter(pl.len().over(["run_unit", *keys]) > 1)
        if members.is_empty():
            raise _Unsupported("one member in every run selected: fairness compares two or more at once")
    runs = members.group_by(["run_unit", *keys], maintain_order=True).agg(
        pl.col(claim.metric).map_batches(
            lambda v: pl.Series([_reduced(v, how)]), returns_scalar=True, return_dtype=pl.Float64
        )
    )
    across = _across(claim)
    if across == "each":
        return [float(v) for v in runs[claim.metric]]
    # the worse run: a lower Jain's index, a larger spread, else by the metric (a longer latency, fewer IOPS)
    lower_better = how == "max_over_min" or (how != "jain" and _lower_is_better(claim.metric))
    pick = _pick(claim.metric, across, lower_better)
    configurations = runs.group_by(list(keys) or pl.lit(0), maintain_order=True).agg(pick)[claim.metric]
    if configurations.len() == 1:
        return float(configurations[0])
    if how in ("sum", "mean", "median", "min", "max"):
        return float(getattr(configurations, how)())
    raise _Unsupported(
        f"rows of {configurations.len()} configurations where one was expected; narrow `where` or add `by`"
    )


def _pick(metric: str, across: str, lower_better: bool) -> pl.Expr:
    """Return the runs' figure ``across`` asks for: their median, the worst or the best.

    ``each`` takes the median where one figure is wanted; ``lower_better``: a smaller figure is the better one.
    """
    if across in ("median", "each"):
        return pl.col(metric).median()
    worse = "max" if lower_better else "min"
    return getattr(pl.col(metric), worse if across == "worst" else {"max": "min", "min": "max"}[worse])()


def _per_member(frame: pl.DataFrame, claim: Claim, keys: tuple) -> pl.DataFrame:
    """Return each member's figure per configuration: its run totals' median (or ``across``) over the runs."""
    members = _member_runs(frame, claim, keys)
    across = _across(claim)
    if across == "each":
        return members
    pick = _pick(claim.metric, across, _lower_is_better(claim.metric))
    return members.group_by(list(dict.fromkeys([*keys, "vm"])), maintain_order=True).agg(pick)


def _per_level(frame: pl.DataFrame, claim: Claim, keys: tuple) -> pl.DataFrame:
    """Return the claim's metric per level of ``over``: each run's total of its members there, then the median."""
    from benchlib.stats.aggregate import ADDITIVE, total_expr

    over = claim.params.get("over")
    if over not in frame.columns:
        raise ClaimError(f'claim {claim.id}: compute {claim.compute!r} needs over = "<column>" (got {over!r})')
    members = _member_runs(frame, claim, tuple(dict.fromkeys([*keys, over])))
    level = [over]
    # members of one run at one level: rates add, anything else (a latency) is their mean
    together = total_expr(claim.metric) if claim.metric in ADDITIVE else pl.col(claim.metric).mean()
    totals = members.group_by(["run_unit", *level], maintain_order=True).agg(together)
    pick = _pick(claim.metric, _across(claim), _lower_is_better(claim.metric))
    return totals.group_by(level, maintain_order=True).agg(pick)


def _close(value: float, target: float, rel: float) -> bool:
    return abs(value - target) <= rel * abs(target)


def _judge(value: Any, claim: Claim, tolerances: dict[str, float]) -> bool:
    expect = claim.expect
    if claim.compute == "each" or claim.params.get("across") == "each":  # every row, or every run, must hold
        return all(_judge_one(v, expect, tolerances) for v in value)
    return _judge_one(value, expect, tolerances)


def _judge_one(value: Any, expect: dict, tolerances: dict[str, float]) -> bool:
    if isinstance(value, _Shape):  # a sweep's shape: its word is judged, its steps only shown
        value = value.word
    ok = True
    if "about" in expect:
        rel = tolerances[expect.get("tolerance", "about")]
        target = expect["about"]
        pairs = zip(value, target, strict=True) if isinstance(target, list) else [(value, target)]
        ok &= all(_close(v, t, rel) for v, t in pairs)
    if "above" in expect:
        ok &= value > expect["above"]
    if "below" in expect:
        ok &= value < expect["below"]
    if "between" in expect:
        low, high = expect["between"]
        ok &= low <= value <= high
    if "equals" in expect:
        ok &= value == expect["equals"]
    return bool(ok)


#: computations whose value is one number over another: shown as a multiple ("3.39x")
_RATIOS = ("ratio", "max_over_min", "trails")


def _unit(claim: Claim) -> str:
    """Return the unit a claim's value is in: a multiple, a signed percent, or its metric's unit."""
    if claim.compute in _RATIOS:
        return "x"
    if claim.compute == "percent_change":
        return "%"
    if claim.compute == "queue_model" and claim.params.get("relative"):
        return "x"
    if claim.compute not in (*_REDUCERS, "range", "each", "queue_model"):
        return ""
    metric = claim.metric
    for end, unit in (("_mib_s", " MiB/s"), ("_ms", " ms"), ("_pct", "%"), ("iops", " IOPS")):
        if metric.endswith(end):
            return unit
    return ""


def _number(value: float, *, stated: bool = False) -> str:
    """Return a recomputed value to three significant digits, trailing zeros kept (0.760 beside 0.768).

    Whole numbers from 100. ``stated``: a figure the claims file gives (a tolerance's 0.4), as written.
    """
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:,.3g}" if stated else f"{value:#,.3g}".rstrip(".")


def _show(value: Any, unit: str = "", *, stated: bool = False) -> str:
    """Return a recomputed value as a reader takes it: with its unit, a change with its sign, names as a list."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int | float):
        text = _number(float(value), stated=stated)
        if unit == "%":
            return ("+" if value > 0 else "") + text + "%"
        return text + unit
    if isinstance(value, list):
        numbers = [v for v in value if isinstance(v, int | float) and not isinstance(v, bool)]
        if len(value) > 6 and len(numbers) == len(value):  # a reader wants the range, not twenty numbers
            return f"{len(value)} values, {_number(float(min(numbers)))} to {_number(float(max(numbers)))}{unit}"
        if len(value) == 2 and len(numbers) == 2 and unit not in ("x", "%"):  # a range: low-high
            return f"{_number(float(numbers[0]))}-{_number(float(numbers[1]))}{unit}"
        return ", ".join(_show(v, unit) for v in value)
    return str(value)


def _in_order(key: tuple) -> list[tuple[int, float, str]]:
    """Sort groups as a reader counts: numbers by value (0, 50, 100), then text."""
    order = []
    for part in key:
        try:
            order.append((0, float(str(part)), ""))
        except ValueError:
            order.append((1, 0.0, str(part)))
    return order


def _tolerance_text(claim: Claim, tolerances: dict[str, float]) -> str:
    if claim.compute == "reconcile":
        return f"every row within {claim.params.get('tolerance', 0.02) * 100:g}%"
    if claim.compute == "bounded":
        return f"every row at most its bound (+{claim.params.get('tolerance', 0.02) * 100:g}%)"
    if "about" in claim.expect:
        word = claim.expect.get("tolerance", "about")
        return f"{word}: ±{tolerances[word] * 100:g}%"
    if claim.compute == "monotonic":
        step = _step(claim, tolerances)
        flat = f"a step under {step * 100:g}% counts as flat" if step else "any rise or fall counts"
        return f"equals {claim.expect.get('equals', '')} ({flat})"
    unit = _unit(claim)
    parts = []
    for key, value in claim.expect.items():
        if key == "between" and isinstance(value, list) and len(value) == 2:
            parts.append(f"between {_show(value[0], unit, stated=True)} and {_show(value[1], unit, stated=True)}")
        else:
            parts.append(f"{key} {_show(value, unit, stated=True)}")
    return ", ".join(parts)


def _step(claim: Claim, tolerances: dict[str, float]) -> float:
    """Return the smallest relative change per step that counts as a rise or a fall (``monotonic``)."""
    step = claim.params.get("step", tolerances.get("trend", 0.0))
    if isinstance(step, str):
        if step not in tolerances:
            raise ClaimError(f"claim {claim.id}: step {step!r} is not a word of [tolerances]")
        return tolerances[step]
    return float(step)


#: Job parameters that make two runs different configurations even under the same factor levels.
_JOB = ("rw", "block_size_bytes", "iodepth", "numjobs", "rwmixread_pct", "ioengine")


def _configuration(frame: pl.DataFrame, claim: Claim, factors: tuple[str, ...]) -> tuple[str, ...]:
    """Return what makes a configuration: the study's factors, the claim's ``by`` and the job's parameters.

    Runs that agree on all of them are repetitions of one configuration (``over`` is kept apart: a
    figure along it is taken per level).
    """
    return configuration_columns(frame, (*factors, *claim.by))


def configuration_columns(frame: pl.DataFrame, factors: tuple[str, ...]) -> tuple[str, ...]:
    """Return the columns of ``frame`` whose values make a configuration: ``factors`` and the job's parameters."""
    return tuple(dict.fromkeys(c for c in [*factors, *_JOB] if c in frame.columns and c != "vm"))


def _runs_read(
    frame: pl.DataFrame, claim: Claim, selected: pl.DataFrame, factors: tuple[str, ...]
) -> tuple[int, int, int]:
    """Return the runs a claim read, the fewest runs of any configuration it read, and how many configurations.

    A configuration is what the runs were set to: the study's factors, the claim's ``over`` and
    ``by`` columns and the job's parameters; runs of one configuration are its repetitions.
    """
    extras = [key for key in ("of", "to", "from", "lower", "higher") if isinstance(claim.params.get(key), dict)]
    # two selections read only their own rows (taken from the selected ones)
    parts = [_select(selected, claim.params[key], claim) for key in extras] or [selected]
    # rows of other figures (a published CPU table) measured no I/O: not runs (the design statement's rule)
    parts = [part.filter(measured_io_expr()) for part in parts]
    wanted = [*factors, *claim.by, str(claim.params.get("over", "")), *_JOB]
    columns = list(dict.fromkeys(c for c in wanted if c in frame.columns))
    rows = pl.concat([p.select(run_unit_expr(p.columns), *columns) for p in parts], how="vertical").unique()
    if rows.is_empty():
        return 0, 0, 0
    per = rows.group_by(columns or pl.lit(0)).agg(pl.col("run_unit").n_unique().alias("runs"))
    return rows["run_unit"].n_unique(), int(per["runs"].min()), per.height


#: a claim's metric in words, for what it computes (:func:`computed_as`); another keeps its name
_METRIC_WORDS = {
    "bandwidth_mib_s": "bandwidth (MiB/s)",
    "iops": "IOPS",
    "lat_mean_ms": "mean latency (ms)",
    "cpu_pct": "CPU (usr + sys, %)",
    "iops_per_cpu_pct_reported": "reported IOPS per CPU%",
    "iops_per_cpu_pct": "IOPS per CPU%",
    "outstanding_ios": "outstanding I/Os (IOPS x mean latency)",
    "gavg_ms": "GAVG (ms): the time in the ESXi kernel and at the device",
    "queued_in_guest": "I/Os waiting in the guest",
    "queued_in_kernel": "I/Os queued in the ESXi kernel (QUED)",
}


def _words(column: str) -> str:
    """Return a column in words: ``write_pct`` -> ``write share (%)``, ``sioc`` -> ``SIOC``."""
    from benchlib.tables import inline

    return {"write_pct": "write share (%)", "table": "published table"}.get(column) or inline(column)


def _rows_named(where: dict[str, Any]) -> str:
    """Return a selection in words: ``published table seqread_per_vm; controller LSI; SIOC on``; members by name."""
    from benchlib.tables import level

    parts = []
    for column, wanted in where.items():
        values = [level(column, v) for v in (wanted if isinstance(wanted, list) else [wanted])]
        if column == "table":  # a published table by its name, set apart from the words around it
            values = [f"\u201c{v}\u201d" for v in values]
        parts.append(", ".join(values) if column == "vm" else f"{_words(column)} {' or '.join(values)}")
    return "; ".join(parts)


#: the queue model's limits (:class:`benchlib.stats.queuemodel.QueueStack`) in words
_LIMIT_WORDS = {
    "outstanding": "outstanding I/Os",
    "guest_disk": "guest per-disk queue",
    "guest_adapter": "guest adapter ring",
    "device_queue": "DQLEN",
    "dsnro": "DSNRO",
    "hba_queue": "HBA queue",
    "vms": "VMs",
}


def computed_as(claim: Claim) -> str:
    """Return what benchlib computes to check ``claim``, in words: what it divides by what, over which rows.

    ``ratio`` of IOPS of controller PVSCSI to controller LSI; ``trails``: the highest of the trailing
    members over the lowest of the leading ones; the rows a claim reads (its ``where``) and the groups it
    is judged per (``by``) named, so a value like ``0.731x`` says what it is.
    """
    metric = _METRIC_WORDS.get(claim.metric, claim.metric.replace("_", " "))
    p = claim.params

    def said(word: str) -> str:  # "mean latency (ms)" is not said "mean mean latency (ms)"
        return metric if not word or metric.startswith(f"{word} ") else f"{word} {metric}"

    def single(member: Any) -> bool:
        return isinstance(member, str) or (isinstance(member, list) and len(member) == 1)

    sides = [p[k] for k in ("of", "to", "from", "lower", "higher") if isinstance(p.get(k), dict)]
    # one VM's figure (in the rows, or on each side of a ratio): nothing to add up, no total
    one = single(claim.where.get("vm")) or bool(sides) and all(single(side.get("vm")) for side in sides)
    rate = claim.metric in ("iops", "bandwidth_mib_s", "bandwidth_bytes_per_s") and not one  # rates add: a total
    reduce = {
        "sum": "total" if rate else "",
        "mean": "mean",
        "median": "median",
        "min": "lowest",
        "max": "highest",
        "value": "",
    }.get(str(p.get("reduce", "sum")), str(p.get("reduce")))
    how = {
        "value": f"{metric} of the one row",
        "sum": f"total {metric}" if rate else f"sum of {metric}",
        "mean": said("mean"),
        "median": said("median"),
        "min": said("lowest"),
        "max": said("highest"),
        "max_over_min": f"highest {metric} / lowest",
        "jain": f"Jain's index of {metric}",
        "range": f"lowest and highest {metric}",
        "each": f"{metric} of every row",
        "argmax": f"the {_words(str(p.get('over')))} with the highest {metric}",
        "lowest": f"the {p.get('k', 1)} {_words(str(p.get('over')))}s with the lowest {metric}",
        "monotonic": f"{metric} step by step along {_words(str(p.get('over')))}",
        "reconcile": f"each row's {metric} against IOPS / CPU% ({_rows_named(p.get('iops_from', {}))})",
        "bounded": f"each row's {metric} against its most: the largest run total of IOPS "
        f"({_rows_named(p.get('iops_from', {}))}; every member together) / CPU%",
    }.get(claim.compute)
    if claim.compute == "ratio" and "bound" in p:
        value = p.get("bound_value")
        declared = f"{value:,g}" if value is not None else "not declared"
        how = f"{said(reduce)} of {_rows_named(p.get('of', {}))} / the declared bound {p['bound']} ({declared})"
    elif claim.compute == "ratio":
        how = f"{said(reduce)} of {_rows_named(p.get('of', {}))} / that of {_rows_named(p.get('to', {}))}"
    elif claim.compute == "percent_change":
        how = f"change in {said(reduce)} from {_rows_named(p.get('from', {}))} to {_rows_named(p.get('to', {}))}"
    elif claim.compute == "queue_model":
        stack = ", ".join(f"{_LIMIT_WORDS.get(k, k)} {v}" for k, v in p.get("stack", {}).items())
        change = ", ".join(f"{_LIMIT_WORDS.get(k, k)} {v}" for k, v in p.get("change", {}).items())
        points = "; ".join(
            f"{point.get('active')} active: {_rows_named(point.get('of', {}))}"
            for point in p.get("device", [])
            if isinstance(point, dict)
        )
        how = (
            f"the queue model's {metric} for {stack}"
            + (f", then {change}" if change else "")
            + (" (after / before)" if p.get("relative") else "")
            + f"; the device's latency by Little's law from the IOPS of {points}"
        )
    elif claim.compute == "trails":
        how = (
            f"highest {metric} of {_rows_named(p.get('lower', {}))} / lowest of {_rows_named(p.get('higher', {}))} "
            "(below 1x: each trails each)"
        )
    rows = f"; rows: {_rows_named(claim.where)}" if claim.where else "; every row"
    rows = "" if claim.compute == "queue_model" else rows  # the model reads its device points' rows only
    per = f"; per {' / '.join(_words(c) for c in claim.by)}" if claim.by else ""
    reading = f". Read as: {claim.reading.rstrip('.')}" if claim.reading else ""
    return f"{how}{rows}{per}{reading}"


def _group_name(columns: tuple[str, ...], key: tuple) -> str:
    """Return a group's key as a reader takes it: ``LSI/off``; a percent column's value with its sign (``50%``)."""
    from benchlib.tables import level

    return "/".join(f"{k}%" if c.endswith("_pct") else level(c, k) for c, k in zip(columns, key, strict=True))


def _note(claim: Claim, runs: int, fewest: int, configurations: int) -> str:
    if runs == 0:
        return ""
    if fewest == 1 and configurations > 1:
        return "one run per configuration: the arithmetic holds or not, but it is not evidence of an effect"
    if fewest == 1:
        return "one run: the numbers describe that run"
    across = str(claim.params.get("across", "median"))
    how = {"median": "the median of", "worst": "the worst of", "best": "the best of", "each": "each of"}[across]
    runs_of = f"{fewest}" if fewest == runs // max(configurations, 1) else f"{fewest} or more"
    return (
        f"{how} {runs_of} runs per configuration, each run's figure over its members first; "
        "arithmetic on the runs, not a test of an effect (the comparison page tests)"
    )


def verify_claim(
    frame: pl.DataFrame, claim: Claim, tolerances: dict[str, float], factors: tuple[str, ...] = ()
) -> Verdict:
    """Recompute one claim over ``claims_frame`` and judge it; say how many runs it rests on."""
    selected = _select(frame, claim.where, claim)
    for column in claim.by:
        if column not in frame.columns:
            raise ClaimError(f"claim {claim.id}: by names {column!r}, not a column or label of the data")
    groups = selected.partition_by(list(claim.by), as_dict=True, maintain_order=True) if claim.by else {(): selected}
    shown, passed = [], []
    tolerance = _tolerance_text(claim, tolerances)
    computed = computed_as(claim)
    try:
        if not groups:
            raise _Unsupported("no rows match the claim's selection")
        step = _step(claim, tolerances)
        keys = _configuration(frame, claim, factors)
        for key, group in sorted(groups.items(), key=lambda kv: _in_order(kv[0])):
            value = _compute(group, claim, frame, step, keys)
            if claim.compute in ("reconcile", "bounded"):
                said, ok = _reconciled(value, claim.params.get("tolerance", 0.02), bound=claim.compute == "bounded")
                shown.append(said)
                passed.extend(ok)
                continue
            label = _group_name(claim.by, key)
            said = _show(value, _unit(claim)) + _edge(value, claim, tolerances)
            shown.append(f"{label}: {said}" if label else said)
            passed.append(_judge(value, claim, tolerances))
    except _Unsupported as exc:
        return Verdict(claim, str(exc), UNSUPPORTED, tolerance, computed=computed)
    runs, fewest, configurations = _runs_read(frame, claim, selected, factors)
    facts = {
        "runs": runs,
        "runs_per_configuration": fewest,
        "note": _note(claim, runs, fewest, configurations),
        "computed": computed,
    }
    if not passed:
        return Verdict(claim, "; ".join(shown), UNSUPPORTED, tolerance, **facts)
    return Verdict(claim, "; ".join(shown), PASS if all(passed) else FAIL, tolerance, **facts)


#: how near its tolerance's edge a figure is said to be (a share of the tolerance, either side of it)
EDGE = 0.2


def _edge(value: Any, claim: Claim, tolerances: dict[str, float]) -> str:
    """Say when a figure lies at the edge of what its claim allows, "" otherwise.

    Judged "about" a target: within :data:`EDGE` of its tolerance's edge (1.0496x against "essentially equal",
    ±5%, passes by 0.04 points: a slightly stricter reading of the words would fail it). Judged "above" or
    "below" a threshold: nearer it than the ``as_stated`` tolerance, the rounding of a figure as stated
    (40,120 against "more than 40,000"). The reader sees it beside the verdict.
    """
    bound = next((k for k in ("above", "below") if isinstance(claim.expect.get(k), int | float)), None)
    if bound and isinstance(value, int | float) and claim.expect[bound] and "as_stated" in tolerances:
        limit = claim.expect[bound]
        off = abs(value / limit - 1)
        if off >= tolerances["as_stated"]:
            return ""
        side = "above" if value > limit else "below" if value < limit else "at"
        rounding = f"{tolerances['as_stated'] * 100:g}%"
        return f" ({100 * off:.1f}% {side} {_show(limit)}: nearer it than a stated figure's rounding, ±{rounding})"
    target = claim.expect.get("about")
    if not isinstance(value, int | float) or not isinstance(target, int | float) or not target:
        return ""
    rel = tolerances[claim.expect.get("tolerance", "about")]
    off = abs(value / target - 1)
    if not rel or abs(off - rel) > EDGE * rel:
        return ""
    side = "inside" if off <= rel else "outside"
    return f" ({100 * off:.2f}% from {target:g}: just {side} ±{100 * rel:g}%, a reading of the words a little " + (
        "stricter would fail it)" if side == "inside" else "looser would pass it)"
    )


def _reconciled(
    rows: list[tuple[str, float, float | None]], tolerance: float, *, bound: bool = False
) -> tuple[str, list[bool]]:
    """Say a reconciliation's rows, those outside ``tolerance`` first, each with how far off; and each row's pass.

    ``sequential read 128k/LSI: reported 8,563, recomputed 1,158 (-86.5%)``: a reader sees the rows that fail
    before the ones that agree, and every row's figures (none left out). ``bound``: a row passes at or
    below its recomputed most (``at most 6,591``), not only near it.
    """
    off, within, unknown, passed = [], [], [], []
    for name, reported, recomputed in rows:
        if recomputed is None:
            unknown.append(name)
            continue
        change = (recomputed - reported) / reported
        ok = reported <= recomputed * (1 + tolerance) if bound else abs(change) <= tolerance
        figure = f"at most {_show(recomputed)}" if bound else f"recomputed {_show(recomputed)} ({100 * change:+.1f}%)"
        over = f" ({100 * (reported / recomputed - 1):.1f}% above it)" if bound and not ok else ""
        (within if ok else off).append(f"{name}: reported {_show(reported)}, {figure}{over}")
        passed.append(ok)
    limit = f"{100 * tolerance:g}%"
    first = "above their most" if bound else f"off by more than {limit}"
    rest = "at or below it" if bound else f"within {limit}"
    parts = [f"{len(off)} of {len(passed)} rows {first}: " + "; ".join(off)] if off else []
    if within:
        parts.append(("The other " if off else "All ") + f"{len(within)} {rest}: " + "; ".join(within))
    if unknown:
        parts.append(f"No IOPS to recompute: {', '.join(unknown)}")
    return ". ".join(parts), passed


#: what ``benchlib verify --json`` writes, and its layout's version (a peer's CI checks both)
VERIFY_FORMAT, VERIFY_VERSION = "benchlib-verify", 1


def verification_record(study: Path, processed: Path, name: str, verdicts: list[Verdict]) -> dict[str, Any]:
    """Return a verification as plain data: what it was computed from, the counts and every verdict.

    Provenance: benchlib's version and commit, the SHA-256 of the study's claims file and one
    digest of every raw file's path, size and SHA-256 (the same data gives the same digest anywhere).
    """
    import hashlib

    from benchlib import __version__
    from benchlib.paths import source_commit
    from benchlib.store import raw_data_digest

    claims = study / CLAIMS_FILE
    return {
        "format": VERIFY_FORMAT,
        "format_version": VERIFY_VERSION,
        "benchlib": f"{__version__}, commit {source_commit()}",
        "claims_sha256": hashlib.sha256(claims.read_bytes()).hexdigest() if claims.is_file() else "unknown",
        "raw_data_sha256": raw_data_digest(processed) or "unknown",
        "study": name,
        "counts": {k: sum(v.verdict == k for v in verdicts) for k in (PASS, FAIL, UNSUPPORTED)},
        "verdicts": [verdict_record(v) for v in verdicts],
    }


def verdict_record(verdict: Verdict) -> dict[str, Any]:
    """Return a verdict as plain data (``benchlib verify --json``, a peer's CI)."""
    claim = verdict.claim
    return {
        "id": claim.id,
        "section": claim.section,
        "says": claim.says,
        "stated": claim.stated,
        "computed": verdict.computed,
        "recomputed": verdict.recomputed,
        "tolerance": verdict.tolerance,
        "verdict": verdict.verdict,
        "runs": verdict.runs,
        "runs_per_configuration": verdict.runs_per_configuration,
        "note": verdict.note,
    }


def verify(tables: Tables, claims: list[Claim], tolerances: dict[str, float]) -> list[Verdict]:
    """Return every claim's verdict, in file order, each with the runs it rests on.

    The rows are the pages' (:func:`benchlib.views._study_rows`): a tool's aggregate row (fio's "All clients",
    a group's total) is never one more member, and logs are not runs.
    """
    from benchlib.views import NOT_RUNS

    frame = claims_frame(tables).filter(~pl.col("is_aggregate"), ~pl.col("format").is_in(NOT_RUNS))
    factors = tuple(c for c in tables.runs.columns if c not in TABLES["runs"] and c in frame.columns)
    return [verify_claim(frame, claim, tolerances, factors) for claim in claims]
