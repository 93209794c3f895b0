"""Raw tool output -> tidy Parquet, incrementally, with a quarantine report.

``data/processed/<study>/`` holds one folder per table of Parquet parts (one
part per raw file, or per batch of up to ``JSON_BATCH`` fio JSON files),
``manifest.json`` (which raw file, by SHA-256, went into which part) and
``quarantine.csv`` (the files that could not be read, and why). A raw file
whose content, the study declaration and the schema version are unchanged is
not read again.

fio JSON files go in batches to worker processes (``ingest_worker``: no
polars, so they start at once), which extract their rows, and hash them too
on a first ingest; this process sorts the results out in batch order, builds
the frames and writes them, and runs batches itself when that does not keep
the workers waiting.
"""

from __future__ import annotations

import csv
import fcntl
import functools
import hashlib
import json
import multiprocessing
import os
import queue
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.pool import Pool
from pathlib import Path

import orjson
import polars as pl

from benchlib.errors import FormatError, StudyError
from benchlib.ingest_worker import extract_json_batch, read_spooled
from benchlib.paths import PROCESSED, processed_dir_for
from benchlib.schema import (
    SCHEMA_VERSION,
    TABLES,
    Tables,
    label_expr,
    nest_bins,
    validate_stored_bins,
)
from benchlib.sources import detect, detect_head, read
from benchlib.sources._common import SNIFF_BYTES, run_id
from benchlib.sources.esxtop import esxtop_run, scan_esxtop
from benchlib.sources.fio_json import frames_of
from benchlib.sources.fio_json_rows import looks_like_fio_json_bytes
from benchlib.sources.fio_log import read_fio_log, scan_fio_log
from benchlib.sources.vdbench_folder import RESULT_KINDS, folder_key, may_be_member, member_kind, read_vdbench_folder
from benchlib.store import MANIFEST, NOT_OUTPUT, QUARANTINE, RAW_STATE, raw_state, study_key
from benchlib.study import RUN_MANIFEST, STUDY_FILE, Study, load_study, study_files

#: Logs larger than this are streamed to Parquet instead of read into memory.
STREAM_BYTES = 32 * 1024 * 1024
#: fio JSON files per Parquet part: one frame per table for many small files.
JSON_BATCH = 500
#: Worker processes take fio JSON batches only for more files than this: below it, starting them
#: (about half a second of imports) costs more than they save (measured: 1,500 files break even).
PARALLEL_FROM = 3 * JSON_BATCH
#: Formats that hold no results: listed as skipped, with what they are.
_NO_RESULTS = ("vdbench-parmfile",)
_FIO_LOG_NAME = re.compile(r"_(bw|iops|lat|clat|slat|clat_hist|lat_hist)(\.\d+)?\.log$")


@dataclass
class IngestReport:
    """What one ingest of a study did."""

    study: str
    processed: Path
    ingested: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    quarantined: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no file was quarantined."""
        return not self.quarantined


def _atomic_write_parquet(frame: pl.DataFrame | pl.LazyFrame, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".parquet.tmp")
    if isinstance(frame, pl.LazyFrame):
        frame.sink_parquet(tmp)
    else:
        frame.write_parquet(tmp)
    os.replace(tmp, target)


def _atomic_write_bytes(data: bytes, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(target.suffix + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)


def _raw_files(
    study: Study, report: IngestReport, on_many: Callable[[], None] = lambda: None
) -> list[tuple[Path, str]]:
    """List the raw output files of a study.

    ``(path, path relative to the study)`` of every raw output file, sorted; files that cannot be read
    (links out of the study, FIFOs, devices: :func:`benchlib.study.study_files`) go to ``report.skipped``.

    ``on_many`` runs once, as soon as more than ``PARALLEL_FROM`` files are found.
    """
    found = []
    for path, rel, left_out in study_files(study.folder):
        if rel == STUDY_FILE or NOT_OUTPUT.search(rel):
            continue
        if left_out:
            report.skipped.append((rel, left_out))
            continue
        found.append((path, rel))
        if len(found) == PARALLEL_FROM + 1:
            on_many()
    return sorted(found, key=lambda item: item[1])


def _pool_context() -> multiprocessing.context.BaseContext:
    """Worker processes forked from a clean server process.

    Forking this process directly can deadlock: polars' thread pool may hold a
    lock at the moment of the fork, and the child waits on it for ever.
    """
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(
        ["benchlib.ingest_worker"]
    )  # no polars: fio logs' workers import it when they need it
    return context


@contextmanager
def _main_hidden() -> Iterator[None]:
    """Start worker processes without the caller's script.

    multiprocessing runs the ``__main__`` script again in every new process;
    the workers need only benchlib, and a user's script that calls
    :func:`ingest_study` without an ``if __name__ == "__main__":`` guard would
    otherwise run again in each worker and fail there.
    """
    names = vars(sys.modules["__main__"]) if "__main__" in sys.modules else {}
    saved = {k: names.pop(k) for k in ("__file__", "__spec__") if k in names}
    names["__spec__"] = None  # multiprocessing reads it; None and no __file__: nothing to run again
    try:
        yield
    finally:
        del names["__spec__"]
        names.update(saved)


def _warm_pool() -> None:
    """Start the worker server (once per process), e.g. so that its imports overlap with hashing the files.

    Its workers run polars on one thread each: with this process they already
    fill every core, and polars' own threads only competed with the others
    (measured on 5,000 json+ files: median 2.41 s against 2.73 s).
    """
    from multiprocessing import forkserver

    _pool_context()
    saved = os.environ.get("POLARS_MAX_THREADS")
    os.environ["POLARS_MAX_THREADS"] = "1"  # read by the server when it starts, not by this process's polars
    try:
        with _main_hidden():
            forkserver.ensure_running()
    finally:
        if saved is None:
            del os.environ["POLARS_MAX_THREADS"]
        else:
            os.environ["POLARS_MAX_THREADS"] = saved


class _LogUnits:
    """Return the latency unit of fio logs per folder.

    ``us`` beside fio 2.x output, ``ns`` otherwise, unless study.toml says.
    """

    def __init__(self, study: Study, current: dict) -> None:
        self.fixed, self.current = study.log_latency_unit, current
        self.by_folder: dict[str, list[str]] | None = None  # made when first asked: most studies have no logs

    def __call__(self, rel: str) -> str:
        if self.fixed:
            return self.fixed
        if self.by_folder is None:
            self.by_folder = {}
            for done, entry in self.current.items():
                if entry.get("tool_version"):
                    self.by_folder.setdefault(str(Path(done).parent), []).append(entry["tool_version"])
        near = self.by_folder.get(str(Path(rel).parent), [])
        return "us" if near and all(v.startswith("fio-2.") for v in near) else "ns"


def _ingest_one(report: IngestReport, current: dict, rel: str, work: Callable[[], dict]) -> None:
    """Run one file's ingest; a FormatError quarantines that file only."""
    try:
        current[rel] = work()
        report.ingested.append(rel)
    except FormatError as exc:
        report.quarantined.append((rel, f"{exc.where}: {exc.expected}"))


