"""vdbench output: ``flatfile.html``, the interval reports and the console text.

vdbench reports each run (one ``Starting RD=...`` block: a run definition, or
one of the runs its ``for...`` loops make) as interval lines and an
``avg_<first>-<last>`` line. Every form is read into :class:`Block` s of
rows with one set of names, and blocks into benchlib's tables:

- ``flatfile.html``: tab/space separated, column names in its header, every
  row naming its run definition in ``Run``; a run definition's for-loop runs
  follow one another, each ending with its ``avg_`` row;
- ``summary.html``, ``totals.html``, host ``n1.html``, slave, SD/WD/FSD/FWD
  reports, and the console (``vdbench ... > results.txt``): the same text
  blocks, raw-device layout (``i/o rate, MB/sec, bytes i/o, read pct, resp
  time, read resp, write resp, [resp max | read max, write max], resp stddev,
  queue depth, cpu% sys+u, cpu% sys``; vdbench50407 splits the max) or the
  file-system layout (``ReqstdOps rate resp, cpu%, read pct, read rate resp,
  write rate resp, mb/sec read write, mb/sec total, xfer size, per-operation
  rate resp...``).

Each run becomes a run; its ``avg_`` row becomes ``results`` split into read
and write rows (by the read and write rates where vdbench gives them, else by
the read percentage); every interval row goes to ``intervals`` with the
warm-up intervals (before ``<first>``) flagged ``is_warmup``, kept.

Units: response times are ms (-> ns). ``MB/sec`` is MiB/s: the report header
says ``MB/sec 1024**2`` and in every corpus file ``rate x bytes/io / MB/sec``
is 1,048,576 (a test checks it); it becomes bytes/s with 1024**2.
``cpu% sys+u`` is the whole host's CPU busy, not vdbench's own.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchlib.errors import FormatError, quoted
from benchlib.schema import Tables
from benchlib.sources._common import read_source, run_id
from benchlib.sources.vdbench_parm import ParmFile, expand_run, looks_like_parmfile, parse_parmfile, size_bytes

MIB = 1024 * 1024
_AVG = re.compile(r"^avg_(\d+)-(\d+)$")
_TAG = re.compile(r"<[^>]+>")
_TOD = r"\d{1,2}:\d\d:\d\d\.\d{3}"
_START = re.compile(rf"^(?:.*?\s)?({_TOD})\s+Starting RD=([^;\s]+)(.*)$", re.MULTILINE)
_ROW = re.compile(rf"^({_TOD})\s*(\d+|avg_\d+-\d+|std_\d+-\d+|max_\d+-\d+)\s+(-?[\d.]+(?:\s+-?[\d.]+)+)\s*$")
#: the start of an interval line (its time, then an interval number or avg_/std_/max_), whatever follows
_ROW_LIKE = re.compile(rf"^({_TOD})\s*(\d+|avg_\d+-\d+|std_\d+-\d+|max_\d+-\d+)\s")
_VERSION = re.compile(r"Vdbench distribution:\s*(vdbench\S+)")

#: Raw-device report columns after the interval label, by count (vdbench50407 splits ``resp max``).
_RAW_COLUMNS = {
    12: (
        "rate",
        "mib_s",
        "bytes_io",
        "read_pct",
        "resp",
        "read_resp",
        "write_resp",
        "resp_max",
        "resp_std",
        "queue_depth",
        "cpu_total",
        "cpu_sys",
    ),
    13: (
        "rate",
        "mib_s",
        "bytes_io",
        "read_pct",
        "resp",
        "read_resp",
        "write_resp",
        "read_max",
        "write_max",
        "resp_std",
        "queue_depth",
        "cpu_total",
        "cpu_sys",
    ),
}
_RAW_COLUMNS |= {  # builds that report no CPU (vdbench50407 on macOS): the same without the last two
    len(names) - 2: names[:-2] for names in list(_RAW_COLUMNS.values())
}
#: Raw-device report header: (upper word, lower word) -> name; the two header lines pair word by word.
_RAW_HEADER = {
    ("i/o", "rate"): "rate",
    ("mb/sec", "1024**2"): "mib_s",
    ("mb/sec", "1000**2"): "mib_s",
    ("bytes", "i/o"): "bytes_io",
    ("read", "pct"): "read_pct",
    ("resp", "time"): "resp",
    ("read", "resp"): "read_resp",
    ("write", "resp"): "write_resp",
    ("resp", "max"): "resp_max",
    ("read", "max"): "read_max",
    ("write", "max"): "write_max",
    ("resp", "stddev"): "resp_std",
    ("queue", "depth"): "queue_depth",
    ("cpu%", "sys+u"): "cpu_total",
    ("cpu%", "sys"): "cpu_sys",
}
_RAW_HEADER_LINE = re.compile(r"\binterval\s+i/o\s+MB/sec\b", re.IGNORECASE)
#: File-system report: (group, sub-header) -> name.
_FSD_COLUMNS = {
    ("reqstdops", "rate"): "rate",
    ("reqstdops", "resp"): "resp",
    ("cpu%", "total"): "cpu_total",
    ("cpu%", "sys"): "cpu_sys",
    ("read", "pct"): "read_pct",
    ("read", "rate"): "read_rate",
    ("read", "resp"): "read_resp",
    ("write", "rate"): "write_rate",
    ("write", "resp"): "write_resp",
    ("mb/sec", "read"): "mib_read",
    ("mb/sec", "write"): "mib_write",
    ("mb/sec", "total"): "mib_s",
    ("xfer", "size"): "bytes_io",
}
#: flatfile column (lower case) -> name.
_FLAT_COLUMNS = {
    "rate": "rate",
    "mb/sec": "mib_s",
    "bytes/io": "bytes_io",
    "read%": "read_pct",
    "resp": "resp",
    "read_resp": "read_resp",
    "write_resp": "write_resp",
    "resp_max": "resp_max",
    "read_max": "read_max",
    "write_max": "write_max",
    "resp_std": "resp_std",
    "read_std": "read_std",
    "write_std": "write_std",
    "queue_depth": "queue_depth",
    "cpu_used": "cpu_total",
    "cpu_kernel": "cpu_sys",
    "xfersize": "xfersize",
    "threads": "threads",
    "rdpct": "rdpct",
    "seekpct": "seekpct",
    "mb_read": "mib_read",
    "mb_write": "mib_write",
    "read_rate": "read_rate",
    "write_rate": "write_rate",
    "read_resp_max": "read_max",
    "write_resp_max": "write_max",
    "read_resp_std": "read_std",
    "write_resp_std": "write_std",
    "resp_std_": "resp_std",
    "version": "version",
    "timestamp": "timestamp",
}


@dataclass
class Block:
    """One vdbench run: its run definition, for-loop values, start and rows (names as in ``_RAW_COLUMNS``)."""

    name: str
    for_loops: dict[str, str] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)
    tod: str | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Context:
    """What the rest of an output folder says about its runs."""

    version: str | None = None
    utc_offset: timedelta | None = None
    date: str | None = None
    parm: ParmFile | None = None
    #: per run start (in order), each host's threads: the sum over its slaves of the logfile's ``threads=``
    host_threads: list[dict[str, int]] = field(default_factory=list)


def _number(text: Any) -> float | None:
    if text is None or text in ("n/a", ""):
        return None
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------- detection


def vdbench_kind(head: str) -> str | None:
    """Which vdbench file a text is, from its content (``<title>Vdbench out/summary.html`` or its first line).

    Returns ``flatfile``, ``summary``, ``totals``, ``host``, ``slave``,
    ``report`` (SD/WD/FSD/FWD), ``histogram``, ``logfile``, ``parmfile``,
    ``parmscan``, ``console``, ``other`` (status, config, errorlog, skew,
    anchors, stdout, swat data) or None for anything else.
    """
    title = re.match(r"\s*<title>Vdbench [^<]*?([^/<]+)</title>", head)
    body = _TAG.sub("", re.sub(r"<title>.*?</title>", "", head[:4000], count=1)).lstrip()
    first = body.split("\n", 1)[0].strip()
    if title is None and not head.lstrip().startswith("<pre>"):
        if head.startswith(":date ") and ":vdbench" in head[:1000]:
            return "other"  # swat_mon*.txt
        return "console" if _VERSION.search(head[:3000]) and _START.search(_TAG.sub("", head)) else None
    checks = (
        ("flatfile", first.startswith("*") and "'flatfile.html'" in body[:500]),
        (
            "summary",
            first.startswith(("Copyright", "Vdbench summary report")) and "Vdbench summary report" in body[:400],
        ),
        ("totals", first == "Run totals"),
        ("host", first.startswith("Host summary report")),
        ("slave", first.startswith("Slave summary report")),
        ("report", first.startswith(("Workload Report for", "SD report for", "Report for f"))),
        ("histogram", "histogram." in first or first.startswith("Total response time histogram")),
        ("logfile", bool(_VERSION.search(body[:400])) or "input argument scanned" in body[:800]),
        ("parmscan", bool(re.match(rf"{_TOD} line: ", first))),
        (
            "parmfile",
            first.startswith("* Contents of parameter file") or bool(re.match(r"(hd|sd|wd|rd|fsd|fwd)=", first)),
        ),
    )
    found = next((kind for kind, hit in checks if hit), None)
    return found or ("other" if title or head.lstrip().startswith("<pre>") else None)


def looks_like_vdbench_flatfile(head: str) -> bool:
    """Whether a file is vdbench's flatfile.html (its banner and a ``[tod ...] Run Interval`` header)."""
    return vdbench_kind(head) == "flatfile" and bool(re.search(r"^\s*(tod\s.*)?\bRun\s+Interval\b", head, re.MULTILINE))


