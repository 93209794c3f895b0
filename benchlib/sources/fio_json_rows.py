"""fio JSON and json+ output as plain rows, without polars or numpy.

The extraction half of the fio JSON reader (``fio_json`` turns these rows
into tables). It imports neither polars nor numpy so that ingest's worker
processes start in a few hundredths of a second: they extract here and the
main process builds the frames (see ``benchlib.ingest``).
"""

from __future__ import annotations

import functools
from array import array
from collections import Counter
from datetime import UTC, datetime
from itertools import accumulate
from pathlib import Path
from typing import Any

import orjson

from benchlib.errors import FormatError, ImpossibleValue, quoted
from benchlib.sources._common import (
    SNIFF_BYTES,
    JsonDocument,
    SourceText,
    find_json_documents,
    read_source,
    run_id,
    single_document,
    strip_host_prefix,
)
from benchlib.sources.fio_common import group_reporting, job_columns, normalise_options

try:
    from benchlib._bins import cut_bins as _cut_bins
except ImportError:  # built without a C compiler: json+ bins take the ordinary (slower) path
    _cut_bins = None

_DIRECTIONS = ("read", "write", "trim")


def looks_like_fio_json(head: str) -> bool:
    """Whether the first bytes of a file look like fio JSON output."""
    return '"fio version"' in head and ('"jobs"' in head or '"client_stats"' in head or "{" in head)


def looks_like_fio_json_bytes(data: bytes) -> bool:
    """:func:`looks_like_fio_json` on a file's bytes (its first ``SNIFF_BYTES``), for UTF-8 text: no decoding."""
    return data.find(b'"fio version"', 0, SNIFF_BYTES) >= 0 and data.find(b"{", 0, SNIFF_BYTES) >= 0


def _latency_block(section: dict, name: str) -> tuple[dict | None, float]:
    """Return the ``clat``/``lat``/``slat`` block of a direction and its unit in ns (3.x: ns, 2.x: usec)."""
    if f"{name}_ns" in section:
        return section[f"{name}_ns"], 1.0
    if name in section:
        return section[name], 1000.0
    return None, 1.0


@functools.lru_cache(maxsize=1024)
def _pct_layout(keys: tuple[str, ...]) -> tuple[tuple[float, ...], list[int] | None]:
    """Return the percentiles a key set names, ascending, and which values to take (None: all, as they are).

    Cached: fio prints the same key set in every block.
    """
    named = [(float(key), i) for i, key in enumerate(keys)]
    kept = sorted((pct, i) for pct, i in named if pct > 0.0)  # fio 2.17 pads the map with "0.00" : 0 entries
    order = [i for _, i in kept]
    return tuple(pct for pct, _ in kept), None if order == list(range(len(keys))) else order


def _percentiles(block: dict | None, factor: float) -> tuple[tuple[float, ...], list] | None:
    """Return a block's percentiles as ``(percentiles, values in ns)``: see :func:`results_frame`."""
    if not block or "percentile" not in block:
        return None
    table = block["percentile"]
    pcts, order = _pct_layout(tuple(table))
    if not pcts:
        return None
    values = list(table.values())
    if order is not None:
        values = [values[i] for i in order]
    if factor != 1.0:
        values = [v * factor for v in values]
    return pcts, values


#: Per latency kind: its 3.x (ns) key, its 2.x (usec) key, the stat -> column names, its percentile column.
_LATENCY_COLUMNS = tuple(
    (
        f"{name}_ns",
        name,
        tuple((stat, f"{name}_{stat}_ns") for stat in ("mean", "stddev", "min", "max")),
        None if name == "slat" else f"{name}_percentiles",
    )
    for name in ("lat", "clat", "slat")
)


def _latency_columns(section: dict) -> dict[str, Any]:
    """Return the latency columns a direction reports (columns it does not report are left out: nulls)."""
    cols: dict[str, Any] = {}
    for key_ns, key_us, stats, percentiles in _LATENCY_COLUMNS:
        block, factor = section.get(key_ns), 1.0
        if block is None:
            block, factor = section.get(key_us), 1000.0
        if not block:
            continue
        count = block.get("N")
        if (count is not None and count <= 0) or not (block.get("max", 0) or block.get("mean", 0)):
            continue
        for stat, column in stats:
            value = block.get(stat)
            if value is not None:
                cols[column] = float(value) * factor
        if percentiles is not None:
            cols[percentiles] = _percentiles(block, factor)
    return cols


