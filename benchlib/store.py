"""Reading processed studies: ``data/processed/<study>/``. Nothing here writes.

A processed study holds one folder of Parquet parts per table, ``manifest.json``
(which raw file, by SHA-256, went into which part), ``quarantine.csv`` (the files
that could not be read, and why) and ``raw-files.json`` (the size, modification
time and SHA-256 of every raw file the ingest read, the first two taken before it
read them). Ingest (:mod:`benchlib.ingest`) writes them; notebooks, the report and the claims read
them through :func:`open_study`, which first checks that they still describe the
raw files. When they do not (a raw file changed, appeared or went away, the
``study.toml`` changed, an ingest was interrupted, or an older benchlib wrote
them), it says so and what to run, instead of drawing from stale tables. So a
notebook runs from a read-only checkout or an unpacked verification bundle.

>>> study = open_study("loopback-fio")                          # doctest: +SKIP
>>> study.tables(only=("runs", "results")).results.height       # doctest: +SKIP
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

import orjson
import polars as pl

from benchlib.errors import BenchlibError
from benchlib.paths import PROCESSED, RAW, processed_dir_for
from benchlib.schema import SCHEMA_VERSION, TABLES, Tables, empty, unnest_bins
from benchlib.study import RUN_MANIFEST, STUDY_FILE, Study, load_study, study_files

MANIFEST = "manifest.json"
QUARANTINE = "quarantine.csv"
#: ``{"study_key": ..., "files": {path in the study: [size, mtime_ns, sha256]}}``, written last by an ingest.
RAW_STATE = "raw-files.json"
#: Files of a study folder that are not tool output (notes, scripts, plans, benchlib's own records).
NOT_OUTPUT = re.compile(
    r"(^|/)(\.|README|LICENSE|benchlib-[^/]*\.json$|swat_mon[^/]*$)|\.(stderr|banner)\.txt$"
    r"|\.(md|toml|fio|job|conf|cfg|ini|sh|py|ipynb|yml|yaml)$",
    re.IGNORECASE,
)
#: How many changed files a stale-data message names before it counts the rest.
_NAMED = 5


class StaleStudyError(BenchlibError):
    """The processed tables of a study are missing, or no longer describe its raw files."""


@functools.cache
def readers_digest() -> str:
    """Return a digest of the code that turns raw files into tables: readers, ingest, schema, units, study."""
    package = Path(__file__).resolve().parent
    files = sorted(
        [
            *(package / "sources").rglob("*.py"),
            *(package / "ingest").rglob("*.py"),
            package / "schema.py",
            package / "units.py",
            package / "study.py",
            package / "_bins.c",
        ]
    )
    digest = hashlib.sha256()
    for path in files:
        if path.is_file():
            digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def study_key(study: Study) -> str:
    """Return what every part of a processed study depends on besides its own raw file.

    That is ``study.toml``, the schema and the code of the readers (a reader that now reads
    a file differently must not leave the old rows standing).
    """
    declaration = study.folder / STUDY_FILE
    digest = hashlib.sha256(f"schema={SCHEMA_VERSION}\nreaders={readers_digest()}".encode())
    if declaration.exists():
        digest.update(declaration.read_bytes())
    return digest.hexdigest()


#: Files that are not tool output but decide what a file's runs are (levels, repetition, host).
PROVENANCE_FILES = (RUN_MANIFEST, "hcibench.cfg", "benchlib-vsphere.json", "benchlib-esxi.json")


def is_ingest_input(path: Path, rel: str) -> bool:
    """Tell whether ingest reads this file: tool output, ``study.toml``, the records that set levels or hosts."""
    return rel == STUDY_FILE or path.name in PROVENANCE_FILES or not NOT_OUTPUT.search(rel)


def file_sha256(path: Path) -> str | None:
    """Return a file's SHA-256 (None when it cannot be read)."""
    return _sha256(path)


def file_state(path: Path, left_out: str | None) -> list[int]:
    """Return ``[size, mtime_ns]`` of a raw file (of what a link leads to; ``[-1, -1]`` for one not read)."""
    if left_out:
        return [-1, -1]
    try:
        info = path.stat()
    except OSError:
        return [-1, -1]
    return [info.st_size, info.st_mtime_ns]


