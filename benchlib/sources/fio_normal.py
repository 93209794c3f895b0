"""fio's human-readable ("normal") report, fio 2.x and 3.x.

Both generations are read: ``read : io=29854MB, bw=254727KB/s, iops=63647,
runt=120014msec`` (before fio 2.17) and ``read: IOPS=23.3k, BW=91.0MiB/s
(95.4MB/s)(183MiB/2010msec)`` (2.17 and later). A file may hold several fio
invocations and wrapper text between them; each invocation becomes a run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from benchlib.errors import FormatError, quoted
from benchlib.schema import Tables
from benchlib.sources._common import SourceText, read_source, run_id
from benchlib.sources.fio_common import fio_error_lines, read_share
from benchlib.units import latency_factor_ns, parse_binary_size, parse_decimal_count, parse_job_size

_VERSION = re.compile(r"^fio-(\d[\w.\-]*)\s*$")
_JOB_HEADER = re.compile(
    r"^(?P<name>\S.*?): \(g=(?P<g>\d+)\): rw=(?P<rw>\w+), bs=(?P<bs>.*?), "
    r"ioengine=(?P<engine>[\w\-]+), iodepth=(?P<depth>\d+)"
)
_BLOCK = re.compile(r"^(?P<name>\S.*?): \(groupid=(?P<g>\d+), jobs=(?P<jobs>\d+)\): err=\s*(?P<err>-?\d+)")
_DIR_V3 = re.compile(
    # the client/server "All clients" block prints "BW=154Mi (162M)" without "B/s" (fio 3.33)
    r"^\s+(?P<dir>read|write|trim)\s*: IOPS=(?P<iops>[\d.]+[kKmMgG]?), BW=(?P<bw>[\d.]+\s*[KMGTP]?i?(?:B/s)?)"
    r".*?\((?P<io>[\d.]+\s*[KMGTP]?i?B)/(?P<run>\d+)msec\)"
)
_DIR_V2 = re.compile(
    r"^\s+(?P<dir>read|write|trim)\s*: io=(?P<io>[\d.]+\s*[KMGTP]?B), bw=(?P<bw>[\d.]+\s*[KMGTP]?B/s), "
    r"iops=(?P<iops>[\d.]+), runt=\s*(?P<run>\d+)msec"
)
#: the start of a direction line, whatever follows: one that :data:`_DIR_V3` and :data:`_DIR_V2` do not read is refused
_DIR_LIKE = re.compile(r"^\s+(read|write|trim)\s*: (IOPS|io)=")
_LAT = re.compile(
    r"^\s+(?P<kind>slat|clat|lat)\s*\((?P<unit>nsec|usec|msec)\): min=\s*(?P<min>\S+?), max=\s*(?P<max>\S+?), "
    r"avg=\s*(?P<avg>\S+?), stdev=\s*(?P<std>\S+?)\s*$"
)
_PCT_HEAD = re.compile(r"^\s+(?P<kind>clat|lat) percentiles \((?P<unit>nsec|usec|msec)\):")
_PCT_ROW = re.compile(r"^\s+\|")
_PCT_ITEM = re.compile(r"(\d+\.\d+)th=\[\s*(\d+)\]")
_CPU = re.compile(r"^\s+cpu\s*: usr=(?P<usr>[\d.]+)%, sys=(?P<sys>[\d.]+)%, ctx=(?P<ctx>\d+)")
_ISSUED_V3 = re.compile(r"^\s+issued rwts?: total=(?P<r>\d+),(?P<w>\d+),(?P<t>\d+)")
_ISSUED_V2 = re.compile(r"^\s+issued\s*: total=r=(?P<r>\d+)/w=(?P<w>\d+)/d=(?P<t>\d+)")
_RUN_STATUS = re.compile(r"^Run status group (?P<g>\d+) \(all jobs\):")
# a group's total under its run status line: fio 3.x "READ: bw=111MiB/s (116MB/s), ..., io=4096MiB (4295MB),
# run=36978-36978msec"; fio 2.x "READ: io=29854MB, aggrb=254726KB/s, minb=..., mint=120014msec, maxt=120014msec"
_GROUP_V3 = re.compile(
    r"^\s+(?P<dir>READ|WRITE|TRIM): bw=(?P<bw>[\d.]+\s*[KMGTP]?i?B/s)\b.*?, io=(?P<io>[\d.]+\s*[KMGTP]?i?B)\b"
    r".*?, run=(?P<mint>\d+)-(?P<maxt>\d+)msec"
)
_GROUP_V2 = re.compile(
    r"^\s+(?P<dir>READ|WRITE|TRIM): io=(?P<io>[\d.]+\s*[KMGTP]?B), aggrb=(?P<bw>[\d.]+\s*[KMGTP]?B/s), "
    r".*?mint=(?P<mint>\d+)msec, maxt=(?P<maxt>\d+)msec"
)
_DISK_HEAD = re.compile(r"^Disk stats \(read/write\):")
_DISK = re.compile(
    r"^\s+(?P<dev>[\w\-./]+): ios=(?P<r>\d+)/(?P<w>\d+), merge=(?P<mr>\d+)/(?P<mw>\d+), "
    r"ticks=(?P<tr>\d+)/(?P<tw>\d+), in_queue=(?P<q>\d+), util=(?P<u>[\d.]+)%"
)


@dataclass
class _Invocation:
    version: str | None = None
    headers: dict[str, dict[str, Any]] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)
    disks: list[dict[str, Any]] = field(default_factory=list)
    #: each run status group's total per direction (its line under "Run status group N (all jobs):")
    groups: list[dict[str, Any]] = field(default_factory=list)
    #: the groups fio started jobs in (its job lines), those it summarised, and the last job block's line
    started: set[int] = field(default_factory=set)
    summarised: set[int] = field(default_factory=set)
    last_block: tuple[int, str] = (0, "")


def looks_like_fio_normal(head: str) -> bool:
    """Whether the first bytes of a file look like fio's normal report."""
    return bool(re.search(r"\(groupid=\d+, jobs=\d+\): err=", head) or re.search(r"\(g=\d+\): rw=\w+, bs=", head))


