"""Reading: every file triage sent on, read by its format's record and written as Parquet parts.

The registry (:mod:`benchlib.sources.registry`) says how: the row-extracted
format (fio JSON) in batches whose rows worker processes extract; files that
belong to a folder read as one unit (vdbench output), folder by folder; small
files of a batched format (fio logs) in batches, one part each, on every core;
large files of a streamed format (fio logs, esxtop) lazily, straight to Parquet;
everything else in memory, one part per file. A file its reader refuses is
quarantined; every other file is still read.
"""

from __future__ import annotations

import functools
import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path

import polars as pl

from benchlib.errors import FormatError, ImpossibleValue, file_failure
from benchlib.ingest.batches import BATCH, Batches, worker_count
from benchlib.ingest.parts import drop_source, forget_stale, write_parquet, write_part
from benchlib.ingest.state import IngestReport, IngestState, Item
from benchlib.ingest.triage import classify, copy_key, list_and_sort, route, sort_out
from benchlib.schema import TABLES, Tables, check_rules
from benchlib.sources.registry import FORMATS, Format, detect, folder_formats, read_file, rows_format
from benchlib.study import Study

#: Files larger than this are streamed to Parquet (when their format can be) instead of read into memory.
STREAM_BYTES = 32 * 1024 * 1024


class LogUnits:
    """The latency unit of logs per folder.

    ``us`` beside fio 2.x output, ``ns`` otherwise, unless study.toml says. "Beside" is the nearest
    folder up from the log that holds output: client/server runs keep each host's logs in a folder
    of its own below the run's output.
    """

    def __init__(self, state: IngestState) -> None:
        self.fixed, self.current = state.study.log_latency_unit, state.current
        self.by_folder: dict[str, list[str]] | None = None  # made when first asked: most studies have no logs

    def __call__(self, rel: str) -> str:
        """Return the latency unit of the log at ``rel``."""
        if self.fixed:
            return self.fixed
        if self.by_folder is None:
            self.by_folder = {}
            for done, entry in self.current.items():
                if entry.get("tool_version"):
                    self.by_folder.setdefault(str(Path(done).parent), []).append(entry["tool_version"])
        near = self._near(rel)
        return "us" if near and all(v.startswith("fio-2.") for v in near) else "ns"

    def _near(self, rel: str) -> list[str]:
        """Return the tool versions of the output nearest the log (its folder, else the closest one up)."""
        for folder in Path(rel).parents:
            if found := (self.by_folder or {}).get(str(folder)):
                return found
        return []

    def assumed(self, rel: str) -> bool:
        """Tell whether the unit of the log at ``rel`` was assumed: study.toml says none and no output near it."""
        self(rel)
        return not self.fixed and not self._near(rel)


def _unit(name: str, unit: str) -> dict:
    """Return the latency unit a log was read with, for its manifest entry (it may change later)."""
    return {"latency_unit": unit} if FORMATS[name].latency_unit_from_study else {}


def _tool_version(tables: Tables) -> str | None:
    """Return the tool version a file's runs report (the first, when several)."""
    versions = tables.runs["tool_version"].drop_nulls().unique(maintain_order=True).to_list()
    return versions[0] if versions else None


def _one(state: IngestState, rel: str, work: Callable[[], dict]) -> None:
    """Run one file's ingest; any failure that is the file's (:func:`file_failure`) quarantines that file only."""
    try:
        state.current[rel] = work()
        state.report.ingested.append(rel)
    except Exception as exc:
        reason = file_failure(exc)
        if reason is None:
            raise
        state.report.quarantine(rel, reason)


# ------------------------------------------------------------------ rows extracted by workers


