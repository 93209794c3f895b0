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

``build_report`` ingests the study, expands the axes to the cells present in
the data (declared combinations without data are reported as missing, not
errors), runs papermill once per cell and once per summary notebook, two at a
time, skips executions whose notebook, parameters and processed data did not
change (nor did benchlib's code or the installed dependency versions), and writes the executed notebooks, every figure as Vega-Lite JSON, SVG
and PNG, and a self-contained HTML report (an index and one page per cell; :mod:`benchlib.report_html`).
Executed notebooks never overwrite ``notebooks/``.

The helpers at the end (``study_tables``, ``cell_frame``, ``per_member``) are what
the notebooks call: notebooks narrate, benchlib computes.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import itertools
import json
import keyword
import re
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import polars as pl

from benchlib.errors import BenchlibError
from benchlib.paths import PROCESSED, PROJECT_ROOT, RAW, REPORTS
from benchlib.report_html import VEGALITE, write_html
from benchlib.schema import Tables
from benchlib.study import load_study
from benchlib.tomlfile import read_toml


class PipelineError(BenchlibError):
    """A pipeline file is missing, invalid, or names a study, axis or notebook that does not exist."""


@dataclass(frozen=True)
class Pipeline:
    """A parsed pipeline file."""

    name: str
    study: str
    title: str
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


def load_pipeline(path: str | Path) -> Pipeline:
    """Read and check ``pipelines/<name>.toml``."""
    path = Path(path)
    if not path.is_file():
        candidates = ", ".join(sorted(p.stem for p in (PROJECT_ROOT / "pipelines").glob("*.toml")))
        raise PipelineError(f"{path}: no such pipeline file (pipelines here: {candidates or 'none'})")
    data = read_toml(path, PipelineError)
    spec = data.get("pipeline", {})
    for key in ("study", "axes", "cell_notebook"):
        if key not in spec:
            raise PipelineError(f"{path}: [pipeline] needs {key}")
    study = load_study(RAW / spec["study"])
    unknown = [a for a in spec["axes"] if a not in study.factors]
    if unknown:
        raise PipelineError(f"{path}: axes {unknown} are not factors of study {spec['study']!r} "
                            f"(its factors: {', '.join(study.factors) or 'none'})")
    summaries = [_summary_entry(path, i, entry) for i, entry in enumerate(spec.get("summary_notebooks", []))]
    names = [name for name, _, _ in summaries]
    if len(set(names)) != len(names):
        raise PipelineError(f"{path}: two summary notebooks have the same page name; give one a name = \"...\"")
    notebooks = [PROJECT_ROOT / spec["cell_notebook"], *[PROJECT_ROOT / n for _, n, _ in summaries]]
    for notebook in notebooks:
        if not notebook.is_file():
            raise PipelineError(f"{path}: notebook {notebook.relative_to(PROJECT_ROOT)} does not exist")
    return Pipeline(
        name=path.stem, study=str(spec["study"]), title=str(spec.get("title", spec["study"])), axes=tuple(spec["axes"]),
        cell_notebook=notebooks[0], summary_notebooks=tuple(notebooks[1:]),
        parameters=_parameters(path, "[parameters]", data.get("parameters", {})),
        summary_parameters=tuple(p for _, _, p in summaries), summary_names=tuple(names),
        only={k: [str(v) for v in vs] for k, vs in spec.get("only", {}).items()},
    )


def _parameters(path: Path, where: str, table: object) -> dict:
    """Notebook parameters: papermill writes each name into the notebook as code, so a name must be a plain
    Python identifier; values pass through papermill's own translation (literals only)."""
    if not isinstance(table, dict):
        raise PipelineError(f"{path}: {where} must be a table of name = value")
    for name in table:
        if not str(name).isidentifier() or keyword.iskeyword(str(name)):
            raise PipelineError(f"{path}: {where}: {str(name)!r} is not a parameter name (a notebook parameter is a "
                                "Python identifier such as value or by; papermill writes it into the notebook as code)")
    return dict(table)


def _summary_entry(path: Path, index: int, entry: object) -> tuple[str, str, dict]:
    """(page name, notebook, parameters) of a summary notebook: a path, or ``{notebook, name, parameters}``."""
    if isinstance(entry, str):
        return Path(entry).stem, entry, {}
    if isinstance(entry, dict) and isinstance(entry.get("notebook"), str):
        extra = set(entry) - {"notebook", "name", "parameters"}
        if extra:
            raise PipelineError(f"{path}: summary notebook {index + 1} has unknown keys {sorted(extra)} "
                                "(allowed: notebook, name, parameters)")
        where = f"summary notebook {index + 1} parameters"
        return str(entry.get("name", Path(entry["notebook"]).stem)), entry["notebook"], _parameters(
            path, where, entry.get("parameters", {}))
    raise PipelineError(f"{path}: summary notebook {index + 1} must be a path or {{ notebook = \"...\", parameters = {{...}} }}")


def _slug(levels: dict) -> str:
    """A cell's folder and page name: its levels, in characters safe in a file name and a URL.

    Levels from data may hold anything; when a character had to be replaced, a short digest
    of the exact levels keeps two cells that differ only there apart.
    """
    text = "__".join(f"{k}={v}" for k, v in levels.items())
    safe = re.sub(r"[^A-Za-z0-9._=-]", "_", text)
    return safe if safe == text else f"{safe}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def expand_cells(pipeline: Pipeline, runs: pl.DataFrame) -> tuple[list[dict], list[dict]]:
    """The axis combinations present in the runs, and the declared ones without data."""
    study = load_study(RAW / pipeline.study)
    axes = list(pipeline.axes)
    for factor, levels in pipeline.only.items():
        runs = runs.filter(pl.col(factor).is_in(levels))
    present = runs.select(axes).drop_nulls().unique().sort(axes).to_dicts()
    seen = {tuple(c[a] for a in axes) for c in present}
    declared = itertools.product(*(pipeline.only.get(a, study.factors[a]) for a in axes))
    missing = [dict(zip(axes, combo, strict=True)) for combo in declared if combo not in seen]
    order = {a: {lvl: i for i, lvl in enumerate(study.factors[a])} for a in axes}
    present.sort(key=lambda c: [order[a].get(c[a], 99) for a in axes])
    return present, missing


@functools.cache
def code_digest(package: Path = Path(__file__).resolve().parent) -> str:
    """SHA-256 over what every execution depends on besides its notebook and data: the source of the
    ``benchlib`` package (every ``.py``, ``.c`` and ``.txt`` file) and the installed versions of its
    dependencies. Computed once per process."""
    digest = hashlib.sha256()
    for path in sorted(p for p in package.rglob("*") if p.suffix in (".py", ".c", ".txt") and p.is_file()):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    for requirement in sorted(importlib.metadata.requires("benchlib") or []):
        name = re.split(r"[\s;=<>!~\[]", requirement, maxsplit=1)[0]
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            digest.update(f"{name}=={importlib.metadata.version(name)}\n".encode())
    return digest.hexdigest()


def _fingerprint(notebook: Path, parameters: dict, processed: Path) -> str:
    """What an execution depends on: its notebook, parameters, the study's processed data, benchlib's code
    and the dependencies' versions (:func:`code_digest`)."""
    digest = hashlib.sha256(notebook.read_bytes())
    digest.update(json.dumps(parameters, sort_keys=True).encode())
    digest.update((processed / "manifest.json").read_bytes())
    digest.update(code_digest().encode())
    return digest.hexdigest()


def _execute(execution: Execution, processed: Path) -> Execution:
    out = execution.output_dir
    out.mkdir(parents=True, exist_ok=True)
    stamp = out / ".fingerprint"
    fingerprint = _fingerprint(execution.notebook, execution.parameters, processed)
    target = out / execution.notebook.name
    if stamp.exists() and stamp.read_text() == fingerprint and target.exists():
        execution.skipped = True
    else:
        done = subprocess.run(
            [sys.executable, "-m", "papermill", str(execution.notebook), str(target), "-k", "python3", "--no-progress-bar",
             "-y", json.dumps(execution.parameters), "--cwd", str(PROJECT_ROOT)],
            capture_output=True, text=True, check=False,
        )
        if done.returncode:
            raise PipelineError(f"{execution.notebook.name} for {execution.slug} failed; see {target}\n"
                                + "\n".join(done.stderr.strip().splitlines()[-8:]))
        _export_figures(target, out)
        stamp.write_text(fingerprint)
    execution.figures = len(list(out.glob("figure-*.json")))
    return execution


def _export_figures(notebook: Path, out: Path) -> None:
    import vl_convert as vlc

    for old in out.glob("figure-*"):
        old.unlink()
    for index, spec in enumerate(_vegalite_outputs(notebook), 1):
        stem = out / f"figure-{index}"
        stem.with_suffix(".json").write_text(json.dumps(spec, indent=1, sort_keys=True))
        stem.with_suffix(".svg").write_text(vlc.vegalite_to_svg(spec))
        stem.with_suffix(".png").write_bytes(vlc.vegalite_to_png(spec, scale=2))


def _vegalite_outputs(notebook: Path) -> list[dict]:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    specs = []
    for cell in cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            specs += [data[m] for m in VEGALITE if m in data][:1]
    return specs


def build_report(pipeline_path: str | Path, *, reports: Path = REPORTS, processed_root: Path = PROCESSED,
                 workers: int = 2, progress: Callable[[int, int, str], None] | None = None) -> ReportResult:
    """Build ``reports/<pipeline>/``; see the module documentation."""
    from benchlib.ingest import ingest_study, scan_table

    pipeline = load_pipeline(pipeline_path)
    report = ingest_study(RAW / pipeline.study, processed_root)
    runs = scan_table(report.processed, "runs").collect()
    cells, missing = expand_cells(pipeline, runs)
    folder = reports / pipeline.name
    base = {"study": pipeline.study, **pipeline.parameters}
    executions = [
        Execution(_slug(levels), pipeline.cell_notebook, {**base, "levels": levels}, folder / "cells" / _slug(levels), levels)
        for levels in cells
    ] + [Execution(name, nb, {**base, **own}, folder / "summary" / name)
         for nb, name, own in zip(pipeline.summary_notebooks, _names(pipeline), _own(pipeline), strict=True)]
    finished = 0
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for execution in pool.map(lambda e: _execute(e, report.processed), executions):
            finished += 1
            if progress:
                progress(finished, len(executions), execution.slug)
    write_html(pipeline, folder, executions, [_slug(m) for m in missing])
    return ReportResult(folder, executions, missing)


def _names(pipeline: Pipeline) -> tuple[str, ...]:
    return pipeline.summary_names or tuple(nb.stem for nb in pipeline.summary_notebooks)


def _own(pipeline: Pipeline) -> tuple[dict, ...]:
    return pipeline.summary_parameters or tuple({} for _ in pipeline.summary_notebooks)


# ------------------------------------------------------------------ for notebooks

def _processed(study: str) -> Path:
    """Ingest ``data/raw/<study>`` (incremental, quiet) and return its processed folder."""
    from benchlib.ingest import ingest_study

    return ingest_study(RAW / study).processed


def study_tables(study: str, processed: Path | None = None) -> Tables:
    """Ingest ``data/raw/<study>`` and load its runs and results (what the notebooks use; a study's
    intervals can be millions of rows). ``processed``: already ingested there."""
    from benchlib.ingest import load_study_tables

    return load_study_tables(processed or _processed(study), only=("runs", "results"))


def _study_rows(study: str, only: dict | None, processed: Path | None = None) -> pl.DataFrame:
    """Per-host result rows of the study (no tool aggregates, no logs), restricted to ``only`` levels,
    with labels and derived metrics."""
    from benchlib.claims import claims_frame

    frame = claims_frame(study_tables(study, processed)).filter(~pl.col("is_aggregate"), pl.col("format") != "fio-log")
    return _at_levels(frame, only or {})


FrameT = TypeVar("FrameT", pl.DataFrame, pl.LazyFrame)


def _at_levels(frame: FrameT, only: dict) -> FrameT:
    """The rows of ``frame`` (eager or lazy) whose factors have one of the ``only`` levels."""
    for factor, levels in only.items():
        frame = frame.filter(pl.col(factor).is_in([str(level) for level in levels]))
    return frame


def cell_frame(study: str, levels: dict) -> pl.DataFrame:
    """Per-host result rows (no tool aggregates, no logs) of one matrix cell, with labels and derived metrics."""
    return _study_rows(study, {factor: [level] for factor, level in levels.items()})


_ADDITIVE = ("iops", "bandwidth_mib_s", "bandwidth_bytes_per_s", "io_count", "io_bytes")
#: Each row's weight in a latency mean: its I/O count (1 where a table gives none).
_WEIGHT = pl.coalesce(pl.col("io_count"), pl.lit(1)).alias("_weight")


def _total(value: str) -> pl.Expr:
    """A run's total of ``value``: rates add (a sum of nothing is not zero), latencies are I/O-weighted."""
    from benchlib.stats import weighted_mean_expr

    if value in _ADDITIVE:
        return pl.when(pl.col(value).is_not_null().any()).then(pl.col(value).sum())
    return weighted_mean_expr(value, "_weight")


def per_member(frame: pl.DataFrame, value: str, member: str = "vm", by: tuple[str, ...] = ()) -> pl.DataFrame:
    """One value per VM/host (per group of ``by``): each run's total (directions and jobs added for
    rates, I/O-weighted for latencies), then the median over repetitions."""
    per_run = frame.with_columns(_WEIGHT).group_by("run_id", member, *by).agg(_total(value).alias(value))
    return per_run.group_by(*by, member).agg(pl.col(value).median(), pl.len().alias("runs")).sort(*by, member)


def describe_cell(members: pl.DataFrame, value: str, levels: dict, member: str = "vm") -> str:
    """One sentence of prose with the cell's numbers, computed here so the text cannot drift from the data."""
    from benchlib.stats import jain_expr

    stats = members.select(
        jain_expr(pl.col(value)).alias("jain"), (pl.col(value).max() / pl.col(value).min()).alias("spread"),
        pl.col(value).sum().alias("total"), pl.col(member).sort_by(value).last().alias("top"),
    ).row(0, named=True)
    where = ", ".join(f"{k} {v}" for k, v in levels.items())
    return (f"**{where}**: {members.height} {member}s; the highest ({stats['top']}) got {stats['spread']:.2f} times the "
            f"lowest; Jain's index {stats['jain']:.4f}; together {stats['total']:,.0f} ({value}).")


def overview(study: str) -> pl.DataFrame:
    """Runs per tool and format, with the factors each covers."""
    runs = study_tables(study).runs
    return runs.group_by("tool", "format").agg(pl.len().alias("runs"), pl.col("host").n_unique().alias("hosts")).sort("tool", "format")


def claim_table(study: str) -> pl.DataFrame:
    """The verdicts of ``data/raw/<study>/claims.toml`` as a table."""
    from benchlib.claims import load_claims, verify

    claims, tolerances = load_claims(RAW / study)
    verdicts = verify(study_tables(study), claims, tolerances)
    return pl.DataFrame([{"claim": v.claim.id, "section": v.claim.section, "stated": v.claim.stated,
                          "recomputed": v.recomputed, "tolerance": v.tolerance, "verdict": v.verdict} for v in verdicts])


def claim_values(table: pl.DataFrame) -> dict[str, str]:
    """``claim id -> recomputed value`` from :func:`claim_table`, for quoting in prose by name."""
    return dict(zip(table["claim"], table["recomputed"], strict=True))


def profile_totals(study: str, profile: str, member: str = "vm") -> pl.DataFrame:
    """Per run and host of one profile: IOPS summed over directions and jobs, I/O-weighted mean latency,
    with the run's job parameters and factor levels (for sweeps and curves)."""
    from benchlib.stats import weighted_mean_expr

    frame = cell_frame(study, {"profile": profile}).with_columns(pl.col("rwmixread_pct").fill_null(100.0))
    keys = ["run_id", member, "iodepth", "rwmixread_pct"]
    totals = frame.group_by(keys).agg(pl.col("iops").sum(), weighted_mean_expr("lat_mean_ns", "io_count").alias("lat_mean_ns"))
    return totals.with_columns((100 - pl.col("rwmixread_pct")).alias("write_pct")).sort(keys)


def run_totals(study: str, value: str, factors: list[str], only: dict | None = None) -> pl.DataFrame:
    """One value per run with its factor levels: the experimental unit of a comparison.

    A run is one tool invocation (a fio client/server run counts its hosts
    together: rates add, latencies are I/O-weighted) or one row of a
    published per-VM table.
    """
    frame = _study_rows(study, only).with_columns(_WEIGHT)
    keys = ["sha256", "document_index", *factors]
    return frame.group_by(keys).agg(_total(value).alias(value)).drop_nulls(value).sort(keys)


def member_efficiency(study: str, *, by: list[str], only: dict | None = None, member: str = "vm") -> pl.DataFrame:
    """IOPS per CPU% per VM (host) and group: each run's IOPS (directions added) over its guest CPU%
    (usr + sys), then the median over the VM's runs."""
    frame = _study_rows(study, only)
    per_run = frame.group_by("run_id", member, *by).agg(pl.col("iops_or_derived").sum().alias("iops"),
                                                        pl.col("cpu_pct").max().alias("cpu_pct"))
    per_run = per_run.with_columns((pl.col("iops") / pl.col("cpu_pct")).alias("iops_per_cpu_pct")).drop_nulls("iops_per_cpu_pct")
    return per_run.group_by(*by, member).agg(pl.col("iops_per_cpu_pct").median(), pl.col("cpu_pct").median(),
                                             pl.len().alias("runs")).sort(*by, member)


def efficiency_table(study: str, *, test: list[str], setting: str, only: dict | None = None) -> pl.DataFrame:
    """Per test (the ``test`` factors joined into one label) and setting: the median over VMs of
    :func:`member_efficiency`, with the number of VMs."""
    per_vm = member_efficiency(study, by=[*test, setting], only=only)
    table = per_vm.group_by(*test, setting).agg(pl.col("iops_per_cpu_pct").median(), pl.col("cpu_pct").median(),
                                                pl.len().alias("vms")).sort(*test, setting)
    return table.with_columns(pl.concat_str([pl.col(c) for c in test], separator=" ").alias("test"))


def member_values(study: str, value: str, *, by: list[str], only: dict | None = None, member: str = "vm") -> pl.DataFrame:
    """One value per VM (host) per group of ``by``: each run's total, then the median over repetitions."""
    return per_member(_study_rows(study, only), value, member, tuple(by)).drop_nulls(value)


def host_series(study: str, levels: dict, *, metric: str = "iops", repetition: int = 1) -> pl.DataFrame:
    """Per-interval values of one cell and repetition, per host (fio's logs; directions added per interval)."""
    from benchlib.ingest import scan_table

    processed = _processed(study)
    runs = scan_table(processed, "runs").filter(pl.col("format") == "fio-log", pl.col("repetition") == repetition)
    picked = _at_levels(runs, {factor: [level] for factor, level in levels.items()}).select("run_id", "host").collect()
    series = (scan_table(processed, "intervals")
              .filter(pl.col("run_id").is_in(picked["run_id"].implode()), pl.col("metric") == metric).collect())
    series = series.join(picked, on="run_id").group_by("host", "time_ns").agg(pl.col("value").sum())
    return series.sort("host", "time_ns")


def disk_view(study: str, *, by: list[str], only: dict | None = None) -> pl.DataFrame:
    """Where a cell's latency was spent, from the kernel's disk statistics that fio reports (``disk_util``).

    Per run and host: fio's mean latency (what the application saw), the
    block layer's time per I/O (``(read_ticks + write_ticks) / (read_ios +
    write_ios)``, iostat's await), the mean number of I/Os in the device queue
    (``in_queue`` over the run time, iostat's aqu-sz) and its utilisation;
    then the median per group. Latency above await was spent above the block
    layer (in the guest: file system, page cache, fio's own queue).
    """
    from benchlib.ingest import scan_table

    processed = _processed(study)
    counters = (scan_table(processed, "host_counters").filter(pl.col("object") == "fio disk stats").collect()
                .pivot(on="counter", index=["run_id", "host", "instance"], values="value", aggregate_function="first"))
    rows = _study_rows(study, only, processed).with_columns(_WEIGHT)
    guest = rows.group_by("run_id", *by).agg(_total("lat_mean_ms").alias("app_latency_ms"), pl.col("iops").sum(),
                                             pl.col("runtime_ns").max())
    view = guest.join(counters, on="run_id", how="inner").with_columns(
        ((pl.col("read_ticks_ms") + pl.col("write_ticks_ms")) / (pl.col("read_ios") + pl.col("write_ios"))).alias("device_await_ms"),
        (pl.col("in_queue_ms") / (pl.col("runtime_ns") / 1e6)).alias("device_queue"),
    )
    view = view.with_columns(((pl.col("read_ios") + pl.col("write_ios")) / (pl.col("runtime_ns") / 1e9)).alias("device_ios_per_s"))
    medians = view.group_by(*by).agg(
        pl.col("app_latency_ms").median(), pl.col("device_await_ms").median(), pl.col("device_ios_per_s").median(),
        pl.col("device_queue").median(), pl.col("util_pct").median(), pl.col("instance").first().alias("device"),
        pl.len().alias("host_runs"),
    )
    above = (pl.col("app_latency_ms") - pl.col("device_await_ms")).clip(lower_bound=0).alias("above_device_ms")
    return medians.with_columns(above).sort(by)


def esxtop_view(study: str) -> pl.DataFrame:
    """The device queue view (DQLEN, ACTV, QUED, DAVG, KAVG, GAVG...) of every esxtop capture in the study
    (an empty frame when there is none)."""
    from benchlib.ingest import scan_table
    from benchlib.sources.esxtop import device_queue_view

    processed = _processed(study)
    esxtop = scan_table(processed, "runs").filter(pl.col("format") == "esxtop").select("run_id").collect()
    counters = scan_table(processed, "host_counters").filter(pl.col("run_id").is_in(esxtop["run_id"].implode())).collect()
    return device_queue_view(counters)
