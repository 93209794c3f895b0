"""What a plan will do, in words: cells, total time, bytes written per target."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

from benchlib.runner.execute import PlanReading, at_levels, cell_seconds, cell_stopping, pending
from benchlib.runner.plan import BASE_OPTIONS, Plan, settled_cells
from benchlib.runner.repetitions import PrecisionRule, SettleRule, parse_rule
from benchlib.runner.settings import planned_changes
from benchlib.stats.design import LAG_FROM, PTS_ROUNDS, min_p, runs_to_test

#: The precision the dry run plans for when the plan sets none (Hoefler & Belli's example wording).
DEFAULT_RULE = parse_rule("iops within 5%")

_MIB = 1024 * 1024


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def describe_plan(plan: Plan, reading: PlanReading, *, cells: bool = True, levels: dict | None = None) -> list[str]:
    """Return the lines the dry run prints (and the real run prints before it starts).

    ``reading``: fio's own reading of the plan (:func:`benchlib.runner.execute.read_plan`), which says
    which cells write and the exact file or device each host's job opens.
    """
    one = plan.cells()
    todo = pending(plan)
    runs = len(one) * plan.repetitions
    adaptive = plan.adaptive
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
        _time_line(plan, len(todo)),
    ]
    if adaptive:
        most = 0
        compared = settled_cells(plan.cells(), adaptive.rule) if isinstance(adaptive.rule, SettleRule) else set()
        for cell in one:  # what the rounds may still add, given the runs already recorded
            state = cell_stopping(plan, cell, adaptive.maximum, rule=_counting(plan))
            if isinstance(adaptive.rule, SettleRule):  # a compared cell may run to max; one in no comparison, none
                state = dataclasses.replace(state, met=cell.key not in compared)
            if not state.met:
                most += adaptive.maximum - max(state.runs, plan.repetitions)
        lines.append(
            f"repetitions: adaptive, {plan.repetitions} to {adaptive.maximum} per cell, until "
            f"{adaptive.rule.text!r} ({adaptive.rule.describe()}){_rule_note(plan)}; each round reruns only "
            f"the cells not yet there: up to {most} more runs, about {_duration(most * cell_seconds(plan))} more; "
            f"decisions go to benchlib-repetitions.json"
        )
    writing = [c for c in one if c.key in reading.writing]
    lines.append(f"before the first cell: {before_first_cell(plan)}")
    lines.append(
        f"bytes written per target in the cells: {len(writing)} writing cells x {plan.repetitions} x "
        f"{plan.runtime_s + plan.ramp_time_s} s"
        f" of writes inside the first {size:,.0f} MiB of the target (a block that starts inside and does not"
        " fit ends past it: choose a size that every block size divides)"
    )
    per_profile = Counter(c.profile for c in one)
    writes = {c.profile for c in writing}
    lines.append(
        "profiles: " + ", ".join(f"{p} ({n} cells{', writes' if p in writes else ''})" for p, n in per_profile.items())
    )
    lines += planned_changes(plan, [(r, c) for _, r, c, _ in todo if at_levels(c, levels)])  # what will run
    lines += design_advice(plan)
    lines += planning(plan)
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


def comparison_families(plan: Plan) -> dict[str, int]:
    """Return each factor's comparisons against its first level, between cells alike in all else (a Holm family).

    Factors with none (one level in every group) are left out.
    """
    cells = plan.cells()
    family = {}
    for factor in plan.factors:
        groups: dict[tuple, set] = {}
        for c in cells:
            rest = tuple(sorted((k, v) for k, v in c.levels.items() if k != factor.name))
            groups.setdefault((c.profile, rest), set()).add(c.levels.get(factor.name))
        if count := sum(len(levels) - 1 for levels in groups.values() if len(levels) > 1):
            family[factor.name] = count
    return family


def design_advice(plan: Plan) -> list[str]:
    """Say what the design can show before anything runs: the tests its repetitions allow, what its runtime allows.

    A comparison of two levels is an exact Mann-Whitney test over the runs of each (one run per repetition):
    with n runs a side its p can be no smaller than ``2 / C(2n, n)``; a factor's comparisons against its first
    level are a Holm family. The steady-state check needs :data:`PTS_ROUNDS` whole logged seconds, the
    two-level plan :data:`LAG_FROM`; a run of ``runtime_s`` logs about ``runtime_s - 1`` whole seconds.
    """
    n = plan.repetitions  # an adaptive plan's fewest
    lines = []
    family = comparison_families(plan)
    if family:
        name, most = max(family.items(), key=lambda item: item[1])
        alone, whole = runs_to_test(1), runs_to_test(max(most, 1))
        smallest = min_p(n, n)
        verdict = "a verdict at α = 0.05 is possible" if smallest <= 0.05 else "too few for any verdict at α = 0.05"
        lines.append(
            f"design: {n} run{'s' if n != 1 else ''} per configuration; the smallest p of one comparison is "
            f"{smallest:.3g} ({verdict}); a verdict needs {alone} runs a side alone, {whole} for {name}'s "
            f"{most} comparison{'s' if most != 1 else ''} against its first level taken as one family"
            + _settled_aside(plan)
        )
        lines.append(power_line(n, most))
    else:
        lines.append(f"design: no factor has two levels, so the pages describe the {n} runs and compare nothing")
    whole_seconds = plan.runtime_s - 1
    for need, what in ((PTS_ROUNDS, "the steady-state check (SNIA PTS window)"), (LAG_FROM, "the two-level plan")):
        ok = whole_seconds >= need
        lines.append(
            f"runtime: {plan.runtime_s} s logs about {max(whole_seconds, 0)} whole second"
            f"{'' if whole_seconds == 1 else 's'}; {what} needs {need}"
            + ("" if ok else f": too short, give runtime_s >= {need + 1}")
        )
    return lines


#: the run-to-run spreads (CV) the dry run's power line assumes before any run: a quiet array's, a busy one's
ASSUMED_SPREADS = (0.02, 0.05)


def power_line(runs: int, family: int, spreads: tuple[float, ...] = ASSUMED_SPREADS) -> str:
    """Say the smallest change ``runs`` a side show 80% of the time, at each assumed spread (no run yet)."""
    from benchlib.stats.compare import SETTLE_POWER, detectable_change

    found = [(cv, detectable_change(cv, runs, family=family)) for cv in spreads]
    if any(change is None for _, change in found):
        return f"power: {runs} run{'s' if runs != 1 else ''} a side cannot show any change as an effect, however large"
    (cv, change), *rest = found
    said = f"{100 * change:.0f}% or more where the runs spread by {100 * cv:.0f}% (CV)"
    said += "".join(f", {100 * c:.0f}% or more where they spread by {100 * v:.0f}%" for v, c in rest)
    who = "a comparison" if family == 1 else f"each of {family} comparisons taken as one family"
    return (
        f"power: at {runs} runs a side, {who} calls a change improved or regressed "
        f"{100 * SETTLE_POWER:.0f}% of the time if it is {said}; the comparison page plans from the spread "
        "the runs show"
    )


def _time_line(plan: Plan, runs: int) -> str:
    """Say how long the runs still to do take: ramp, runtime, fio's start, and any steady-state job before each."""
    steady = plan.target.steady_window_s if plan.target.steady else 0
    start = cell_seconds(plan) - plan.runtime_s - plan.ramp_time_s - steady
    steadying = f" + {start:.1f} s start and at least {steady} s to steady" if steady else f" + ~{start:.1f} s start"
    said = f"time: {runs} x ({plan.ramp_time_s} s ramp + {plan.runtime_s} s run{steadying})"
    if not steady:
        return f"{said} = about {_duration(runs * cell_seconds(plan))}"
    start_s = start * 2 + plan.runtime_s + plan.ramp_time_s
    return (
        f"{said} = at least {_duration(runs * cell_seconds(plan))}, at most "
        f"{_duration(runs * (start_s + plan.target.steady_max_s))} if no run is steady sooner than steady_max_s"
    )


