"""Fairness in words: what :func:`benchlib.stats.fairness.fairness_over_runs` found, said in one paragraph."""

from __future__ import annotations

import polars as pl

from benchlib.stats.fairness import UNEVEN_FROM, UNFAIR_BELOW
from benchlib.tables import inline, levels_words


def fairness_headline(table: pl.DataFrame, by: list[str]) -> str:
    """Say in one paragraph what :func:`~benchlib.stats.fairness.fairness_over_runs` found.

    The least fair configuration and its worst run, runs below the threshold, rotating winners, and
    the configurations a rate cap made equal.
    """
    if table.is_empty():
        return "No configuration has members to compare."
    if table["jain_median"].is_null().all():
        return (
            "Every run has one member (VM or host): fairness is between members that ran at once, "
            "so these runs cannot show it."
        )
    worst = table.drop_nulls("jain_worst").sort("jain_worst").row(0, named=True)  # as least_fair picks it
    where = levels_words({k: worst[k] for k in by}, within=True)
    runs = int(table["runs_judged"].sum())
    text = ["Judged per share (each VM's throughput over its declared shares)."] if table["per_share"].any() else []
    text += [
        f"Least fair: {where}, Jain's index {worst['jain_worst']:.4f} in its one run."
        if worst["runs_judged"] == 1
        else f"Least fair: {where}, Jain's index {worst['jain_worst']:.4f} in its less fair run "
        f"({worst['jain_best']:.4f} in the other)."
        if worst["runs_judged"] == 2  # the median of two is their mean, a figure neither run had
        else f"Least fair: {where}, Jain's index {worst['jain_worst']:.4f} in its worst run "
        f"(median {worst['jain_median']:.4f} over {worst['runs_judged']} runs)."
    ]
    free = table.filter(pl.col("capped_runs") == 0)  # a cap evens its runs: they would only pad the count
    capped_runs = runs - int(free["runs_judged"].sum())
    capped = table.filter(pl.col("capped_runs") > 0).height
    if capped_runs and free.height:  # the cap said once, with the runs it leaves out
        text.append(
            f"{int(free['runs_below'].sum())} of the {runs - capped_runs} uncapped runs fell below Jain "
            f"{UNFAIR_BELOW}; the {capped_runs} runs of the {capped} rate-capped configurations are left out: "
            "their equal shares are the cap's doing."
        )
    else:
        text.append(f"{int(table['runs_below'].sum())} of {runs} runs fell below Jain {UNFAIR_BELOW}.")
    alone = int((table["runs"] - table["runs_judged"]).sum())
    if alone:
        text.append(f"{alone} runs had one member only and are not judged.")
    # who led only means something where the shares differed: among equal shares the top is noise
    uneven = table.filter(
        pl.col("capped_runs") == 0, pl.col("runs_judged") > 1, pl.col("max_min_median") >= UNEVEN_FROM
    )
    rotating = uneven.filter(pl.col("winners") > 1).height
    who = inline("vm")  # VM, or host where the study's members are fio servers (tables.name_members)
    if rotating:
        uncapped = "uncapped " if capped_runs else ""  # a study without caps has no other kind
        which = (
            f"In {rotating} of the {uneven.height} {uncapped}configurations"
            if uneven.height > 1
            else f"In the one {uncapped}configuration"
        )
        text.append(
            f"{which} whose highest {who} got {UNEVEN_FROM:g}x the lowest or more, a different {who} came out on "
            "top in different runs."
        )
    if capped and not (capped_runs and free.height):
        text.append(f"Rate-capped configurations: {capped}; their equal shares are the cap's doing.")
    return " ".join(text)
