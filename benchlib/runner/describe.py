"""What a plan will do, in words: cells, total time, bytes written per target."""

from __future__ import annotations

from collections import Counter

from benchlib.runner.execute import PlanReading, cell_seconds, pending
from benchlib.runner.plan import BASE_OPTIONS, Plan

_MIB = 1024 * 1024


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def describe_plan(plan: Plan, reading: PlanReading, *, cells: bool = True) -> list[str]:
    """Return the lines the dry run prints (and the real run prints before it starts).

    ``reading``: fio's own reading of the plan (:func:`benchlib.runner.execute.read_plan`), which says
    which cells write and the exact file or device each host's job opens.
    """
    one = plan.cells()
    todo = pending(plan)
    runs = len(one) * plan.repetitions
    where = (
        f"{len(plan.servers)} fio servers at once ({', '.join(plan.servers)}, port {plan.port})"
        if plan.servers
        else "fio on this machine"
    )
    kind = "file created by benchlib" if plan.target.file else "block device (needs --destroy-data for writes)"
    path = plan.target.file or plan.target.device
    size = plan.target.size_bytes / _MIB
    lines = [
        f"plan {plan.path} -> {plan.output} (study {plan.name!r})",
        f"hosts: {where}",
        f"target on each host: {path} ({kind}), {size:,.0f} MiB",
        f"cells: {len(one)} per repetition x {plan.repetitions} repetitions = {runs} runs; "
        f"{runs - len(todo)} done, {len(todo)} to run (order shuffled per repetition, seed {plan.seed})",
        f"time: {len(todo)} x ({plan.ramp_time_s} s ramp + {plan.runtime_s} s run + "
        f"~{cell_seconds(plan) - plan.runtime_s - plan.ramp_time_s:.1f} s start)"
        f" = about {_duration(len(todo) * cell_seconds(plan))}",
    ]
    writing = [c for c in one if c.key in reading.writing]
    layout = f"{size:,.0f} MiB when benchlib creates the file (once)" if plan.target.file else "no lay-out (device)"
    lines.append(
        f"bytes written per target: {layout}; then {len(writing)} writing cells x {plan.repetitions} x "
        f"{plan.runtime_s + plan.ramp_time_s} s"
        f" of writes inside the first {size:,.0f} MiB of the target (a block that starts inside and does not"
        " fit ends past it: choose a size that every block size divides)"
    )
    per_profile = Counter(c.profile for c in one)
    writes = {c.profile for c in writing}
    lines.append(
        "profiles: " + ", ".join(f"{p} ({n} cells{', writes' if p in writes else ''})" for p, n in per_profile.items())
    )
    if cells:
        lines.append("cells (options beyond benchlib's defaults; what fio says each host's job writes or reads):")
        for cell in one:
            extra = {
                k: v for k, v in cell.options.items() if BASE_OPTIONS.get(k) != v and str(BASE_OPTIONS.get(k)) != v
            }
            verb = "WRITES" if cell.key in reading.writing else "reads only"
            opened = sorted(
                {(host, f) for (key, host), files in reading.files.items() if key == cell.key for f in files}
            )
            where = ", ".join(f if not plan.servers else f"{host}:{f}" for host, f in opened)
            lines.append(
                f"  {cell.key}: " + " ".join(f"{k}={v}" for k, v in sorted(extra.items())) + f" -> {verb} {where}"
            )
    return lines