def _ingest_log_batch(batch: list[tuple[Path, str, str, str]], study: Study, processed: Path) -> tuple[str, list]:
    """Read a batch of small fio logs and write them as one part (in a worker process)."""
    read_ok, outcomes = [], []
    for path, rel, sha, unit in batch:
        try:
            read_ok.append((rel, sha, read_fio_log(path, latency_unit=unit)))
            outcomes.append((rel, sha, None))
        except FormatError as exc:
            outcomes.append((rel, sha, f"{exc.where}: {exc.expected}"))
    part = "l" + hashlib.sha256("".join(sha for _, sha, _ in read_ok).encode()).hexdigest()[:16]
    if read_ok:
        merged = Tables(
            **{name: pl.concat([getattr(t, name) for _, _, t in read_ok], how="vertical") for name in TABLES}
        )
        _write_part(processed, part, merged, study, [(rel, sha) for rel, sha, _ in read_ok])
    return part, outcomes


def _worker_count() -> int:
    """Worker processes beside this one, which runs batches too: one per further core.

    On two cores, one worker and this process took 0.64-0.71 s for the
    5,000-file bench where two workers and this process took 0.74-0.82 s.
    """
    return (os.cpu_count() or 1) - 1


@dataclass
class _Failed:
    """A batch whose worker raised."""

    error: BaseException


