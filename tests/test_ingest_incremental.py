"""A repeated ingest gives the tables a fresh ingest of the same files gives, whatever changed in between:
a run's recorded levels, the fio version beside a log, a vdbench folder's members, an ingest killed
half-way; and a copy of a study that did not keep file times is still current."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl

from benchlib.ingest import ingest_study
from benchlib.paths import RAW
from benchlib.store import open_study
from tests.conftest import corpus_dir


def _tables(study: Path, processed: Path) -> dict[str, pl.DataFrame]:
    """Every table of the study, in an order that does not depend on part names."""
    tables = open_study(study, processed).tables()
    out = {}
    for name, frame in tables.items():
        frame = frame.drop([c for c in ("run_id",) if c in frame.columns])
        flat = [c for c in frame.columns if not isinstance(frame[c].dtype, pl.List | pl.Struct)]
        out[name] = frame.sort(flat, nulls_last=True)
    return out


def _same_as_fresh(study: Path, tmp_path: Path, processed: Path) -> None:
    fresh = tmp_path / "fresh"
    shutil.rmtree(fresh, ignore_errors=True)
    ingest_study(study, fresh)
    mine, theirs = _tables(study, processed), _tables(study, fresh)
    for name in mine:
        assert mine[name].equals(theirs[name]), name


def test_a_changed_run_record_re_reads_its_files(tmp_path: Path) -> None:
    study = tmp_path / "raw" / "loopback-fio"
    shutil.copytree(RAW / "loopback-fio", study)
    processed = tmp_path / "processed"
    ingest_study(study, processed)
    record = next(study.rglob("benchlib-run.json"))
    manifest = json.loads(record.read_text())
    manifest["repetition"] = 7
    record.write_text(json.dumps(manifest, indent=1))
    again = ingest_study(study, processed)
    assert again.ingested and all(rel.startswith(str(record.parent.relative_to(study))) for rel in again.ingested)
    assert 7 in open_study(study, processed).tables(only=("runs",)).runs["repetition"].to_list()
    _same_as_fresh(study, tmp_path, processed)


def test_a_log_is_read_again_when_the_fio_version_beside_it_changes_its_unit(tmp_path: Path) -> None:
    study = tmp_path / "raw" / "units"
    study.mkdir(parents=True)
    shutil.copy(corpus_dir("fio-logs") / "fio-plot-testdata01__randread-4k-01-01_clat.1.log", study)
    processed = tmp_path / "processed"
    ingest_study(study, processed)
    shutil.copy(corpus_dir("fio-json") / "fio-plot-testdata01__randread-01-01.json", study)  # written by fio 2.x
    again = ingest_study(study, processed)
    assert "fio-plot-testdata01__randread-4k-01-01_clat.1.log" in again.ingested  # now read in microseconds
    _same_as_fresh(study, tmp_path, processed)


def test_a_vdbench_folder_that_grows_or_shrinks_reads_as_a_fresh_one(tmp_path: Path) -> None:
    source = corpus_dir("vdbench") / "vdb__create_file_32T"
    study = tmp_path / "raw" / "vdb"
    folder = study / "run"
    folder.mkdir(parents=True)
    shutil.copy(source / "flatfile.html", folder)
    processed = tmp_path / "processed"
    ingest_study(study, processed)
    for path in source.iterdir():
        shutil.copy(path, folder)
    ingest_study(study, processed)
    _same_as_fresh(study, tmp_path, processed)
    for path in folder.iterdir():
        if path.name != "flatfile.html":
            path.unlink()
    ingest_study(study, processed)
    assert open_study(study, processed).tables(only=("runs",)).runs.height == 1
    _same_as_fresh(study, tmp_path, processed)


def test_after_an_interrupted_ingest_everything_is_read_again(tmp_path: Path) -> None:
    """Parts may no longer hold what the last finished manifest says: a file removed then restored keeps its runs."""
    study = tmp_path / "raw" / "fio-sample"
    shutil.copytree(RAW / "fio-sample", study)
    processed = tmp_path / "processed"
    ingest_study(study, processed)
    victim = next(p for p in sorted(study.rglob("*.json")) if p.is_file())
    kept = victim.read_bytes()
    victim.unlink()
    code = (
        "import os, sys\nimport benchlib.ingest.parts as parts\nfrom benchlib.ingest import ingest_study\n"
        "parts.write_quarantine = lambda *a: os._exit(9)\ningest_study(sys.argv[1], sys.argv[2])\n"
    )
    assert subprocess.run([sys.executable, "-c", code, str(study), str(processed)], check=False).returncode == 9
    victim.write_bytes(kept)
    again = ingest_study(study, processed)
    assert not again.unchanged  # nothing trusted from the interrupted ingest's manifest
    _same_as_fresh(study, tmp_path, processed)


def test_a_copy_that_did_not_keep_file_times_is_still_current(tmp_path: Path) -> None:
    study = tmp_path / "raw" / "loopback-fio"
    shutil.copytree(RAW / "loopback-fio", study)
    ingest_study(study, tmp_path / "processed")
    (tmp_path / "copy").mkdir()
    (tmp_path / "copied").mkdir()
    subprocess.run(["cp", "-r", str(study), str(tmp_path / "copy")], check=True)  # no -p: every file's time is new
    subprocess.run(["cp", "-r", str(tmp_path / "processed" / "loopback-fio"), str(tmp_path / "copied")], check=True)
    copy = tmp_path / "copy" / "loopback-fio"
    assert (copy / "study.toml").stat().st_mtime_ns != (study / "study.toml").stat().st_mtime_ns
    open_study(copy, tmp_path / "copied")  # current: every file hashes as recorded, skipped ones included