def before_first_cell(plan: Plan) -> str:
    """Say exactly what benchlib writes to each target before the study's first cell, and why."""
    target, size = plan.target, plan.target.size_bytes / _MIB
    passes = f"{target.passes} sequential pass{'es' if target.passes > 1 else ''}"
    if target.file:
        said = (
            f"a file benchlib creates is written in full once ({size:,.0f} MiB of random data, "
            f"{'through its fio server' if plan.servers else 'by benchlib'}) so that no cell reads space never written"
        )
        if target.passes:
            asks = "steady" if target.steady else "sequential"
            said += f'; then, as precondition = "{asks}" asks, {passes} over the {size:,.0f} MiB, once per study'
        return said + _before_each_run(plan)
    if target.passes:
        return (
            f"{passes} of random data over the device's first {size:,.0f} MiB, once per study (precondition; "
            f"needs --destroy-data={target.device})" + _before_each_run(plan)
        )
    return (
        f"with --destroy-data={target.device}, one sequential pass of random data over its first {size:,.0f} MiB, "
        "once per study (a new or thin-provisioned disk reads unwritten space for free); without it nothing is "
        "written and every run records that benchlib did not write the region"
    )


def _before_each_run(plan: Plan) -> str:
    """Say what a plan's steady-state preconditioning does before every run ("" when it asks none)."""
    target = plan.target
    if not target.steady:
        return ""
    return (
        f"; and before every run, that run's own workload until fio finds it steady ({target.steady} over "
        f"{target.steady_window_s} s), for at most {target.steady_max_s:,} s (a write workload writes the target)"
    )


