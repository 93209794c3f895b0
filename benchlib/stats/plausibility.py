"""Runs that cannot have measured what they claim: found from each run's own figures and its siblings'.

A run (one repetition of one configuration, every member at once) is implausible when

* **apart**: its total is :data:`TIMES_APART` times or more from the median of the configuration's runs,
  either way (two runs that far apart: which one is wrong cannot be told, both are named);
* **too fast**: a member doing direct I/O had a median completion latency under :data:`FASTEST_DIRECT_NS`,
  quicker than a disk or SSD answers a request through the kernel (its reads met space never written,
  which a file system answers with zeros and no device I/O, or a cache below the guest did; memory, a RAM
  disk or persistent memory can be that fast, and a study of them should expect this finding);
* **idle device**: the device under a member doing direct I/O counted under :data:`IDLE_SHARE` of the I/Os
  fio completed (fio's own disk statistics, all the device's I/O: so an idle device is certain);
* **apart in time**: its members' runs did not overlap at all (the members were to run at once). This needs
  each member's own start and end: files written per VM (HCIBench, a fio run per VM) carry them; a fio
  client/server run's JSON gives one time for the run, but its logs stamped in Unix time by each server's
  clock (``log_unix_epoch``, which ``benchlib run`` sets) carry each member's span, where a log has two
  stamps or more (one stamp does not show its interval);
* **not steady**: the plan asked for each run's workload to be brought to steady state first
  (``precondition = "steady"``) and fio's criterion did not hold within the longest the plan allowed;
* **unwritten target**: ``benchlib run`` recorded that it did not write the target's region (a device it
  was not allowed to write), and the run reads: carried on every such run, since benchlib cannot know.

Each rule gives findings, never words (the pages say them): one row per run and rule, with the figure,
what it was held against, and the rule as a code (:data:`RULES`).
"""

from __future__ import annotations

import polars as pl

#: a run this many times from its siblings' median (or a tenth of it) did other work than they did
TIMES_APART = 10.0
#: a median completion latency under this (5 µs) with direct I/O: no device answered
FASTEST_DIRECT_NS = 5_000.0
#: a device that counted under 1% of fio's direct I/Os did not do them
IDLE_SHARE = 0.01

#: the ``target.written`` label of a device benchlib was not allowed to write (it read what was there)
NOT_BY_BENCHLIB = "not by benchlib"

#: the rules, each a finding's ``rule`` code (the pages say what each likely means)
RULES = ("apart", "too fast", "idle device", "apart in time", "not steady", "unwritten target")

#: a file's printed IOPS or bandwidth this far from the figure benchlib recomputes is a disagreement: fio's normal
#: output prints 3 significant digits (0.5% at most), so more than 1% is not its rounding
PRINTED_APART = 0.01


#: each figure benchlib recomputes, and the column keeping what the file printed
PRINTED = {"iops": "printed_iops", "bandwidth_bytes_per_s": "printed_bandwidth_bytes_per_s"}


def printed_apart(rows: pl.DataFrame, share: float = PRINTED_APART) -> pl.DataFrame:
    """Return the rows whose file printed IOPS or bandwidth more than ``share`` from benchlib's figure.

    ``rows``: results (with ``source`` and ``format`` where the runs are joined). One row per result row and
    ``figure`` (``iops``, ``bandwidth_bytes_per_s``): ``printed``, ``recomputed`` (fio: from the issued count
    over the runtime; a run status group's total from its jobs' bytes, where ``job_name`` is null; vdbench:
    its totals line, ``printed`` its measured intervals' mean) and ``apart``
    (recomputed / printed - 1), where the two differ by more than ``share`` and more
    than the printing loses (its third digit; a whole IOPS, which fio prints without decimals). None where the
    reader kept the file's own figure.
    """
    keys = [c for c in ("source", "format", "group_id", "job_name", "direction") if c in rows.columns]
    if "printed_iops" not in rows.columns:
        return pl.DataFrame(schema={**{k: rows.schema[k] for k in keys}, "figure": pl.String})
    parts = [
        rows.select(
            *keys, pl.lit(figure).alias("figure"), pl.col(kept).alias("printed"), pl.col(figure).alias("recomputed")
        )
        for figure, kept in PRINTED.items()
    ]
    found = pl.concat(parts).filter(pl.col("printed") > 0)
    # what the printing itself may lose: its last of 3 digits, and a whole I/O per second (fio prints 35, not 35.8)
    printed = pl.col("printed")
    lost = pl.max_horizontal(
        share * printed,
        pl.lit(10.0).pow(printed.log10().floor() - 2),
        pl.when(pl.col("figure") == "iops").then(1.0).otherwise(0.0),
    )
    found = found.with_columns((pl.col("recomputed") / printed - 1).alias("apart"))
    return found.filter((pl.col("recomputed") - printed).abs() > lost).sort(*keys, "figure")


