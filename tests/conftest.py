"""Shared fixtures: where the shared corpus is, and helpers to run real fio."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"


def corpus_dir(name: str) -> Path:
    """A corpus folder; in CI its absence is a failure, elsewhere the tests skip."""
    folder = CORPUS / name
    if not folder.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"the shared corpus is missing at {CORPUS} (CI must have ../shared)")
        pytest.skip(f"no shared corpus at {CORPUS}")
    return folder


def build_study_report(data: Path, study: str, reports: Path) -> Path:
    """Build the default report of ``study`` (a pipeline naming only it) from ``data``, in a process of its own.

    Returns the report's folder; fails with the build's own error output.
    """
    from benchlib.paths import PROJECT_ROOT

    pipeline = reports.parent / f"{study}.toml"
    pipeline.write_text(f'[pipeline]\nstudy = "{study}"\n', encoding="utf-8")
    build = (
        "import sys; from pathlib import Path; from benchlib.pipeline import build_report; "
        "build_report(Path(sys.argv[1]), reports=Path(sys.argv[2]))"
    )
    env = {**os.environ, "BENCHLIB_DATA": str(data)}
    command = [sys.executable, "-c", build, str(pipeline), str(reports)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=PROJECT_ROOT, env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return reports / study


@pytest.fixture(scope="session")
def fio_binary() -> str:
    path = shutil.which("fio")
    if path is None:
        pytest.fail("fio is not installed; `python3 tasks.py test` installs it or says how")
    return path


@pytest.fixture(autouse=True, scope="session")
def _benchlib_state(tmp_path_factory: pytest.TempPathFactory) -> None:
    """benchlib's record of the targets it created: one for the test session, not the user's."""
    os.environ["BENCHLIB_STATE"] = str(tmp_path_factory.mktemp("benchlib-state"))