def looks_like_vdbench_console(head: str) -> bool:
    """Console text of a vdbench run: the ``Vdbench distribution`` line and ``Starting RD=`` blocks."""
    return vdbench_kind(head) == "console"


def looks_like_vdbench_report(head: str) -> bool:
    """Return a file of vdbench's HTML output folder other than the flatfile."""
    kind = vdbench_kind(head)
    return kind is not None and kind not in ("flatfile", "console")


# ---------------------------------------------------------------- the text reports


def _settings(rest: str) -> tuple[dict[str, str], dict[str, str]]:
    """Return (settings, for-loop values) from what follows ``Starting RD=<name>``."""
    rest = _TAG.sub("", rest)
    loops_text = ""
    if "For loops:" in rest:
        rest, loops_text = rest.split("For loops:", 1)
    settings = {k.lower(): v.rstrip(".;,") for k, v in re.findall(r"(\w+)=([^\s;,]+)", rest)}
    rate = re.search(r"I/O rate:\s*([^;]+)", rest)
    if rate:
        settings["iorate"] = rate.group(1).strip()
    loops = {k.lower(): v.rstrip(".;,") for k, v in re.findall(r"(\w+)=(\S+)", loops_text)}
    return settings, loops


#: the sub-columns a file-system header's group has, longest first (``read`` is a read share or a rate and time)
_FSD_RUNS = (("rate", "resp"), ("total", "sys"), ("read", "write"), ("pct",), ("total",), ("size",))