def finish_row_batch(state: IngestState, record: Format, batch: list[Item], result: object) -> None:
    """Sort out the files a worker hashed, quarantine the broken ones and write the others' rows as one part.

    A file a worker extracted may turn out to repeat an earlier batch's file
    (the first one found is read, as when this process hashes): the batch's
    other files are then extracted again here, without it.
    """
    rows = record.rows
    assert rows is not None  # noqa: S101 -- only the row-extracted format comes here
    packed, outcomes = rows.collect(result) if isinstance(result, str) else result
    members = []
    for (path, rel, known), (sha, kind, error, version) in zip(batch, outcomes, strict=True):
        if known is None and sha and not sort_out(state, path, rel, sha, kind == "empty"):
            continue
        if kind == "json":
            members.append((path, rel, sha, version))
        elif kind == "error":
            state.report.quarantine(rel, error)
        else:  # another format, empty, or perhaps a folder's file: detection says which, or why none
            classify(state, (path, rel, sha), state.late_rows.append)
    if not members:
        return
    if len(members) < sum(kind == "json" for _, kind, _, _ in outcomes):
        packed, _ = rows.extract([(path, rel, sha) for path, rel, sha, _ in members])
    _write_rows(state, record, members, packed)


def _write_rows(state: IngestState, record: Format, members: list, packed: object) -> None:
    """Write the rows of ``members`` as one part; when a file's values fail the schema, find it.

    The batch is then written file by file, so the file with (say) a negative count is quarantined
    with the reason and every other file of the batch is kept.
    """
    rows = record.rows
    assert rows is not None  # noqa: S101 -- only the row-extracted format comes here
    part = "b" + hashlib.sha256((state.salt + "".join(sha for _, _, sha, _ in members)).encode()).hexdigest()[:16]
    try:
        frames, bins = rows.tables(packed)
        tables = Tables.from_rows(frames)
        write_part(state.study, state.processed, part, tables, [(r, s) for _, r, s, _ in members], bins)
    except Exception as exc:
        for table in TABLES:
            (state.processed / table / f"{part}.parquet").unlink(missing_ok=True)
        reason = file_failure(exc)
        if reason is None:
            raise
        if len(members) == 1:
            state.report.quarantine(members[0][1], reason)
            return
        for member in members:
            path, rel, sha, _ = member
            try:
                one, _ = rows.extract([(path, rel, sha)])
            except Exception as again:
                why = file_failure(again)
                if why is None:
                    raise
                state.report.quarantine(rel, why)
                continue
            _write_rows(state, record, [member], one)
        return
    for _, rel, sha, version in members:
        state.current[rel] = {"sha256": sha, "format": record.name, "part": part, "tool_version": version}
        state.report.ingested.append(rel)


def read_batches_and_folders(state: IngestState) -> None:
    """Triage every file, read the row-extracted batches and the folders read as units.

    What is left for :func:`read_the_rest` is in ``state.others`` and ``state.copies``.
    """
    record = rows_format()
    spool = state.processed / ".batches"  # where workers leave their results (see the record's extract)
    shutil.rmtree(spool, ignore_errors=True)  # an interrupted ingest's
    spool.mkdir()
    extract = record.rows.extract if record and record.rows else None
    batches = Batches(extract, spool, here=extract)
    try:
        list_and_sort(state, batches)
        for index, result in batches.in_order():  # this process builds and writes the frames
            finish_row_batch(state, record, batches.batches[index], result)  # type: ignore[arg-type]
        units, rest = folder_units(state)
        for item in rest:
            route(state, item, state.held_formats[item[1]], state.late_rows.append)
        members = [(state.study.folder / rel, rel, sha) for _, files in units for rel, sha in files]
        forget_stale(state, {rel for _, rel, _ in state.todo + state.copies + members})
        for folder_record, files in units:
            read_folder_unit(state, folder_record, files)
        if state.late_rows and extract is not None:
            finish_row_batch(state, record, state.late_rows, extract(state.late_rows))  # type: ignore[arg-type]
    finally:
        batches.close()
        shutil.rmtree(spool, ignore_errors=True)


# ------------------------------------------------------------------ folders read as one unit


def _members_by_folder(state: IngestState, record: Format, claimed: set[str]) -> list[dict[str, tuple[str, str]]]:
    """Return the held and the earlier-read files of ``record``'s folders: per folder, ``rel -> (sha256, kind)``."""
    folder = record.folder
    assert folder is not None  # noqa: S101 -- folder_formats() returns only these
    by_folder: dict[str, dict[str, tuple[str, str]]] = {}
    for path, rel, sha in state.held:
        kind = folder.kind(path)
        if kind and rel not in claimed:
            by_folder.setdefault(str(Path(rel).parent), {})[rel] = (sha, kind)  # type: ignore[assignment]
    for rel, entry in state.current.items():
        if entry.get("format") == record.name:
            by_folder.setdefault(str(Path(rel).parent), {})[rel] = (entry["sha256"], entry.get("kind"))
    return list(by_folder.values())