#: Bins keys or counts: native int64 values (an ``array("q")`` or a memoryview cast to ``"q"``).
Int64s = array | memoryview
#: Bins maps cut out of a document's text (:func:`_cut_document`): keys and counts per map, in document order.
CutBins = list[tuple[memoryview, memoryview]]


def _raw_bins(block: dict | None, factor: float, cut: CutBins) -> tuple[Int64s, Int64s, float, bool] | None:
    """Return a json+ ``bins`` map as int64 keys and counts, or None.

    Returns ``(keys, counts, factor to ns, keys are bucket indices)``: fio 3.x
    keys are bucket values in the block's unit; fio 2.x keys are bucket
    indices (with ``FIO_IO_U_PLAT_*`` entries beside them) and values are
    usec. A map cut out of the text before parsing (:func:`_cut_document`) is
    its index in ``cut``.
    """
    if not block or "bins" not in block:
        return None
    bins = block["bins"]
    if type(bins) is int and 0 <= bins < len(cut):
        keys, counts = cut[bins]
        return keys, counts, factor, False
    if not isinstance(bins, dict) or not bins:
        return None
    is_index = "FIO_IO_U_PLAT_BITS" in bins
    names = [k for k in bins if k.isdigit()] if is_index else list(bins)
    try:  # orjson reads the keys as one list (half the time of int() each); anything but integers fails
        keys = array("q", orjson.loads("[" + ",".join(names) + "]"))
        values = [bins[k] for k in names]
        counts = array("q", values)
    except (ValueError, TypeError, OverflowError):
        raise ValueError("bins") from None
    if len(keys) != len(names) or not all(type(v) is int for v in values):  # a key "1,2"; array takes True as 1
        raise ValueError("bins")
    if keys and (min(keys) < 0 or min(counts) < 0):
        raise ValueError("bins")
    return keys, counts, 1000.0 if is_index else factor, is_index


def _cut_document(source: SourceText) -> tuple[JsonDocument, CutBins] | None:
    """Return a file that is one fio json+ document, parsed with its bins maps cut out of the text first.

    A heavy json+ file is mostly bins; parsed into Python dicts and converted
    back they cost more than the rest of ingest. ``benchlib._bins`` (C) cuts
    every map in fio's own layout out of the text as arrays and leaves its
    index in its place, so orjson parses only the rest. Returns None (the
    ordinary path) for anything else: no bins, several documents, fio 2.x
    bins, a damaged file, or benchlib built without its C part.
    """
    found = None if _cut_bins is None else _cut_bins(source.text)
    if found is None:
        return None
    stripped, key_bytes, count_bytes, sizes = found
    document = single_document(source, stripped)
    if document is None or "fio version" not in document.data:
        return None
    keys, counts = memoryview(key_bytes).cast("q"), memoryview(count_bytes).cast("q")
    cut = [(keys[end - n : end], counts[end - n : end]) for end, n in zip(accumulate(sizes), sizes, strict=True)]
    return document, cut


def _io_bytes(section: dict) -> int:
    # fio before 2.21 wrote io_bytes in KiB and had no io_kbytes (FORMATS.md, commit c12d597a)
    raw = int(section.get("io_bytes", 0))
    return raw if "io_kbytes" in section else raw * 1024


def _direction_row(section: dict, direction: str) -> dict[str, Any] | None:
    count = section.get("total_ios")
    if count is None:
        block, _ = _latency_block(section, "clat")
        count = block.get("N") if block else None
    io_bytes = _io_bytes(section) if "io_bytes" in section else None
    if not (count or io_bytes):
        return None
    runtime_ms = section.get("runtime")
    bandwidth = section.get("bw_bytes")
    if bandwidth is None and "bw" in section:
        bandwidth = float(section["bw"]) * 1024
    row = {
        "direction": direction,
        "io_count": None if count is None else int(count),
        "io_bytes": io_bytes,
        "runtime_ns": None if runtime_ms is None else int(runtime_ms) * 1_000_000,
        "iops": float(section.get("iops", 0.0)),
        "bandwidth_bytes_per_s": None if bandwidth is None else float(bandwidth),
    }
    row.update(_latency_columns(section))
    return row


