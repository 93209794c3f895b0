"""Raw tool output -> tidy Parquet, incrementally, with a quarantine report.

``data/processed/<study>/`` holds one folder per table with one Parquet file
per raw file (named by the raw file's SHA-256), ``manifest.json`` (what was
ingested from which file, with its hash) and ``quarantine.csv`` (the files
that could not be read, and why). A raw file whose content, the study
declaration and the schema version are unchanged is not read again.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from benchlib.errors import BenchlibError, FormatError
from benchlib.paths import PROCESSED, processed_dir_for
from benchlib.schema import SCHEMA_VERSION, TABLES, Tables, conform
from benchlib.sources import detect, read
from benchlib.sources._common import run_id, sha256_of
from benchlib.sources.fio_log import scan_fio_log
from benchlib.study import STUDY_FILE, Study, load_study

MANIFEST = "manifest.json"
QUARANTINE = "quarantine.csv"
#: Logs larger than this are streamed to Parquet instead of read into memory.
STREAM_BYTES = 32 * 1024 * 1024
_NOT_OUTPUT = re.compile(r"(^|/)(\.|README|LICENSE)|\.(md|txt\.md|toml|fio|job|conf|ini|sh|py|ipynb|yml|yaml)$", re.IGNORECASE)
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


def _atomic_write_text(text: str, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(target.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)


def _raw_files(study: Study) -> list[Path]:
    files = []
    for path in sorted(study.folder.rglob("*")):
        rel = path.relative_to(study.folder).as_posix()
        if path.is_file() and path.name != STUDY_FILE and not _NOT_OUTPUT.search(rel):
            files.append(path)
    return files


def _study_key(study: Study) -> str:
    declaration = study.folder / STUDY_FILE
    digest = hashlib.sha256(f"schema={SCHEMA_VERSION}".encode())
    if declaration.exists():
        digest.update(declaration.read_bytes())
    return digest.hexdigest()


def _with_study_columns(runs: pl.DataFrame, study: Study, rel: str) -> pl.DataFrame:
    levels = study.levels_for(rel)
    return runs.with_columns(
        pl.lit(study.name).alias("study"),
        pl.lit(f"{study.folder.name}/{rel}").alias("source"),
        *[pl.lit(level, pl.String).alias(factor) for factor, level in levels.items()],
    )


def _log_latency_unit(study: Study, versions: dict[str, str | None], rel: str) -> str:
    """``us`` for logs beside fio 2.x output, ``ns`` otherwise, unless study.toml says."""
    if study.log_latency_unit:
        return study.log_latency_unit
    folder = str(Path(rel).parent)
    near = [v for r, v in versions.items() if str(Path(r).parent) == folder and v]
    return "us" if near and all(v.startswith("fio-2.") for v in near) else "ns"


def _remove_parts(processed: Path, sha: str) -> None:
    for table in TABLES:
        part = processed / table / f"{sha[:16]}.parquet"
        part.unlink(missing_ok=True)


def _ingest_file(path: Path, rel: str, sha: str, study: Study, processed: Path, unit: str) -> dict:
    fmt = detect(path)
    if fmt == "fio-log" and path.stat().st_size > STREAM_BYTES and "_hist" not in path.name:
        lazy = scan_fio_log(path, latency_unit=unit, sha256=sha)
        _atomic_write_parquet(lazy, processed / "intervals" / f"{sha[:16]}.parquet")
        stats = pl.scan_parquet(processed / "intervals" / f"{sha[:16]}.parquet").select(pl.col("time_ns").max()).collect()
        runs = pl.DataFrame([{"run_id": run_id(sha, 0, None), "tool": "fio", "format": "fio-log", "is_aggregate": False,
                              "duration_ns": stats.item(), "sha256": sha, "document_index": 0}])
        tables = {"runs": conform(runs, "runs")}
    else:
        parsed = read(path, fmt) if fmt != "fio-log" else _read_log(path, unit)
        tables = {name: frame for name, frame in parsed.items() if frame.height}
    tables["runs"] = _with_study_columns(tables["runs"], study, rel)
    for name, frame in tables.items():
        _atomic_write_parquet(frame, processed / name / f"{sha[:16]}.parquet")
    versions = tables["runs"]["tool_version"].drop_nulls().unique().to_list()
    return {"sha256": sha, "format": fmt, "tables": sorted(tables), "tool_version": versions[0] if versions else None}


def _read_log(path: Path, unit: str) -> Tables:
    from benchlib.sources.fio_log import read_fio_log

    return read_fio_log(path, latency_unit=unit)


def _load_manifest(processed: Path, key: str) -> dict:
    path = processed / MANIFEST
    if not path.exists():
        return {}
    manifest = json.loads(path.read_text(encoding="utf-8"))
    return manifest.get("files", {}) if manifest.get("study_key") == key else {}


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
    processed = processed_dir_for(study.folder, Path(processed_root))
    key = _study_key(study)
    previous = _load_manifest(processed, key)
    if not previous and processed.exists():  # study.toml or schema changed: rebuild every part
        for table in TABLES:
            for part in (processed / table).glob("*.parquet"):
                part.unlink()
    report = IngestReport(study=study.name, processed=processed)
    current: dict[str, dict] = {}
    seen: dict[str, str] = {}
    files = _raw_files(study)
    hashes = {p: sha256_of(p) for p in files}
    ordered = sorted(files, key=lambda p: (bool(_FIO_LOG_NAME.search(p.name)), p.as_posix()))
    for path in ordered:
        rel = path.relative_to(study.folder).as_posix()
        sha = hashes[path]
        if sha in seen:
            report.skipped.append((rel, f"same content as {seen[sha]}"))
            continue
        if path.stat().st_size == 0 and _FIO_LOG_NAME.search(path.name):
            report.skipped.append((rel, "empty fio log (fio leaves slat logs empty for synchronous engines)"))
            continue
        seen[sha] = rel
        if previous.get(rel, {}).get("sha256") == sha:
            current[rel] = previous[rel]
            report.unchanged.append(rel)
            continue
        if rel in previous:
            _remove_parts(processed, previous[rel]["sha256"])
        versions = {r: e.get("tool_version") for r, e in current.items()}
        try:
            current[rel] = _ingest_file(path, rel, sha, study, processed, _log_latency_unit(study, versions, rel))
            report.ingested.append(rel)
        except FormatError as exc:
            _remove_parts(processed, sha)
            report.quarantined.append((rel, f"{exc.where}: {exc.expected}"))
    for rel, entry in previous.items():
        if rel not in current:
            if all(e["sha256"] != entry["sha256"] for e in current.values()):
                _remove_parts(processed, entry["sha256"])
            report.removed.append(rel)
    manifest = {"schema_version": SCHEMA_VERSION, "study": study.name, "study_key": key, "files": dict(sorted(current.items()))}
    _atomic_write_text(json.dumps(manifest, indent=1), processed / MANIFEST)
    _write_quarantine(processed, report.quarantined)
    return report


def _write_quarantine(processed: Path, rows: list[tuple[str, str]]) -> None:
    target = processed / QUARANTINE
    tmp = target.with_suffix(".csv.tmp")
    processed.mkdir(parents=True, exist_ok=True)
    with open(tmp, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["file", "reason"])
        writer.writerows(rows)
    os.replace(tmp, target)


def scan_table(processed: str | Path, table: str) -> pl.LazyFrame:
    """Lazily scan one table of a processed study (an empty frame when it has no parts)."""
    if table not in TABLES:
        raise BenchlibError(f"unknown table {table!r}; tables are {', '.join(TABLES)}")
    parts = sorted((Path(processed) / table).glob("*.parquet"))
    if not parts:
        return pl.LazyFrame(schema=TABLES[table])
    return pl.concat([pl.scan_parquet(p) for p in parts], how="diagonal_relaxed")


def load_study_tables(processed: str | Path) -> Tables:
    """All five tables of a processed study, read into memory and sorted by run."""
    frames = {}
    for table in TABLES:
        frame = scan_table(processed, table).collect()
        sort_by = [c for c in ("run_id", "client", "job_index", "direction", "time_ns", "bin_index") if c in frame.columns]
        frames[table] = frame.sort(sort_by, nulls_last=True, maintain_order=True)
    return Tables(**frames)
