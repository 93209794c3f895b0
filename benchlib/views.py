"""What the notebooks call: a study's rows, selected and joined, ready for a table or a figure.

Notebooks narrate; benchlib computes. Every function here reads a study through
:func:`benchlib.store.open_study` (so it never writes, and refuses tables that no
longer describe the raw files), selects rows and joins tables. The rules that
turn rows into numbers (rates add, latencies are I/O-weighted, Jain's index)
live in :mod:`benchlib.stats`, once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import polars as pl

from benchlib.schema import NOT_GIVEN, UNNAMED_HOST, Tables, measured_io_expr, run_unit_expr
from benchlib.stats import total_expr
from benchlib.stats.aggregate import exceedance, median_of_run_totals, pooled_percentiles
from benchlib.stats.efficiency import run_efficiency
from benchlib.stats.order import Drift
from benchlib.stats.queueing import configured_depth_expr, device_latency_split
from benchlib.stats.sequential import Looks
from benchlib.stats.steady import run_steadiness
from benchlib.store import ProcessedStudy, open_study
from benchlib.words.hostside import latency_split_notes
from benchlib.words.steady import steadiness_note

if TYPE_CHECKING:
    from benchlib.runner.repetitions import SettleRule

#: Formats whose files are not runs: a per-second log belongs to the run of its json output, an esxtop
#: capture is the host's view beside the runs.
NOT_RUNS = ("fio-log", "fio-hist-log", "esxtop")


#: A study as the views take it: its name (or raw folder), or one already opened (a report opens it once)
StudyRef = str | ProcessedStudy


def _open(study: StudyRef) -> ProcessedStudy:
    """Open a study by name (checked against its raw files), or return the one already opened."""
    return study if isinstance(study, ProcessedStudy) else open_study(study)


def study_tables(study: StudyRef) -> Tables:
    """Return a study's runs and results (what the notebooks use; a study's intervals can be millions of rows)."""
    return _open(study).tables(only=("runs", "results"))


def _study_rows(study: StudyRef, only: dict | None) -> pl.DataFrame:
    """Return the study's per-host result rows.

    Per-host result rows of the study (no tool aggregates, no logs), restricted to ``only`` levels,
    with labels and derived metrics.
    """
    tables = study_tables(study)
    key = (id(tables.runs), id(tables.results))
    if _ROWS.get("key") != key:  # the same frames as the last page's (the store keeps them): their rows too
        from benchlib.claims import claims_frame

        rows = claims_frame(tables).filter(~pl.col("is_aggregate"), ~pl.col("format").is_in(NOT_RUNS))
        rows = _given_work(rows, _open(study).study.factors)
        _ROWS.update(key=key, frames=(tables.runs, tables.results), rows=rows)  # the frames kept: their ids hold
    return _at_levels(_ROWS["rows"], only or {})


#: the per-host rows of the tables :func:`_study_rows` last read, by the identity of those tables
_ROWS: dict = {}


def _given_work(rows: pl.DataFrame, factors: Collection[str]) -> pl.DataFrame:
    """Give a row the job parameter its output does not print where its like runs agree on one (:func:`known_job`).

    fio's normal output prints no read share; the json+ output of the same job does. Every page, the results
    table and the design take the same value, so none counts a configuration the others do not; a run that
    stays without one is "not given" (:data:`benchlib.schema.NOT_GIVEN`).
    """
    from benchlib.fit import PHASE, WORK

    params = [c for c in WORK if c in rows.columns]
    group = [*(f for f in factors if f in rows.columns), *params, *([PHASE] if PHASE in rows.columns else [])]
    return known_job(rows, params, group) if params else rows


FrameT = TypeVar("FrameT", pl.DataFrame, pl.LazyFrame)


def _at_levels(frame: FrameT, only: dict) -> FrameT:
    """Return the rows of ``frame`` (eager or lazy) whose factors have one of the ``only`` levels.

    A level :data:`~benchlib.schema.NOT_GIVEN` of a job parameter selects the rows that have none. A factor
    ``frame`` does not have selects none of it (a column of results only, asked of the runs table), except a
    phase (:data:`benchlib.fit.PHASE`): a run holds every phase it ran, so a frame of runs keeps its runs, and
    their job-level rows are picked by :func:`_in_phase`.
    """
    from benchlib.fit import PHASE, WORK

    if not only:  # every page reads the whole study somewhere: no schema to resolve for it
        return frame
    names = frame.collect_schema().names()
    for factor, levels in only.items():
        if factor not in names:
            frame = frame if factor == PHASE else frame.filter(pl.lit(False))
            continue
        value = pl.col(factor).cast(pl.String)
        if factor in (*WORK, "rw_job"):  # a run whose output does not give a job parameter: a level of its own
            value = value.fill_null(NOT_GIVEN)
        frame = frame.filter(value.is_in([str(level) for level in levels]))
    return frame


def _folder() -> pl.Expr:
    """Return the folder of each row's ``source`` file, as ``folder``: a run's logs are its folder's."""
    return pl.col("source").str.replace(r"/[^/]*$", "").alias("folder")


def _runs_at(opened: ProcessedStudy, runs: FrameT, only: dict | None, by: Sequence[str] = ()) -> FrameT:
    """Return the rows of ``runs`` (the runs table, eager or lazy) at ``only``'s levels, with ``by``'s columns.

    A job parameter that splits a configuration (:func:`benchlib.fit.work_axes`: fio's ``rw`` of a run filed
    with other work) is in the results, not the runs table: each run gets the value its results ran (one,
    where it splits pages), and a run of logs (:data:`LOG_FORMATS`) the value every run its folder holds ran.
    """
    from benchlib.fit import PHASE, WORK

    names = runs.collect_schema().names()
    job = [k for k in dict.fromkeys([*(only or {}), *by]) if k not in names and k in (*WORK, "rw_job")]
    if not job:
        return _at_levels(runs, only or {})
    folder = _folder()
    # on a phase's page a run's value is that phase's (a run's phases ran unlike work, one after another)
    rows = _study_rows(opened, {PHASE: only[PHASE]} if PHASE in (only or {}) else None)
    rows = rows.select("run_id", folder, *job)
    worked = pl.lit(True).alias("_worked")  # a run with results here: its null is "not given", not "not read"
    of_run = rows.group_by("run_id").agg(pl.col(job).first(), worked)
    held = rows.group_by("folder").agg(*(pl.col(k).first() for k in job), pl.struct(job).n_unique().alias("works"))
    of_folder = held.filter(pl.col("works") == 1).drop("works").with_columns(worked)
    lazy = isinstance(runs, pl.LazyFrame)
    logs = runs.filter(pl.col("format").is_in(LOG_FORMATS)).with_columns(folder)
    logs = logs.join(of_folder.lazy() if lazy else of_folder, on="folder").drop("folder")
    outputs = runs.filter(~pl.col("format").is_in(LOG_FORMATS))
    outputs = outputs.join(of_run.lazy() if lazy else of_run, on="run_id", how="left")
    found = pl.concat([outputs, logs], how="diagonal_relaxed")
    if any(k in job for k in only or {}):  # a run of no results at this page's levels is at none of them
        found = found.filter(pl.col("_worked").is_not_null())
    return _at_levels(found.drop("_worked"), only or {})


def _in_phase(opened: ProcessedStudy, jobs: pl.DataFrame, only: dict | None) -> pl.DataFrame:
    """Return ``jobs`` (rows with ``run_id`` and ``job_index``: bins, intervals) with their phase, at ``only``'s.

    The phase (:data:`benchlib.fit.PHASE`, as text) is the group fio's results give the job; rows are kept
    as they are where the study's runs have no phases.
    """
    from benchlib.fit import PHASE

    phases = (
        opened.scan("results")
        .filter(pl.col("run_id").is_in(jobs["run_id"].unique().to_list()))
        .select("run_id", "job_index", pl.col(PHASE).fill_null(0).cast(pl.String))
        .unique()
        .collect()
    )
    if phases[PHASE].n_unique() < 2 and PHASE not in (only or {}):
        return jobs.with_columns(pl.lit("0").alias(PHASE))
    placed = jobs.join(phases, on=["run_id", "job_index"], how="inner")
    return _at_levels(placed, {PHASE: only[PHASE]} if PHASE in (only or {}) else {})


def level_rank(study: StudyRef, frame: pl.DataFrame, column: str) -> pl.Expr:
    """Return ``column``'s rows ranked in the study's declared level order, else as a reader counts (2 before 10)."""
    from benchlib.tables import natural_rank

    declared = [str(level) for level in _open(study).study.factors.get(column, [])]
    if declared:
        return pl.col(column).cast(pl.String).replace_strict(declared, range(len(declared)), default=len(declared))
    return natural_rank(frame, column)


def cell_frame(study: StudyRef, levels: dict) -> pl.DataFrame:
    """Per-host result rows (no tool aggregates, no logs) of one matrix cell, with labels and derived metrics."""
    return _study_rows(study, {factor: [level] for factor, level in levels.items()})


def summary_apart(study: StudyRef, rows: pl.DataFrame, share: float = 0.01) -> pl.DataFrame:
    """Return where HCIBench's own summary of a cell's runs differs from benchlib's aggregation of its VMs.

    :func:`benchlib.sources.hcibench.check_summary` for the summaries (``<test>-res.txt``) of the VM runs in
    ``rows`` (a cell's, :func:`cell_frame`): its rows whose figures differ by more than ``share``, each with
    both figures and why. Empty for a study without HCIBench summaries.
    """
    from benchlib.sources.hcibench import check_summary

    opened = _open(study)
    summaries = opened.scan("runs").filter(pl.col("format") == "hcibench-summary").select(pl.len()).collect().item()
    if rows.is_empty() or not summaries:  # every cell page asks: a study without summaries reads one count
        return pl.DataFrame()
    check = check_summary(opened.scan("runs").collect(), opened.scan("results").collect())
    here = pl.col("vm_run_ids").list.set_intersection(rows["run_id"].unique().implode()).list.len() > 0
    return check.filter(here & (pl.col("difference_pct").abs() > 100 * share))


def per_member(frame: pl.DataFrame, value: str, member: str = "vm", by: tuple[str, ...] = ()) -> pl.DataFrame:
    """Return one value per VM (host) per group.

    One value per VM/host (per group of ``by``): each run's total (directions and jobs added for
    rates, I/O-weighted for latencies), then the median over repetitions; per phase (``group_id``)
    when fio's groups ran one after another.
    """
    phased = frame.with_columns(
        pl.concat_str(pl.col("run_id"), pl.col("group_id").fill_null(0), separator="/").alias("_run")
    )
    return median_of_run_totals(phased, value, [*by, member], run="_run")


def member_table(rows: pl.DataFrame, value: str, member: str = "vm") -> pl.DataFrame:
    """Return a cell's members with ``value`` and their mean latency in ms (each the median over runs).

    The latency is each run's I/O-weighted mean (:func:`per_member`), left out when no row has one. A mix's
    reads and writes have a mean each (``read_...``, ``write_...``): fio gives them apart, and one mean of
    both would be neither's (a write absorbed by the cache beside a read from the disk).
    """
    from benchlib.tables import natural_sort

    members = natural_sort(per_member(rows, value, member), member)
    if value == "lat_mean_ns" or "lat_mean_ns" not in rows.columns:
        return members
    # fio's lat is its total latency, submission and completion (its percentiles are completion alone); a
    # published table's mean latency says no more than that
    fio = "format" in rows.columns and rows["format"].cast(pl.String).str.starts_with("fio").all()
    name = "total_latency_ms" if fio else "latency_ms"
    timed = rows.filter(pl.col("lat_mean_ns").is_not_null())
    ways = set(timed["direction"].drop_nulls().to_list()) if "direction" in rows.columns else set()
    mix = {"read", "write"} <= ways  # a mix: its reads' and writes' latency apart (a sync or trim is no third)
    apart = {f"{way}_{name}": timed.filter(pl.col("direction") == way) for way in ("read", "write")} if mix else {}
    columns = []
    for column, part in (apart or {name: rows}).items():
        latency = per_member(part, "lat_mean_ns", member).select(member, (pl.col("lat_mean_ns") / 1e6).alias(column))
        members = members.join(latency, on=member, how="left", maintain_order="left")
        columns.append(column)
    if all(members[c].is_null().all() for c in columns):
        return members.drop(columns)
    return members.select(member, value, *columns, "runs")


@dataclass(frozen=True)
class Buffered:
    """Configurations whose jobs ran buffered (fio's ``direct=0``): :func:`buffered`.

    ``buffered`` of ``configurations``; ``shares``: per direction, the share of fio's I/Os the disk itself
    counted (:func:`disk_shares`: low, high), empty where no run reports its disk.
    """

    buffered: int
    configurations: int
    shares: dict[str, tuple[float, float]]


def buffered(frame: pl.DataFrame, by: list[str], disk: pl.DataFrame | None = None) -> Buffered | None:
    """Return which configurations fio ran buffered (``direct=0``, its default): their figures may be the cache's.

    ``frame``: result rows (:func:`cell_frame`); ``by``: what a configuration is. None when every job was
    direct or the rows do not say (a published table). ``disk``: :func:`disk_ios`, for the shares of fio's
    reads and writes the disk itself counted. :func:`benchlib.words.cache.buffered_note` says it.
    """
    if "direct" not in frame.columns or frame.is_empty():
        return None
    keys = [b for b in by if b in frame.columns] or [pl.lit(0).alias("_all")]
    per = frame.group_by(keys).agg((pl.col("direct") == False).any().alias("buffered"))  # noqa: E712 (null: unknown)
    count = int(per["buffered"].fill_null(False).sum())
    if not count:
        return None
    return Buffered(count, per.height, disk_shares(frame.filter(pl.col("direct") == False), disk))  # noqa: E712


def disk_ios(study: StudyRef) -> pl.DataFrame:
    """Return the reads and writes the disk counted during each run (``run_id``, ``read_ios``, ``write_ios``).

    fio's disk statistics (``disk_util``), added over a run's disks; empty where no run reports them.
    """
    counters = (
        _open(study)
        .scan("host_counters")
        .filter(pl.col("object") == "fio disk stats", pl.col("counter").is_in(["read_ios", "write_ios"]))
        .group_by("run_id", "counter")
        .agg(pl.col("value").sum())
        .collect()
    )
    if counters.is_empty():
        return pl.DataFrame(schema={"run_id": pl.String, "read_ios": pl.Float64, "write_ios": pl.Float64})
    wide = counters.pivot(on="counter", index="run_id", values="value")
    return wide.with_columns(pl.lit(None, pl.Float64).alias(c) for c in ("read_ios", "write_ios") if c not in wide)


