"""The host side in words.

Where latency was spent (the notes of :func:`benchlib.stats.queueing.device_latency_split`'s rows), the
kernel's disk statistics, and esxtop's captures beside fio's runs.
"""

from __future__ import annotations

import polars as pl

from benchlib.tables import levels_words, number

#: the columns :func:`benchlib.stats.queueing.device_latency_split` gives for its notes alone (``cached`` is kept:
#: where the page cache answered every configuration, that is the page's finding)
_FOR_NOTES = ("busy_at_least_pct", "in_flight", "util_all_pct", "util_low_runs", "util_high_runs")


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
    other = (
        "fio's latency is below the await though its jobs bypassed the page cache (direct=1): the disk's counters "
        "hold other I/O than fio's, so the await is not fio's"
    )
    other_io = pl.col("other_io") if "other_io" in split.columns else pl.lit(False)
    note = (
        pl.when(pl.col("cached"))
        .then(_cached_note())
        .when(other_io)
        .then(pl.lit(other))
        .otherwise(_joined(near, _util_note(figures)))
    )
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


def disk_finding(view: pl.DataFrame, by: list[str]) -> str:
    """Say where the latency was spent at the deepest and shallowest device queue (:func:`benchlib.views.disk_view`).

    Rows where the page cache answered (no "above" figure) are left out; "" when fewer than two remain.
    """
    rows = view.filter(pl.col("above_device_ms").is_not_null() & (pl.col("app_latency_ms") > 0)).sort("device_queue")
    if _all_cached(view):
        return (
            "In every configuration fio saw less latency than the block layer's await: the page cache answered "
            "part of its I/Os (buffered I/O), so the await is not fio's latency and no split of it can be drawn."
        )
    if _all_below(view):
        return (
            "In every configuration fio saw less latency than the block layer's await, some of it with its jobs "
            "bypassing the page cache (direct=1): the disk's counters hold other I/O than fio's, so the await is "
            "not fio's latency and no split of it can be drawn."
        )
    if rows.height < 2:
        return ""

    def said(row: dict) -> str:
        share = min(100.0, 100 * row["device_await_ms"] / row["app_latency_ms"])
        return (
            f"{levels_words({b: row[b] for b in by})}, {number(row['device_queue'])} I/Os in the device queue on "
            f"average: {share:.0f}% of the {number(row['app_latency_ms'])} ms fio saw was spent in the block layer "
            "and the device"
        )

    return f"Deepest queue: {said(rows.row(-1, named=True))}. Shallowest: {said(rows.row(0, named=True))}."


def esxtop_coverage(captures: pl.DataFrame) -> str:
    """Say how much of the study's esxtop captures fell inside its runs (Markdown).

    ``captures``: :func:`benchlib.views.esxtop_captures`.

    Empty when every sample did; otherwise each capture with its span, so that a reader knows which
    samples the page left out and why (a capture of another time is not the study's I/O).
    """
    if captures.is_empty() or (captures["in_runs"] == captures["samples"]).all():
        return ""
    spans = []
    for row in captures.iter_rows(named=True):
        first, last = (
            f"{t:%Y-%m-%d %H:%M:%S} UTC" if t is not None else "time unknown" for t in (row["first"], row["last"])
        )
        spans.append(f"{row['host']}, {first} to {last}: {row['in_runs']} of {row['samples']} samples inside a run")
    if (captures["in_runs"] == 0).all():
        lead = "No esxtop sample of this study was taken during one of its runs, so none is drawn"
    else:
        lead = "Only the esxtop samples taken during a run are drawn"
    return f"{lead} (a capture of another time is not the study's I/O): " + "; ".join(spans) + "."


def esxtop_match_note(table: pl.DataFrame, *, cached: int = 0) -> str:
    """Say whether esxtop's devices carried fio's I/O (:func:`benchlib.views.esxtop_against_guests`), in Markdown.

    ``cached``: in how many of the configurations off by more than :data:`COMMANDS_MATCH` the page cache answered
    most of the jobs' I/Os (:func:`benchlib.views.cache_answered_most`): only there is it a reason for fewer commands.
    """
    from benchlib.views import COMMANDS_MATCH  # here: the views say a latency split with this module's notes

    if table.is_empty():
        return ""
    if table["matches"].fill_null(False).all():
        return (
            f"esxtop's devices carried fio's I/O: in every configuration with samples, their commands/s are within "
            f"{COMMANDS_MATCH:g}x of fio's IOPS."
        )
    off = table.filter(~pl.col("matches").fill_null(False))
    worst = off.sort(pl.col("ratio").log().abs(), descending=True, nulls_last=False).row(0, named=True)
    ratio = worst["ratio"]
    if ratio is None or ratio == 0:
        per = "no command at all"
    elif ratio >= 1:
        per = f"{number(ratio)} commands per I/O fio did"
    else:
        per = f"one command per {number(1 / ratio)} I/Os fio did"
    if ratio is not None and ratio > 1:
        why = (
            "far more commands than fio did I/Os: other load may have shared these devices, or fio's "
            "I/Os were split into several commands each (blocks larger than the device takes at once)"
        )
    else:
        why = "far fewer commands than fio did I/Os: the capture may watch devices other than the disks fio "
        why += "used, or another host"
        if cached:
            which = "it" if off.height == 1 else f"{cached} of these {off.height} configurations"
            why += (
                f"; and in {which} the page cache answered most of the jobs' I/Os (they ran buffered), by the "
                "disk's own counters (the cell pages give them)"
            )
    return (
        f"**The capture may not be these runs' I/O.** In {off.height} of {table.height} configurations with esxtop "
        f"samples, the devices' commands/s are more than {COMMANDS_MATCH:g}x from fio's IOPS (the farthest: "
        f"{number(worst['esxtop_commands'])} commands/s against {number(worst['guest_iops'])} IOPS, {per}). "
        "esxtop counted "
        f"{why}. Read esxtop's device latencies as the devices', not as these runs', until that is explained."
    )


def copies_note(copied: list[list[str]]) -> str:
    """Say the esxtop captures that are one capture copied (:func:`benchlib.views.esxtop_copied`), in Markdown."""
    if not copied:
        return ""
    groups = "; ".join(" and ".join(f"`{source}`" for source in files) for files in copied)
    return (
        f"**One capture, copied.** {groups} hold the same samples (every counter's value alike, only their times "
        "differ): their host-side rows are one measurement placed at two times, not two that agree."
    )


def _all_cached(view: pl.DataFrame) -> bool:
    return view.height > 0 and "cached" in view.columns and bool(view["cached"].fill_null(False).all())


def _all_below(view: pl.DataFrame) -> bool:
    """Whether fio saw less than the await everywhere: the page cache answered, or the disk held other I/O."""
    if view.is_empty() or "other_io" not in view.columns:
        return False
    return bool((view["cached"].fill_null(False) | view["other_io"].fill_null(False)).all())


def split_not_drawn(view: pl.DataFrame) -> str:
    """Say why the page has no chart of where the latency was spent.

    "" where it has no rows to chart either, or where the page cache answered every configuration
    (:func:`disk_finding` says so first).
    """
    if view.is_empty() or _all_cached(view) or _all_below(view):
        return ""
    return (
        "No chart of where the latency was spent: in every configuration a part of it is unknown "
        "(the table's notes say why)."
    )