class _Batches:
    """Items in batches of ``JSON_BATCH``, each one run as ``worker(batch, *args)``.

    With ``workers`` (worker processes, set when the work warrants starting
    them; this process is one more), full batches are queued as they fill; a
    feeder thread hands the next one to a worker process whenever one is free
    (starting them waits for the worker server's imports: the feeder waits,
    not this process, which goes on listing the study). When asked for the
    results, this process hands them back in batch order and, whenever no
    worker's result is waiting, runs a queued batch itself with ``here``
    (the last, partial one among them): whoever is free starts the next one.
    """

    def __init__(self, worker: Callable, *args: object, workers: int = 0, here: Callable | None = None) -> None:
        self.worker, self.args, self.workers = worker, args, workers
        self.here = here or (lambda batch: worker(batch, *args))  # how this process runs a batch
        self.pending: list = []
        self.batches: list[list] = []
        self.queued: queue.SimpleQueue = queue.SimpleQueue()
        self.done: queue.SimpleQueue = queue.SimpleQueue()  # (index, result or _Failed) from the workers
        self.free = threading.Semaphore(0)  # one per free worker, set when they start
        self.submitted = self.received = 0  # batches handed to workers, results back from them
        self.yielded = self.ran = 0  # results used, batches run here
        self.run_time = self.use_time = 0.0  # this process's mean seconds per batch: running one, using a result
        self.feeder: threading.Thread | None = None
        self.feed_error: BaseException | None = None
        self.stopping = False
        self.pool: Pool | None = None

    def add(self, item: object) -> None:
        self.pending.append(item)
        if len(self.pending) == JSON_BATCH and self.workers:
            if self.feeder is None:
                _warm_pool()
                # two batches per worker: it starts the next while this process (busy) takes the last one's result
                self.free = threading.Semaphore(self.workers * 2)
                self.feeder = threading.Thread(target=self._feed, name="benchlib-batches", daemon=True)
                self.feeder.start()
            self._queue(self.pending)
            self.pending = []

    def _queue(self, batch: list) -> None:
        self.batches.append(batch)  # before its index is queued: the feeder reads it at once
        self.queued.put(len(self.batches) - 1)

    def _feed(self) -> None:
        try:
            with _main_hidden():
                self.pool = _pool_context().Pool(self.workers)  # every worker starts now
            while self.free.acquire() and not self.stopping:
                index = self.queued.get()
                if index is None or self.stopping:
                    return
                self.pool.apply_async(
                    self.worker,
                    (self.batches[index], *self.args),
                    callback=functools.partial(self._returned, index),
                    error_callback=lambda exc, index=index: self._returned(index, _Failed(exc)),
                )
                self.submitted += 1
        except BaseException as exc:  # noqa: BLE001 -- handed to the caller of in_order()
            self.feed_error = exc

    def _returned(self, index: int, result: object) -> None:
        self.done.put((index, result))
        self.free.release()

    def _stop_feeder(self) -> None:
        """Stop handing batches on (at once, also when interrupted with batches still queued)."""
        if self.feeder is not None and self.feeder.is_alive():
            self.stopping = True
            self.free.release()  # if it waits for a free worker
            self.queued.put(None)  # if it waits for a batch
            self.feeder.join()

    def in_order(self) -> Iterator[tuple[int, object]]:
        """Every batch's result as ``(index, result)``, in batch order."""
        for i in range(0, len(self.pending), JSON_BATCH):
            self._queue(self.pending[i : i + JSON_BATCH])
        self.pending = []
        waiting: dict[int, object] = {}
        for index in range(len(self.batches)):
            while index not in waiting:
                got, result = self._next()
                if isinstance(result, _Failed):
                    raise result.error
                waiting[got] = result
            start = time.perf_counter()
            yield index, waiting.pop(index)
            self.yielded += 1
            self.use_time += (time.perf_counter() - start - self.use_time) / self.yielded
        self._stop_feeder()

    def _worth_running_here(self) -> bool:
        """Whether this process should run a queued batch rather than wait for a worker.

        Not while what it still has to do with the results (at the pace it
        has used them so far) would keep it busy after the workers are done:
        otherwise it runs batches early and writes results late while the
        workers sit idle.
        """
        if self.feeder is None or not self.feeder.is_alive() or not self.run_time:
            return True  # no workers (or they are gone), or no pace measured yet
        owed = (len(self.batches) - self.yielded) * self.use_time
        left = (self.queued.qsize() + self.submitted - self.received) * self.run_time / self.workers
        return owed + self.run_time <= left

    def _next(self) -> tuple[int, object]:
        """Return the next result.

        A worker's, else one this process makes from a queued batch, else the next to come.
        """
        while True:
            try:
                index, result = self.done.get_nowait()
            except queue.Empty:
                pass
            else:
                self.received += 1
                return index, result
            try:
                if not self._worth_running_here():
                    raise queue.Empty
                index = self.queued.get_nowait()
            except queue.Empty:
                try:
                    index, result = self.done.get(timeout=0.05)
                except queue.Empty:
                    lost = self.feeder is not None and not self.feeder.is_alive() and self.submitted == self.received
                    if self.feed_error is not None and lost and self.queued.empty():
                        raise self.feed_error from None  # the feeder died holding a batch
                    continue
                self.received += 1
                return index, result
            start = time.perf_counter()
            result = self.here(self.batches[index])
            self.ran += 1
            self.run_time += (time.perf_counter() - start - self.run_time) / self.ran
            return index, result

    def results(self) -> list:
        """Every batch's result, in order."""
        return [result for _, result in self.in_order()]

    def close(self) -> None:
        self._stop_feeder()
        if self.pool is not None:
            self.pool.terminate()  # every batch is back, or the ingest failed: either way nothing is left to wait for
            self.pool.join()


def _ingest_log_batches(logs: list, study: Study, processed: Path, report: IngestReport, current: dict) -> None:
    """Small fio logs in batches of ``JSON_BATCH``, one part each, on every core."""
    batches = _Batches(_ingest_log_batch, study, processed, workers=_worker_count() if len(logs) > JSON_BATCH else 0)
    try:
        for log in logs:
            batches.add(log)
        outputs = batches.results()
    finally:
        batches.close()
    for part, outcomes in outputs:
        for rel, sha, error in outcomes:
            if error is None:
                current[rel] = {"sha256": sha, "format": "fio-log", "part": part, "tool_version": None}
                report.ingested.append(rel)
            else:
                report.quarantined.append((rel, error))