def _sync_row(job: dict) -> dict[str, Any] | None:
    sync = job.get("sync")
    if not sync or not sync.get("total_ios"):
        return None
    block, factor = _latency_block(sync, "lat")
    row: dict[str, Any] = {"direction": "sync", "io_count": int(sync["total_ios"])}
    if block:
        for stat in ("mean", "stddev", "min", "max"):
            row[f"lat_{stat}_ns"] = float(block.get(stat, 0.0)) * factor
        row["lat_percentiles"] = _percentiles(block, factor)
    return row


def _global_options(doc: dict) -> dict[str | None, dict[str, str]]:
    """Global options by hostname (``None`` for a single run or fio < 3.39's merged object)."""
    raw = doc.get("global options")
    if raw is None:
        return {None: {}}
    if isinstance(raw, list):  # fio 3.39+: one object per server
        out: dict[str | None, dict[str, str]] = {None: {}}
        for entry in raw:
            options = normalise_options({k: v for k, v in entry.items() if k not in ("hostname", "port")})
            out[entry.get("hostname")] = options
        return out
    return {None: normalise_options(raw)}


def _job_params(
    base: dict[str, str], host: dict[str, str], own: dict | None, apply_defaults: bool
) -> tuple[dict[str, Any], bool]:
    """Return the job-parameter columns and ``group_reporting`` of a job.

    Options apply global first, then per-host, then the job's own.
    """
    items = (tuple(base.items()), tuple(host.items()), tuple(own.items()) if own else (), apply_defaults)
    try:
        return _params_of(*items)
    except TypeError:  # an option value that is not a string or number cannot be a cache key
        return _params_of.__wrapped__(*items)


@functools.lru_cache(maxsize=4096)
def _params_of(base: tuple, host: tuple, own: tuple, apply_defaults: bool) -> tuple[dict[str, Any], bool]:
    """Return the job options, cached.

    A study repeats the same job file in every result file (the dict is shared, never changed).
    """
    options = {**dict(base), **dict(host), **normalise_options(dict(own))}
    return job_columns(options, apply_defaults=apply_defaults), group_reporting(options)


def _job_entries(doc: dict, source: SourceText, start_line: int) -> tuple[list[dict], bool]:
    if "client_stats" in doc:
        entries = doc["client_stats"]
        server_mode = True
    elif "jobs" in doc:
        entries = doc["jobs"]
        server_mode = False
    else:
        keys = ", ".join(map(str, list(doc)[:8]))
        raise FormatError(
            source.path, f"JSON document at line {start_line}", 'a "jobs" or "client_stats" list', found=f"keys {keys}"
        )
    if not isinstance(entries, list):
        raise FormatError(
            source.path,
            f"JSON document at line {start_line}",
            '"jobs" to be a list',
            found=f"a {type(entries).__name__}: {quoted(entries)}",
        )
    return entries, server_mode


#: One row per json+ bins map: the latency_bins identity columns, plus how to read the keys.
_IDENTITY = ("run_id", "client", "job_name", "job_index", "direction", "latency_kind")


def new_raw_bins() -> dict[str, list]:
    """Return an empty accumulator for :func:`stored_bins`."""
    return {"blocks": [], "keys": [], "counts": []}


