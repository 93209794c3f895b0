"""Aggregation across jobs and clients, by the rules every benchlib number follows.

IOPS and bandwidth add across jobs and clients; mean latency is weighted by
I/O count; percentiles are never averaged (pool latency bins instead); rows a
tool summed itself (``is_aggregate``) are never added to the rows they sum.
"""

from __future__ import annotations

from collections.abc import Collection

import polars as pl

from benchlib.schema import run_unit_expr


def weighted_mean_expr(value: str, weight: str = "io_count") -> pl.Expr:
    """I/O-weighted mean of ``value``, ignoring rows where either is null (null when no row has both)."""
    valid = pl.col(value).is_not_null() & pl.col(weight).is_not_null()
    weights = pl.col(weight).filter(valid).sum()
    return pl.when(weights > 0).then((pl.col(value) * pl.col(weight)).filter(valid).sum() / weights)


def _sum_or_null(column: str) -> pl.Expr:
    """Return the sum, or null when no row reports the value (a sum of nothing is not zero IOPS)."""
    return pl.when(pl.col(column).is_not_null().any()).then(pl.col(column).sum()).otherwise(None).alias(column)


#: Columns that add across a run's jobs, directions and hosts; every other value is a mean.
ADDITIVE = ("iops", "iops_or_derived", "bandwidth_mib_s", "bandwidth_bytes_per_s", "io_count", "io_bytes")


def total_expr(value: str, columns: Collection[str] = ()) -> pl.Expr:
    """Return the total of ``value`` over a group of rows (a run's jobs, directions and hosts).

    Rates and counts (:data:`ADDITIVE`) add, and are null when no row has one (a
    sum of nothing is not zero); anything else (a latency) is the mean weighted
    by each row's I/O count, else by its IOPS (a published table's VMs ran for the
    same time), else by its I/Os per second from bandwidth over block size where the rows' ``columns``
    have both (a published table of MiB/s per VM), else equally; null, never NaN, when no row has a value
    or the weights add to nothing.
    """
    if value in ADDITIVE:
        return _sum_or_null(value)
    rate = (
        [pl.col("bandwidth_bytes_per_s") / pl.col("block_size_bytes")]
        if {"bandwidth_bytes_per_s", "block_size_bytes"} <= set(columns)
        else []
    )
    weight = pl.coalesce(pl.col("io_count"), pl.col("iops"), *rate, pl.lit(1))
    valid = pl.col(value).is_not_null() & ~pl.col(value).is_nan()
    weights = weight.filter(valid).sum()
    return pl.when(weights > 0).then((pl.col(value) * weight).filter(valid).sum() / weights).alias(value)


def medians(frame: pl.DataFrame, values: list[str], by: list[str]) -> pl.DataFrame:
    """Return the median of each of ``values`` per group of ``by``, sorted by the groups.

    The median is over the rows of a group: runs, or runs and VMs.
    """
    return frame.group_by(by).agg(pl.col(v).median() for v in values).sort(by)


def median_of_run_totals(frame: pl.DataFrame, value: str, by: list[str], run: str = "run_id") -> pl.DataFrame:
    """Return each run's total of ``value`` (:func:`total_expr`), then its median per group of ``by``.

    Columns: ``by``, ``value`` and ``runs`` (how many runs the median is over), sorted by the groups.
    """
    per_run = frame.group_by(run, *by).agg(total_expr(value, frame.columns))
    return per_run.group_by(*by).agg(pl.col(value).median(), pl.len().alias("runs")).sort(*by)


def summarise_runs(runs: pl.DataFrame, results: pl.DataFrame) -> pl.DataFrame:
    """One row per run, phase and direction: summed IOPS and bandwidth, I/O-weighted mean latency.

    Parameters
    ----------
    runs
        The ``runs`` table (``run_id``, ``source``, ``format``, ``tool_version``).
    results
        The ``results`` table; rows with ``is_aggregate`` are left out.

    Returns
    -------
    polars.DataFrame
        Columns ``run`` (:func:`benchlib.schema.run_unit_expr`: the hosts of one run are added, never
        counted as runs), ``source`` (the first of the run's files), ``format``, ``phase`` (fio's group:
        stonewalled groups ran one after another and are never added together), ``direction``, ``rows``,
        ``iops``, ``bandwidth_bytes_per_s``, ``lat_mean_ns`` (falling back to
        ``clat_mean_ns`` where total latency is not reported), sorted by
        source and direction.

    """
    latency = pl.coalesce(pl.col("lat_mean_ns"), pl.col("clat_mean_ns")).alias("mean_latency_ns")
    grouping = [c for c in ("run_group", "document_index") if c in runs.columns and c not in results.columns]
    if grouping:  # per-VM files of one run share a run_group
        results = results.join(runs.select("run_id", *grouping), on="run_id", how="left")
    per_direction = (
        results.filter(~pl.col("is_aggregate"))
        .with_columns(
            run_unit_expr(results.columns),
            latency,
            # I/Os where known, else IOPS (a run without its length weighs its hosts by their rates)
            io_weight=pl.coalesce(pl.col("io_count"), pl.col("iops") * pl.col("runtime_ns") / 1e9, pl.col("iops")),
        )
        .group_by("run_unit", "group_id", "direction")
        .agg(
            pl.len().alias("rows"),
            _sum_or_null("iops"),
            _sum_or_null("bandwidth_bytes_per_s"),
            weighted_mean_expr("mean_latency_ns", "io_weight").alias("lat_mean_ns"),
        )
    )
    sources = (
        runs.filter(~pl.col("is_aggregate"))
        .with_columns(run_unit_expr(runs.columns))
        .group_by("run_unit")
        .agg(pl.col("source").min(), pl.col("format").first(), pl.col("tool_version").first())
    )
    return (
        per_direction.join(sources, on="run_unit", how="left")
        .select(
            pl.col("run_unit").alias("run"),
            "source",
            "format",
            "tool_version",
            pl.col("group_id").alias("phase"),
            "direction",
            "rows",
            "iops",
            "bandwidth_bytes_per_s",
            "lat_mean_ns",
        )
        .sort("source", "run", "phase", "direction", nulls_last=True)
    )


