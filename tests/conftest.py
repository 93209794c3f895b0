"""Shared fixtures: where the shared corpus is, and helpers to run real fio."""

from __future__ import annotations

import os
import shutil
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