def _reopen_changed_folders(state: IngestState, record: Format) -> None:
    """Put every unchanged file of a folder whose membership changed back with the held files, to be read again.

    A unit is read again whole when one of its files changed, came or went; a
    member file kept on its own (a flatfile alone in its folder) joins the unit
    when the folder's other files arrive.
    """
    folder = record.folder
    assert folder is not None  # noqa: S101 -- only folder formats come here
    unchanged = set(state.report.unchanged)
    units: dict[str, list[str]] = {}
    for rel, entry in state.previous.items():
        if "unit" in entry:
            units.setdefault(entry["unit"], []).append(rel)
    broken = {unit for unit, rels in units.items() if not all(rel in unchanged for rel in rels)}
    active = {str(Path(rel).parent) for _, rel, _ in state.held}
    for rel in sorted(unchanged):
        entry = state.current[rel]
        path = state.study.folder / rel
        joins = "unit" not in entry and str(Path(rel).parent) in active and folder.kind(path)
        if entry.get("unit") not in broken and not joins:
            continue
        del state.current[rel]
        state.report.unchanged.remove(rel)
        item = (path, rel, entry["sha256"])
        state.held.append(item)
        state.todo.append(item)
        try:
            state.held_formats[rel] = detect(path) if entry["format"] == record.name else entry["format"]
        except FormatError as exc:
            state.held_formats[rel] = exc


def folder_units(state: IngestState) -> tuple[list[tuple[Format, list[tuple[str, str]]]], list[Item]]:
    """Return the folders to (re)read as units, and the held files left to read one by one.

    A folder with a result file (a summary, totals or flatfile) and other member
    files is one unit, named by the hash of all its files: when any of them
    changed, came or went, the whole folder is read again; otherwise its files
    stay as they are.
    """
    units, claimed = [], set()
    for record in folder_formats():
        folder = record.folder
        assert folder is not None  # noqa: S101 -- folder_formats() returns only these
        _reopen_changed_folders(state, record)
        for files in _members_by_folder(state, record, claimed):
            key = folder.key([(rel, sha) for rel, (sha, _) in files.items()])
            if len(files) < 2 or not {k for _, k in files.values()} & set(folder.result_kinds):
                continue
            if all(state.current.get(rel, {}).get("unit") == key for rel in files):
                continue  # unchanged: same files, same content
            for rel in files:
                if rel in state.current:
                    del state.current[rel]
                    state.report.unchanged.remove(rel)
            units.append((record, sorted((rel, sha) for rel, (sha, _) in files.items())))
            claimed.update(files)
    return units, [item for item in state.held if item[1] not in claimed]


def read_folder_unit(state: IngestState, record: Format, files: list[tuple[str, str]]) -> None:
    """Read one folder as a unit and write it as one part, or quarantine it whole.

    A folder is one unit: when a file of it cannot be read, the others would stand in with less
    (a per-host report without the total, a flatfile without the start time), so every file of
    the folder is quarantined: the bad ones with their reason, the rest naming them.
    """
    folder = record.folder
    assert folder is not None  # noqa: S101 -- only folder formats come here
    key = folder.key(files)
    paths = {state.study.folder / rel: (rel, sha) for rel, sha in files}
    try:
        result = folder.read([(p, sha) for p, (_, sha) in paths.items()], key)
    except Exception as exc:
        reason = file_failure(exc)
        if reason is None:
            raise
        for rel, _ in files:
            state.report.quarantine(rel, reason)
        return
    if result.problems:
        bad = sorted(paths[p][0] for p in result.problems)
        for path, (rel, _) in paths.items():
            state.report.quarantine(
                rel,
                result.problems.get(path)
                or f"folder: its {folder.tool} output folder is read as one unit, and {', '.join(bad)} could not "
                "be read (see its row); fix or remove that file and ingest again",
            )
        return
    write_part(state.study, state.processed, key[:16], result.tables, files)
    version = _tool_version(result.tables)
    read_from = sorted(p.name for p in paths if result.used.get(p, "not needed") != "not needed")
    for path, (rel, sha) in paths.items():
        kind = result.kinds.get(path)
        state.current[rel] = {
            "sha256": sha,
            "format": record.name,
            "kind": kind,
            "part": key[:16],
            "unit": key,
            "tool_version": version,
        }
        if result.used.get(path, "not needed") == "not needed":
            state.report.skipped.append(
                (rel, f"{folder.tool} {kind} file, not needed (its folder is read from {', '.join(read_from)})")
            )
        else:
            state.report.ingested.append(rel)