def _header_params(match: re.Match[str]) -> dict[str, Any]:
    bs_text = match["bs"]
    # 3.x: "(R) 4096B-4096B, (W) ..."; 2.x: "4K-4K/4K-4K/4K-4K"
    first = re.sub(r"^\(R\)\s*", "", bs_text).split(",")[0].split("/")[0]
    low, _, high = first.partition("-")
    size = parse_job_size(low) if low == high or not high else None
    share = read_share(match["rw"])  # a mix's share is not printed: unknown
    return {
        "rw": match["rw"],
        "rwmixread_pct": None if share is None else float(share),
        "block_size_bytes": size,
        "ioengine": match["engine"],
        "iodepth": int(match["depth"]),
    }


def _value(text: str) -> float:
    return parse_decimal_count(text.rstrip(","))


class _Parser:
    """Line-by-line state machine over one file."""

    def __init__(self, source: SourceText) -> None:
        self.source = source
        self.invocations: list[_Invocation] = [_Invocation()]
        self.block: dict[str, Any] | None = None
        self.direction: dict[str, Any] | None = None
        self.percentiles: tuple[str, float] | None = None
        self.in_disk_stats = False
        self.group: int | None = None  # the run status group whose total lines follow

    @property
    def current(self) -> _Invocation:
        return self.invocations[-1]

    def _new_invocation_if_done(self, line_no: int) -> None:
        if self.current.rows:
            self.invocations.append(_Invocation())
            self.block = self.direction = None

    def feed(self, line_no: int, line: str) -> None:
        if self.percentiles and _PCT_ROW.match(line):
            self._percentile_row(line)
            return
        self.percentiles = None
        for handler in (self._structure, self._block_content):
            try:
                if handler(line_no, line):
                    return
            except ValueError as exc:
                raise FormatError(self.source.path, f"line {line_no}", f"a fio report line ({exc})") from None

    def _structure(self, line_no: int, line: str) -> bool:
        if match := _VERSION.match(line):
            self._new_invocation_if_done(line_no)
            self.current.version = match.group(1)
            return True
        if match := _JOB_HEADER.match(line):
            self._new_invocation_if_done(line_no)
            self.current.headers.setdefault(match["name"], _header_params(match))
            self.current.started.add(int(match["g"]))
            return True
        if match := _BLOCK.match(line):
            self._start_block(match)
            self.current.last_block = (line_no, line.split(":")[0].strip())
            return True
        if match := _RUN_STATUS.match(line):
            self.block = self.direction = None
            self.group = int(match["g"])
            self.current.summarised.add(self.group)
            return True
        if self.group is not None and (match := (_GROUP_V3.match(line) or _GROUP_V2.match(line))):
            self._group_total(match)
            return True
        self.group = None
        if _DISK_HEAD.match(line):
            self.in_disk_stats = True
            return True
        if self.in_disk_stats and (match := _DISK.match(line)):
            self.current.disks.append(match.groupdict())
            return True
        self.in_disk_stats = False
        return False

    def _group_total(self, match: re.Match[str]) -> None:
        """Keep one direction's total of the current run status group (all its jobs): bytes, rate, longest run."""
        self.current.groups.append(
            {
                "group_id": self.group,
                "direction": match["dir"].lower(),
                "io_bytes": int(parse_binary_size(match["io"])),
                "bandwidth_bytes_per_s": parse_binary_size(match["bw"]),
                "runtime_ns": int(match["maxt"]) * 1_000_000,
            }
        )

    def _start_block(self, match: re.Match[str]) -> None:
        name = match["name"]
        is_aggregate = name == "All clients"
        self.block = {
            "job_name": None if is_aggregate else name,
            "group_id": int(match["g"]),
            "jobs": int(match["jobs"]),
            "error": int(match["err"]),
            "is_aggregate": is_aggregate,
            "directions": [],
        }
        self.current.rows.append(self.block)
        self.direction = None

    def _block_content(self, line_no: int, line: str) -> bool:
        if self.block is None:
            return False
        if match := (_DIR_V3.match(line) or _DIR_V2.match(line)):
            self._start_direction(match)
            return True
        if _DIR_LIKE.match(line):  # a job's figures that do not read: refused, never a job silently left out
            raise FormatError(
                self.source.path,
                f"line {line_no}",
                "a direction line as fio prints it ('read: IOPS=23.3k, BW=91.0MiB/s (95.4MB/s)(5459MiB/60001msec)')",
                found=quoted(line.strip()),
            )
        if (match := _LAT.match(line)) and self.direction is not None:
            factor = latency_factor_ns(match["unit"])
            kind = match["kind"]
            for stat, key in (("min", "min"), ("max", "max"), ("mean", "avg"), ("stddev", "std")):
                self.direction[f"{kind}_{stat}_ns"] = _value(match[key]) * factor
            return True
        if (match := _PCT_HEAD.match(line)) and self.direction is not None:
            self.percentiles = (match["kind"], float(latency_factor_ns(match["unit"])))
            self.direction[f"{match['kind']}_percentiles"] = []
            return True
        if match := _CPU.match(line):
            self.block.update(
                usr_cpu_pct=float(match["usr"]), sys_cpu_pct=float(match["sys"]), context_switches=int(match["ctx"])
            )
            return True
        if match := (_ISSUED_V3.match(line) or _ISSUED_V2.match(line)):
            self.block["issued"] = {"read": int(match["r"]), "write": int(match["w"]), "trim": int(match["t"])}
            return True
        return False

    def _start_direction(self, match: re.Match[str]) -> None:
        assert self.block is not None
        bandwidth = match["bw"]
        self.direction = {
            "direction": match["dir"],
            "iops": parse_decimal_count(match["iops"]),
            "bandwidth_bytes_per_s": parse_binary_size(bandwidth)
            if not bandwidth.endswith(" B/s")
            else float(bandwidth[:-4]),
            "io_bytes": int(parse_binary_size(match["io"])),
            "runtime_ns": int(match["run"]) * 1_000_000,
        }
        self.block["directions"].append(self.direction)

    def _percentile_row(self, line: str) -> None:
        assert self.percentiles is not None and self.direction is not None
        kind, factor = self.percentiles
        for pct, value in _PCT_ITEM.findall(line):
            self.direction[f"{kind}_percentiles"].append({"percentile": float(pct), "value_ns": float(value) * factor})


