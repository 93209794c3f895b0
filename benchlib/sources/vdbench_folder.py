"""A vdbench output folder (``vdbench -o <folder>``) read as one unit.

Which file is which comes from its content (:func:`vdbench.vdbench_kind`),
never its name. The folder's runs come from ``summary.html`` (every run with
its ``Starting RD=`` line: run definition, for-loop values, I/O rate,
elapsed), with the rows of ``flatfile.html`` when it holds the same runs
(more digits, per-direction max and stddev, transfer size, threads, read and
seek percentages, a date-time stamp); ``totals.html`` (only the ``avg_``
lines) or the flatfile alone stand in when there is no summary.
``logfile.html`` gives the version, ``parmfile.html`` the definitions
(seek %, elapsed, warm-up, hosts), ``summary.html``'s banner the UTC offset
of its times. With two or more hosts (``hd=``), each host report
(``n1.html``...) becomes per-host runs and the folder totals are kept as
``is_aggregate`` runs, as for fio's client/server "All clients".
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from benchlib.errors import FormatError
from benchlib.schema import Tables
from benchlib.sources._common import may_be_member, read_source, sha256_of
from benchlib.sources.vdbench import (
    _TAG,
    _VERSION,
    Block,
    Context,
    blocks_to_rows,
    histogram_rows,
    parse_flatfile,
    parse_histogram,
    parse_report_text,
    tables_from_rows,
    vdbench_kind,
)
from benchlib.sources.vdbench_parm import ParmFile, expand_run, parse_parmfile

_CREATED = re.compile(
    r"created (\d\d:\d\d:\d\d) (\w{3} \d\d \d{4}) \S+(?: \((\d\d:\d\d:\d\d) (\w{3} \d\d \d{4}) UTC\))?"
)
_HOST = re.compile(r"Host summary report\(s\) for host=(\S+)")
#: What the folder's context files are used for (the run files say so where they are read).
_CONTEXT_ROLES = {"logfile": "version", "parmfile": "definitions"}


@dataclass
class FolderResult:
    """The tables of a folder, and per file its kind, what it gave or why it could not be read."""

    tables: Tables | None = None
    kinds: dict[Path, str] = field(default_factory=dict)
    used: dict[Path, str] = field(default_factory=dict)
    problems: dict[Path, str] = field(default_factory=dict)


def folder_key(members: list[tuple[str, str]]) -> str:
    """Return the identity of a folder's content: SHA-256 over its files' (relative path, SHA-256)."""
    digest = hashlib.sha256()
    for rel, sha in sorted(members):
        digest.update(f"{rel}\n{sha}\n".encode())
    return digest.hexdigest()


def _context(texts: dict[str, tuple[Path, str]], problems: dict[Path, str]) -> Context:
    context = Context()
    if "logfile" in texts:
        found = _VERSION.search(texts["logfile"][1])
        context.version = found.group(1) if found else None
        context.host_threads = host_threads(texts["logfile"][1])
    if "parmfile" in texts:
        path, text = texts["parmfile"]
        try:
            context.parm = parse_parmfile(path, text)
        except FormatError as exc:
            problems[path] = f"{exc.where}: {exc.expected}"
    if "summary" in texts:
        created = _CREATED.search(texts["summary"][1])
        if created:
            local = datetime.strptime(f"{created.group(2)} {created.group(1)}", "%b %d %Y %H:%M:%S")
            context.date = created.group(2)
            if created.group(3):
                utc = datetime.strptime(f"{created.group(4)} {created.group(3)}", "%b %d %Y %H:%M:%S")
                context.utc_offset = timedelta(minutes=round((local - utc).total_seconds() / 60))
    return context


#: a logfile line of one slave starting a workload: ``16:23:25.609 slv=n1-0 fwd=fwd1 ... threads=16``
_SLAVE_THREADS = re.compile(r"^(\S+)\s+slv=(\S+)-\d+\s.*?\bthreads=(\d+)", re.MULTILINE)


def host_threads(logfile: str) -> list[dict[str, int]]:
    """Return, per run start in the logfile (its slaves' lines share one time), each host's threads.

    vdbench divides a workload's ``threads=`` over the slaves of every host (``threads=128`` on 8 hosts:
    ``threads=16`` per slave); a host's queue depth is the sum over its own slaves.
    """
    starts: dict[str, dict[str, int]] = {}
    for time, host, threads in _SLAVE_THREADS.findall(_TAG.sub("", logfile)):
        per_host = starts.setdefault(time, {})
        per_host[host] = per_host.get(host, 0) + int(threads)
    return list(starts.values())


def _merge_flatfile(blocks: list[Block], flat: list[Block]) -> list[Block]:
    """Return the report's blocks with the flatfile's rows, when both list the same runs in the same order."""
    if [b.name for b in blocks] != [b.name for b in flat]:
        return blocks
    merged = []
    for block, rows in zip(blocks, flat, strict=True):
        if [r["interval"] for r in block.rows if r["interval"].isdigit() or r["interval"].startswith("avg_")] != [
            r["interval"] for r in rows.rows
        ]:
            return blocks
        merged.append(Block(block.name, block.for_loops, block.settings, block.tod, rows.rows))
    return merged


def read_vdbench_folder(files: list[tuple[Path, str]], key: str) -> FolderResult:
    """Read the files of one vdbench output folder (``(path, sha256)`` each) into one set of tables.

    ``key`` (see :func:`folder_key`) prefixes every run id. A file that cannot
    be read is reported in ``problems`` and the others are still used.

    Raises
    ------
    FormatError
        When no file of the folder holds any run.

    """
    by_kind: dict[str, list[tuple[Path, str, str]]] = {}
    result = FolderResult()
    for path, sha in files:
        try:
            source = read_source(path)
        except FormatError as exc:
            result.problems[path] = f"{exc.where}: {exc.expected}"
            continue
        kind = vdbench_kind(source.text[:65536]) or "other"
        result.kinds[path] = kind
        by_kind.setdefault(kind, []).append((path, sha, source.text))
    texts = {kind: (found[0][0], found[0][2]) for kind, found in by_kind.items() if len(found) == 1}
    context = _context(texts, result.problems)
    rows: dict[str, list] = {"runs": [], "results": [], "intervals": [], "latency_bins": []}
    hosts = sorted(by_kind.get("host", []), key=lambda item: item[0].name)
    multi = len(hosts) >= 2
    total = _total_blocks(by_kind, result)
    if total is not None:
        path, sha, blocks = total
        part = blocks_to_rows(
            blocks,
            key=key,
            first_index=0,
            sha256=sha,
            source=str(path),
            fmt="vdbench-output",
            context=context,
            is_aggregate=multi,
        )
        _extend(rows, part)
        _add_histogram(
            rows, by_kind, result, [r["run_id"] for r in part["runs"]], None, "Total response time histogram"
        )
    for path, sha, text in hosts if multi else []:
        _add_host(rows, path, sha, text, key, context, by_kind, result, total[2] if total else [])
    for path, kind in result.kinds.items():
        if path not in result.used and path not in result.problems:
            result.used[path] = _CONTEXT_ROLES.get(kind, "not needed")
    first = files[0][0] if files else Path(".")
    if not rows["runs"]:
        raise FormatError(
            first.parent,
            "folder",
            "a vdbench output folder with summary.html, totals.html or flatfile.html holding at least one run",
            found="; ".join(f"{p.name}: {r}" for p, r in result.problems.items())
            or f"no such file among {', '.join(sorted(p.name for p, _ in files)[:6]) or 'none'}",
        )
    result.tables = tables_from_rows(first.parent, rows)
    return result


def _add_host(
    rows: dict[str, list],
    path: Path,
    sha: str,
    text: str,
    key: str,
    context: Context,
    by_kind: dict,
    result: FolderResult,
    totals: list[Block],
) -> None:
    """Return the runs of one host report (``n1.html``) and its histogram.

    Runs are labelled with the host's address and slave count.
    """
    name = _HOST.search(_TAG.sub("", text[:2000]))
    try:
        blocks = parse_report_text(path, text)
    except FormatError as exc:
        result.problems[path] = f"{exc.where}: {exc.expected}"
        return
    host = name.group(1) if name else path.stem
    _inherit_workload(blocks, totals)
    # a host's run definitions are the same runs as the folder's totals (vdbench ran them on every host
    # at once): they share the run's number, so the run's total adds its hosts (schema.run_unit_expr)
    same_runs = [b.name for b in blocks] == [b.name for b in totals]
    part = blocks_to_rows(
        blocks,
        key=key,
        first_index=0 if same_runs else len(rows["runs"]),
        sha256=sha,
        source=str(path),
        fmt="vdbench-output",
        context=context,
        host=host,
    )
    # the host's own threads, not the run's total: from the logfile's start of each run, in order
    starts = context.host_threads
    known = [start.get(host) for start in starts] if len(starts) == len(part["runs"]) else []
    if not known and starts and len({start.get(host) for start in starts}) == 1:
        known = [starts[0].get(host)] * len(part["runs"])
    depth = {run["run_id"]: threads for run, threads in zip(part["runs"], known, strict=False)}
    for row in part["results"]:
        if row["run_id"] in depth or starts:  # a logfile that does not name this run's threads: unknown
            row["iodepth"] = depth.get(row["run_id"])
    system = context.parm.hosts().get(host) if context.parm else None
    slaves = sum(1 for _, _, t in by_kind.get("slave", []) if re.search(rf"for slave={re.escape(host)}-\d+", t[:400]))
    for run in part["runs"]:  # where the host is, and how many slave JVMs vdbench ran on it
        run["labels"] = [
            *run["labels"],
            *([{"name": "system", "value": system}] if system else []),
            *([{"name": "slaves", "value": str(slaves)}] if slaves else []),
        ]
    _extend(rows, part)
    _add_histogram(rows, by_kind, result, [r["run_id"] for r in part["runs"]], host, f"{host}.histogram.html")
    result.used[path] = f"per-host runs of {host}"


_WORKLOAD_KEYS = ("xfersize", "threads", "rdpct", "seekpct")


def _inherit_workload(blocks: list[Block], totals: list[Block]) -> None:
    """Per-host runs take the workload columns (from the flatfile) of the folder's run they are part of."""
    if [b.name for b in blocks] != [b.name for b in totals]:
        return
    for block, total in zip(blocks, totals, strict=True):
        average = next((r for r in reversed(total.rows) if r["interval"].startswith("avg_")), {})
        for row in block.rows:
            for key in _WORKLOAD_KEYS:
                if row.get(key) is None and average.get(key) is not None:
                    row[key] = average[key]
        block.for_loops = block.for_loops or total.for_loops


