"""Queueing checks: Little's law against the configured queue depth (METHODS.md D1)."""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

import polars as pl

#: Below this fraction of the configured concurrency, a job was not queue-bound.
RATE_BOUND_FRACTION = 0.8
#: Above this multiple of the configured concurrency, the numbers cannot all be right.
IMPOSSIBLE_FRACTION = 1.2
#: I/O engines that submit one I/O at a time per job, whatever ``iodepth`` says (fio's HOWTO).
SYNC_ENGINES = frozenset({"sync", "psync", "vsync", "pvsync", "pvsync2", "mmap", "filecreate", "filestat"})
#: What a queue state means.
QUEUE_STATES = {
    "rate-bound": "under 80% of the configured concurrency: the job held fewer I/Os than it could "
    "(a rate cap, think time, the CPU or submission)",
    "queue-full": "within 20% of the configured concurrency: fio kept its queue full; whether the device "
    "saturated needs a sweep (flat IOPS, rising latency), not this check",
    "impossible": "over 120% of the configured concurrency: an aggregate row, a unit slip (ms for ns) or a "
    "wrong depth; check the row before using it",
}


def outstanding_ios_expr(iops: str = "iops", latency_ns: str = "lat_mean_ns") -> pl.Expr:
    """Little's law: mean outstanding I/Os = IOPS × mean latency (s)."""
    return (pl.col(iops) * pl.col(latency_ns) / 1e9).alias("outstanding_ios")


def configured_depth_expr(columns: Collection[str]) -> pl.Expr:
    """Return the concurrency a row's jobs were set to: per job ``iodepth`` (1 for a sync engine), times jobs.

    A row stands for ``jobs`` jobs (``numjobs`` for a group_reporting row, 1 for a per-job row);
    a table that says neither counts ``numjobs``, and one with neither column counts one job.
    ``columns``: the frame's columns (``ioengine``, ``jobs`` and ``numjobs`` are used when present).
    """
    # the job's own engine: "ioengine_job" where a study factor took the name "ioengine" (claims_frame)
    engine = next((c for c in ("ioengine_job", "ioengine") if c in columns), None)
    # a published table's columns are text ("32"): read as numbers, unknown where they are not
    iodepth = pl.col("iodepth").cast(pl.Float64, strict=False)
    depth = (
        pl.when(pl.col(engine).is_in(list(SYNC_ENGINES))).then(pl.lit(1.0)).otherwise(iodepth) if engine else iodepth
    )
    counts = (pl.col(c).cast(pl.Float64, strict=False) for c in ("jobs", "numjobs") if c in columns)
    jobs = pl.coalesce(*counts, pl.lit(1.0))
    return (depth * jobs).alias("configured_depth")


def queue_check(
    frame: pl.DataFrame, *, iops: str = "iops", latency_ns: str = "lat_mean_ns", job: list[str] | None = None
) -> pl.DataFrame:
    """Little's-law outstanding I/Os per job against the concurrency it was set to (METHODS.md D1).

    Parameters
    ----------
    frame
        Rows with IOPS, mean latency (ns), ``iodepth``, and where known ``numjobs``, ``jobs`` and
        ``ioengine``.
    iops, latency_ns
        Column names of the rate and the mean latency.
    job
        The columns naming one job (e.g. ``run_id``, ``client``, ``job_index``): its directions are
        merged first (a 70/30 job holds its reads and writes in one queue). Default: those columns
        when the frame has them and a ``direction`` column, else every row on its own.

    Returns
    -------
    polars.DataFrame
        One row per job (or per row): ``outstanding_ios`` (summed over directions),
        ``configured_depth`` (:func:`configured_depth_expr`) and ``queue_state``: ``"rate-bound"``,
        ``"queue-full"`` or ``"impossible"`` (see :data:`QUEUE_STATES`), or null when the depth is unknown.

    """
    identity = ["run_id", "client", "job_index"]
    if job is None and "direction" in frame.columns and all(c in frame.columns for c in identity):
        job = identity
    data = frame.with_columns(outstanding_ios_expr(iops, latency_ns), configured_depth_expr(frame.columns))
    if job:
        keep = [c for c in data.columns if c not in (*job, "outstanding_ios", "direction", iops, latency_ns)]
        data = data.group_by(job, maintain_order=True).agg(
            pl.col("outstanding_ios").sum(),
            pl.col(iops).sum(),
            *(pl.col(c).first() for c in keep),
        )
    return data.with_columns(queue_state_expr("outstanding_ios", "configured_depth"))