def _document_rows(
    doc: JsonDocument, index: int, source: SourceText, host: str | None = None, cut: CutBins | None = None
) -> dict[str, list]:
    data = doc.data
    entries, server_mode = _job_entries(data, source, doc.start_line)
    globals_by_host = _global_options(data)
    version = str(data.get("fio version", "")) or None
    results: list[dict] = []
    bins = new_raw_bins()
    position: dict[str | None, int] = {}
    # entries of one job name on one host: fio writes one per clone (numjobs of them) unless it groups them
    # (group_reporting), which its JSON's options do not always say (fio 3.33 leaves a command line's out)
    entries_of = Counter(
        ((e.get("hostname") if server_mode else None), e.get("jobname")) for e in entries if isinstance(e, dict)
    )
    for entry in entries:
        is_aggregate = server_mode and entry.get("jobname") == "All clients"
        client = None if is_aggregate else (entry.get("hostname") if server_mode else host)
        position[client] = position.get(client, 0) + 1
        job_index = position[client]
        try:
            params, grouped = _job_params(
                globals_by_host.get(None, {}),
                globals_by_host.get(client, {}),
                entry.get("job options"),
                "job options" in entry or "global options" in data,
            )
        except ValueError as exc:  # an option no fio accepts (bs=4zz): the file was changed after fio wrote it
            where = f"JSON document at line {doc.start_line}, job {quoted(entry.get('jobname'))}"
            raise FormatError(
                source.path, where, f"{exc}; fio refuses such a job, so the file was changed after fio wrote it"
            ) from None
        key = ((entry.get("hostname") if server_mode else None), entry.get("jobname"))
        grouped = grouped or ((params["numjobs"] or 1) > 1 and entries_of[key] == 1)  # one entry for N clones
        identity = {
            "run_id": run_id(source.sha256, index, client),
            "client": client,
            "job_name": entry.get("jobname"),
            "group_id": entry.get("groupid"),
            "job_index": job_index,
            "jobs": (params["numjobs"] or 1) if grouped and not is_aggregate else (None if is_aggregate else 1),
            "is_aggregate": is_aggregate,
            "error": entry.get("error"),
            **params,
            "ss_attained": _ss_attained(entry),
            "usr_cpu_pct": entry.get("usr_cpu"),
            "sys_cpu_pct": entry.get("sys_cpu"),
            "context_switches": entry.get("ctx"),
        }
        for direction in _DIRECTIONS:
            section = entry.get(direction)
            row = _direction_row(section, direction) if isinstance(section, dict) else None
            if row is None:
                continue
            results.append({**identity, **row})
            for kind in ("clat", "lat"):
                block, factor = _latency_block(section, kind)
                try:
                    found = _raw_bins(block, factor, cut or [])
                except ValueError:
                    job = entry.get("jobname")
                    where = f"JSON document at line {doc.start_line}, job {job!r}, {direction} {kind} bins"
                    raise FormatError(
                        source.path, where, "a map of bucket -> count, both whole numbers", found=quoted(block)
                    ) from None
                if found is None or not found[0]:
                    continue
                keys, counts, to_ns, is_index = found
                bins["blocks"].append(
                    {
                        "run_id": identity["run_id"],
                        "client": client,
                        "job_name": identity["job_name"],
                        "job_index": job_index,
                        "direction": direction,
                        "latency_kind": kind,
                        "factor": to_ns,
                        "key_is_index": is_index,
                        "bins": len(keys),
                    }
                )
                bins["keys"].append(keys)
                bins["counts"].append(counts)
        sync = _sync_row(entry)
        if sync is not None:
            results.append({**identity, **sync})
    return {"results": results, "latency_bins": bins, "version": [version]}


def _start_time(doc: dict) -> datetime | None:
    jobs = doc.get("jobs") or doc.get("client_stats") or []
    starts = [j["job_start"] for j in jobs if isinstance(j, dict) and j.get("job_start")]
    if starts:
        return _at(min(starts) / 1000, "jobs[].job_start")
    stamp = doc.get("timestamp_ms") or (doc.get("timestamp") and doc["timestamp"] * 1000)
    if not stamp:
        return None
    elapsed = max((int(j.get("elapsed", 0)) for j in jobs if isinstance(j, dict)), default=0)
    return _at(stamp / 1000 - elapsed, "timestamp_ms" if doc.get("timestamp_ms") else "timestamp")


def _at(seconds: float, key: str) -> datetime:
    """Return a Unix time as a UTC datetime; one no calendar holds is an impossible value, named with its key."""
    try:
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (ValueError, OverflowError, OSError):
        raise ImpossibleValue(f"key {key}", f"{seconds:,.0f} s since 1970, a time no clock gives") from None


def _ss_attained(entry: dict) -> bool | None:
    """Whether fio's own steady-state check (``ss=``) was met for a job; None when the job did not use it."""
    state = entry.get("steadystate")
    if not isinstance(state, dict) or "attained" not in state:
        return None
    return bool(state["attained"])


