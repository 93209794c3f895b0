"""fio per-interval logs and histogram logs.

fio per-interval logs (``write_bw_log``, ``write_iops_log``, ``write_lat_log``)
and histogram logs (``write_hist_log``).

Rows are ``time_ms, value, ddir, bs[, offset][, prio]`` (HOWTO "Log File
Formats"): 4 columns up to fio 3.17, a priority column from 3.18, an offset
column before it with ``log_offset=1``. Histogram logs are
``time_ms, ddir, bs, bin0, bin1, ...`` in fio's bucket layout.

Which metric a log holds is not in its rows: fio states it in the file name
it writes (``<prefix>_bw.1.log``, ``_iops``, ``_lat``, ``_clat``, ``_slat``,
``_clat_hist``), so that suffix (or an explicit ``metric=``) decides it. The
latency unit is not in the file either: nanoseconds since fio 3.0,
microseconds before; pass ``latency_unit="us"`` for fio 2.x logs.

With ``log_unix_epoch=1`` (``benchlib run`` sets it) the stamps are Unix times in ms, so each
member's logs say when it ran by its own clock: :func:`epoch_base` finds such a log's zero (one
interval before its first stamp), its rows are read as times since then, and its ``runs`` row
carries that zero as ``start_time``.

Large logs are scanned lazily (:func:`scan_fio_log`) so ingest can stream
them to Parquet without loading them whole.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from benchlib.errors import FormatError, quoted
from benchlib.schema import INTERVAL_UNITS, LATENCY_BINS, Tables
from benchlib.sources._common import SNIFF_BYTES, complete_lines, decode, ragged_rows, run_id, sha256_of
from benchlib.sources.fio_common import PLAT_GROUPS_V2, PLAT_GROUPS_V3, PLAT_VAL, plat_idx_to_val

_NAME = re.compile(r"_(?P<metric>bw|iops|lat|clat|slat|clat_hist|lat_hist)(?:\.(?P<job>\d+))?\.log$")
_ROW = re.compile(r"^\s*\d+,\s*-?\d+(\.\d+)?,\s*\d+,\s*\d+(,\s*-?\d+)*\s*$")
_NUMBERS = re.compile(r"^\s*\d+(,\s*-?\d+(\.\d+)?)*\s*$")  # a row of numbers, however many
_DIRECTIONS = pl.Series(["read", "write", "trim"])
_LATENCY_FACTOR = {"ns": 1.0, "us": 1000.0}
_BINS_V2, _BINS_V3 = PLAT_GROUPS_V2 * PLAT_VAL, PLAT_GROUPS_V3 * PLAT_VAL  # 1216 and 1856
_VALUE_FACTOR = {"bw": 1024.0, "iops": 1.0}


def looks_like_fio_log(head: str) -> bool:
    """Whether the first lines of a file are fio log rows (``1000, 2345, 0, 4096``).

    A row after the first with fewer values (``2000, 210``) is a log's too: the reader refuses it by its line
    (:func:`scan_fio_log`), where "not a supported format" would not say what is wrong.
    """
    lines = [line for line in head.splitlines()[:5] if line.strip()]
    return bool(lines) and bool(_ROW.match(lines[0])) and all(_NUMBERS.match(line) for line in lines[1:-1])


#: a first stamp this large (ms) is a Unix time, 2001-09-09 or later: no run logs for 31 years
EPOCH_MS_FROM = 10**12


#: the interval a log of one Unix stamp is taken to have logged (``benchlib run``'s ``log_avg_msec``)
ONE_STAMP_MS = 1000


def epoch_base(stamps: list[int]) -> tuple[int, bool] | None:
    """Return the Unix time (ms) a ``log_unix_epoch`` log counts from, None for a log of times since its start.

    ``stamps``: the log's first time stamps, in order. fio stamps an averaged log at the end of each
    interval, so the zero is one interval before the first stamp; the interval is the median step between
    stamps, as fio's stamps drift by a millisecond or so from the nominal interval.
    The second item says whether the log showed its interval: a log of one stamp does not, and is taken to
    have logged one second (:data:`ONE_STAMP_MS`); its start is then not the member's own.
    """
    if not stamps or stamps[0] < EPOCH_MS_FROM:
        return None
    steps = sorted(b - a for a, b in zip(stamps, stamps[1:], strict=False) if b > a)
    if not steps:
        return stamps[0] - ONE_STAMP_MS, False
    return stamps[0] - steps[len(steps) // 2], True


def first_stamps(lines: list[str]) -> list[int]:
    """Return the time stamps of a log's first lines (:func:`_sniff`'s)."""
    return [int(float(line.split(",", 1)[0])) for line in lines if line.strip()]


def log_epoch_base(path: Path) -> int | None:
    """Return when a log's member started (Unix ms) by its own clock, where its stamps show it (:func:`epoch_base`)."""
    found = epoch_base(first_stamps(_sniff(path)))
    return found[0] if found and found[1] else None


