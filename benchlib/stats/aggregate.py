"""Aggregation across jobs and clients, by the rules every benchlib number follows.

IOPS and bandwidth add across jobs and clients; mean latency is weighted by
I/O count; percentiles are never averaged (pool latency bins instead); rows a
tool summed itself (``is_aggregate``) are never added to the rows they sum.
"""

from __future__ import annotations

import polars as pl


def weighted_mean_expr(value: str, weight: str = "io_count") -> pl.Expr:
    """I/O-weighted mean of ``value``, ignoring rows where either is null."""
    valid = pl.col(value).is_not_null() & pl.col(weight).is_not_null()
    return (pl.col(value) * pl.col(weight)).filter(valid).sum() / pl.col(weight).filter(valid).sum()


def summarise_runs(runs: pl.DataFrame, results: pl.DataFrame) -> pl.DataFrame:
    """One row per run and direction: summed IOPS and bandwidth, I/O-weighted mean latency.

    Parameters
    ----------
    runs
        The ``runs`` table (``run_id``, ``source``, ``format``, ``tool_version``).
    results
        The ``results`` table; rows with ``is_aggregate`` are left out.

    Returns
    -------
    polars.DataFrame
        Columns ``run_id``, ``source``, ``format``, ``direction``, ``rows``,
        ``iops``, ``bandwidth_bytes_per_s``, ``lat_mean_ns`` (falling back to
        ``clat_mean_ns`` where total latency is not reported), sorted by
        source and direction.
    """
    latency = pl.coalesce(pl.col("lat_mean_ns"), pl.col("clat_mean_ns")).alias("mean_latency_ns")
    per_direction = (
        results.filter(~pl.col("is_aggregate"))
        .with_columns(latency, io_weight=pl.coalesce(pl.col("io_count"), pl.col("iops") * pl.col("runtime_ns") / 1e9))
        .group_by("run_id", "direction")
        .agg(
            pl.len().alias("rows"),
            pl.col("iops").sum(),
            pl.col("bandwidth_bytes_per_s").sum(),
            weighted_mean_expr("mean_latency_ns", "io_weight").alias("lat_mean_ns"),
        )
    )
    return (
        per_direction.join(runs.select("run_id", "source", "format", "tool_version"), on="run_id", how="left")
        .select("run_id", "source", "format", "tool_version", "direction", "rows", "iops", "bandwidth_bytes_per_s", "lat_mean_ns")
        .sort("source", "run_id", "direction")
    )
