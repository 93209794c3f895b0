"""Where things are, derived from this file's location (never from the working directory).

``BENCHLIB_DATA`` points ``data/`` elsewhere (a copy of the raw data to experiment on; the
test that proves nbval notices a changed raw number uses it). ``BENCHLIB_PROCESSED``,
``BENCHLIB_REPORTS`` and ``BENCHLIB_PIPELINES`` put the processed tables, the reports and the
pipelines elsewhere, so a checkout or an unpacked verification bundle on read-only media still
builds its report.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ["BENCHLIB_DATA"]) if os.environ.get("BENCHLIB_DATA") else PROJECT_ROOT / "data"
RAW = DATA / "raw"
PROCESSED = Path(os.environ.get("BENCHLIB_PROCESSED") or DATA / "processed")
REPORTS = Path(os.environ.get("BENCHLIB_REPORTS") or PROJECT_ROOT / "reports")
NOTEBOOKS = PROJECT_ROOT / "notebooks"
WORK = PROJECT_ROOT / "work"  # an author's own notebooks (JupyterLab opens here; never committed)
PIPELINES = Path(os.environ.get("BENCHLIB_PIPELINES") or PROJECT_ROOT / "pipelines")


def processed_dir_for(raw_study_dir: Path, processed_root: Path = PROCESSED) -> Path:
    """Return the processed folder of a study: ``data/processed/<study folder name>``."""
    return processed_root / Path(raw_study_dir).resolve().name


def source_commit() -> str:
    """Return the project's git commit (with "+ local changes" when the tree differs), or why it is unknown."""
    try:
        head = subprocess.run(
            ["git", "-C", str(PROJECT_ROOT), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            [
                "git",
                "-C",
                str(PROJECT_ROOT),
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                "benchlib",
                "notebooks",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return head + (" + local changes" if dirty else "")