def _sniff(path: Path) -> list[str]:
    with open(path, "rb") as handle:
        head = handle.read(SNIFF_BYTES)
    if not head.strip():
        raise FormatError(path, "byte 0", "fio log rows, but the file is empty")
    text = decode(path, head)
    lines = [line for line in text.splitlines() if line.strip()]
    complete = lines[:-1] if len(lines) > 1 and not text.endswith("\n") else lines
    for number, line in enumerate(complete[:20], start=1):
        if not re.match(r"^\s*-?\d+(\.\d+)?(\s*,\s*-?\d+(\.\d+)?)+\s*$", line):
            raise FormatError(path, f"line {number}", f"a fio log row 'time_ms, value, ddir, bs', found {line[:60]!r}")
    return complete


def _metric_of(path: Path, metric: str | None) -> tuple[str, int | None]:
    match = _NAME.search(path.name)
    job = int(match["job"]) if match and match["job"] else None
    if metric is not None:
        return metric, job
    if match is None:
        raise FormatError(
            path,
            "file name",
            "fio's log naming '<prefix>_<bw|iops|lat|clat|slat|clat_hist>[.<job>].log' (the rows do not say "
            "which metric they hold); keep fio's name or pass metric=",
            found=quoted(path.name),
        )
    return match["metric"], job


def _check_directions(path: Path, lines: list[str], *, column: int) -> None:
    """Refuse a log whose first rows name a direction fio never writes (0 read, 1 write, 2 trim).

    Its columns are not fio's (swapped, or another tool's): its values would be read as the wrong figures.
    """
    for number, line in enumerate(lines, start=1):
        fields = [f.strip() for f in line.split(",")]
        if len(fields) > column and fields[column] not in ("0", "1", "2"):
            raise FormatError(
                path,
                f"line {number}, column {column + 1}",
                "fio's direction there (0 read, 1 write, 2 trim): the log's columns in fio's order",
                found=quoted(line.strip()),
            )


def _direction(ddir: pl.Expr) -> pl.Expr:
    # when/then over three literals costs a third of replace_strict on a billion-byte log
    return (
        pl.when(ddir == 0)
        .then(pl.lit("read"))
        .when(ddir == 1)
        .then(pl.lit("write"))
        .when(ddir == 2)
        .then(pl.lit("trim"))
    )


