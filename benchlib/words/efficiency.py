"""CPU efficiency in words: which level of a setting did the most I/O per CPU."""

from __future__ import annotations

import polars as pl

from benchlib.tables import inline, label


def efficiency_finding(table: pl.DataFrame, setting: str, value: str = "iops_per_cpu_pct") -> str:
    """Say in one sentence which level of ``setting`` did the most I/O per CPU, across the configurations.

    From :func:`benchlib.views.efficiency_table`: per configuration of the other factors, the level with the
    highest ``value`` and how many times the lowest it is. Descriptive only: medians over VMs, with no test of
    significance.
    """
    rows = table.drop_nulls(value).filter(pl.col(value) > 0)
    wins: dict[str, int] = {}
    ratios, compared, last = [], 0, set()  # compared: configurations with two levels
    for part in rows.partition_by("configuration", maintain_order=True):
        if part.height < 2:  # one level: nothing to compare in this configuration
            continue
        ordered = part.sort(value, descending=True)
        compared += 1
        wins[str(ordered[setting][0])] = wins.get(str(ordered[setting][0]), 0) + 1
        ratios.append(ordered[value][0] / ordered[value][-1])
        last.add(str(ordered[setting][-1]))
    what = label(value)
    if not compared:
        return (
            f"**{what}**: no configuration has two levels of {label(setting)} with a CPU figure, so nothing is "
            "compared."
        )
    span = f"{min(ratios):.2f}x" if min(ratios) == max(ratios) else f"{min(ratios):.2f}x to {max(ratios):.2f}x"
    most = max(wins.values())
    leaders = sorted(level for level, n in wins.items() if n == most)
    if len(leaders) == 1 and most == compared and len(last) == 1:  # one level always first, one always last
        span += f" {inline(setting)} {last.pop()}'s"
        where = "in the one configuration" if compared == 1 else f"in {most} of {compared} configurations"
        each = "" if compared == 1 else " in each"
        return (
            f"**{what}**: {label(setting)} {leaders[0]} was highest {where}, with {span} {what}{each}. "
            f"Medians over {inline('vm')}s, descriptive only: no significance test of CPU efficiency here."
        )
    if len(leaders) == 1:
        who = f"{label(setting)} {leaders[0]} was highest in {most} of {compared} configurations"
    else:  # a tie names every leader: no level is "the" most efficient
        each = ", ".join(f"{level} in {most}" for level in leaders)
        who = f"the highest {label(setting)} differs by configuration ({each} of {compared})"
    return (
        f"**{what}**: {who}; in each configuration the highest level had {span} the lowest level's figure. "
        f"Medians over {inline('vm')}s, descriptive only: no significance test of CPU efficiency here."
    )