def _drop_source(processed: Path, part: str, sha: str) -> None:
    """Remove one raw file's rows from a part (deleting the part when nothing is left)."""
    prefix = sha[:16]
    for table in TABLES:
        path = processed / table / f"{part}.parquet"
        if not path.exists():
            continue
        kept = pl.read_parquet(path).filter(~pl.col("run_id").str.starts_with(prefix))
        if kept.height:
            _atomic_write_parquet(kept, path)
        else:
            path.unlink()


@functools.lru_cache(maxsize=4096)
def _run_manifest(folder: Path, study_folder: Path) -> tuple[Path, dict] | None:
    """Return the ``benchlib-run.json`` written by ``benchlib run`` in ``folder`` or the nearest folder above it."""
    while True:
        path = folder / RUN_MANIFEST
        if path.is_file():
            try:
                return folder, json.loads(path.read_text(encoding="utf-8"))
            except ValueError as exc:
                raise StudyError(
                    f"{path}: not valid JSON ({exc}); it was written by benchlib run, restore it"
                ) from None
        if folder == study_folder or folder.parent == folder:
            return None
        folder = folder.parent


@functools.lru_cache(maxsize=4096)
def _hcibench_case(folder: Path) -> bool:
    """Whether ``folder`` is an HCIBench test case folder: ``<case>-res.txt`` beside it, or its ``hcibench.cfg``."""
    return (folder.parent / f"{folder.name}-res.txt").is_file() or (folder / "hcibench.cfg").is_file()


def _run_levels(study: Study, rel: str) -> dict:
    """Factor levels, repetition and host that ``benchlib run`` recorded for a raw file (empty if none).

    A worker VM's file in an HCIBench test case folder is named after the VM:
    that name is its runs' host.
    """
    folder_rel, _, name = rel.rpartition("/")
    hcibench, found, prefix = _folder_facts(study.folder, folder_rel)
    if hcibench and name.endswith((".txt", ".json")):
        return {"run_host": name.rsplit(".", 1)[0]}
    if found is None:
        return {}
    folder, manifest = found
    levels = {k: str(v) for k, v in manifest.get("levels", {}).items()}
    for factor, level in levels.items():
        if factor not in study.factors or level not in study.factors[factor]:
            raise StudyError(
                f"{folder / RUN_MANIFEST}: level {factor} = {level!r} is not declared in "
                f"{study.folder / STUDY_FILE}; run `benchlib run` on the plan again to rewrite study.toml"
            )
    entry = manifest.get("files", {}).get(rel[len(prefix) :], {})
    return {**levels, "repetition": manifest.get("repetition"), "run_host": entry.get("host")}


@functools.lru_cache(maxsize=4096)
def _folder_facts(study_folder: Path, folder_rel: str) -> tuple[bool, tuple[Path, dict] | None, str]:
    """Per folder of a study: HCIBench test case or not, its run manifest, and that manifest's folder as a prefix."""
    folder = study_folder / folder_rel if folder_rel else study_folder
    found = _run_manifest(folder, study_folder)
    prefix = "" if found is None or found[0] == study_folder else found[0].relative_to(study_folder).as_posix() + "/"
    return _hcibench_case(folder), found, prefix


def _study_frame(study: Study, members: list[tuple[str, str]]) -> pl.DataFrame:
    """``sha256 -> source, factor levels, repetition, host`` for the raw files of one part."""
    rows = [
        {"sha256": sha, "source": f"{study.folder.name}/{rel}", **study.levels_for(rel), **_run_levels(study, rel)}
        for rel, sha in members
    ]
    schema = {
        "sha256": pl.String,
        "source": pl.String,
        "repetition": pl.Int32,
        "run_host": pl.String,
        **{f: pl.String for f in study.factors},
    }
    return pl.from_dicts(rows, schema=schema)


def _check_levels(study: Study, runs: pl.DataFrame) -> None:
    for factor, levels in study.factors.items():
        unknown = runs.filter(pl.col(factor).is_not_null() & ~pl.col(factor).is_in(levels))
        if unknown.height:
            raise StudyError(
                f"{study.folder / STUDY_FILE}: {unknown['source'][0]} has {factor} = {unknown[factor][0]!r}, "
                f"not one of the declared levels {levels}; add it to [factors]"
            )


def _write_part(
    processed: Path,
    part: str,
    tables: Tables,
    study: Study,
    members: list[tuple[str, str]],
    bins: pl.DataFrame | None = None,
) -> None:
    """Write one part of every table; ``bins``: latency_bins already in their stored form (else from ``tables``)."""
    runs = tables.runs.drop("source", "repetition").join(_study_frame(study, members), on="sha256", how="left")
    runs = runs.with_columns(pl.lit(study.name).alias("study"), pl.coalesce("host", "run_host").alias("host"))
    if runs["labels"].list.len().sum():  # a row's own label (published tables) wins over its file's mapping
        runs = runs.with_columns(pl.coalesce(label_expr(f), pl.col(f)).alias(f) for f in study.factors)
    _check_levels(study, runs)
    runs = runs.select(list(tables.runs.columns) + list(study.factors))
    bins = nest_bins(tables.latency_bins) if bins is None else bins
    stored = {"runs": runs, "latency_bins": validate_stored_bins(bins)}
    for name, frame in tables.items():
        frame = stored.get(name, frame)
        if frame.height:
            _atomic_write_parquet(frame, processed / name / f"{part}.parquet")


