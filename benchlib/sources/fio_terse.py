"""fio terse output (``--minimal`` / ``--output-format=terse``), versions 3, 4 and 5.

Field positions follow fio's HOWTO ("Terse output"). Every latency in terse
output is in microseconds, whatever the fio version; sizes are KiB and
bandwidths KiB/s. Version 4 adds a trim block after write; version 5 adds a
bandwidth sample count and an IOPS min/max/mean/stdev/samples group to each
direction. Disk utilisation fields (9 per disk) follow at the end of a line.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import polars as pl

from benchlib.errors import FormatError, quoted
from benchlib.schema import Tables
from benchlib.sources._common import SourceText, read_source, run_id

_TERSE_LINE = re.compile(r"^(?P<v>[345]);fio-[^;]*;")
_TERSE_ANYWHERE = re.compile(r"^[345];fio-[^;\n]*;", re.MULTILINE)
_DIRECTION_FIELDS = {3: 41, 4: 41, 5: 47}
_DIRECTIONS = {3: ("read", "write"), 4: ("read", "write", "trim"), 5: ("read", "write", "trim")}
_TAIL_FIELDS = 5 + 7 + 10 + 12  # cpu, IO depths, latency us buckets, latency ms buckets
_DISK_FIELDS = (
    "read_ios",
    "write_ios",
    "read_merges",
    "write_merges",
    "read_ticks_ms",
    "write_ticks_ms",
    "in_queue_ms",
    "util_pct",
)


def looks_like_fio_terse(head: str) -> bool:
    """Whether a file holds fio terse lines (``3;fio-3.33;job;0;0;...``)."""
    return _TERSE_ANYWHERE.search(head) is not None


def _float(field: str) -> float:
    return float(field.rstrip("%"))


def _direction(fields: list[str], start: int, name: str) -> dict[str, Any] | None:
    io_kib, bw_kib, iops, runtime_ms = (_float(f) for f in fields[start : start + 4])
    if io_kib == 0 and iops == 0:
        return None
    row: dict[str, Any] = {
        "direction": name,
        "io_bytes": int(io_kib * 1024),
        "bandwidth_bytes_per_s": bw_kib * 1024,
        "iops": iops,
        "runtime_ns": int(runtime_ms * 1_000_000),
        "io_count": int(round(iops * runtime_ms / 1000)) if runtime_ms else None,
    }
    for kind, offset in (("slat", 4), ("clat", 8), ("lat", 32)):
        values = [_float(f) * 1000 for f in fields[start + offset : start + offset + 4]]
        present = any(values)
        for stat, value in zip(("min", "max", "mean", "stddev"), values, strict=True):
            row[f"{kind}_{stat}_ns"] = value if present else None
    percentiles = []
    for item in fields[start + 12 : start + 32]:
        pct, _, value = item.partition("%=")
        if float(pct) > 0:
            percentiles.append({"percentile": float(pct), "value_ns": float(value) * 1000})
    row["clat_percentiles"] = percentiles or None
    return row


def _parse_line(source: SourceText, line_no: int, line: str) -> tuple[list[dict], list[dict], str]:
    fields = line.rstrip(";\n").split(";")
    version = int(fields[0])
    width = _DIRECTION_FIELDS[version]
    directions = _DIRECTIONS[version]
    expected = 5 + width * len(directions) + _TAIL_FIELDS
    if len(fields) < expected or (len(fields) - expected) % 9:
        raise FormatError(
            source.path,
            f"line {line_no}",
            f"terse version {version} with {expected} fields plus 9 per disk, found {len(fields)} (truncated line?)",
        )
    try:
        rows = [r for i, d in enumerate(directions) if (r := _direction(fields, 5 + i * width, d))]
        cpu_at = 5 + width * len(directions)
        identity = {
            "job_name": fields[2],
            "group_id": int(fields[3]),
            "error": int(fields[4]),
            "usr_cpu_pct": _float(fields[cpu_at]),
            "sys_cpu_pct": _float(fields[cpu_at + 1]),
            "context_switches": int(fields[cpu_at + 2]),
        }
        disks = []
        for at in range(expected, len(fields), 9):
            name, *values = fields[at : at + 9]
            disks.extend(
                {"instance": name, "counter": c, "value": _float(v)} for c, v in zip(_DISK_FIELDS, values, strict=True)
            )
    except ValueError as exc:
        raise FormatError(source.path, f"line {line_no}", f"numeric terse fields ({exc})") from None
    return [{**identity, **r} for r in rows], disks, fields[1]


def read_fio_terse(path: str | Path) -> Tables:
    """Read fio terse lines (versions 3 to 5) into the tidy tables.

    Parameters
    ----------
    path
        A file with one terse line per job (or per group with
        ``group_reporting``), possibly mixed with other output.

    Returns
    -------
    Tables
        One run for the file, ``results`` per line and direction with the job
        index in line order, and the disk utilisation fields as ``host_counters``.
        Terse output has no block size, iodepth or rw: those columns are null.
        ``io_count`` is IOPS x runtime, since terse lines carry no I/O count.

    Raises
    ------
    FormatError
        When the file has no terse line of version 3, 4 or 5, or a line is short.

    """
    source = read_source(path)
    results: list[dict] = []
    disks: list[dict] = []
    version = None
    terse_lines = 0
    for line_no, line in enumerate(source.text.splitlines(), start=1):
        if line.startswith("2;") and line.count(";") > 100:
            raise FormatError(
                source.path,
                f"line {line_no}",
                "terse version 3, 4 or 5; re-run fio with --terse-version=3",
                found=f"version 2: {quoted(line, 30)}",
            )
        if not _TERSE_LINE.match(line):
            continue
        terse_lines += 1
        rows, line_disks, version = _parse_line(source, line_no, line)
        aggregate = rows[0]["job_name"] == "All clients" if rows else False  # client/server sum line
        for row in rows:
            row.update(
                run_id=run_id(source.sha256, 0, None),
                client=None,
                job_index=terse_lines,
                jobs=None if aggregate else 1,
                is_aggregate=aggregate,
                job_name=None if aggregate else row["job_name"],
            )
        results.extend(rows)
        disks.extend({**d, "run_id": run_id(source.sha256, 0, None), "object": "fio disk stats"} for d in line_disks)
    if not terse_lines:
        first = next((line for line in source.text.splitlines() if line.strip()), "")
        raise FormatError(
            source.path,
            "whole file",
            "fio terse lines ('3;fio-3.33;job;0;0;...')",
            found=f"none; the first line is {quoted(first)}",
        )
    if not results:
        raise FormatError(
            source.path,
            "whole file",
            "terse lines of jobs that did I/O",
            found=f"{terse_lines} job{'' if terse_lines == 1 else 's'}, none with I/O",
        )
    runs = pl.DataFrame(
        [
            {
                "run_id": run_id(source.sha256, 0, None),
                "tool": "fio",
                "tool_version": version,
                "format": "fio-terse",
                "is_aggregate": False,
                "duration_ns": max(r["runtime_ns"] for r in results),
                "source": str(source.path),
                "sha256": source.sha256,
                "document_index": 0,
            }
        ]
    )
    frames = {"runs": runs, "results": pl.DataFrame(results, infer_schema_length=None)}
    if disks:
        frames["host_counters"] = pl.DataFrame(disks).unique(
            subset=["instance", "counter"], keep="first", maintain_order=True
        )
    return Tables.build(**frames)
