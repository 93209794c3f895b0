"""Where things are, derived from this file's location (never from the working directory).

``BENCHLIB_DATA`` points ``data/`` elsewhere (a copy of the raw data to experiment on; the
test that proves nbval notices a changed raw number uses it).
"""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ["BENCHLIB_DATA"]) if os.environ.get("BENCHLIB_DATA") else PROJECT_ROOT / "data"
RAW = DATA / "raw"
PROCESSED = DATA / "processed"
REPORTS = PROJECT_ROOT / "reports"
NOTEBOOKS = PROJECT_ROOT / "notebooks"
PIPELINES = PROJECT_ROOT / "pipelines"


def processed_dir_for(raw_study_dir: Path, processed_root: Path = PROCESSED) -> Path:
    """The processed folder of a study: ``data/processed/<study folder name>``."""
    return processed_root / Path(raw_study_dir).resolve().name
