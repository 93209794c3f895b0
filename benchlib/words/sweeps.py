"""Sweeps in words: the shape :func:`benchlib.stats.queueing.sweep_shape` found, and members' knees apart."""

from __future__ import annotations

import polars as pl

from benchlib.stats.queueing import MIN_KNEEDLE_POINTS, SweepShape
from benchlib.tables import inline, level, number


def shape_verdict(shape: SweepShape) -> str:
    """Say the shape in a clause, for a table whose other columns say the rest ("saturated at 16")."""
    if shape.kind == "peak then drop":
        return (
            f"peak at {shape.peak_depth:g}, then drop: {100 * shape.drop_fraction:.0f}% lower at {shape.drop_depth:g}"
        )
    if shape.kind in ("saturated", "knee"):
        return f"{shape.kind} at {shape.knee_depth:g}"
    if shape.kind == "too few for Kneedle":
        return f"{shape.points} points: Kneedle needs at least {MIN_KNEEDLE_POINTS}"
    if shape.kind == "no plateau":
        return (
            f"no plateau: IOPS still rose {100 * shape.gain_per_doubling:.0f}% per doubling at the largest depth, "
            f"{shape.largest_depth:g}"
        )
    return shape.kind  # "no knee (Kneedle)"


def shape_note(shape: SweepShape) -> str:
    """Say the shape in full: :func:`shape_verdict`, what saturation means, where latency starts to grow."""
    note = shape_verdict(shape)
    if shape.kind == "saturated":
        note += ": beyond it more depth adds latency, not IOPS"
    if shape.latency_knee_depth is not None:
        note += f"; latency grows with depth from {shape.latency_knee_depth:g}"
    return note


def knees_apart(per_member: pl.DataFrame, member: str = "vm") -> str:
    """Say that members' knees one depth apart are a hint at this n, "" where they agree.

    ``per_member``: :func:`benchlib.views.sweep` per member.

    Each knee comes from the medians of the runs at each depth: where one member's step just passes the 10% rule
    and another's just misses it, their runs may overlap. Said only where a depth ran more than once.
    """
    from benchlib.views import sweep_shapes  # here: the views say a sweep's shape with this module

    if per_member.is_empty():
        return ""
    shapes = sweep_shapes(per_member, member=member)
    if "knee" not in shapes.columns:  # no member's sweep has a shape (too few depths, or one concurrency)
        return ""
    knees = sorted(shapes["knee"].drop_nulls().unique().to_list())
    if len(knees) < 2 or per_member["runs"].max() < 2:
        return ""
    return (
        f"Their knees differ ({', '.join(f'{k:g}' for k in knees)}), each from the medians of "
        f"{per_member['runs'].min()} runs a depth: where one {inline(member)}'s step just passes the 10% rule and "
        "another's just misses it, the runs at those depths may overlap; a knee one depth apart is a hint, not a "
        "finding."
    )


def _mix_shape(row: dict) -> str:
    """Say one member's shape along a write-share sweep (:func:`benchlib.views.mix_shapes`' row)."""
    if row["shape"] in ("fell", "rose"):
        said = f"{row['shape']} at every step"
        return said if row["clear"] else said + " in its medians (the runs of some neighbouring shares overlap)"
    if row["shape"] == "dip" and row["clear"]:
        return f"was lowest at {row['low_share']:g}% writes, higher again at {row['last_share']:g}%"
    if row["shape"] == "dip":
        return (
            f"had its lowest median at {row['low_share']:g}% writes, but its runs there and at {row['last_share']:g}% "
            "overlap: no dip the runs can tell from how they vary"
        )
    return "went up and down"


def mix_note(shapes: list[dict], mix: pl.DataFrame, *, member: str = "vm", share: str = "write_pct") -> str:
    """Say how each member's IOPS moved along a write-share sweep (:func:`benchlib.views.mix_shapes`).

    Each member's IOPS at the first and last share with the change, then the shapes, once where every member
    had the same. "" without a member of two shares or more.
    """
    if not shapes:
        return ""
    ends = [f"{r['member']} {number(r['first'])} to {number(r['last'])} ({r['change_pct']:+.0f}%)" for r in shapes]
    grouped: dict[str, list[str]] = {}
    for row in shapes:
        grouped.setdefault(_mix_shape(row), []).append(row["member"])
    first, last = mix[share].min(), mix[share].max()
    who = inline(member)
    if len(grouped) == 1:
        said = f"{'Every' if len(ends) > 1 else 'The'} {who} {next(iter(grouped))}."
    else:
        said = "; ".join(f"{', '.join(names)}: {shape}" for shape, names in grouped.items()) + "."
    return f"From {first:g}% to {last:g}% writes, IOPS of each {who}: " + "; ".join(ends) + ". " + said


#: a job parameter a sweep held fixed, as a reader knows it
_HELD_WORDS = {"rw": "I/O pattern", "block_size_bytes": "block size", "bs": "block size", "iodepth": "iodepth"}


def held_note(held: list[tuple[str, object]]) -> str:
    """Say what a sweep held fixed (:func:`benchlib.views.held_values`), levels in the study's words."""
    said = []
    for column, value in held:
        if column == "numjobs":
            said.append(f"{value} job{'' if str(value) == '1' else 's'}")
        elif column == "block_size_bytes":
            said.append(
                f"block size {int(value) // 1024}k" if int(value) % 1024 == 0 else f"block size {int(value)} bytes"
            )
        else:
            said.append(f"{_HELD_WORDS.get(column) or inline(column)} {level(column, value)}")
    return ", ".join(said)