# ------------------------------------------------------------------ one file at a time, and small files in batches


def _ingest_file(state: IngestState, path: Path, rel: str, sha: str, name: str, unit: str) -> dict:
    """Read one file (streamed when it is large and its format can be) and write it as one part."""
    part = sha[:16]
    record = FORMATS[name]
    objects = state.study.esxtop_objects
    large = record.stream and path.stat().st_size > STREAM_BYTES
    streamed = record.stream(path, sha, unit, objects) if large else None
    if streamed is not None:
        target = state.processed / streamed.table / f"{part}.parquet"
        try:
            write_parquet(streamed.frame, target)
        except pl.exceptions.PolarsError as exc:  # rows polars cannot read: the reader's refusal quotes the row
            target.unlink(missing_ok=True)
            if streamed.refusal is None:
                raise
            raise streamed.refusal(exc) from None
        try:  # a large log's or capture's values meet the rules a table read in memory meets
            check_rules(pl.scan_parquet(target), streamed.table)
        except ImpossibleValue:
            target.unlink(missing_ok=True)
            raise
        tables = Tables.build(runs=streamed.runs(pl.scan_parquet(target)))
    else:
        tables = read_file(path, name, unit, objects)
    _write_or_remove(state, part, tables, [(rel, sha)])
    return {"sha256": sha, "format": name, "part": part, "tool_version": _tool_version(tables), **_unit(name, unit)}


def _write_or_remove(state: IngestState, part: str, tables: Tables, members: list[tuple[str, str]]) -> None:
    """Write one file's part; on any failure leave none of it behind (a half part would read as data)."""
    try:
        write_part(state.study, state.processed, part, tables, members)
    except BaseException:
        for table in TABLES:
            (state.processed / table / f"{part}.parquet").unlink(missing_ok=True)
        raise


def _ingest_copy(state: IngestState, path: Path, rel: str, sha: str, unit: str) -> dict:
    """Ingest a file whose bytes equal another recorded run's file, under its own key (never streamed)."""
    key = copy_key(sha, rel)
    name = detect(path)
    tables = read_file(path, name, unit, state.study.esxtop_objects)
    renamed = pl.col("run_id").str.replace(f"^{sha[:16]}", key[:16])
    tables = Tables(
        **{name: frame.with_columns(renamed) if "run_id" in frame.columns else frame for name, frame in tables.items()}
    )
    _write_or_remove(state, key[:16], tables, [(rel, sha)])
    entry = {"sha256": sha, "key": key, "format": name, "part": key[:16], "tool_version": _tool_version(tables)}
    return {**entry, **_unit(name, unit)}


def read_small_batch(batch: list[tuple[Path, str, str, str, str]], study: Study, processed: Path) -> tuple[str, list]:
    """Read a batch of small files and write them as one part (in a worker process).

    Items are ``(path, rel, sha256, format, latency unit)``; returns the part and
    ``(rel, sha256, error or None)`` per file.
    """
    read_ok, outcomes = [], []
    for path, rel, sha, name, unit in batch:
        try:
            read_ok.append((rel, sha, read_file(path, name, unit)))
            outcomes.append((rel, sha, None))
        except Exception as exc:
            reason = file_failure(exc)
            if reason is None:
                raise
            outcomes.append((rel, sha, reason))
    part = "l" + hashlib.sha256("".join(sha for _, sha, _ in read_ok).encode()).hexdigest()[:16]
    if read_ok:
        merged = Tables(
            **{name: pl.concat([getattr(t, name) for _, _, t in read_ok], how="vertical") for name in TABLES}
        )
        write_part(study, processed, part, merged, [(rel, sha) for rel, sha, _ in read_ok])
    return part, outcomes


