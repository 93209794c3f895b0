"""Pipelines are data: ``pipelines/<name>.toml`` -> papermill executions -> ``reports/<name>/``.

A pipeline::

    [pipeline]
    study = "loopback-fio"               # data/raw/<study>
    title = "Four fio servers on one disk"
    axes = ["profile", "block_size", "ioengine", "rate_cap"]   # study factors spanning the matrix
    cell_notebook = "notebooks/cell.ipynb"
    summary_notebooks = ["notebooks/study-overview.ipynb"]
    only = { profile = ["randread", "randwrite"] }   # optional: restrict the matrix to these levels

    [parameters]                         # extra literals passed to every notebook
    value = "iops"

``build_report`` ingests the study (when its raw files changed), expands the axes
to the cells present in the data (declared combinations without data are reported
as missing, not errors), runs papermill once per cell and once per summary
notebook, two at a time (the cells in one warm kernel per worker,
:class:`WarmKernels`), skips executions whose notebook, parameters and processed
data did not change (nor did benchlib's code or the installed dependency
versions), and writes the executed notebooks, every figure as Vega-Lite JSON,
SVG and PNG, and a self-contained HTML report (an index and one page per cell;
:mod:`benchlib.report_html`).
Executed notebooks never overwrite ``notebooks/``.

The notebooks read through :mod:`benchlib.views` and never ingest: the build
ingests once, first, and only when the raw files changed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib.metadata
import itertools
import json
import keyword
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from benchlib.errors import BenchlibError
from benchlib.figures import FIGURES_TO, REPORT_KERNEL, figure_json, write_figure
from benchlib.ingest import ingest_study
from benchlib.paths import PIPELINES, PROCESSED, PROJECT_ROOT, RAW, REPORTS, source_commit
from benchlib.report_html import VEGALITE, write_html
from benchlib.schema import NOT_GIVEN
from benchlib.store import CHECKED_BY_BUILD, ProcessedStudy, StaleStudyError, open_study, raw_data_digest, scan_table
from benchlib.study import load_study
from benchlib.tomlfile import read_toml

#: the cell notebook of a pipeline that names none
CELL_NOTEBOOK = "notebooks/cell.ipynb"
#: the summary pages of a pipeline that names none: each is built where the study's data support it
DEFAULT_SUMMARIES = tuple(
    f"notebooks/{name}.ipynb"
    for name in (
        "study-overview",
        "published-tables",
        "claims",
        "comparison",
        "settings-per-member",
        "sweeps",
        "fairness",
        "interaction",
        "efficiency",
        "host-side",
    )
)


class PipelineError(BenchlibError):
    """A pipeline file is missing, invalid, or names a study, axis or notebook that does not exist."""


@dataclass(frozen=True)
class Pipeline:
    """A parsed pipeline file."""

    name: str
    study: str
    title: str
    #: the factors the cell pages span; empty: every factor the runs vary (:func:`benchlib.fit.axes`)
    axes: tuple[str, ...]
    cell_notebook: Path
    summary_notebooks: tuple[Path, ...]
    parameters: dict = field(default_factory=dict)
    #: per summary notebook (by position): its own parameters and the name of its page
    summary_parameters: tuple[dict, ...] = ()
    summary_names: tuple[str, ...] = ()
    only: dict = field(default_factory=dict)


@dataclass
class Execution:
    """One papermill execution of the report."""

    slug: str
    notebook: Path
    parameters: dict
    output_dir: Path
    levels: dict = field(default_factory=dict)
    skipped: bool = False
    figures: int = 0


@dataclass
class ReportResult:
    """What a report build did."""

    folder: Path
    executions: list[Execution]
    missing_cells: list[dict]
    #: the summary pages the study's data cannot support, and why (:class:`benchlib.fit.PageLeftOut`)
    left_out: list[tuple[str, str]] = field(default_factory=list)


def load_pipeline(path: str | Path) -> Pipeline:
    """Read and check ``pipelines/<name>.toml``: a path, or a pipeline's name (``pvscsi-vs-lsi``)."""
    path = Path(path)
    named = PIPELINES / f"{path.name}.toml"
    if not path.is_file() and path.suffix != ".toml" and path.name == str(path) and named.is_file():
        path = named  # the names the error below lists are names the command takes
    if not path.is_file():
        candidates = ", ".join(sorted(p.stem for p in PIPELINES.glob("*.toml")))
        raise PipelineError(f"{path}: no such pipeline file (pipelines here: {candidates or 'none'})")
    data = read_toml(path, PipelineError)
    spec = data.get("pipeline", {})
    if "study" not in spec:
        raise PipelineError(f'{path}: [pipeline] needs study = "<a folder of data/raw>"')
    study = load_study(RAW / spec["study"])
    unknown = [a for a in spec.get("axes", []) if a not in study.factors]
    if unknown:
        raise PipelineError(
            f"{path}: axes {unknown} are not factors of study {spec['study']!r} "
            f"(its factors: {', '.join(study.factors) or 'none'})"
        )
    entries = spec.get("summary_notebooks", DEFAULT_SUMMARIES)
    summaries = [_summary_entry(path, i, entry) for i, entry in enumerate(entries)]
    names = [name for name, _, _ in summaries]
    if len(set(names)) != len(names):
        raise PipelineError(f'{path}: two summary notebooks have the same page name; give one a name = "..."')
    notebooks = [PROJECT_ROOT / spec.get("cell_notebook", CELL_NOTEBOOK), *[PROJECT_ROOT / n for _, n, _ in summaries]]
    for notebook in notebooks:
        if not notebook.is_file():
            raise PipelineError(f"{path}: notebook {notebook.relative_to(PROJECT_ROOT)} does not exist")
    return Pipeline(
        name=path.stem,
        study=str(spec["study"]),
        title=str(spec.get("title", study.title or spec["study"])),
        axes=tuple(spec.get("axes", ())),
        cell_notebook=notebooks[0],
        summary_notebooks=tuple(notebooks[1:]),
        parameters=_parameters(path, "[parameters]", data.get("parameters", {})),
        summary_parameters=tuple(p for _, _, p in summaries),
        summary_names=tuple(names),
        only={k: [str(v) for v in vs] for k, vs in spec.get("only", {}).items()},
    )


