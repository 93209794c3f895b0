"""CPU efficiency: IOPS per CPU%, CPUs used, cycles per I/O, and reconciliation (METHODS.md F).

fio reports ``usr_cpu``/``sys_cpu`` as percent of one CPU per job; with
``group_reporting`` the group shows the job average, so the CPUs a group used
are ``numjobs × (usr + sys) / 100``.
"""

from __future__ import annotations

import polars as pl

#: Relative disagreement above which a reported ratio does not follow from its inputs.
RECONCILE_TOLERANCE = 0.02


def cpu_pct_expr(usr: str = "usr_cpu_pct", sys: str = "sys_cpu_pct") -> pl.Expr:
    """Usr + sys CPU, percent of one CPU."""
    return (pl.col(usr) + pl.col(sys)).alias("cpu_pct")


def iops_per_cpu_pct_expr(iops: str = "iops", usr: str = "usr_cpu_pct", sys: str = "sys_cpu_pct") -> pl.Expr:
    """IOPS per percent of CPU (usr + sys), the write-ups' efficiency figure."""
    return (pl.col(iops) / cpu_pct_expr(usr, sys)).alias("iops_per_cpu_pct")


def cpus_used_expr(numjobs: str = "numjobs", usr: str = "usr_cpu_pct", sys: str = "sys_cpu_pct") -> pl.Expr:
    """CPUs used by a group of jobs: numjobs × (usr + sys) / 100."""
    return (pl.col(numjobs) * cpu_pct_expr(usr, sys) / 100).alias("cpus_used")


def cpu_used_pct_expr(jobs: str = "jobs", usr: str = "usr_cpu_pct", sys: str = "sys_cpu_pct") -> pl.Expr:
    """Percent of one CPU a result row's jobs used: (usr + sys) × the jobs the row stands for.

    A ``group_reporting`` row stands for ``numjobs`` jobs and reports their average CPU; a per-job
    row stands for one. Rows that say nothing of their jobs count as one.
    """
    return (cpu_pct_expr(usr, sys) * pl.coalesce(pl.col(jobs), pl.lit(1))).alias("cpu_used_pct")


def _sum_or_null(column: str) -> pl.Expr:
    return pl.when(pl.col(column).is_not_null().any()).then(pl.col(column).sum()).alias(column)


def run_efficiency(frame: pl.DataFrame, *, member: str, by: list[str], run: list[str] | None = None) -> pl.DataFrame:
    """IOPS per percent of one CPU, per run and member, with the CPU of every job counted once.

    ``frame``: result rows (no tool aggregates) with ``iops_or_derived``, ``usr_cpu_pct``,
    ``sys_cpu_pct``, ``jobs``, ``client``, ``job_index``, ``run_id`` and the ``member`` and ``by``
    columns; ``run``: the columns that name a run (default ``run_id``). A job's read and write rows
    report the same CPU, so each job counts once; a ``group_reporting`` row counts ``numjobs`` times.

    Returns per run and member: ``iops``, ``cpu_used_pct`` (percent of one CPU; 800 = eight CPUs),
    ``iops_per_cpu_pct`` and ``reason``: null efficiency with a reason where there is no CPU figure,
    the CPU is 0 (nothing to divide by) or there is no IOPS figure, never 0, inf or NaN. Where the rows
    hold ``bandwidth_mib_s``, also ``mib_s_per_cpu_pct``: the bytes moved per CPU%, which compares runs
    of different block sizes where IOPS per CPU% would compare different work.
    """
    run = run or ["run_id"]
    keys = [*run, member, *by]
    job = list(dict.fromkeys([*keys, "run_id", "client", "job_index"]))
    moved = ["bandwidth_mib_s"] if "bandwidth_mib_s" in frame.columns else []
    per_job = frame.group_by(job).agg(
        _sum_or_null("iops_or_derived").alias("iops"),
        *(_sum_or_null(c) for c in moved),
        cpu_used_pct_expr().first(),
    )
    totals = per_job.group_by(keys).agg(
        _sum_or_null("iops"),
        *(_sum_or_null(c) for c in moved),
        _sum_or_null("cpu_used_pct"),
    )
    reason = (
        pl.when(pl.col("cpu_used_pct").is_null())
        .then(pl.lit("no CPU figure"))
        .when(pl.col("cpu_used_pct") <= 0)
        .then(pl.lit("0% CPU reported: nothing to divide by"))
        .when(pl.col("iops").is_null())
        .then(pl.lit("no IOPS figure"))
    )
    ratio = pl.when(reason.is_null()).then(pl.col("iops") / pl.col("cpu_used_pct"))
    per_byte = [
        pl.when(reason.is_null() & (pl.col(c) > 0)).then(pl.col(c) / pl.col("cpu_used_pct")).alias("mib_s_per_cpu_pct")
        for c in moved
    ]
    return totals.with_columns(ratio.alias("iops_per_cpu_pct"), *per_byte, reason.alias("reason")).sort(keys)


def cycles_per_io_expr(clock_hz: float, iops: str = "iops", cpus_used: str = "cpus_used") -> pl.Expr:
    """CPU cycles per I/O at a given clock: CPUs used × clock / IOPS."""
    return (pl.col(cpus_used) * clock_hz / pl.col(iops)).alias("cycles_per_io")


def reconcile(
    frame: pl.DataFrame, *, reported: str, recomputed: pl.Expr, tolerance: float = RECONCILE_TOLERANCE
) -> pl.DataFrame:
    """Flag rows whose reported ratio disagrees with the same ratio recomputed from the row's inputs.

    Returns ``frame`` plus ``recomputed``, ``relative_difference``
    (recomputed / reported − 1) and ``reconciles`` (within ``tolerance``).
    """
    out = frame.with_columns(recomputed.alias("recomputed"))
    diff = pl.col("recomputed") / pl.col(reported) - 1
    return out.with_columns(diff.alias("relative_difference"), (diff.abs() <= tolerance).alias("reconciles"))


def virtual_to_native(frame: pl.DataFrame, *, value: str, environment: str, native: str, by: list[str]) -> pl.DataFrame:
    """Virtual-to-native ratio per workload, and their geometric mean (HB15 rule 4: never the mean of ratios).

    Parameters
    ----------
    frame
        One row per environment and workload with ``value`` (a rate: higher is better).
    value, environment, native
        The metric, the column naming the environment, and its native level.
    by
        The columns identifying a workload.

    Returns
    -------
    polars.DataFrame
        Per workload and non-native environment: ``native_value``, ``value`` and
        ``ratio``; plus one row per environment with ``by`` columns null holding
        the geometric mean of the ratios.

    """
    base = frame.filter(pl.col(environment) == native).select(*by, pl.col(value).alias("native_value"))
    ratios = (
        frame.filter(pl.col(environment) != native)
        .join(base, on=by, how="left")
        .with_columns((pl.col(value) / pl.col("native_value")).alias("ratio"))
        .select(environment, *by, "native_value", value, "ratio")
        .sort(environment, *by)
    )
    geomean = ratios.group_by(environment).agg(pl.col("ratio").log().mean().exp().alias("ratio")).sort(environment)
    return pl.concat([ratios, geomean], how="diagonal_relaxed")


def fraction_of_bound_expr(value: str, bound: float) -> pl.Expr:
    """Share of a declared upper bound reached (device IOPS, link or memory bandwidth), HB15 rule 11."""
    return (pl.col(value) / bound).alias("fraction_of_bound")