def _read_small_files(state: IngestState, small: list[tuple[Path, str, str, str, str]]) -> None:
    """Small files of batched formats in batches of ``BATCH``, one part each, on every core."""
    workers = worker_count() if len(small) > BATCH else 0
    batches = Batches(read_small_batch, state.study, state.processed, workers=workers)
    try:
        for item in small:
            batches.add(item)
        outputs = batches.results()
    finally:
        batches.close()
    formats = {rel: name for _, rel, _, name, _ in small}
    units = {rel: unit for _, rel, _, _, unit in small}
    for part, outcomes in outputs:
        for rel, sha, error in outcomes:
            if error is None:
                entry = {"sha256": sha, "format": formats[rel], "part": part, "tool_version": None}
                state.current[rel] = {**entry, **_unit(formats[rel], units[rel])}
                state.report.ingested.append(rel)
            else:
                state.report.quarantine(rel, error)


def _why_no_results(path: Path, name: str) -> str:
    try:
        read_file(path, name)
    except FormatError as exc:
        return exc.expected
    return "holds no results"


def _logs_whose_unit_changed(state: IngestState, units: LogUnits) -> list[tuple[Path, str, str, str]]:
    """Unchanged logs whose latency unit is no longer the one they were read with, their rows dropped.

    A log's unit comes from the tool version of the output beside it: a fio 2.x
    JSON file added beside an unchanged log changes how the log must be read.
    """
    again = []
    for rel in list(state.report.unchanged):
        entry = state.current[rel]
        record = FORMATS.get(entry.get("format", ""))
        if record is None or not record.latency_unit_from_study or "unit" in entry:
            continue
        if entry.get("latency_unit", "ns") != units(rel):
            drop_source(state.processed, entry["part"], entry.get("key") or entry["sha256"])
            del state.current[rel]
            state.report.unchanged.remove(rel)
            if "key" in entry:
                state.copies.append((state.study.folder / rel, rel, entry["sha256"]))
            else:
                again.append((state.study.folder / rel, rel, entry["sha256"], entry["format"]))
    return again


def read_the_rest(state: IngestState) -> None:
    """Read the files triage sent to their own readers, then the copies.

    Files of formats whose latency unit comes from the study are read after the
    others, since the tool version beside them tells their unit.
    """
    report: IngestReport = state.report
    later = []
    for path, rel, sha, name in sorted(state.others):
        record = FORMATS[name]
        if not record.holds_results:
            report.skipped.append((rel, _why_no_results(path, name)))
        elif record.latency_unit_from_study:
            later.append((path, rel, sha, name))
        else:
            _one(state, rel, functools.partial(_ingest_file, state, path, rel, sha, name, "ns"))
    units = LogUnits(state)
    later += _logs_whose_unit_changed(state, units)
    for path, rel, _, name in later:
        holds_latency = FORMATS[name].holds_latency
        if holds_latency is not None and holds_latency(path) and units.assumed(rel):
            report.notes.append(
                (
                    rel,
                    "its latency unit is stated nowhere (no output in its folder or above, no [fio] "
                    f"log_latency_unit): read as {units(rel)} (fio 3.x); for logs of fio 2.x set "
                    'log_latency_unit = "us" under [fio] in study.toml',
                )
            )
    small = []
    for path, rel, sha, name in later:
        if FORMATS[name].small_files_in_batches and path.stat().st_size <= STREAM_BYTES:
            small.append((path, rel, sha, name, units(rel)))
        else:
            _one(state, rel, functools.partial(_ingest_file, state, path, rel, sha, name, units(rel)))
    _read_small_files(state, small)
    for path, rel, sha in state.copies:
        _one(state, rel, functools.partial(_ingest_copy, state, path, rel, sha, units(rel)))  # type: ignore[arg-type]
