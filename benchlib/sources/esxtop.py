r"""esxtop batch output (``esxtop -b``): Windows perfmon "PDH-CSV 4.0", into long-form ``host_counters``.

The header's first cell is ``(PDH-CSV 4.0) (UTC)(0)``; every other column is
``\\<host>\<Object>(<instance>)\<Counter>`` (objects such as ``Memory`` have no
instance). Raw files quote every field and end every line with a comma;
files re-saved by spreadsheets lose the quotes, use CRLF or CR-only line ends,
and shorten the time stamp (``3/26/2015 22:42``, or only ``22:42:26``: then the
date is unknown, ``time`` is null and ``sample`` keeps the order).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Collection, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
from polars.io.plugins import register_io_source

from benchlib.errors import FormatError, quoted
from benchlib.schema import Tables
from benchlib.sources._common import SNIFF_BYTES, ragged_rows, run_id, sha256_of

_FIRST_CELL = re.compile(r'^"?\(PDH-CSV 4\.0\)')
_COLUMN = re.compile(r"^\\\\(?P<host>[^\\]+)\\(?P<object>[^\\(]+?)(?:\((?P<instance>.*)\))?\\(?P<counter>[^\\]+)$")
_TIME_FORMATS = ("%m/%d/%Y %H:%M:%S", "%m/%d/%Y %H:%M")
#: a spreadsheet's resave of a capture may keep only the time of day: its samples are read undated
_TIME_OF_DAY = re.compile(r"\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?")


def looks_like_esxtop(head: str) -> bool:
    """Whether a file starts like esxtop batch output."""
    return bool(_FIRST_CELL.match(head.lstrip("\ufeff")))


def _first_lines(path: Path) -> tuple[str, str]:
    """Return the header line and the first sample line (universal newlines: LF, CRLF or CR)."""
    try:
        with open(path, encoding="utf-8-sig", newline=None) as handle:
            header = handle.readline()
            first = handle.readline()
    except UnicodeDecodeError:
        raise FormatError(
            path, "line 1", "UTF-8 text (esxtop writes ASCII)", found="bytes that are not UTF-8"
        ) from None
    if not header.strip():
        raise FormatError(path, "byte 0", "esxtop batch output, but the file is empty")
    if not looks_like_esxtop(header):
        raise FormatError(
            path, "line 1", "esxtop batch output starting with '(PDH-CSV 4.0) (UTC)(0)'", found=quoted(header.strip())
        )
    return header, first


def _columns(path: Path, header: list[str]) -> tuple[list[dict[str, str | None]], list[str]]:
    """Return the counter columns of a header, and the columns whose names are not esxtop's (left out).

    One stray name among thousands (a spreadsheet's edit, a character lost in a copy) costs only
    its own column; a header with no counter name at all is not esxtop's.
    """
    parsed, skipped = [], []
    for index, cell in enumerate(header[1:], start=1):
        if cell == "":
            continue  # the trailing comma of raw esxtop lines
        match = _COLUMN.match(cell)
        if match is None:
            skipped.append(f"column {index + 1} {cell[:80]!r}")
            continue
        parsed.append({"column": f"column_{index}", **match.groupdict()})
    if not parsed:
        raise FormatError(
            path,
            "line 1",
            f"counter names '\\\\host\\Object(instance)\\Counter', found none ({'; '.join(skipped[:3])})",
        )
    return parsed, skipped


def skipped_columns(path: str | Path) -> list[str]:
    """Return the header columns of an esxtop capture that are left out, each with its place and text."""
    header_line, _ = _first_lines(Path(path))
    return _columns(Path(path), next(csv.reader([header_line])))[1]


def _time_format(first_sample: str) -> str | None:
    stamp = next(csv.reader([first_sample]), [""])[0].strip() if first_sample.strip() else ""
    for fmt in _TIME_FORMATS:
        try:
            datetime.strptime(stamp, fmt)
        except ValueError:
            continue
        return fmt
    return None


#: Bytes of sample lines parsed at once: a few hundred samples of a capture with thousands of
#: counters, so memory stays bounded whatever the capture's length.
BATCH_BYTES = 12 << 20

_SCHEMA = {
    "host": pl.Categorical,
    "object": pl.Categorical,
    "instance": pl.Categorical,
    "counter": pl.Categorical,
    "time": pl.Datetime("ms", "UTC"),
    "sample": pl.Int32,
    "value": pl.Float64,
}


def _sample_lines(path: Path) -> Iterator[list[bytes]]:
    """Yield the sample lines after the header, about ``BATCH_BYTES`` at a time; a cut-off last line is left out.

    CR-only line ends (an old Mac spreadsheet's re-save; such files are small) are read whole.
    """
    with open(path, "rb") as handle:
        head = handle.read(SNIFF_BYTES)
        handle.seek(0)
        if b"\n" not in head and b"\r" in head:
            yield [line + b"\n" for line in handle.read().split(b"\r")[1:] if line]
            return
        handle.readline()  # the header, parsed on its own (a stray quote in one name must not swallow samples)
        batch: list[bytes] = []
        size = 0
        for line in handle:
            if not line.endswith(b"\n"):
                break  # a capture stopped mid-line: its complete samples only
            batch.append(line)
            size += len(line)
            if size >= BATCH_BYTES:
                yield batch
                batch, size = [], 0
        if batch:
            yield batch


class _Capture:
    """What reading a capture's samples needs from its header: the columns kept, their names, the time format."""

    def __init__(self, path: Path, objects: Collection[str]) -> None:
        header_line, first_sample = _first_lines(path)
        header = next(csv.reader([header_line]))
        parsed = _columns(path, header)[0]
        if objects:
            parsed = [c for c in parsed if c["object"] in objects]
        self.labels = [f"column_{i}" for i in range(len(header))]
        self.kept = [0, *(int(c["column"].split("_")[1]) for c in parsed)]
        # categorical: a row takes a number, not a copy of its name (Parquet keeps the names once per part)
        fields = ("host", "object", "instance", "counter")
        self.names = {f: pl.Series(f, [c[f] for c in parsed], pl.Categorical) for f in fields}
        self.values = {self.labels[i]: pl.Float64 for i in self.kept[1:]}
        if not first_sample.strip():
            raise FormatError(path, "line 2", "esxtop samples after the header", found="the header alone")
        fmt = _time_format(first_sample)
        stamp = next(csv.reader([first_sample]), [""])[0].strip()
        # a spreadsheet's resave may keep the time of day alone: its samples are undated (read, with no time);
        # anything else in the time column would leave every sample unplaced against the runs
        if fmt is None and not _TIME_OF_DAY.fullmatch(stamp):
            raise FormatError(
                path,
                "line 2, column 1",
                "a sample time as esxtop writes it ('04/17/2018 10:55:44')",
                found=quoted(stamp),
            )
        self.path, self.dated = path, fmt is not None
        time = pl.col("column_0").str.strip_chars()
        self.time = time.str.strptime(pl.Datetime("ms", "UTC"), fmt, strict=False) if fmt else pl.lit(None)

    def rows(self, lines: list[bytes], first: int) -> pl.DataFrame:
        """Long-form rows of these sample lines (the first is sample ``first``), counter by counter."""
        wide = pl.read_csv(
            io.BytesIO(b"".join(lines)),
            has_header=False,
            new_columns=self.labels,
            columns=self.kept,
            schema_overrides=self.values,  # a cell that is no number (a spreadsheet's "n/a") is null
            infer_schema=False,
            truncate_ragged_lines=True,
            ignore_errors=True,
        )
        n, k = wide.height, len(self.kept) - 1
        counter = pl.Series(np.repeat(np.arange(k, dtype=np.int32), n))
        sample = np.arange(first, first + n, dtype=np.int32)
        times = wide.with_columns(self.time.cast(pl.Datetime("ms", "UTC")).alias("column_0"))["column_0"]
        unread = (times.is_null() & wide["column_0"].is_not_null()).arg_true() if self.dated else pl.Series([])
        if unread.len():  # a sample of unknown time would fall outside every run, or inside the wrong one
            at = int(unread[0])
            raise FormatError(
                self.path,
                f"line {first + at + 2}, column 1",
                "a sample time in the format of the capture's first",
                found=quoted(wide["column_0"][at]),
            )
        return pl.DataFrame(
            {
                **{name: series.gather(counter) for name, series in self.names.items()},
                "time": times.gather(pl.Series(np.tile(np.arange(n, dtype=np.int32), k))),
                "sample": np.tile(sample, k),
                "value": wide.drop("column_0").to_numpy().ravel(order="F"),
            },
            schema=_SCHEMA,
        )


def scan_esxtop(path: str | Path, *, sha256: str | None = None, objects: Collection[str] = ()) -> pl.LazyFrame:
    """Lazily turn an esxtop batch CSV into ``host_counters`` rows (see :func:`read_esxtop`).

    The capture is read some hundred samples at a time, two batches at once, each turned into
    long-form rows as it is needed, so a capture of gigabytes goes to Parquet in bounded memory.
    ``objects``: keep only the counters of these esxtop objects (``Physical Disk``, ``Group Cpu``
    ...); the other columns are not parsed.
    """
    path = Path(path)
    capture = _Capture(path, objects)

    def batches(
        with_columns: list[str] | None, predicate: pl.Expr | None, n_rows: int | None, _size: int | None
    ) -> Iterator[pl.DataFrame]:
        first, ahead = 0, []
        with ThreadPoolExecutor(2) as pool:  # polars parses without the GIL: two batches at once
            for lines in _sample_lines(path):
                ahead.append(pool.submit(capture.rows, lines, first))
                first += len(lines)
                if len(ahead) > 2:
                    yield _project(ahead.pop(0).result(), with_columns, predicate)
            for future in ahead:
                yield _project(future.result(), with_columns, predicate)

    source = register_io_source(batches, schema=_SCHEMA, explain_name="esxtop")
    return source.select(pl.lit(run_id(sha256 or sha256_of(path), 0, None)).alias("run_id"), *_SCHEMA)


def _project(frame: pl.DataFrame, with_columns: list[str] | None, predicate: pl.Expr | None) -> pl.DataFrame:
    """Apply what polars pushed down to the source: a filter and the columns it needs."""
    if predicate is not None:
        frame = frame.filter(predicate)
    return frame if with_columns is None else frame.select(with_columns)


def _last_sample(path: Path) -> str:
    """Return the capture's last complete line (read from the end: a capture can run to gigabytes)."""
    with open(path, "rb") as handle:
        size = handle.seek(0, 2)
        chunk = 1 << 20
        while True:
            handle.seek(max(size - chunk, 0))
            tail = handle.read()
            whole = tail[: max(tail.rfind(b"\n"), tail.rfind(b"\r")) + 1]  # a cut-off last line is not a sample
            lines = whole.splitlines()
            if len(lines) >= 2 or chunk >= size:
                return lines[-1].decode("utf-8", "replace") if lines else ""
            chunk *= 4


def capture_span(path: Path) -> tuple[datetime | None, datetime | None]:
    """Return the first and last sample times of a capture, from its first and last lines (samples are in order)."""
    _, first = _first_lines(path)
    fmt = _time_format(first)
    if fmt is None:
        return None, None

    def when(line: str) -> datetime | None:
        cell = next(csv.reader([line]), [""])[0].strip() if line.strip() else ""
        try:
            return datetime.strptime(cell, fmt).replace(tzinfo=UTC)
        except ValueError:
            return None

    return when(first), when(_last_sample(path))


def esxtop_run(path: Path, sha256: str, counters: pl.LazyFrame | None = None) -> pl.DataFrame:
    """Return the ``runs`` row of an esxtop capture: its host (from the header), first time and span.

    The times come from the counters when given, else (a streamed capture) from its first and last lines.
    """
    hosts = sorted({c["host"] for c in _columns(path, next(csv.reader([_first_lines(path)[0]])))[0]})
    if counters is None:
        start, end = capture_span(path)
    else:
        summary = counters.select(pl.col("time").min().alias("start"), pl.col("time").max().alias("end")).collect()
        start, end = summary["start"][0], summary["end"][0]
    return pl.DataFrame(
        [
            {
                "run_id": run_id(sha256, 0, None),
                "tool": "esxtop",
                "format": "esxtop",
                "host": hosts[0] if len(hosts) == 1 else None,
                "is_aggregate": False,
                "start_time": start,
                "duration_ns": None if start is None else int((end - start).total_seconds() * 1e9),
                "sha256": sha256,
                "source": str(path),
                "document_index": 0,
            }
        ]
    )


def read_esxtop(path: str | Path, objects: Collection[str] = ()) -> Tables:
    """Read an esxtop batch CSV into long-form ``host_counters`` (one row per sample and counter).

    Returns one run (format ``esxtop``, host from the counter names) whose
    ``host_counters`` rows carry ``host``, ``object``, ``instance`` (null for
    objects without one), ``counter``, ``time`` and ``sample`` (0-based row).
    Values are as esxtop reports them (ms, MB/s, percent, counts); empty
    cells are null. The first sample of rate counters is zero in every real
    capture (esxtop has no previous sample): analyses should skip ``sample 0``.
    ``objects``: keep only these objects' counters (the study's ``[esxtop] objects``).

    Raises
    ------
    FormatError
        When the first cell is not the PDH-CSV marker or a counter name cannot be read.

    """
    path = Path(path)
    sha = sha256_of(path)
    try:
        counters = scan_esxtop(path, sha256=sha, objects=objects).collect()
        counters = counters.with_columns(pl.col(pl.Categorical).cast(pl.String))
    except pl.exceptions.PolarsError as exc:
        raise ragged_rows(path, "comma-separated esxtop sample rows", exc) from None
    return Tables.build(runs=esxtop_run(path, sha, counters.lazy()), host_counters=counters)


#: esxtop's counter names for the device queue view, by the short names engineers use.
DEVICE_QUEUE_COUNTERS = {
    "Device Q Depth": "DQLEN",
    "Active Commands": "ACTV",
    "Queued Commands": "QUED",
    "% Used": "USD_pct",
    "Load": "LOAD",
    "Commands/sec": "CMDS_per_s",
    "MBytes Read/sec": "MBREAD_per_s",
    "MBytes Written/sec": "MBWRTN_per_s",
    "Average Driver MilliSec/Command": "DAVG_ms",
    "Average Kernel MilliSec/Command": "KAVG_ms",
    "Average Guest MilliSec/Command": "GAVG_ms",
    "Average Queue MilliSec/Command": "QAVG_ms",
}


def device_queue_view(host_counters: pl.DataFrame, keys: Sequence[str] = ()) -> pl.DataFrame:
    """Return the esxtop disk-device view.

    Return the esxtop disk-device view: one row per host, device and sample, with DQLEN, ACTV, QUED,
    %USD, LOAD, commands/s, MB read/written per second and DAVG, KAVG, GAVG, QAVG (ms).

    Built from ``host_counters`` of object ``Physical Disk SCSI Device``; ``keys``: columns of
    ``host_counters`` kept beside (the levels of the run a sample fell in); sorted by them, host,
    device and sample.
    """
    rows = host_counters.filter(
        (pl.col("object") == "Physical Disk SCSI Device") & pl.col("counter").is_in(list(DEVICE_QUEUE_COUNTERS))
    ).with_columns(pl.col("counter").replace_strict(DEVICE_QUEUE_COUNTERS).alias("counter"))
    if rows.is_empty():
        schema = {"run_id": pl.String, "host": pl.String, "device": pl.String, "sample": pl.Int64}
        return pl.DataFrame(schema={**schema, **dict.fromkeys(keys, pl.String)})
    wide = rows.pivot(on="counter", index=["run_id", *keys, "host", "instance", "sample", "time"], values="value")
    present = [name for name in DEVICE_QUEUE_COUNTERS.values() if name in wide.columns]
    return (
        wide.rename({"instance": "device"})
        .select("run_id", *keys, "host", "device", "sample", "time", *present)
        .sort(*keys, "host", "device", "sample")
    )


#: esxtop's adapter counters for the adapter queue view. ``Adapter Q Depth`` (AQLEN, the commands the
#: adapter's driver accepts at once) is written only by a capture of every counter (``esxtop -b -a``), on the
#: adapter's own instance (``vmhba0``, no ``:``) of object ``Physical Disk``; the rates are on
#: ``Physical Disk Adapter``.
ADAPTER_QUEUE_COUNTERS = {
    "Adapter Q Depth": "AQLEN",
    "Commands/sec": "CMDS_per_s",
    "Average Driver MilliSec/Command": "DAVG_ms",
    "Average Kernel MilliSec/Command": "KAVG_ms",
    "Average Guest MilliSec/Command": "GAVG_ms",
}


def adapter_queue_view(host_counters: pl.DataFrame, keys: Sequence[str] = ()) -> pl.DataFrame:
    """Return the esxtop adapter view: per host, adapter and sample, AQLEN, commands/s and DAVG, KAVG, GAVG.

    AQLEN comes from any ``Physical Disk`` object's adapter instance (no ``:`` in it, so not a path);
    the rates from ``Physical Disk Adapter``. An adapter without an ``Adapter Q Depth`` counter (a capture
    without ``-a``) is left out: its queue depth is unknown. ``keys``: columns kept beside, as
    :func:`device_queue_view`'s. Sorted by them, host, adapter and sample.
    """
    adapter_level = pl.col("instance").is_not_null() & ~pl.col("instance").str.contains(":", literal=True)
    depth = host_counters.filter(
        pl.col("object").str.starts_with("Physical Disk") & (pl.col("counter") == "Adapter Q Depth") & adapter_level
    )
    rates = host_counters.filter(
        (pl.col("object") == "Physical Disk Adapter")
        & (pl.col("counter") != "Adapter Q Depth")
        & pl.col("counter").is_in(list(ADAPTER_QUEUE_COUNTERS))
    )
    index = ["run_id", *keys, "host", "instance", "sample", "time"]
    if depth.is_empty():
        schema = {"run_id": pl.String, "host": pl.String, "adapter": pl.String, "sample": pl.Int64, "AQLEN": pl.Float64}
        return pl.DataFrame(schema={**schema, **dict.fromkeys(keys, pl.String)})
    rows = pl.concat([depth, rates], how="vertical_relaxed").with_columns(
        pl.col("counter").replace_strict(ADAPTER_QUEUE_COUNTERS).alias("counter")
    )
    wide = rows.pivot(on="counter", index=index, values="value", aggregate_function="max")
    present = [name for name in ADAPTER_QUEUE_COUNTERS.values() if name in wide.columns]
    return (
        wide.filter(pl.col("AQLEN").is_not_null())
        .rename({"instance": "adapter"})
        .select("run_id", *keys, "host", "adapter", "sample", "time", *present)
        .sort(*keys, "host", "adapter", "sample")
    )
