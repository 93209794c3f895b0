"""esxtop batch output (``esxtop -b``): Windows perfmon "PDH-CSV 4.0", into long-form ``host_counters``.

The header's first cell is ``(PDH-CSV 4.0) (UTC)(0)``; every other column is
``\\\\<host>\\<Object>(<instance>)\\<Counter>`` (objects such as ``Memory`` have no
instance). Raw files quote every field and end every line with a comma;
files re-saved by spreadsheets lose the quotes, use CRLF or CR-only line ends,
and shorten the time stamp (``3/26/2015 22:42``, or only ``22:42:26``: then the
date is unknown, ``time`` is null and ``sample`` keeps the order).
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import polars as pl

from benchlib.errors import FormatError
from benchlib.schema import Tables
from benchlib.sources._common import SNIFF_BYTES, decode, run_id, sha256_of

_FIRST_CELL = re.compile(r'^"?\(PDH-CSV 4\.0\)')
_COLUMN = re.compile(r"^\\\\(?P<host>[^\\]+)\\(?P<object>[^\\(]+?)(?:\((?P<instance>.*)\))?\\(?P<counter>[^\\]+)$")
_TIME_FORMATS = ("%m/%d/%Y %H:%M:%S", "%m/%d/%Y %H:%M")


def looks_like_esxtop(head: str) -> bool:
    """Whether a file starts like esxtop batch output."""
    return bool(_FIRST_CELL.match(head.lstrip("\ufeff")))


def _text(path: Path) -> str:
    data = path.read_bytes()
    if not data.strip():
        raise FormatError(path, "byte 0", "esxtop batch output, but the file is empty")
    text = decode(path, data)
    if "\n" not in text[:SNIFF_BYTES] and "\r" in text[:SNIFF_BYTES]:
        text = text.replace("\r", "\n")  # old-Mac line ends from a spreadsheet re-save
    return text


def _columns(path: Path, header: list[str]) -> list[dict[str, str | None]]:
    parsed = []
    for index, cell in enumerate(header[1:], start=1):
        if cell == "":
            continue  # the trailing comma of raw esxtop lines
        match = _COLUMN.match(cell)
        if match is None:
            raise FormatError(
                path, f"line 1, column {index + 1}", f"a counter name '\\\\host\\Object(instance)\\Counter', found {cell[:80]!r}"
            )
        parsed.append({"column": f"column_{index}", **match.groupdict()})
    return parsed


def _parse_time(values: pl.Series) -> pl.Series:
    for fmt in _TIME_FORMATS:
        parsed = values.str.strptime(pl.Datetime("ms", "UTC"), fmt, strict=False)
        if parsed.null_count() == 0:
            return parsed
    return pl.Series(values.name, [None] * len(values), dtype=pl.Datetime("ms", "UTC"))


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
    text = _text(path)
    if not looks_like_esxtop(text):
        raise FormatError(path, "line 1", "esxtop batch output starting with '(PDH-CSV 4.0) (UTC)(0)'")
    lines = io.StringIO(text)
    header = next(csv.reader(lines))
    columns = _columns(path, header)
    try:
        wide = pl.read_csv(io.StringIO(text), has_header=False, skip_rows=1, infer_schema=False, truncate_ragged_lines=True)
    except pl.exceptions.PolarsError as exc:
        raise FormatError(path, "rows", f"comma-separated esxtop samples ({str(exc).splitlines()[0]})") from None
    names = pl.DataFrame(columns)
    times = _parse_time(wide.get_column("column_0"))
    long = (
        wide.select(pl.int_range(pl.len(), dtype=pl.Int32).alias("sample"), *[pl.col(c) for c in names["column"]])
        .with_columns(times.alias("time"))
        .unpivot(index=["sample", "time"], variable_name="column", value_name="raw")
        .join(names.select("column", "host", "object", "instance", "counter"), on="column", how="left")
        .with_columns(pl.col("raw").str.strip_chars().cast(pl.Float64, strict=False).alias("value"))
    )
    sha = sha256_of(path)
    rid = run_id(sha, 0, None)
    counters = long.select(pl.lit(rid).alias("run_id"), "host", "object", "instance", "counter", "time", "sample", "value")
    hosts = names["host"].unique().to_list()
    runs = pl.DataFrame([{
        "run_id": rid, "tool": "esxtop", "format": "esxtop", "host": hosts[0] if len(hosts) == 1 else None,
        "is_aggregate": False, "start_time": times.min(), "sha256": sha, "source": str(path), "document_index": 0,
        "duration_ns": None if times.null_count() else int((times.max() - times.min()).total_seconds() * 1e9),
    }])
    return Tables.build(runs=runs, host_counters=counters)


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
    """The esxtop disk-device view: one row per host, device and sample, with DQLEN, ACTV, QUED,
    %USD, LOAD, commands/s, MB read/written per second and DAVG, KAVG, GAVG, QAVG (ms).

    Built from ``host_counters`` of object ``Physical Disk SCSI Device``;
    sorted by host, device and sample.
    """
    rows = host_counters.filter(
        (pl.col("object") == "Physical Disk SCSI Device") & pl.col("counter").is_in(list(DEVICE_QUEUE_COUNTERS))
    ).with_columns(pl.col("counter").replace_strict(DEVICE_QUEUE_COUNTERS).alias("counter"))
    wide = rows.pivot(on="counter", index=["run_id", "host", "instance", "sample", "time"], values="value")
    present = [name for name in DEVICE_QUEUE_COUNTERS.values() if name in wide.columns]
    return wide.rename({"instance": "device"}).select("run_id", "host", "device", "sample", "time", *present).sort(
        "host", "device", "sample"
    )