def raw_state(study: Study) -> dict[str, list[int]]:
    """Return ``path in the study -> [size, mtime_ns]`` of every file an ingest reads.

    Ingest records the same while it lists the study (:func:`benchlib.ingest.triage.raw_files`).
    """
    return {
        rel: file_state(path, left_out)
        for path, rel, left_out in study_files(study.folder)
        if is_ingest_input(path, rel)
    }


def read_manifest(processed: Path) -> dict:
    """Return the manifest of a processed study (``{}`` when there is none)."""
    path = processed / MANIFEST
    return orjson.loads(path.read_bytes()) if path.exists() else {}


def check_schema_version(processed: Path) -> None:
    """Refuse a processed study an older benchlib wrote: its layout may differ (schema 5 stores bins as lists)."""
    try:
        with open(processed / MANIFEST, "rb") as handle:
            head = handle.read(200)
    except FileNotFoundError:
        return
    found = re.search(rb'"schema_version":\s*(\d+)', head)
    if found and int(found.group(1)) != SCHEMA_VERSION:
        raise BenchlibError(
            f"{processed}: written with schema version {int(found.group(1))}, this benchlib reads version "
            f"{SCHEMA_VERSION}; run `benchlib ingest` on its raw folder again (the raw files are unchanged)"
        )


