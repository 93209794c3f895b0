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
from datetime import datetime
from pathlib import Path

import polars as pl

from benchlib.errors import FormatError
from benchlib.schema import Tables
from benchlib.sources._common import SNIFF_BYTES, complete_lines, decode, run_id, sha256_of

_FIRST_CELL = re.compile(r'^"?\(PDH-CSV 4\.0\)')
_COLUMN = re.compile(r"^\\\\(?P<host>[^\\]+)\\(?P<object>[^\\(]+?)(?:\((?P<instance>.*)\))?\\(?P<counter>[^\\]+)$")
_TIME_FORMATS = ("%m/%d/%Y %H:%M:%S", "%m/%d/%Y %H:%M")


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
        raise FormatError(path, "line 1", "UTF-8 text (esxtop writes ASCII)") from None
    if not header.strip():
        raise FormatError(path, "byte 0", "esxtop batch output, but the file is empty")
    if not looks_like_esxtop(header):
        raise FormatError(path, "line 1", "esxtop batch output starting with '(PDH-CSV 4.0) (UTC)(0)'")
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


def _wide(path: Path) -> pl.LazyFrame:
    with open(path, "rb") as handle:
        head = handle.read(SNIFF_BYTES)
    if b"\n" not in head and b"\r" in head:  # old-Mac line ends from a spreadsheet re-save (small files)
        text = decode(path, path.read_bytes()).replace("\r", "\n")
        return pl.read_csv(
            io.StringIO(text), has_header=False, skip_rows=1, infer_schema=False, truncate_ragged_lines=True
        ).lazy()
    whole = complete_lines(path)  # a capture stopped mid-line keeps its complete samples, not the cut one
    return pl.scan_csv(
        path,
        has_header=False,
        skip_lines=1,  # the header as a raw line: a stray quote in one counter name must not swallow the samples
        infer_schema=False,
        truncate_ragged_lines=True,
        n_rows=None if whole is None else max(whole - 1, 0),
    )


def scan_esxtop(path: str | Path, *, sha256: str | None = None) -> pl.LazyFrame:
    """Lazily turn an esxtop batch CSV into ``host_counters`` rows (see :func:`read_esxtop`).

    The wide file is scanned, not loaded, so ingest can stream large captures to Parquet.
    """
    path = Path(path)
    header_line, first_sample = _first_lines(path)
    names = pl.DataFrame(_columns(path, next(csv.reader([header_line])))[0])
    fmt = _time_format(first_sample)
    time = (
        pl.col("column_0").str.strip_chars().str.strptime(pl.Datetime("ms", "UTC"), fmt, strict=False)
        if fmt
        else pl.lit(None, pl.Datetime("ms", "UTC"))
    )
    rid = run_id(sha256 or sha256_of(path), 0, None)
    return (
        _wide(path)
        .select(
            pl.int_range(pl.len(), dtype=pl.Int32).alias("sample"),
            time.alias("time"),
            *[pl.col(c).str.strip_chars().cast(pl.Float64, strict=False) for c in names["column"]],
        )
        .unpivot(index=["sample", "time"], variable_name="column", value_name="value")
        .join(names.lazy(), on="column", how="left")
        .select(pl.lit(rid).alias("run_id"), "host", "object", "instance", "counter", "time", "sample", "value")
    )


def esxtop_run(path: Path, sha256: str, counters: pl.LazyFrame) -> pl.DataFrame:
    """Return the ``runs`` row of an esxtop capture, from its counters (host, first time, span)."""
    summary = counters.select(
        pl.col("host").unique().implode().alias("hosts"),
        pl.col("time").min().alias("start"),
        pl.col("time").max().alias("end"),
    ).collect()
    hosts = summary["hosts"][0].to_list()
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


def read_esxtop(path: str | Path) -> Tables:
    """Read an esxtop batch CSV into long-form ``host_counters`` (one row per sample and counter).

    Returns one run (format ``esxtop``, host from the counter names) whose
    ``host_counters`` rows carry ``host``, ``object``, ``instance`` (null for
    objects without one), ``counter``, ``time`` and ``sample`` (0-based row).
    Values are as esxtop reports them (ms, MB/s, percent, counts); empty
    cells are null. The first sample of rate counters is zero in every real
    capture (esxtop has no previous sample): analyses should skip ``sample 0``.

    Raises
    ------
    FormatError
        When the first cell is not the PDH-CSV marker or a counter name cannot be read.

    """
    path = Path(path)
    sha = sha256_of(path)
    try:
        counters = scan_esxtop(path, sha256=sha).collect()
    except pl.exceptions.PolarsError as exc:
        raise FormatError(path, "rows", f"comma-separated esxtop samples ({str(exc).splitlines()[0]})") from None
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


def device_queue_view(host_counters: pl.DataFrame) -> pl.DataFrame:
    """Return the esxtop disk-device view.

    Return the esxtop disk-device view: one row per host, device and sample, with DQLEN, ACTV, QUED,
    %USD, LOAD, commands/s, MB read/written per second and DAVG, KAVG, GAVG, QAVG (ms).

    Built from ``host_counters`` of object ``Physical Disk SCSI Device``;
    sorted by host, device and sample.
    """
    rows = host_counters.filter(
        (pl.col("object") == "Physical Disk SCSI Device") & pl.col("counter").is_in(list(DEVICE_QUEUE_COUNTERS))
    ).with_columns(pl.col("counter").replace_strict(DEVICE_QUEUE_COUNTERS).alias("counter"))
    wide = rows.pivot(on="counter", index=["run_id", "host", "instance", "sample", "time"], values="value")
    present = [name for name in DEVICE_QUEUE_COUNTERS.values() if name in wide.columns]
    return (
        wide.rename({"instance": "device"})
        .select("run_id", "host", "device", "sample", "time", *present)
        .sort("host", "device", "sample")
    )
