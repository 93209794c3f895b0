"""Benchmark: the full report build on the bundled data against its floor, and the rebuild when nothing changed.

The floor is what any papermill-built report must pay: a notebook that only imports what the
pipelines' notebooks import (its parameters cell injected like theirs), executed as many times as
the build executes notebooks, the way the build executes them: the cell pages' executions in warm
kernels (:class:`benchlib.pipeline.WarmKernels`, imports once per worker), the summary pages' through
a fresh papermill kernel each, 2 at a time. The floor with a fresh kernel for every execution is
recorded beside it (the build no longer pays that). Every build is checked for what it did: each
pipeline's executions equal its cells and summary notebooks, one HTML page each and an index,
and the rebuild executed none; the floor ran as many executions as the build. The
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
from benchlib.pipeline import Execution, WarmKernels, _papermill, build_report, load_pipeline

ROOT = Path(__file__).resolve().parent.parent


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


def run_floor(notebook: Path, cells: int, summaries: int, parameters: dict, folder: Path, *, warm: bool) -> float:
    """Execute the floor notebook ``cells + summaries`` times, 2 at a time; return the seconds.

    ``warm``: the ``cells`` executions in warm kernels, as the build runs its cell pages; else every
    execution in a fresh kernel.
    """
    folder.mkdir(parents=True, exist_ok=True)
    executions = [
        (Execution(f"floor-{i}", notebook, parameters, folder / f"floor-{i}", {"cell": str(i)} if i < cells else {}))
        for i in range(cells + summaries)
    ]
    kernels = WarmKernels() if warm else None
    ran = 0

    def execute(execution: Execution) -> None:
        target = folder / f"{execution.slug}.ipynb"
        if kernels is not None and execution.levels:
            kernels.execute(execution, target)
            return
        done = _papermill(execution, target)
        if done.returncode:
            raise SystemExit(done.stderr)

    start = time.perf_counter()
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            for _ in pool.map(execute, executions):
                ran += 1
    finally:
        if kernels is not None:
            kernels.close()
    check("floor executions", ran, cells + summaries)
    return time.perf_counter() - start


def check(what: str, got: int, wanted: int) -> None:
    """Stop the bench with the counts when ``got`` is not ``wanted``: a figure of less work is no figure."""
    if got != wanted:
        raise SystemExit(f"{what}: {got}, expected {wanted}; no figure recorded")


def check_build(results: list, again: list) -> None:
    """Check that every pipeline executed each of its pages once, wrote them and an index, and the rebuild none."""
    for result, rebuilt in zip(results, again, strict=True):
        pages = len(list(result.folder.glob("*.html")))
        check(f"{result.folder.name}: pages written (executions and the index)", pages, len(result.executions) + 1)
        check(
            f"{result.folder.name}: executions run",
            sum(not e.skipped for e in result.executions),
            len(result.executions),
        )
        check(f"{result.folder.name}: executions the rebuild ran", sum(not e.skipped for e in rebuilt.executions), 0)


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


def bench_cells(side: int, *, smoke: bool = False) -> None:
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
        check("pages of the synthetic pipeline (cells, the overview, the index, the glossary)", pages, side * side + 3)
        if smoke:
            floor = floor_notebook([ROOT / "notebooks" / "cell.ipynb"], work)
            for warm in (True, False):
                run_floor(floor, 2, 1, {"study": "synthetic"}, work / f"floor-{warm}", warm=warm)
    finally:
        shutil.rmtree(work)
    if smoke:
        print(f"smoke: {pages} pages in {cold:.1f} s; the floor ran warm and fresh")
        return
    record(
        f"report build of a synthetic {side} x {side} pipeline",
        [("cells", side * side), ("pages (checked)", pages), ("cold build (benchlib report), seconds", cold)],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cells", type=int, metavar="SIDE", help="instead: a synthetic SIDE x SIDE pipeline, cold")
    parser.add_argument("--smoke", action="store_true", help="a 2 x 2 synthetic pipeline and a small floor; no record")
    args = parser.parse_args()
    if args.smoke or args.cells:
        bench_cells(2 if args.smoke else args.cells, smoke=args.smoke)
        return
    rounds = args.rounds
    paths = sorted(PIPELINES.glob("*.toml"))
    pipelines = [load_pipeline(p) for p in paths]
    for pipeline in pipelines:
        ingest_study(RAW / pipeline.study)
    notebooks = sorted({p.cell_notebook for p in pipelines} | {n for p in pipelines for n in p.summary_notebooks})
    work = Path(tempfile.mkdtemp(prefix="benchlib-report-"))
    floors, fresh, builds, rebuilds, executions = [], [], [], [], 0
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
            check_build(results, again)
            cells = sum(1 for r in results for e in r.executions if e.levels)
            executions = sum(len(r.executions) for r in results)
            parameters = {"study": pipelines[0].study}
            floors.append(run_floor(floor, cells, executions - cells, parameters, work / f"floor-{round_}", warm=True))
            fresh.append(run_floor(floor, cells, executions - cells, parameters, work / f"fresh-{round_}", warm=False))
    finally:
        shutil.rmtree(work)
    build, floor_s = statistics.median(builds), statistics.median(floors)
    record(
        "report build on the bundled data, against its floor as the build runs it (pages checked)",
        [
            ("pipelines", ", ".join(p.name for p in pipelines)),
            ("notebook executions (checked: each page once, an index each, none on the rebuild)", executions),
            ("of which cell pages (warm kernels)", cells),
            ("figures", sum(e.figures for r in results for e in r.executions)),
            ("rounds (floor and build alternating)", rounds),
            ("floor: imports-only notebook as often, cells in warm kernels, summaries fresh, 2 at a time, s", floor_s),
            ("floor with a fresh kernel for every execution, seconds", statistics.median(fresh)),
            ("full build (cold), seconds", build),
            ("full build, each round", ", ".join(f"{b:.1f}" for b in builds)),
            ("floor (warm), each round", ", ".join(f"{f:.1f}" for f in floors)),
            ("build / floor (warm)", build / floor_s),
            ("rebuild with nothing changed, seconds", statistics.median(rebuilds)),
        ],
    )


if __name__ == "__main__":
    main()