FINDINGS = pl.Schema(
    {
        "run_unit": pl.String,
        "rule": pl.String,
        "member": pl.String,
        "figure": pl.Float64,
        "reference": pl.Float64,
        #: how many runs the configuration has (the apart rule's reference is their median, or the other one's)
        "runs": pl.Int32,
    }
)


def _findings(frame: pl.DataFrame, rule: str) -> pl.DataFrame:
    """Shape one rule's rows as :data:`FINDINGS` (``member`` null where the finding is the whole run's)."""
    for column in ("member", "runs"):
        if column not in frame.columns:
            frame = frame.with_columns(pl.lit(None, FINDINGS[column]).alias(column))
    return frame.with_columns(pl.lit(rule).alias("rule")).select([pl.col(c).cast(t) for c, t in FINDINGS.items()])


def apart_from_siblings(totals: pl.DataFrame, value: str, by: list[str]) -> pl.DataFrame:
    """Find the runs whose ``value`` total is :data:`TIMES_APART` times from their configuration's median.

    ``totals``: one row per run (``run_unit``, ``by``, ``value``). With three runs or more the reference is
    the median of all the configuration's runs (one odd run cannot move it); with two, each is held against
    the other (which one is wrong cannot be told, so both are named). ``figure`` is the run's total,
    ``reference`` what it was held against. A total of 0 against a positive one is infinitely apart.
    """
    rows = totals.select("run_unit", *by, value).drop_nulls(value)
    found = []
    for group in rows.partition_by(by, maintain_order=True) if by else [rows]:
        if group.height < 2:
            continue
        values = group[value].to_list()
        middle = float(group[value].median())
        for i, run in enumerate(group["run_unit"].to_list()):
            figure = float(values[i])
            reference = float(values[1 - i]) if group.height == 2 else middle
            low, high = sorted((figure, reference))
            if high > 0 and (low <= 0 or high / low >= TIMES_APART):
                found.append({"run_unit": run, "figure": figure, "reference": reference, "runs": group.height})
    schema = {"run_unit": pl.String, "figure": pl.Float64, "reference": pl.Float64, "runs": pl.Int32}
    return _findings(pl.DataFrame(found, schema=schema), "apart")


def median_completion_expr() -> pl.Expr:
    """Return fio's median completion latency of a ``results`` row (its clat p50), null where not reported."""
    return (
        pl.col("clat_percentiles")
        .list.eval(pl.element().filter(pl.element().struct.field("percentile") == 50.0).struct.field("value_ns"))
        .list.first()
    )


def too_fast(members: pl.DataFrame, fastest_ns: float = FASTEST_DIRECT_NS) -> pl.DataFrame:
    """Find the members doing direct I/O whose median completion latency was under ``fastest_ns``.

    ``members``: one row per run, member and direction with ``direct``, ``ioengine`` and ``clat_p50_ns``.
    ``fastest_ns``: what the storage can give (:data:`FASTEST_DIRECT_NS` for a disk or SSD; a study of
    memory-fast storage declares its own). fio's null engine does no I/O at all and is never held to a
    device's speed.
    """
    rows = members.filter(
        pl.col("direct").fill_null(False),
        ~pl.col("ioengine").fill_null("").is_in(["null", "mmap"]),  # no I/O, or memory copies whatever direct says
        pl.col("clat_p50_ns") < fastest_ns,
    )
    return _findings(
        rows.select("run_unit", "member", pl.col("clat_p50_ns").alias("figure"), pl.lit(fastest_ns).alias("reference"))
        .group_by("run_unit", "member")
        .agg(pl.col("figure").min(), pl.col("reference").first()),
        "too fast",
    )


