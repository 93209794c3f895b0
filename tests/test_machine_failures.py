"""When the machine, not a file, fails an ingest: a full disk, a file the user may not read.

A full disk stops the ingest with one message and exit code 2 (not 1, "some files quarantined"),
leaves no half-written file, and readers refuse the study until an ingest finishes; with room
again, the same command gives the tables a clean ingest gives. A file the user may not read is
one quarantine row, on the first ingest and on a repeated one, and costs no other file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl
import pytest

from benchlib.store import StaleStudyError, load_study_tables, open_study
from tests.conftest import ROOT, corpus_dir

STUDY = ROOT / "data" / "raw" / "fio-sample"
NOBODY = 65534

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("mount") is None, reason="mounting a small tmpfs, or becoming another user"
)


def _ingest(data: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "benchlib.cli", "ingest", "--quiet", str(data / "raw" / "fio-sample")],
        env={**os.environ, "BENCHLIB_DATA": str(data)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _runs(processed: Path) -> pl.DataFrame:
    return load_study_tables(processed, only=("runs",)).runs.select("source", "sha256").unique().sort("source")


@needs_root
def test_a_full_disk_stops_ingest_with_one_message_and_nothing_half_written(tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(STUDY, data / "raw" / "fio-sample")
    processed = data / "processed"
    processed.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(processed)], check=True)
    try:
        assert _ingest(data).returncode == 0
        before = _runs(processed / "fio-sample")
        extra = sorted(corpus_dir("fio-json").glob("*.json"))[0]
        shutil.copy(extra, data / "raw" / "fio-sample" / "bs-4k" / extra.name)  # a new run to ingest
        filler = processed / "filler"
        with open(filler, "wb") as handle:  # the disk fills up before the next ingest
            try:
                while True:
                    handle.write(b"\0" * 65536)
            except OSError:
                pass
        full = _ingest(data)
        assert full.returncode == 2, full.stdout + full.stderr
        assert "No space left on device" in full.stderr and "Make room" in full.stderr
        assert "Traceback" not in full.stderr
        left = [
            p.name for p in (processed / "fio-sample").rglob("*") if p.name.endswith(".tmp") or p.name == ".batches"
        ]
        assert left == []
        with pytest.raises(StaleStudyError, match="did not finish"):
            open_study(data / "raw" / "fio-sample", processed)
        filler.unlink()
        assert _ingest(data).returncode == 0
        after = _runs(processed / "fio-sample")
        assert before.join(after, on=["source", "sha256"], how="anti").is_empty()  # every earlier run is back
        new = after.join(before, on=["source", "sha256"], how="anti")
        assert new["source"].to_list() == [f"fio-sample/bs-4k/{extra.name}"]
    finally:
        subprocess.run(["umount", str(processed)], check=True)


#: Run in a fresh process as root: read a copy first (so every module is imported while root may read
#: them), then become nobody and ingest the study twice. Not a fork of pytest: polars' threads do not survive one.
AS_NOBODY = """
import json, os, sys
from benchlib.ingest import ingest_study
ingest_study(sys.argv[1], sys.argv[2])
os.setegid(65534)
os.seteuid(65534)
reports = [ingest_study(sys.argv[3], sys.argv[4]) for _ in range(2)]
print(json.dumps([[sorted(r.ingested), dict(r.quarantined)] for r in reports]))
"""


@needs_root
def test_a_file_the_user_may_not_read_is_quarantined_and_costs_no_other_file(tmp_path: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix="benchlib-nobody-"))  # not under pytest's folder, which only root may enter
    try:
        study = work / "raw" / "fio-sample"
        shutil.copytree(STUDY, study)
        secret = study / "bs-4k" / "secret.json"
        secret.write_bytes(next(study.rglob("*.json")).read_bytes().replace(b"{", b"{ ", 1))
        processed = work / "processed"
        processed.mkdir()
        for path in [work, *work.rglob("*")]:
            os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
        work.chmod(0o755)
        secret.chmod(0o000)
        done = subprocess.run(
            [sys.executable, "-c", AS_NOBODY, str(STUDY), str(tmp_path), str(study), str(processed)],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        first, repeated = json.loads(done.stdout.splitlines()[-1])
        readable = sum(1 for p in study.rglob("*.json") if p != secret)
        assert len(first[0]) >= readable and first[1].keys() == {"bs-4k/secret.json"}
        assert "Permission denied" in first[1]["bs-4k/secret.json"]
        assert repeated[0] == [] and repeated[1] == first[1]  # nothing redone, the same quarantine row
    finally:
        shutil.rmtree(work, ignore_errors=True)