def queue_state_expr(outstanding: str, configured: str) -> pl.Expr:
    """Return :data:`QUEUE_STATES`' word for Little's-law outstanding I/Os against the configured concurrency.

    Null when either is unknown.
    """
    ratio = pl.col(outstanding) / pl.col(configured)
    return (
        pl.when(pl.col(configured).is_null() | pl.col(outstanding).is_null())
        .then(None)
        .when(ratio < RATE_BOUND_FRACTION)
        .then(pl.lit("rate-bound"))
        .when(ratio <= IMPOSSIBLE_FRACTION)
        .then(pl.lit("queue-full"))
        .otherwise(pl.lit("impossible"))
        .alias("queue_state")
    )


#: A sweep needs at least this many points to say anything of its shape.
MIN_SWEEP_POINTS = 3
#: Kneedle needs at least this many points (METHODS.md D3); the plateau rule works from 3.
MIN_KNEEDLE_POINTS = 5
#: A drop of more than this fraction below the peak, at any later depth, is "peak then drop", not noise.
PEAK_DROP_FRACTION = 0.10
#: No depth past the knee beats its IOPS by this share or more: more depth adds nothing worth its latency.
FLAT_GAIN = 0.10
#: The latency knee: the first depth whose next step multiplies latency by at least this much per doubling
#: of depth (a full queue: IOPS flat, so by Little's law latency grows with depth).
LATENCY_GROWTH = 1.8


@dataclass(frozen=True)
class SweepShape:
    """What an iodepth (or numjobs) sweep shows: its knee, its peak, and what happens after them."""

    knee_depth: float | None
    knee_iops: float | None
    knee_latency_ns: float | None
    peak_depth: float
    peak_iops: float
    drops_after_peak: bool
    drop_fraction: float
    #: what the sweep shows, as a code: "peak then drop", "saturated", "knee", or why there is no knee:
    #: "no plateau", "too few for Kneedle", "no knee (Kneedle)" (:mod:`benchlib.words.sweeps` says it)
    kind: str
    #: past the knee IOPS stay within 10% of the knee's while latency keeps rising
    saturated: bool = False
    #: the first depth after which latency grows about as fast as depth (None when it never does)
    latency_knee_depth: float | None = None
    #: Little's-law outstanding I/Os at the knee (IOPS × latency), beside the configured depth
    knee_outstanding: float | None = None
    method: str = "plateau"
    #: the depth of the lowest point after the peak, where the sweep drops after it
    drop_depth: float | None = None
    #: the points the sweep had, and (no plateau) the IOPS gained per doubling at its largest depth, that depth
    points: int = 0
    gain_per_doubling: float | None = None
    largest_depth: float | None = None


