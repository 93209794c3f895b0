"""Sweeps in words: the shape :func:`benchlib.stats.queueing.sweep_shape` found, as a table cell and a note."""

from __future__ import annotations

from benchlib.stats.queueing import MIN_KNEEDLE_POINTS, SweepShape


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
