"""Host-side counters (esxtop) against benchmark runs: which samples fall in which run."""

from __future__ import annotations

import polars as pl


def counters_during_runs(
    runs: pl.DataFrame, host_counters: pl.DataFrame, *, skip_first_sample: bool = True
) -> pl.DataFrame:
    """Host counter rows whose sample interval lies inside a benchmark run's window, labelled with that run.

    An esxtop sample's rates are the averages since the capture's previous sample: it belongs to a run
    when that interval, from the previous sample's time to its own, lies in the run's window (a sample
    just after a run begins averages time before it too, and is left out).

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
        [start, start + duration] holds the sample's interval), sorted by run, object,
        instance, counter and time. A sample inside two overlapping runs
        appears once per run.

    """
    windows = runs.filter(pl.col("start_time").is_not_null() & pl.col("duration_ns").is_not_null()).select(
        pl.col("run_id").alias("benchmark_run_id"),
        pl.col("start_time").alias("window_start"),
        (pl.col("start_time") + pl.duration(nanoseconds=pl.col("duration_ns"))).alias("window_end"),
    )
    samples = host_counters.filter(pl.col("time").is_not_null())
    # a sample's rates average the interval since the capture's previous sample: that whole interval
    # must lie in the run, or the sample carries time before or after it
    capture = [c for c in ("run_id",) if c in samples.columns]
    times = samples.select(*capture, "sample", "time").unique().sort(*capture, "sample")
    times = times.with_columns(pl.col("time").shift(1).over(capture or pl.lit(0)).alias("since"))
    if skip_first_sample:
        times = times.filter(pl.col("sample") > 0)
    # match the few distinct samples to windows, then join back: no rows x runs product
    membership = (
        times.join(windows, how="cross")
        .filter((pl.coalesce("since", "time") >= pl.col("window_start")) & (pl.col("time") <= pl.col("window_end")))
        .select(*capture, "sample", "benchmark_run_id")
    )
    order = ["benchmark_run_id", *(c for c in ("object", "instance", "counter", "time") if c in samples.columns)]
    return samples.join(membership, on=[*capture, "sample"]).sort(*order, nulls_last=True)


#: esxtop's object and counter for the CPU a VM's worlds used (100% is one core busy all the time)
VM_CPU = ("Group Cpu", "% Used")


def vm_cpu_during_runs(runs: pl.DataFrame, host_counters: pl.DataFrame) -> pl.DataFrame:
    """Return the host CPU each VM's worlds used in each benchmark run (esxtop ``Group Cpu(<id>:<vm>)``, ``% Used``).

    A VM's world group is named after the VM, so a run's member (``vm``) finds its own group. Samples
    are esxtop's, inside the run's window (:func:`counters_during_runs`, sample 0 left out); each is one
    equal interval, so the plain mean over them is the mean use over the run.

    Returns
    -------
    polars.DataFrame
        ``benchmark_run_id``, ``vm``, ``host_cpu_used_pct`` (100 = one core) and ``samples``.

    """
    obj, counter = VM_CPU
    groups = host_counters.filter((pl.col("object") == obj) & (pl.col("counter") == counter))
    during = counters_during_runs(runs, groups)
    return (
        during.with_columns(pl.col("instance").str.extract(r"^[^:]*:(.*)$", 1).alias("vm"))  # "<group id>:<vm>"
        .filter(pl.col("vm").is_not_null() & pl.col("value").is_not_null())
        .group_by("benchmark_run_id", "vm")
        .agg(pl.col("value").mean().alias("host_cpu_used_pct"), pl.len().alias("samples"))
        .sort("benchmark_run_id", "vm")
    )