def _extend(rows: dict[str, list], part: dict[str, list]) -> None:
    for name in part:
        rows[name].extend(part[name])


def _add_histogram(
    rows: dict[str, list], by_kind: dict, result: FolderResult, run_ids: list[str], host: str | None, marker: str
) -> None:
    """Return the response-time histogram of the folder or of one host.

    Return the response-time histogram of the folder (``Total response time histogram.``) or of one host
    (vdbench50401 writes ``<host>.histogram.html``, headed ``Host response time histogram.``), runs matched by order.
    """
    for path, _, text in by_kind.get("histogram", []):
        head = text[:600]
        mine = (
            (marker in head)
            if host is None
            else (
                f"{host}.histogram.html" in head
                or (path.name == f"{host}.histogram.html" and "Host response time" in head)
            )
        )
        if not mine:
            continue
        try:
            histograms = parse_histogram(path, text)
        except FormatError as exc:
            result.problems[path] = f"{exc.where}: {exc.expected}"
            return
        if len(histograms) == len(run_ids):
            rows["latency_bins"].extend(histogram_rows(run_ids, histograms, host))
            result.used[path] = "latency histogram"
        return


def _total_blocks(
    by_kind: dict[str, list[tuple[Path, str, str]]], result: FolderResult
) -> tuple[Path, str, list[Block]] | None:
    """Return the folder's total runs.

    From summary.html (rows from the flatfile when it agrees), else totals.html, else the flatfile.
    """
    flat: tuple[Path, str, list[Block]] | None = None
    for path, sha, text in by_kind.get("flatfile", [])[:1]:
        try:
            flat = (path, sha, parse_flatfile(path, text))
        except FormatError as exc:
            result.problems[path] = f"{exc.where}: {exc.expected}"
    for kind in ("summary", "totals"):
        for path, sha, text in by_kind.get(kind, [])[:1]:
            try:
                blocks = [b for b in parse_report_text(path, text) if b.rows]
            except FormatError as exc:
                result.problems[path] = f"{exc.where}: {exc.expected}"
                continue
            if not blocks:
                result.problems[path] = "no run in the file: a 'Starting RD=' line followed by interval lines"
                continue
            result.used[path] = "runs"
            if flat is not None:
                merged = _merge_flatfile(blocks, flat[2])
                if merged is not blocks:
                    result.used[flat[0]] = "rows of the runs"
                blocks = merged
            return path, sha, blocks
    if flat is not None:
        result.used[flat[0]] = "runs"
        return flat
    return None


