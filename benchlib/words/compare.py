"""Comparisons in words: what :mod:`benchlib.stats.compare` found, said for the comparison page.

The statistics return verdict codes and the numbers behind them; the reasons, the design summary, the
runs-to-settle reasons and the two-level plan's remarks are said here.
"""

from __future__ import annotations

import polars as pl

from benchlib.caveats import COMPARISON_ONCE, ONE_RUN, ORDER_UNKNOWN, TOO_FEW, Caveat
from benchlib.stats.compare import SETTLE_MOST, UNTESTED, VERDICTS, summarised_verdicts
from benchlib.stats.design import LAG_FROM, runs_to_test
from benchlib.tables import inline, level, number, signed


def _untested_note(row: dict) -> str | None:
    """Say why no test was made of a row (rate-capped, one run a side, too few), None where one was."""
    n1, n2, verdict, alpha = row["runs_baseline"], row["runs"], row["verdict"], row["alpha"]
    if verdict == "rate-capped":
        return (
            f"{n1} vs {n2} runs, every one under a rate cap: the totals are what the cap allowed, so this row "
            "measures the cap, not the setting; it is left out of the family"
        )
    if verdict == "descriptive only":
        return "One run per configuration: these numbers describe two runs; no test or interval is possible"
    family = row["family"]
    if verdict == "not testable at this n" and row.get("look_level") is not None:
        return (
            f"{n1} vs {n2} runs: the smallest p these runs allow is {row['p_min']:.3g}, above the "
            f"{row['look_level']:.3g} their look may spend (the runs were repeated until the comparisons settled)"
        )
    if verdict == "not testable at this n":
        attainable = min(1.0, family * row["p_min"])
        corrected = f" ({attainable:.3g} after Holm over {family} comparisons)" if family > 1 else ""
        return (
            f"{n1} vs {n2} runs: the smallest p these runs allow is {row['p_min']:.3g}{corrected}, above "
            f"α = {alpha}; {runs_to_test(family, alpha)} runs per side would make the test possible"
        )
    return None


def verdict_note(row: dict) -> str:
    """Say what the design of one :func:`~benchlib.stats.compare.comparison_table` row can say, and why its verdict."""
    untested = _untested_note(row)
    if untested is not None:
        return untested
    n1, n2, verdict, alpha, family = row["runs_baseline"], row["runs"], row["verdict"], row["alpha"], row["family"]
    low, high = row["ratio_low"], row["ratio_high"]
    if low is None or high is None:
        return f"{n1} vs {n2} runs: no interval for the change (a value is not positive)"
    interval = "the change's interval"
    sequential = row.get("look_level") is not None  # repeated until settled: the look's interval decides
    if family > 1 or sequential:  # the band's verdicts rest on the interval at the family's confidence (Bonferroni)
        low, high = row.get("band_low"), row.get("band_high")
        confidence = f"{percent(row['band_confidence'])}%"
        if low is None or high is None:
            need = "its look needs" if sequential else f"the {family} comparisons need together"
            return f"{n1} vs {n2} runs: too few for the {confidence} interval {need}, so no band can be judged"
        together = f"the {family} comparisons together" if family > 1 else "this comparison"
        interval = (
            f"the change's {confidence} interval (its look's, {together})"
            if sequential
            else f"the change's {confidence} interval (the {family} comparisons together)"
        )
    where = (
        f"{interval} is {100 * (low - 1):+.2f}% to {100 * (high - 1):+.2f}%, the practical band ±{100 * row['band']:g}%"
    )
    if verdict == "confounded with time":
        return (
            f"{n1} vs {n2} runs, each side in a block of time of its own: p = {row['p_holm']:.3g} after Holm; "
            f"{where}; but a drift over time would read the same, so no verdict (run the levels in a shuffled "
            "order, as benchlib's plans do)"
        )
    blocks = "; the sides ran in blocks of time" if row.get("order") == "in blocks" else ""
    if verdict in ("improved", "regressed"):
        return (
            f"{n1} vs {n2} runs; {where}"
            if sequential
            else f"{n1} vs {n2} runs; p = {row['p_holm']:.3g} after Holm; {where}"
        )
    if verdict == "equivalent":
        return f"{n1} vs {n2} runs; {where}: the whole interval is inside the band"
    band = row["band"]
    held = f"{n1} vs {n2} runs" if sequential else f"{n1} vs {n2} runs; p = {row['p_holm']:.3g} after Holm"
    if not sequential and (low - 1 > band or high - 1 < -band):  # outside the band, the test short of alpha
        return f"{held}, above α = {alpha}; {where}: outside the band{blocks}"
    return f"{held}; {where}: it straddles the band{blocks}"


