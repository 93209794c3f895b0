"""Where latency was spent, in words: the notes of :func:`benchlib.stats.queueing.device_latency_split`'s rows."""

from __future__ import annotations

import polars as pl

#: the columns :func:`benchlib.stats.queueing.device_latency_split` gives for its notes alone
_FOR_NOTES = ("busy_at_least_pct", "in_flight", "util_all_pct", "util_low_runs", "util_high_runs", "cached")


def latency_split_notes(split: pl.DataFrame, figures: str = "one per host and run") -> pl.DataFrame:
    """Add each group's ``note`` to :func:`~benchlib.stats.queueing.device_latency_split`'s rows.

    The page cache answered; fio saw a little less than the await; or fio's util contradicts the device
    queue (how many of its ``figures``, what a row of the runs is, were left out).
    """
    near = pl.when(pl.col("fio_below_await_pct") > 0).then(
        pl.format(
            "fio saw {}% less than the await (measurement noise): nothing measurable was spent above the block layer",
            pl.col("fio_below_await_pct").round(1),
        )
    )
    note = pl.when(pl.col("cached")).then(_cached_note()).otherwise(_joined(near, _util_note(figures)))
    return split.with_columns(note.alias("note")).drop(*_FOR_NOTES, "fio_below_await_pct")


def _cached_note() -> pl.Expr:
    """Say that the page cache answered; and where the device queue held more than fio's jobs could, whose it was."""
    said = "fio's latency is below the await: the page cache answered (buffered I/O)"
    more = pl.col("device_queue") > 1.5 * pl.col("in_flight")
    return (
        pl.when(more)
        .then(
            pl.format(
                said + "; the device queue of {} is more than the {} fio's jobs held at once: it is the "
                "kernel's write-back of the cached writes",
                pl.col("device_queue").round(1),
                _count(pl.col("in_flight").round(0).cast(pl.Int64), "I/O"),
            )
        )
        .otherwise(pl.lit(said))
    )


def _joined(*notes: pl.Expr) -> pl.Expr:
    """Join the notes that apply with "; " (null when none does)."""
    said = pl.concat_str(list(notes), separator="; ", ignore_nulls=True)
    return pl.when(said != "").then(said)


def _count(n: pl.Expr, noun: str) -> pl.Expr:
    """``1 figure``, ``3 figures``."""
    return pl.format("{} {}", n, pl.when(n == 1).then(pl.lit(noun)).otherwise(pl.lit(f"{noun}s")))


def _util_note(figures: str) -> pl.Expr:
    """Say why a group's device busy is unknown, or how many of its figures left the median (else null)."""
    low, high, queue = pl.col("util_low_runs"), pl.col("util_high_runs"), pl.col("device_queue").round(2)
    unknown = pl.col("util_pct").is_null()
    why = pl.concat_str(
        pl.when(high > 0).then(pl.format("{} busier than its queue allows", high)),
        pl.when(low > 0).then(pl.format("{} less busy than its queue needs", low)),
        separator=", ",
        ignore_nulls=True,
    )
    return (
        pl.when(unknown & (low > 0) & (high == 0))
        .then(
            pl.format(
                "device busy unknown: fio's util says {}% (the median of {}, {}), but a device queue of {} "
                "I/Os on average (aqu-sz), with at most {} in flight, keeps it busy at least {}% of the time",
                pl.col("util_all_pct").round(2),
                _count(low, "figure"),
                pl.lit(figures),
                queue,
                pl.col("in_flight").round(0).cast(pl.Int64),
                pl.col("busy_at_least_pct").round(1),
            )
        )
        .when(unknown & (high > 0) & (low == 0))
        .then(
            pl.format(
                "device busy unknown: fio's util says {}% (the median of {}, {}), but a device queue of {} "
                "I/Os on average (aqu-sz) keeps it busy at most {}% of the time (the kernel counts sparse I/O in "
                "whole clock ticks)",
                pl.col("util_all_pct").round(1),
                _count(high, "figure"),
                pl.lit(figures),
                queue,
                (100 * pl.col("device_queue")).round(1),
            )
        )
        .when(unknown & (low + high > 0))
        .then(pl.format("device busy unknown: every figure ({}) contradicts its own queue: {}", pl.lit(figures), why))
        .when(low + high > 0)
        .then(
            pl.format(
                "device busy: {} of {} figures ({}) left out: {}", low + high, pl.col("host_runs"), pl.lit(figures), why
            )
        )
    )