def planning(plan: Plan, rule: PrecisionRule | None = None) -> list[str]:
    """Say, from the runs already recorded, how precise each cell is and how many runs the rule needs.

    ``rule``: the adaptive plan's rule, else ``iops within 5%``. Runs needed follow Hoefler & Belli
    (n = (s·t/(e·x̄))², the observed spread of the run totals); nothing is said of a cell with fewer than
    two complete runs. Returns no lines when no cell has two.
    """
    from benchlib.stats.compare import runs_needed

    rule = rule or _counting(plan)
    states = [cell_stopping(plan, c, plan.max_repetitions, rule=rule) for c in plan.cells()]
    known = [s for s in states if s.runs >= 2]
    if not known:
        return []
    lines = [
        f"earlier runs: {len(known)} of {len(states)} cells have 2 or more complete runs; precision of the "
        f"run total against {rule.text!r} ({rule.describe()}), and runs needed (Hoefler & Belli, from their spread):"
    ]
    for s in known:
        values = list(s.values)
        mean = sum(values) / len(values)
        now = "no interval yet" if s.half_width is None else f"±{s.half_width * 100:.1f}%"
        if mean <= 0:
            need = "cannot say (mean run total is 0)"
        else:
            n = runs_needed(values, relative_error=rule.within, confidence=rule.confidence)
            need = "met" if s.met else f"about {n} runs"
        lines.append(f"  {s.cell}: {s.runs} runs, {now} now; {need}")
    met = sum(s.met for s in known)
    lines.append(f"  {met} of {len(known)} cells meet the rule now")
    spreads = sorted(_log_spread(s.values) for s in known if min(s.values) > 0)
    if spreads:
        family = max(comparison_families(plan).values(), default=1)
        cv = spreads[len(spreads) // 2]  # the middle cell's: a comparison's two sides spread about so
        lines.append("  " + _measured_power(plan.max_repetitions, family, cv))
    return lines


def _settled_aside(plan: Plan) -> str:
    """Say that a settled rule's factor is judged at its looks, not by this line's fixed-design figures."""
    rule = plan.adaptive.rule if plan.adaptive else None
    if not isinstance(rule, SettleRule):
        return ""
    return f" (of a fixed design: {rule.factor}'s comparisons are judged at their looks, said under repetitions)"


def _rule_note(plan: Plan) -> str:
    """Say at how many runs a side a settled rule's look can first reach a verdict; for a mean's rule, its weakness."""
    assert plan.adaptive is not None
    rule = plan.adaptive.rule
    if isinstance(rule, PrecisionRule):
        return (
            "; a mean's interval stops a cell that has not yet met a rare slow run (with one run in ten 30% down, "
            f"its stopped intervals cover the mean about 70% of the time): '{rule.metric} median within "
            f"{rule.within * 100:g}%' does not"
            if rule.statistic == "mean"
            else ""
        )
    from benchlib.stats.sequential import Looks

    family = comparison_families(plan).get(rule.factor, 1)
    looks = Looks(plan.repetitions, plan.adaptive.maximum, rule.alpha)
    can = [n for n in range(looks.first, looks.last + 1) if min_p(n, n) <= looks.level(n, n, family)]
    among = f" among {family} comparisons" if family > 1 else ""
    if not can:
        last = looks.level(looks.last, looks.last, family)
        return (
            f"; no look{among} can reach a verdict: even the last's level, {last:.2g}, is below the smallest p "
            f"{looks.last} runs a side allow; raise max"
        )
    return f"; the first look that can reach a verdict{among} is at {can[0]} runs a side"


def _counting(plan: Plan) -> PrecisionRule:
    """Return the plan's precision rule; for a plan without one (fixed, or settled by comparisons) ``iops within 5%``.

    A settled rule's cells are said as precise as this; the rounds they may add are counted as if none settled.
    """
    rule = plan.adaptive.rule if plan.adaptive else None
    return rule if isinstance(rule, PrecisionRule) else DEFAULT_RULE


def _measured_power(runs: int, family: int, cv: float) -> str:
    """Say what the plan's runs show at the spread earlier runs measured, or the runs a 5% and 10% change need."""
    from benchlib.stats.compare import detectable_change, runs_for

    if detectable_change(cv, runs, family=family) is not None:  # at the most runs the plan makes
        return power_line(runs, family, (cv,)).replace("(CV)", "(CV: the median of these cells')")
    five, ten = (runs_for(cv, math.log1p(change), family=family)[0] or "more than 1,000" for change in (0.05, 0.1))
    together = f" ({family} comparisons as one family)" if family > 1 else ""
    return (
        f"power: at the spread these cells show (median CV {100 * cv:.1f}%), calling a 5% change improved or "
        f"regressed 80% of the time takes about {five} runs a side, a 10% change {ten}{together}"
    )


def _log_spread(values: list[float]) -> float:
    """Return the standard deviation of the logs of a cell's run totals: about their CV."""
    logs = [math.log(v) for v in values]
    mean = sum(logs) / len(logs)
    return math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