def disk_shares(rows: pl.DataFrame, disk: pl.DataFrame | None) -> dict[str, tuple[float, float]]:
    """Return, per direction, the share of fio's I/Os of ``rows`` the disk counted: (low, high), medians over runs.

    Per run (all its members): fio's I/Os against the disks' counts. Members of a run may each have a disk of
    their own (VMs) or share one (jobs on one machine, each reporting the same disk): the disk did between
    the largest member's count (shared, ``low``) and their sum (own disks, ``high``). A share above 1 says the
    cache answered few. Empty where no run reports its disk.
    """
    if disk is None or disk.is_empty() or "io_count" not in rows.columns:
        return {}
    asked = rows.filter(~pl.col("is_aggregate"), pl.col("direction").is_in(["read", "write"]))
    asked = asked.with_columns(run_unit_expr(asked.columns))
    member = asked.group_by("run_unit", "run_id", "direction").agg(pl.col("io_count").sum()).join(disk, on="run_id")
    shares = {}
    for direction in ("read", "write"):
        counted = pl.col(f"{direction}_ios")
        per_run = (
            member.filter(pl.col("direction") == direction)
            .group_by("run_unit")
            .agg(pl.col("io_count").sum(), counted.max().alias("shared"), counted.sum().alias("own"))
            .filter(pl.col("io_count") > 0)
        )
        low = (per_run["shared"] / per_run["io_count"]).drop_nulls()
        if not low.is_empty():
            shares[direction] = (float(low.median()), float((per_run["own"] / per_run["io_count"]).median()))
    return shares


def cache_answered_most(study: StudyRef, configurations: list[dict], only: dict | None = None) -> int:
    """Count the ``configurations`` (each its levels) in which the page cache answered most of fio's I/Os.

    By the disk's own counters (:func:`disk_shares`, even at their highest reading, per direction); where no
    run of a configuration reports its disk, whether any of its jobs ran buffered (the cache may have). The
    study's rows and disk counters are read once.
    """
    rows = _study_rows(study, only)
    if "direct" not in rows.columns:
        return 0
    buffered, disk = rows.filter(pl.col("direct") == False), disk_ios(study)  # noqa: E712
    count = 0
    for levels in configurations:
        mine = buffered.filter(*(pl.col(k) == v for k, v in levels.items())) if levels else buffered
        shares = disk_shares(mine, disk)
        count += any(high < 0.5 for _, high in shares.values()) if shares else not mine.is_empty()
    return count


def buffered_runs(study: StudyRef, by: list[str], only: dict | None = None) -> Buffered | None:
    """Return :func:`buffered` for the study's rows at ``only`` (a summary page's runs).

    A phase's page (:data:`benchlib.fit.PHASE` in ``only``) gets no disk shares: fio's disk statistics cover
    the whole run, every phase of it, and cannot be set against one phase's I/Os.
    """
    from benchlib.fit import PHASE

    return buffered(_study_rows(study, only), by, None if PHASE in (only or {}) else disk_ios(study))


def cell_capped(frame: pl.DataFrame) -> bool:
    """Tell whether any job of a cell's rows (:func:`cell_frame`) had a rate cap, as its tool reports it."""
    return "rate_limited" in frame.columns and bool(frame["rate_limited"].fill_null(False).any())


def overview(study: StudyRef) -> pl.DataFrame:
    """Return what the study holds, per tool and format: files, runs (the experimental units) and hosts.

    A run is one file's document (one fio invocation across its hosts, one configuration of a
    published table); tool aggregates ("All clients") are not runs and hosts are counted without
    them. Per-second logs (the runs of their json output) and esxtop captures (the host's view beside the
    runs) are counted as files only.
    """
    tables = study_tables(study)
    runs = tables.runs.filter(~pl.col("is_aggregate"))
    io = _measured_io(tables.results)
    runs = runs.join(io, on="run_id", how="left").with_columns(pl.col("io").fill_null(False))
    not_runs = pl.col("format").is_in(NOT_RUNS)
    unit = run_unit_expr(runs.columns)
    table = (
        runs.group_by("tool", "format")
        .agg(
            pl.col("source").n_unique().alias("files"),  # files, not contents: two identical logs are two files
            pl.when(~not_runs.first()).then(unit.filter(pl.col("io")).n_unique()).alias("runs"),
            pl.when(~not_runs.first()).then(unit.filter(~pl.col("io")).n_unique()).alias("other_rows"),
            # an esxtop capture's host is the ESXi host, not one of the study's VMs
            pl.when(pl.col("format").first() != "esxtop").then(pl.col("host").drop_nulls().n_unique()).alias("hosts"),
        )
        .sort("tool", "format")
        # fio run on one machine names no host: unknown, not 0 (the design says "none named")
        .with_columns(pl.when(pl.col("hosts") > 0).then("hosts").alias("hosts"))
    )
    # rows of other figures (a published CPU table) measured no I/O: not runs; a column only where there are some
    return table if table["other_rows"].fill_null(0).sum() else table.drop("other_rows")


def _measured_io(results: pl.DataFrame) -> pl.DataFrame:
    """Return ``run_id`` and ``io``: whether any result row of the run holds IOPS, bandwidth or latency."""
    return results.filter(~pl.col("is_aggregate")).group_by("run_id").agg(measured_io_expr().any().alias("io"))


@dataclass(frozen=True)
class Design:
    """What a study's design is (:func:`design`); :func:`benchlib.words.design.design_statement` says it.

    ``factors``: study.toml's factors and levels. ``configurations`` with runs and ``runs`` (the units: a run
    across its members), ``runs_low`` to ``runs_high`` per configuration, ``once`` of the configurations run
    once. ``hosts_low`` to ``hosts_high``: members named per run (None: none named). ``member``: what a member
    is, in a sentence (:func:`member_word`). Run length: the median wall clock ``duration_s``, ``runtime_s``
    as set and ``ramp_s`` (None where the data do not record them), ``stated_runtime_s`` from study.toml.
    ``tools``: each tool with its version. ``other_rows``: rows of other figures (a published CPU table) that
    measured no I/O. ``several``: runs of more than one member, ``apart`` of them never at once. ``min_p``: the
    smallest exact two-sided p of a comparison of two configurations at ``repeated_low`` runs each (None where
    every configuration ran once), ``repeated_low``: the fewest runs of a configuration run more than once
    (``runs_low`` where none ran once), ``runs_to_test``: runs per side that would make one comparison alone
    testable. ``phases``: the most phases one run held (fio's groups, one after another); each phase is a
    configuration of its own. ``grouped_by``: the factor ``benchlib run`` grouped each repetition's runs by
    (its level hard to change: a controller), None where the order was not restricted
    (:func:`benchlib.runner.repetitions.recorded_grouping`).
    """

    factors: dict[str, list]
    configurations: int
    runs: int
    runs_low: int
    runs_high: int
    once: int
    hosts_low: int | None
    hosts_high: int | None
    member: str
    duration_s: float | None
    runtime_s: float | None
    ramp_s: float | None
    stated_runtime_s: float | None
    tools: list[str]
    other_rows: int
    several: int
    apart: int
    min_p: float | None
    runs_to_test: int
    repeated_low: int | None = None
    phases: int = 1
    grouped_by: str | None = None


def drift(study: StudyRef) -> Drift | None:
    """Return how the study's run totals moved with time within its configurations (the drift check).

    The configurations are the study's (:func:`benchlib.fit.axes`), the totals its figure's
    (:func:`benchlib.fit.shape`), rate-capped runs left out (their totals are the cap's, and would read as no
    trend); :func:`benchlib.stats.order.drift_within` pools the trend. None where no configuration has three
    runs with start times (a published table, runs once each).
    """
    from benchlib import fit
    from benchlib.stats.order import drift_within

    opened = _open(study)
    axes, value = [a for a in fit.axes(opened) if a != fit.PHASE], fit.shape(opened).value
    totals = run_totals(opened, value, axes)
    if totals.is_empty() or "start_time" not in totals.columns:
        return None
    totals = totals.filter(~pl.col("rate_capped"))  # a capped run's total is the cap's: it cannot drift
    groups = totals.group_by([*axes, "phase"]).agg(pl.col("start_time"), pl.col(value))
    return drift_within([list(zip(g["start_time"], g[value], strict=True)) for g in groups.iter_rows(named=True)])


def design(study: StudyRef) -> Design | None:
    """Return what the study's design is (:class:`Design`), None where it holds no runs.

    A configuration is the declared factors' levels and the job's own parameters (a sweep's depths are
    configurations of their own even where the study does not declare them as a factor); what can be inferred
    at its n follows METHODS.md G3b.
    """
    from benchlib.fit import WORK
    from benchlib.runner.repetitions import recorded_grouping
    from benchlib.stats.compare import min_p, runs_to_test

    opened = _open(study)
    factors = opened.study.factors
    runs = opened.tables(only=("runs",)).runs.filter(~pl.col("is_aggregate"), ~pl.col("format").is_in(NOT_RUNS))
    if runs.is_empty():
        return None
    present = [f for f in factors if f in runs.columns]
    results = opened.tables(only=("results",)).results
    params = [c for c in WORK if c in results.columns]  # the tool is the runs table's
    # each phase of a run (fio's groups that ran one after another) has its own work: a configuration of its own
    jobs = (
        results.filter(~pl.col("is_aggregate"))
        .with_columns(pl.col("group_id").fill_null(0).alias("phase"))
        .group_by("run_id", "phase")
        .agg(*(pl.col(c).drop_nulls().first() for c in [*params, "runtime_setting_ns", "ramp_time_ns"]))
        .join(_measured_io(results), on="run_id")
    )
    params = [c for c in params if c not in present]  # a factor may be named like a job parameter ("rw")
    timing = ["runtime_setting_ns", "ramp_time_ns"]
    runs = runs.join(jobs.select("run_id", "phase", *params, *timing, "io"), on="run_id", how="left")
    keys = [*present, *params, *(c for c in WORK if c in runs.columns and c not in (*present, *params))]
    end = pl.col("start_time") + pl.duration(nanoseconds=pl.col("duration_ns"))
    phased = runs.with_columns(run_unit_expr(runs.columns), pl.col("phase").fill_null(0))
    units = phased.group_by("run_unit", "phase").agg(
        *(pl.col(c).drop_nulls().first() for c in keys),
        pl.col("host").drop_nulls().n_unique().alias("hosts"),
        pl.col("duration_ns").max(),
        pl.col("runtime_setting_ns").max(),
        pl.col("ramp_time_ns").max(),
        pl.col("io").fill_null(False).any(),
        # hosts of one run that never ran at once: the last started after the first had finished
        (pl.col("start_time").max() >= end.min()).fill_null(False).alias("apart"),
    )
    other = units.filter(~pl.col("io"))["run_unit"].n_unique()  # rows of other figures (a published CPU table)
    units = units.filter(pl.col("io")) if units.filter(pl.col("io")).height else units
    # a job parameter a run's output does not print (normal output: a mix's read share) is the one the same
    # phase's other runs agree on, as the results table and the phase's page take it
    units = known_job(units, params, [*keys, "phase"])
    per_config = units.group_by([*keys, "phase"]).agg(pl.col("run_unit").n_unique().alias("runs"))
    low, high = int(per_config["runs"].min()), int(per_config["runs"].max())
    most_phases = int(units.group_by("run_unit").agg(pl.col("phase").n_unique())["phase"].max() or 1)
    configurations = per_config.height
    units = units.sort("phase").unique("run_unit", keep="first", maintain_order=True)  # a run once, by its first phase
    repeated = per_config["runs"].filter(per_config["runs"] > 1)
    repeated_low = int(repeated.min()) if repeated.len() else None
    hosts = units["hosts"].filter(units["hosts"] > 0)
    several = units.filter(pl.col("hosts") > 1)

    def median_s(column: str) -> float | None:
        values = units[column].drop_nulls()
        return float(values.median()) / 1e9 if not values.is_empty() else None

    tools = {
        v if str(v).startswith(str(t)) else f"{t} {v}"
        for t, v in runs.select("tool", "tool_version").unique().iter_rows()
        if v
    }
    return Design(
        factors=dict(factors),
        configurations=configurations,
        runs=units.height,
        runs_low=low,
        runs_high=high,
        once=int((per_config["runs"] == 1).sum()),
        hosts_low=None if hosts.is_empty() else int(hosts.min()),
        hosts_high=None if hosts.is_empty() else int(hosts.max()),
        member=_member_noun(opened),
        duration_s=median_s("duration_ns"),
        runtime_s=median_s("runtime_setting_ns"),
        ramp_s=median_s("ramp_time_ns"),
        stated_runtime_s=opened.study.stated_runtime_s,
        tools=sorted(tools),
        other_rows=other if other < units.height + other else 0,
        several=several.height,
        apart=int(several["apart"].sum()),
        min_p=min_p(repeated_low, repeated_low) if repeated_low else None,
        runs_to_test=runs_to_test(1),
        repeated_low=repeated_low,
        phases=most_phases,
        grouped_by=recorded_grouping(opened.study.folder, opened.study.factors),
    )


def known_job(runs: pl.DataFrame, job: list[str], group: list[str]) -> pl.DataFrame:
    """Give a run a job parameter its output does not print where every run that prints it agrees on one value.

    ``job``: the parameters to fill; ``group``: what makes a configuration (the factors, the job parameters,
    the phase): a run is filled from the runs alike in every other column of ``group``.

    fio's normal output does not print a mix's read share; a phase of the same job in json+ does. The
    phase's page pools its runs, so its row in the table does too (its spread shows where they differ).
    """
    for column in job:
        same = [c for c in group if c != column] or [pl.lit(0)]
        known = pl.col(column).drop_nulls()
        runs = runs.with_columns(
            pl.when(pl.col(column).is_null() & (known.n_unique().over(same) == 1))
            .then(known.first().over(same))
            .otherwise(pl.col(column))
            .alias(column)
        )
    return runs


def claim_table(study: StudyRef) -> pl.DataFrame:
    """Return the verdicts of ``data/raw/<study>/claims.toml`` as a table."""
    from benchlib.claims import load_claims, verify

    opened = _open(study)
    claims, tolerances = load_claims(opened.study.folder)
    verdicts = verify(opened.tables(only=("runs", "results")), claims, tolerances)
    return pl.DataFrame(
        [
            {
                "claim": v.claim.id,
                "section": v.claim.section,
                "says": v.claim.says,
                "computed": v.computed,
                "stated": v.claim.stated,
                "recomputed": v.recomputed,
                "tolerance": v.tolerance,
                "verdict": v.verdict,
                "runs": v.runs or None,  # rows of other figures (a CPU table) are no runs: unknown, not 0
                "note": v.note,
                "reading": bool(v.claim.reading),  # the claims file says how it reads the words
            }
            for v in verdicts
        ]
    )