def with_notes(table: pl.DataFrame) -> pl.DataFrame:
    """Return a comparison table with each row's :func:`verdict_note` as ``note``."""
    notes = [verdict_note(row) for row in table.iter_rows(named=True)]
    return table.with_columns(pl.Series("note", notes, dtype=pl.String))


def order_caveat(table: pl.DataFrame) -> Caveat | None:
    """Return the caveat that no tested row's runs carry start times, so their order cannot be checked.

    Flagged :data:`benchlib.caveats.ORDER_UNKNOWN`; None where a tested row has its order (in blocks or
    mixed: :func:`benchlib.stats.order.sides_in_time`) or no row was tested.
    """
    tested = table.filter(~pl.col("verdict").is_in(UNTESTED)) if table.height else table
    if tested.is_empty() or "order" not in tested.columns or tested["order"].is_not_null().any():
        return None
    return Caveat(
        ORDER_UNKNOWN,
        "The runs carry no start times, so it cannot be checked whether each side's runs were interleaved with "
        "the other's (as a shuffled plan runs them) or ran in a block of their own; if in a block, a drift over "
        "time would read as the change.",
    )


def design_caveat(table: pl.DataFrame) -> Caveat | None:
    """Return the one-run caveat of a comparison table where no row could be tested (each side run once).

    Shown after :func:`design_summary`, flagged :data:`benchlib.caveats.ONE_RUN` for the index.
    """
    tested = table.filter(pl.col("verdict") != "rate-capped") if table.height else table
    if tested.is_empty() or not (tested["verdict"] == "descriptive only").all():
        return None
    return Caveat(ONE_RUN, COMPARISON_ONCE)


def design_summary(table: pl.DataFrame, *, alpha: float = 0.05) -> str:
    """Return, in words, the family a comparison table corrects over and what its design can test."""
    if table.is_empty():
        return "No comparison: no group has runs of both the baseline and another level."
    family = int(table["family"][0])
    counts = table["verdict"].value_counts().sort("verdict")
    tally = "; ".join(f"{n} {v}" for v, n in counts.iter_rows())
    capped = table.filter(pl.col("verdict") == "rate-capped").height
    if capped == table.height:
        return (
            f"Every comparison ({capped}) ran under a rate cap on both sides: the totals are what the cap allowed, "
            "so this table measures the cap and tests nothing about the setting."
        )
    outside = (
        f" (the {capped} rate-capped rows are left out: their totals are what the cap allowed, not what the "
        "setting did)"
        if capped
        else ""
    )
    tested = table.filter(pl.col("verdict") != "rate-capped")
    if (tested["verdict"] == "descriptive only").all():  # no test was made: no family to speak of
        return f"Verdicts: {tally}."  # why: design_caveat
    if "look_level" in tested.columns and tested["look_level"].is_not_null().any():
        return _sequential_summary(tested, family, outside, alpha) + f" Verdicts: {tally}."
    text = (
        f"The family is the {family} comparison{'s' if family > 1 else ''} of this table{outside}, Holm-corrected "
        f"at α = {alpha}. Verdicts: {tally}."
    )
    return text


def percent(share: float) -> str:
    """Return a share as a percentage with the digits that tell it from 100 (99.994, not 100)."""
    for digits in range(3, 8):
        said = f"{100 * share:.{digits}g}"
        if said != "100" or share >= 1:
            return said
    return said