def _fsd_names(group_line: str, sub_line: str) -> list[str]:
    """Column names of the file-system layout from its two header lines.

    Each group of the upper line (``.ReqstdOps...``, ``..mb/sec...``; any dots, any spacing) takes the run of
    sub-columns of the lower line it has (``rate resp``, ``total sys``, ``pct``), in order; a header whose
    sub-columns no run fits is matched by position instead.
    """
    tokens = [g.strip(".").lower() for g in group_line.split()]
    groups = tokens[tokens.index("interval") + 1 :] if "interval" in tokens else []
    subs = [s.lower() for s in sub_line.split()]
    names: list[str] = []
    for group in groups:
        run = next((r for r in _FSD_RUNS if tuple(subs[len(names) : len(names) + len(r)]) == r), None)
        if run is None:
            return _fsd_names_by_position(group_line, sub_line)
        names += [_FSD_COLUMNS.get((group, sub)) or f"{group}_{sub}" for sub in run]
    return names if groups and len(names) == len(subs) else _fsd_names_by_position(group_line, sub_line)


def _fsd_names_by_position(group_line: str, sub_line: str) -> list[str]:
    """Column names of the file-system layout from its two header lines, matched by position."""
    groups = [(m.start(), m.end(), m.group(0).strip(".").lower()) for m in re.finditer(r"\S+", group_line)]
    names = []
    for match in re.finditer(r"\S+", sub_line):
        end = match.end() - 1
        group = next((g for s, e, g in groups if s <= end < e), None)
        if group is None:  # nearest group to the left
            group = max((g for g in groups if g[0] <= end), default=(0, 0, "?"))[2]
        name = _FSD_COLUMNS.get((group, match.group(0).lower()))
        names.append(name or f"{group}_{match.group(0).lower()}")
    return names


#: the upper header line of the file-system layout: ``..Interval..`` (or ``.Interval.``) then dotted groups
_FSD_HEADER = re.compile(r"(^|\s)\.+Interval\.+\s+\.*ReqstdOps", re.IGNORECASE)


def _raw_names(upper: str, lower: str) -> list[str] | None:
    """Column names of a raw-device report from its two header lines (None when a pair is not known)."""
    tops = upper.split()[upper.lower().split().index("interval") + 1 :]
    bottoms = lower.split()
    if len(tops) != len(bottoms):
        return None
    names = [_RAW_HEADER.get((top.lower(), bottom.lower())) for top, bottom in zip(tops, bottoms, strict=True)]
    return None if None in names else names  # type: ignore[return-value]


