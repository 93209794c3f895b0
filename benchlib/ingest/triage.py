"""Triage: list a study's raw files and sort each one out before anything is read.

Every file takes the same path, on a first ingest as on a repeated one; only
who hashes it differs. A file is skipped (an empty log, or the same bytes as a
file met earlier), kept as it is (unchanged since the last ingest), set aside as
a copy (equal bytes that ``benchlib run`` recorded as another run's output), or
read: then its format is detected from its first bytes and it goes to the
worker batches (the registry's row-extracted format), is held for its folder
(a file that may belong to a folder read as one unit), goes to its own reader,
or, with no format, to quarantine.

On a repeated ingest this process hashes every file here (:func:`list_and_sort`).
On a first ingest there is nothing to compare with: files go unhashed to the
batches, whose workers hash them while they extract them, and
:func:`benchlib.ingest.reading.finish_row_batch` sorts them out with
:func:`sort_out` and :func:`classify`, in the same order.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Callable
from pathlib import Path

from benchlib.errors import FormatError
from benchlib.ingest.batches import PARALLEL_FROM, Batches, warm_pool, worker_count
from benchlib.ingest.provenance import digest as provenance_digest
from benchlib.ingest.provenance import recorded_by_run
from benchlib.ingest.state import IngestState, Item
from benchlib.sources._common import SNIFF_BYTES
from benchlib.sources.registry import FORMATS, detect_head, empty_file_reason, may_be_folder_member
from benchlib.store import NOT_OUTPUT, file_sha256, file_state, is_ingest_input
from benchlib.study import STUDY_FILE, study_files

_CHUNK = 1 << 20


def raw_files(state: IngestState, on_many: Callable[[], None] = lambda: None) -> list[tuple[Path, str]]:
    """List the raw output files of a study, sorted by path.

    Returns ``(path, path relative to the study)``; files that cannot be read
    (links out of the study, FIFOs, devices: :func:`benchlib.study.study_files`)
    go to the report's skipped files. The size and time of every file ingest
    reads go to ``state.raw_files`` (see :func:`benchlib.store.raw_state`). ``on_many`` runs once, as soon as more than
    ``PARALLEL_FROM`` files are found.
    """
    found = []
    for path, rel, left_out in study_files(state.study.folder):
        if is_ingest_input(path, rel):  # taken before any file is read: one that changes later shows as changed
            state.raw_files[rel] = file_state(path, left_out)
        if rel == STUDY_FILE or NOT_OUTPUT.search(rel):
            if rel in state.raw_files and not left_out:  # a record that sets levels: small, hashed here
                state.hashes[rel] = file_sha256(path)
            else:
                state.report.skipped.append((rel, left_out or not_output_reason(path, rel)))
            continue
        if left_out:
            state.report.skipped.append((rel, left_out))
            continue
        found.append((path, rel))
        if len(found) == PARALLEL_FROM + 1:
            on_many()
    return sorted(found, key=lambda item: item[1])


#: Why a file that is not tool output is not read, by what its name says it is.
_NOT_OUTPUT_KINDS = (
    (r"\.(md|markdown)$|(^|/)(README|LICENSE)[^/]*$", "notes or documentation"),
    (r"\.(fio|job|conf|cfg|ini)$", "a job or configuration file"),
    (r"\.(sh|py|ipynb)$", "a script or notebook"),
    (r"(^|/)claims\.toml$", "the write-up's claims, which `benchlib verify` reads"),
    (r"\.(toml|yml|yaml)$", "a configuration file"),
    (r"\.stderr\.txt$", "a run's standard error (benchlib run keeps it; a failed run's reason is in its manifest)"),
    (r"\.banner\.txt$", "fio's job lines, printed before its JSON (benchlib run keeps them beside it)"),
    (r"(^|/)benchlib-[^/]*\.json$", "benchlib's own record"),
    (
        r"(^|/)swat_mon[^/]*$",
        "vdbench's monitor data for its SWAT workload analyser, written into every output folder (the runs "
        "are in the folder's summary, totals and flatfile)",
    ),
)


def not_output_reason(path: Path, rel: str) -> str:
    """Say why a file that is not tool output (by its name) is not read; a note that quotes output says so.

    Notes are never read as runs: a README quoting another study's result must not become one of this
    study's runs. One that holds pasted output is named with the format found and what to do.
    """
    kind = next((why for pattern, why in _NOT_OUTPUT_KINDS if re.search(pattern, rel, re.IGNORECASE)), "not output")
    if kind == "notes or documentation":
        with contextlib.suppress(OSError, FormatError):
            head, partial = _head(path)
            found = detect_head(path, head, partial)
            return (
                f"notes or documentation, not read, though it holds what reads as {found} output (`benchlib "
                "inspect` shows it): notes are never read as runs, so a note quoting another run cannot become one; "
                "to ingest that output, save it as a file of its own (e.g. run1.txt)"
            )
    return f"{kind}; not read"


def fingerprint(path: Path) -> tuple[str, bytes, int]:
    """Return a file's SHA-256, its first ``SNIFF_BYTES`` (to detect its format) and its size, in one pass."""
    with open(path, "rb", buffering=0) as handle:
        data = handle.read(_CHUNK)  # a small file in one read (and one more that finds the end)
        head, digest, size = data[:SNIFF_BYTES], hashlib.sha256(data), len(data)
        while data := handle.read(_CHUNK):
            digest.update(data)
            size += len(data)
    return digest.hexdigest(), head, size