def _parameters(path: Path, where: str, table: object) -> dict:
    """Check notebook parameters: names are identifiers, values literals.

    Notebook parameters: papermill writes each name into the notebook as code, so a name must be a plain
    Python identifier; values pass through papermill's own translation (literals only).
    """
    if not isinstance(table, dict):
        raise PipelineError(f"{path}: {where} must be a table of name = value")
    for name in table:
        if not str(name).isidentifier() or keyword.iskeyword(str(name)):
            raise PipelineError(
                f"{path}: {where}: {str(name)!r} is not a parameter name (a notebook parameter is a "
                "Python identifier such as value or by; papermill writes it into the notebook as code)"
            )
    return dict(table)


def _summary_entry(path: Path, index: int, entry: object) -> tuple[str, str, dict]:
    """(page name, notebook, parameters) of a summary notebook: a path, or ``{notebook, name, parameters}``."""
    if isinstance(entry, str):
        return Path(entry).stem, entry, {}
    if isinstance(entry, dict) and isinstance(entry.get("notebook"), str):
        extra = set(entry) - {"notebook", "name", "parameters"}
        if extra:
            raise PipelineError(
                f"{path}: summary notebook {index + 1} has unknown keys {sorted(extra)} "
                "(allowed: notebook, name, parameters)"
            )
        where = f"summary notebook {index + 1} parameters"
        return (
            str(entry.get("name", Path(entry["notebook"]).stem)),
            entry["notebook"],
            _parameters(path, where, entry.get("parameters", {})),
        )
    raise PipelineError(
        f'{path}: summary notebook {index + 1} must be a path or {{ notebook = "...", parameters = {{...}} }}'
    )