def _sequential_summary(tested: pl.DataFrame, family: int, outside: str, alpha: float) -> str:
    """Say how a table whose runs were repeated until its comparisons settled is judged."""
    levels = tested["look_level"].drop_nulls()
    low, high = percent(1 - levels.max()), percent(1 - levels.min())
    span = f"{low}%" if low == high else f"{low}% to {high}%"
    return (
        "The runs were repeated until this factor's comparisons settled, looking after every round, so each "
        f"verdict rests on the change's interval at the confidence its look may spend ({span} here), at each "
        f"side's first runs up to the fewer side's count: α = {alpha} shared by the {family} comparison"
        f"{'s' if family > 1 else ''} of this table{outside} and spread over the looks (O'Brien–Fleming-type "
        f"spending), so that all the verdicts are right together at least {percent(1 - alpha)}% of the time "
        "whenever the runs stopped. No Holm-adjusted p decides a verdict here: it assumes the runs were not "
        "judged while they came in."
    )


def untestable_caveat(table: pl.DataFrame, *, alpha: float = 0.05) -> Caveat | None:
    """Return the caveat that no row of a comparison table can reach α with its runs, None where one can.

    Shown after :func:`design_summary`, flagged :data:`benchlib.caveats.TOO_FEW`: the index's statement of
    what the design can support says it once for the report.
    """
    tested = table.filter(pl.col("verdict") != "rate-capped") if table.height else table
    if tested.is_empty() or not (tested["verdict"] == "not testable at this n").all():
        return None
    family, smallest = int(table["family"][0]), tested["p_min"].min()
    if "look_level" in tested.columns and tested["look_level"].is_not_null().any():  # repeated until settled
        return Caveat(
            TOO_FEW,
            f"No comparison can reach the level its look may spend with these runs (the smallest p any of them "
            f"allows is {smallest:.3g}, the largest level {tested['look_level'].max():.3g}): the comparison "
            "describes, it cannot test.",
        )
    corrected = f", {min(1.0, family * smallest):.3g} after correction" if family > 1 else ""
    return Caveat(
        TOO_FEW,
        f"No comparison can reach α with these runs (the smallest p any of them allows is {smallest:.3g}"
        f"{corrected}): the comparison describes, it cannot test; {runs_to_test(family, alpha)} runs per "
        "configuration would make every row testable.",
    )


#: how the comparison page's runs-to-settle plan is made (:func:`benchlib.stats.compare.runs_to_settle`), said
#: where the page has a plan
SETTLE_METHOD = (
    "A plan, not a promise: for each comparison, about how many runs per side would give it a verdict (the "
    "change's interval clear of the practical band: outside it for *improved* or *regressed*, inside it for "
    "*equivalent*) 80% of the time if the spread and the change stay as these runs measured them, with the "
    "family's correction and at least the runs the exact test needs. A few runs measure the spread loosely, so a "
    "second figure plans with the largest spread they allow (its 80% upper bound): expect the runs needed "
    "between the two."
)


def settle_why(row: dict) -> str:
    """Say why a :func:`~benchlib.stats.compare.runs_to_settle` row asks for its runs, or cannot say how many."""
    reason = row["reason"]
    if reason == "rate-capped":
        return "rate-capped: more runs would measure the cap again; run it uncapped to test the setting"
    if reason == "one run a side":
        return f"one run per side has no spread to plan from: run each {row['floor']} times, then ask again"
    goal = f"to show the change {reason} the ±{100 * row['band']:g}% band"
    if row["runs"] is None:  # near the band's edge, or a wide spread: no plan within reach
        return f"{goal}: more than {SETTLE_MOST:,} runs per side"
    return goal


def with_settle_why(settle: pl.DataFrame) -> pl.DataFrame:
    """Return :func:`~benchlib.stats.compare.runs_to_settle`'s rows with ``why`` in words for its codes."""
    if settle.is_empty() or "reason" not in settle.columns:  # empty, or said already
        return settle
    whys = [settle_why(row) for row in settle.iter_rows(named=True)]
    return settle.with_columns(pl.Series("why", whys, dtype=pl.String)).drop("reason", "floor", "band", "power")


