"""Benchmark: the full report build on the bundled data, and the rebuild when nothing changed.

Builds every pipeline under pipelines/ into a fresh folder (papermill, two notebooks at a
time, figures exported to SVG/PNG/JSON, HTML written), then builds again. The processed data
is brought up to date first and not counted. Appends the times to ``bench/results.md``.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from _results import record

from benchlib.ingest import ingest_study
from benchlib.paths import PIPELINES, RAW
from benchlib.pipeline import build_report, load_pipeline


def main() -> None:
    pipelines = sorted(PIPELINES.glob("*.toml"))
    for path in pipelines:
        ingest_study(RAW / load_pipeline(path).study)
    reports = Path(tempfile.mkdtemp(prefix="benchlib-report-"))
    try:
        start = time.perf_counter()
        results = [build_report(path, reports=reports) for path in pipelines]
        full = time.perf_counter() - start
        start = time.perf_counter()
        again = [build_report(path, reports=reports) for path in pipelines]
        rebuild = time.perf_counter() - start
    finally:
        shutil.rmtree(reports)
    executions = sum(len(r.executions) for r in results)
    record("report build on the bundled data", [
        ("pipelines", ", ".join(p.stem for p in pipelines)),
        ("notebook executions", executions),
        ("figures", sum(e.figures for r in results for e in r.executions)),
        ("full build, seconds", full),
        ("rebuild with nothing changed, seconds", rebuild),
        ("re-executed on rebuild", sum(not e.skipped for r in again for e in r.executions)),
    ])


if __name__ == "__main__":
    main()
