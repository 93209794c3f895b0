"""Queueing checks: Little's law against the configured queue depth (METHODS.md D1)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import polars as pl
from kneed import KneeLocator

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


#: A sweep needs at least this many points for a knee (METHODS.md D3).
MIN_SWEEP_POINTS = 5
#: A drop of more than this fraction after the peak is "peak then drop", not noise.
PEAK_DROP_FRACTION = 0.10


@dataclass(frozen=True)
class SweepShape:
    """What an iodepth (or numjobs) sweep shows: its knee, its peak, and whether it falls after the peak."""

    knee_depth: float | None
    knee_iops: float | None
    knee_latency_ns: float | None
    peak_depth: float
    peak_iops: float
    drops_after_peak: bool
    drop_fraction: float
    note: str


def sweep_shape(depths: list[float], iops: list[float], latency_ns: list[float] | None = None) -> SweepShape:
    """Knee (Kneedle on log2 depth, S = 1), peak and "peak then drop" of one sweep.

    Parameters
    ----------
    depths
        The swept values (iodepth or numjobs), one per point, any order.
    iops
        The median IOPS at each depth.
    latency_ns
        Optional mean latency at each depth; reported at the knee.

    Returns
    -------
    SweepShape
        ``knee_*`` are None when the sweep has fewer than 5 points or no knee;
        ``drops_after_peak`` when the last point is more than 10% below the peak.

    """
    order = sorted(range(len(depths)), key=lambda i: depths[i])
    x = [depths[i] for i in order]
    y = [iops[i] for i in order]
    lat = [latency_ns[i] for i in order] if latency_ns is not None else None
    peak = max(range(len(y)), key=lambda i: y[i])
    drop = 1 - y[-1] / y[peak]
    drops = peak < len(y) - 1 and drop > PEAK_DROP_FRACTION
    knee = None
    if len(x) >= MIN_SWEEP_POINTS:
        located = KneeLocator([math.log2(v) for v in x], y, S=1.0, curve="concave", direction="increasing")
        knee = None if located.knee is None else round(2**located.knee)
    note = "no knee" if knee is None else f"knee at {knee}"
    if len(x) < MIN_SWEEP_POINTS:
        note = f"{len(x)} points: a knee needs at least {MIN_SWEEP_POINTS}"
    if drops:
        note += f"; peak at {x[peak]:g} then {100 * drop:.0f}% lower at {x[-1]:g}"
    at = x.index(knee) if knee in x else None
    return SweepShape(
        knee_depth=knee,
        knee_iops=None if at is None else y[at],
        knee_latency_ns=None if at is None or lat is None else lat[at],
        peak_depth=x[peak],
        peak_iops=y[peak],
        drops_after_peak=drops,
        drop_fraction=drop,
        note=note,
    )


def where_ios_wait(
    guest_latency_ms: float, gavg_ms: float, kavg_ms: float, qued: float, davg_ms: float, *, davg_high_ms: float = 2.0
) -> list[str]:
    """Where I/Os queue, by the rules of BRIEF study 3 (esxtop against the guest's latency).

    Guest latency above GAVG means queuing in the guest (its per-disk or adapter
    queue); KAVG > 0 or QUED > 0 means queuing in the ESXi kernel (device queue
    full); a high DAVG means the fabric or the array. Returns every place that
    applies, or ``["nowhere: latency is the device's own"]``.
    """
    places = []
    if guest_latency_ms > gavg_ms * 1.1:
        places.append("guest")
    if kavg_ms > 0.1 or qued > 0:
        places.append("kernel")
    if davg_ms > davg_high_ms:
        places.append("device")
    return places or ["nowhere: latency is the device's own"]


def device_latency_means(queue: pl.DataFrame) -> pl.DataFrame:
    """Per host and device: KAVG, DAVG, GAVG (ms) weighted by commands per second, and the queues.

    From :func:`benchlib.sources.esxtop.device_queue_view`. esxtop's latencies are per command, so a
    sample's mean counts as many times as it had commands: an idle sample (0 commands) says nothing
    about latency and weighs nothing (a plain mean would average its 0 in). esxtop's first sample
    (``sample`` 0) is always zero and is left out. ``ACTV``, ``QUED`` and ``DQLEN`` are plain means
    over the samples (a queue length averaged over equal intervals). ``commands`` is the mean
    commands per second; a device without any command has no latency (null), never 0.
    """
    data = queue.filter(pl.col("sample") > 0) if "sample" in queue.columns else queue
    weight = pl.col("CMDS_per_s").fill_null(0) if "CMDS_per_s" in data.columns else pl.lit(1.0)

    def weighted(column: str) -> pl.Expr:
        if column not in data.columns:
            return pl.lit(None, dtype=pl.Float64).alias(column.removesuffix("_ms"))
        valid = pl.col(column).is_not_null() & (weight > 0)
        total = weight.filter(valid).sum()
        mean = (pl.col(column) * weight).filter(valid).sum() / total
        return pl.when(total > 0).then(mean).alias(column.removesuffix("_ms"))

    def plain(column: str) -> pl.Expr:
        return pl.col(column).mean() if column in data.columns else pl.lit(None, dtype=pl.Float64).alias(column)

    return (
        data.group_by("host", "device")
        .agg(
            weighted("KAVG_ms"),
            weighted("DAVG_ms"),
            weighted("GAVG_ms"),
            plain("ACTV"),
            plain("QUED"),
            plain("DQLEN"),
            (pl.col("CMDS_per_s").mean() if "CMDS_per_s" in data.columns else pl.lit(None, dtype=pl.Float64)).alias(
                "commands"
            ),
            pl.len().alias("samples"),
        )
        .sort("host", "device")
    )


def device_latency_split(runs: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Return where latency was spent per group of ``by``, from the kernel's disk statistics (fio's ``disk_util``).

    ``runs`` has one row per run and host: ``app_latency_ms`` (what the application
    saw), ``runtime_ns`` and the counters ``read_ios``, ``write_ios``,
    ``read_ticks_ms``, ``write_ticks_ms``, ``in_queue_ms``, ``util_pct`` and
    ``instance``. Per run: the block layer's time per I/O (``device_await_ms``,
    iostat's await), the mean number of I/Os in the device queue
    (``device_queue``, iostat's aqu-sz) and ``device_ios_per_s``; then the
    median per group, and ``above_device_ms``: latency spent above the block
    layer (in the guest: file system, page cache, fio's own queue).
    """
    ios = pl.col("read_ios") + pl.col("write_ios")
    view = runs.with_columns(
        ((pl.col("read_ticks_ms") + pl.col("write_ticks_ms")) / ios).alias("device_await_ms"),
        (pl.col("in_queue_ms") / (pl.col("runtime_ns") / 1e6)).alias("device_queue"),
        (ios / (pl.col("runtime_ns") / 1e9)).alias("device_ios_per_s"),
    )
    medians = view.group_by(*by).agg(
        pl.col("app_latency_ms").median(),
        pl.col("device_await_ms").median(),
        pl.col("device_ios_per_s").median(),
        pl.col("device_queue").median(),
        pl.col("util_pct").median(),
        pl.col("instance").first().alias("device"),
        pl.len().alias("host_runs"),
    )
    above = (pl.col("app_latency_ms") - pl.col("device_await_ms")).clip(lower_bound=0).alias("above_device_ms")
    return medians.with_columns(above).sort(by)