def copy_key(sha: str, rel: str) -> str:
    """Return the identity of a file whose bytes equal another run's file: its hash salted with its path."""
    return hashlib.sha256(f"{sha}\n{rel}".encode()).hexdigest()


def sort_out(state: IngestState, path: Path, rel: str, sha: str, empty: bool) -> bool:
    """Tell whether to read a file; if not, it was skipped, kept unchanged, or set aside as a copy."""
    report = state.report
    state.hashes[rel] = sha
    reason = empty_file_reason(path.name) if empty else None
    if reason:
        report.skipped.append((rel, reason))
        return False
    same = state.seen.setdefault(sha, [])
    copy = bool(same) and recorded_by_run(state.study, rel)
    same.append(rel)
    previous = state.previous.get(rel, {})
    unchanged = previous.get("sha256") == sha and ("key" in previous) == copy
    if same[0] != rel and not copy:
        report.skipped.append((rel, f"same content as {same[0]}"))
    elif unchanged and previous.get("provenance") == provenance_digest(state.study, rel):
        state.current[rel] = previous
        report.unchanged.append(rel)
    elif copy:
        state.copies.append((path, rel, sha))
    else:
        state.todo.append((path, rel, sha))
        return True
    return False


def _head(path: Path) -> tuple[bytes, bool]:
    """Return a file's first ``SNIFF_BYTES`` and whether it goes on after them."""
    with open(path, "rb") as handle:
        head = handle.read(SNIFF_BYTES + 1)
    return head[:SNIFF_BYTES], len(head) > SNIFF_BYTES


def classify(
    state: IngestState, item: Item, rows: Callable[[Item], None], head: bytes | None = None, partial: bool = False
) -> None:
    """Detect a file's format from its first bytes and send it on.

    Files of the row-extracted format go to ``rows``, files that may belong to a
    folder read as a unit are held, others go to their own reader, and a file
    with no known format is quarantined with why.
    """
    path, rel, _ = item
    try:
        if head is None:
            head, partial = _head(path)
        found: str | FormatError = detect_head(path, head, partial)
    except OSError as exc:
        state.report.quarantine(rel, f"file: a readable file ({exc.strerror})")
        return
    except FormatError as exc:
        found = exc
    if may_be_folder_member(head[:16]):
        state.held.append(item)
        state.held_formats[rel] = found
    else:
        route(state, item, found, rows)


def route(state: IngestState, item: Item, found: str | FormatError, rows: Callable[[Item], None]) -> None:
    """Send a file whose format is ``found`` on: to ``rows``, to its own reader, or (no format) to quarantine."""
    notes = FORMATS[found].notes if isinstance(found, str) else None
    if notes is not None:
        with contextlib.suppress(OSError):  # an unreadable file is quarantined by its reader
            state.report.notes.extend((item[1], note) for note in notes(item[0]))
    if isinstance(found, FormatError):
        state.report.quarantine(item[1], found)
    elif FORMATS[found].rows is not None:
        rows(item)
    else:
        path, rel, sha = item
        state.others.append((path, rel, sha, found))  # type: ignore[arg-type]


def list_and_sort(state: IngestState, batches: Batches) -> None:
    """List every raw file; sort out those this process hashes; queue the rest for the worker batches.

    On a first ingest (``state.previous`` empty) files are only listed here and go
    to ``batches`` unhashed; otherwise every file is hashed here and sorted out
    (see the module documentation).
    """

    def many() -> None:
        batches.workers = worker_count()
        if batches.workers:
            warm_pool()  # its imports overlap with listing and hashing the files

    for path, rel in raw_files(state, many):
        if not state.previous:
            batches.add((path, rel, None))
            continue
        try:
            sha, head, size = fingerprint(path)
        except OSError as exc:
            state.report.quarantine(rel, f"file: a readable file ({exc.strerror})")
            continue
        if sort_out(state, path, rel, sha, size == 0):
            classify(state, (path, rel, sha), batches.add, head, size > len(head))
