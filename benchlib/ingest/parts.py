"""Writing a processed study: Parquet parts, the manifest, the quarantine report, the raw-file state.

Every file is written to a temporary name and renamed over the old one, so a
reader (or an ingest killed at any moment) never sees half a file. A part holds
the rows of one raw file, one folder read as a unit, or one batch; its run ids
start with the first 16 hex digits of their file's SHA-256 (or key), which is
how :func:`drop_source` removes one file's rows from a batch's part.
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Callable
from pathlib import Path

import orjson
import polars as pl

from benchlib.ingest.provenance import check_levels, study_frame, target_labels, vsphere_labels
from benchlib.ingest.provenance import digest as provenance_digest
from benchlib.ingest.state import IngestState
from benchlib.schema import SCHEMA_VERSION, TABLES, Tables, label_expr, nest_bins, validate_stored_bins
from benchlib.sources.registry import own_span_formats
from benchlib.store import MANIFEST, QUARANTINE, RAW_STATE
from benchlib.study import Study


def _write_through(target: Path, write: Callable[[Path], object]) -> None:
    """Call ``write(temporary path)``, then rename the temporary file over ``target``.

    When writing fails (a full disk, an interrupt), the temporary file is removed; polars' own
    error for a failed write (``underlying IO error: No space left on device (os error 28)``)
    is raised as the :class:`OSError` it reports, so the caller says "out of space" once.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    try:
        write(tmp)
        os.replace(tmp, target)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        found = re.search(r"os error (\d+)", str(exc)) if isinstance(exc, pl.exceptions.PolarsError) else None
        if found:
            code = int(found[1])
            raise OSError(code, os.strerror(code), str(target)) from exc
        raise


#: rows of stored latency bins (each a run's member, job, direction and kind, its bins as lists) per row group:
#: sorted by run, a page that reads a few runs' bins decodes their groups alone (the statistics skip the
#: rest), not every run's (0.11 s a page at 1,000 runs, 0.02 s so)
BIN_ROWS_PER_GROUP = 64


def write_parquet(frame: pl.DataFrame | pl.LazyFrame, target: Path, row_group_size: int | None = None) -> None:
    """Write a frame (a lazy one streamed) to ``target`` through a temporary file, ``row_group_size`` rows a group."""
    if isinstance(frame, pl.LazyFrame):  # a large file streamed: the fastest zstd level, no page statistics
        _write_through(target, lambda tmp: frame.sink_parquet(tmp, compression_level=1, statistics=False))
    else:
        _write_through(target, lambda tmp: frame.write_parquet(tmp, row_group_size=row_group_size))


def write_bytes(data: bytes, target: Path) -> None:
    """Write ``data`` to ``target`` through a temporary file."""
    _write_through(target, lambda tmp: tmp.write_bytes(data))


def write_part(
    study: Study,
    processed: Path,
    part: str,
    tables: Tables,
    members: list[tuple[str, str]],
    bins: pl.DataFrame | None = None,
) -> None:
    """Write one part of every table from the raw files ``members`` (``[(rel, sha256)]``).

    ``bins``: latency_bins already in their stored form (else from ``tables``).
    """
    runs = tables.runs.drop("source", "repetition").join(study_frame(study, members), on="sha256", how="left")
    # a log stamped in Unix time says when its member ran by the member's own clock: that span is kept
    own = pl.col("format").is_in(list(own_span_formats())) & pl.col("start_time").is_not_null()
    runs = runs.with_columns(
        pl.lit(study.name).alias("study"),
        pl.coalesce("host", "run_host").alias("host"),
        # a run that benchlib run recorded lasted from its start to its end by benchlib's clock (the
        # whole invocation, ramp and start included; client/server output states no span of its own)
        pl.when(own).then("duration_ns").otherwise(pl.coalesce("run_span_ns", "duration_ns")).alias("duration_ns"),
        pl.when(own).then("start_time").otherwise(pl.coalesce("run_start", "start_time")).alias("start_time"),
        pl.coalesce("path_run_group", "run_group").alias("run_group"),
    )
    extra = [
        vsphere_labels(study, rel, h) + target_labels(study, rel, h)
        for rel, h in zip((s.split("/", 1)[-1] for s in runs["source"]), runs["host"], strict=True)
    ]
    if any(extra):  # what vCenter and esxcli said of the run's VM and LUN (benchlib run's records beside it)
        merged = [(old or []) + new for old, new in zip(runs["labels"].to_list(), extra, strict=True)]
        runs = runs.with_columns(pl.Series("labels", merged, dtype=runs.schema["labels"]))
    if runs["labels"].list.len().sum():  # a row's own label (published tables) wins over its file's mapping
        runs = runs.with_columns(pl.coalesce(label_expr(f), pl.col(f)).alias(f) for f in study.factors)
    check_levels(study, runs)
    runs = runs.select(list(tables.runs.columns) + list(study.factors))
    bins = nest_bins(tables.latency_bins) if bins is None else bins
    stored = {"runs": runs, "latency_bins": validate_stored_bins(bins).sort("run_id", maintain_order=True)}
    for name, frame in tables.items():
        frame = stored.get(name, frame)
        if frame.height:
            grouped = BIN_ROWS_PER_GROUP if name == "latency_bins" else None
            write_parquet(frame, processed / name / f"{part}.parquet", grouped)