def parse_report_text(path: Path, text: str) -> list[Block]:
    """Every ``Starting RD=`` block of a vdbench text report or console log, with its rows.

    Raises
    ------
    FormatError
        When an interval line has a column count no vdbench layout has.

    """
    blocks: list[Block] = []
    fsd_names: list[str] | None = None
    raw_names: list[str] | None = None  # from the report's own header, when it has one
    lines = text.splitlines()
    for number, raw in enumerate(lines, start=1):
        line = _TAG.sub("", raw).rstrip()
        start = _START.match(line)
        if start:
            settings, loops = _settings(start.group(3))
            blocks.append(Block(name=start.group(2), for_loops=loops, settings=settings, tod=start.group(1)))
            fsd_names = raw_names = None
            continue
        if _FSD_HEADER.search(line) and number < len(lines):
            fsd_names = _fsd_names(line, _TAG.sub("", lines[number]))
            continue
        if _RAW_HEADER_LINE.search(line) and number < len(lines):
            raw_names = _raw_names(line, _TAG.sub("", lines[number]))
            continue
        row = _ROW.match(line.strip())
        if not row and blocks and _ROW_LIKE.match(line.strip()):  # an interval or avg_ line whose values do not read
            raise FormatError(
                path,
                f"line {number}",
                "an interval line of numbers after its time and interval ('13:45:18.019  avg_2-5  107.5  0.10 ...')",
                found=quoted(line.strip()),
            )
        if not row or not blocks:
            continue
        values = row.group(3).split()
        names = fsd_names or raw_names or _RAW_COLUMNS.get(len(values))
        if (
            not row.group(2)[0].isdigit()
            and not row.group(2).startswith("avg_")
            and (names is None or len(names) != len(values))
        ):
            continue  # std_/max_ lines of the file-system layout leave columns blank
        if names is None or len(names) != len(values):
            raise FormatError(
                path,
                f"line {number}",
                f"a vdbench interval line with 10 to 13 values (raw devices, with or without CPU columns) or "
                f"as many as the file-system header names, found {len(values)}",
            )
        record: dict[str, Any] = {"interval": row.group(2), "tod": row.group(1)}
        record.update((n, float(v)) for n, v in zip(names, values, strict=True))
        blocks[-1].rows.append(record)
    return blocks


_BUCKET = re.compile(r"^\s*([\d.]+)\s+<\s+([\d.]+|max)\s+([\d,]+)\s+[\d.]+\s+[\d.]+")
_SECTIONS = {
    "Reads:": "read",
    "Writes:": "write",
    "Only reads done for this workload:": "read",
    "Only writes done for this workload:": "write",
    "Reads and writes:": "total",
    "Total of all requested operations since warmup:": "total",
}  # file-system runs: no split


def parse_histogram(path: Path, text: str) -> list[tuple[Block, dict[str, list[tuple[float, float | None, int]]]]]:
    """Response-time histograms of a vdbench ``histogram.html`` (or a host's): per run, per direction, buckets.

    Each bucket is ``(low ms, high ms or None for the open last one, count)``.
    """
    out: list[tuple[Block, dict[str, list[tuple[float, float | None, int]]]]] = []
    section = None
    for raw in text.splitlines():
        line = _TAG.sub("", raw).rstrip()
        start = _START.match(line)
        if start:
            out.append((Block(name=start.group(2), tod=start.group(1)), {}))
            section = None
            continue
        if line.strip() in _SECTIONS:
            section = _SECTIONS[line.strip()]
            continue
        bucket = _BUCKET.match(line)
        if bucket and out and section:
            high = None if bucket.group(2) == "max" else float(bucket.group(2))
            out[-1][1].setdefault(section, []).append(
                (float(bucket.group(1)), high, int(bucket.group(3).replace(",", "")))
            )
    return out


def histogram_rows(run_ids: list[str], histograms: list, client: str | None) -> list[dict[str, Any]]:
    """``latency_bins`` rows: one per bucket, its value the bucket's upper bound in ns (the open last one: its lower).

    Read and write buckets are kept; the combined one only when a run has no
    per-direction histogram (vdbench prints "Reads and writes" beside them).
    """
    rows = []
    for rid, (block, sections) in zip(run_ids, histograms, strict=False):
        kept = {d: b for d, b in sections.items() if d != "total"} or sections
        for direction, buckets in kept.items():
            for index, (low, high, count) in enumerate(buckets):
                rows.append(
                    {
                        "run_id": rid,
                        "client": client,
                        "job_name": block.name,
                        "job_index": 1,
                        "direction": direction,
                        "latency_kind": "lat",
                        "bin_index": index,
                        "bin_value_ns": (high if high is not None else low) * 1e6,
                        "count": count,
                    }
                )
    return rows


