"""Every benchmark, small: each checks what it processed before it keeps a figure, so a change that makes a
bench measure nothing (inputs it no longer reads, pages it no longer builds) fails here, not in a later
reading of ``bench/results.md``. Nothing is recorded by a smoke run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

BENCH = ROOT / "bench"

pytestmark = pytest.mark.fio


BENCHES = ["bench_compare.py", "bench_esxtop.py", "bench_vdbench.py", "bench_ingest.py", "bench_runner.py"]


@pytest.mark.parametrize("script", [*BENCHES, "bench_report.py"])
def test_each_bench_runs_small_and_checks_what_it_did(script: str) -> None:
    if script == "bench_esxtop.py" and not (ROOT.parent / "shared" / "corpus" / "esxtop").is_dir():
        pytest.skip("the corpus is not beside the project")
    results = (BENCH / "results.md").read_bytes()
    done = subprocess.run(
        [sys.executable, str(BENCH / script), "--smoke"],
        cwd=BENCH,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "no figure recorded" not in done.stdout + done.stderr
    assert (BENCH / "results.md").read_bytes() == results  # a smoke run records nothing


def test_the_ingest_bench_fails_when_its_study_holds_links_it_does_not_read(
    fio_binary: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ingest bench once timed a study of links out of it, which ingest skips: it recorded the skipping as
    speed. Built that way again, it stops with the counts instead of a figure."""
    monkeypatch.syspath_prepend(str(BENCH))
    import bench_ingest
    from make_inputs import make_json

    work = tmp_path / "work"
    make_json(3, tmp_path, work)

    def links(files: list[Path], study: Path, source: Path | None = None) -> None:
        study.mkdir(parents=True)
        for f in files:
            (study / f.name).symlink_to(f)

    monkeypatch.setattr(bench_ingest, "copy_into_study", links)
    with pytest.raises(SystemExit, match="json\\+ files ingested: 0, expected 3; no figure recorded"):
        bench_ingest.bench_json(tmp_path / "json", work, rounds=1, fio_plot=False)