def scan_fio_log(
    path: str | Path,
    *,
    metric: str | None = None,
    latency_unit: str = "ns",
    run: str | None = None,
    sha256: str | None = None,
) -> pl.LazyFrame:
    """Lazily read a bandwidth, IOPS or latency log as ``intervals`` rows.

    Parameters
    ----------
    path
        The log file.
    metric
        ``bw``, ``iops``, ``lat``, ``clat`` or ``slat``; taken from fio's file
        name suffix when not given.
    latency_unit
        ``"ns"`` (fio 3.x) or ``"us"`` (fio 2.x) for latency logs.
    run, sha256
        The run id to put on every row and the file's hash if already known.

    Returns
    -------
    polars.LazyFrame
        In the ``intervals`` schema: ``time_ns`` is the log's ms time stamp in
        ns, ``value`` in bytes/s, IOPS or ns.

    """
    path = Path(path)
    metric, job = _metric_of(path, metric)
    if metric.endswith("_hist"):
        raise FormatError(
            path,
            "file name",
            "a bw/iops/lat log; histogram logs are read by read_fio_hist_log",
            found=f"a histogram log's name, {quoted(path.name)}",
        )
    lines = _sniff(path)
    width = lines[0].count(",") + 1
    if width < 4:
        raise FormatError(path, "line 1", f"at least 4 comma-separated columns (time, value, ddir, bs), found {width}")
    _check_directions(path, lines, column=2)
    factor = _LATENCY_FACTOR[latency_unit] if metric in ("lat", "clat", "slat") else _VALUE_FACTOR[metric]
    names = ["time_ms", "value", "ddir", "bs", "c5", "c6", "c7"][:width]
    dtypes = [pl.Int64, pl.Float64, pl.Int32, pl.Int64] + [pl.Int64] * (width - 4)
    frame = pl.scan_csv(
        path,
        has_header=False,
        new_columns=names,
        schema_overrides=dict(zip(names, dtypes, strict=True)),
        truncate_ragged_lines=True,
    )
    whole = complete_lines(path)
    if whole is not None:  # the last line was cut off: never read part of a number as a value
        frame = frame.head(whole)
    # a row with fewer values than line 1 reads as nulls (a block size of none): the strict cast of its -1
    # fails as polars collects, the one place a lazy read can refuse, and the refusal quotes the row
    # (ragged_rows); the filter keeps every row
    frame = frame.filter(pl.col(names[-1]).abs().fill_null(-1).cast(pl.UInt64, strict=True).is_not_null())
    offset = pl.col("c5") if width >= 6 else pl.lit(None, pl.Int64)
    priority = pl.col("c6") if width >= 6 else (pl.col("c5") if width == 5 else pl.lit(None, pl.Int64))
    run = run or run_id(sha256 or sha256_of(path), 0, None)
    found = epoch_base(first_stamps(lines))
    if found is not None:
        frame = frame.with_columns(pl.col("time_ms") - found[0])
    return frame.select(
        pl.lit(run).alias("run_id"),
        pl.lit(None, pl.String).alias("client"),
        pl.lit(None, pl.String).alias("job_name"),
        pl.lit(job, pl.Int32).alias("job_index"),
        _direction(pl.col("ddir")).alias("direction"),
        (pl.col("time_ms") * 1_000_000).alias("time_ns"),
        pl.lit(metric, pl.String).alias("metric"),
        pl.lit(INTERVAL_UNITS[metric], pl.String).alias("unit"),
        (pl.col("value") * factor).alias("value"),
        pl.when(pl.col("bs") > 0).then(pl.col("bs")).alias("block_size_bytes"),
        offset.alias("offset_bytes"),
        priority.cast(pl.Int32).alias("priority"),
        pl.lit(False).alias("is_cumulative"),
        pl.lit(None, pl.Boolean).alias("is_warmup"),
    )


def read_fio_hist_log(path: str | Path, *, latency_unit: str | None = None, run: str | None = None) -> pl.DataFrame:
    """Read a histogram log (``write_hist_log``) as ``latency_bins`` rows.

    The bin layout is fio's: 1856 bins in ns since fio 3.0, 1216 bins in usec
    before; the number of columns tells which unless ``latency_unit`` says.
    Zero counts are dropped.
    """
    path = Path(path)
    metric, job = _metric_of(path, None if _NAME.search(path.name) else "clat_hist")
    lines = _sniff(path)
    width = lines[0].count(",") + 1
    bins = width - 3
    _check_directions(path, lines, column=1)
    if bins not in (_BINS_V2, _BINS_V3) and latency_unit is None:
        raise FormatError(
            path, "line 1", f"a histogram log with {_BINS_V2} (fio 2.x) or {_BINS_V3} (fio 3.x) bins, found {bins}"
        )
    factor = _LATENCY_FACTOR[latency_unit or ("us" if bins == _BINS_V2 else "ns")]
    names = ["time_ms", "ddir", "bs"] + [f"b{i}" for i in range(bins)]
    try:
        wide = pl.read_csv(
            path,
            has_header=False,
            new_columns=names,
            schema_overrides={n: pl.Int64 for n in names},
            n_rows=complete_lines(path),  # a line cut off at the end is left out
        )
    except pl.exceptions.PolarsError as exc:
        raise ragged_rows(path, "histogram log rows of integers", exc) from None
    _check_counts(path, wide, bins)
    base = (epoch_base(first_stamps(lines)) or (0, True))[0]
    values = pl.DataFrame(
        {"bin_index": range(bins), "bin_value_ns": [plat_idx_to_val(i) * factor for i in range(bins)]}
    )
    long = (
        wide.unpivot(index=["time_ms", "ddir", "bs"], variable_name="bin", value_name="count")
        .filter(pl.col("count") > 0)
        .with_columns(pl.col("bin").str.slice(1).cast(pl.Int32).alias("bin_index"))
        .join(values.with_columns(pl.col("bin_index").cast(pl.Int32)), on="bin_index", how="left")
    )
    return (
        long.select(
            pl.lit(run or run_id(sha256_of(path), 0, None)).alias("run_id"),
            pl.lit(None, pl.String).alias("client"),
            pl.lit(None, pl.String).alias("job_name"),
            pl.lit(job, pl.Int32).alias("job_index"),
            _direction(pl.col("ddir")).alias("direction"),
            pl.lit(metric.removesuffix("_hist")).alias("latency_kind"),
            ((pl.col("time_ms") - base) * 1_000_000).alias("time_ns"),
            "bin_index",
            "bin_value_ns",
            "count",
        )
        .cast(dict(LATENCY_BINS))
        .sort("time_ns", "direction", "bin_index")
    )