def _span_ns(doc: dict, client: str | None, server_mode: bool) -> int | None:
    """Return how long the run lasted on one host, start of its first job to the end of fio's run.

    From fio's own clock where the file has it (``timestamp_ms`` minus the first ``job_start``), else
    fio's ``elapsed`` seconds (the whole run, ramp and every stonewalled group included); None when
    neither is there (the longest job's runtime then stands in).
    """
    jobs = [j for j in (doc.get("client_stats") or doc.get("jobs") or []) if isinstance(j, dict)]
    if server_mode and client is not None:
        jobs = [j for j in jobs if j.get("hostname") == client] or jobs
    starts = [j["job_start"] for j in jobs if isinstance(j.get("job_start"), int | float) and j["job_start"] > 0]
    end = doc.get("timestamp_ms")
    if starts and isinstance(end, int | float) and end >= min(starts):
        return int((end - min(starts)) * 1_000_000)
    elapsed = [j["elapsed"] for j in jobs if isinstance(j.get("elapsed"), int | float) and j["elapsed"] > 0]
    return int(max(elapsed) * 1_000_000_000) if elapsed else None


def _failure_found(doc: JsonDocument, entries: list[dict]) -> str:
    """Say what a document whose jobs did no I/O holds instead: fio's error numbers and its own error lines."""
    errors = sorted({e.get("error") for e in entries if isinstance(e, dict) and e.get("error")})
    messages = [
        line.strip() for line in doc.preamble.splitlines() if line.strip().startswith("fio:") or "error" in line
    ]
    detail = f" (fio error {', '.join(map(str, errors))})" if errors else ""
    said = f"; fio said: {' | '.join(messages[:3])}" if messages else ""
    return f"{len(entries)} job{'' if len(entries) == 1 else 's'}, none with I/O{detail}{said}"


def _snapshot_intervals(doc: JsonDocument, index: int, source: SourceText, host: str | None) -> list[dict]:
    """Cumulative totals of a ``--status-interval`` snapshot, per job and direction."""
    rows = _document_rows(doc, index, source, host)["results"]
    out = []
    for row in rows:
        time_ns = row.get("runtime_ns")
        for metric, unit, value in (
            ("io_bytes", "bytes", row.get("io_bytes")),
            ("io_count", "count", row.get("io_count")),
        ):
            if value is None:
                continue
            out.append(
                {
                    "client": row["client"],
                    "job_name": row["job_name"],
                    "job_index": row["job_index"],
                    "direction": row["direction"],
                    "time_ns": time_ns,
                    "metric": metric,
                    "unit": unit,
                    "value": float(value),
                    "is_cumulative": True,
                }
            )
    return out


def extract_fio_json(path: str | Path, *, source: SourceText | None = None) -> dict[str, list | dict[str, list]]:
    """Return the rows of a fio JSON file as plain Python data (see :func:`read_fio_json`).

    Ingest packs the rows of many files (:class:`RowPacker`) into one frame per
    table. ``source``: the file already read.
    """
    source = source or read_source(path)
    host = None
    fast = _cut_document(source)
    cut = fast[1] if fast else []
    documents = [fast[0]] if fast else [d for d in find_json_documents(source) if "fio version" in d.data]
    if not documents:
        host, source = strip_host_prefix(source)
        documents = [d for d in find_json_documents(source) if "fio version" in d.data] if host else []
    if not documents:
        first = next((line for line in source.text.splitlines() if line.strip()), "")
        raise FormatError(
            source.path, "whole file", 'a fio JSON document (an object with "fio version")', found=quoted(first)
        )
    final_index = len(documents) - 1
    final = documents[final_index]
    rows = _document_rows(final, final_index, source, host, cut)
    if not rows["results"]:
        entries, _ = _job_entries(final.data, source, final.start_line)
        raise FormatError(
            source.path,
            f"JSON document at line {final.start_line}",
            "at least one job that did I/O; fix the job and re-run it",
            found=_failure_found(final, entries),
        )
    start = _start_time(final.data)
    durations: dict[tuple[str, str | None, bool], int | None] = {}
    server_mode = "client_stats" in final.data
    for row in rows["results"]:
        key = (row["run_id"], row["client"], row["is_aggregate"])
        runtime = row.get("runtime_ns")
        previous = durations.get(key)
        durations[key] = runtime if previous is None else max(previous, runtime or 0)
    for key in durations:
        span = _span_ns(final.data, key[1], server_mode)
        if span is not None:
            durations[key] = span
    fmt = "fio-json+" if rows["latency_bins"]["blocks"] else "fio-json"
    runs = [
        {
            "run_id": rid,
            "host": client,
            "is_aggregate": aggregate,
            "duration_ns": duration,
            "tool": "fio",
            "tool_version": rows["version"][0],
            "format": fmt,
            "start_time": start,
            "source": str(source.path),
            "sha256": source.sha256,
            "document_index": final_index,
        }
        for (rid, client, aggregate), duration in durations.items()
    ]
    return {
        "runs": runs,
        "results": rows["results"],
        "latency_bins": rows["latency_bins"],
        "intervals": _previous_snapshots(documents[:final_index], final, source, final_index, host),
        "host_counters": _disk_util(final, final_index, source, host, {r["run_id"] for r in runs}),
    }


