"""The read-only store: notebooks and reports read processed studies and never write; tables that no
longer describe their raw files are refused with the files and the command to run; a report builds
from read-only data, and from an unpacked verification bundle on a read-only folder."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from benchlib.ingest import ingest_study
from benchlib.paths import PROJECT_ROOT, RAW
from benchlib.store import StaleStudyError, open_study

CLI = [sys.executable, "-m", "benchlib.cli"]


def _read_only(folder: Path) -> None:
    for here, folders, files in os.walk(folder):
        for name in [*folders, *files]:
            path = Path(here, name)
            if not path.is_symlink():
                path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    folder.chmod(folder.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _writable(folder: Path) -> None:
    for here, folders, _ in os.walk(folder):
        for name in folders:
            Path(here, name).chmod(0o755)
    folder.chmod(0o755)


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        p.relative_to(folder).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def study(tmp_path: Path) -> Path:
    folder = tmp_path / "raw" / "pvscsi-vs-lsi"
    shutil.copytree(RAW / "pvscsi-vs-lsi", folder)
    return folder


def test_open_study_reads_current_tables_and_writes_nothing(study: Path, tmp_path: Path) -> None:
    processed = tmp_path / "processed"
    ingest_study(study, processed)
    before = _snapshot(processed)
    opened = open_study(study, processed)
    assert opened.tables(only=("runs", "results")).results.height > 0
    assert _snapshot(processed) == before


def test_stale_and_missing_tables_are_refused_with_what_changed(study: Path, tmp_path: Path) -> None:
    processed = tmp_path / "processed"
    with pytest.raises(StaleStudyError, match=r"not been ingested.*run `benchlib ingest"):
        open_study(study, processed)
    ingest_study(study, processed)
    table = study / "seqread-128k-per-vm.csv"
    os.utime(table)  # touched, same bytes: still current
    open_study(study, processed)
    table.write_text(table.read_text().replace(",1148,", ",1149,"))
    (study / "extra.csv").write_text("not a benchmark\n")
    with pytest.raises(StaleStudyError, match=r"1 changed \(seqread-128k-per-vm.csv\); 1 new \(extra.csv\)"):
        open_study(study, processed)
    ingest_study(study, processed)
    (study / "extra.csv").unlink()
    with pytest.raises(StaleStudyError, match=r"1 gone \(extra.csv\)"):
        open_study(study, processed)
    ingest_study(study, processed)
    (study / "study.toml").write_text((study / "study.toml").read_text() + "\n# a comment changes the declaration\n")
    with pytest.raises(StaleStudyError, match="study.toml"):
        open_study(study, processed)


def test_a_page_of_a_report_build_trusts_the_builds_check_of_that_study_alone(
    study: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``benchlib report`` checks a study once and tells its pages which (BENCHLIB_CHECKED_STUDY): they open it
    without stat-ing every raw file. Outside a build, or for another study's folder, the check is made."""
    from benchlib.store import CHECKED_BY_BUILD

    processed = tmp_path / "processed"
    ingest_study(study, processed)
    (study / "extra.csv").write_text("not a benchmark\n")  # stale from now on
    with pytest.raises(StaleStudyError, match="1 new"):
        open_study(study, processed)
    monkeypatch.setenv(CHECKED_BY_BUILD, str(tmp_path / "processed" / "another-study"))
    with pytest.raises(StaleStudyError, match="1 new"):
        open_study(study, processed)
    monkeypatch.setenv(CHECKED_BY_BUILD, str((processed / study.name).resolve()))
    assert open_study(study, processed).tables(only=("runs",)).runs.height > 0


def test_an_interrupted_ingest_is_refused(study: Path, tmp_path: Path) -> None:
    """Until an ingest finishes, its tables may be partial: readers are told, not handed them."""
    processed = tmp_path / "processed"
    ingest_study(study, processed)
    code = (
        "import os, sys\nimport benchlib.ingest as ingest\nimport benchlib.ingest.parts as parts\n"
        "def die(*args, **kwargs):\n    os._exit(9)\n"
        "parts.write_quarantine = die\n"
        "ingest.ingest_study(sys.argv[1], sys.argv[2])\n"
    )
    (study / "seqread-128k-per-vm.csv").write_text((study / "seqread-128k-per-vm.csv").read_text() + "\n")
    done = subprocess.run([sys.executable, "-c", code, str(study), str(processed)], check=False)
    assert done.returncode == 9
    with pytest.raises(StaleStudyError, match="did not finish"):
        open_study(study, processed)