def pooled_percentiles(bins: pl.DataFrame, percentiles: list[float], by: list[str] | None = None) -> pl.DataFrame:
    """Percentiles of latency pooled over every row of ``latency_bins`` in each ``by`` group.

    Bins of all jobs, clients and runs in a group are summed per bucket (as
    fio's group_reporting does) and each percentile is the value of the first
    bucket whose cumulative count reaches ``total × p / 100``, exactly as fio
    computes its own. Percentiles are never averaged.

    Returns one row per group and percentile: ``percentile``, ``value_ns``, ``count``.
    """
    by = by or []
    summed = bins.group_by([*by, "bin_index"]).agg(pl.col("bin_value_ns").first(), pl.col("count").sum())
    ordered = summed.sort([*by, "bin_index"]).with_columns(
        pl.col("count").cum_sum().over(by or pl.lit(0)).alias("cumulative"),
        pl.col("count").sum().over(by or pl.lit(0)).alias("total"),
    )
    targets = pl.DataFrame({"percentile": [float(p) for p in percentiles]})
    crossed = ordered.join(targets, how="cross").filter(
        pl.col("cumulative") >= pl.col("total") * pl.col("percentile") / 100
    )
    return (
        crossed.group_by([*by, "percentile"])
        .agg(
            pl.col("bin_value_ns").sort_by("bin_index").first().alias("value_ns"),
            pl.col("total").first().alias("count"),
        )
        .sort([*by, "percentile"])
    )


def exceedance(bins: pl.DataFrame, by: list[str] | None = None) -> pl.DataFrame:
    """Return the share of I/Os slower than each latency, per ``by`` group (an exceedance curve).

    Bins are pooled per group as in :func:`pooled_percentiles`. Returns ``by``, ``value_ns`` (a
    bucket's latency), ``slower`` (the fraction of the group's I/Os in later buckets) and
    ``slower_ios`` (how many I/Os that is), one row per non-empty bucket, sorted.
    """
    by = by or []
    summed = bins.group_by([*by, "bin_index"]).agg(pl.col("bin_value_ns").first(), pl.col("count").sum())
    ordered = summed.filter(pl.col("count") > 0).sort([*by, "bin_index"])
    group = by or pl.lit(0)
    total = pl.col("count").sum().over(group)
    return ordered.select(
        *by,
        pl.col("bin_value_ns").alias("value_ns"),
        ((total - pl.col("count").cum_sum().over(group)) / total).alias("slower"),
        (total - pl.col("count").cum_sum().over(group)).alias("slower_ios"),
    )


def rate_over_runs(results: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """IOPS and bandwidth over several runs as total I/Os (bytes) over total time, per group.

    Sums per run and phase first (jobs and hosts of one phase add: a run's hosts are one run,
    :func:`benchlib.schema.run_unit_expr`; fio groups that ran one after
    another, stonewalled, are phases and count their own runtime), then divides the groups' total
    I/Os and bytes by their total runtime, so long runs weigh more than short
    ones, as a rate must (METHODS.md R4).
    """
    if "group_id" not in results.columns:  # a table that knows no groups: one phase per run
        results = results.with_columns(pl.lit(None, dtype=pl.Int32).alias("group_id"))
    per_run = (
        results.filter(~pl.col("is_aggregate"))
        .group_by([*by, run_unit_expr(results.columns), "group_id"])
        .agg(pl.col("io_count").sum(), pl.col("io_bytes").sum(), pl.col("runtime_ns").max())
    )
    return (
        per_run.group_by(by)
        .agg(
            pl.col("run_unit").n_unique().alias("runs"),
            (pl.col("io_count").sum() / (pl.col("runtime_ns").sum() / 1e9)).alias("iops"),
            (pl.col("io_bytes").sum() / (pl.col("runtime_ns").sum() / 1e9)).alias("bandwidth_bytes_per_s"),
        )
        .sort(by)
    )