def sweep_shape(
    depths: list[float], iops: list[float], latency_ns: list[float] | None = None, *, method: str = "plateau"
) -> SweepShape:
    """Knee, peak, saturation and "peak then drop" of one sweep, from 3 points up.

    Parameters
    ----------
    depths
        The swept values (iodepth or numjobs), one per point, any order.
    iops
        The median IOPS at each depth.
    latency_ns
        Optional mean latency at each depth: gives the latency knee, saturation and the
        outstanding I/Os at the knee.
    method
        ``"plateau"`` (default): the knee is the smallest depth that no deeper depth beats by
        10% or more IOPS (so it already has over 90% of the sweep's peak). A dip at one depth
        cannot move it: each deeper depth is measured against the knee, not against its
        neighbour (a dip of 5% at 32 then 10% "gained" at 64 is noise around a plateau, not a
        second rise). A sweep whose largest depth still beats every smaller one by 10% has no
        knee and says so. ``"kneedle"``: Kneedle on log2 depth
        (S = 1), which needs 5 points.

    Returns
    -------
    SweepShape
        ``drops_after_peak`` when any depth after the peak is more than 10% below it
        (``drop_fraction`` is the largest such drop); ``saturated`` when there are depths past the
        knee (all within 10% of its IOPS, by its definition), no drop, and latency rises; ``kind`` names the
        shape as a code (:func:`benchlib.words.sweeps.shape_note` says it in words).

    """
    if method not in ("plateau", "kneedle"):
        raise ValueError(f"method must be 'plateau' or 'kneedle', not {method!r}")
    order = sorted(range(len(depths)), key=lambda i: depths[i])
    x = [float(depths[i]) for i in order]
    y = [float(iops[i]) for i in order]
    lat = [float(latency_ns[i]) for i in order] if latency_ns is not None else None
    if len(x) < MIN_SWEEP_POINTS:
        raise ValueError(f"a sweep needs at least {MIN_SWEEP_POINTS} depths to have a shape, not {len(x)}")
    peak = max(range(len(y)), key=lambda i: y[i])
    after = y[peak + 1 :]
    drop = 1 - min(after) / y[peak] if after else 0.0
    drops = drop > PEAK_DROP_FRACTION
    knee, why = _knee(x, y, method)
    at = x.index(knee) if knee is not None else None
    latency_knee = _latency_knee(x, lat) if lat is not None else None
    saturated = at is not None and lat is not None and at < len(x) - 1 and not drops and lat[-1] > lat[at]
    kind = "peak then drop" if drops else "saturated" if saturated else "knee" if knee is not None else why
    return SweepShape(
        knee_depth=knee,
        knee_iops=None if at is None else y[at],
        knee_latency_ns=None if at is None or lat is None else lat[at],
        peak_depth=x[peak],
        peak_iops=y[peak],
        drops_after_peak=drops,
        drop_fraction=drop,
        kind=kind,
        saturated=saturated,
        latency_knee_depth=latency_knee,
        knee_outstanding=None if at is None or lat is None else y[at] * lat[at] / 1e9,
        method=method,
        drop_depth=x[peak + 1 + after.index(min(after))] if drops else None,
        points=len(x),
        gain_per_doubling=_gain_per_doubling(x, y, len(x) - 2) if kind == "no plateau" else None,
        largest_depth=x[-1],
    )


def _knee(x: list[float], y: list[float], method: str) -> tuple[float | None, str]:
    """Return the knee depth, or None and why there is none (a :attr:`SweepShape.kind` code)."""
    if method == "kneedle":
        if len(x) < MIN_KNEEDLE_POINTS:
            return None, "too few for Kneedle"
        from kneed import KneeLocator  # imported here: it loads scipy.signal (a second per notebook kernel)

        located = KneeLocator([math.log2(v) for v in x], y, S=1.0, curve="concave", direction="increasing")
        if located.knee is None:
            return None, "no knee (Kneedle)"
        return min(x, key=lambda v: abs(math.log2(v) - located.knee)), ""
    for i in range(len(x) - 1):
        if max(y[i + 1 :]) < (1 + FLAT_GAIN) * y[i]:
            return x[i], ""
    return None, "no plateau"


def _gain_per_doubling(x: list[float], y: list[float], i: int) -> float:
    """IOPS gained from point i to i + 1, per doubling of depth (0 when depth does not grow)."""
    doublings = math.log2(x[i + 1] / x[i]) if x[i] > 0 and x[i + 1] > x[i] else 0
    return (y[i + 1] / y[i]) ** (1 / doublings) - 1 if doublings and y[i] > 0 else 0.0


def _latency_knee(x: list[float], lat: list[float]) -> float | None:
    """Return the first depth after which latency grows at least 1.8x per doubling of depth."""
    for i in range(len(x) - 1):
        doublings = math.log2(x[i + 1] / x[i]) if x[i] > 0 and x[i + 1] > x[i] else 0
        if doublings and lat[i] > 0 and (lat[i + 1] / lat[i]) ** (1 / doublings) >= LATENCY_GROWTH:
            return x[i]
    return None


def where_ios_wait(
    guest_latency_ms: float, gavg_ms: float, kavg_ms: float, qued: float, davg_ms: float, *, davg_high_ms: float = 2.0
) -> list[str]:
    """Where I/Os queue, by the rules of BRIEF study 3 (esxtop against the guest's latency).

    Guest latency above GAVG means queuing in the guest (its per-disk or adapter
    queue); KAVG > 0 or QUED > 0 means queuing in the ESXi kernel (device queue
    full); a high DAVG means the fabric or the array. Returns every place that
    applies (codes), or ``["nowhere"]``: the latency is the device's own.
    """
    places = []
    if guest_latency_ms > gavg_ms * 1.1:
        places.append("guest")
    if kavg_ms > 0.1 or qued > 0:
        places.append("kernel")
    if davg_ms > davg_high_ms:
        places.append("device")
    return places or ["nowhere"]


