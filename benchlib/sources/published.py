"""Published summary tables: the numbers of a write-up, entered as CSV with their citation.

A study known only by its published tables can then be analysed and verified
like any other. Two layouts are read:

* benchlib's own, which starts with ``# benchlib published table`` and a
  ``# citation: ...`` line, then a CSV header;
* a plain CSV whose first column is ``source`` (the citation key), as in
  ``../shared/domain/published/``.

Columns with these names are measurements (converted to base units):
``iops``, ``bw_mib_s``, ``lat_avg_ms``, ``cpu_usr_pct``, ``cpu_sys_pct``;
these describe the job: ``rw``, ``bs``, ``numjobs``, ``iodepth``,
``write_pct``; ``vm`` (or ``host``) names the host. Every other column
(``controller``, ``sioc``, ``test``, ``iops_per_cpu_pct_reported``...) is kept
as a label of the row's run, and ingest fills study factors of the same name
from it. Each row is one member (a VM, a host) of a run with ``tool = "published"``;
the row's figures are one ``results`` row with direction ``read``, ``write`` or ``total``.

Rows that differ only in their host and figures are the members of one run (the
experimental unit, METHODS.md R1: five VMs measured at once are one run of that
configuration, not five), so they share the run's ``document_index``; a row that
repeats a host of its configuration starts another run of it.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from benchlib.errors import FormatError, quoted
from benchlib.schema import Tables
from benchlib.sources._common import read_source, run_id, sha256_of
from benchlib.units import parse_job_size

MAGIC = "# benchlib published table"
_MIB = 1024 * 1024
_MEASURES = {"iops": 1.0, "bw_mib_s": float(_MIB), "lat_avg_ms": 1e6, "cpu_usr_pct": 1.0, "cpu_sys_pct": 1.0}
_TARGET = {
    "iops": "iops",
    "bw_mib_s": "bandwidth_bytes_per_s",
    "lat_avg_ms": "lat_mean_ns",
    "cpu_usr_pct": "usr_cpu_pct",
    "cpu_sys_pct": "sys_cpu_pct",
}
_JOB = {"rw", "bs", "numjobs", "iodepth", "write_pct"}
_HOST = ("vm", "host")
_READS = {"read", "randread"}
_WRITES = {"write", "randwrite"}


def looks_like_published(head: str) -> bool:
    """Benchlib's published-table header, or a CSV whose header starts with ``source,`` and names a measurement."""
    first = head.lstrip("\ufeff").split("\n", 1)[0].strip()
    if first.startswith(MAGIC):
        return True
    columns = first.split(",")
    return columns[0] == "source" and bool(set(columns) & set(_MEASURES))


def _number(path: Path, line: int, column: str, text: str) -> float | None:
    if text.strip() == "":
        return None
    try:
        return float(text.replace(",", "").replace("_", ""))
    except ValueError:
        raise FormatError(path, f"line {line}, column {column}", f"a number, not {text!r}") from None


def _direction(rw: str | None) -> str:
    if rw in _READS:
        return "read"
    if rw in _WRITES:
        return "write"
    return "total"


def _row(path: Path, number: int, index: int, row: dict[str, str], sha: str, citation: str | None) -> tuple[dict, dict]:
    """One table row -> its run (labels: every column that is not a measurement) and its result."""
    host = next((row[h] for h in _HOST if row.get(h)), None)
    labels = [{"name": k, "value": v} for k, v in row.items() if k not in _MEASURES and k not in _HOST and v != ""]
    if citation is not None:
        labels.append({"name": "citation", "value": citation})
    rid = run_id(sha, index, host)
    run = {
        "run_id": rid,
        "tool": "published",
        "format": "published-table",
        "host": host,
        "is_aggregate": False,
        "sha256": sha,
        "document_index": index,
        "labels": labels,
    }
    result: dict = {
        "run_id": rid,
        "client": host,
        "direction": _direction(row.get("rw")),
        "is_aggregate": False,
        "rw": row.get("rw") or None,
    }
    for column, factor in _MEASURES.items():
        if column in row:
            value = _number(path, number, column, row[column])
            result[_TARGET[column]] = value * factor if value is not None else None
    if row.get("bs"):
        result["block_size_bytes"] = parse_job_size(row["bs"])
    for column in ("numjobs", "iodepth"):
        if row.get(column):
            result[column] = int(_number(path, number, column, row[column]) or 0)
    if row.get("write_pct"):
        result["rwmixread_pct"] = 100.0 - (_number(path, number, "write_pct", row["write_pct"]) or 0.0)
    return run, result


def read_published(path: str | Path) -> Tables:
    """Read a published summary table (see the module documentation).

    Raises
    ------
    FormatError
        When the header names no measurement, a row has the wrong number of
        fields, or a measurement is not a number.

    """
    path = Path(path)
    source = read_source(path)
    lines = source.text.splitlines()
    citation = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("# citation:")), None)
    body = [(n, ln) for n, ln in enumerate(lines, 1) if ln.strip() and not ln.startswith("#")]
    if not body:
        raise FormatError(path, "line 1", "a CSV header after the comment lines", found=f"{len(lines)} comment lines")
    header_line, header = body[0][0], next(csv.reader([body[0][1]]))
    twice = sorted({name for name in header if header.count(name) > 1})
    if twice:  # a second 'iops' would silently stand for the first
        raise FormatError(
            path, f"line {header_line}", "each column named once in the header", found=f"{', '.join(twice)} twice"
        )
    if not set(header) & set(_MEASURES):
        raise FormatError(
            path,
            f"line {header_line}",
            f"a header naming at least one of {', '.join(_MEASURES)}",
            found=quoted(body[0][1]),
        )
    if not citation and "source" not in header:  # an empty '# citation:' line cites nothing
        raise FormatError(
            path,
            f"line {header_line}",
            "a citation: a '# citation: ...' line or a 'source' column",
            found=f"columns {quoted(', '.join(header))} and {'an empty one' if citation == '' else 'no such line'}",
        )
    sha = sha256_of(path)
    runs, results = [], []
    runs_of: dict[tuple, int] = {}  # (configuration, repeat of a host in it) -> document index
    repeats: dict[tuple, int] = {}  # (configuration, host) -> rows seen
    for number, text in body[1:]:
        fields = next(csv.reader(io.StringIO(text)))
        if len(fields) != len(header):
            raise FormatError(path, f"line {number}", f"{len(header)} fields as in the header, found {len(fields)}")
        row = dict(zip(header, fields, strict=True))
        configuration = tuple((k, v) for k, v in row.items() if k not in _MEASURES and k not in _HOST)
        host = next((row[h] for h in _HOST if row.get(h)), None)
        repeat = repeats.get((configuration, host), 0)
        repeats[(configuration, host)] = repeat + 1
        index = runs_of.setdefault((configuration, repeat), len(runs_of))
        run, result = _row(path, number, index, row, sha, citation)
        runs.append(run)
        results.append(result)
    if not runs:
        raise FormatError(
            path, f"line {header_line}", "at least one row of figures under the header", found="the header alone"
        )
    return Tables.from_rows({"runs": runs, "results": results})