def idle_device(counts: pl.DataFrame) -> pl.DataFrame:
    """Find the runs doing direct I/O whose every member's device counted under :data:`IDLE_SHARE` of its I/Os.

    ``counts``: one row per run, member and direction: ``fio_ios`` (the member's direct I/Os) and
    ``device_ios`` (what the device under it counted, all its I/O: a device members share counts theirs
    too). Judged per member, so members on disks of their own are each held to their own I/O. ``figure``
    is what the device under the member with the largest share counted, ``reference`` its own direct I/Os.
    """
    rows = counts.filter(pl.col("fio_ios") > 0, pl.col("device_ios").is_not_null())
    rows = rows.with_columns((pl.col("device_ios") / pl.col("fio_ios")).alias("share"))
    busiest = rows.sort("share", descending=True).group_by("run_unit", maintain_order=True).first()
    idle = busiest.filter(pl.col("share") < IDLE_SHARE)
    if "member" not in idle.columns:
        idle = idle.with_columns(pl.lit(None, pl.String).alias("member"))
    return _findings(
        idle.select("run_unit", "member", pl.col("device_ios").alias("figure"), pl.col("fio_ios").alias("reference")),
        "idle device",
    )


def apart_in_time(spans: pl.DataFrame) -> pl.DataFrame:
    """Find the runs of several members whose members' spans did not overlap: the last began after the first ended.

    ``spans``: one row per run and member with ``start_ns`` and ``end_ns``. ``figure`` is the gap in
    seconds between the earliest end and the latest start.
    """
    per_run = (
        spans.drop_nulls(["start_ns", "end_ns"])
        .group_by("run_unit")
        .agg(
            pl.col("member").n_unique().alias("members"),
            pl.col("start_ns").max().alias("last_start"),
            pl.col("end_ns").min().alias("first_end"),
        )
    )
    rows = per_run.filter(pl.col("members") > 1, pl.col("last_start") >= pl.col("first_end"))
    rows = rows.with_columns(((pl.col("last_start") - pl.col("first_end")) / 1e9).alias("figure"))
    return _findings(rows.with_columns(pl.lit(0.0).alias("reference")), "apart in time")


def unwritten_target(written: pl.DataFrame) -> pl.DataFrame:
    """Find the runs that read a target whose region ``benchlib run`` recorded it never wrote.

    ``written``: one row per run and member, ``target_written`` (the time, ``"never"``, or null where the
    run's record does not say) and ``reads`` (whether the member read).
    """
    rows = written.filter(pl.col("target_written").is_in(["never", NOT_BY_BENCHLIB]), pl.col("reads"))
    return _findings(
        rows.select(
            "run_unit", "member", pl.lit(None, pl.Float64).alias("figure"), pl.lit(None, pl.Float64).alias("reference")
        ),
        "unwritten target",
    )


def not_steady(steady: pl.DataFrame) -> pl.DataFrame:
    """Find the runs measured before their workload was steady, where the plan asked that it be.

    ``steady``: one row per run and member, ``target_steady`` (``"yes"``, ``"no"``, ``"unknown"`` or null
    where the plan asked nothing) and ``steady_s`` (the seconds fio tried). ``figure`` is those seconds.
    """
    rows = steady.filter(pl.col("target_steady").is_in(["no", "unknown"]))
    return _findings(
        rows.select(
            "run_unit", "member", pl.col("steady_s").alias("figure"), pl.lit(None, pl.Float64).alias("reference")
        ),
        "not steady",
    )


def implausible_runs(*found: pl.DataFrame) -> pl.DataFrame:
    """Return every rule's findings as one frame, sorted (run, rule, member)."""
    frames = [f for f in found if f.height]
    if not frames:
        return pl.DataFrame(schema=FINDINGS)
    return pl.concat(frames).sort("run_unit", "rule", "member", nulls_last=True)
