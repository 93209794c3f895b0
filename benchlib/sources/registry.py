"""The registry of formats: one record per format with everything ingest needs to know about it.

A record says how a file of the format is recognised (by content, never by
name), how it is read, and how ingest should treat it: whether it holds results
at all, whether a large file can be streamed to Parquet, whether many small files
are read in batches by worker processes, whether its rows can be extracted by a
worker without polars, whether its files belong to a folder read as one unit,
and whether a log's latency unit comes from the study. Ingest asks these
records and names no format; a new format is one module and one :func:`register`
call (the order of registration is the preference when a file holds several
forms of the same run: ``--output-format=json+,normal,terse`` is read as JSON).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from benchlib.errors import FormatError
from benchlib.schema import Tables
from benchlib.sources import fio_json_batch
from benchlib.sources._common import SNIFF_BYTES, complete_lines, decode, may_be_member, ragged_rows
from benchlib.sources.esxtop import esxtop_run, looks_like_esxtop, read_esxtop, scan_esxtop, skipped_columns
from benchlib.sources.fio_common import fio_error_lines
from benchlib.sources.fio_json import frames_of, read_fio_json
from benchlib.sources.fio_json_rows import looks_like_fio_json, looks_like_fio_json_bytes
from benchlib.sources.fio_log import log_epoch_base, log_run, looks_like_fio_log, read_fio_log, scan_fio_log
from benchlib.sources.fio_normal import looks_like_fio_normal, read_fio_normal
from benchlib.sources.fio_terse import looks_like_fio_terse, read_fio_terse
from benchlib.sources.hcibench import looks_like_hcibench_summary, read_hcibench_summary
from benchlib.sources.published import looks_like_published, read_published
from benchlib.sources.vdbench import (
    looks_like_vdbench_console,
    looks_like_vdbench_flatfile,
    looks_like_vdbench_report,
    read_vdbench_console,
    read_vdbench_flatfile,
)
from benchlib.sources.vdbench_folder import (
    RESULT_KINDS,
    FolderResult,
    folder_key,
    member_kind,
    read_vdbench_folder,
    read_vdbench_output,
    read_vdbench_parmfile,
)
from benchlib.sources.vdbench_parm import looks_like_parmfile

Reader = Callable[[Path], Tables]


@dataclass(frozen=True)
class Streamed:
    """A large file read lazily: its one big ``table``, and how to make its ``runs`` row once that is written."""

    table: str
    frame: pl.LazyFrame
    runs: Callable[[pl.LazyFrame], pl.DataFrame]
    #: the refusal to raise where polars cannot read the file's rows (the row quoted), not polars' words
    refusal: Callable[[Exception], Exception] | None = None


@dataclass(frozen=True)
class RowBatches:
    """Files whose rows worker processes extract in batches, without polars (the format's worker module).

    ``extract(batch, spool)`` takes ``[(path, rel, sha256 or None)]`` and returns packed rows
    and one outcome per file (or the name of a spool file holding them, which ``collect`` reads);
    ``tables(packed)`` builds the frames in this process. ``looks_like_bytes`` tells the format
    from a file's first bytes without decoding them.
    """

    extract: Callable
    collect: Callable[[str], tuple[dict[str, bytes], list]]
    tables: Callable[[dict[str, bytes]], tuple[dict, pl.DataFrame | None]]
    looks_like_bytes: Callable[[bytes], bool]


@dataclass(frozen=True)
class FolderUnit:
    """Files of one folder read together as one unit (a vdbench output folder)."""

    #: whether a file whose first bytes are these may belong to such a folder
    may_be_member: Callable[[bytes], bool]
    #: a member file's role in the folder (None: not a member)
    kind: Callable[[Path], str | None]
    #: roles of which a folder needs one to be read as a unit
    result_kinds: tuple[str, ...]
    #: the identity of a folder's content from ``[(rel, sha256)]``
    key: Callable[[list[tuple[str, str]]], str]
    read: Callable[[list[tuple[Path, str]], str], FolderResult]
    #: the tool's name, for messages ("vdbench summary file, not needed ...")
    tool: str = ""


@dataclass(frozen=True)
class Format:
    """What ingest needs to know about one format."""

    name: str
    #: whether the first 64 KiB of a file (decoded) are this format's
    looks_like: Callable[[str], bool]
    #: one file -> the tidy tables (``latency_unit=`` too when ``latency_unit_from_study``)
    read: Callable[..., Tables]
    #: False for files of definitions (a vdbench parameter file): listed as skipped, with what they hold
    holds_results: bool = True
    #: a log whose latency unit the study declares, or the tool version beside it tells
    latency_unit_from_study: bool = False
    #: the study keeps only some objects of a capture (``[esxtop] objects``): ``objects=`` to read and stream
    objects_from_study: bool = False
    #: a large file read lazily (``(path, sha256, latency unit, objects) -> Streamed``, None when it cannot be)
    stream: Callable[[Path, str, str, tuple[str, ...]], Streamed | None] | None = None
    #: many small files read in batches, one Parquet part per batch, on every core
    small_files_in_batches: bool = False
    #: an empty file whose name matches is skipped with ``empty_reason`` (nothing was logged)
    empty_name: re.Pattern | None = None
    empty_reason: str = ""
    rows: RowBatches | None = None
    folder: FolderUnit | None = None
    #: what reading a file will leave out (a line cut off at the end, unreadable columns), said as notes
    notes: Callable[[Path], list[str]] | None = None
    #: whether a file's values depend on the latency unit (a latency log; not a bandwidth or IOPS log)
    holds_latency: Callable[[Path], bool] | None = None
    #: the run formats of its files whose ``start_time`` is their member's own, by its clock (a log stamped
    #: in Unix time): ingest keeps it over the run's recorded start
    own_span: tuple[str, ...] = ()


#: Format name -> record, in order of preference.
FORMATS: dict[str, Format] = {}


def register(record: Format, *, before: str | None = None) -> None:
    """Add a format (``before``: ahead of that one in preference); a name is registered once."""
    if record.name in FORMATS:
        raise ValueError(f"format {record.name!r} is registered already")
    if record.rows is not None and any(f.rows is not None for f in FORMATS.values()):
        raise ValueError("only one format's rows are extracted by worker processes")
    items = list(FORMATS.items())
    at = next((i for i, (name, _) in enumerate(items) if name == before), len(items))
    items.insert(at, (record.name, record))
    FORMATS.clear()
    FORMATS.update(items)


def unregister(name: str) -> None:
    """Remove a format (for tests that register one of their own)."""
    del FORMATS[name]


def _cut_line_note(path: Path) -> list[str]:
    """Say a line-oriented file not ending in a newline was cut off: its last line is left out."""
    return ["its last line was cut off (no newline at the end): left out"] if complete_lines(path) is not None else []


def _esxtop_notes(path: Path) -> list[str]:
    notes = _cut_line_note(path)
    try:
        skipped = skipped_columns(path)
    except FormatError:
        return notes  # the reader says what is wrong with the header
    if skipped:
        more = f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        notes.append(f"{len(skipped)} columns without an esxtop counter name left out: {'; '.join(skipped[:3])}{more}")
    return notes


def _stream_fio_log(path: Path, sha256: str, latency_unit: str, _objects: tuple[str, ...]) -> Streamed | None:
    if "_hist" in path.name:
        return None  # histogram logs are read whole
    return Streamed(
        "intervals",
        scan_fio_log(path, latency_unit=latency_unit, sha256=sha256),
        lambda written: log_run(
            path, sha256, "fio-log", written.select(pl.col("time_ns").max()).collect().item(), log_epoch_base(path)
        ),
        lambda exc: ragged_rows(path, "numeric fio log rows", exc),
    )


def _stream_esxtop(path: Path, sha256: str, _unit: str, objects: tuple[str, ...]) -> Streamed:
    return Streamed(
        "host_counters",
        scan_esxtop(path, sha256=sha256, objects=objects),
        lambda _written: esxtop_run(path, sha256),  # times from the first and last lines, not a second pass
        lambda exc: ragged_rows(path, "comma-separated esxtop sample rows", exc),
    )


for _record in (
    Format(
        "fio-json",
        looks_like_fio_json,
        read_fio_json,
        rows=RowBatches(
            fio_json_batch.extract_json_batch, fio_json_batch.read_spooled, frames_of, looks_like_fio_json_bytes
        ),
    ),
    Format("fio-normal", looks_like_fio_normal, read_fio_normal),
    Format("fio-terse", looks_like_fio_terse, read_fio_terse),
    Format(
        "fio-log",
        looks_like_fio_log,
        read_fio_log,
        latency_unit_from_study=True,
        stream=_stream_fio_log,
        notes=_cut_line_note,
        holds_latency=lambda path: bool(re.search(r"_[cs]?lat(_hist)?(\.\d+)?\.log$", path.name)),
        small_files_in_batches=True,
        empty_name=re.compile(r"_(bw|iops|lat|clat|slat|clat_hist|lat_hist)(\.\d+)?\.log$"),
        empty_reason="empty fio log (nothing logged: slat with a synchronous engine, "
        "or a run shorter than log_avg_msec)",
        own_span=("fio-log", "fio-hist-log"),
    ),
    Format(
        "esxtop", looks_like_esxtop, read_esxtop, objects_from_study=True, stream=_stream_esxtop, notes=_esxtop_notes
    ),
    Format("vdbench-flatfile", looks_like_vdbench_flatfile, read_vdbench_flatfile),
    Format(
        "vdbench-output",
        looks_like_vdbench_report,
        read_vdbench_output,
        folder=FolderUnit(may_be_member, member_kind, RESULT_KINDS, folder_key, read_vdbench_folder, "vdbench"),
    ),
    Format("vdbench-console", looks_like_vdbench_console, read_vdbench_console),
    Format("vdbench-parmfile", looks_like_parmfile, read_vdbench_parmfile, holds_results=False),
    Format("hcibench-summary", looks_like_hcibench_summary, read_hcibench_summary),
    Format("published-table", looks_like_published, read_published),
):
    register(_record)


def readers() -> dict[str, Callable[..., Tables]]:
    """Return ``format name -> reader`` of every registered format."""
    return {name: record.read for name, record in FORMATS.items()}


def rows_format() -> Format | None:
    """Return the format whose rows worker processes extract (fio JSON), if any."""
    return next((f for f in FORMATS.values() if f.rows is not None), None)


def folder_formats() -> list[Format]:
    """Return the formats whose files are read folder by folder."""
    return [f for f in FORMATS.values() if f.folder is not None]


def may_be_folder_member(head: bytes) -> bool:
    """Tell whether a file whose first bytes are ``head`` may belong to a folder read as one unit."""
    return any(f.folder.may_be_member(head) for f in folder_formats())  # type: ignore[union-attr]


def empty_file_reason(name: str) -> str | None:
    """Say why an empty file named ``name`` holds nothing (None when no format expects empty files)."""
    return next((f.empty_reason for f in FORMATS.values() if f.empty_name and f.empty_name.search(name)), None)


def read_file(path: Path, name: str, latency_unit: str = "ns", objects: tuple[str, ...] = ()) -> Tables:
    """Read one file of format ``name`` in memory (a log with the latency unit of its study, a capture's objects)."""
    record = FORMATS[name]
    if record.latency_unit_from_study:
        return record.read(path, latency_unit=latency_unit)
    return record.read(path, objects=objects) if record.objects_from_study else record.read(path)


def _head(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            data = handle.read(SNIFF_BYTES)
    except OSError as exc:
        raise FormatError(path, "file", f"a readable file ({exc.strerror})") from None
    return _decoded_head(path, data, partial=len(data) == SNIFF_BYTES)


def _decoded_head(path: Path, data: bytes, partial: bool) -> str:
    if not data.strip():
        raise FormatError(path, "byte 0", "output of a benchmark tool, but the file is empty")
    return decode(path, data, partial=partial)


def detect_head(path: str | Path, head: bytes, partial: bool) -> str:
    """Return the format of a file whose first ``SNIFF_BYTES`` are ``head``, read already.

    ``partial``: the file goes on.
    """
    first = next(iter(FORMATS.values()), None)
    if first is not None and first.rows is not None and first.rows.looks_like_bytes(head):
        return first.name  # the first format detection tries, and what it would find (no need to decode)
    return detect_text(path, _decoded_head(Path(path), head, partial))


def detect_all(path: str | Path) -> list[str]:
    """Return every format whose signature appears in the first 64 KiB of ``path``, richest first."""
    head = _head(Path(path))
    return [name for name, record in FORMATS.items() if record.looks_like(head)]


def detect(path: str | Path) -> str:
    """Return the format to read ``path`` with, from its content.

    Raises
    ------
    FormatError
        When no known format's signature is found.

    """
    return detect_text(path, _head(Path(path)))


def detect_text(path: str | Path, head: str) -> str:
    """Return the format of a file whose first 64 KiB (decoded) are ``head`` (see :func:`detect`)."""
    if not head or head.isspace():
        raise FormatError(path, "byte 0", "output of a benchmark tool, but the file is empty")
    found = next((name for name, record in FORMATS.items() if record.looks_like(head)), None)
    said = fio_error_lines(head) if found is None else []
    if said:  # fio's error output saved as its results ("fio ... --output-format=json > x.json 2>&1")
        raise FormatError(
            path,
            "first 64 KiB",
            f"fio results, but this is fio's error output: {' | '.join(said)}; the run failed, fix it and re-run it",
        )
    if found is None:
        raise FormatError(
            path,
            "first 64 KiB",
            "output of a supported tool (fio JSON/json+, normal, terse, a fio log, esxtop batch CSV, a vdbench output "
            f"folder's files or vdbench console text, HCIBench's -res.txt), found {_opening(head)}; "
            f"supported formats: {', '.join(FORMATS)}. {_next_step(head)}",
        )
    return found


#: a line a script or a person wrote of a measurement: a number with a rate's or a latency's unit
_SUMMARY_LINE = re.compile(r"\d\s*(IOPS|[KMGT]i?B/s|[KMGT]B/sec|ms|us|µs|usec|msec)\b", re.IGNORECASE)


def _next_step(head: str) -> str:
    """Say what to do with a file that is no format's, from what its first lines look like."""
    lines = [line.strip() for line in head.splitlines() if line.strip()][:20]
    if lines and re.match(r"^\d+;fio-", lines[0]):  # fio's terse output of a version benchlib does not read
        return (
            f"It is fio's terse output of version {lines[0].split(';', 1)[0]}: benchlib reads versions 3, 4 and 5; "
            "re-run fio with --terse-version=3 (or --output-format=json+)"
        )
    if any(line.startswith(("Datastore", "Run Def:", "JOB_NAME")) for line in lines) and not any(
        line.upper().startswith("IOPS") for line in lines
    ):  # an HCIBench summary whose runs hold no IOPS line
        return (
            "It reads like HCIBench's -res.txt with no run's figures (no 'IOPS = ... IO/S' line), as a test that did "
            "not finish leaves it: re-run the test, or move the file outside the study folder"
        )
    if any(_SUMMARY_LINE.search(line) for line in lines):
        return (
            "It reads like a summary a script wrote of a tool's output, which is not the output: keep the tool's "
            "own file"
        )
    if lines and lines[0].count(",") >= 1 and not lines[0].startswith("#"):
        return (
            "A write-up's table is read when it starts with '# benchlib published table' and a '# citation: ...' "
            "line (README, published tables); any other file goes outside the study folder"
        )
    return "Move a file that is no tool's output outside the study folder"


def _opening(head: str, most: int = 2) -> str:
    """Quote the first lines of a file that is no format's, shortened and with control characters shown."""
    lines = [line.strip() for line in head.splitlines() if line.strip()][:most]
    quoted = [repr(line[:80] + ("..." if len(line) > 80 else "")) for line in lines]
    return " then ".join(quoted) if quoted else "only blank lines"


def read(path: str | Path, format: str | None = None) -> Tables:
    """Read ``path`` with the reader of ``format`` (detected from content when not given)."""
    path = Path(path)
    name = format or detect(path)
    if name not in FORMATS:
        raise FormatError(path, "format", f"one of {', '.join(FORMATS)}, not {name!r}")
    return FORMATS[name].read(path)


def own_span_formats() -> set[str]:
    """Return the run formats whose ``start_time`` is their member's own (:attr:`Format.own_span`)."""
    return {name for record in FORMATS.values() for name in record.own_span}


__all__ = [
    "FORMATS",
    "Format",
    "FolderUnit",
    "RowBatches",
    "Streamed",
    "detect",
    "detect_all",
    "detect_head",
    "detect_text",
    "own_span_formats",
    "read",
    "register",
    "unregister",
]
