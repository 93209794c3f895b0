"""The tidy tables every reader produces and ingest stores.

One row per observation, base units, the unit in every column name:
bytes (``_bytes``), nanoseconds (``_ns``), bytes per second
(``_bytes_per_s``), I/Os per second (``iops``), percent (``_pct``).
Nulls mean "not reported"; there are no sentinels.

Tables
------
runs
    One row per tool execution per client (one fio invocation on one host).
    Study factor columns (``controller``, ``sioc``...) are added by ingest.
results
    One row per run x client x job (or reported group) x direction.
latency_bins
    Latency histogram counts (fio json+ ``bins`` or histogram logs) in fio's
    bucket layout, so percentiles can be pooled correctly. Stored one row per
    histogram with its bins as lists (``STORED_LATENCY_BINS``); read back one
    row per bin.
intervals
    Per-interval series in long form: one row per run x job x direction x
    time x metric.
host_counters
    Host-side counters (esxtop batch mode) in long form.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, fields
from datetime import UTC, datetime

import polars as pl

from benchlib.errors import BenchlibError, ImpossibleValue

# 4: fio JSON disk_util in host_counters; vdbench histograms in latency_bins
# 5: latency_bins stored one row per histogram, its bins as lists
# 7: runs.run_group: files of one run written per VM (a path's {vm}, HCIBench's worker files) share it
# 8: results.printed_iops and printed_bandwidth_bytes_per_s: a file's own figures where benchlib recomputes them
SCHEMA_VERSION = 8

PERCENTILE = pl.Struct({"percentile": pl.Float64, "value_ns": pl.Float64})

RUNS = pl.Schema(
    {
        "run_id": pl.String,
        "study": pl.String,
        "tool": pl.String,
        "tool_version": pl.String,
        "format": pl.String,
        "host": pl.String,
        "is_aggregate": pl.Boolean,
        "start_time": pl.Datetime("ms", "UTC"),
        "duration_ns": pl.Int64,
        "source": pl.String,
        "sha256": pl.String,
        "document_index": pl.Int32,
        # per-VM files of one run: the run they share (null when the run is one file's, as fio client/server)
        "run_group": pl.String,
        "repetition": pl.Int32,
        "labels": pl.List(pl.Struct({"name": pl.String, "value": pl.String})),
    }
)

RESULTS = pl.Schema(
    {
        "run_id": pl.String,
        "client": pl.String,
        "job_name": pl.String,
        "group_id": pl.Int32,
        "job_index": pl.Int32,
        "jobs": pl.Int32,
        "direction": pl.String,
        "is_aggregate": pl.Boolean,
        "error": pl.Int32,
        "rw": pl.String,
        "rwmixread_pct": pl.Float64,
        "block_size_bytes": pl.Int64,
        "iodepth": pl.Int32,
        "numjobs": pl.Int32,
        "ioengine": pl.String,
        "direct": pl.Boolean,
        "runtime_setting_ns": pl.Int64,
        "ramp_time_ns": pl.Int64,
        "time_based": pl.Boolean,
        "rate_limited": pl.Boolean,
        "ss_attained": pl.Boolean,
        "io_count": pl.Int64,
        "io_bytes": pl.Int64,
        "runtime_ns": pl.Int64,
        "iops": pl.Float64,
        "bandwidth_bytes_per_s": pl.Float64,
        "lat_mean_ns": pl.Float64,
        "lat_stddev_ns": pl.Float64,
        "lat_min_ns": pl.Float64,
        "lat_max_ns": pl.Float64,
        "clat_mean_ns": pl.Float64,
        "clat_stddev_ns": pl.Float64,
        "clat_min_ns": pl.Float64,
        "clat_max_ns": pl.Float64,
        "slat_mean_ns": pl.Float64,
        "slat_stddev_ns": pl.Float64,
        "slat_min_ns": pl.Float64,
        "slat_max_ns": pl.Float64,
        "clat_percentiles": pl.List(PERCENTILE),
        "lat_percentiles": pl.List(PERCENTILE),
        "usr_cpu_pct": pl.Float64,
        "sys_cpu_pct": pl.Float64,
        "context_switches": pl.Int64,
        # what the file itself printed where benchlib recomputed iops and bandwidth (null elsewhere)
        "printed_iops": pl.Float64,
        "printed_bandwidth_bytes_per_s": pl.Float64,
    }
)

LATENCY_BINS = pl.Schema(
    {
        "run_id": pl.String,
        "client": pl.String,
        "job_name": pl.String,
        "job_index": pl.Int32,
        "direction": pl.String,
        "latency_kind": pl.String,
        "time_ns": pl.Int64,
        "bin_index": pl.Int32,
        "bin_value_ns": pl.Float64,
        "count": pl.Int64,
    }
)

#: The per-bin columns of ``latency_bins``; the others say which histogram a bin belongs to.
BIN_COLUMNS = ("bin_index", "bin_value_ns", "count")

#: ``latency_bins`` as ingest stores it: one row per histogram, its bins as lists in bin order.
#: Writing the identity columns once per histogram instead of once per bin makes a part of
#: json+ bins about 18 times cheaper to write (bench/results.md); readers explode it back.
STORED_LATENCY_BINS = pl.Schema(
    {name: pl.List(dtype) if name in BIN_COLUMNS else dtype for name, dtype in LATENCY_BINS.items()}
)

INTERVALS = pl.Schema(
    {
        "run_id": pl.String,
        "client": pl.String,
        "job_name": pl.String,
        "job_index": pl.Int32,
        "direction": pl.String,
        "time_ns": pl.Int64,
        "metric": pl.String,
        "unit": pl.String,
        "value": pl.Float64,
        "block_size_bytes": pl.Int64,
        "offset_bytes": pl.Int64,
        "priority": pl.Int32,
        "is_cumulative": pl.Boolean,
        "is_warmup": pl.Boolean,
    }
)

HOST_COUNTERS = pl.Schema(
    {
        "run_id": pl.String,
        "host": pl.String,
        "object": pl.String,
        "instance": pl.String,
        "counter": pl.String,
        "time": pl.Datetime("ms", "UTC"),
        "sample": pl.Int32,
        "value": pl.Float64,
    }
)

TABLES: dict[str, pl.Schema] = {
    "runs": RUNS,
    "results": RESULTS,
    "latency_bins": LATENCY_BINS,
    "intervals": INTERVALS,
    "host_counters": HOST_COUNTERS,
}

#: Units of the value column of ``intervals``, by metric.
INTERVAL_UNITS = {
    "bw": "bytes_per_s",
    "iops": "iops",
    "lat": "ns",
    "clat": "ns",
    "slat": "ns",
    "io_bytes": "bytes",
    "io_count": "count",
}

DIRECTIONS = ("read", "write", "trim", "sync", "total")  # total: one figure for all directions (published tables)

_NON_NEGATIVE = {
    table: [
        name
        for name, dtype in schema.items()
        if dtype.is_numeric() and (name.endswith(("_bytes", "_ns", "_per_s", "count")) or name in ("iops", "io_count"))
    ]
    for table, schema in TABLES.items()
}


#: more columns no real measurement makes negative: CPU shares, context switches, a mix, depths, job counts
for _table, _columns in {
    "results": [
        *("usr_cpu_pct", "sys_cpu_pct", "context_switches", "rwmixread_pct", "iodepth", "numjobs", "jobs"),
        "printed_iops",
    ],
    "intervals": ["value"],  # every metric a log holds (bandwidth, IOPS, latencies, bytes, counts)
}.items():
    _NON_NEGATIVE[_table] += [c for c in _columns if c not in _NON_NEGATIVE[_table]]

#: the times a measurement can carry: after 1990, before 2100 (a clock or a field gone wrong otherwise)
TIME_RANGE = (datetime(1990, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC))
#: a run's rate above this multiple of its own count (or bytes) over its runtime is impossible; fio's own
#: figures differ from the recomputed one by a few percent (a group's bw=, the ramp), never twofold
RATE_SLACK = 2.0


class SchemaError(BenchlibError):
    """A frame does not match the tidy schema (a bug in a reader, not user input)."""


def empty(table: str) -> pl.DataFrame:
    """Return an empty frame with the columns and dtypes of ``table``."""
    return pl.DataFrame(schema=TABLES[table])


def conform(frame: pl.DataFrame, table: str) -> pl.DataFrame:
    """Add missing columns as nulls, cast to the schema's dtypes and order the columns.

    Extra columns (study factors in ``runs``) are kept, after the schema's own.
    """
    schema = TABLES[table]
    missing = [pl.lit(None, dtype).alias(name) for name, dtype in schema.items() if name not in frame.columns]
    frame = frame.with_columns(missing) if missing else frame
    extra = [c for c in frame.columns if c not in schema]
    return frame.select(
        [pl.col(name).cast(dtype, strict=True) for name, dtype in schema.items()] + [pl.col(c) for c in extra]
    )


def _check_columns(actual: pl.Schema, schema: pl.Schema, table: str) -> None:
    for name, dtype in schema.items():
        if name not in actual:
            raise SchemaError(f"table {table}: column {name!r} is missing")
        if actual[name] != dtype:
            raise SchemaError(f"table {table}: column {name!r} is {actual[name]}, expected {dtype}")


def validate(frame: pl.DataFrame, table: str) -> pl.DataFrame:
    """Check that ``frame`` is a valid ``table``; return it unchanged.

    Checks column names and dtypes, that ``run_id`` is never null, that
    directions are known, that counts, rates and times are not negative, and
    that no number is NaN or infinite (a missing value is null, never NaN).

    Raises
    ------
    SchemaError
        Naming the table, the column and what is wrong.

    """
    schema = TABLES[table]
    _check_columns(frame.schema, schema, table)
    if frame.height == 0:
        return frame
    _raise_found(frame, _row_checks(table), table)
    check_rules(frame, table)
    return frame


def _number(value: object) -> str:
    return f"{value:,.6g}" if isinstance(value, float) else f"{value:,}" if isinstance(value, int) else str(value)


def _rules(table: str) -> list[tuple[pl.Expr, Callable[[dict], str]]]:
    """Return ``table``'s rules no real measurement breaks: (where it is broken, what to say of a row that does).

    A value is finite, and not negative where it counts, measures or sizes something; a percentile is no lower
    than the one below it; a mean lies within its [min, max]; a rate is at most :data:`RATE_SLACK` times the
    run's own count (or bytes) over its runtime; a time lies within :data:`TIME_RANGE`.
    """
    schema = TABLES[table]
    rules: list[tuple[pl.Expr, Callable[[dict], str]]] = []
    for col, dtype in schema.items():
        if dtype == pl.Float64:
            rules.append((~pl.col(col).is_finite(), lambda r, c=col: f"{c} is {r[c]}"))
    for col in _NON_NEGATIVE[table]:
        rules.append((pl.col(col) < 0, lambda r, c=col: f"{c} is {_number(r[c])}, below 0"))
    for col in ("time", "start_time"):
        if col in schema:
            low, high = TIME_RANGE
            rules.append((~pl.col(col).is_between(low, high), lambda r, c=col: f"{c} is {r[c]}, not 1990 to 2100"))
    if table == "results":
        rules += _result_rules()
    if table == "host_counters":  # a rate, a depth, a count of commands or a share is never below 0
        rules.append((pl.col("value") < 0, lambda r: f"{r['counter']} is {_number(r['value'])}, below 0"))
    return rules


def _exact(table: str, rows: pl.DataFrame) -> pl.DataFrame:
    """Return the ``rows`` that break a rule of ``table`` (:func:`_rules` marked them, some only maybe).

    A host counter below 0 breaks one only where its counter is :data:`NON_NEGATIVE_COUNTERS`': the names
    are matched here, on the few rows below 0, not on every sample of a capture of 300 million (2 s a
    30 million there, against 0.3 s for all the rest of the rules).
    """
    if table != "host_counters" or rows.is_empty():
        return rows
    *others, _ = _rules(table)  # the last: a value below 0
    counted = pl.col("counter").cast(pl.String).str.contains(NON_NEGATIVE_COUNTERS) & (pl.col("value") < 0)
    return rows.filter(pl.any_horizontal(counted, *(mask.fill_null(False) for mask, _ in others)))


#: the esxtop counters (and fio's disk figures, also host counters) no real sample makes negative: rates per
#: second, queue depths, commands and shares. Not a latency: esxtop's KAVG is GAVG minus DAVG, and is
#: printed a little below 0 when the two round apart.
NON_NEGATIVE_COUNTERS = (
    r"/sec$|Q Depth$|^(Active|Queued) Commands$|^% |^Load$"
    r"|^(read|write)_(ios|merges|ticks_ms)$|^in_queue_ms$|^util_pct$"
)


def _result_rules() -> list[tuple[pl.Expr, Callable[[dict], str]]]:
    """Return the relational rules of ``results``: percentiles in order, means within their range, rates possible."""
    rules: list[tuple[pl.Expr, Callable[[dict], str]]] = [
        (pl.col("rwmixread_pct") > 100, lambda r: f"rwmixread_pct is {_number(r['rwmixread_pct'])}, above 100")
    ]
    for col in ("clat_percentiles", "lat_percentiles"):
        ordered = pl.element().sort_by(pl.element().struct.field("percentile")).struct.field("value_ns")
        rules.append((pl.col(col).list.eval(ordered.diff()).list.min() < 0, lambda r, c=col: _falling(r[c], c)))
    for kind in ("lat", "clat", "slat"):
        low, mean, high = (pl.col(f"{kind}_{s}_ns") for s in ("min", "mean", "max"))
        # fio's normal output prints min and max in whole us or ms (rounded down): allow the max one unit more
        unit = pl.when((low % 1e6 == 0) & (high % 1e6 == 0)).then(1e6).when((low % 1e3 == 0) & (high % 1e3 == 0))
        slack = unit.then(1e3).otherwise(0.0) + high.abs() * 1e-9
        rules.append(((mean < low - low.abs() * 1e-9) | (mean > high + slack), lambda r, k=kind: _outside(r, k)))
    seconds = pl.col("runtime_ns") / 1e9
    for rate, amount in (("iops", "io_count"), ("bandwidth_bytes_per_s", "io_bytes")):
        allowed = RATE_SLACK * pl.col(amount) / seconds + 1
        rules.append(
            ((pl.col("runtime_ns") > 0) & (pl.col(rate) > allowed), lambda r, a=rate, b=amount: _rate(r, a, b))
        )
    return rules


def _falling(points: list[dict], column: str) -> str:
    ordered = sorted(points, key=lambda p: p["percentile"])
    for lower, upper in zip(ordered, ordered[1:], strict=False):
        if upper["value_ns"] < lower["value_ns"]:
            return (
                f"{column}: the {upper['percentile']:g}th percentile ({_number(upper['value_ns'])} ns) is below the "
                f"{lower['percentile']:g}th ({_number(lower['value_ns'])} ns)"
            )
    return f"{column}: a percentile below a lower one"


def _outside(row: dict, kind: str) -> str:
    low, mean, high = (row[f"{kind}_{s}_ns"] for s in ("min", "mean", "max"))
    return f"{kind} mean {_number(mean)} ns outside its own min {_number(low)} and max {_number(high)} ns"


def _rate(row: dict, rate: str, amount: str) -> str:
    return (
        f"{rate} is {_number(row[rate])}, over {RATE_SLACK:g} times what {_number(row[amount])} {amount} in "
        f"{row['runtime_ns'] / 1e9:,.6g} s allow"
    )


def check_rules(frame: pl.DataFrame | pl.LazyFrame, table: str) -> None:
    """Raise :class:`ImpossibleValue` at the first row that breaks one of ``table``'s :func:`_rules`.

    :func:`validate` applies it; ingest applies it to a table streamed straight to Parquet.
    """
    rules = _rules(table)
    broken = pl.any_horizontal(mask.fill_null(False) for mask, _ in rules)
    found = frame.lazy().with_row_index("_row").filter(broken)
    # a host counter below 0 may be allowed (KAVG): those rows are read and judged; elsewhere the first is enough
    first = _exact(table, found.collect()).head(1) if table == "host_counters" else found.head(1).collect()
    if first.is_empty():
        return
    row = first.row(0, named=True)
    for mask, say in rules:
        if first.select(mask.fill_null(False)).item():
            raise ImpossibleValue(_place(row, table, row["_row"]), say(row))


def _place(row: dict, table: str, index: int) -> str:
    """Name a row for a reader: its table, its position, and the job, direction or counter it holds."""
    named = [f"{k} {row[k]!r}" for k in ("job_name", "direction", "metric", "counter") if row.get(k) is not None]
    if table == "host_counters" and row.get("sample") is not None:  # a capture's line is its sample
        named = [f"sample {row['sample'] + 1} after the header", f"instance {row['instance']!r}", *named]
    if table == "intervals" and row.get("time_ns") is not None:  # a log's line by its time stamp
        named.append(f"logged {row['time_ns'] / 1e6:,.0f} ms into the run")
    return f"table {table}, row {index + 1}" + (f" ({', '.join(named)})" if named else "")


def broken_rules(frame: pl.DataFrame, table: str) -> int:
    """Return how many rows of a stored ``table`` break one of its rules (none should: the fuzz test's check)."""
    rules = _rules(table)
    return _exact(table, frame.filter(pl.any_horizontal(mask.fill_null(False) for mask, _ in rules))).height


def validate_stored_bins(frame: pl.DataFrame) -> pl.DataFrame:
    """Check a frame of ``latency_bins`` in its stored form (``STORED_LATENCY_BINS``); return it unchanged.

    The checks of :func:`validate`, per bin, and that every histogram has
    bins, the same number in each of its lists.
    """
    table = "latency_bins (stored)"
    _check_columns(frame.schema, STORED_LATENCY_BINS, table)
    if frame.height == 0:
        return frame
    checks = _row_checks("latency_bins")
    for col in _NON_NEGATIVE["latency_bins"]:
        values = pl.col(col).list.min() if col in BIN_COLUMNS else pl.col(col)
        checks[f"column {col!r} has negative values"] = (values < 0).any()
    lengths = [pl.col(col).list.len() for col in BIN_COLUMNS]
    checks["a histogram without bins"] = (pl.min_horizontal(lengths) == 0).any()
    checks["bin lists of unequal length"] = ((lengths[0] != lengths[1]) | (lengths[0] != lengths[2])).any()
    _raise_found(frame, checks, table)
    return frame


def _row_checks(table: str) -> dict[str, pl.Expr]:
    checks = {}
    if table != "host_counters":
        checks["run_id is null"] = pl.col("run_id").is_null().any()
    if "direction" in TABLES[table]:
        checks["unknown direction"] = (pl.col("direction").is_not_null() & ~pl.col("direction").is_in(DIRECTIONS)).any()
    return checks


def _raise_found(frame: pl.DataFrame, checks: dict[str, pl.Expr], table: str) -> None:
    if not checks:
        return
    found = frame.select(**{f"c{i}": expr for i, expr in enumerate(checks.values())}).row(0)
    for problem, bad in zip(checks, found, strict=True):
        if bad:
            raise SchemaError(f"table {table}: {problem}")


def nest_bins(frame: pl.DataFrame) -> pl.DataFrame:
    """``latency_bins`` rows in their stored form: one row per histogram, in order of first appearance."""
    identity = [name for name in LATENCY_BINS if name not in BIN_COLUMNS]
    return frame.group_by(identity, maintain_order=True).agg(BIN_COLUMNS)


def unnest_bins(frame: pl.LazyFrame) -> pl.LazyFrame:
    """Turn stored ``latency_bins`` back into one row per bin."""
    return frame.explode(BIN_COLUMNS)


@dataclass
class Tables:
    """The five tidy tables a reader returns; tables a format has no data for are empty."""

    runs: pl.DataFrame
    results: pl.DataFrame
    latency_bins: pl.DataFrame
    intervals: pl.DataFrame
    host_counters: pl.DataFrame

    @classmethod
    def build(cls, **frames: pl.DataFrame) -> Tables:
        """Conform and validate the given frames; tables not given are empty."""
        unknown = set(frames) - set(TABLES)
        if unknown:
            raise SchemaError(f"unknown tables: {sorted(unknown)}")
        out = {}
        for name in TABLES:
            frame = frames.get(name)
            out[name] = validate(conform(frame, name) if frame is not None else empty(name), name)
        return cls(**out)

    @classmethod
    def from_rows(cls, rows: dict[str, list[dict] | dict[str, list] | pl.DataFrame]) -> Tables:
        """Build and validate tables from plain rows: a list of dicts, a dict of columns, or a frame.

        Keys missing from a row are nulls; keys that are not schema columns are
        ignored. This is the fast path: one frame per table for many files.
        """
        frames = {}
        for name, schema in TABLES.items():
            data = rows.get(name)
            if isinstance(data, pl.DataFrame):
                frames[name] = validate(conform(data, name), name)
            elif not data:
                frames[name] = validate(empty(name), name)
            elif isinstance(data, dict):
                frames[name] = validate(
                    pl.DataFrame(data, schema={k: schema[k] for k in data}).pipe(conform, name), name
                )
            else:
                frames[name] = validate(pl.from_dicts(data, schema=schema), name)
        return cls(**frames)

    def items(self) -> list[tuple[str, pl.DataFrame]]:
        """``(table name, frame)`` pairs in schema order."""
        return [(f.name, getattr(self, f.name)) for f in fields(self)]


#: the member (``vm``) of a run that names no host: fio run locally (not client/server) writes none
UNNAMED_HOST = "host not recorded"

#: the level of a job parameter a run's output does not give (a vdbench file-system run's depth): a page of
#: its own, never pooled with the runs that give it (:func:`benchlib.fit.work_axes`); safe in a page's name
NOT_GIVEN = "not-given"


def run_unit_expr(columns: Collection[str] = ()) -> pl.Expr:
    """Return the run a row belongs to: the experimental unit, one invocation across all its hosts.

    A run id is ``<source key>-<run number>-<host>`` (:func:`benchlib.sources._common.run_id`): the
    hosts of one fio client/server run, or of one vdbench run definition, share the first two parts,
    so their rows add up to the run's total and are never counted as runs of their own. Where each VM
    wrote its own file (a study whose paths name the VM, HCIBench's worker files), ingest gives the
    files of one run one ``run_group`` (``runs``): with ``run_group`` and ``document_index`` among
    ``columns``, those rows are one run too. An id of another form is its own run.
    """
    from_id = pl.coalesce(pl.col("run_id").str.extract(r"^([^-]+-\d+)-", 1), pl.col("run_id"))
    if "run_group" in columns and "document_index" in columns:
        grouped = pl.format("{}-{}", pl.col("run_group"), pl.col("document_index"))
        return pl.when(pl.col("run_group").is_not_null()).then(grouped).otherwise(from_id).alias("run_unit")
    return from_id.alias("run_unit")


def measured_io_expr() -> pl.Expr:
    """Tell whether a ``results`` row measured I/O: IOPS, bandwidth or latency; a row of CPU figures alone did not.

    Such rows (a published table of CPU use) are no runs of their own: the design statement, the
    overview and the claims' runs read leave them out.
    """
    return pl.any_horizontal(pl.col("iops", "bandwidth_bytes_per_s", "lat_mean_ns").is_not_null())


def label_expr(name: str) -> pl.Expr:
    """Return the value of one label of a run (``runs.labels``), or null."""
    found = pl.col("labels").list.eval(
        pl.element().filter(pl.element().struct.field("name") == name).struct.field("value")
    )
    return found.list.first()


def percentile_expr(kind: str, percentile: float) -> pl.Expr:
    """Expression picking one reported percentile (ns) out of ``clat_percentiles``/``lat_percentiles``.

    Parameters
    ----------
    kind
        ``"clat"`` or ``"lat"``.
    percentile
        For example ``99.0`` or ``99.9``; matched to 1e-6.

    """
    col = pl.col(f"{kind}_percentiles")
    return (
        col.list.eval(
            pl.element()
            .filter((pl.element().struct.field("percentile") - percentile).abs() < 1e-6)
            .struct.field("value_ns")
        )
        .list.first()
        .alias(f"{kind}_p{str(percentile).replace('.', '_').removesuffix('_0')}_ns")
    )