def device_latency_means(queue: pl.DataFrame, by: Collection[str] = ()) -> pl.DataFrame:
    """Per host and device (and group of ``by``): KAVG, DAVG, GAVG (ms) weighted by commands per second, and the queues.

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
        data.group_by(*by, "host", "device")
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
        .sort(*by, "host", "device")
    )


def adapter_queue_use(view: pl.DataFrame, by: Collection[str] = ()) -> pl.DataFrame:
    """Per host and adapter (and group of ``by``): its queue depth (AQLEN) beside the commands it held.

    From :func:`benchlib.sources.esxtop.adapter_queue_view`. In each sample, the commands at the adapter
    (issued to its driver, not yet done) are commands per second × DAVG, and the commands the kernel held
    back are commands per second × KAVG; ``at_adapter`` and ``in_kernel`` are their means over the samples,
    ``peak_at_adapter`` the largest sample. ``used_pct`` and ``peak_used_pct`` set them against AQLEN.
    esxtop's first sample (``sample`` 0) is always zero and is left out; a sample without a rate or a
    latency says nothing (null), so an adapter with none has no use (null), never 0.
    """
    data = view.filter(pl.col("sample") > 0)
    rate = pl.col("CMDS_per_s") if "CMDS_per_s" in data.columns else pl.lit(None, dtype=pl.Float64)

    def held(latency: str) -> pl.Expr:
        return rate * pl.col(latency) / 1000 if latency in data.columns else pl.lit(None, dtype=pl.Float64)

    return (
        data.with_columns(held("DAVG_ms").alias("_adapter"), held("KAVG_ms").alias("_kernel"), rate.alias("_rate"))
        .group_by(*by, "host", "adapter")
        .agg(
            pl.col("AQLEN").max(),
            pl.col("_rate").mean().alias("commands"),
            pl.col("_adapter").mean().alias("at_adapter"),
            pl.col("_adapter").max().alias("peak_at_adapter"),
            pl.col("_kernel").mean().alias("in_kernel"),
            pl.len().alias("samples"),
        )
        .with_columns(
            (100 * pl.col("at_adapter") / pl.col("AQLEN")).alias("used_pct"),
            (100 * pl.col("peak_at_adapter") / pl.col("AQLEN")).alias("peak_used_pct"),
        )
        .sort(*by, "host", "adapter")
    )


#: fio's latency this far below the block layer's await means the page cache answered (buffered I/O)
CACHED_BELOW = 0.9
#: a busy share under this part of what the queue needs is not the device's: other I/O on the disk can
#: raise the most requests in flight, so only a share far below the bound is called wrong
UNDERCOUNT_BELOW = 0.5
#: a busy share over this multiple of the mean queue is not the device's either: a device busy x of the
#: time holds at least x requests on average (one or more whenever busy), so util <= 100 x aqu-sz; the
#: kernel's io_ticks, counted in whole clock ticks, overcounts sparse I/O (a rate-capped job's)
OVERCOUNT_ABOVE = 1.1


def device_latency_split(runs: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Return where latency was spent per group of ``by``, from the kernel's disk statistics (fio's ``disk_util``).

    ``runs`` has one row per run and host: ``app_latency_ms`` (what the application
    saw), ``runtime_ns`` and the counters ``read_ios``, ``write_ios``,
    ``read_ticks_ms``, ``write_ticks_ms``, ``in_queue_ms``, ``util_pct`` and
    ``instance``; optionally ``disk_span_ns``, the time the counters cover (fio's ramp and runtime:
    without it ``runtime_ns``, and a ramp's I/Os would inflate the rates by its share);
    ``configured_depth``, the I/Os the run's jobs kept in flight at most,
    ``run_iops``, their rate (all its hosts), and ``direct_io``, whether the run's jobs all bypassed the page
    cache (fio's direct=1). Per run: the block layer's time per I/O (``device_await_ms``,
    iostat's await), the mean number of I/Os in the device queue
    (``device_queue``, iostat's aqu-sz) and ``device_ios_per_s``; then the
    median per group, ``util_low`` and ``util_high`` (fio's util over the group's runs, which can
    differ by much), and ``above_device_ms``: latency spent above the block
    layer (in the guest: file system, page cache, fio's own queue).

    Figures the row itself contradicts are unknown (null), with the reason in ``note``:
    fio's latency below the await (by ``CACHED_BELOW``) means the page cache answered and the
    device's I/Os were the write-back's (``cached``), or, where every run bypassed the cache, that the
    disk's counters hold other I/O than fio's (``other_io``): nothing was spent "above" it either way; a busy
    share below what the queue implies (under ``UNDERCOUNT_BELOW`` of it), or above what it allows (over
    ``OVERCOUNT_ABOVE`` times it), is the kernel's io_ticks, not the device's time: such a run's util is left out of the
    median and range (unknown when every run's is), and ``note`` says so, counting ``figures`` (what a
    row of ``runs`` is, in words). A queue of aqu-sz requests keeps the device busy at most aqu-sz of the
    time (one request or more whenever busy) and at least aqu-sz / depth, where depth is the most
    requests in flight at once: ``configured_depth`` times the requests the block layer made of each
    I/O (device requests per second over ``run_iops``; a 64k I/O can be split in two).
    """
    ios = pl.col("read_ios") + pl.col("write_ios")
    # the disk's counters cover fio's ramp as well as its runtime: rates and queue are over that span
    span_ns = pl.col("disk_span_ns") if "disk_span_ns" in runs.columns else pl.col("runtime_ns")
    none = pl.lit(None, dtype=pl.Float64)
    depth = pl.col("configured_depth") if "configured_depth" in runs.columns else none
    rate = pl.col("run_iops") if "run_iops" in runs.columns else none
    view = runs.with_columns(
        ((pl.col("read_ticks_ms") + pl.col("write_ticks_ms")) / ios).alias("device_await_ms"),
        (pl.col("in_queue_ms") / (span_ns / 1e6)).alias("device_queue"),
        (ios / (span_ns / 1e9)).alias("device_ios_per_s"),
    )
    split = pl.max_horizontal(pl.lit(1.0), pl.col("device_ios_per_s") / rate)
    view = view.with_columns(
        (100 * pl.col("device_queue") / (depth * split)).alias("_busy_at_least"), (depth * split).alias("_in_flight")
    )
    # fio saw less than the await: the page cache answered, or (its jobs bypassed the cache) the disk's counters
    # hold other I/O than fio's; per run, and per group on the medians
    below = pl.col("app_latency_ms") < CACHED_BELOW * pl.col("device_await_ms")
    direct = pl.col("direct_io").fill_null(False) if "direct_io" in runs.columns else pl.lit(False)
    cached = below & ~direct
    # each run's util judged on its own: below what its own queue needs, or above what it allows, says nothing
    low_run = (~below & (pl.col("util_pct") < UNDERCOUNT_BELOW * pl.col("_busy_at_least"))).fill_null(False)
    high_run = (pl.col("util_pct") > OVERCOUNT_ABOVE * 100 * pl.col("device_queue")).fill_null(False)
    kept = pl.when(~low_run & ~high_run).then(pl.col("util_pct"))
    medians = view.group_by(*by).agg(
        pl.col("app_latency_ms").median(),
        pl.col("device_await_ms").median(),
        pl.col("device_ios_per_s").median(),
        pl.col("device_queue").median(),
        kept.median().alias("util_pct"),
        kept.min().alias("util_low"),  # fio's util of one run can be far from another's
        kept.max().alias("util_high"),
        kept.count().alias("util_kept"),
        pl.col("util_pct").median().alias("_util_all"),
        low_run.sum().alias("_low"),
        high_run.sum().alias("_high"),
        pl.col("_busy_at_least").median(),
        pl.col("_in_flight").median(),
        pl.col("instance").first().alias("device"),
        pl.len().alias("host_runs"),
        direct.all().alias("direct_io"),  # every run of the group bypassed the page cache
    )
    above = pl.col("app_latency_ms") - pl.col("device_await_ms")
    return (
        medians.with_columns(
            pl.when(below).then(None).otherwise(above.clip(lower_bound=0)).alias("above_device_ms"),
            cached.alias("cached"),
            (below & pl.col("direct_io")).alias("other_io"),
            # fio saw a little less than the await: measurement noise, nothing spent above it
            pl.when(~below)
            .then(100 * (1 - pl.col("app_latency_ms") / pl.col("device_await_ms")))
            .alias("fio_below_await_pct"),
        )
        .rename(
            {
                "_busy_at_least": "busy_at_least_pct",
                "_in_flight": "in_flight",
                "_util_all": "util_all_pct",
                "_low": "util_low_runs",
                "_high": "util_high_runs",
            }
        )
        .sort(by)
    )