def two_level_note(row: dict) -> str:
    """Say a :func:`~benchlib.stats.compare.two_level_table` row's plan: what a run costs, what limits the plan."""
    if row["check"] == "too few runs":
        return "a dimensioning study needs at least 2 runs of at least 2 iterations each"
    if row["runs_add_variance"]:
        note = f"a run costs {row['cost_ratio']:g} iterations"  # T1² and T2² are columns of their own
    else:
        note = (
            "runs add no variance beyond their iterations (T2² ≤ 0): more iterations per run buy precision as "
            "well as more runs, so they are kept as they are"
        )
    if row["check"] == "too few iterations":
        note += (
            f"; fewer than {LAG_FROM} iterations per run are too few to check that they are independent: "
            "a first plan, to be redone from longer runs"
        )
    elif row["check"] == "autocorrelated":
        note += f"; iterations are autocorrelated (lag-1 r = {row['lag1']:.2f}): take the runs as a lower bound"
    return note


def two_level_notes(plan: pl.DataFrame) -> pl.DataFrame:
    """Return :func:`~benchlib.stats.compare.two_level_table`'s rows with ``note`` for its codes."""
    if plan.is_empty():
        return plan
    notes = [two_level_note(row) for row in plan.iter_rows(named=True)]
    return plan.with_columns(pl.Series("note", notes, dtype=pl.String)).drop("cost_ratio", "runs_add_variance", "check")


def geomean_line(table: pl.DataFrame, *, by: list[str]) -> str:
    """Return benchstat's summary line for a comparison table as a Markdown list item ("" when it has none).

    Over the rows that test the setting (rate-capped rows measure the cap) and only when they are
    two or more. Changes that point both ways get no mean: +2% from -21% and +32% would hide both.
    """
    from benchlib.stats.compare import geomean_row

    kept = table.filter(pl.col("verdict") != "rate-capped") if table.height else table
    if kept.height < 2:
        return ""
    changes = kept["change_pct"].drop_nulls()
    which = f"the {kept.height} changes" + (" (the uncapped rows)" if kept.height < table.height else "")
    if changes.min() < 0 < changes.max():
        return (
            f"- **{which[0].upper()}{which[1:]}** point both ways ({changes.min():+.2f}% to {changes.max():+.2f}%): "
            "no one number sums them up; each row is its own finding."
        )
    mean = geomean_row(kept)
    if mean["change_pct"] is None:
        return ""
    varied = [b for b in by if b in kept.columns and kept[b].n_unique() > 1]  # what sets the averaged rows apart
    differ = f", over rows that differ in {', '.join(inline(b) for b in varied)}" if varied else ""
    rows = f"the {kept.height} {'uncapped ' if kept.height < table.height else ''}rows"
    return (
        f"- **Geometric means of the medians over {rows}**: {number(mean['median_baseline'])} against "
        f"{number(mean['median'])}, {mean['change_pct']:+.2f}%{differ}. This is benchstat's bottom row (the rates "
        f"are summarised, the ratios are not averaged), not a mean of the changes above, which run from "
        f"{changes.min():+.2f}% to {changes.max():+.2f}%; it is no verdict: each row is its own finding."
    )


def change_line(table: pl.DataFrame, *, by: list[str], factor: str, gap: float = 5.0) -> str:
    """Say where the change column departs from the two medians beside it (Markdown list item, "" where none does).

    The change is the median of every run-to-run ratio (Hodges-Lehmann), not the ratio of the two
    medians; one low or high run moves them apart. A reader who divides the medians should find why
    the column says otherwise: rows more than ``gap`` percentage points apart are named.
    """
    rows = table.filter(pl.col("runs_baseline") > 1, pl.col("median_baseline") > 0).with_columns(
        ((pl.col("median") / pl.col("median_baseline") - 1) * 100).alias("of_medians")
    )
    apart = rows.filter((pl.col("change_pct") - pl.col("of_medians")).abs() > gap)
    if apart.is_empty():
        return ""
    named = "; ".join(
        f"{', '.join(f'{inline(k)} {level(k, row[k])}' for k in [*by, factor])}: {signed(row['change_pct'])} against "
        f"{signed(row['of_medians'])}"
        for row in apart.iter_rows(named=True)
    )
    return (
        "- **The change is not the ratio of the medians.** It is the median of every run-to-run ratio "
        "(Hodges-Lehmann), which the spread of the runs moves away from the two medians' ratio; more than "
        f"{gap:g} points apart for {named} (the medians' ratio second)."
    )