def _sha256(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            while data := handle.read(1 << 20):
                digest.update(data)
    except OSError:
        return None
    return digest.hexdigest()


def _names(paths: list[str]) -> str:
    shown = ", ".join(paths[:_NAMED])
    return shown + (f" and {len(paths) - _NAMED} more" if len(paths) > _NAMED else "")


def staleness(study: Study, processed: Path) -> str | None:
    """Why the processed tables at ``processed`` do not describe the study's raw files now, or None when they do.

    A file whose size and modification time are as recorded is taken as unchanged
    (as git and make do); one whose time moved but whose content hashes as before
    (a ``touch``, a copy that did not keep times) is unchanged too.
    """
    if not (processed / MANIFEST).exists():
        return "it has not been ingested"
    if not (processed / RAW_STATE).exists():
        return "its last ingest did not finish (or an older benchlib wrote it)"
    recorded = orjson.loads((processed / RAW_STATE).read_bytes())
    if recorded.get("study_key") != study_key(study):
        return f"{STUDY_FILE}, benchlib's schema or its readers changed since the last ingest"
    before, now = recorded.get("files", {}), raw_state(study)
    manifest = read_manifest(processed).get("files", {})
    changed = []
    for rel in sorted(set(before) & set(now) - {STUDY_FILE}):  # the study key covers study.toml's content
        size_time, recorded_sha = before[rel][:2], (before[rel][2:] or [None])[0]
        if size_time != now[rel]:
            known = recorded_sha or manifest.get(rel, {}).get("sha256")
            if known is None or now[rel][0] != size_time[0] or _sha256(study.folder / rel) != known:
                changed.append(rel)
    added, removed = sorted(set(now) - set(before)), sorted(set(before) - set(now))
    parts = [
        f"{len(found)} {what} ({_names(found)})"
        for found, what in ((changed, "changed"), (added, "new"), (removed, "gone"))
        if found
    ]
    return "raw files changed since the last ingest: " + "; ".join(parts) if parts else None


@dataclass(frozen=True)
class ProcessedStudy:
    """A study's processed tables, checked against its raw files when opened (:func:`open_study`)."""

    study: Study
    processed: Path

    def scan(self, table: str) -> pl.LazyFrame:
        """Lazily scan one table (an empty frame when it has no parts)."""
        return scan_table(self.processed, table)

    def tables(self, only: tuple[str, ...] = tuple(TABLES)) -> Tables:
        """Return the tables (all five, or ``only`` these; the others empty), sorted by run."""
        return load_study_tables(self.processed, only)


#: set by ``benchlib report`` for its pages' kernels to the processed folder it checked against the raw files
#: before they ran: each page then opens the study without stat-ing every raw file again (0.2 s a page at
#: 1,000 files)
CHECKED_BY_BUILD = "BENCHLIB_CHECKED_STUDY"


def open_study(study: str | Path, processed_root: str | Path | None = None) -> ProcessedStudy:
    """Open a processed study for reading: ``study`` is a name under ``data/raw/`` or a raw study folder.

    Raises
    ------
    StaleStudyError
        When the study has not been ingested, or its tables no longer describe its
        raw files; the message names the files and the command to run.

    """
    folder = Path(study) if Path(study).is_dir() and not (RAW / str(study)).is_dir() else RAW / str(study)
    declared = load_study(folder)
    processed = processed_dir_for(declared.folder, Path(processed_root) if processed_root else PROCESSED)
    # a page of a report build: the build checked this study's raw files once, before its pages ran
    checked = os.environ.get(CHECKED_BY_BUILD) == str(processed.resolve())
    why = None if checked else staleness(declared, processed)
    if why:
        raise StaleStudyError(
            f"{processed}: the processed tables of study {declared.name!r} are not current ({why}); "
            f"run `benchlib ingest {folder}` and then this again"
        )
    check_schema_version(processed)
    return ProcessedStudy(declared, processed)


def raw_data_digest(processed: str | Path) -> str | None:
    """Return one SHA-256 of the raw data a processed study was read from: every file's path, size and hash.

    Times and benchlib's own version are left out, so the same files give the same digest on any
    machine (a reader checks a report or a verification against the data they hold). None before
    an ingest has finished.
    """
    path = Path(processed) / RAW_STATE
    if not path.is_file():
        return None
    files = orjson.loads(path.read_bytes()).get("files", {})
    digest = hashlib.sha256()
    for rel in sorted(files):
        entry = files[rel]  # [size, modification time, sha256]
        if len(entry) < 3 or not entry[2]:
            return None  # a state written without hashes cannot vouch for the data
        digest.update(f"{rel}\0{entry[0]}\0{entry[2]}\n".encode())
    return digest.hexdigest()


def _parts(processed: Path, table: str) -> list[Path]:
    if table not in TABLES:
        raise BenchlibError(f"unknown table {table!r}; tables are {', '.join(TABLES)}")
    check_schema_version(processed)
    return sorted((processed / table).glob("*.parquet"))


def scan_table(processed: str | Path, table: str) -> pl.LazyFrame:
    """Lazily scan one table of a processed study (an empty frame when it has no parts)."""
    return _scan_parts(_parts(Path(processed), table), table)


def _scan_parts(parts: list[Path], table: str) -> pl.LazyFrame:
    if not parts:
        return pl.LazyFrame(schema=TABLES[table])
    frame = pl.concat([pl.scan_parquet(p) for p in parts], how="diagonal_relaxed")
    # a streamed capture stores its names as categories (one copy per part); readers get the schema's strings
    frame = frame.with_columns(pl.col(pl.Categorical).cast(pl.String))
    return unnest_bins(frame) if table == "latency_bins" else frame


#: the tables last loaded, per processed folder and table, with the stamp of the parts they were read from:
#: a report's pages run one after another in a warm kernel and each opens the same study (a 1,000-run study's
#: runs and results are read once, not once a page); a part written, replaced or removed changes the stamp
_LOADED: dict[tuple[str, str], tuple[tuple, pl.DataFrame]] = {}


def _stamp(parts: list[Path]) -> tuple:
    return tuple((p.name, s.st_mtime_ns, s.st_size) for p in parts for s in (p.stat(),))


def parts_stamp(processed: str | Path, table: str) -> tuple:
    """Return what changes when a table of a processed study is written again: its parts' names, times and sizes."""
    return _stamp(_parts(Path(processed), table))


def load_study_tables(processed: str | Path, only: tuple[str, ...] = tuple(TABLES)) -> Tables:
    """Return the tables of a processed study (all five, or ``only`` these; the others empty), sorted by run."""
    frames = {}
    for table in only:
        parts = _parts(Path(processed), table)
        key, stamp = (str(Path(processed).resolve()), table), _stamp(parts)
        known = _LOADED.get(key)
        if known is not None and known[0] == stamp:
            frames[table] = known[1]
            continue
        frame = _scan_parts(parts, table).collect()
        sort_by = [
            c for c in ("run_id", "client", "job_index", "direction", "time_ns", "bin_index") if c in frame.columns
        ]
        frames[table] = frame.sort(sort_by, nulls_last=True, maintain_order=True)
        if table in ("runs", "results"):  # the small tables every page reads; intervals and bins can be millions
            _LOADED[key] = (stamp, frames[table])
            while len(_LOADED) > 8:  # a few studies at a time (a test suite opens hundreds)
                del _LOADED[next(iter(_LOADED))]
    return Tables(**{table: frames[table] if table in frames else _empty(table) for table in TABLES})


@functools.cache
def _empty(table: str) -> pl.DataFrame:
    """Return :func:`benchlib.schema.empty`, made once: a page asks for the tables it does not read a dozen times."""
    return empty(table)