def conclusion_table(study: StudyRef, claims: pl.DataFrame) -> pl.DataFrame:
    """Return the write-up's conclusions (``[[conclusions]]`` of its claims file), each weighed by its claims.

    ``claims``: :func:`claim_table` of the study. Columns: ``conclusion``, ``says``, ``rests_on``, ``status``
    (stands, weakened, open), ``failed`` and ``undecided`` (claim ids); no rows where the file has none.
    """
    from benchlib.claims import load_conclusions, weigh_conclusions

    verdicts = dict(zip(claims["claim"], claims["verdict"], strict=True)) if claims.height else {}
    found = weigh_conclusions(load_conclusions(_open(study).study.folder), verdicts)
    schema = {"conclusion": pl.String, "says": pl.String, "rests_on": pl.List(pl.String), "status": pl.String}
    schema |= {"failed": pl.List(pl.String), "undecided": pl.List(pl.String)}
    rows = [
        {
            "conclusion": f.conclusion.id,
            "says": f.conclusion.says,
            "rests_on": list(f.conclusion.rests_on),
            "status": f.status,
            "failed": list(f.failed),
            "undecided": list(f.undecided),
        }
        for f in found
    ]
    return pl.DataFrame(rows, schema=schema)


def _sweep_rows(study: StudyRef, levels: dict | str, depth: str = "iodepth") -> pl.DataFrame:
    """Return a sweep's rows: ``levels`` as :func:`cell_frame` takes them (a name alone is a ``profile``).

    The swept column and the job counts as numbers: a published table's levels are text ("16"), and
    "128" sorts before "16". ``levels`` None (the study has no such sweep): no rows.
    """
    frame = cell_frame(study, {"profile": levels} if isinstance(levels, str) else levels or {})
    if levels is None:
        frame = frame.clear()
    for column in dict.fromkeys([depth, "iodepth", "numjobs"]):
        if column in frame.columns and frame.schema[column] == pl.String:
            numbers = frame[column].cast(pl.Float64, strict=False)
            known = numbers.drop_nulls()
            frame = frame.with_columns(numbers.cast(pl.Int64) if (known == known.round()).all() else numbers)
    return frame


#: what a sweep's conditions set, each with the names a column that sets it may have (a block-size factor and
#: the job's block size are one condition: said once)
HELD_CONDITIONS = {
    "rw": {"rw", "readwrite", "pattern"},
    "block size": {"block_size_bytes", "bs", "block_size", "blocksize"},
    "numjobs": {"numjobs", "jobs"},
    "iodepth": {"iodepth", "queue_depth", "depth", "qd"},
}
#: the job's own parameters a sweep may hold fixed
HELD_PARAMS = ("rw", "block_size_bytes", "bs", "numjobs", "iodepth")


def _condition(column: str) -> str:
    """Return what a column sets (:data:`HELD_CONDITIONS`), or the column itself."""
    return next((name for name, columns in HELD_CONDITIONS.items() if column.lower() in columns), column)


def held_values(study: StudyRef, levels: dict | str, *, varied: str) -> list[tuple[str, object]]:
    """Return what a sweep held fixed while ``varied`` stepped: every factor and job parameter with one value.

    Each ``(column, value)``, the study's factors first; a job parameter that sets what a factor already named
    (:data:`HELD_CONDITIONS`) is left out. A reader of a sweep needs its conditions, which the rows know.
    :func:`benchlib.words.sweeps.held_note` says them ("controller LSI, SIOC off, I/O pattern random read,
    block size 4k, 1 job").
    """
    rows = _sweep_rows(study, levels)
    named = levels if isinstance(levels, dict) else {"profile": levels}
    factors = [f for f in _open(study).study.factors if f not in named and f != varied and f in rows.columns]
    held: dict[str, tuple[str, object]] = {}  # by what it sets
    for column in [*factors, *(c for c in HELD_PARAMS if c in rows.columns and c != varied)]:
        values = rows[column].drop_nulls().unique()
        if values.len() == 1 and _condition(column) not in held:
            held[_condition(column)] = (column, values[0])
    return list(held.values())


def profile_totals(study: StudyRef, profile: dict | str, member: str = "vm") -> pl.DataFrame:
    """Return each run's and host's totals of one profile (or cell: a dict of levels).

    Per run and host of one profile: IOPS summed over directions and jobs, I/O-weighted mean latency,
    with the run's job parameters and factor levels (for sweeps and curves).
    """
    frame = _sweep_rows(study, profile).with_columns(pl.col("rwmixread_pct").fill_null(100.0))
    keys = ["run_id", member, "iodepth", "rwmixread_pct"]
    totals = frame.group_by(keys).agg(total_expr("iops"), total_expr("lat_mean_ns", frame.columns))
    return totals.with_columns((100 - pl.col("rwmixread_pct")).alias("write_pct")).sort(keys)


def sweep(study: StudyRef, profile: dict | str, *, member: str | None = None, depth: str = "iodepth") -> pl.DataFrame:
    """Summarise a depth sweep per depth (and member): medians over runs of IOPS, latency and Little's law.

    Each run's total per depth (its hosts added; per ``member`` when given), then the median over
    runs: ``iops``, ``lat_mean_ns`` (I/O-weighted over the jobs), ``outstanding_ios`` (Little's law:
    IOPS x mean latency, the I/Os in flight on average), ``configured`` (the concurrency the jobs
    were set to: iodepth per job, 1 for a sync engine, times jobs, added over hosts) and
    ``queue_state`` (:func:`benchlib.stats.queueing.queue_check` of the medians), and ``runs``.
    ``profile``: the sweep's profile name, or its levels (``{"test": "iodepth_sweep"}``).
    """
    from benchlib.stats.queueing import queue_check, queue_state_expr

    frame = _sweep_rows(study, profile, depth)
    jobs = queue_check(frame, iops="iops_or_derived")
    keys = ["run_id", *([member] if member else [])]
    run = run_unit_expr(frame.columns)
    per_run = (
        frame.with_columns(run)
        .group_by([*keys, "run_unit", depth])
        .agg(total_expr("iops"), total_expr("lat_mean_ns", frame.columns))
        .join(
            jobs.group_by(["run_id", *([member] if member else [])]).agg(
                pl.col("outstanding_ios").sum(), pl.col("configured_depth").sum().alias("configured")
            ),
            on=keys,
        )
        .group_by(["run_unit", depth, *([member] if member else [])])
        .agg(
            total_expr("iops"),
            ((pl.col("lat_mean_ns") * pl.col("iops")).sum() / pl.col("iops").sum()).alias("lat_mean_ns"),
            pl.col("outstanding_ios").sum(),
            pl.col("configured").sum(),
        )
    )
    by = [*([member] if member else []), depth]
    table = per_run.group_by(by).agg(
        pl.col("iops", "lat_mean_ns", "outstanding_ios", "configured").median(), pl.len().alias("runs")
    )
    table = table.with_columns(queue_state_expr("outstanding_ios", "configured")).sort(by)
    whole = table["configured"].drop_nulls()
    if whole.len() and (whole == whole.round()).all():  # the median of equal depths: show it as the depth it is
        table = table.with_columns(pl.col("configured").cast(pl.Int64))
    return table


def sweeps_compared(study: StudyRef, selection: dict, factor: str, levels: list[str]) -> pl.DataFrame:
    """Return :func:`sweep`'s run totals for each of ``factor``'s ``levels``, the rest of ``selection`` the same.

    One sweep per level, each exactly as :func:`sweep` reads one (``factor`` a column first): the sweeps a
    setting changes, side by side. Empty where ``levels`` is.
    """
    parts = [
        sweep(study, {**selection, factor: level}).select(pl.lit(str(level)).alias(factor), pl.all())
        for level in levels
    ]
    return pl.concat(parts, how="vertical_relaxed") if parts else pl.DataFrame()


def sweep_shapes(table: pl.DataFrame, *, member: str | None = None, depth: str = "iodepth") -> pl.DataFrame:
    """Describe each sweep of :func:`sweep` (per member when given): knee, saturation, peak then drop.

    Columns: the member, ``knee``, ``knee_iops``, ``knee_latency_ms``, ``knee_outstanding``
    (Little's law at the knee), ``latency_knee``, ``peak``, ``saturated``, ``drops_after_peak``,
    ``note`` (:func:`benchlib.stats.queueing.sweep_shape`) and ``shape`` (its first clause, for a
    table whose columns say the rest); a sweep of fewer than 3 depths says so in both.
    """
    from benchlib.stats.queueing import MIN_SWEEP_POINTS, sweep_shape
    from benchlib.tables import number
    from benchlib.words.sweeps import shape_note, shape_verdict

    rows = []
    for part in table.partition_by(member, maintain_order=True) if member else [table]:
        head = {member: part[member][0]} if member else {}
        part = part.drop_nulls(["iops", "lat_mean_ns"]).sort(depth)
        if part.height < MIN_SWEEP_POINTS:
            why = f"{part.height} depths: a shape needs {MIN_SWEEP_POINTS} or more"
            rows.append({**head, "note": why, "shape": why})
            continue
        held = part["configured"].drop_nulls().unique() if "configured" in part.columns else pl.Series([])
        if held.len() == 1:  # a synchronous engine: the depth set did not change what was in flight
            why = (
                f"not a sweep of concurrency: {number(held[0])} I/O{'' if held[0] == 1 else 's'} in flight at every "
                "depth set (a synchronous "
                "engine ignores iodepth), so no knee"
            )
            rows.append({**head, "note": why, "shape": why})
            continue
        shape = sweep_shape(
            part[depth].cast(pl.Float64).to_list(), part["iops"].to_list(), part["lat_mean_ns"].to_list()
        )
        # the depths named are the sweep's own: whole numbers where the sweep's depths are
        as_depth = (lambda d: None if d is None else int(d)) if part[depth].dtype.is_integer() else (lambda d: d)
        rows.append(
            {
                **head,
                "knee": as_depth(shape.knee_depth),
                "knee_iops": shape.knee_iops,
                "knee_latency_ms": None if shape.knee_latency_ns is None else shape.knee_latency_ns / 1e6,
                "knee_outstanding": shape.knee_outstanding,
                "latency_knee": as_depth(shape.latency_knee_depth),
                "peak": as_depth(shape.peak_depth),
                "saturated": shape.saturated,
                "drops_after_peak": shape.drops_after_peak,
                "note": shape_note(shape),
                "shape": shape_verdict(shape),
            }
        )
    return pl.DataFrame(rows)


def mix_shapes(
    mix: pl.DataFrame,
    *,
    member: str = "vm",
    share: str = "write_pct",
    value: str = "iops",
    runs: pl.DataFrame | None = None,
) -> list[dict]:
    """Return how each member's IOPS moved along a write-share sweep (medians per share, as ``mix`` holds them).

    Per member of two shares or more: ``member``, ``first`` and ``last`` (its figure at the first and last
    share), ``change_pct``, and its ``shape``: ``"fell"`` or ``"rose"`` at every step (``clear``: the runs'
    ranges of every two neighbouring shares do not overlap), ``"dip"`` (lowest at ``low_share``, between the
    ends; ``clear``: its runs there and at ``last_share`` do not overlap), or ``"up and down"``. ``runs``: each
    run's figures (``mix`` is their medians); a share of one run cannot overlap.
    :func:`benchlib.words.sweeps.mix_note` says them.
    """
    found = []
    for part in mix.drop_nulls([value]).sort(member, share).partition_by(member, maintain_order=True):
        values, shares = part[value].to_list(), part[share].to_list()
        if len(values) < 2:
            continue
        apart = _shares_apart(runs, member, part[member][0], share, value)
        steps = list(zip(values, values[1:], strict=False))
        low = values.index(min(values))
        row = {"member": str(part[member][0]), "first": values[0], "last": values[-1]}
        row |= {"change_pct": 100 * (values[-1] / values[0] - 1), "low_share": shares[low], "last_share": shares[-1]}
        if all(b < a for a, b in steps) or all(b > a for a, b in steps):
            row["shape"] = "fell" if values[-1] < values[0] else "rose"
            row["clear"] = all(apart(x, y) for x, y in zip(shares, shares[1:], strict=False))
        elif 0 < low < len(values) - 1:
            row["shape"], row["clear"] = "dip", apart(shares[low], shares[-1])
        else:
            row["shape"], row["clear"] = "up and down", True
        found.append(row)
    return found


def _shares_apart(
    runs: pl.DataFrame | None, member: str, who: object, share: str, value: str
) -> Callable[[object, object], bool]:
    """Return whether the runs of one member at two shares do not overlap (True where a share has one run)."""
    if runs is None:
        return lambda a, b: True
    mine = runs.filter(pl.col(member) == who).drop_nulls(value)
    ranges = {
        s: (lo, hi, n)
        for s, lo, hi, n in mine.group_by(share)
        .agg(pl.col(value).min().alias("lo"), pl.col(value).max().alias("hi"), pl.len().alias("n"))
        .iter_rows()
    }

    def apart(a: object, b: object) -> bool:
        if a not in ranges or b not in ranges or min(ranges[a][2], ranges[b][2]) < 2:
            return True  # one run a side: nothing to tell its spread by (the page says a run was run once)
        (lo_a, hi_a, _), (lo_b, hi_b, _) = ranges[a], ranges[b]
        return hi_a < lo_b or hi_b < lo_a

    return apart


#: job parameters that, when they differ between the sides of a comparison, are changed with the factor
CONFOUNDERS = ("configured_depth", "block_size_bytes", "rw", "rwmixread_pct")
#: factor names that are the parameter itself (a block-size factor changes the block size by design)
_SAME_AS = {
    "configured_depth": {"iodepth", "queue_depth", "depth", "numjobs", "jobs", "qd"},
    "block_size_bytes": {"block_size", "bs", "blocksize", "block_size_bytes"},
    "rw": {"rw", "readwrite", "pattern", "profile", "workload"},
    "rwmixread_pct": {"rwmixread", "rwmixread_pct", "write_pct", "read_pct", "mix"},
}


def confounders(study: StudyRef, *, factor: str, baseline: str, by: list[str], only: dict | None = None) -> list[dict]:
    """Return the job parameters that changed with ``factor`` between the baseline and the other levels.

    Within each group of ``by``, a parameter whose values on the baseline side differ from another
    level's changed together with the factor: the comparison cannot tell which of them made the change
    (psync against libaio at iodepth 32 is also 1 I/O in flight against 32). Each: ``param``, ``values``
    (each side's level: its values, sorted), ``groups`` (in how many compared groups) of ``compared``; []
    when none did. :func:`benchlib.words.confounding.confounded_note` says them.
    """
    rows = _study_rows(study, only)
    rows = rows.with_columns(configured_depth_expr(rows.columns))
    keys = [b for b in by if b in rows.columns]
    chosen = {factor.lower(), *(b.lower() for b in by)}  # what the comparison varies or holds by design
    params = [p for p in CONFOUNDERS if p in rows.columns and not (_SAME_AS[p] | {p}) & chosen]
    if factor not in rows.columns or not params:
        return []
    sides = rows.group_by(*keys, factor).agg(*(pl.col(p).drop_nulls().unique().sort() for p in params))
    base = sides.filter(pl.col(factor).cast(pl.String) == str(baseline)).drop(factor)
    others = sides.filter(pl.col(factor).cast(pl.String) != str(baseline))
    paired = (
        others.join(base, on=keys, suffix="_baseline") if keys else others.join(base, how="cross", suffix="_baseline")
    )
    found = []
    for param in params:
        known = (pl.col(param).list.len() > 0) & (pl.col(f"{param}_baseline").list.len() > 0)  # unknown: no claim
        differ = paired.filter(known & (pl.col(param) != pl.col(f"{param}_baseline")))
        if differ.is_empty():
            continue
        values: dict[str, set] = {}
        for row in differ.iter_rows(named=True):
            values.setdefault(str(baseline), set()).update(row[f"{param}_baseline"])
            values.setdefault(str(row[factor]), set()).update(row[param])
        sorted_values = {side: sorted(vs) for side, vs in sorted(values.items())}
        found.append({"param": param, "values": sorted_values, "groups": differ.height, "compared": paired.height})
    return found