#: No interval of one job completes this many I/Os in one latency bucket: a larger count is not data.
_IMPOSSIBLE_COUNT = 1 << 40


def _check_counts(path: Path, wide: pl.DataFrame, bins: int) -> None:
    counts = wide.select([f"b{i}" for i in range(bins)])
    short = wide.select(pl.any_horizontal(pl.all().is_null()).arg_true().first()).item()
    if short is not None:  # a row with fewer values than the first: its missing bins are not zeros
        raise FormatError(
            path,
            f"line {short + 1}",
            f"histogram log rows of integers, each with the {bins + 3} values of line 1",
            found=f"{sum(v is not None for v in wide.row(short))}",
        )
    bad = counts.select(pl.all() >= _IMPOSSIBLE_COUNT).to_numpy().nonzero()
    if len(bad[0]):
        row, column = int(bad[0][0]), int(bad[1][0])
        value = counts.row(row)[column]
        raise FormatError(
            path,
            f"line {row + 1}, bin {column}",
            f"latency bucket counts of I/Os, found {value:.3g}, which no interval can hold: "
            "the log holds uninitialised memory from the fio that wrote it; use the run's JSON instead",
        )


def log_run(path: Path, sha: str, fmt: str, duration_ns: int | None, base: int | None) -> pl.DataFrame:
    """Return the ``runs`` row of one fio log (``fmt``: ``fio-log`` or ``fio-hist-log``).

    ``base``: the log's zero where its stamps are Unix times (:func:`epoch_base`), its ``start_time``.
    """
    return pl.DataFrame(
        [
            {
                "start_time": datetime.fromtimestamp(base / 1000, UTC) if base is not None else None,
                "run_id": run_id(sha, 0, None),
                "tool": "fio",
                "format": fmt,
                "is_aggregate": False,
                "duration_ns": duration_ns,
                "source": str(path),
                "sha256": sha,
                "document_index": 0,
            }
        ]
    )


def read_fio_log(path: str | Path, *, metric: str | None = None, latency_unit: str = "ns") -> Tables:
    """Read one fio log (interval or histogram) into the tidy tables.

    Parameters
    ----------
    path
        A ``*_bw``, ``*_iops``, ``*_lat``, ``*_clat``, ``*_slat`` or ``*_clat_hist`` log.
    metric
        Overrides the metric taken from the file name.
    latency_unit
        ``"ns"`` for fio 3.x logs, ``"us"`` for fio 2.x logs.

    Returns
    -------
    Tables
        One run (format ``fio-log`` or ``fio-hist-log``) and its ``intervals``
        or ``latency_bins``.

    Raises
    ------
    FormatError
        When rows are not fio log rows or the metric cannot be told.

    """
    path = Path(path)
    sha = sha256_of(path)
    name_metric, _ = _metric_of(path, metric) if metric or _NAME.search(path.name) else (None, None)
    lines = _sniff(path)
    is_hist = (name_metric or "").endswith("_hist") or lines[0].count(",") + 1 > 16
    if is_hist:
        bins = read_fio_hist_log(path, run=run_id(sha, 0, None))
        base = log_epoch_base(path)
        return Tables.build(runs=log_run(path, sha, "fio-hist-log", bins["time_ns"].max(), base), latency_bins=bins)
    try:
        intervals = scan_fio_log(path, metric=metric, latency_unit=latency_unit, sha256=sha).collect()
    except pl.exceptions.PolarsError as exc:
        raise ragged_rows(path, "numeric fio log rows", exc) from None
    run = log_run(path, sha, "fio-log", intervals["time_ns"].max(), log_epoch_base(path))
    return Tables.build(runs=run, intervals=intervals)