def member_kind(path: Path) -> str | None:
    """Return the vdbench kind of a file of an HTML output folder (None for anything else); reads at most 4 KiB."""
    with open(path, "rb") as handle:
        if not may_be_member(handle.read(16)):
            return None
        handle.seek(0)
        head = handle.read(4096)
    kind = vdbench_kind(head.decode("utf-8", "replace"))
    return None if kind == "console" else kind


#: Kinds that make a folder an output folder read as one unit.
RESULT_KINDS = ("summary", "totals", "flatfile")


def output_files(folder: Path) -> list[Path]:
    """Return the files of ``folder`` that are vdbench output (by content), sorted."""
    return [p for p in sorted(folder.iterdir()) if p.is_file() and member_kind(p)]


def read_vdbench_output(path: str | Path) -> Tables:
    """Read the vdbench output folder that holds ``path`` (any of its files) as one unit.

    Raises
    ------
    FormatError
        When the folder holds no run, or a file of it cannot be read.

    """
    path = Path(path)
    members = [(p, sha256_of(p)) for p in output_files(path.parent)]
    result = read_vdbench_folder(members, folder_key([(p.name, sha) for p, sha in members]))
    if result.problems:
        bad, reason = next(iter(result.problems.items()))
        raise FormatError(bad, reason.split(":", 1)[0], reason.split(":", 1)[-1].strip())
    return result.tables


def read_vdbench_parmfile(path: str | Path) -> Tables:
    """Refuse a bare vdbench parameter file: it holds definitions, not results (a FormatError saying what it holds)."""
    source = read_source(path)
    parm = parse_parmfile(source.path, source.text)
    raise FormatError(
        source.path,
        "file",
        f"results, but this is a vdbench parameter file ({describe_parmfile(parm)}); "
        "its results are in the output folder vdbench wrote (-o)",
    )


def describe_parmfile(parm: ParmFile) -> str:
    """One line: how many hosts, storage, workload and run definitions, and the runs they make."""
    runs = sum(len(expand_run(rd)) for rd in parm.definitions["rd"])
    counts = ", ".join(f"{len(v)} {k}" for k, v in parm.definitions.items() if v)
    names = ", ".join(rd["rd"] for rd in parm.definitions["rd"][:5])
    return f"{counts}; run definitions {names}{'...' if len(parm.definitions['rd']) > 5 else ''} make {runs} runs"