#: per-I/O figures: at another block size, one of them is another amount of work
PER_IO_VALUES = ("iops", "lat_mean_ms", "clat_mean_ms", "lat_mean_ns", "clat_mean_ns", "iops_per_cpu_pct")


def unlike_sizes(
    study: StudyRef, *, factor: str, baseline: str, value: str, by: list[str], only: dict | None = None
) -> list[int]:
    """Return the block sizes (bytes) a per-I/O figure (IOPS, latency) is compared across, [] where it is not.

    Within each group of ``by``, when the baseline's block sizes differ from another level's, an I/O
    on one side moves more bytes than on the other; bandwidth compares the bytes moved. [] when the
    sides share their block sizes, the rows do not say them, or ``value`` is not per I/O. Unlike
    :func:`confounders`, found also when ``factor`` itself is the block size.
    :func:`benchlib.words.confounding.unlike_work_note` says it.
    """
    rows = _study_rows(study, only)
    if value not in PER_IO_VALUES or "block_size_bytes" not in rows.columns or factor not in rows.columns:
        return []
    keys = [b for b in by if b in rows.columns]
    sides = rows.group_by(*keys, factor).agg(pl.col("block_size_bytes").drop_nulls().unique().sort().alias("_sizes"))
    base = sides.filter(pl.col(factor).cast(pl.String) == str(baseline)).drop(factor)
    others = sides.filter(pl.col(factor).cast(pl.String) != str(baseline))
    paired = (
        others.join(base, on=keys, suffix="_baseline") if keys else others.join(base, how="cross", suffix="_baseline")
    )
    known = (pl.col("_sizes").list.len() > 0) & (pl.col("_sizes_baseline").list.len() > 0)
    differ = paired.filter(known & (pl.col("_sizes") != pl.col("_sizes_baseline")))
    return sorted({int(b) for row in differ.iter_rows(named=True) for b in [*row["_sizes"], *row["_sizes_baseline"]]})


def bytes_moved(
    study: StudyRef, *, factor: str, baseline: str, by: list[str], only: dict | None = None, band: float = 0.0
) -> pl.DataFrame:
    """Compare the same runs in bandwidth (MiB/s), for a per-I/O comparison across block sizes.

    Where :func:`unlike_sizes` finds IOPS compared across block sizes (different work), the reader still needs
    the comparison of the bytes moved: :func:`benchlib.stats.compare.comparison_table` over the runs' MiB/s
    totals (its rows' change, the median of the run-to-run ratios, as the IOPS table's). Empty where there is
    no bandwidth to compare; :func:`benchlib.words.compare.bytes_moved_line` says it in words.
    """
    from benchlib.stats.compare import comparison_table

    units = run_totals(study, "bandwidth_mib_s", [factor, *by], only=only)
    if units.is_empty() or units["bandwidth_mib_s"].is_null().all():
        return pl.DataFrame()
    looks = settled_looks(study, factor)
    table = comparison_table(units, "bandwidth_mib_s", factor=factor, baseline=baseline, by=by, band=band, looks=looks)
    return table.drop_nulls("change_pct")


def settled_looks(study: StudyRef, factor: str) -> Looks | None:
    """Return the looks its plan took at ``factor``'s comparisons where runs were repeated until they settled.

    :func:`benchlib.runner.repetitions.recorded_looks`; None for a study whose repetitions were fixed, or
    stopped by another rule: its comparisons are read as a fixed design's.
    """
    from benchlib.runner.repetitions import recorded_looks

    return recorded_looks(_open(study).study.folder, factor)


def settled_rule(study: StudyRef) -> tuple[SettleRule, Looks] | None:
    """Return the rule its plan repeated runs by until a factor's comparisons settled, and its looks; or None."""
    from benchlib.runner.repetitions import recorded_rule

    return recorded_rule(_open(study).study.folder)


def unlike_sizes_of_two(
    study: StudyRef, grid: pl.DataFrame, *, value: str, x: str, trace: str, by: list[str], only: dict | None = None
) -> list[int]:
    """:func:`unlike_sizes` for an interaction grid: for ``x`` or else ``trace``, each against its first level."""
    if grid.is_empty():
        return []
    for factor, other in ((x, trace), (trace, x)):
        sizes = unlike_sizes(
            study, factor=factor, baseline=str(grid[factor][0]), value=value, by=[*by, other], only=only
        )
        if sizes:
            return sizes
    return []


def listed_members(study: StudyRef, value: str, *, by: list[str], only: dict | None = None) -> list[str]:
    """Return the members with a ``value`` in the rows at ``only``: those a table lists that leaves out others."""
    return sorted(member_values(study, value, by=[b for b in by if b != "phase"], only=only)["vm"].unique())


def run_totals(study: StudyRef, value: str, factors: list[str], only: dict | None = None) -> pl.DataFrame:
    """One value per run with its factor levels: the experimental unit of a comparison.

    A run is one repetition of one configuration: one tool invocation across
    all its hosts at once (a fio client/server run counts its hosts together:
    rates add, latencies are I/O-weighted), or all rows of one configuration
    in a published per-VM table (its VMs ran at once). Its members are never
    replicates (METHODS.md R1). fio groups that ran one after another (``stonewall``)
    are phases of a run, never added together: one row per run and ``phase``; a
    study whose runs have several phases compares them phase by phase (put ``phase``
    in the comparison's ``by``). ``rate_capped``: every job of the run had a rate cap (its total
    is what the cap allowed); ``start_time``: when the run began (null where its files do not say).
    """
    return totals_of_runs(_study_rows(study, only), value, factors)


def totals_of_runs(rows: pl.DataFrame, value: str, factors: Collection[str] = ()) -> pl.DataFrame:
    """Return :func:`run_totals` of rows already read (a cell page's :func:`cell_frame`), without reading again."""
    keys = ["run_unit", "phase", *factors]
    rows = rows.with_columns(run_unit_expr(rows.columns), pl.col("group_id").fill_null(0).alias("phase"))
    capped = pl.col("rate_limited").fill_null(False).all() if "rate_limited" in rows.columns else pl.lit(False)
    started = [pl.col("start_time").min()] if "start_time" in rows.columns and "start_time" not in keys else []
    return (
        rows.group_by(keys)
        .agg(total_expr(value, rows.columns), capped.alias("rate_capped"), *started)
        .drop_nulls(value)
        .sort(keys)
    )