def _slug(levels: dict) -> str:
    """Return a cell's folder and page name: its levels, in characters safe in a file name and a URL.

    Levels from data may hold anything; when a character had to be replaced, a short digest
    of the exact levels keeps two cells that differ only there apart.
    """
    text = "__".join(f"{k}={v}" for k, v in levels.items())
    safe = re.sub(r"[^A-Za-z0-9._=-]", "_", text)
    return safe if safe == text else f"{safe}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def planned_combinations(folder: Path, axes: list[str]) -> set[tuple[str, ...]] | None:
    """Return the combinations of ``axes`` that ``benchlib run``'s record of its plan lists, or None without one.

    ``benchlib-plan.json`` names each cell it ran or meant to run by its folder
    (``randread/block_size=4k/ioengine=libaio``); levels as the folder spells them. A record that
    cannot be read says nothing: None, as without one.
    """
    from benchlib.runner.execute import PLAN_RECORD
    from benchlib.runner.plan import key_levels

    try:
        record = json.loads((folder / PLAN_RECORD).read_text(encoding="utf-8"))
        cells = [key_levels(str(step["cell"])) for step in record["order"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    # a cell without an axis (a factor its profile does not use) is a combination without that factor: None
    return {tuple(levels.get(a) for a in axes) for levels in cells}


def expand_cells(
    pipeline: Pipeline,
    runs: pl.DataFrame,
    factors: dict[str, list],
    planned: set[tuple[str, ...]] | None = None,
    *,
    work: Sequence[str] = (),
) -> tuple[list[dict], list[dict], int | None, int]:
    """Return the combinations drawn, the declared ones without runs, how many were never planned, and how many.

    The last: how many combinations the matrix declares.

    An axis that some runs do not have (a sweep's own factor, outside the sweep) counts "without it" as
    one more level: the matrix of a plan with a depth sweep holds the configurations without a depth too.

    Never planned: declared combinations a recorded plan (:func:`planned_combinations`) does not list;
    None without a record (what was meant to run is then unknown).

    The missing ones are of the whole declared matrix, whatever the pipeline draws: an index that said
    "none" for the configurations it draws let a reader believe every declared one was run. Where
    ``benchlib run`` recorded its plan, a combination it never planned is not missing, only counted.

    ``work``: axes that are a job's parameters (:func:`benchlib.fit.work_axes`), not declared factors: their
    values split the configurations drawn, and no combination of them is declared, so none is missing.
    """
    from benchlib.runner.plan import level_in_folder

    if not pipeline.axes:  # no factor varies: the summary pages describe the runs; there is no configuration to page
        return [], [], None, 1
    axes = [a for a in pipeline.axes if a not in work]
    seen = {tuple(c[a] for a in axes) for c in runs.select(axes).unique().to_dicts()} if axes else {()}
    # "without it" is a level only where a recorded plan says which combinations were meant (a sweep's own
    # factor); published tables that leave a factor out of some rows declare no such combination
    without = planned is not None
    choices = [[*factors[a], *([None] if without and runs[a].null_count() else [])] for a in axes]
    declared = list(itertools.product(*choices))
    absent = [combo for combo in declared if combo not in seen]
    in_folder = [tuple(None if v is None else level_in_folder(v) for v in c) for c in absent]
    meant = [c for c, f in zip(absent, in_folder, strict=True) if planned is None or f in planned]
    missing = [{a: v for a, v in zip(axes, combo, strict=True) if v is not None} for combo in meant]
    for factor, levels in pipeline.only.items():
        runs = runs.filter(pl.col(factor).is_in(levels))
    axes = list(pipeline.axes)
    # with a recorded plan, a run without one of the axes (a sweep's own factor, outside the sweep) is a
    # configuration without it; without one, rows that leave an axis out are not drawn as configurations
    combos = runs.select(axes).unique()
    combos = (
        combos.filter(pl.any_horizontal(pl.col(axes).is_not_null())) if without else combos.drop_nulls()
    ).to_dicts()
    order = {a: {lvl: i for i, lvl in enumerate(factors[a])} for a in axes}
    combos.sort(key=lambda c: [order[a].get(c[a], -1) for a in axes])
    present = [{a: v for a, v in combo.items() if v is not None} for combo in combos]
    return present, missing, None if planned is None else len(absent) - len(meant), len(declared)


_PACKAGE = Path(__file__).resolve().parent


@functools.cache
def code_digest(package: Path = _PACKAGE) -> str:
    """Return a digest of benchlib's code and its dependencies' versions.

    SHA-256 over what every execution depends on besides its notebook and data: the source of the
    ``benchlib`` package (every ``.py``, ``.c`` and ``.txt`` file) and the installed versions of its
    dependencies. Computed once per process.
    """
    digest = hashlib.sha256()
    for path in sorted(p for p in package.rglob("*") if p.suffix in (".py", ".c", ".txt") and p.is_file()):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    for requirement in sorted(importlib.metadata.requires("benchlib") or []):
        name = re.split(r"[\s;=<>!~\[]", requirement, maxsplit=1)[0]
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            digest.update(f"{name}=={importlib.metadata.version(name)}\n".encode())
    return digest.hexdigest()


#: files of a study folder that pages read beside its data: a change to one re-executes the pages
STUDY_FILES = ("claims.toml", "study.toml", "README.md")


def _fingerprint(notebook: Path, parameters: dict, study: ProcessedStudy, levels: dict | None = None) -> str:
    """Return what an execution depends on, as one digest.

    The notebook, its parameters, the processed data it reads (:func:`_data_read`: a cell page's ``levels``
    only), the study's own files the pages read besides the data (:data:`STUDY_FILES`: the claims, the
    study's words, its README), benchlib's code and the dependencies' versions (:func:`code_digest`).
    """
    digest = hashlib.sha256(notebook.read_bytes())
    digest.update(json.dumps(parameters, sort_keys=True).encode())
    digest.update(_data_read(study, levels or {}))
    for name in STUDY_FILES:
        path = study.study.folder / name
        digest.update(name.encode() + b"\0" + (path.read_bytes() if path.is_file() else b"absent") + b"\0")
    digest.update(code_digest().encode())
    return digest.hexdigest()


@functools.lru_cache(maxsize=4)
def _processed_index(processed: Path, stamp: tuple[int, int]) -> tuple[dict, pl.DataFrame]:
    """Return a processed study's manifest and its runs table, read once per ingest, not once per page.

    ``stamp``: the manifest's modification time and size (a new ingest reads them again).
    """
    return json.loads((processed / "manifest.json").read_bytes()), scan_table(processed, "runs").collect()


def _data_read(study: ProcessedStudy, levels: dict) -> bytes:
    """Return the part of the processed study's manifest an execution at ``levels`` reads, as bytes.

    A summary page (no levels) reads the whole study. A cell page reads the runs at its levels, and
    every file without a level of them (a capture of the hosts, a table of other figures, a file no run
    came from): changing one cell's raw file re-executes that cell's page and the summaries, not the other
    cells. The manifest's study key and schema are always in it.
    """
    path = study.processed / "manifest.json"
    stat = path.stat()
    manifest, runs = _processed_index(study.processed, (stat.st_mtime_ns, stat.st_size))
    if not levels:
        return json.dumps(manifest, sort_keys=True).encode()
    levels = {f: v for f, v in levels.items() if f in runs.columns}
    if not levels:
        return json.dumps(manifest, sort_keys=True).encode()
    prefix = f"{study.study.name}/"
    sources = {s.removeprefix(prefix) for s in runs["source"].drop_nulls()}
    # a file is read where any of its runs is at the levels, or has no level of a factor (conservatively)
    at = pl.all_horizontal(pl.col(f).is_null() | (pl.col(f).cast(pl.String) == str(v)) for f, v in levels.items())
    read = {s.removeprefix(prefix) for s in runs.filter(at)["source"].drop_nulls()}
    files = {rel: entry for rel, entry in manifest.get("files", {}).items() if rel in read or rel not in sources}
    kept = {k: v for k, v in manifest.items() if k != "files"} | {"files": files}
    return json.dumps(kept, sort_keys=True).encode()


#: How the papermill log says that a kernel did not start (a busy machine, a port taken meanwhile).
_KERNEL_START = ("Kernel didn't respond", "Kernel died before replying")


def _papermill(execution: Execution, target: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """Execute one notebook with papermill; a kernel that did not start is started once more.

    ``env``: variables for its kernel besides :data:`benchlib.figures.REPORT_KERNEL` (the build's checked study).
    """
    command = [
        sys.executable,
        "-m",
        "papermill",
        str(execution.notebook),
        str(target),
        "-k",
        "python3",
        "--no-progress-bar",
        "--no-request-save-on-cell-execute",
        "--start-timeout",
        "120",
        "-y",
        json.dumps(execution.parameters),
        "--cwd",
        str(PROJECT_ROOT),
    ]
    # the pages draw the exported SVG, which the kernel writes beside the page as it shows each figure
    env = {**os.environ, REPORT_KERNEL: "1", **(env or {}), FIGURES_TO: str(_figures_folder(execution).resolve())}
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if done.returncode and any(sign in done.stderr for sign in _KERNEL_START):
        _figures_folder(execution)  # what the first attempt wrote, if anything
        done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    return done


def _figures_folder(execution: Execution) -> Path:
    """Return (made, emptied of figures) the folder an execution's kernel writes its figures to, numbered from 1."""
    folder = execution.output_dir
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("figure-*"):
        old.unlink()
    return folder


def _notebook_error(executed: Path) -> str | None:
    """Return the first error an executed notebook holds: the cell's first line, the exception and its message."""
    try:
        cells = json.loads(executed.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError):
        return None
    for cell in cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                first = next((line for line in "".join(cell.get("source", "")).splitlines() if line.strip()), "")
                message = str(output.get("evalue", ""))[:1000]
                return f"in the cell beginning {first!r}: {output.get('ename')}: {message}"
    return None


#: empty the namespace, say where the next page's figure files go (a Python literal), then keep the garbage
#: collector off what survives (the imported modules): the next reset's collection then scans only what the
#: next notebook made (0.08-0.19 s a page otherwise)
_RESET = "%reset -f\n__import__('os').environ[{name!r}] = {folder!r}\n__import__('gc').freeze()"


def _reset(manager: object, figures: Path) -> None:
    """Empty a kernel's namespace (:data:`_RESET`), asking on the shell channel alone and awaiting its reply.

    ``figures``: the folder the next page's figures are written to (:data:`benchlib.figures.FIGURES_TO`).
    The shell channel queues a request until it is connected, so no readiness check is needed (one costs
    0.2 s of waiting for IOPub to fall quiet); a reply that is not ``ok`` raises.
    """
    code = _RESET.format(name=FIGURES_TO, folder=str(figures.resolve()))
    client = manager.client()
    client.start_channels(shell=True, iopub=False, stdin=False, hb=False, control=False)
    try:
        sent = client.execute(code, silent=True, store_history=False)
        while True:
            reply = client.get_shell_msg(timeout=120)
            if reply["parent_header"].get("msg_id") == sent:
                break
        if reply["content"].get("status") != "ok":
            raise PipelineError(f"the kernel could not be reset: {reply['content'].get('evalue', '')}")
    finally:
        client.stop_channels()


@functools.cache
def _ready_client() -> type:
    """Return the client class of the warm kernels: ready once IOPub carries its own request's idle status.

    jupyter_client's readiness check ends on 0.2 s of IOPub silence after its ``kernel_info`` reply, on every
    page of a report (a quarter of a cell page's time); the idle status of that very request says the same,
    at once: IOPub is connected and holds nothing more of it. A request whose messages IOPub missed (connected
    too late) is asked again.
    """
    from queue import Empty

    from jupyter_client.blocking import BlockingKernelClient
    from jupyter_core.utils import ensure_async, run_sync

    class ReadyClient(BlockingKernelClient):
        async def _async_ready(self, timeout: float | None = None) -> None:
            deadline = time.monotonic() + (timeout or 60)
            while time.monotonic() < deadline:
                sent, reply = self.kernel_info(), None
                while reply is None and time.monotonic() < deadline:  # this request's (an older one's passed over)
                    with contextlib.suppress(Empty):
                        got = await ensure_async(self.shell_channel.get_msg(timeout=1))
                        reply = got if got["parent_header"].get("msg_id") == sent else None
                while reply is not None:
                    try:
                        msg = await ensure_async(self.iopub_channel.get_msg(timeout=0.5))
                    except Empty:
                        break  # missed (not connected when it was sent): ask again
                    if msg["parent_header"].get("msg_id") == sent and msg["content"].get("execution_state") == "idle":
                        self._handle_kernel_info_reply(reply)
                        return
            raise RuntimeError(f"the kernel did not answer in {timeout} s")

        wait_for_ready = run_sync(_async_ready)

    return ReadyClient


#: the warm kernels' arguments: no IPython input history (:meth:`WarmKernels._kernel`)
NO_HISTORY = ["--HistoryManager.enabled=False"]


class WarmKernels:
    """One kernel per worker thread, kept warm for the cell notebook's executions.

    A new kernel costs a process start and the imports (about 3 s here); a report runs the same cell
    notebook once per cell. Each execution starts from an empty namespace (``%reset -f``): only the
    imported modules carry over, and the same notebook imports the same ones, so a cell's outputs are
    the ones a fresh kernel gives (``tests/test_report.py`` checks). A kernel that failed is dropped;
    the next execution on that worker starts a new one. Kernels talk over Unix sockets in a private
    folder (no TCP port).
    """

    def __init__(self, env: dict | None = None) -> None:
        self._env = {**os.environ, REPORT_KERNEL: "1", **(env or {})}
        self._local = threading.local()
        self._lock = threading.Lock()
        self._started: list[tuple[object, str]] = []

    def execute(self, execution: Execution, target: Path) -> None:
        """Run ``execution``'s notebook with papermill in this thread's kernel; PipelineError if it fails."""
        import papermill

        try:
            manager = self._kernel()
            _reset(manager, _figures_folder(execution))
            papermill.execute_notebook(
                str(execution.notebook),
                str(target),
                parameters=execution.parameters,
                km=manager,
                kernel_name="python3",
                progress_bar=False,
                start_timeout=120,
                request_save_on_cell_execute=False,  # saved once at the end (and on an error), not twice a cell
            )
        except Exception as exc:  # a cell's error, a dead kernel, a timeout: say which notebook, drop the kernel
            self._drop()
            why = _notebook_error(target) or "\n".join(str(exc).strip().splitlines()[-8:])
            raise PipelineError(f"{execution.notebook.name} for {execution.slug} failed; see {target}\n{why}") from None

    def _kernel(self) -> object:
        manager = getattr(self._local, "manager", None)
        if manager is None:
            from jupyter_client.manager import KernelManager

            folder = tempfile.mkdtemp(prefix="benchlib-kernel-")
            manager = KernelManager(kernel_name="python3", transport="ipc")
            manager.client_factory = _ready_client()
            manager.ip = str(Path(folder) / "kernel")
            # no input history: IPython writes each cell to a SQLite file the pages never read (a tenth of a
            # cell page's kernel CPU; the two workers' kernels also wait on each other's writes to it)
            manager.start_kernel(cwd=str(PROJECT_ROOT), env=self._env, extra_arguments=NO_HISTORY)
            self._local.manager = manager
            with self._lock:
                self._started.append((manager, folder))
        return manager

    def _drop(self) -> None:
        manager = getattr(self._local, "manager", None)
        self._local.manager = None
        if manager is not None:
            self._stop(manager)

    def _stop(self, manager: object) -> None:
        with self._lock:
            folder = next((f for m, f in self._started if m is manager), None)
            self._started = [(m, f) for m, f in self._started if m is not manager]
        with contextlib.suppress(Exception):  # already dead
            manager.shutdown_kernel(now=True)
        if folder:
            shutil.rmtree(folder, ignore_errors=True)

    def close(self) -> None:
        """Stop every kernel."""
        for manager, _ in list(self._started):
            self._stop(manager)


def _execute(
    execution: Execution, study: ProcessedStudy, kernels: WarmKernels | None = None, env: dict | None = None
) -> Execution:
    out = execution.output_dir
    out.mkdir(parents=True, exist_ok=True)
    stamp = out / ".fingerprint"
    fingerprint = _fingerprint(execution.notebook, execution.parameters, study, execution.levels)
    target = out / execution.notebook.name
    if stamp.exists() and stamp.read_text() == fingerprint and target.exists():
        execution.skipped = True
    else:
        if kernels is not None and execution.levels:  # a cell: the warm kernel
            kernels.execute(execution, target)
        else:  # a summary notebook: a fresh kernel of its own
            done = _papermill(execution, target, env)
            if done.returncode:
                why = _notebook_error(target) or "\n".join(done.stderr.strip().splitlines()[-8:])
                raise PipelineError(f"{execution.notebook.name} for {execution.slug} failed; see {target}\n{why}")
        _export_figures(target, out)
        stamp.write_text(fingerprint)
    execution.figures = len(list(out.glob("figure-*.json")))
    return execution


def _export_figures(notebook: Path, out: Path) -> None:
    """Make sure each figure of an executed notebook is in ``out`` as ``figure-N`` .json, .svg and .png.

    The page's kernel wrote them as it showed them (:data:`benchlib.figures.FIGURES_TO`); a figure whose
    Vega-Lite file is missing or is not the notebook's (a notebook run another way) is written here.
    """
    shown = _vegalite_outputs(notebook)
    for index, data in enumerate(shown, 1):
        spec = next(data[m] for m in VEGALITE if m in data)
        stem = out / f"figure-{index}"
        kept = stem.with_suffix(".json")
        if not (kept.is_file() and kept.read_text(encoding="utf-8") == figure_json(spec)):
            write_figure(spec, stem)
    for extra in out.glob("figure-*"):  # a figure the kernel wrote that the notebook does not show
        if int(extra.stem.removeprefix("figure-") or 0) > len(shown):
            extra.unlink()


def _vegalite_outputs(notebook: Path) -> list[dict]:
    """Return the data of each output of ``notebook`` that holds a Vega-Lite figure, in order."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return [
        output["data"]
        for cell in cells
        for output in cell.get("outputs", [])
        if any(m in output.get("data", {}) for m in VEGALITE)
    ]


def build_report(
    pipeline_path: str | Path,
    *,
    reports: Path = REPORTS,
    processed_root: Path = PROCESSED,
    workers: int = 2,
    progress: Callable[[int, int, str], None] | None = None,
) -> ReportResult:
    """Build ``reports/<pipeline>/``; see the module documentation."""
    from benchlib import fit

    pipeline = load_pipeline(pipeline_path)
    study = _current_study(pipeline.study, processed_root)
    if not pipeline.axes:  # every factor the runs vary: a page per configuration, a sweep on the sweeps page
        pipeline = dataclasses.replace(
            pipeline, axes=tuple(fit.axes(study)), only=pipeline.only or fit.cell_only(study)
        )
    else:  # runs of unlike work under one of the author's configurations: a page each, never one median
        work = fit.work_axes(study, list(pipeline.axes), pipeline.only)
        pipeline = dataclasses.replace(pipeline, axes=(*pipeline.axes, *work)) if work else pipeline
    chosen = "value" in pipeline.parameters  # a figure the author chose stands on every page
    if not chosen:  # the figure every page shows, said once for the index too
        pipeline = dataclasses.replace(pipeline, parameters={**pipeline.parameters, "value": fit.shape(study).value})
    runs = study.scan("runs").collect()
    factors = study.study.factors
    derived = [a for a in pipeline.axes if a == fit.PHASE or a not in factors]  # fio's groups, a job's parameters
    if derived:  # each phase and each job parameter's value a configuration: the results hold them, not the runs
        runs, factors = _with_derived(study, (*pipeline.axes, *pipeline.only), derived, factors)
    work = [a for a in derived if a != fit.PHASE]  # a job's parameters: the study declared no such levels
    planned = planned_combinations(study.study.folder, [a for a in pipeline.axes if a not in work])
    cells, missing, unplanned, declared = expand_cells(pipeline, runs, factors, planned, work=work)
    folder = reports / pipeline.name
    base = {"study": pipeline.study, **pipeline.parameters}
    shared = _shared_scale(pipeline, study)
    executions = [
        Execution(
            _slug(levels),
            pipeline.cell_notebook,
            {**base, "levels": levels, **shared},
            folder / "cells" / _slug(levels),
            levels,
        )
        for levels in cells
    ]
    left_out = []  # (page, why): a page the study's data cannot support is said on the index, not drawn empty
    for nb, name, own in zip(pipeline.summary_notebooks, _names(pipeline), _own(pipeline), strict=True):
        # not chosen: a page that compares fits its own (bandwidth where the sides ran unlike block sizes)
        own_value = not chosen and nb.stem in fit.OWN_VALUE
        given = {k: v for k, v in base.items() if k != "value"} if own_value else base
        try:
            parameters = fit.fitted(nb.stem, study, {**given, **own})
        except fit.PageLeftOut as why:
            left_out.append((name, str(why)))
            continue
        executions.append(Execution(name, nb, parameters, folder / "summary" / name))
    finished = 0
    checked = {CHECKED_BY_BUILD: str(study.processed.resolve())}  # its pages need not check the raw files again
    # the workers' kernels share the cores: each polars gets its share (two on two cores spun against each
    # other: 10% of a build's time), unless the user chose
    threads = os.environ.get("POLARS_MAX_THREADS") or str(max(1, (os.cpu_count() or 1) // workers))
    checked = {**checked, "POLARS_MAX_THREADS": threads}
    kernels = WarmKernels(checked)
    try:
        # the summary pages first: each takes a fresh kernel and seconds, and at the end it would run alone
        ordered = sorted(executions, key=lambda e: bool(e.levels))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for execution in pool.map(lambda e: _execute(e, study, kernels, checked), ordered):
                finished += 1
                if progress:
                    progress(finished, len(executions), execution.slug)
    finally:
        kernels.close()
    from benchlib.views import study_words

    with study_words(study):  # the index says levels as the pages do; the words end with it
        _write_index(pipeline, folder, executions, missing, declared, study, unplanned, left_out)
    return ReportResult(folder, executions, missing, left_out)


def _with_derived(
    study: ProcessedStudy, axes: tuple[str, ...], derived: list[str], factors: dict
) -> tuple[pl.DataFrame, dict]:
    """Return each run's combinations of ``axes`` (and what ``only`` keeps), the factors with ``derived`` levels.

    Derived: fio's groups (:data:`benchlib.fit.PHASE`) and job parameters (:func:`benchlib.fit.work_axes`),
    as text. The runs table has a row per run; a run's phases and job parameters are in its results.
    """
    from benchlib import fit
    from benchlib.tables import natural_rank
    from benchlib.views import _study_rows

    rows = _study_rows(study, None)
    # a run without a phase is fio's one group; one whose output does not give a job parameter, a level of its own
    text = {a: pl.col(a).cast(pl.String).fill_null("0" if a == fit.PHASE else NOT_GIVEN) for a in derived}
    held = [a for a in dict.fromkeys(axes) if a not in derived and a in rows.columns]  # the axes, and what only keeps
    combos = rows.select(*held, *(v.alias(a) for a, v in text.items())).unique()
    levels = {a: combos.select(a).unique().drop_nulls() for a in derived}
    return combos, {**factors, **{a: f.sort(natural_rank(f, a))[a].to_list() for a, f in levels.items()}}


def _write_index(
    pipeline: Pipeline,
    folder: Path,
    executions: list[Execution],
    missing: list[dict],
    declared: int,
    study: ProcessedStudy,
    unplanned: int | None,
    left_out: list[tuple[str, str]],
) -> None:
    """Write the report's pages and index (:func:`benchlib.report_html.write_html`) with what the index says first."""
    interaction = any(e.notebook.stem == "interaction" for e in executions)  # drawn, not only listed
    front = front_matter(study, interaction_page=interaction)
    value = pipeline.parameters.get("value")
    if isinstance(value, str):  # the runs to doubt, by the value the pages show
        from benchlib.views import implausible
        from benchlib.words.implausible import implausible_words

        found = implausible(study, value, by=list(pipeline.axes), only=pipeline.only)
        front["doubt"] = implausible_words(found, value, page="summary")
    from benchlib import fit
    from benchlib.results import configuration_results, factor_answers
    from benchlib.views import claim_table, conclusion_table

    claims = claim_table(study) if any(e.notebook.stem == "claims" for e in executions) else None

    results = configuration_results(study, list(fit.shape(study).varied))  # every configuration, as the post
    together = None  # the interaction page's tests, for the answers: two settings whose effects depend on each other
    page = next((e for e in executions if e.notebook.stem == "interaction"), None)
    if page is not None:
        from benchlib.views import interaction

        p = page.parameters
        _, tests = interaction(study, p["value"], x=p["x"], trace=p["trace"], by=p["by"], only=p["only"])
        together = {"tests": tests, "x": p["x"], "trace": p["trace"], "by": p["by"] or [], "page": f"{page.slug}.html"}
    write_html(
        pipeline,
        folder,
        executions,
        missing,
        declared,
        front=front,
        unplanned=unplanned,
        left_out=left_out,
        results=results,
        answers=factor_answers(study),
        together=together,
        claims=claims,
        matrix=tuple(a for a in pipeline.axes if a == fit.PHASE or a in study.study.factors),
        conclusions=None if claims is None else conclusion_table(study, claims),
    )


def _shared_scale(pipeline: Pipeline, study: ProcessedStudy) -> dict:
    """Return the cell pages' common value axis: ``{"y_max": the largest per-VM value of any run}`` or {}.

    Only for cell notebooks that take a ``y_max`` parameter and a pipeline that names its ``value``.
    """
    value = pipeline.parameters.get("value")
    if not value or "y_max" not in _notebook_parameters(pipeline.cell_notebook):
        return {}
    from benchlib.views import member_run_totals

    # each member's value in each run: the cell pages draw a dot per run above its median's bar
    members = member_run_totals(study, value, by=list(pipeline.axes), only=pipeline.only)
    top = members[value].max() if members.height else None
    return {"y_max": float(top) * 1.05} if top else {}


def _notebook_parameters(notebook: Path) -> str:
    """Return the source of a notebook's parameters cell (empty when it has none)."""
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            return "".join(cell["source"])
    return ""


def copy_notebook(name: str, parameters: dict, folder: Path) -> Path:
    """Copy canonical notebook ``name`` into ``folder`` as ``<study>-<name>.ipynb``, ready for an author.

    Outputs are cleared (they were the default study's) and ``parameters`` injected after the parameters
    cell as papermill does; a name the notebook does not take, or an existing copy, is refused.
    """
    import nbformat
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    source = PROJECT_ROOT / "notebooks" / f"{Path(name).stem}.ipynb"
    if not source.is_file():
        known = ", ".join(sorted(p.stem for p in source.parent.glob("*.ipynb")))
        raise PipelineError(f"no notebook {name!r} (the notebooks: {known})")
    known = {n for n, _, _ in notebook_parameters(source)}
    unknown = sorted(set(parameters) - known)
    if unknown:
        raise PipelineError(f"{source.name} takes no parameter {unknown[0]!r} (it takes: {', '.join(sorted(known))})")
    target = folder / f"{parameters.get('study', 'study')}-{source.stem}.ipynb"
    if target.exists():
        raise PipelineError(f"{target} exists; benchlib never overwrites your notebook: rename or remove it")
    notebook = load_notebook_node(str(source))  # as papermill reads it: every cell has its tags
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    notebook = parameterize_notebook(notebook, parameters)
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)
    return target


def notebook_parameters(notebook: Path) -> list[tuple[str, str, str]]:
    """Return a notebook's parameters as ``(name, default, what it means)``, from its parameters cell.

    Each line of the cell is ``name = default  # what it means``; a default of None is "from the study"
    (:mod:`benchlib.fit`).
    """
    found = []
    for line in _notebook_parameters(notebook).splitlines():
        match = re.fullmatch(r"(\w+)\s*=\s*(.*?)(?:\s+#\s*(.*))?", line.strip())
        if match:
            found.append((match[1], match[2], match[3] or ""))
    return found


def parameters_markdown(notebooks: Path = PROJECT_ROOT / "notebooks") -> str:
    """Return every canonical notebook's parameters as Markdown tables (notebooks/README.md holds this)."""
    parts = []
    for notebook in sorted(notebooks.glob("*.ipynb")):
        rows = [f"| `{n}` | `{d}` | {w} |" for n, d, w in notebook_parameters(notebook)]
        table = ["| parameter | default | what it is |", "|---|---|---|", *rows]
        parts.append(f"### `{notebook.name}`\n\n" + "\n".join(table))
    return "\n\n".join(parts) + "\n"


#: What the index's provenance lists of the environment.
PINNED = ("polars", "altair", "scipy", "numpy", "papermill", "vl-convert-python", "nbval")


def front_matter(study: ProcessedStudy, *, interaction_page: bool = False) -> dict[str, str | bool]:
    """Return what the index says before its pages: the source, the design, the README's caveats, provenance.

    ``source``: study.toml's citation (what the data are, where from), as written.
    ``design``: the study's design (:func:`benchlib.views.design`) in words, ``support``: what it can support
    (``interaction_page``: the report has one), ``runs_once``: whether every configuration was run once (the
    index then leaves the pages' one-run caveats out: it says so once), ``too_few``: whether the repeated
    configurations all ran too few times for any comparison of two to reach α (the support says so once, and
    the index leaves the pages' caveat of it out).
    ``caveats``: the sections of the study's README whose heading says what the data is not
    (or its limits, caveats), as written.
    ``provenance``: benchlib's version and commit, a digest of the raw files, package versions and the
    build time, as Markdown list lines.
    """
    from datetime import UTC, datetime

    from benchlib import __version__
    from benchlib.views import design, drift, settled_rule
    from benchlib.words.design import design_statement, drift_words, settled_words, support

    found = design(study)
    readme = study.study.folder / "README.md"
    caveats = _caveats(readme.read_text(encoding="utf-8", errors="replace")) if readme.is_file() else ""
    digest = (raw_data_digest(study.processed) or "unknown")[:16]
    versions = []
    for name in PINNED:
        try:
            versions.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    provenance = [
        f"- benchlib {__version__}, commit {source_commit()}",
        f"- raw data: digest {digest} of the path, size and SHA-256 of every file ingest read",
        f"- Python {sys.version.split()[0]}; {', '.join(versions)}",
        f"- built {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}",
    ]
    return {
        "source": study.study.citation,
        "design": "\n\n".join(
            filter(
                None,
                (
                    design_statement(found, with_support=False),
                    settled_words(settled_rule(study)),
                    drift_words(drift(study)),
                ),
            )
        ),
        "support": "\n\n".join(support(found, interaction_page=interaction_page)) if found else "",
        "runs_once": found is not None and found.runs_high == 1,
        "too_few": found is not None
        and found.min_p is not None
        and found.min_p > 0.05
        and found.repeated_low == found.runs_high,
        "caveats": caveats,
        "provenance": "\n".join(provenance),
    }


def _caveats(readme: str) -> str:
    """Return the README sections whose heading says what the data is not, or its limits or caveats."""
    sections, keep = [], False
    for line in readme.splitlines():
        heading = re.match(r"#{1,6}\s+(.*)", line)
        if heading:
            keep = bool(re.search(r"\bnot\b|caveat|limit", heading[1], re.IGNORECASE))
            continue
        if keep:
            sections.append(line)
    return "\n".join(sections).strip()


def _current_study(name: str, processed_root: Path) -> ProcessedStudy:
    """Open the study's processed tables, ingesting first only when they are stale.

    Return the study's processed tables, ingested first when its raw files changed (never otherwise: the data
    may be read-only). The notebooks then only read them.
    """
    try:
        return open_study(name, processed_root)
    except StaleStudyError:
        ingest_study(RAW / name, processed_root)
        return open_study(name, processed_root)


def _names(pipeline: Pipeline) -> tuple[str, ...]:
    return pipeline.summary_names or tuple(nb.stem for nb in pipeline.summary_notebooks)


def _own(pipeline: Pipeline) -> tuple[dict, ...]:
    return pipeline.summary_parameters or tuple({} for _ in pipeline.summary_notebooks)
