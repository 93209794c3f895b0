"""Host-side counters (esxtop) against benchmark runs: which samples fall in which run."""

from __future__ import annotations

import polars as pl


def counters_during_runs(
    runs: pl.DataFrame, host_counters: pl.DataFrame, *, skip_first_sample: bool = True
) -> pl.DataFrame:
    """Host counter rows whose time falls inside a benchmark run's window, labelled with that run.

    Parameters
    ----------
    runs
        Benchmark runs with ``run_id``, ``start_time`` and ``duration_ns`` (runs
        without a start time are left out).
    host_counters
        esxtop rows (``time``, ``sample``, counters); rows without a time cannot be placed.
    skip_first_sample
        Leave out esxtop's sample 0, whose rate counters are always zero.

    Returns
    -------
    polars.DataFrame
        The host counter rows plus ``benchmark_run_id`` (the run whose window
        [start, start + duration] holds the sample), sorted by run, object,
        instance, counter and time. A sample inside two overlapping runs
        appears once per run.

    """
    windows = runs.filter(pl.col("start_time").is_not_null() & pl.col("duration_ns").is_not_null()).select(
        pl.col("run_id").alias("benchmark_run_id"),
        pl.col("start_time").alias("window_start"),
        (pl.col("start_time") + pl.duration(nanoseconds=pl.col("duration_ns"))).alias("window_end"),
    )
    samples = host_counters.filter(pl.col("time").is_not_null())
    if skip_first_sample:
        samples = samples.filter(pl.col("sample") > 0)
    # match the few distinct sample times to windows, then join back: no rows x runs product
    membership = (
        samples.select("time")
        .unique()
        .join(windows, how="cross")
        .filter((pl.col("time") >= pl.col("window_start")) & (pl.col("time") <= pl.col("window_end")))
        .select("time", "benchmark_run_id")
    )
    return samples.join(membership, on="time").sort(
        "benchmark_run_id", "object", "instance", "counter", "time", nulls_last=True
    )