def _detect_head(path: Path, head: bytes, size: int) -> str:
    """Return a file's format from its first ``SNIFF_BYTES`` (read while hashing it)."""
    if looks_like_fio_json_bytes(head):
        return "fio-json"  # the first format detection tries, and what it would find (no need to decode)
    return detect_head(path, head, partial=size > len(head))


def _finish_batch(
    batch: list[tuple[Path, str, str | None]],
    result: tuple[dict[str, bytes], list] | str,
    study: Study,
    processed: Path,
    salt: str,
    report: IngestReport,
    current: dict,
    plan: _Plan,
) -> None:
    """Sort out the files a worker hashed, quarantine the broken ones and write the fio JSON ones as one part.

    A file a worker extracted may turn out to repeat an earlier batch's file
    (the first one found is read, as when this process hashes): the batch's
    other files are then extracted again here, without it.
    """
    packed, outcomes = read_spooled(result) if isinstance(result, str) else result
    members = []
    for (path, rel, known), (sha, kind, error, version) in zip(batch, outcomes, strict=True):
        if known is None and sha and not plan.sort_out(study, report, current, path, rel, sha, kind == "empty"):
            continue
        if kind == "json":
            members.append((path, rel, sha, version))
        elif kind == "error":
            report.quarantined.append((rel, error))
        else:  # another format, empty, or perhaps a vdbench folder's: detection says which, or why none
            plan.detect_later(path, rel, sha, report, hold=kind == "held")
    if not members:
        return
    if len(members) < sum(kind == "json" for _, kind, _, _ in outcomes):
        packed, _ = extract_json_batch([(path, rel, sha) for path, rel, sha, _ in members])
    part = "b" + hashlib.sha256((salt + "".join(sha for _, _, sha, _ in members)).encode()).hexdigest()[:16]
    frames, bins = frames_of(packed)
    _write_part(processed, part, Tables.from_rows(frames), study, [(rel, sha) for _, rel, sha, _ in members], bins)
    for _, rel, sha, version in members:
        current[rel] = {"sha256": sha, "format": "fio-json", "part": part, "tool_version": version}
        report.ingested.append(rel)


def _read_one(path: Path, fmt: str, unit: str) -> Tables:
    """Read one file in memory; fio logs need the latency unit of their folder."""
    return read_fio_log(path, latency_unit=unit) if fmt == "fio-log" else read(path, fmt)


def _tool_version(tables: Tables) -> str | None:
    """Return the tool version a file's runs report (the first, when several)."""
    versions = tables.runs["tool_version"].drop_nulls().unique(maintain_order=True).to_list()
    return versions[0] if versions else None


def _ingest_file(path: Path, rel: str, sha: str, fmt: str, study: Study, processed: Path, unit: str) -> dict:
    part = sha[:16]
    if fmt == "fio-log" and path.stat().st_size > STREAM_BYTES and "_hist" not in path.name:
        target = processed / "intervals" / f"{part}.parquet"
        _atomic_write_parquet(scan_fio_log(path, latency_unit=unit, sha256=sha), target)
        duration = pl.scan_parquet(target).select(pl.col("time_ns").max()).collect().item()
        runs = [
            {
                "run_id": run_id(sha, 0, None),
                "tool": "fio",
                "format": "fio-log",
                "is_aggregate": False,
                "duration_ns": duration,
                "sha256": sha,
                "document_index": 0,
            }
        ]
        tables = Tables.from_rows({"runs": runs})
    elif fmt == "esxtop" and path.stat().st_size > STREAM_BYTES:
        target = processed / "host_counters" / f"{part}.parquet"
        _atomic_write_parquet(scan_esxtop(path, sha256=sha), target)
        tables = Tables.from_rows({"runs": esxtop_run(path, sha, pl.scan_parquet(target))})
    else:
        tables = _read_one(path, fmt, unit)
    _write_part(processed, part, tables, study, [(rel, sha)])
    return {"sha256": sha, "format": fmt, "part": part, "tool_version": _tool_version(tables)}


def _ingest_copy(path: Path, rel: str, sha: str, study: Study, processed: Path, unit: str) -> dict:
    """Ingest a file whose bytes equal another recorded run's file, under its own key (never streamed)."""
    key = _copy_key(sha, rel)
    fmt = detect(path)
    tables = _read_one(path, fmt, unit)
    renamed = pl.col("run_id").str.replace(f"^{sha[:16]}", key[:16])
    tables = Tables(
        **{name: frame.with_columns(renamed) if "run_id" in frame.columns else frame for name, frame in tables.items()}
    )
    _write_part(processed, key[:16], tables, study, [(rel, sha)])
    return {"sha256": sha, "key": key, "format": fmt, "part": key[:16], "tool_version": _tool_version(tables)}