def bytes_moved_line(table: pl.DataFrame, *, factor: str, baseline: str, by: list[str]) -> str:
    """Say :func:`benchlib.views.bytes_moved`'s comparison in bandwidth in one paragraph, "" where it is empty."""
    if table.is_empty():
        return ""
    rows = [
        f"{level(factor, row[factor])} {row['change_pct']:+.2f}%"
        + (f" ({', '.join(f'{inline(b)} {level(b, row[b])}' for b in by)})" if by else "")
        for row in table.iter_rows(named=True)
    ]
    return (
        f"**In the bytes moved.** The same runs compared in bandwidth (MiB/s), against {inline(factor)} "
        f"{level(factor, baseline)}: " + "; ".join(rows) + "."
    )


#: what each verdict says, for the verdicts a page's table holds (:func:`verdict_key`)
VERDICT_MEANINGS = {
    "improved": "a change the Holm-adjusted p calls significant, its interval wholly beyond the band the better way",
    "regressed": "a change the Holm-adjusted p calls significant, its interval wholly beyond the band the worse way",
    "equivalent": "the change's interval lies wholly within the band",
    "inconclusive": "neither: the interval is not wholly within the band, nor a significant change wholly beyond it",
    "not testable at this n": "no data could have reached significance with these runs",
    "descriptive only": "one run a side",
    "rate-capped": "every run on both sides ran under a rate cap (the row measures the cap)",
    "confounded with time": "one side's runs all came before the other's (a drift over time would read the same)",
}


#: the meanings that differ where the runs were repeated until the comparisons settled
SEQUENTIAL_MEANINGS = {
    "improved": "the change's interval at its look wholly beyond the band the better way",
    "regressed": "the change's interval at its look wholly beyond the band the worse way",
    "inconclusive": "neither: the interval at its look is not wholly within the band, nor wholly beyond it",
    "not testable at this n": "no data could have reached the level its look may spend with these runs",
}


def verdict_key(table: pl.DataFrame) -> str:
    """Say what the verdicts a comparison table holds mean, each once, in :data:`VERDICTS`' order ("" for none).

    A verdict the design summary already explains (:func:`~benchlib.stats.compare.summarised_verdicts`) is
    not said again. Where a band verdict is possible, the band and the family's confidence are said.
    """
    held = set(table["verdict"].to_list()) - summarised_verdicts(table) if table.height else set()
    said = [f"*{v}*: {VERDICT_MEANINGS[v]}" for v in VERDICTS if v in held]
    if not said:
        return ""
    banded = held & {"improved", "regressed", "equivalent", "inconclusive"}
    if "look_level" in table.columns and table["look_level"].is_not_null().any():  # said by design_summary
        said = [f"*{v}*: {SEQUENTIAL_MEANINGS.get(v, VERDICT_MEANINGS[v])}" for v in VERDICTS if v in held]
        return (
            "**Verdicts.** "
            + "; ".join(said)
            + "."
            + (f" The band is ±{100 * table['band'][0]:g}% (a change within it counts as none)." if banded else "")
        )
    family = (
        f" The band is ±{100 * table['band'][0]:g}% (a change within it counts as none), judged on each change's "
        "interval at 1 - 0.05/m for a table of m comparisons, so that the table's band verdicts are all right at "
        "least 95% of the time."
        if banded
        else ""
    )
    return "**Verdicts.** " + "; ".join(said) + "." + family