# ---------------------------------------------------------------- flatfile


def _flat_table(path: Path, text: str) -> tuple[list[str], list[list[str]]]:
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
        rows.append(fields)
    if header is None or "run" not in header or "interval" not in header:
        raise FormatError(
            path,
            "header",
            "a vdbench flatfile header with 'Run' and 'Interval' columns",
            found="no header line" if header is None else quoted(" ".join(header)),
        )
    return header, rows


def parse_flatfile(path: Path, text: str) -> list[Block]:
    """Return the runs of a flatfile: a new run starts when ``Run`` changes or the interval count starts again."""
    header, rows = _flat_table(path, text)
    columns = dict(_FLAT_COLUMNS)
    if "bytes/io" not in header:  # file-system layout: its Xfersize column is the mean transfer, not the setting
        columns["xfersize"] = "bytes_io"
    blocks: list[Block] = []
    last_interval = None
    for fields in rows:
        raw = dict(zip(header, fields, strict=True))
        interval = raw["interval"]
        step = int(interval) if interval.isdigit() else None
        if (
            not blocks
            or blocks[-1].name != raw["run"]
            or (step is not None and last_interval is not None and step <= last_interval)
            or (step is not None and blocks[-1].rows and not blocks[-1].rows[-1]["interval"].isdigit())
        ):
            blocks.append(Block(name=raw["run"], tod=raw.get("tod")))
        last_interval = step if step is not None else last_interval
        record: dict[str, Any] = {"interval": interval, "tod": raw.get("tod")}
        for column, value in raw.items():
            name = columns.get(column)
            if name in ("version", "timestamp"):
                record[name] = None if value == "n/a" else value
            elif name:
                record[name] = _number(value)
        blocks[-1].rows.append(record)
    return blocks


# ---------------------------------------------------------------- blocks -> tables


def _seconds_of_day(tod: str | None) -> float | None:
    """``18:12:38.020`` -> seconds since midnight (None when not a time of day)."""
    if not tod or len(tod) < 8 or tod[-4] != "." or tod.count(":") != 2:
        return None
    hours, minutes, seconds = tod.split(":")
    try:
        return int(hours) * 3600 + int(minutes) * 60 + float(seconds)
    except ValueError:
        return None


def _read_share(row: dict[str, Any]) -> float | None:
    if row.get("read_rate") is not None and row.get("rate"):
        return 100 * row["read_rate"] / row["rate"]
    return row.get("read_pct")