def drop_source(processed: Path, part: str, sha: str) -> None:
    """Remove one raw file's rows from a part (deleting the part when nothing is left)."""
    prefix = sha[:16]
    for table in TABLES:
        path = processed / table / f"{part}.parquet"
        if not path.exists():
            continue
        kept = pl.read_parquet(path).filter(~pl.col("run_id").str.starts_with(prefix))
        if kept.height:
            write_parquet(kept, path, BIN_ROWS_PER_GROUP if table == "latency_bins" else None)
        else:
            path.unlink()


def previous_entries(processed: Path, key: str) -> dict:
    """Return the manifest entries of the last ingest ({} on a first one, or when study.toml or the schema changed)."""
    path = processed / MANIFEST
    if not path.exists():
        return {}
    manifest = orjson.loads(path.read_bytes())
    return manifest.get("files", {}) if manifest.get("study_key") == key else {}


def forget_stale(state: IngestState, changing: set[str]) -> None:
    """Drop the rows of files that changed (``changing``) or disappeared since the last ingest."""
    current, report = state.current, state.report
    # the batches are written already: of the files in ``current``, only the unchanged ones keep their old rows
    kept_hashes = {current[rel]["sha256"] for rel in report.unchanged if "key" not in current[rel]}
    for rel, entry in state.previous.items():
        if rel in current and rel not in changing:
            continue
        if "key" in entry or "unit" in entry:
            drop_source(state.processed, entry["part"], entry.get("key") or entry["unit"])
        elif entry["sha256"] not in kept_hashes:
            drop_source(state.processed, entry.get("part", entry["sha256"][:16]), entry["sha256"])
        if rel not in changing:
            report.removed.append(rel)


def finish(state: IngestState, key: str) -> None:
    """Write the manifest and the quarantine report, remove unlisted parts, and last the raw-file state.

    The raw-file state (``state.raw_files``, taken as the study was listed) is what readers
    (:func:`benchlib.store.open_study`) compare with the raw files to know the tables are current.
    """
    report = state.report
    report.ingested.sort()
    report.quarantined.sort()
    for rel, entry in state.current.items():
        entry.setdefault("provenance", provenance_digest(state.study, rel))
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "study": state.study.name,
        "study_key": key,
        "files": dict(sorted(state.current.items())),
    }
    write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2), state.processed / MANIFEST)
    write_quarantine(state.processed, report.quarantined)
    remove_unlisted_parts(state.processed, {entry["part"] for entry in state.current.values()})
    hashes = {**state.hashes, **{rel: entry["sha256"] for rel, entry in state.current.items()}}
    files = {rel: [*size_time, hashes.get(rel)] for rel, size_time in sorted(state.raw_files.items())}
    write_bytes(orjson.dumps({"study_key": key, "files": files}), state.processed / RAW_STATE)


def remove_unlisted_parts(processed: Path, parts: set[str]) -> None:
    """Delete parts the manifest does not list: left by an ingest that was interrupted, they would be read twice."""
    for table in TABLES:
        for path in (processed / table).glob("*.parquet*"):
            if path.name.split(".")[0] not in parts:
                path.unlink()


def write_quarantine(processed: Path, rows: list[tuple[str, str]]) -> None:
    """Write ``quarantine.csv``: every file that could not be read, and why."""

    def write(tmp: Path) -> None:
        with open(tmp, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["file", "reason"])
            writer.writerows(rows)

    _write_through(processed / QUARANTINE, write)