def _rows_of(inv: _Invocation, index: int, source: SourceText) -> list[dict[str, Any]]:
    rows = []
    clones: dict[str, int] = {}
    for block in inv.rows:
        if block["job_name"] is not None:
            clones[block["job_name"]] = clones.get(block["job_name"], 0) + 1
    position = 0
    for block in inv.rows:
        position += 1
        params = inv.headers.get(block["job_name"] or "", {})
        numjobs = block["jobs"] if block["jobs"] > 1 else clones.get(block["job_name"] or "", 1)
        base = {
            "run_id": run_id(source.sha256, index, None),
            "client": None,
            "job_index": position,
            **{
                k: block.get(k)
                for k in (
                    "job_name",
                    "group_id",
                    "jobs",
                    "error",
                    "is_aggregate",
                    "usr_cpu_pct",
                    "sys_cpu_pct",
                    "context_switches",
                )
            },
            **params,
            "numjobs": numjobs if params else None,
        }
        for direction in block["directions"]:
            row = {**base, **direction}
            issued = block.get("issued", {}).get(direction["direction"])
            if issued:
                row["io_count"] = issued
                # the printed IOPS and BW are rounded to 3 digits; counts over runtime are exact (the printed kept)
                row["printed_iops"], row["printed_bandwidth_bytes_per_s"] = row["iops"], row["bandwidth_bytes_per_s"]
                row["iops"] = issued / (direction["runtime_ns"] / 1e9) if direction["runtime_ns"] else row["iops"]
                if params.get("block_size_bytes"):
                    row["io_bytes"] = issued * params["block_size_bytes"]
                    row["bandwidth_bytes_per_s"] = row["iops"] * params["block_size_bytes"]
            rows.append(row)
    return rows