def _load_manifest(processed: Path, key: str) -> dict:
    path = processed / MANIFEST
    if not path.exists():
        return {}
    manifest = orjson.loads(path.read_bytes())
    return manifest.get("files", {}) if manifest.get("study_key") == key else {}


def _recorded_by_run(study: Study, rel: str) -> bool:
    """Tell whether ``benchlib run`` lists this file among a run's outputs.

    If it does, equal bytes elsewhere are another run's data.
    """
    found = _run_manifest((study.folder / rel).parent, study.folder)
    return found is not None and (study.folder / rel).relative_to(found[0]).as_posix() in found[1].get("files", {})


def _copy_key(sha: str, rel: str) -> str:
    """Return the identity of a file whose bytes equal another run's file: its hash salted with its path."""
    return hashlib.sha256(f"{sha}\n{rel}".encode()).hexdigest()


_CHUNK = 1 << 20


def _fingerprint(path: Path) -> tuple[str, bytes, int]:
    """Return a file's SHA-256, its first ``SNIFF_BYTES`` (to detect its format) and its size, in one pass."""
    with open(path, "rb", buffering=0) as handle:
        data = handle.read(_CHUNK)  # a small file in one read (and one more that finds the end)
        head, digest, size = data[:SNIFF_BYTES], hashlib.sha256(data), len(data)
        while data := handle.read(_CHUNK):
            digest.update(data)
            size += len(data)
    return digest.hexdigest(), head, size


@dataclass
class _Plan:
    """What to read (see :func:`_plan`)."""

    previous: dict
    #: sha256 -> the files that have it, in the order they were met.
    seen: dict[str, list[str]] = field(default_factory=dict)
    todo: list[tuple[Path, str, str]] = field(default_factory=list)
    #: Files that may belong to a vdbench output folder, and their formats (or why none) as files of their own.
    held: list[tuple[Path, str, str]] = field(default_factory=list)
    held_formats: dict[str, str | FormatError] = field(default_factory=dict)
    copies: list[tuple[Path, str, str]] = field(default_factory=list)
    #: Files read one by one, by their own readers: ``(path, rel, sha256, format)``.
    others: list[tuple[Path, str, str, str]] = field(default_factory=list)
    #: fio JSON that a worker could not tell from its first bytes (UTF-16, say): this process extracts it.
    late_json: list[tuple[Path, str, str]] = field(default_factory=list)

    def sort_out(
        self, study: Study, report: IngestReport, current: dict, path: Path, rel: str, sha: str, empty: bool
    ) -> bool:
        """Whether to read a file; if not, it is an empty fio log or a duplicate (skipped), unchanged, or a copy."""
        if empty and _FIO_LOG_NAME.search(path.name):
            report.skipped.append(
                (
                    rel,
                    "empty fio log (nothing logged: slat with a synchronous engine, "
                    "or a run shorter than log_avg_msec)",
                )
            )
            return False
        same = self.seen.setdefault(sha, [])
        copy = bool(same) and _recorded_by_run(study, rel)
        same.append(rel)
        if same[0] != rel and not copy:
            report.skipped.append((rel, f"same content as {same[0]}"))
        elif self.previous.get(rel, {}).get("sha256") == sha and ("key" in self.previous[rel]) == copy:
            current[rel] = self.previous[rel]
            report.unchanged.append(rel)
        elif copy:
            self.copies.append((path, rel, sha))
        else:
            self.todo.append((path, rel, sha))
            return True
        return False

    def route(
        self, item: tuple[Path, str, str], found: str | FormatError, json: Callable, report: IngestReport
    ) -> None:
        """Fio JSON to ``json``, other formats to ``others``, a file with no format to quarantine."""
        if isinstance(found, FormatError):
            report.quarantined.append((item[1], f"{found.where}: {found.expected}"))
        elif found == "fio-json":
            json(item)
        else:
            self.others.append((*item, found))

    def hold(self, item: tuple[Path, str, str], found: str | FormatError) -> None:
        """Keep a file that may belong to a vdbench output folder.

        With it, its format (or why none) as a file of its own.
        """
        self.held.append(item)
        self.held_formats[item[1]] = found

    def detect_later(self, path: Path, rel: str, sha: str, report: IngestReport, hold: bool) -> None:
        """Route (or ``hold``) a file a worker hashed but did not take for fio JSON."""
        try:
            found: str | FormatError = detect(path)
        except FormatError as exc:
            found = exc
        if hold:
            self.hold((path, rel, sha), found)
        else:
            self.route((path, rel, sha), found, self.late_json.append, report)


