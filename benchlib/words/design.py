"""A study's design in words: what :func:`benchlib.views.design` found, and what it can support."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from benchlib.stats.order import DRIFT_RUNS, Drift
from benchlib.tables import inline, level
from benchlib.views import Design

if TYPE_CHECKING:
    from benchlib.runner.repetitions import SettleRule
    from benchlib.stats.sequential import Looks


def count(n: int, noun: str) -> str:
    """Return ``n`` with its noun: ``1 run``, ``19 runs``."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def run_length(d: Design) -> str:
    """Say how long the runs were: the tool's measured runtime as set, its ramp, and the wall clock.

    study.toml's ``runtime_s`` is said only where the data record neither runtime nor clock.
    """
    clock = f"{d.duration_s:,.1f} s from start to end" if d.duration_s is not None else ""
    if d.runtime_s is None:
        if clock:
            return f"runs lasted {clock} (median)"
        if d.stated_runtime_s:
            return f"runtime {d.stated_runtime_s:,g} s as the source states (its data do not record it)"
        return "run length not stated"
    said = f"runtime {d.runtime_s:,.3g} s measured"
    said += f" after a {d.ramp_s:,.3g} s ramp" if d.ramp_s else ""
    return f"{said} ({clock}, median)" if clock else said


def support(d: Design, *, interaction_page: bool = False) -> list[str]:
    """Say what the design can support at its n (METHODS.md G3b), a paragraph each.

    One run per configuration is descriptive only; otherwise the smallest exact p two configurations can give.
    ``interaction_page``: the report has an interaction page, whose test pools more runs than a comparison of
    two configurations.
    """
    if d.runs_high == 1:
        return [
            "**What it can support.** One run per configuration: every comparison between settings is descriptive "
            "only (the VMs of a run share the storage and are not replicates); no test or interval can say whether "
            "a setting had an effect."
        ]
    verdict = (
        f", above α = 0.05: no comparison of two configurations can be significant; {d.runs_to_test} runs per "
        "side would make one comparison alone testable, more when a page corrects over several (each says how "
        "many)."
        if d.min_p > 0.05
        else "; a correction over many comparisons raises it (each comparison page says by how much)."
    )
    smallest = (
        "the smallest exact two-sided p of a comparison of two configurations (Mann-Whitney on their run totals) "
        f"is {d.min_p:.3g}{verdict}"
    )
    if d.runs_low == 1:
        were = "was" if d.once == 1 else "were"
        them = "it" if d.once == 1 else "them"
        return [
            f"**What it can support.** {d.once} of {d.configurations} configurations {were} run once: comparisons "
            f"that involve {them} are descriptive only. "
            + (
                f"The others ran {d.repeated_low} times each: {smallest}"
                if d.repeated_low == d.runs_high
                else f"The others ran {d.repeated_low} to {d.runs_high} times each: at {d.repeated_low} runs a side, "
                + smallest
            )
        ]
    said = [f"**What it can support.** With {d.runs_low} runs per configuration " + smallest]
    if interaction_page and d.min_p > 0.05:
        said.append(
            "**A test that pools runs.** The interaction page's test pools the runs of several configurations "
            "at once: at this n it can be significant where no comparison of two configurations can."
        )
    return said