def _group_rows(inv: _Invocation, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return each run status group's total per direction as an aggregate row (the group's, not a job's).

    Where the group has two job rows or more in that direction, all with their bytes, its rate is theirs
    added over the group's longest run (as fio computes it) and the printed one is kept beside it, so a
    total that disagrees with its own jobs is found (:func:`benchlib.stats.plausibility.printed_apart`).
    """
    rows = []
    for total in inv.groups:
        mine = [
            job.get("io_bytes")
            for job in jobs
            if not job.get("is_aggregate")
            and job.get("group_id") == total["group_id"]
            and job.get("direction") == total["direction"]
        ]
        row = {"job_name": None, "client": None, "is_aggregate": True, **total}
        if len(mine) >= 2 and None not in mine and total["runtime_ns"]:
            row["printed_bandwidth_bytes_per_s"] = row["bandwidth_bytes_per_s"]
            row["io_bytes"] = sum(mine)
            row["bandwidth_bytes_per_s"] = sum(mine) / (total["runtime_ns"] / 1e9)
        rows.append(row)
    return rows


def _duration_ns(rows: list[dict[str, Any]]) -> int | None:
    """Return how long an invocation's jobs ran: its groups one after another, each as long as its longest job.

    fio runs a group after the one before it has ended (``stonewall``), so a file of four groups lasted the
    four together, not its longest job alone.
    """
    longest: dict[int, int] = {}
    for row in rows:
        if not row.get("is_aggregate") and row.get("runtime_ns") is not None:
            group = row.get("group_id") or 0
            longest[group] = max(longest.get(group, 0), row["runtime_ns"])
    return sum(longest.values()) if longest else None


def _disk_rows(inv: _Invocation, index: int, source: SourceText) -> list[dict[str, Any]]:
    out = []
    for disk in inv.disks:
        for counter, key in (
            ("read_ios", "r"),
            ("write_ios", "w"),
            ("read_merges", "mr"),
            ("write_merges", "mw"),
            ("read_ticks_ms", "tr"),
            ("write_ticks_ms", "tw"),
            ("in_queue_ms", "q"),
            ("util_pct", "u"),
        ):
            out.append(
                {
                    "run_id": run_id(source.sha256, index, None),
                    "object": "fio disk stats",
                    "instance": disk["dev"],
                    "counter": counter,
                    "value": float(disk[key]),
                }
            )
    return out


def _check_whole(inv: _Invocation, source: SourceText) -> None:
    """Refuse a report cut before fio's summary of a group its jobs ran in: its run total would miss jobs.

    fio prints "Run status group N (all jobs):" for every group it started jobs in (its job lines at the
    top) or printed a job of; a file without it for one ends early (a copy cut short, a run killed before
    it wrote its summary).
    """
    groups = inv.started | {b["group_id"] for b in inv.rows if not b["is_aggregate"]}
    missing = sorted(groups - inv.summarised)
    if not missing:
        return
    line, job = inv.last_block
    raise FormatError(
        source.path,
        f"line {line}",
        f"fio's 'Run status group {missing[0]} (all jobs):' summary, which fio prints for every group it ran: "
        "the report was cut short, so jobs and the run's total are missing; read the whole file fio wrote, or "
        "re-run the job",
        found=f"the file ends after job {quoted(job)}, {len(inv.rows)} job block{'' if len(inv.rows) == 1 else 's'} in",
    )


def read_fio_normal(path: str | Path) -> Tables:
    """Read fio's normal (human-readable) report into the tidy tables.

    Parameters
    ----------
    path
        A file holding one or more fio normal reports, possibly with wrapper
        text, ETA lines, or JSON/terse output of the same run around them.

    Returns
    -------
    Tables
        ``runs`` (one per fio invocation), ``results`` (per job block and
        direction; an ``All clients`` block is flagged ``is_aggregate``) and the
        ``Disk stats`` lines as ``host_counters``. IOPS and bandwidth are
        recomputed from the exact issued counts when the report has them,
        since the printed values are rounded to three digits.

    Raises
    ------
    FormatError
        When no job result block is found or a result line cannot be read.

    """
    source = read_source(path)
    parser = _Parser(source)
    for line_no, line in enumerate(source.text.splitlines(), start=1):
        parser.feed(line_no, line)
    invocations = [inv for inv in parser.invocations if any(b["directions"] for b in inv.rows)]
    if not invocations:
        failed = [inv for inv in parser.invocations if inv.rows]
        said = fio_error_lines(source.text)
        if said:  # the run failed: say what fio said, not what the parser missed
            raise FormatError(
                source.path,
                "whole file",
                f"fio results, but the run failed and fio said: {' | '.join(said)}; fix the job and re-run it",
            )
        first = next((line for line in source.text.splitlines() if line.strip()), "")
        raise FormatError(
            source.path,
            "whole file",
            "a fio job result block ('name: (groupid=0, jobs=1): err= 0: ...' followed by a read/write line)",
            found=f"{len(failed)} fio run{'' if len(failed) == 1 else 's'} whose every job did no I/O"
            if failed
            else f"none; the first line is {quoted(first)}",
        )
    for inv in invocations:
        _check_whole(inv, source)
    results: list[dict] = []
    disks: list[dict] = []
    runs: list[dict] = []
    for index, inv in enumerate(invocations):
        rows = _rows_of(inv, index, source)
        results.extend(rows)
        results.extend({"run_id": run_id(source.sha256, index, None), **row} for row in _group_rows(inv, rows))
        disks.extend(_disk_rows(inv, index, source))
        runs.append(
            {
                "run_id": run_id(source.sha256, index, None),
                "tool": "fio",
                "tool_version": f"fio-{inv.version}" if inv.version else None,
                "format": "fio-normal",
                "is_aggregate": False,
                "duration_ns": _duration_ns(rows),
                "source": str(source.path),
                "sha256": source.sha256,
                "document_index": index,
            }
        )
    frames = {"runs": pl.DataFrame(runs), "results": pl.DataFrame(results, infer_schema_length=None)}
    if disks:
        frames["host_counters"] = pl.DataFrame(disks)
    return Tables.build(**frames)