#: fio's ``disk_util`` keys -> benchlib counters (the same names as the normal report's "Disk stats").
_DISK_COUNTERS = (
    ("read_ios", "read_ios"),
    ("write_ios", "write_ios"),
    ("read_merges", "read_merges"),
    ("write_merges", "write_merges"),
    ("read_ticks", "read_ticks_ms"),
    ("write_ticks", "write_ticks_ms"),
    ("in_queue", "in_queue_ms"),
    ("util", "util_pct"),
)


def _disk_util(doc: JsonDocument, index: int, source: SourceText, host: str | None, run_ids: set[str]) -> list[dict]:
    """Return the kernel's statistics of each disk under the run.

    These are fio's ``disk_util``; per client in client/server mode.
    """
    out = []
    for disk in doc.data.get("disk_util") or []:
        if not isinstance(disk, dict) or "name" not in disk:
            continue
        client = disk.get("hostname") or host
        rid = run_id(source.sha256, index, client)
        if rid not in run_ids:
            rid = run_id(source.sha256, index, host)
        for key, counter in _DISK_COUNTERS:
            if isinstance(disk.get(key), (int, float)):
                out.append(
                    {
                        "run_id": rid,
                        "host": client,
                        "object": "fio disk stats",
                        "instance": disk["name"],
                        "counter": counter,
                        "value": float(disk[key]),
                    }
                )
    return out


def _previous_snapshots(
    earlier: list[JsonDocument], final: JsonDocument, source: SourceText, final_index: int, host: str | None
) -> list[dict]:
    rows: list[dict] = []
    for doc in earlier:
        if doc.data == final.data:  # the same report pasted twice is not a snapshot
            continue
        snapshot = _snapshot_intervals(doc, final_index, source, host)
        rows.extend(snapshot)
    for row in rows:
        row["run_id"] = run_id(source.sha256, final_index, row["client"])
    return rows


#: The tables whose rows travel as JSON text (latency bins travel as blocks and int64 bytes).
ROW_TABLES = ("runs", "results", "intervals", "host_counters")


class RowPacker:
    """The rows of many fio JSON files packed for polars: per table one JSON array, bins as int64 bytes.

    orjson writes the rows (about 1 µs per row) and polars reads them
    (``fio_json.frames_of``); handing a worker's rows back to the main process
    as pickled dicts cost more than extracting them.
    """

    def __init__(self) -> None:
        self.rows: dict[str, list[bytes]] = {name: [] for name in (*ROW_TABLES, "bin_blocks")}
        self.keys: list[Int64s] = []
        self.counts: list[Int64s] = []

    def add(self, path: Path, rows: dict[str, Any]) -> None:
        """Add one file's rows (:func:`extract_fio_json`); all of them or, on a FormatError, none."""
        bins = rows["latency_bins"]
        try:
            texts = [orjson.dumps(rows[name]) for name in ROW_TABLES] + [orjson.dumps(bins["blocks"])]
        except orjson.JSONEncodeError as exc:  # an integer beyond 64 bits
            raise FormatError(path, "whole file", f"numbers that fit in 64 bits ({exc})") from None
        for name, text in zip(self.rows, texts, strict=True):
            if len(text) > 2:  # not "[]"
                self.rows[name].append(text[1:-1])
        self.keys.extend(bins["keys"])
        self.counts.extend(bins["counts"])

    def packed(self) -> dict[str, bytes]:
        """Per table (and ``bin_blocks``) a JSON array of its rows; ``bin_keys``/``bin_counts`` every bin, in order."""
        out = {name: b"[" + b",".join(parts) + b"]" for name, parts in self.rows.items()}
        out["bin_keys"], out["bin_counts"] = b"".join(self.keys), b"".join(self.counts)
        return out
