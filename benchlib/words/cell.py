"""One configuration's page in words: its members' figures and how evenly they shared."""

from __future__ import annotations

import polars as pl

from benchlib.stats import jain_expr, max_min_ratio_expr
from benchlib.stats.fairness import CLEAR_LEAD, UNEVEN_FROM
from benchlib.tables import inline, levels_words, number, span


def describe_cell(
    members: pl.DataFrame,
    value: str,
    levels: dict,
    member: str = "vm",
    *,
    capped: bool = False,
    run_totals: pl.Series | None = None,
    within: dict | None = None,
) -> str:
    """One sentence of prose with the cell's numbers, computed here so the text cannot drift from the data.

    ``within``: the cell's row of :func:`fairness` (fairness within each run, summarised over runs); the
    sentence then gives the fairness page's figures, the median run's, so the two pages cannot disagree,
    and names the highest member only when it was highest in every run and stood out (1.1x the lowest
    or more). Without it, the spread of ``members`` (one value per member) is given. ``capped``: the
    cell's jobs had a rate cap (:func:`benchlib.views.cell_capped`); the sentence then says that equal values are the
    cap's doing. ``run_totals``: the cell's run totals (:func:`benchlib.views.run_totals`); the total then is their
    median, the figure the comparison and interaction pages use, not the sum of the members' medians.
    """
    where = levels_words(levels)
    lead = f"**{where}**: " if where else ""  # a study of one configuration names none: no empty bold
    who, what = inline(member), inline(value)
    cap = (
        " The jobs were rate-capped (fio's rate or rate_iops): equal shares are the cap's doing, and the "
        "totals say what the cap allowed, not what the storage could do."
        if capped
        else ""
    )
    total = members.select(pl.col(value).sum()).item()
    total = f"{total:,.0f}" if total is not None else "no value"
    every = f"{what} of all {who}s added"
    runs = run_totals.drop_nulls().len() if run_totals is not None else 0
    if runs:
        total = f"{run_totals.median():,.0f}"
        every = f"{what} of all {who}s together, " + (
            "in its one run"
            if runs == 1
            else f"its 2 runs' totals ({run_totals.min():,.0f} and {run_totals.max():,.0f}, lower first); their mean"
            if runs == 2  # the median of two is their mean, a figure neither run had
            else (
                f"the median of {runs} runs' totals "
                f"(not the sum of the {who}s' medians: those come from different runs)"
            )
        )
    if members.height < 2:
        named = f" ({members[member][0]})" if members.height else ""
        alone = f"{members.height} {who}{named}, {what} {total}"
        return f"{lead}{alone}; fairness between {who}s needs two or more.{cap}"
    if within is None or within.get("jain_median") is None:
        stats = members.select(
            jain_expr(pl.col(value)).alias("jain"),
            max_min_ratio_expr(pl.col(value)).alias("spread"),
            pl.col(member).sort_by(value).last().alias("top"),
        ).row(0, named=True)
        basis = "in its one run" if runs == 1 else "by their medians over runs"
        return (
            f"{lead}{members.height} {who}s; {basis}, the highest ({stats['top']}) got "
            f"{stats['spread']:.2f} times the lowest, Jain's index {stats['jain']:.4f}; {every}: {total}.{cap}"
        )
    said = _fairness_words(within, who, capped=capped)
    return f"{lead}{members.height} {who}s; {said}; {every}: {total}.{cap}"


def _fairness_words(within: dict, who: str, *, capped: bool) -> str:
    """:func:`describe_cell`'s words for how evenly the members shared, from the fairness page's row."""
    within_pct = f"{(CLEAR_LEAD - 1) * 100:g}"  # a tie, not a lead

    spread, jain = within["max_min_median"], within["jain_median"]
    stands_out = spread is not None and spread >= UNEVEN_FROM and not capped
    if within["runs_judged"] == 1:
        led = stands_out and within.get("top") and not within.get("close_runs")  # within 2% of the next: no leader
        top = f"the highest ({within['top']})" if led else "the highest"
        said = f"in its one run, {top} got {spread:.2f} times the lowest, Jain's index {jain:.4f}"
    elif within["runs_judged"] == 2 and within["max_min_best"] is not None:
        # the median of two is their mean, a figure neither run had: both runs' figures instead
        low, high = f"{within['max_min_best']:.2f}", f"{within['max_min_worst']:.2f}"
        ratios = f"{low} times the lowest in both" if low == high else f"{low} to {high} times the lowest"
        jains = span(f"{within['jain_worst']:.4f}", f"{within['jain_best']:.4f}", same=" in both runs")
        said = f"in its 2 runs, the highest got {ratios}, Jain's index {jains}"
    else:
        said = (
            f"in the median of {within['runs_judged']} runs, the highest got {spread:.2f} times the lowest, "
            f"Jain's index {jain:.4f} (worst run {within['jain_worst']:.4f})"
        )
    if within["runs_judged"] > 1:
        close = within.get("close_runs") or 0
        clear = within["runs_judged"] - close
        if stands_out and within.get("top"):
            said += f"; {within['top']} was highest in every run"
        elif stands_out and within["winners"] == within["runs_judged"]:
            said += f"; each run had a different {who} highest"
        elif stands_out and within["winners"] > 1:
            said += f"; {within['winners']} different {who}s were highest across the {clear} runs with a clear leader"
        if stands_out and close and not within.get("top"):
            said += f"; in {close} of the runs the two highest were within {within_pct}% of each other, no clear leader"
    if spread is not None and spread < UNEVEN_FROM and not capped:
        said += f"; within {UNEVEN_FROM:g}x of each other, no {who} stands out"
    return said


