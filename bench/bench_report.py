"""Benchmark: the full report build on the bundled data against its floor, and the rebuild when nothing changed.

The floor is what any papermill-built report must pay: a notebook that only imports what the
pipelines' notebooks import (its parameters cell injected like theirs), executed as many times as
the build executes notebooks, through the same papermill call and with the same parallelism. The
build is every pipeline under pipelines/ into a fresh folder (figures exported to SVG/PNG/JSON,
HTML written), then built again with nothing changed. Floor and build alternate ``--rounds`` times
(this VM's speed drifts); the median of each is recorded. The processed data is brought up to
date first and not counted. Appends the figures to ``bench/results.md``.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _results import record

from benchlib.ingest import ingest_study
from benchlib.paths import PIPELINES, RAW
from benchlib.pipeline import Execution, _papermill, build_report, load_pipeline


def floor_notebook(notebooks: list[Path], folder: Path) -> Path:
    """A notebook holding only the import lines of ``notebooks`` and a parameters cell."""
    imports: list[str] = []
    for notebook in notebooks:
        for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code":
                source = "".join(cell["source"])
                for node in ast.parse(source).body:  # whole statements: an import may span lines
                    text = ast.get_source_segment(source, node)
                    if isinstance(node, ast.Import | ast.ImportFrom) and text not in imports:
                        imports.append(text)
    cells = [
        {"cell_type": "code", "id": "parameters", "metadata": {"tags": ["parameters"]}, "source": "study = ''\n"},
        {"cell_type": "code", "id": "imports", "metadata": {}, "source": "\n".join(imports) + "\n"},
    ]
    for cell in cells:
        cell |= {"execution_count": None, "outputs": []}
    path = folder / "floor.ipynb"
    kernel = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    path.write_text(json.dumps({"cells": cells, "metadata": kernel, "nbformat": 4, "nbformat_minor": 5}))
    return path


def run_floor(notebook: Path, times: int, parameters: dict, folder: Path, workers: int = 2) -> float:
    folder.mkdir(parents=True, exist_ok=True)
    executions = [Execution(f"floor-{i}", notebook, parameters, folder / f"floor-{i}") for i in range(times)]
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for done in pool.map(lambda e: _papermill(e, folder / f"{e.slug}.ipynb"), executions):
            if done.returncode:
                raise SystemExit(done.stderr)
    return time.perf_counter() - start


SOURCE_RUN = RAW / "loopback-fio" / "randread" / "block_size=4k" / "ioengine=libaio" / "rate_cap=off" / "r1"


def synthetic_study(data: Path, side: int) -> Path:
    """A study of side x side cells, each one real 4-host fio client/server run of the loopback study
    (its bytes changed in the time line only, so that every file is a run of its own); a pipeline over it."""
    source = next(SOURCE_RUN.rglob("fio.json")).read_text(encoding="utf-8")
    study = data / "raw" / "synthetic"
    levels = [f"{i:02d}" for i in range(side)]
    mappings = []
    for a in levels:
        mappings.append(f'[[files]]\nglob = "a={a}/*/*"\nlevels = {{ a = "{a}" }}\n')
        mappings.append(f'[[files]]\nglob = "*/b={a}/*"\nlevels = {{ b = "{a}" }}\n')
        for b in levels:
            folder = study / f"a={a}" / f"b={b}"
            folder.mkdir(parents=True)
            (folder / "fio.json").write_text(source.replace('"time" : "', f'"time" : "{a}-{b} ', 1), encoding="utf-8")
    factors = ", ".join(f'"{level}"' for level in levels)
    (study / "study.toml").write_text(
        f'[study]\nname = "synthetic"\n[factors]\na = [{factors}]\nb = [{factors}]\n' + "".join(mappings),
        encoding="utf-8",
    )
    pipeline = data / "synthetic.toml"
    pipeline.write_text(
        '[pipeline]\nstudy = "synthetic"\ntitle = "Synthetic matrix"\naxes = ["a", "b"]\n'
        'cell_notebook = "notebooks/cell.ipynb"\nsummary_notebooks = ["notebooks/study-overview.ipynb"]\n'
        '[parameters]\nvalue = "iops"\n',
        encoding="utf-8",
    )
    return pipeline


def bench_cells(side: int) -> None:
    """``benchlib report`` of a side x side pipeline, cold, in a process of its own (its data folder)."""
    work = Path(tempfile.mkdtemp(prefix="benchlib-cells-"))
    try:
        pipeline = synthetic_study(work / "data", side)
        env = {**os.environ, "BENCHLIB_DATA": str(work / "data"), "BENCHLIB_REPORTS": str(work / "reports")}
        command = [sys.executable, "-m", "benchlib.cli"]
        subprocess.run([*command, "ingest", "--quiet", str(work / "data" / "raw" / "synthetic")], env=env, check=True)
        start = time.perf_counter()
        subprocess.run([*command, "report", str(pipeline)], env=env, check=True, stdout=subprocess.DEVNULL)
        cold = time.perf_counter() - start
        pages = len(list((work / "reports" / "synthetic").glob("*.html")))
    finally:
        shutil.rmtree(work)
    record(
        f"report build of a synthetic {side} x {side} pipeline",
        [("cells", side * side), ("pages", pages), ("cold build (benchlib report), seconds", cold)],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cells", type=int, metavar="SIDE", help="instead: a synthetic SIDE x SIDE pipeline, cold")
    args = parser.parse_args()
    if args.cells:
        bench_cells(args.cells)
        return
    rounds = args.rounds
    paths = sorted(PIPELINES.glob("*.toml"))
    pipelines = [load_pipeline(p) for p in paths]
    for pipeline in pipelines:
        ingest_study(RAW / pipeline.study)
    notebooks = sorted({p.cell_notebook for p in pipelines} | {n for p in pipelines for n in p.summary_notebooks})
    work = Path(tempfile.mkdtemp(prefix="benchlib-report-"))
    floors, builds, rebuilds, executions = [], [], [], 0
    try:
        floor = floor_notebook(notebooks, work)
        for round_ in range(rounds):
            reports = work / f"reports-{round_}"
            start = time.perf_counter()
            results = [build_report(p, reports=reports) for p in paths]
            builds.append(time.perf_counter() - start)
            start = time.perf_counter()
            again = [build_report(p, reports=reports) for p in paths]
            rebuilds.append(time.perf_counter() - start)
            assert not any(not e.skipped for r in again for e in r.executions)
            executions = sum(len(r.executions) for r in results)
            floors.append(run_floor(floor, executions, {"study": pipelines[0].study}, work / f"floor-{round_}"))
    finally:
        shutil.rmtree(work)
    build, floor_s = statistics.median(builds), statistics.median(floors)
    record(
        "report build on the bundled data, against its floor",
        [
            ("pipelines", ", ".join(p.name for p in pipelines)),
            ("notebook executions", executions),
            ("figures", sum(e.figures for r in results for e in r.executions)),
            ("rounds (floor and build alternating)", rounds),
            ("floor: imports-only notebook as often, same papermill call, 2 at a time, seconds", floor_s),
            ("full build (cold), seconds", build),
            ("full build, each round", ", ".join(f"{b:.1f}" for b in builds)),
            ("floor, each round", ", ".join(f"{f:.1f}" for f in floors)),
            ("build / floor", build / floor_s),
            ("rebuild with nothing changed, seconds", statistics.median(rebuilds)),
        ],
    )


if __name__ == "__main__":
    main()
