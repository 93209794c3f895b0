"""Writing processed studies: raw tool output -> tidy Parquet, incrementally, with a quarantine report.

``data/processed/<study>/`` holds one folder per table of Parquet parts (one
part per raw file, per folder read as a unit, or per batch of files),
``manifest.json`` (which raw file, by SHA-256, went into which part),
``quarantine.csv`` (the files that could not be read, and why) and
``raw-files.json`` (what the raw files were when this ingest began; readers check
it, :mod:`benchlib.store`). A raw file whose content, the study declaration and
the schema version are unchanged is not read again.

An ingest runs these stages over one :class:`~.state.IngestState`:

1. :mod:`.triage` lists the raw files and sorts each one out (skipped, unchanged,
   a copy, or to read, with its format, by content);
2. :mod:`.reading` reads them as the format registry says (:mod:`benchlib.sources.registry`),
   in worker batches (:mod:`.batches`), by folder, streamed or in memory;
3. :mod:`.provenance` gives every run its study, source, factor levels, repetition and host;
4. :mod:`.parts` writes the Parquet parts, drops the rows of changed files, and last the
   manifest, the quarantine report and the raw-file state.

Ingest names no format: everything it knows of one is in the format's registry record.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import polars as pl

from benchlib.errors import StudyError
from benchlib.ingest.batches import BATCH, PARALLEL_FROM
from benchlib.ingest.parts import finish, previous_entries
from benchlib.ingest.provenance import clear_caches
from benchlib.ingest.reading import STREAM_BYTES, read_batches_and_folders, read_the_rest
from benchlib.ingest.state import IngestReport, IngestState
from benchlib.paths import PROCESSED, processed_dir_for
from benchlib.store import RAW_STATE, scan_table, study_key
from benchlib.study import load_study
from benchlib.vsphere import (
    ESXI_FILE,
    FACTS_FILE,
    contradictions,
    esxi_problem,
    load_record,
    read_facts_files,
    unchecked,
)

#: fio JSON files per Parquet part (and small logs per part).
JSON_BATCH = BATCH

__all__ = ["JSON_BATCH", "PARALLEL_FROM", "STREAM_BYTES", "IngestReport", "ingest_study"]


def _esxi_files(state: IngestState, rels: list[str]) -> dict[str, dict]:
    """Return the cells' esxcli lists by folder; an unreadable file is quarantined, a host's failure noted."""
    found = {}
    for rel in rels:
        data, why = load_record(state.study.folder / rel, esxi_problem)
        if data is None:
            state.report.quarantine(rel, f"not esxcli's lists as benchlib run writes them ({why})")
            continue
        for host, listed in data.items():
            if listed.get("error"):
                state.report.notes.append((rel, f"esxcli on {host} failed for these runs: {listed['error']}"))
        found[str(Path(rel).parent)] = data
    return found


def _check_vsphere(state: IngestState) -> None:
    """Refuse a study whose declared controller or SIOC levels contradict vCenter's facts (``[vsphere]``).

    A facts file that cannot be read is quarantined; the study's tables stay unfinished (readers
    refuse them) until study.toml or the facts agree.
    """
    rels = sorted(rel for rel in state.raw_files if Path(rel).name == FACTS_FILE)
    esxi_rels = sorted(rel for rel in state.raw_files if Path(rel).name == ESXI_FILE)
    if not (rels or esxi_rels):
        return
    facts, problems = read_facts_files(state.study.folder, rels)
    esxi = _esxi_files(state, esxi_rels)
    for problem in problems:  # quarantined with or without [vsphere]: their facts would be the runs' labels
        rel, reason = problem.split(": ", 1)
        state.report.quarantine(rel, reason)
    if not state.study.vsphere:
        return
    for folder, data in facts.items():  # a cell whose facts could not be read: its runs are not checked
        if data.get("error"):
            rel = str(Path(folder) / FACTS_FILE) if folder != "." else FACTS_FILE
            state.report.notes.append((rel, f"vCenter's facts were not read for these runs: {data['error']}"))
    runs = scan_table(state.processed, "runs").filter(~pl.col("is_aggregate")).collect()
    for note in unchecked(state.study, runs, facts):
        state.report.notes.append((FACTS_FILE, note))
    found = contradictions(state.study, runs, facts, esxi)
    if found:
        more = f"; and {len(found) - 10} more" if len(found) > 10 else ""
        raise StudyError(
            f"{state.study.folder / 'study.toml'}: its levels contradict vCenter's facts: "
            + "; ".join(found[:10])
            + more
            + ". Fix the levels (or which files they map to) in study.toml, then ingest again"
        )


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
    clear_caches()
    processed = processed_dir_for(study.folder, Path(processed_root))
    processed.mkdir(parents=True, exist_ok=True)
    with open(processed / ".ingest.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another ingest of this study finishes first
        key = study_key(study)
        # the last ingest's manifest is trusted only if that ingest finished (it wrote the raw-file state last):
        # after an interrupted one, the parts may no longer hold what the manifest says
        finished = (processed / RAW_STATE).exists()
        previous = previous_entries(processed, key) if finished else {}
        if not previous:  # first ingest, or study.toml or the schema changed: rebuild every part
            for part in processed.glob("*/*.parquet"):
                part.unlink()
        (processed / RAW_STATE).unlink(missing_ok=True)  # until this ingest finishes, readers are told it did not
        for left in [*processed.glob("*.tmp"), *processed.glob("*/*.tmp")]:  # by an ingest killed while writing
            left.unlink()
        state = IngestState(study, processed, previous, IngestReport(study.name, processed), salt=os.urandom(8).hex())
        read_batches_and_folders(state)
        read_the_rest(state)
        _check_vsphere(state)
        finish(state, key)
        return state.report