def test_a_report_builds_from_read_only_data_and_runs_every_notebook(tmp_path: Path) -> None:
    """Every canonical notebook runs with data/ read-only: the report ingests (when needed) before, never during."""
    data = tmp_path / "data"
    shutil.copytree(RAW / "loopback-fio", data / "raw" / "loopback-fio")
    shutil.copytree(RAW / "pvscsi-vs-lsi", data / "raw" / "pvscsi-vs-lsi")
    env = {**os.environ, "BENCHLIB_DATA": str(data), "BENCHLIB_REPORTS": str(tmp_path / "reports")}
    env.pop("BENCHLIB_PROCESSED", None)
    subprocess.run(
        [
            *CLI,
            "ingest",
            "--quiet",
            str(data / "raw" / "loopback-fio"),
            str(data / "raw" / "pvscsi-vs-lsi"),
            "--processed",
            str(data / "processed"),
        ],
        check=True,
        env=env,
        cwd=PROJECT_ROOT,
    )
    # one cell of the loopback matrix and all of its summaries; the pvscsi pipeline whole (by the bundle test too)
    pipeline = tmp_path / "loopback-one-cell.toml"
    text = (PROJECT_ROOT / "pipelines" / "loopback-fio.toml").read_text()
    one = 'only = { profile = ["randread"], block_size = ["4k"], ioengine = ["libaio"], rate_cap = ["off"] }'
    pipeline.write_text(text.replace('only = { profile = ["randread", "randwrite"] }', one, 1))
    before = _snapshot(data)
    _read_only(data)
    try:
        for path in (pipeline, PROJECT_ROOT / "pipelines" / "pvscsi-vs-lsi.toml"):
            done = subprocess.run(
                [*CLI, "report", str(path)],
                env=env,
                cwd=PROJECT_ROOT,
                capture_output=True,
                text=True,
                timeout=900,
                check=False,
            )
            assert done.returncode == 0, done.stdout + done.stderr
    finally:
        _writable(data)
    assert _snapshot(data) == before
    notebooks = {p.name for p in (tmp_path / "reports").rglob("*.ipynb")}
    assert notebooks == {p.name for p in (PROJECT_ROOT / "notebooks").glob("*.ipynb")}


def test_an_unpacked_bundle_on_a_read_only_folder_builds_its_report(tmp_path: Path) -> None:
    from benchlib.bundle import write_bundle

    archive, _ = write_bundle(RAW / "pvscsi-vs-lsi", tmp_path, tmp_path / "author-processed")
    with tarfile.open(archive) as bundle:
        bundle.extractall(tmp_path / "media", filter="tar")
    root = tmp_path / "media" / "pvscsi-vs-lsi-bundle"
    _read_only(root)
    env = {
        key: value for key, value in os.environ.items() if not key.startswith("BENCHLIB_") or key == "BENCHLIB_STATE"
    }
    env |= {
        "BENCHLIB_PROCESSED": str(tmp_path / "peer" / "processed"),
        "BENCHLIB_REPORTS": str(tmp_path / "peer" / "reports"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    try:
        done = subprocess.run(
            [*CLI, "report"], env=env, cwd=root, capture_output=True, text=True, timeout=900, check=False
        )
        imported = subprocess.run(
            [sys.executable, "-c", "import benchlib; print(benchlib.__file__)"],
            env=env,
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    finally:
        _writable(root)
    assert done.returncode == 0, done.stdout + done.stderr
    assert imported.startswith(str(root))  # the bundle's own code ran, not this checkout's
    page = (tmp_path / "peer" / "reports" / "pvscsi-vs-lsi" / "claims.html").read_text()
    assert "25 of 33 claims pass" in page