def sync_depth_note(found: dict | None) -> str:
    """Say that a synchronous engine held one I/O per job whatever iodepth was set, in Markdown.

    ``found``: :func:`benchlib.views.sync_depth`; "" where it found nothing.
    """
    if not found:
        return ""
    held = found["held"]
    seen = f" (Little's law on these runs: {number(held)} in flight per {inline('vm')}, the median)" if held else ""
    return (
        f"**One I/O at a time.** The jobs set iodepth={found['depth']:g}, but {', '.join(found['engines'])} is a "
        f"synchronous engine: each job holds one I/O at a time{seen}. Against an asynchronous engine at that "
        "depth, the engine and the concurrency change together."
    )


def _run_stall(run: dict) -> str:
    """Say one run every member met its slowest I/Os in (:func:`benchlib.views.stalls`' ``runs`` row)."""
    several = run["members"] > 1
    who = f"every {inline('vm')}'s slowest I/O" if several else "its slowest I/O"
    took = number(run["low"]) if run["low"] == run["high"] else f"{number(run['low'])}–{number(run['high'])}"
    typical, others = run["typical"], run["others"]
    against = (
        f"the other run's, {number(typical)} ms"
        if others == 1
        else f"{number(run['others_low'])} and {number(run['others_high'])} ms, their mean {number(typical)}"
        if others == 2  # the median of two is their mean
        else f"their median, {number(typical)} ms"
    )
    text = (
        f"**The slowest I/Os of {run['run']}.** In it, {who} took {took} ms, {run['low'] / typical:.0f} times "
        f"the slowest of this configuration's other {'run' if others == 1 else 'runs'} ({against})"
        + (f": every {inline('vm')} met the cause, so it was shared (the storage or the machine)." if several else ".")
    )
    if run["lowest"]:
        low, high, n = run["others_iops"]
        rest = f"the other {number(low)}" if n == 1 else f"the others {number(low)} to {number(high)}"
        text += f" Its total, {number(run['iops'])} IOPS, is the lowest of the configuration's runs ({rest})."
    return text


def _member_stall(group: dict) -> str:
    """Say the members of one run whose slowest I/O stood out (:func:`benchlib.views.stalls`' ``members`` row)."""
    stood, many = group["stood"], len(group["stood"]) > 1
    text = (
        f"**The slowest I/O{'s' if many else ''} of {' and '.join(str(one['vm']) for one in stood)} in "
        f"{group['run']}.** "
        + "; ".join(
            f"{one['vm'] + ' ' if many else 'It '}took {number(one['high'])} ms, {one['times']:.0f} times the "
            f"median of the slowest I/Os of every other {inline('vm')} and run of this configuration "
            f"({number(one['typical'])} ms)"
            for one in stood
        )
    )
    if group["rest_low"] is not None:
        low, high = number(group["rest_low"]), number(group["rest_high"])
        whose = "their" if many else f"{stood[0]['vm']}'s"
        text += (
            f"; the whole run was slower: the other {inline('vm')}s' slowest took {span(low, high)} ms, against "
            f"a median of {number(group['calm'])} ms in the other runs, and {whose} stall was the worst of it"
            if group["slower"]
            else f"; the other {inline('vm')}s of that run met no such I/O (their slowest {span(low, high)} ms)"
        )
    return text + "."


def stalls_note(found: dict[str, list[dict]]) -> str:
    """Say the runs and members of one configuration that met slow I/Os the others did not (Markdown).

    ``found``: :func:`benchlib.views.stalls`; "" where nothing stood out.
    """
    return "\n\n".join([*map(_run_stall, found["runs"]), *map(_member_stall, found["members"])])


def member_caption(table: pl.DataFrame) -> str:
    """Say how a cell's member table was summarised over runs (:func:`benchlib.views.member_table`), "" for one run."""
    runs = table["runs"].max() if "runs" in table.columns and table.height else None
    if not runs or runs < 2:
        return ""
    two = " (of 2 runs, their mean)" if runs == 2 else ""
    return (
        f"Each figure is the median over the {inline('vm')}'s runs{two}, column by column: a row need not be "
        "any one run, so its figures need not agree as one run's do (IOPS × mean latency = the I/Os held at once)."
    )


def runs_without_histograms_note(runs: list[str]) -> str:
    """Say which runs a configuration's tail table leaves out and why; "" where it leaves none out."""
    if not runs:
        return ""
    named = ", ".join(runs[:5]) + (f" and {len(runs) - 5} more" if len(runs) > 5 else "")
    return (
        f"Not in it: {named} (no latency histogram in {'its' if len(runs) == 1 else 'their'} output: fio's normal "
        "and plain json output print percentiles, not the histogram this table pools)."
    )
