"""Queueing checks: Little's law against the configured queue depth (METHODS.md D1)."""

from __future__ import annotations

import polars as pl

#: Below this fraction of the configured concurrency, a job was not queue-bound.
RATE_BOUND_FRACTION = 0.8


def outstanding_ios_expr(iops: str = "iops", latency_ns: str = "lat_mean_ns") -> pl.Expr:
    """Little's law: mean outstanding I/Os = IOPS × mean latency (s)."""
    return (pl.col(iops) * pl.col(latency_ns) / 1e9).alias("outstanding_ios")


def queue_check(frame: pl.DataFrame, *, iops: str = "iops", latency_ns: str = "lat_mean_ns") -> pl.DataFrame:
    """Add Little's-law outstanding I/Os and compare them with ``iodepth × numjobs``.

    Parameters
    ----------
    frame
        Rows with IOPS, mean latency (ns), and ``iodepth`` and ``numjobs``
        (either may be null when the source does not say).
    iops, latency_ns
        Column names of the rate and the mean latency.

    Returns
    -------
    polars.DataFrame
        ``frame`` plus ``outstanding_ios``, ``configured_depth`` and
        ``queue_state``: ``"rate-bound"`` (under 80% of the configured depth:
        submission-, CPU- or throttle-bound), ``"queue-full"`` (at or above it:
        the device queue sets latency), or null when the depth is unknown.
    """
    configured = (pl.col("iodepth") * pl.col("numjobs")).cast(pl.Float64).alias("configured_depth")
    out = frame.with_columns(outstanding_ios_expr(iops, latency_ns), configured)
    ratio = pl.col("outstanding_ios") / pl.col("configured_depth")
    return out.with_columns(
        pl.when(pl.col("configured_depth").is_null())
        .then(None)
        .when(ratio < RATE_BOUND_FRACTION)
        .then(pl.lit("rate-bound"))
        .otherwise(pl.lit("queue-full"))
        .alias("queue_state")
    )