def _plan(study: Study, previous: dict, report: IngestReport, current: dict, batches: _Batches) -> _Plan:
    """List every raw file; sort out those this process hashes; queue the rest.

    On a first ingest (nothing earlier to compare with), files are only
    listed here and go to ``batches`` unhashed: the workers hash them while
    they extract them, and :func:`_finish_batch` sorts them out in the same
    order. Otherwise every file is hashed here: unchanged ones are kept,
    duplicates and empty logs skipped, and fio JSON goes to ``batches``.
    Files that may belong to a vdbench output folder are held to be read
    folder by folder. Files whose bytes equal an earlier
    file but which ``benchlib run`` recorded as outputs of their own (a
    rate-capped IOPS log can repeat exactly across hosts and cells) are read
    on their own, under a key salted with their path.
    """
    plan = _Plan(previous)

    def many() -> None:
        batches.workers = _worker_count()
        if batches.workers:
            _warm_pool()  # its imports overlap with listing and hashing the files

    for path, rel in _raw_files(study, report, many):
        if not previous:
            batches.add((path, rel, None))
            continue
        sha, head, size = _fingerprint(path)
        if not plan.sort_out(study, report, current, path, rel, sha, size == 0):
            continue
        try:
            found: str | FormatError = _detect_head(path, head, size)
        except FormatError as exc:
            found = exc
        if may_be_member(head[:16]):
            plan.hold((path, rel, sha), found)
        else:
            plan.route((path, rel, sha), found, batches.add, report)
    return plan


def _forget_stale(processed: Path, previous: dict, current: dict, todo: list, report: IngestReport) -> None:
    """Drop the rows of files that changed or disappeared since the last ingest."""
    changing = {rel for _, rel, _ in todo}
    # the batches are written already: of the files in ``current``, only the unchanged ones keep their old rows
    kept_hashes = {current[rel]["sha256"] for rel in report.unchanged if "key" not in current[rel]}
    for rel, entry in previous.items():
        if rel in current and rel not in changing:
            continue
        if "key" in entry or "unit" in entry:
            _drop_source(processed, entry["part"], entry.get("key") or entry["unit"])
        elif entry["sha256"] not in kept_hashes:
            _drop_source(processed, entry.get("part", entry["sha256"][:16]), entry["sha256"])
        if rel not in changing:
            report.removed.append(rel)


def ingest_study(raw_dir: str | Path, processed_root: str | Path = PROCESSED) -> IngestReport:
    """Ingest every raw file of a study into ``<processed_root>/<study folder>/``.

    Parameters
    ----------
    raw_dir
        ``data/raw/<study>``: raw tool outputs (any folder depth) and an
        optional ``study.toml``.
    processed_root
        Where processed studies live (``data/processed`` by default).

    Returns
    -------
    IngestReport
        Files ingested, unchanged (same content as last time), removed,
        skipped (not tool output, or a duplicate) and quarantined with reasons.

    Raises
    ------
    StudyError
        When the folder or its ``study.toml`` is unusable.

    """
    study = load_study(raw_dir)
    _run_manifest.cache_clear()
    _hcibench_case.cache_clear()
    _folder_facts.cache_clear()
    processed = processed_dir_for(study.folder, Path(processed_root))
    processed.mkdir(parents=True, exist_ok=True)
    with open(processed / ".ingest.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another ingest of this study (a notebook's, say) finishes first
        return _ingest_locked(study, processed)


def _read_batches_and_folders(
    study: Study, processed: Path, previous: dict, report: IngestReport, current: dict
) -> _Plan:
    """Plan the ingest; read the fio JSON batches and the vdbench output folders.

    Returns the plan for the rest.
    """
    spool = processed / ".batches"  # where workers leave their results (see ingest_worker.extract_json_batch)
    shutil.rmtree(spool, ignore_errors=True)  # an interrupted ingest's
    spool.mkdir()
    batches = _Batches(extract_json_batch, spool, here=extract_json_batch)
    salt = os.urandom(8).hex()  # batch parts are salted per ingest: a new part never meets an old one being cleaned up
    try:
        plan = _plan(study, previous, report, current, batches)
        for index, result in batches.in_order():  # this process builds and writes the frames
            _finish_batch(batches.batches[index], result, study, processed, salt, report, current, plan)
        folders, rest = _vdbench_folders(study, plan.held, current, report)
        for item in rest:
            plan.route(item, plan.held_formats[item[1]], plan.late_json.append, report)
        members = [(study.folder / rel, rel, sha) for folder in folders for rel, sha in folder]
        _forget_stale(processed, previous, current, plan.todo + plan.copies + members, report)
        for folder in folders:
            _ingest_vdbench_folder(folder, study, processed, report, current)
        if plan.late_json:
            _finish_batch(
                plan.late_json, extract_json_batch(plan.late_json), study, processed, salt, report, current, plan
            )
    finally:
        batches.close()
        shutil.rmtree(spool, ignore_errors=True)
    return plan


def _ingest_locked(study: Study, processed: Path) -> IngestReport:
    key = study_key(study)
    previous = _load_manifest(processed, key)
    if not previous:  # first ingest, or study.toml or the schema changed: rebuild every part
        for part in processed.glob("*/*.parquet"):
            part.unlink()
    before = raw_state(study)  # taken first: a file that changes while it is read shows as changed later
    (processed / RAW_STATE).unlink(missing_ok=True)  # until this ingest finishes, readers are told it did not
    report = IngestReport(study=study.name, processed=processed)
    current: dict[str, dict] = {}
    plan = _read_batches_and_folders(study, processed, previous, report, current)
    others, copies = plan.others, plan.copies
    logs = [o for o in others if o[3] == "fio-log"]
    for path, rel, sha, fmt in sorted(o for o in others if o[3] != "fio-log"):
        if fmt in _NO_RESULTS:
            report.skipped.append((rel, _why_no_results(path)))
            continue
        _ingest_one(report, current, rel, functools.partial(_ingest_file, path, rel, sha, fmt, study, processed, "ns"))
    units = _LogUnits(study, current)
    small = [(path, rel, sha, units(rel)) for path, rel, sha, _ in logs if path.stat().st_size <= STREAM_BYTES]
    for path, rel, sha, _ in logs:
        if path.stat().st_size > STREAM_BYTES:
            _ingest_one(
                report,
                current,
                rel,
                functools.partial(_ingest_file, path, rel, sha, "fio-log", study, processed, units(rel)),
            )
    _ingest_log_batches(small, study, processed, report, current)
    for path, rel, sha in copies:
        _ingest_one(report, current, rel, functools.partial(_ingest_copy, path, rel, sha, study, processed, units(rel)))
    report.ingested.sort()
    report.quarantined.sort()
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "study": study.name,
        "study_key": key,
        "files": dict(sorted(current.items())),
    }
    _atomic_write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2), processed / MANIFEST)
    _write_quarantine(processed, report.quarantined)
    _remove_unlisted_parts(processed, {entry["part"] for entry in current.values()})
    _atomic_write_bytes(orjson.dumps({"study_key": key, "files": before}), processed / RAW_STATE)
    return report


