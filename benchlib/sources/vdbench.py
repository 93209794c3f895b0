"""vdbench ``flatfile.html``: one row per interval per run definition, column names in its header.

Both layouts are read: raw devices (SD/WD: ``rate``, ``MB/sec``, ``resp``,
``read_resp``, ``write_resp``, ``xfersize``, ``threads``, ``rdpct``,
``seekpct``...) and file systems (FSD/FWD: ``Rate``, ``Resp``, ``MB_read``,
``Read_rate``, ``Read_resp``...). Every ``Run`` (run definition, including
``format_for_*``) becomes a run. Its ``avg_<first>-<last>`` row becomes the
``results``; every interval row goes to ``intervals``, those before
``<first>`` flagged ``is_warmup`` (kept, not dropped).

Units: response times are ms (-> ns). ``MB/sec`` is MiB/s: vdbench's totals
header says ``MB/sec(1024**2)``, and in every corpus file ``rate x bytes/io /
MB/sec`` is 1,048,576 (a test checks it); it becomes bytes/s with 1024**2.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from benchlib.errors import FormatError
from benchlib.schema import Tables
from benchlib.sources._common import read_source, run_id

MIB = 1024 * 1024
_AVG = re.compile(r"^avg_(\d+)-(\d+)$")


def looks_like_vdbench_flatfile(head: str) -> bool:
    """Whether a file is vdbench's flatfile.html (its banner and a ``tod ... Run Interval`` header)."""
    return "flatfile.html" in head[:200] and bool(re.search(r"^\s*tod\s.*\bRun\s+Interval\b", head, re.MULTILINE))


def _number(text: str | None) -> float | None:
    if text is None or text in ("n/a", ""):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _table(path: Path, text: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    header: list[str] | None = None
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith(("*", "<")):
            continue
        fields = stripped.split()
        if header is None:
            header = [f.lower() for f in fields]
            continue
        if len(fields) != len(header):
            raise FormatError(path, f"line {number}", f"{len(header)} columns as in the header, found {len(fields)}")
        rows.append((number, fields))
    if header is None or "run" not in header or "interval" not in header:
        raise FormatError(path, "header", "a vdbench flatfile header with 'Run' and 'Interval' columns")
    return header, rows


def _workload(row: dict[str, str]) -> dict[str, Any]:
    read_pct = _number(row.get("rdpct"))
    seek = _number(row.get("seekpct"))
    xfer = _number(row.get("xfersize"))
    rw = None
    if read_pct is not None and seek is not None:
        kind = "rand" if seek > 0 else ""
        rw = f"{kind}read" if read_pct == 100 else f"{kind}write" if read_pct == 0 else ("randrw" if kind else "rw")
    threads = _number(row.get("threads"))
    return {
        "rw": rw,
        "rwmixread_pct": read_pct,
        "block_size_bytes": int(xfer) if xfer and xfer > 0 else None,
        "iodepth": int(threads) if threads else None,
        "numjobs": 1,
        "ioengine": "vdbench",
    }


def _read_share(row: dict[str, str]) -> float | None:
    if "read%" in row:
        return _number(row["read%"])
    rate, read_rate = _number(row.get("rate")), _number(row.get("read_rate"))
    return None if not rate or read_rate is None else 100 * read_rate / rate


def _direction_rows(row: dict[str, str]) -> list[dict[str, Any]]:
    rate, mb = _number(row.get("rate")), _number(row.get("mb/sec"))
    share = _read_share(row)
    out = []
    for direction, fraction, resp_key in (("read", share, "read_resp"), ("write", None if share is None else 100 - share, "write_resp")):
        if share is None and direction == "write":
            continue
        part = 1.0 if share is None else (fraction or 0) / 100
        if share is not None and part == 0:
            continue
        resp = _number(row.get(resp_key)) if share is not None else _number(row.get("resp"))
        out.append({
            "direction": direction,
            "iops": None if rate is None else rate * part,
            "bandwidth_bytes_per_s": None if mb is None else mb * MIB * part,
            "lat_mean_ns": None if resp is None else resp * 1e6,
        })
    return out


def _seconds_of_day(tod: str) -> float | None:
    try:
        parsed = datetime.strptime(tod, "%H:%M:%S.%f")
    except ValueError:
        return None
    return parsed.hour * 3600 + parsed.minute * 60 + parsed.second + parsed.microsecond / 1e6


_INTERVAL_METRICS = (("iops", "iops", "iops"), ("bw", "bytes_per_s", "bandwidth_bytes_per_s"), ("lat", "ns", "lat_mean_ns"))


def _interval_rows(rid: str, name: str, steps: list[dict[str, str]], first_measured: int) -> list[dict[str, Any]]:
    """``intervals`` rows of one run definition; time from the time of day, warm-up flagged."""
    start = _seconds_of_day(steps[0]["tod"]) if steps else None
    out = []
    for record in steps:
        seconds = _seconds_of_day(record["tod"])
        time_ns = None if seconds is None or start is None else int(round((seconds - start) % 86400 * 1e9))
        warmup = int(record["interval"]) < first_measured
        for row in _direction_rows(record):
            for metric, unit, key in _INTERVAL_METRICS:
                if row[key] is not None:
                    out.append({"run_id": rid, "job_name": name, "job_index": int(record["interval"]),
                                "direction": row["direction"], "time_ns": time_ns, "metric": metric,
                                "unit": unit, "value": row[key], "is_cumulative": False, "is_warmup": warmup})
    return out


def read_vdbench_flatfile(path: str | Path) -> Tables:
    """Read vdbench's flatfile.html into runs (one per run definition), results and intervals.

    Results are the ``avg_`` row of each run definition, split into read and
    write rows by the read percentage (vdbench reports one rate; bandwidth is
    split in the same proportion, exact when reads and writes share a
    transfer size). Interval metrics: ``iops``, ``bw`` (bytes/s), ``lat`` (ns).

    Raises
    ------
    FormatError
        When the header or a row cannot be read.
    """
    source = read_source(path)
    header, rows = _table(source.path, source.text)
    by_run: dict[str, list[dict[str, str]]] = {}
    for _, fields in rows:
        record = dict(zip(header, fields, strict=True))
        by_run.setdefault(record["run"], []).append(record)
    runs, results, intervals = [], [], []
    for index, (name, records) in enumerate(by_run.items()):
        rid = run_id(source.sha256, index, None)
        averages = [r for r in records if _AVG.match(r["interval"])]
        first_measured = int(_AVG.match(averages[-1]["interval"]).group(1)) if averages else 1
        steps = [r for r in records if r["interval"].isdigit()]
        intervals.extend(_interval_rows(rid, name, steps, first_measured))
        if averages:
            average = averages[-1]
            for row in _direction_rows(average):
                results.append({"run_id": rid, "job_name": name, "job_index": 1, "jobs": 1, "is_aggregate": False, **_workload(average), **row})
        version = next((r.get("version") for r in records if r.get("version") not in (None, "n/a")), None)
        runs.append({"run_id": rid, "tool": "vdbench", "tool_version": version, "format": "vdbench-flatfile",
                     "is_aggregate": False, "source": str(source.path), "sha256": source.sha256, "document_index": index})
    if not runs:
        raise FormatError(source.path, "rows", "interval rows under the flatfile header")
    frames = {"runs": pl.DataFrame(runs, infer_schema_length=None)}
    if results:
        frames["results"] = pl.DataFrame(results, infer_schema_length=None)
    if intervals:
        frames["intervals"] = pl.DataFrame(intervals, infer_schema_length=None)
    return Tables.build(**frames)