def direction_rows(row: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per direction that did I/O: IOPS, bandwidth (bytes/s), mean/max/stddev latency (ns)."""
    rate, mib = row.get("rate"), row.get("mib_s")
    share = _read_share(row)
    out = []
    for direction in ("read", "write"):
        if share is None and direction == "write":
            continue
        part = 1.0 if share is None else (share if direction == "read" else 100 - share) / 100
        if share is not None and part <= 0:
            continue
        own_rate = row.get(f"{direction}_rate")
        own_mib = row.get(f"mib_{direction}")
        single = share is None or part >= 1
        resp = row.get(f"{direction}_resp") if share is not None else row.get("resp")
        max_ = row.get(f"{direction}_max", row.get("resp_max") if single else None)
        std = row.get(f"{direction}_std", row.get("resp_std") if single else None)
        out.append(
            {
                "direction": direction,
                "iops": own_rate if own_rate is not None else (None if rate is None else rate * part),
                "bandwidth_bytes_per_s": own_mib * MIB
                if own_mib is not None
                else (None if mib is None else mib * MIB * part),
                "lat_mean_ns": None if resp is None else resp * 1e6,
                "lat_max_ns": None if max_ is None else max_ * 1e6,
                "lat_stddev_ns": None if std is None else std * 1e6,
            }
        )
    return out


#: what vdbench's printing loses: rates and MB/s to two decimals at the finest (0.01 of either)
_PRINTED_STEP = 0.01


def _intervals_apart(block: Block, average: dict[str, Any], first: int, last: int) -> dict[str, dict[str, float]]:
    """Return, per direction, the measured intervals' mean IOPS and bandwidth where the totals line differs.

    vdbench's ``avg_<first>-<last>`` line is the rate over those intervals; their own rates, each equally
    long, average to it but for the printing (two decimals at the finest). Where the two differ by more than
    1% and more than the printing loses, the file disagrees with itself: the intervals' figures are kept as
    ``printed_iops`` and ``printed_bandwidth_bytes_per_s`` beside the totals line's (the figures benchlib keeps,
    vdbench's own count), and :func:`benchlib.stats.plausibility.printed_apart` finds them.
    """
    steps = [r for r in block.rows if r["interval"].isdigit() and first <= int(r["interval"]) <= last]
    if not steps:
        return {}
    numbers = [
        k for k, v in average.items() if isinstance(v, float) and all(isinstance(r.get(k), float) for r in steps)
    ]
    mean = {**average, **{k: sum(r[k] for r in steps) / len(steps) for k in numbers}}
    kept, theirs = direction_rows(average), direction_rows(mean)
    # the run's totals (its directions added) set against each other: a direction's share of a mean of
    # per-interval shares is not the totals line's share
    apart = []
    for figure, step in (("iops", _PRINTED_STEP), ("bandwidth_bytes_per_s", _PRINTED_STEP * MIB)):
        ours, other = (sum(r[figure] or 0.0 for r in rows) for rows in (kept, theirs))
        if ours > 0 and other > 0 and abs(other - ours) > max(0.01 * ours, step):
            apart.append(figure)
    return {row["direction"]: {f"printed_{figure}": row[figure] for figure in apart} for row in theirs} if apart else {}


_INTERVAL_METRICS = (
    ("iops", "iops", "iops"),
    ("bw", "bytes_per_s", "bandwidth_bytes_per_s"),
    ("lat", "ns", "lat_mean_ns"),
)


def _interval_rows(rid: str, block: Block, client: str | None, first_measured: int) -> list[dict[str, Any]]:
    steps = [r for r in block.rows if r["interval"].isdigit()]
    start = _seconds_of_day(steps[0]["tod"]) if steps else None
    out = []
    for record in steps:
        seconds = _seconds_of_day(record["tod"])
        time_ns = None if seconds is None or start is None else int(round((seconds - start) % 86400 * 1e9))
        warmup = int(record["interval"]) < first_measured
        for row in direction_rows(record):
            for metric, unit, key in _INTERVAL_METRICS:
                if row[key] is not None:
                    out.append(
                        {
                            "run_id": rid,
                            "client": client,
                            "job_name": block.name,
                            "job_index": int(record["interval"]),
                            "direction": row["direction"],
                            "time_ns": time_ns,
                            "metric": metric,
                            "unit": unit,
                            "value": row[key],
                            "is_cumulative": False,
                            "is_warmup": warmup,
                        }
                    )
    return out


def _workload(block: Block, average: dict[str, Any], parm: ParmFile | None) -> dict[str, Any]:
    """rw, read %, block size, threads and settings: the run's own output first, then the parameter file."""
    # a format run (``format_for_<rd>``) creates the files: its own rows say what it did, not the RD's workload
    rd = parm.named("rd", block.name) if parm and not block.name.startswith("format_for_") else None
    wds = _workloads_of(rd, parm) if rd else []
    loops = block.for_loops or _loop_values(rd)

    def pick(key: str) -> str | None:
        if key in loops:
            return loops[key]
        found = {w.get(key) for w in wds}
        return found.pop() if len(found) == 1 else None

    read_pct = average.get("rdpct") if average.get("rdpct") is not None else _number(pick("rdpct"))
    if read_pct is None and all(w.get("operation") for w in wds) and wds:
        ops = {w["operation"] for w in wds}
        read_pct = 100.0 if ops == {"read"} else 0.0 if ops == {"write"} else None
    if read_pct is None:
        read_pct = _read_share(average)
    seek = average.get("seekpct") if average.get("seekpct") is not None else _seek(pick("seekpct"), wds)
    xfer = average.get("xfersize")
    declared = pick("xfersize")
    if declared is not None and declared.startswith("(") and "xfersize" not in loops:
        block_size = None  # a transfer-size distribution: no single block size (bytes/io is its mean)
    else:
        block_size = int(xfer) if xfer and xfer > 0 else size_bytes(declared)
    threads = (
        average.get("threads")
        if average.get("threads") is not None
        else _number(pick("threads") or (rd or {}).get("threads"))
    )
    if threads is None and rd is not None and "fwd" not in rd:
        threads = 8.0  # vdbench's default for raw devices (vdb__output1 sets none; its flatfile says 8)
    rw = None
    if read_pct is not None and seek is not None:
        kind = "rand" if seek > 0 else ""
        rw = f"{kind}read" if read_pct == 100 else f"{kind}write" if read_pct == 0 else ("randrw" if kind else "rw")
    settings = {**(rd or {}), **block.settings}
    elapsed, warmup = _number(settings.get("elapsed")), _number(settings.get("warmup"))
    return {
        "rw": rw,
        "rwmixread_pct": read_pct,
        "block_size_bytes": block_size,
        "iodepth": int(threads) if threads else None,
        "numjobs": 1,
        "ioengine": "vdbench",
        "runtime_setting_ns": None if elapsed is None else int(elapsed * 1e9),
        "ramp_time_ns": None if warmup is None else int(warmup * 1e9),
        "time_based": True,
        "rate_limited": _rate_limited(settings.get("iorate")),
    }


def _rate_limited(iorate: str | None) -> bool | None:
    """Tell whether a run definition's ``iorate`` caps it (a number) or not (``max``, ``curve``); None when unknown."""
    if iorate is None:
        return None
    word = iorate.strip().lower()
    if word.startswith(("max", "curve", "uncontrolled")):
        return False
    return bool(re.match(r"[0-9.]+", word)) or None


def _workloads_of(rd: dict[str, str] | None, parm: ParmFile | None) -> list[dict[str, str]]:
    if parm is None:
        return []
    key = "fwd" if rd and "fwd" in rd else "wd"
    pattern = (rd or {}).get(key, "*").strip("()").split(",")
    found = [w for w in parm.definitions[key] if any(fnmatch.fnmatch(w[key], p.strip()) for p in pattern)]
    return found or parm.definitions[key]


def _loop_values(rd: dict[str, str] | None) -> dict[str, str]:
    """For-loop values when the output does not print them: only when the run definition has a single run."""
    if not rd:
        return {}
    runs = expand_run(rd)
    return runs[0] if len(runs) == 1 else {}


def _seek(value: str | None, wds: list[dict[str, str]]) -> float | None:
    """Return the random share of a workload.

    Random share of a workload; a raw-device WD without ``seekpct`` is random (vdbench's default:
    the corpus run ``vdb__output1`` sets none and its flatfile reports ``seekpct`` 100).
    """
    if value is not None:
        return {"sequential": 0.0, "seq": 0.0, "random": 100.0, "eof": 0.0}.get(value.lower(), _number(value))
    fileio = {w.get("fileio", "").split(",")[0].strip("(") for w in wds}
    if fileio == {"sequential"}:
        return 0.0
    if fileio == {"random"}:
        return 100.0
    return 100.0 if wds and not any("seekpct" in w for w in wds) and all("sd" in w for w in wds) else None


def _start_time(block: Block, context: Context) -> datetime | None:
    stamp = next((r.get("timestamp") for r in block.rows if r.get("timestamp")), None)
    if stamp and context.utc_offset is not None:
        try:
            local = datetime.strptime(stamp.rsplit("-", 1)[0], "%m/%d/%Y-%H:%M:%S")
            return (local - context.utc_offset).replace(tzinfo=UTC) - timedelta(seconds=_interval_seconds(block) or 0)
        except ValueError:
            return None
    if context.date and context.utc_offset is not None and block.tod:
        try:
            local = datetime.strptime(f"{context.date} {block.tod}", "%b %d %Y %H:%M:%S.%f")
        except ValueError:
            return None
        return (local - context.utc_offset).replace(tzinfo=UTC)
    return None


def _interval_seconds(block: Block) -> float | None:
    declared = _number(block.settings.get("interval"))
    if declared:
        return declared
    times = [_seconds_of_day(r["tod"]) for r in block.rows if r["interval"].isdigit()]
    gaps = sorted(b - a for a, b in zip(times, times[1:], strict=False) if a is not None and b is not None and b > a)
    return round(gaps[len(gaps) // 2]) or None if gaps else None


def blocks_to_rows(
    blocks: list[Block],
    *,
    key: str,
    first_index: int,
    sha256: str,
    source: str,
    fmt: str,
    context: Context,
    host: str | None = None,
    is_aggregate: bool = False,
) -> dict[str, list]:
    """Rows of runs, results and intervals for blocks read from one file.

    ``key`` (a file's or a folder's hash) prefixes every run id; run ids count
    from ``first_index`` so that several files of one folder do not collide.
    """
    out: dict[str, list] = {"runs": [], "results": [], "intervals": []}
    for offset, block in enumerate(blocks):
        index = first_index + offset
        rid = run_id(key, index, host if not is_aggregate else None)
        averages = [r for r in block.rows if _AVG.match(r["interval"])]
        first_measured = int(_AVG.match(averages[-1]["interval"]).group(1)) if averages else 1
        out["intervals"].extend(_interval_rows(rid, block, host, first_measured))
        seconds = _interval_seconds(block)
        if averages:
            average = averages[-1]
            first, last = (int(x) for x in _AVG.match(average["interval"]).groups())
            apart = _intervals_apart(block, average, first, last)  # the totals line against its own intervals
            measured = None if seconds is None or last < first else int(round((last - first + 1) * seconds * 1e9))
            cpu = average.get("cpu_total")
            workload = _workload(block, average, context.parm)
            for row in direction_rows(average):
                out["results"].append(
                    {
                        "run_id": rid,
                        "client": host,
                        "job_name": block.name,
                        "job_index": 1,
                        "jobs": 1,
                        "is_aggregate": is_aggregate,
                        **workload,
                        **row,
                        "runtime_ns": measured,
                        "io_count": None
                        if measured is None or row["iops"] is None
                        else int(round(row["iops"] * measured / 1e9)),
                        "io_bytes": None
                        if measured is None or row["bandwidth_bytes_per_s"] is None
                        else int(round(row["bandwidth_bytes_per_s"] * measured / 1e9)),
                        "usr_cpu_pct": None if cpu is None else cpu - (average.get("cpu_sys") or 0.0),
                        "sys_cpu_pct": average.get("cpu_sys"),
                        **apart.get(row["direction"], {}),
                    }
                )
        steps = [r for r in block.rows if r["interval"].isdigit()]
        version = next((r.get("version") for r in block.rows if r.get("version")), None) or context.version
        labels = [{"name": k, "value": v} for k, v in block.for_loops.items()]
        out["runs"].append(
            {
                "run_id": rid,
                "tool": "vdbench",
                "tool_version": version,
                "format": fmt,
                "host": host,
                "is_aggregate": is_aggregate,
                "start_time": _start_time(block, context),
                "duration_ns": None if seconds is None or not steps else int(round(len(steps) * seconds * 1e9)),
                "source": source,
                "sha256": sha256,
                "document_index": index,
                "labels": labels,
            }
        )
    return out


def tables_from_rows(path: Path, rows: dict[str, list]) -> Tables:
    """Tables from the rows of :func:`blocks_to_rows` (a FormatError when there is no run at all)."""
    if not rows["runs"]:
        raise FormatError(
            path,
            "rows",
            "vdbench runs (a 'Starting RD=' line followed by interval lines, or flatfile rows)",
            found="no run: no such line, or no interval line after one",
        )
    return Tables.from_rows(rows)


def read_vdbench_flatfile(path: str | Path) -> Tables:
    """Read vdbench's flatfile.html: one run per run definition and per for-loop run.

    Raises
    ------
    FormatError
        When the header or a row cannot be read.

    """
    source = read_source(path)
    blocks = parse_flatfile(source.path, source.text)
    rows = blocks_to_rows(
        blocks,
        key=source.sha256,
        first_index=0,
        sha256=source.sha256,
        source=str(source.path),
        fmt="vdbench-flatfile",
        context=Context(),
    )
    return tables_from_rows(source.path, rows)


def _parameter_file_beside(path: Path) -> ParmFile | None:
    """Return the one vdbench parameter file (by content) in the console file's folder.

    For example HCIBench's ``vdbench.cfg``.
    """
    found = []
    for other in sorted(path.parent.iterdir()):
        if other == path or not other.is_file() or other.stat().st_size > 1_000_000:
            continue
        try:
            text = other.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if looks_like_parmfile(text[:65536]):
            found.append((other, text))
    if len(found) != 1:
        return None
    try:
        return parse_parmfile(*found[0])
    except FormatError:
        return None


def read_vdbench_console(path: str | Path) -> Tables:
    """Read vdbench's console output saved to a file (also each HCIBench worker VM's ``<vm>.txt``).

    The console does not print the workload's seek and read percentages; a
    vdbench parameter file beside it (HCIBench keeps it as ``vdbench.cfg``),
    when there is exactly one, supplies them.

    Raises
    ------
    FormatError
        When an interval line cannot be read or there is no run.

    """
    source = read_source(path)
    version = _VERSION.search(source.text)
    blocks = parse_report_text(source.path, source.text)
    context = Context(version=version.group(1) if version else None, parm=_parameter_file_beside(source.path))
    rows = blocks_to_rows(
        blocks,
        key=source.sha256,
        first_index=0,
        sha256=source.sha256,
        source=str(source.path),
        fmt="vdbench-console",
        context=context,
    )
    return tables_from_rows(source.path, rows)