def capped_groups(units: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Return the levels of ``by`` (one row per group) whose every run of :func:`run_totals` was rate-capped."""
    if "rate_capped" not in units.columns or not by:
        return pl.DataFrame(schema={b: units.schema[b] for b in by})
    groups = units.group_by(by).agg(pl.col("rate_capped").all())
    return groups.filter(pl.col("rate_capped")).select(by).sort(by)


#: The permutation tests' seed: a report built twice says the same p.
SEED = 20261124


def interaction(
    study: StudyRef, value: str, *, x: str, trace: str, by: list[str] | None = None, only: dict | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Two factors together: the median run total of every combination, and whether they interact.

    Returns ``(grid, tests)``. ``grid``: per ``by`` group and combination of ``x`` and ``trace``, the
    median of the run totals (:func:`run_totals`) and ``runs``. ``tests``: per ``by`` group, two tests of
    the ``x`` x ``trace`` interaction on the log of the run totals (effects as ratios, METHODS G3: a tenfold
    IOPS gap between block sizes is no interaction by itself) and the larger of their p
    (:func:`benchlib.stats.factorial.interaction_p`): ``F``, ``p_permutation`` (Freedman-Lane, 9,999
    permutations, a fixed seed), ``p_spread`` (the ANOVA-type test, each combination its own spread), ``p``,
    ``floor`` (the p the permutation test gives an interaction without run-to-run noise:
    :func:`benchlib.stats.factorial.interaction_floor`), ``p_holm`` over the ``family`` of tests made, and
    ``verdict``: what the test calls them (:func:`benchlib.stats.factorial.interaction_call`: interacts,
    cannot tell, no evidence), or why no test was made (rate-capped: the cap, not the settings, set the
    totals; one level; combinations without runs, ``missing`` of them; one run per combination; a zero
    total, which has no ratio). :func:`benchlib.words.interaction.test_note` says each.
    """
    import numpy as np

    from benchlib.stats.compare import holm
    from benchlib.stats.factorial import interaction_call, interaction_floor, interaction_p

    by = by or []
    totals = run_totals(study, value, [*by, x, trace], only)
    grid = totals.group_by([*by, x, trace]).agg(pl.col(value).median(), pl.len().alias("runs")).sort([*by, x, trace])
    capped = set(capped_groups(totals, by).rows()) if by else {()} if totals["rate_capped"].all() else set()
    tests = []
    for key, part in totals.group_by(by, maintain_order=True) if by else [((), totals)]:
        combos = part.group_by(x, trace).len()
        levels = part[x].n_unique() * part[trace].n_unique()
        row = dict(zip(by, key, strict=True)) | {"runs": part.height, "per_combination": combos["len"].min()}
        row |= {"F": None, "p_permutation": None, "p_spread": None, "p": None, "floor": None}
        row["missing"] = levels - combos.height
        if tuple(key) in capped:
            row["verdict"] = "rate-capped"
        elif part[x].n_unique() < 2 or part[trace].n_unique() < 2:
            row["verdict"] = "one level"
        elif combos.height < levels:
            row["verdict"] = "combinations without runs"
        elif combos["len"].min() < 2:
            row["verdict"] = "one run per combination"
        elif (part[value] <= 0).any():
            row["verdict"] = "a zero total"
        else:
            # on the log scale: effects are ratios, so 4k against 64k differing tenfold is no interaction by itself
            ordered = part.sort(x, trace).with_columns(pl.col(value).log().alias(value))
            row |= interaction_p(ordered, value, x, trace, rng=np.random.default_rng(SEED))
            row["floor"] = interaction_floor(ordered, value, x, trace, rng=np.random.default_rng(SEED))
            row["verdict"] = None  # called below, once the family's correction is known
        tests.append(row)
    schema = {name: pl.Float64 for name in ("F", "p_permutation", "p_spread", "p", "floor")} | {"verdict": pl.String}
    table = pl.DataFrame(tests, schema_overrides=schema)
    made = table["p"].is_not_null().to_list()
    adjusted = iter(holm(table.filter(pl.col("p").is_not_null())["p"].to_numpy()))
    family = sum(made)
    p_holm = [float(next(adjusted)) if m else None for m in made]
    verdicts = [
        interaction_call(ph, row["floor"], family) if ph is not None else row["verdict"]
        for ph, row in zip(p_holm, table.iter_rows(named=True), strict=True)
    ]
    table = table.with_columns(
        pl.Series("p_holm", p_holm, dtype=pl.Float64),
        pl.lit(family).alias("family"),
        pl.Series("verdict", verdicts, dtype=pl.String),
    )
    return grid, table.sort(by) if by else table


def member_efficiency(study: StudyRef, *, by: list[str], only: dict | None = None, member: str = "vm") -> pl.DataFrame:
    """Return IOPS per CPU% per VM and group.

    IOPS per percent of one CPU per VM (host) and group: each run's IOPS (directions added) over the
    CPU its jobs used (:func:`benchlib.stats.efficiency.run_efficiency`: a group_reporting row counts
    numjobs times), then the median over the VM's runs. Runs without a usable CPU figure are left out
    and counted in ``runs_without_cpu``.
    """
    per_run = run_efficiency(_study_rows(study, only), member=member, by=by)
    return (
        per_run.group_by(*by, member)
        .agg(
            pl.col("iops_per_cpu_pct").drop_nulls().median(),
            pl.col("mib_s_per_cpu_pct").drop_nulls().median(),
            pl.col("cpu_used_pct").filter(pl.col("reason").is_null()).median().alias("cpu_pct"),
            pl.col("reason").is_null().sum().alias("runs"),
            pl.col("reason").is_not_null().sum().alias("runs_without_cpu"),
        )
        .filter(pl.col("runs") > 0)
        .sort(*by, member)
    )


def host_efficiency(study: StudyRef, *, by: list[str], only: dict | None = None, member: str = "vm") -> pl.DataFrame:
    """Guest CPU and host CPU per run and member: what the I/O cost inside the VM, and on the host.

    Guest CPU is fio's usr+sys of the VM's jobs (:func:`benchlib.stats.efficiency.run_efficiency`), a
    proxy that misses what the virtual controller costs the host. Host CPU is esxtop's ``% Used`` of
    the VM's world group during the run (:func:`benchlib.stats.hostside.vm_cpu_during_runs`), where the
    study holds a capture whose group is named after the member. Columns: ``by``, ``run_id``, the
    member, ``iops``, ``cpu_used_pct`` and ``iops_per_cpu_pct`` (guest), ``host_cpu_used_pct``,
    ``host_samples`` and ``iops_per_host_cpu_pct`` (host), and ``host_reason`` where there is no host
    figure (never 0, inf or NaN).
    """
    from benchlib.stats.hostside import VM_CPU, vm_cpu_during_runs

    opened = _open(study)
    guest = run_efficiency(_study_rows(study, only), member=member, by=by)
    runs = opened.scan("runs").filter(pl.col("run_id").is_in(guest["run_id"].to_list())).collect()
    obj, counter = VM_CPU
    groups = opened.scan("host_counters").filter((pl.col("object") == obj) & (pl.col("counter") == counter)).collect()
    host = vm_cpu_during_runs(runs, groups).rename({"vm": "_world", "samples": "host_samples"})
    joined = guest.join(host, left_on=["run_id", member], right_on=["benchmark_run_id", "_world"], how="left")
    reason = (
        pl.when(pl.lit(groups.is_empty()))
        .then(pl.lit("no esxtop capture with VM CPU (Group Cpu % Used) in the study"))
        .when(pl.col("host_cpu_used_pct").is_null())
        .then(pl.format("no esxtop sample of a world group named {} inside the run", pl.col(member)))
        .when(pl.col("host_cpu_used_pct") <= 0)
        .then(pl.lit("0% host CPU: nothing to divide by"))
        .when(pl.col("iops").is_null())
        .then(pl.lit("no IOPS figure"))
    )
    ratio = pl.when(reason.is_null()).then(pl.col("iops") / pl.col("host_cpu_used_pct"))
    return joined.with_columns(ratio.alias("iops_per_host_cpu_pct"), reason.alias("host_reason")).sort(
        [*by, "run_id", member]
    )


def efficiency_table(study: StudyRef, *, test: list[str], setting: str, only: dict | None = None) -> pl.DataFrame:
    """Return IOPS per CPU% per configuration and setting, guest and (where esxtop saw the VMs) host.

    Per configuration (the ``test`` factors' levels joined into one label, ``configuration``) and setting: the
    median over VMs of :func:`member_efficiency`, with the number of VMs; then ``host_cpu_pct`` and
    ``iops_per_host_cpu_pct``, the median over VMs of each VM's median over its runs of
    :func:`host_efficiency` (null where no run has a host figure), with ``host_vms``.
    """
    by = [*test, setting]
    per_vm = member_efficiency(study, by=by, only=only)
    table = per_vm.group_by(by).agg(
        pl.col("iops_per_cpu_pct").median(),
        pl.col("mib_s_per_cpu_pct").median(),
        pl.col("cpu_pct").median(),
        pl.len().alias("vms"),
    )
    host = (
        host_efficiency(study, by=by, only=only)
        .filter(pl.col("host_reason").is_null())
        .group_by(*by, "vm")
        .agg(pl.col("host_cpu_used_pct").median(), pl.col("iops_per_host_cpu_pct").median())
        .group_by(by)
        .agg(
            pl.col("host_cpu_used_pct").median().alias("host_cpu_pct"),
            pl.col("iops_per_host_cpu_pct").median(),
            pl.len().alias("host_vms"),
        )
    )
    table = table.join(host, on=by, how="left")
    table = table.sort([level_rank(study, table, c) for c in by])  # queue depth 1, 4, 16: not as text
    from benchlib.tables import level_expr

    # the configuration's levels in the study's words (random read 4k), as every other page says them; not named
    # "test": a study's own factor may be (the PVSCSI study's is)
    named = pl.concat_str([level_expr(c) for c in test], separator=" ") if test else pl.lit("all runs")
    return table.with_columns(named.alias("configuration"))


def on_vsphere(study: StudyRef) -> bool:
    """Tell whether a study ran on vSphere: a factor names a vSphere setting, or it holds esxtop or vCenter facts.

    A page says what a virtual controller or the ESXi host costs only for such a study; of four fio
    servers on one Linux disk it would speak of machinery the study never had. A study that says what its
    members are (study.toml's ``[study] members``) is on vSphere where they are VMs, whatever it holds.
    """
    from benchlib.vsphere import CHECKS

    opened = _open(study)
    if opened.study.members:
        return opened.study.members == "VM"
    if any(factor in CHECKS for factor in opened.study.factors):
        return True
    runs = opened.tables(only=("runs",)).runs
    if (runs["format"] == "esxtop").any():
        return True
    names = runs.select(pl.col("labels").list.eval(pl.element().struct.field("name")).explode()).to_series()
    return bool(names.drop_nulls().str.contains(r"^(vcenter|esxi)\.").any())  # facts ingest joined (provenance)


def member_word(study: StudyRef) -> str:
    """Return what a study's members are: study.toml's word, else ``"VM"`` on vSphere, else ``"Host"``."""
    said = _open(study).study.members
    if said:
        return said[0].upper() + said[1:]
    return "VM" if on_vsphere(study) else "Host"


def _member_noun(study: StudyRef) -> str:
    """Return :func:`member_word` for inside a sentence: ``"VM"``, ``"host"``, ``"job"``."""
    word = member_word(study)
    return word if word[:2].isupper() else word[0].lower() + word[1:]


def use_study_words(study: StudyRef) -> None:
    """Say a study's members (:func:`member_word`) and levels (study.toml's ``[levels]``) its way on every page.

    Sets, for this process, what tables, axes and titles call them (:func:`benchlib.tables.name_members`,
    :func:`benchlib.tables.name_levels`).
    """
    from benchlib.fit import PHASE, phase_work
    from benchlib.tables import name_levels, name_members, phase_words

    name_members(member_word(study))
    opened = _open(study)
    phases = phase_work(opened)  # fio's groups that ran one after another: each said with its work
    name_levels({**opened.study.level_words, **({PHASE: phase_words(phases)} if phases else {})})


@contextlib.contextmanager
def study_words(study: StudyRef) -> Iterator[None]:
    """Say a study's members and levels its way (:func:`use_study_words`) inside the block, and put back after.

    For code that words one study among others in one process (a report's index): the words it sets end
    with the block, so what a later study's pages or tables say is their own, whatever ran before.
    """
    from benchlib.tables import LABELS, LEVEL_WORDS

    member, levels = LABELS.get("vm"), {factor: dict(words) for factor, words in LEVEL_WORDS.items()}
    use_study_words(study)
    try:
        yield
    finally:
        if member is None:
            LABELS.pop("vm", None)
        else:
            LABELS["vm"] = member
        LEVEL_WORDS.clear()
        LEVEL_WORDS.update(levels)


def equal_shares_assumed(study: StudyRef) -> bool:
    """Tell whether fair must be read as equal shares: a study of SIOC that declares no ``[shares]``."""
    declared = _open(study).study
    sioc = "sioc" in declared.vsphere or any("sioc" in f.lower() for f in declared.factors)
    return sioc and not declared.shares


def has_intervals(study: StudyRef) -> bool:
    """Tell whether a study holds any per-interval samples (fio's logs, esxtop), the data of anything over time."""
    return _open(study).scan("intervals").select(pl.len()).collect().item() > 0


def member_values(
    study: StudyRef, value: str, *, by: list[str], only: dict | None = None, member: str = "vm"
) -> pl.DataFrame:
    """One value per VM (host) per group of ``by``: each run's total, then the median over repetitions."""
    return per_member(_study_rows(study, only), value, member, tuple(by)).drop_nulls(value)


def member_run_totals(
    study: StudyRef, value: str, *, by: list[str], only: dict | None = None, member: str = "vm"
) -> pl.DataFrame:
    """Each member's total in each run, for fairness within a run (:func:`benchlib.stats.fairness_over_runs`).

    Columns: ``by``, ``run`` (the repetition, or the source file where a study has none), ``member``,
    ``value``, ``rate_limited`` (the member's job had a rate cap, when the tool says so) and, when the
    study declares ``[shares]``, ``shares`` (:func:`fairness`). Rows without
    a member, and runs without any value of ``value``, are left out.
    """
    frame = _study_rows(study, only)
    frame = frame.join(run_names(frame, by), on="run_id")
    run = pl.col("run")
    phase = pl.col("group_id").fill_null(0)
    run = pl.when(phase.n_unique().over("run_unit") > 1).then(pl.format("{} phase {}", run, phase)).otherwise(run)
    frame = frame.with_columns(run_unit_expr(frame.columns))
    totals = frame.with_columns(run.alias("run")).group_by(["run_unit", "run", *by, member])
    totals = totals.agg(total_expr(value, frame.columns), pl.col("rate_limited").any())
    totals = totals.filter(pl.col(member).is_not_null())
    # a run (a table) that has no value of this kind at all is not about it; one missing a member's value is an error
    totals = totals.filter(pl.col(value).is_not_null().any().over("run_unit"))
    shares = _open(study).study.shares
    if shares:  # declared in study.toml: fairness is judged per share
        totals = totals.with_columns(
            pl.col(member).replace_strict(shares, default=None, return_dtype=pl.Float64).alias("shares")
        )
    return totals.drop("run_unit").sort([*by, "run", member])


def fairness(
    study: StudyRef, value: str, *, by: list[str], only: dict | None = None, member: str = "vm"
) -> pl.DataFrame:
    """Fairness within each run, summarised over runs (:func:`benchlib.stats.fairness_over_runs`).

    Judged per share when ``study.toml`` declares ``[shares]`` (a member without shares is an error),
    with rate-capped runs counted.
    """
    from benchlib.stats import fairness_over_runs

    members = member_run_totals(study, value, by=by, only=only, member=member)
    shares = "shares" if "shares" in members.columns else None
    return fairness_over_runs(members, value, member=member, run="run", by=by, shares=shares, capped="rate_limited")


def host_series(study: StudyRef, levels: dict, *, metric: str = "iops", repetition: int = 1) -> pl.DataFrame:
    """Per-interval values of one cell and repetition, per host (fio's logs; directions added per interval)."""
    opened = _open(study)
    runs = opened.scan("runs").filter(pl.col("format") == "fio-log", pl.col("repetition") == repetition)
    picked = _runs_at(opened, runs, {factor: [level] for factor, level in levels.items()})
    picked = picked.select("run_id", "host").collect()
    series = (
        opened.scan("intervals")
        .filter(pl.col("run_id").is_in(picked["run_id"].to_list()), pl.col("metric") == metric)
        .collect()
    )
    series = series.join(picked, on="run_id").group_by("host", "time_ns").agg(pl.col("value").sum())
    return series.sort("host", "time_ns")


@dataclass(frozen=True)
class RunSeries:
    """One run of one configuration over time: each host's per-interval values and the run's steady state."""

    run: str
    #: ``host``, ``time_ns`` and the metric (directions added per interval)
    series: pl.DataFrame
    #: the steady PTS window in seconds (start, end) when the run reached one
    window_s: tuple[float, float] | None
    #: the verdict in words ("steady from round 3 to 7 of 9", "too short to assess: ...")
    note: str
    metric: str = "iops"


def run_time_series(study: StudyRef, levels: dict, *, metric: str = "iops", run: str | None = None) -> RunSeries | None:
    """Each host's per-interval series of one run (the first, unless ``run`` names one) with its steady window.

    The window is the first SNIA PTS window of the run's per-second total (:func:`run_seconds`,
    :func:`benchlib.stats.steady.run_steadiness`). None when the configuration has no fio logs.
    """
    from benchlib.stats.steady import PTS_ROUNDS

    opened = _open(study)
    only = {factor: [level] for factor, level in levels.items()}
    runs = _log_runs(opened, list(levels), only).join(
        opened.scan("runs").select("run_id", "host").collect(), on="run_id"
    )
    if runs.is_empty():
        return None
    run = run or sorted(runs["run"].unique().to_list())[0]
    picked = runs.filter(pl.col("run") == run).with_columns(pl.col("host").fill_null(UNNAMED_HOST))
    series = (
        opened.scan("intervals")
        .filter(
            pl.col("run_id").is_in(picked["run_id"].to_list()),
            pl.col("metric") == RUN_SECONDS_METRICS.get(metric, metric),
            ~pl.col("is_warmup").fill_null(False),
        )
        .select("run_id", pl.col("job_index").fill_null(0), "time_ns", "value")
        .collect()
        # a mixed job logs a read and a write row at each stamp: one rate of the job, its directions added
        .group_by("run_id", "job_index", "time_ns")
        .agg(pl.col("value").sum())
    )
    # each job stamps its intervals a few ms apart from the others' (2,006 and 2,018 ms): a job's n-th interval
    # (its stamp over its own median step) is the n-th of every job, whose rate is the jobs' sum, not one job's
    # beside a drop; it is drawn at n times the log's median step
    job = ["run_id", "job_index"]
    series = series.sort(*job, "time_ns").with_columns(pl.col("time_ns").diff().over(job).alias("step"))
    step = pl.coalesce(pl.col("step").median().over(job), pl.col("time_ns").min().over(job))
    series = series.with_columns(step.alias("step"))  # each job's own
    series = series.with_columns(
        (pl.col("time_ns") / pl.col("step")).round().cast(pl.Int64).alias("interval"),
        pl.col("step").median().alias("grid"),  # the log's step, over every job
    )
    series = (
        series.with_columns((pl.col("interval") * pl.col("grid")).cast(pl.Int64).alias("time_ns"))
        .drop("interval", "step", "grid")
        .join(picked.select("run_id", "host"), on="run_id")
        .group_by("host", "time_ns")
        .agg(pl.col("value").sum().alias(metric))
        .sort("host", "time_ns")
    )
    totals = run_seconds(study, list(levels), metric=metric, only=only).filter(pl.col("run") == run).sort("second")
    judged = run_steadiness(totals[metric].to_list())
    window = None
    if judged.steady_from is not None:
        seconds = totals["second"].to_list()
        window = (float(seconds[judged.steady_from - PTS_ROUNDS + 1] - 1), float(seconds[judged.steady_from]))
    return RunSeries(run, series, window, f"{judged.state}: {steadiness_note(judged, 'whole second')}", metric)


#: The run totals :func:`run_seconds` can give per second, and the fio log metric behind each (rates add across hosts).
RUN_SECONDS_METRICS = {"iops": "iops", "bandwidth_bytes_per_s": "bw", "bandwidth_mib_s": "bw"}


def run_seconds(
    study: StudyRef,
    factors: list[str],
    *,
    metric: str = "iops",
    only: dict | None = None,
    logs: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Per-second totals of every run (fio's logs): the iterations of a two-level plan.

    One row per run and whole second after the ramp (rows fio marks as warm-up are left out): each
    log's mean rate over the second (its intervals in it, when it logged more often than once a second),
    the hosts' added (IOPS, bandwidth), with ``run`` (:func:`run_names`) and ``factors``. A second a
    log's intervals do not cover, and one that not every host of the run logged, are left out: neither
    is a run total. ``logs``: the logs of ``_log_runs`` when the caller has them already.
    """
    opened = _open(study)
    runs = _log_runs(opened, factors, only) if logs is None else logs
    series = (
        opened.scan("intervals")
        .filter(
            pl.col("run_id").is_in(runs["run_id"].to_list()),
            pl.col("metric") == metric,
            ~pl.col("is_warmup").fill_null(False),
        )
        .select("run_id", pl.col("job_index").fill_null(0), "time_ns", "value")
        .collect()
        # a mixed job logs a read and a write row at each stamp: one rate of the job, its directions added
        .group_by("run_id", "job_index", "time_ns")
        .agg(pl.col("value").sum())
        .join(runs, on="run_id")
        .sort("run_id", "job_index", "time_ns")
    )
    log = ["run_id", "job_index"]
    series = series.with_columns(
        # fio stamps an interval at its end (ms since the start, a few ms late): (0 s, 1 s] is second 1, as are
        # 250, 500, 750 and 1,000 ms of a --log_avg_msec=250 log, and 1,005 ms of a 1 s one
        ((pl.col("time_ns") - 50_000_000 + 999_999_999) // 1_000_000_000).alias("second"),
        pl.coalesce(pl.col("time_ns").diff().over(log).median().over(log), pl.col("time_ns").min().over(log)).alias(
            "interval_ns"
        ),
    )
    keys = [*factors, "run", "second"]
    # each log's rate over the second is the mean of its intervals in it (a log every 250 ms gives four rates of
    # the same second, not four seconds); a second its intervals do not cover (the run's last, cut short) is no
    # whole second
    per_log = series.group_by(*keys, *log).agg(pl.col("value").mean(), pl.len(), pl.col("interval_ns").first())
    per_log = per_log.filter(pl.col("len") * pl.col("interval_ns") >= 950_000_000)
    totals = per_log.group_by(keys).agg(pl.col("value").sum().alias(metric), pl.col("run_id").n_unique().alias("hosts"))
    # a second only some hosts logged (one host's last interval) is not the run's total: leave it out
    totals = totals.filter(pl.col("hosts") == pl.col("hosts").max().over(*factors, "run")).drop("hosts")
    return totals.sort(keys)


def _log_runs(opened: ProcessedStudy, factors: list[str], only: dict | None) -> pl.DataFrame:
    """Return the study's fio logs at ``only``: ``run_id`` (one per log), ``run`` (:func:`run_names`), ``factors``."""
    logs = _runs_at(opened, opened.scan("runs").filter(pl.col("format") == "fio-log"), only, factors)
    if {*(only or {}), *factors} - set(logs.collect_schema().names()):  # a column of results only: a published
        # table's, or a phase (a log is one job's, and names no phase): no log run has it, none is selected
        return pl.DataFrame(schema={"run_id": pl.String, "run": pl.String, **dict.fromkeys(factors, pl.String)})
    runs = logs.collect()
    return runs.join(run_names(runs, factors), on="run_id").select("run_id", "run", *factors)


#: formats whose files hold a run's series beside its output: a run's logs are its folder's, whatever their names
LOG_FORMATS = ("fio-log", "fio-hist-log")


#: how many times the slowest I/O of a configuration's other runs every member's slowest must reach to be a pause
STALL_TIMES = 10.0
#: the other members of a run with a member's stall were slower too, where their slowest took this many times the
#: other runs' (median): the run was slow, the stall its extreme
SLOWER_TIMES = 3.0


def sync_depth(frame: pl.DataFrame) -> dict | None:
    """Return where a synchronous engine held one I/O per job whatever iodepth was set; None otherwise.

    psync with iodepth=32 reads as 32 I/Os in flight; fio's synchronous engines submit one at a time.
    ``engines`` (sorted), the ``depth`` set (the largest), and ``held``: Little's law on the configuration's
    rows (IOPS x mean latency, each member in each run, their median; None where unknown), so a reader of
    one cell page does not credit a libaio/psync difference to the engine alone. None under a rate cap (the
    cap sets what is in flight). ``frame``: the configuration's rows (:func:`cell_frame`).
    :func:`benchlib.words.cell.sync_depth_note` says it.
    """
    from benchlib.stats.queueing import SYNC_ENGINES

    needed = {"ioengine", "iodepth", "iops", "lat_mean_ns"}
    if not needed <= set(frame.columns):
        return None
    rows = frame.filter(
        ~pl.col("is_aggregate") if "is_aggregate" in frame.columns else pl.lit(True),
        pl.col("ioengine").is_in(list(SYNC_ENGINES)),
        pl.col("iodepth").cast(pl.Float64, strict=False) > 1,
    )
    capped = "rate_limited" in rows.columns and rows["rate_limited"].fill_null(False).any()
    if rows.is_empty() or capped:  # under a rate cap the cap sets what is in flight, whatever the engine
        return None
    per = rows.group_by("run_id", "vm").agg((pl.col("iops") * pl.col("lat_mean_ns") / 1e9).sum().alias("held"))
    held = per["held"].drop_nulls().median()
    return {
        "engines": sorted(set(rows["ioengine"].to_list())),
        "depth": float(rows["iodepth"].cast(pl.Float64, strict=False).max()),
        "held": float(held) if held else None,
    }


def stalls(frame: pl.DataFrame, levels: dict) -> dict[str, list[dict]]:
    """Return which runs, or members of a run, of one configuration met slow I/Os the others did not.

    ``runs``: a run whose members' slowest I/Os (fio's clat max) all took :data:`STALL_TIMES` times or more
    the slowest of the configuration's other runs (their median, ``typical``): every member met the cause,
    so it was shared (the storage or the machine), not one member's. Each: ``run``, ``low`` and ``high``
    (its members' slowest, ms), ``members``, ``others`` (the other runs' slowest: ``others_low``,
    ``others_high``, their count), ``iops`` (its total; ``lowest``: below every other run's, never where a rate cap held
    the totals; ``others_iops``: the other runs' lowest and highest total and how many have one).
    ``members``: per run, the members whose slowest I/O took :data:`STALL_TIMES` times or more the median of
    the slowest of every other member and run (three or more), a run every member met left out. Each:
    ``run``, ``stood`` (each such member: ``vm``, ``high``, ``times``, ``typical``), and the rest of that run:
    ``rest_low``, ``rest_high`` (None where none), ``calm`` (the other runs' median slowest) and ``slower``
    (the rest took :data:`SLOWER_TIMES` times ``calm`` or more: the run was slow, the stall its extreme).
    A member's IOPS are not set beside its stall: one slow I/O cannot by itself explain a run's total.
    ``frame``: the configuration's rows (:func:`cell_frame`). :func:`benchlib.words.cell.stalls_note` says it.
    """
    found: dict[str, list[dict]] = {"runs": [], "members": []}
    rows = frame.filter(pl.col("clat_max_ns").is_not_null()) if "clat_max_ns" in frame.columns else frame.clear()
    if rows.is_empty():
        return found
    rows = rows.join(run_names(rows, list(levels)), on="run_id").with_columns(run_unit_expr(rows.columns))
    runs = rows.group_by("run_unit", "run").agg(
        (pl.col("clat_max_ns").max() / 1e6).alias("high"),
        (pl.col("clat_max_ns").min() / 1e6).alias("low"),
        pl.col("vm").n_unique().alias("members"),
        total_expr("iops"),
        pl.col("rate_limited").fill_null(False).any().alias("capped"),
    )
    if runs.height >= 2:
        found["runs"] = _shared_stalls(runs)
    members = rows.group_by("run_unit", "run", "vm").agg((pl.col("clat_max_ns").max() / 1e6).alias("high"))
    if members.height >= 4:
        shared = {r["run_unit"] for r in found["runs"]}
        found["members"] = _member_stalls(members, shared)
    return found


def _shared_stalls(runs: pl.DataFrame) -> list[dict]:
    """:func:`stalls`' runs every member met its slowest I/Os in."""
    found = []
    for run in runs.sort("run").iter_rows(named=True):
        others = runs.filter(pl.col("run_unit") != run["run_unit"])
        typical = others["high"].median()
        if not typical or run["low"] < STALL_TIMES * typical:
            continue
        iops = others["iops"].drop_nulls()
        lowest = not run["capped"] and run["iops"] is not None and iops.len() and run["iops"] < iops.min()
        found.append(
            {k: run[k] for k in ("run_unit", "run", "low", "high", "members", "iops")}
            | {"typical": typical, "others": others.height}
            | {"others_low": others["high"].min(), "others_high": others["high"].max()}
            | {"lowest": bool(lowest), "others_iops": (iops.min(), iops.max(), iops.len()) if iops.len() else None}
        )
    return found


def _member_stalls(members: pl.DataFrame, shared: set[str]) -> list[dict]:
    """:func:`stalls`' members whose slowest I/O in a run stood out from every other member's and run's."""
    flagged = []
    for one in members.filter(~pl.col("run_unit").is_in(list(shared))).iter_rows(named=True):
        others = members.filter((pl.col("run_unit") != one["run_unit"]) | (pl.col("vm") != one["vm"]))
        typical = others["high"].median()
        if typical and one["high"] >= STALL_TIMES * typical:
            flagged.append({**one, "times": one["high"] / typical, "typical": typical})
    found = []
    for run in sorted({one["run"] for one in flagged}):
        stood = sorted((one for one in flagged if one["run"] == run), key=lambda one: str(one["vm"]))
        rest = members.filter(pl.col("run") == run, ~pl.col("vm").is_in([one["vm"] for one in stood]))
        calm = members.filter(pl.col("run") != run)["high"].median()  # the other runs, every member
        low = rest["high"].min() if rest.height else None
        found.append(
            {"run": run, "stood": [{k: one[k] for k in ("vm", "high", "times", "typical")} for one in stood]}
            | {"rest_low": low, "rest_high": rest["high"].max() if rest.height else None, "calm": calm}
            | {"slower": bool(low is not None and calm and low >= SLOWER_TIMES * calm)}
        )
    return found


def run_names(runs: pl.DataFrame, by: Collection[str]) -> pl.DataFrame:
    """Name every run of ``runs`` in words a reader can find it by, the same name for its output and its logs.

    ``runs`` needs ``run_id``, ``source``, ``format``, ``document_index``, ``repetition`` and ``by``
    (``run_group`` when it has it). Returns ``run_id`` and ``run``:

    - ``run 2`` where ``benchlib run`` recorded the repetition;
    - else the folder that tells the configuration's runs apart (``r2``, ``2026-11-24T10-00``): the
      folders of a run's members (``r2/vm-a``, ``r2/vm-b``) give their common part, the folders all
      the configuration's runs share are left out;
    - with the file's name where one folder holds several runs, and ``run 3 in`` it where one file does;
    - ``run 1`` where the configuration has one run and nothing to tell apart.

    A log names no run of its own: a run's logs are the ones in its folder (:data:`LOG_FORMATS`).
    """
    unit = run_unit_expr(runs.columns)
    rows = runs.select(
        "run_id",
        "repetition",
        *by,
        unit,
        pl.col("format").is_in(LOG_FORMATS).alias("log"),
        pl.col("source").str.split("/").alias("parts"),
        pl.col("document_index").fill_null(0).alias("doc"),
    ).with_columns(pl.col("log").all().over("run_unit"))
    units = rows.group_by(["run_unit", *by]).agg(
        pl.col("repetition").drop_nulls().first(), pl.col("log").first(), pl.col("doc").min(), pl.col("parts")
    )
    names: dict[tuple, str] = {}
    for group in units.partition_by(list(by), maintain_order=True) if by else [units]:
        records = group.to_dicts()
        folders = [_common_prefix([parts[:-1] for parts in record["parts"]]) for record in records]
        shared = len(_common_prefix(folders))
        places = ["/".join(folder[shared:]) for folder in folders]
        files = [min(parts[-1] for parts in record["parts"]) for record in records]
        outputs = [
            (place, file) for place, file, record in zip(places, files, records, strict=True) if not record["log"]
        ]
        for record, place, file in zip(records, places, files, strict=True):
            name = place
            if not record["log"] and sum(other == place for other, _ in outputs) > 1:
                name = f"{place}/{file}" if place else file
                if outputs.count((place, file)) > 1:
                    name = f"run {record['doc'] + 1} in {name}"
            names[(record["run_unit"], *(record[factor] for factor in by))] = (
                f"run {record['repetition']}" if record["repetition"] is not None else name or "run 1"
            )
    keyed = rows.select("run_id", "run_unit", *by)
    return (
        keyed.with_columns(
            pl.Series(
                "run", [names[(row[0], *row[1:])] for row in keyed.select("run_unit", *by).iter_rows()], pl.String
            )
        )
        .select("run_id", "run")
        .unique("run_id")
    )


def _common_prefix(lists: list[list[str]]) -> list[str]:
    """Return the leading items every list of ``lists`` shares."""
    if not lists:
        return []
    first = lists[0]
    size = len(first)
    for other in lists[1:]:
        size = next(
            (i for i, (a, b) in enumerate(zip(first[:size], other, strict=False)) if a != b), min(size, len(other))
        )
    return first[:size]


#: The tail percentiles a report shows.
TAIL_PERCENTILES = (50.0, 90.0, 99.0, 99.9)


#: where a run's latency histogram came from, best first: a group of ``by``, run (and member) uses the best it has
BIN_ORIGINS = ("fio json+", "fio histogram log", "vdbench histogram (total latency)")


#: the last :func:`_run_bins` asked, by its arguments and the stamp of the bins' parts: a cell page's tail
#: table and its exceedance curve read the same bins (a 1,000-run study's are decoded once a page, not twice)
_LAST_BINS: dict = {}


def _run_bins(study: StudyRef, by: list[str], only: dict | None, kind: str, member: str | None) -> pl.DataFrame:
    """Whole-run latency bins with each run's label, ``by``, the member and ``origin`` (:data:`BIN_ORIGINS`).

    fio's json+ bins where a run has them; else its histogram log (``--write_hist_log``), every
    interval's bins added; else, for vdbench, its response time histogram, which holds total
    latency whatever ``kind`` asks (vdbench measures no other).
    """
    from benchlib.store import parts_stamp

    opened = _open(study)
    key = (str(opened.processed), parts_stamp(opened.processed, "latency_bins"), repr((by, only, kind, member)))
    if _LAST_BINS.get("key") != key:
        _LAST_BINS.update(key=key, bins=_read_run_bins(opened, by, only, kind, member))
    return _LAST_BINS["bins"]


def _read_run_bins(
    opened: ProcessedStudy, by: list[str], only: dict | None, kind: str, member: str | None
) -> pl.DataFrame:
    """Read :func:`_run_bins`'s bins."""
    from benchlib.fit import PHASE

    runs = _runs_at(opened, opened.scan("runs"), only, by).filter(~pl.col("is_aggregate"))
    member_name = pl.col("host").fill_null(UNNAMED_HOST).alias("vm")  # as claims_frame names it
    folder = _folder()
    runs = runs.collect()
    of_runs = [b for b in by if b != PHASE]  # a run holds its phases: each bin's is its job's (_in_phase)
    axes = [b for b in of_runs if b not in ("tool", "format")]  # the tool, where it is an axis, is selected once
    runs = runs.join(run_names(runs, of_runs), on="run_id").select(
        "run_id", "tool", "format", "run", member_name, folder, *axes
    )
    bins = (
        opened.scan("latency_bins")
        .filter(pl.col("run_id").is_in(runs["run_id"].to_list()), pl.col("latency_kind").is_in([kind, "lat"]))
        .select("run_id", "job_index", "direction", "latency_kind", "time_ns", "bin_index", "bin_value_ns", "count")
        .collect()
    )
    if PHASE in by or PHASE in (only or {}):
        bins = _in_phase(opened, bins, only)
    bins = bins.join(runs, on="run_id")
    origin = (
        pl.when((pl.col("tool") == "vdbench") & (pl.col("latency_kind") == "lat"))
        .then(pl.lit(BIN_ORIGINS[2]))
        .when(pl.col("latency_kind") != kind)
        .then(None)
        .when(pl.col("format") == "fio-hist-log")
        .then(pl.lit(BIN_ORIGINS[1]))
        .when(pl.col("time_ns").is_null())
        .then(pl.lit(BIN_ORIGINS[0]))
    )
    keep = ["run", *by, *([member] if member else [])]
    bins = bins.with_columns(origin.alias("origin")).drop_nulls("origin")
    # a histogram log beside a json+ output is that run's log: its I/Os are in the json+ bins already
    with_json = bins.filter(pl.col("origin") == BIN_ORIGINS[0])["folder"].unique().implode()
    bins = bins.filter(~((pl.col("origin") == BIN_ORIGINS[1]) & pl.col("folder").is_in(with_json)))
    rank = pl.col("origin").replace_strict(BIN_ORIGINS, range(len(BIN_ORIGINS)), return_dtype=pl.Int8)
    bins = bins.filter(rank == rank.min().over(keep))
    return bins.select("run_id", *dict.fromkeys(keep), "origin", "direction", "bin_index", "bin_value_ns", "count")


def runs_without_histograms(study: StudyRef, *, by: list[str], only: dict | None = None) -> list[str]:
    """Return the runs at ``only`` that :func:`tail_latency` leaves out: their output holds no latency histogram.

    Named as its rows name runs (:func:`run_names`), in the order the runs were read. fio's normal and plain
    json output print percentiles, not the histogram the table pools.
    """
    from benchlib.fit import PHASE

    opened = _open(study)
    runs = _runs_at(opened, opened.scan("runs"), only, by).filter(~pl.col("is_aggregate")).collect()
    if runs.is_empty():
        return []
    named = run_names(runs, [b for b in by if b != PHASE])["run"].unique(maintain_order=True).to_list()
    bins = _run_bins(study, by, only, "clat", None)
    binned = set(bins["run"].to_list()) if bins.height else set()
    return [run for run in named if run not in binned]


def _directions_apart(bins: pl.DataFrame) -> list[str]:
    """Return ``["direction"]`` where a run's bins hold reads and writes (a mix), else [].

    fio gives a mix's percentiles per direction: a read's latency and a write's are not one distribution.
    """
    if "direction" not in bins.columns or bins.is_empty():
        return []
    ways = bins.filter(pl.col("count") > 0).group_by("run_id").agg(pl.col("direction").drop_nulls().n_unique())
    return ["direction"] if (ways["direction"] > 1).any() else []


#: The fewest I/Os beyond a percentile for :func:`tail_latency` to give it (p99 needs 1,000 I/Os, p99.9 10,000).
TAIL_BEYOND = 10


def tail_latency(
    study: StudyRef,
    *,
    by: list[str],
    only: dict | None = None,
    member: str | None = None,
    kind: str = "clat",
    percentiles: tuple[float, ...] = TAIL_PERCENTILES,
) -> pl.DataFrame:
    """Latency percentiles per run (or per run and member) from its latency histogram, pooled as fio pools them.

    One row per group of ``by``, run (and ``member``, e.g. ``"vm"``): ``p50_ms``, ``p90_ms``,
    ``p99_ms``, ``p99.9_ms``, ``ios`` (the I/Os the histogram holds) and ``origin`` (fio json+,
    fio histogram log or vdbench histogram: :data:`BIN_ORIGINS`). ``kind``: ``"clat"``
    (completion) or ``"lat"`` (total). Empty when the study has no histogram. A percentile is null
    where fewer than :data:`TAIL_BEYOND` I/Os lie beyond it (p99.9 needs 10,000 I/Os): from fewer it
    is one or two slow I/Os, not a tail.
    """
    bins = _run_bins(study, by, only, kind, member)
    if bins.is_empty():
        return pl.DataFrame()
    keys = [*by, "run", *([member] if member else []), *_directions_apart(bins), "origin"]
    long = pooled_percentiles(bins, list(percentiles), by=keys)
    # a percentile with only a few I/Os beyond it is those few I/Os (p99.9 of 1,500 is the second slowest): unknown
    beyond = pl.col("count") * (1 - pl.col("percentile") / 100)
    wide = long.with_columns(
        pl.when(beyond.round(6) >= TAIL_BEYOND).then(pl.col("value_ns") / 1e6).alias("ms"),
        pl.format("p{}_ms", pl.col("percentile").cast(pl.String).str.strip_suffix(".0")).alias("name"),
    )
    table = wide.pivot(on="name", index=[*keys, "count"], values="ms").rename({"count": "ios"})
    if not member:
        return table.sort(keys)
    from benchlib.tables import natural_rank

    apart = ["direction"] if "direction" in table.columns else []  # a mix's reads and writes
    return table.sort([*by, natural_rank(table, "run"), natural_rank(table, member), *apart, "origin"])  # 2 before 10


def tails_across_members(tails: pl.DataFrame, by: list[str], member: str) -> pl.DataFrame:
    """Say :func:`tail_latency`'s per-member rows as one row per run: the median member's and the worst member's.

    For many members (a row each would be a table nobody reads): ``members``, ``ios`` (all of them), each
    percentile's median over the members (``p50_ms`` ...), and the worst member by p99 with its p99 and
    p99.9 (``worst``, ``worst_p99_ms``, ``worst_p99.9_ms``). A member whose percentile is unknown (too few
    I/Os beyond it) does not count toward that percentile's median.
    """
    from benchlib.tables import natural_rank

    keys = [*by, "run", *(["direction"] if "direction" in tails.columns else []), "origin"]  # a mix's reads, writes
    percentiles = [c for c in tails.columns if c.startswith("p") and c.endswith("_ms")]
    worst = tails.sort("p99_ms", descending=True, nulls_last=True).group_by(keys, maintain_order=True).first()
    table = tails.group_by(keys).agg(
        pl.col(member).n_unique().alias("members"),
        pl.col("ios").sum(),
        *[pl.col(c).median() for c in percentiles],
    )
    table = table.join(
        worst.select(
            *keys,
            pl.col(member).alias("worst"),
            pl.col("p99_ms").alias("worst_p99_ms"),
            pl.col("p99.9_ms").alias("worst_p99.9_ms"),
        ),
        on=keys,
        how="left",
    )
    return table.sort([*by, natural_rank(table, "run"), "origin"])


def latency_exceedance(
    study: StudyRef, *, by: list[str], only: dict | None = None, member: str | None = None, kind: str = "clat"
) -> pl.DataFrame:
    """Exceedance curves (share of I/Os slower than each latency) per group of ``by`` (and member), all runs pooled.

    Drawn only as far as :data:`TAIL_BEYOND` I/Os lie beyond a point, as far as the percentile table
    gives figures: a curve's last steps down to single I/Os are noise.
    """
    bins = _run_bins(study, by, only, kind, member)
    if bins.is_empty():
        return pl.DataFrame()
    keys = [*by, *([member] if member else []), *_directions_apart(bins)]
    curve = exceedance(bins, by=keys).filter(pl.col("slower_ios").round(6) >= TAIL_BEYOND)
    return curve.with_columns((pl.col("value_ns") / 1e6).alias("latency_ms"))


def run_steadiness_table(
    study: StudyRef, factors: list[str], *, metric: str = "iops", only: dict | None = None
) -> pl.DataFrame:
    """Steady state of every run with per-second data: "steady", "not steady" or "too short to assess".

    The per-second run totals (:func:`run_seconds`) of each run, judged with the SNIA PTS window
    (:func:`benchlib.stats.steady.run_steadiness`). Columns: ``factors``, ``run``,
    ``intervals``, ``state``, ``note`` and ``fio_ss_attained`` (fio's own ``ss=`` check, where a
    job used it; null otherwise).
    """
    opened = _open(study)
    logs = _log_runs(opened, factors, only)  # named once: the runs judged and the runs too short to judge
    seconds = run_seconds(opened, factors, metric=metric, only=only, logs=logs)
    rows = []
    for key, group in seconds.sort("second").group_by([*factors, "run"], maintain_order=True):
        judged = run_steadiness(group[metric].to_list())
        rows.append(
            {
                **dict(zip([*factors, "run"], key, strict=True)),
                "intervals": judged.rounds,
                "state": judged.state,
                "note": steadiness_note(judged, "whole second"),
            }
        )
    judged_runs = {tuple(row[c] for c in [*factors, "run"]) for row in rows}
    who = _member_noun(opened)
    for key in logs.select(*factors, "run").unique().sort(pl.all()).iter_rows():
        if key not in judged_runs:  # logged, but not one second that its logs cover and every host logged
            rows.append(
                {
                    **dict(zip([*factors, "run"], key, strict=True)),
                    "intervals": 0,
                    "state": "too short to assess",
                    "note": f"no second that every {who}'s log covers whole (a run of about a second, whose log "
                    f"intervals straddle the seconds, or {who}s that logged different seconds)",
                }
            )
    if not rows:
        return pl.DataFrame()
    table = pl.DataFrame(rows)
    rows = _study_rows(opened, only)
    fio = (
        rows.join(run_names(rows, factors), on="run_id")
        .group_by([*factors, "run"])
        .agg(
            pl.when(pl.col("ss_attained").is_not_null().any())
            .then(pl.col("ss_attained").drop_nulls().all())
            .alias("fio_ss_attained")
        )
    )
    keys = [*factors, "run"]
    return table.join(fio, on=keys, how="left", nulls_equal=True).sort(keys)


def _loopback(host: pl.Expr) -> pl.Expr:
    """Whether a host is this machine (127.0.0.x, ::1, localhost): fio servers started on it."""
    return host.str.starts_with("127.") | host.is_in(["::1", "localhost"])


def disk_view(study: StudyRef, *, by: list[str], only: dict | None = None) -> pl.DataFrame:
    """Return where a cell's latency was spent, from the kernel's disk statistics that fio reports (``disk_util``).

    Joins each run's application latency to its disk counters; the arithmetic
    (iostat's await and aqu-sz, the medians) is :func:`benchlib.stats.queueing.device_latency_split`.
    ``util_range`` says the kept runs' lowest and highest device busy share (``"2.5–41.5"``). fio servers on
    one machine (loopback hosts) report one shared disk: their figures of a run count once, as their median.
    """
    counters = (
        _open(study)
        .scan("host_counters")
        .filter(pl.col("object") == "fio disk stats")
        .collect()
        .pivot(on="counter", index=["run_id", "host", "instance"], values="value", aggregate_function="first")
    )
    rows = _study_rows(study, only)
    rows = rows.with_columns(run_unit_expr(rows.columns), configured_depth_expr(rows.columns))
    # the I/Os all hosts of a run kept in flight at most: they share the disk whose counters each reports; a
    # run's phases (fio's groups) ran one after another, so its most is its busiest phase's, not their sum
    phase = pl.col("group_id").fill_null(0) if "group_id" in rows.columns else pl.lit(0)
    job = [c for c in ("run_id", "client", "job_index", "job_name") if c in rows.columns]  # a mix's 2 rows: 1 job
    held = (
        rows.group_by("run_unit", phase.alias("_phase"), *job)
        .agg(pl.col("configured_depth").max())
        .group_by("run_unit", "_phase")
        .agg(pl.col("configured_depth").sum())
    )
    depth = (
        rows.group_by("run_unit")
        .agg(
            total_expr("iops").alias("run_iops"),
            total_expr("lat_mean_ms", rows.columns).alias("run_latency_ms"),  # all its hosts' I/Os together
        )
        .join(held.group_by("run_unit").agg(pl.col("configured_depth").max()), on="run_unit")
    )
    # the disk's counters run through the ramp too, and through every phase of the run (fio's groups one after
    # another): their rates are over the phases' spans added, each its longest job's ramp and runtime
    ramp = pl.col("ramp_time_ns").fill_null(0) if "ramp_time_ns" in rows.columns else pl.lit(0)
    spans = (
        rows.group_by("run_id", phase.alias("_phase"))
        .agg((pl.col("runtime_ns") + ramp).max().alias("disk_span_ns"))
        .group_by("run_id")
        .agg(pl.col("disk_span_ns").sum())
    )
    guest = (
        rows.group_by("run_id", "run_unit", *by)
        .agg(
            total_expr("lat_mean_ms", rows.columns).alias("app_latency_ms"),
            total_expr("iops"),
            pl.col("runtime_ns").max(),
            # fio's direct=1 on every job: the page cache cannot have answered (a job that did not say: unknown)
            (pl.col("direct").fill_null(False).all() if "direct" in rows.columns else pl.lit(False)).alias("direct_io"),
        )
        .join(spans, on="run_id")
        .join(depth, on="run_unit")
    )
    joined = guest.join(counters, on="run_id", how="inner")
    figures = "one per host and run"
    if joined["host"].n_unique() > 1 and joined.select(_loopback(pl.col("host")).fill_null(False).all()).item():
        # fio servers on one machine each report the one disk they share: one figure per run, their median
        numeric = [c for c, t in joined.schema.items() if t.is_numeric()]
        joined = joined.group_by("run_unit", "instance", *by).agg(pl.col(numeric).median(), pl.col("direct_io").all())
        # the latency the shared disk's counters are set against: the run's, as the results table gives it
        joined = joined.with_columns(pl.col("run_latency_ms").alias("app_latency_ms"))
        figures = "one per run; its hosts share one disk"
    split = latency_split_notes(device_latency_split(joined, by), figures=figures)
    # fio's util of one run can be far from another's: the kept runs' range beside the median, as text
    # a range of one figure (the others left out) or of equal ones says nothing the median does not
    kept = pl.col("util_pct").is_not_null() & (pl.col("util_low").round(1) != pl.col("util_high").round(1))
    spread = pl.format("{}–{}", pl.col("util_low").round(1), pl.col("util_high").round(1))
    # two kept figures apart: their median is their mean, a figure neither run had; both are given instead
    two = kept & (pl.col("util_kept") == 2)
    both = pl.format("{} and {}", pl.col("util_low").round(1), pl.col("util_high").round(1))
    said = "the 2 kept are both given, not their median (of two, their mean)"
    return split.with_columns(
        pl.when(two).then(both).when(kept).then(spread).alias("util_range"),
        pl.when(two).then(None).otherwise(pl.col("util_pct")).alias("util_pct"),
        pl.when(two)
        .then(pl.concat_str(pl.col("note"), pl.lit(said), separator="; ", ignore_nulls=True))
        .otherwise(pl.col("note"))
        .alias("note"),
    ).drop("util_kept")


def _esxtop_runs(opened: ProcessedStudy) -> pl.DataFrame:
    return opened.scan("runs").filter(pl.col("format") == "esxtop").select("run_id", "host").collect()


def _capture_counters(opened: ProcessedStudy, objects: pl.Expr) -> pl.DataFrame:
    """Return the rows of the study's esxtop captures whose object ``objects`` selects (a capture holds thousands)."""
    captures = _esxtop_runs(opened)["run_id"].implode()
    return opened.scan("host_counters").filter(pl.col("run_id").is_in(captures) & objects).collect()


def esxtop_captures(study: StudyRef) -> pl.DataFrame:
    """Return each esxtop capture of the study, and how much of it is the study's I/O.

    Per capture: its ESXi host, first and last sample time, samples (after esxtop's first, always
    zero), and ``in_runs``: how many of them fell inside a run of the study (only those are its I/O).
    """
    opened = _open(study)
    captures = _esxtop_runs(opened)
    every = (
        opened.scan("host_counters")
        .filter(pl.col("run_id").is_in(captures["run_id"].to_list()))
        .select("run_id", "sample", "time")
        .unique()
        .collect()
    )
    # placed with sample 0 present: a sample's interval begins at the one before it
    inside = _placed(opened, every, by=[], only=None).select("run_id", "sample").unique()
    counters = every.filter(pl.col("sample") > 0)  # esxtop's first sample is always zero
    return (
        counters.group_by("run_id")
        .agg(pl.col("time").min().alias("first"), pl.col("time").max().alias("last"), pl.col("sample").n_unique())
        .rename({"sample": "samples"})
        .join(inside.group_by("run_id").len("in_runs"), on="run_id", how="left")
        .join(captures, on="run_id")
        .with_columns(pl.col("in_runs").fill_null(0))
        .select("host", "first", "last", "samples", "in_runs")
        .sort("host", "first")
    )


def esxtop_copied(study: StudyRef) -> list[list[str]]:
    """Return the study's esxtop captures that hold the same samples as another, only their times differ.

    A capture copied (or renamed) and placed at other times is one measurement: beside itself it would look
    like corroboration. Captures are compared on every counter's value by sample, through a hash of each
    row, added per capture. Each group of alike captures is its files, sorted; [] when no two agree.
    """
    opened = _open(study)
    runs = opened.scan("runs").filter(pl.col("format") == "esxtop").select("run_id", "source").collect()
    if runs.height < 2:
        return []
    row = pl.struct("object", "instance", "counter", "sample", "value").hash() // 2**32  # 32 bits: sums never wrap
    prints = (
        opened.scan("host_counters")
        .filter(pl.col("run_id").is_in(runs["run_id"].to_list()), pl.col("sample") > 0)  # the first is always 0
        .group_by("run_id")
        .agg(row.sum().alias("print"), pl.len().alias("rows"), pl.col("value").abs().sum().alias("_any"))
        .filter(pl.col("_any") > 0)  # captures of nothing but zeros are alike without being copies
        .collect()
        .join(runs, on="run_id")
    )
    same = prints.group_by("print", "rows").agg(pl.col("source").sort()).filter(pl.col("source").list.len() > 1)
    return sorted(same["source"].to_list())


def _placed(
    opened: ProcessedStudy, counters: pl.DataFrame, *, by: list[str], only: dict | None, with_run: bool = False
) -> pl.DataFrame:
    """Return the esxtop rows whose sample fell inside a run of the study, with that run's ``by`` levels.

    A run's window spans all its hosts; sample 0 (always zero) is left out. Windows from whole-second
    start times can overlap a neighbour's: a sample inside two runs' windows saw one of them, which is
    unknown. It counts once where both runs have the same ``by`` levels, and is left out where they differ.
    ``with_run``: keep ``benchmark_run_id``, the run that holds the sample (a sample of two runs is then two rows).
    """
    from benchlib.stats.hostside import counters_during_runs

    runs = opened.tables(only=("runs",)).runs.filter(~pl.col("is_aggregate"), ~pl.col("format").is_in(NOT_RUNS))
    runs = _runs_at(opened, runs, only, by)
    runs = runs.with_columns(run_unit_expr(runs.collect_schema().names()))
    end = pl.col("start_time") + pl.duration(nanoseconds=pl.col("duration_ns"))
    windows = runs.group_by("run_unit").agg(
        *(pl.col(b).first() for b in by),
        pl.col("start_time").min(),
        (end.max() - pl.col("start_time").min()).dt.total_nanoseconds().alias("duration_ns"),
    )
    placed = counters_during_runs(windows.rename({"run_unit": "run_id"}), counters)
    placed = placed.join(windows.select(pl.col("run_unit").alias("benchmark_run_id"), *by), on="benchmark_run_id")
    one_level = (pl.struct(*by) if by else pl.lit(0)).n_unique().over(pl.struct("run_id", "sample")) == 1
    placed = placed.filter(one_level)
    return placed if with_run else placed.drop("benchmark_run_id").unique(maintain_order=True)


#: how many times more (or fewer) commands/s than the guests' IOPS esxtop may count before a page says so
COMMANDS_MATCH = 2.0


def esxtop_against_guests(study: StudyRef, *, by: list[str], only: dict | None = None) -> pl.DataFrame:
    """Per configuration: the commands/s esxtop counted on its devices during its runs, beside the guests' IOPS.

    A capture is tied to the runs by time alone; this checks that its devices carried their I/O. Per
    configuration: each device's mean commands/s over the samples inside its runs (each sample once,
    though the windows of two runs can both hold it), added over hosts and devices, against the median
    total IOPS (phases averaged) of its runs that hold those samples. Columns: ``by``, ``samples``
    (esxtop samples inside its runs), ``guest_iops``, ``esxtop_commands``, ``ratio`` (commands per guest
    I/O) and ``matches`` (within :data:`COMMANDS_MATCH` times either way). Empty without samples inside
    runs. A guest I/O split into several commands (large blocks) or absorbed by the page cache (buffered
    jobs) moves the ratio without the capture being wrong: the page says so.
    """
    from benchlib.sources.esxtop import device_queue_view

    opened = _open(study)
    counters = _capture_counters(opened, pl.col("object") == "Physical Disk SCSI Device")
    placed = _placed(opened, counters, by=by, only=only, with_run=True)
    held = placed["benchmark_run_id"].unique().implode() if "benchmark_run_id" in placed.columns else []
    queue = device_queue_view(placed.drop("benchmark_run_id", strict=False).unique(maintain_order=True), keys=by)
    if queue.is_empty() or "CMDS_per_s" not in queue.columns:
        return pl.DataFrame()
    keys = by or ["_all"]  # without levels: one group of everything
    queue = queue.with_columns(_all=pl.lit(0))
    samples = queue.group_by(keys).agg(pl.struct("run_id", "sample").n_unique().alias("samples"))
    seen = queue.group_by(*keys, "host", "device").agg(pl.col("CMDS_per_s").mean())
    seen = seen.group_by(keys).agg(pl.col("CMDS_per_s").sum().alias("esxtop_commands")).join(samples, on=keys)
    runs = totals_of_runs(_study_rows(opened, only), "iops", by).filter(pl.col("run_unit").is_in(held))
    runs = runs.group_by("run_unit", *by).agg(pl.col("iops").mean())  # the runs esxtop watched, phases averaged
    guests = runs.with_columns(_all=pl.lit(0)).group_by(keys).agg(pl.col("iops").median().alias("guest_iops"))
    table = seen.join(guests, on=keys)
    if table.is_empty():
        return pl.DataFrame()
    ratio = pl.col("esxtop_commands") / pl.col("guest_iops")
    return (
        table.with_columns(pl.when(pl.col("guest_iops") > 0).then(ratio).alias("ratio"))
        .with_columns(pl.col("ratio").is_between(1 / COMMANDS_MATCH, COMMANDS_MATCH).alias("matches"))
        .select(*by, "samples", "guest_iops", "esxtop_commands", "ratio", "matches")
        .sort(by or "samples")
    )


def esxtop_mismatched(table: pl.DataFrame, by: list[str]) -> list[dict]:
    """Return the levels of each configuration of :func:`esxtop_against_guests` whose commands did not match."""
    off = table.filter(~pl.col("matches").fill_null(False)) if table.height else table
    return [{b: row[b] for b in by} for row in off.iter_rows(named=True)]


def esxtop_view(study: StudyRef, *, by: list[str] | None = None, only: dict | None = None) -> pl.DataFrame:
    """Return the esxtop device queue view (DQLEN, ACTV, QUED, DAVG, KAVG, GAVG...) of the study's runs.

    Only samples taken inside a run of the study count (a capture of another time is not its I/O:
    :func:`esxtop_captures` says which); each carries its run's ``by`` levels. Empty when none.
    """
    from benchlib.sources.esxtop import device_queue_view

    opened, by = _open(study), by or []
    counters = _capture_counters(opened, pl.col("object") == "Physical Disk SCSI Device")
    return device_queue_view(_placed(opened, counters, by=by, only=only), keys=by)


def adapter_queues(study: StudyRef, *, by: list[str] | None = None, only: dict | None = None) -> pl.DataFrame:
    """Return the esxtop adapter view (AQLEN, commands/s, DAVG, KAVG, GAVG per host, adapter and sample).

    Only samples inside a run of the study, with its ``by`` levels. Empty when no capture in the study
    has the adapters' queue depth (only ``esxtop -b -a`` writes it).
    """
    from benchlib.sources.esxtop import adapter_queue_view

    opened, by = _open(study), by or []
    counters = _capture_counters(opened, pl.col("object").str.starts_with("Physical Disk"))
    return adapter_queue_view(_placed(opened, counters, by=by, only=only), keys=by)


def implausible(study: StudyRef, value: str, *, by: list[str], only: dict | None = None) -> pl.DataFrame:
    """Return the runs of ``only`` that cannot have measured what they claim (:mod:`benchlib.stats.plausibility`).

    One row per run and rule: :data:`~benchlib.stats.plausibility.FINDINGS` with the run's name a reader finds
    it by (``run``), its levels of ``by``, and ``value`` (the figure the pages show: a finding of a run
    whose total is apart is about ``value``). The pages' medians include every run; this says which to doubt.
    """
    from benchlib.stats import plausibility as rules

    opened = _open(study)
    # a run is judged against the runs of its own configuration: every factor the study declares, not only the
    # page's (a page of fewer axes would hold capped and uncapped runs as siblings)
    config = list(dict.fromkeys([*[b for b in by if b != "phase"], *opened.study.factors]))
    rows = _study_rows(opened, only).with_columns(run_unit_expr())
    config = [c for c in config if c in rows.columns]
    if rows.is_empty():
        return pl.DataFrame(schema={**rules.FINDINGS, "run": pl.String, **{b: pl.String for b in config}})
    totals = totals_of_runs(rows, value, config).filter(pl.col("phase") == pl.col("phase").min())
    io = rows.filter(pl.col("direction").is_in(["read", "write"]))
    members = io.select(
        "run_unit",
        pl.col("vm").alias("member"),
        "direct",
        "ioengine",
        rules.median_completion_expr().alias("clat_p50_ns"),
    )
    counted = (  # per member: its direct I/Os against what the device under it counted (fio's disk statistics)
        io.filter(pl.col("direct").fill_null(False))
        .group_by("run_unit", "run_id", "vm", "direction")
        .agg(pl.col("io_count").sum().alias("fio_ios"))
        .join(disk_ios(opened), on="run_id")
        .select(
            "run_unit",
            pl.col("vm").alias("member"),
            "fio_ios",
            pl.when(pl.col("direction") == "read").then("read_ios").otherwise("write_ios").alias("device_ios"),
        )
    )
    spans = rows.select(
        "run_unit",
        pl.col("vm").alias("member"),
        pl.col("start_time").dt.epoch("ns").alias("start_ns"),
        (pl.col("start_time").dt.epoch("ns") + pl.col("duration_ns")).alias("end_ns"),
    ).unique()
    written = io.select(
        "run_unit",
        pl.col("vm").alias("member"),
        _label_or_null(io, TARGET_WRITTEN).alias("target_written"),
        (pl.col("direction") == "read").alias("reads"),
    ).filter(pl.col("reads"))
    steady = io.select(
        "run_unit",
        pl.col("vm").alias("member"),
        _label_or_null(io, TARGET_STEADY).alias("target_steady"),
        _label_or_null(io, TARGET_STEADY_S).cast(pl.Float64, strict=False).alias("steady_s"),
    ).unique()
    named = run_names(rows.unique("run_id"), config).join(
        rows.select("run_id", "run_unit", *config).unique("run_id"), on="run_id"
    )
    named = named.group_by("run_unit").agg(pl.col("run").first(), *[pl.col(b).first() for b in config])
    found = rules.implausible_runs(
        rules.apart_from_siblings(totals, value, config),
        rules.not_steady(steady),
        rules.too_fast(members, 1e3 * (opened.study.fastest_direct_us or rules.FASTEST_DIRECT_NS / 1e3)),
        rules.idle_device(counted),
        rules.apart_in_time(pl.concat([spans, _log_spans(opened, named, config, only)])),
        rules.unwritten_target(written.unique()),
    )
    return found.join(named, on="run_unit", how="left").sort([*config, "run", "rule", "member"], nulls_last=True)


def _log_spans(opened: ProcessedStudy, named: pl.DataFrame, config: list[str], only: dict | None) -> pl.DataFrame:
    """Return each member's span from its logs (``run_unit``, ``member``, ``start_ns``, ``end_ns``).

    Logs stamped in Unix time (``benchlib run`` asks fio for them) give each member's start and end by its
    own clock, which a client/server run's JSON does not; other logs carry their run's span. ``named``:
    the runs (``run_unit``, ``run`` and ``config``) the logs are matched to by name and levels.
    """
    logs = _log_runs(opened, config, only)
    if logs.is_empty():
        return pl.DataFrame(
            schema={"run_unit": pl.String, "member": pl.String, "start_ns": pl.Int64, "end_ns": pl.Int64}
        )
    spans = (
        opened.scan("runs")
        .filter(pl.col("run_id").is_in(logs["run_id"].to_list()))
        .select("run_id", "host", "start_time", "duration_ns")
        .collect()
        .join(logs, on="run_id")
        .join(named, on=["run", *config])
    )
    return spans.select(
        "run_unit",
        pl.col("host").alias("member"),
        pl.col("start_time").dt.epoch("ns").alias("start_ns"),
        (pl.col("start_time").dt.epoch("ns") + pl.col("duration_ns")).alias("end_ns"),
    ).unique()


#: the run label ``benchlib run``'s manifest gives every run: when its target's region was written, or "never"
TARGET_WRITTEN = "target.written"
#: the run labels of a plan's steady-state preconditioning: whether fio found the workload steady, after how long
TARGET_STEADY, TARGET_STEADY_S = "target.steady", "target.steady_s"


def _label_or_null(rows: pl.DataFrame, label: str) -> pl.Expr:
    """Return a run label's column, or nulls where no run of ``rows`` carries it."""
    return pl.col(label) if label in rows.columns else pl.lit(None, pl.String)


#: the columns of :func:`implausible` that are findings, not the run's levels
FINDINGS_COLUMNS = ("run_unit", "rule", "member", "figure", "reference", "runs")