def _remove_unlisted_parts(processed: Path, parts: set[str]) -> None:
    """Delete parts the manifest does not list: left by an ingest that was interrupted, they would be read twice."""
    for table in TABLES:
        for path in (processed / table).glob("*.parquet*"):
            if path.name.split(".")[0] not in parts:
                path.unlink()


def _why_no_results(path: Path) -> str:
    try:
        read(path)
    except FormatError as exc:
        return exc.expected
    return "holds no results"


def _vdbench_folders(
    study: Study, todo: list, current: dict, report: IngestReport
) -> tuple[list[list[tuple[str, str]]], list]:
    """Vdbench output folders to (re)read as units, and the files left to read one by one.

    A folder with a summary, totals or flatfile and other vdbench files is one
    unit, named by the hash of all its files: when any of them changed, came or
    went, the whole folder is read again; otherwise its files stay as they are.
    """
    by_folder: dict[str, dict[str, tuple[str, str | None]]] = {}
    for path, rel, sha in todo:
        kind = member_kind(path)
        if kind:
            by_folder.setdefault(str(Path(rel).parent), {})[rel] = (sha, kind)
    for rel, entry in current.items():
        if entry.get("format") == "vdbench-output":
            by_folder.setdefault(str(Path(rel).parent), {})[rel] = (entry["sha256"], entry.get("kind"))
    units, claimed = [], set()
    for files in by_folder.values():
        key = folder_key([(rel, sha) for rel, (sha, _) in files.items()])
        if len(files) < 2 or not {k for _, k in files.values()} & set(RESULT_KINDS):
            continue
        if all(current.get(rel, {}).get("unit") == key for rel in files):
            continue  # unchanged: same files, same content
        for rel in files:
            if rel in current:
                del current[rel]
                report.unchanged.remove(rel)
        units.append(sorted((rel, sha) for rel, (sha, _) in files.items()))
        claimed.update(files)
    return units, [item for item in todo if item[1] not in claimed]


def _ingest_vdbench_folder(
    files: list[tuple[str, str]], study: Study, processed: Path, report: IngestReport, current: dict
) -> None:
    """Read one vdbench output folder and write it as one part; a bad file is quarantined, the rest kept."""
    key = folder_key(files)
    paths = {study.folder / rel: (rel, sha) for rel, sha in files}
    try:
        result = read_vdbench_folder([(p, sha) for p, (_, sha) in paths.items()], key)
    except FormatError as exc:
        report.quarantined.extend((rel, f"{exc.where}: {exc.expected}") for rel, _ in files)
        return
    _write_part(processed, key[:16], result.tables, study, files)
    version = _tool_version(result.tables)
    for path, (rel, sha) in paths.items():
        current[rel] = {
            "sha256": sha,
            "format": "vdbench-output",
            "kind": result.kinds.get(path),
            "part": key[:16],
            "unit": key,
            "tool_version": version,
        }
        if path in result.problems:
            report.quarantined.append((rel, result.problems[path]))
        elif result.used.get(path, "not needed") == "not needed":
            report.skipped.append(
                (rel, f"vdbench {current[rel]['kind']} file, not needed (its folder is read from its summary)")
            )
        else:
            report.ingested.append(rel)


def _write_quarantine(processed: Path, rows: list[tuple[str, str]]) -> None:
    target = processed / QUARANTINE
    tmp = target.with_suffix(".csv.tmp")
    processed.mkdir(parents=True, exist_ok=True)
    with open(tmp, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["file", "reason"])
        writer.writerows(rows)
    os.replace(tmp, target)