def design_statement(d: Design | None, *, interaction_page: bool = False, with_support: bool = True) -> str:
    """Say in words what the study's design is and what it can support (Markdown).

    Factors and levels, configurations, runs per configuration, members per run, run length, tool versions;
    members of a run that never ran at once; then :func:`support` (unless ``with_support`` is False: a report's
    index says it with its answers).
    """
    if d is None:
        return "The study holds no runs."
    levels = (
        "; ".join(f"{inline(f)} ({', '.join(level(f, x) for x in v)})" for f, v in d.factors.items()) or "none declared"
    )
    one, members = d.member, f"{d.member}s"
    each = f"{d.runs_low}" if d.runs_low == d.runs_high else f"{d.runs_low} to {d.runs_high}"
    host_text = (
        f"{members} per run: none named"
        if d.hosts_low is None
        else f"{count(d.hosts_low, one)} per run"
        if d.hosts_low == d.hosts_high
        # the data may list fewer members of a run than ran (a published table of one VM of five)
        else f"{d.hosts_low} to {d.hosts_high} {members} in the data of a run"
    )
    versions = ", ".join(d.tools) or "tool versions not stated"
    # a run of phases (fio's stonewall groups) ran each phase once: a configuration per phase
    upto = "up to " if d.runs > 1 else ""
    phased = f" ({upto}{d.phases} phases one after another: fio's groups, each its own work)" if d.phases > 1 else ""
    lines = [
        f"**Design.** Factors: {levels}. {count(d.configurations, 'configuration')} with runs, "
        f"{count(d.runs, 'run')}{phased}: {each} per configuration; {host_text}; {run_length(d)}; {versions}."
        + (
            f" Besides the runs, the data hold {count(d.other_rows, 'row')} of other figures, such as a table of "
            "CPU use: they measured no IOPS, bandwidth or latency, so they count as no run."
            if d.other_rows
            else ""
        ),
    ]
    if d.grouped_by:
        factor = inline(d.grouped_by)
        lines.append(
            f"**Order: grouped by {factor}.** benchlib set {factor} itself, and each change stops and starts the "
            f"VMs, so each repetition ran in groups of one {factor} level, the groups in a random order and the runs "
            "within each too (restricted randomisation: a split-plot design). Each repetition applied each level "
            f"once, so the {each} runs of a {factor} level come from as many applications: its comparisons rest "
            "on applications, not on runs that shared one. The other factors changed within each application."
        )
    if d.apart:
        lines.append(
            f"**{members[0].upper()}{members[1:]} that did not run at once.** "
            + (f"In {d.apart} of the {d.several} runs" if d.several > 1 else "In the one run")
            + f" of several {members}, the last {one} started after the first had finished: their run totals add "
            f"rates that never shared the storage, and fairness between them compares turns, not contention. Run the "
            f"{members} together (fio's client/server mode, `benchlib run`), or read each {one}'s figures on its own."
        )
    said = support(d, interaction_page=interaction_page) if with_support else []
    return "\n\n".join([*lines, *said])


def drift_words(d: Drift | None) -> str:
    """Say how the run totals moved with time within configurations (:func:`benchlib.views.drift`); "" for none.

    Said as the change over the time a configuration's runs span (a trend an hour over six minutes would
    read as a large number nobody saw), with its interval.
    """
    if d is None:
        return ""
    minutes = d.hours * 60
    span = count(round(d.hours * 3600), "second") if minutes < 1 else count(round(minutes), "minute")
    span = span if d.hours < 1 else f"{d.hours:,.1f} hours"
    moved, low, high = (math.expm1(math.log1p(x) * d.hours) for x in (d.per_hour, d.low, d.high))
    said = (
        f"**Drift.** Within configurations, run totals moved {100 * moved:+.1f}% over the {span} a "
        f"configuration's runs span ({100 * d.confidence:g}% interval {100 * low:+.1f}% to {100 * high:+.1f}%; "
        f"{count(d.configurations, 'configuration')} of {DRIFT_RUNS} runs or more, {count(d.runs, 'run')})"
    )
    if not d.drifted:
        return said + ": no trend shows."
    return (
        said + ": the system changed while the study ran. A comparison is fair to it only where its levels' runs "
        "were interleaved in time, as benchlib's plans shuffle them; one whose sides ran in blocks says so."
    )


def settled_words(found: tuple[SettleRule, Looks] | None) -> str:
    """Say that the runs were repeated until a factor's comparisons settled (:func:`benchlib.views.settled_rule`).

    "" for a study whose repetitions were fixed or stopped by precision.
    """
    if found is None:
        return ""
    rule, looks = found
    return (
        f"**Repetitions.** Each configuration ran {looks.first} to {looks.last} times: after every round, each "
        f"comparison of {inline(rule.factor)} against {level(rule.factor, rule.baseline)} ({rule.metric}, band "
        f"±{100 * rule.band:g}%) stopped once it was improved, regressed or equivalent. Every look spends part of "
        f"α = {rule.alpha:g}, so each such comparison is read at the level its look may spend, not at α."
    )
