"""Two factors together in words: what :func:`benchlib.views.interaction` found of each group's test."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import polars as pl

from benchlib.stats.factorial import INTERACTION_CALLS, at_floor
from benchlib.tables import inline, levels_words

if TYPE_CHECKING:
    from benchlib.runner.repetitions import SettleRule
    from benchlib.stats.sequential import Looks


def _p(p: float) -> str:
    """Say a p to four decimals; one that rounds to 0 is said as below 0.0001, not as 0."""
    return f"{p:.4f}" if p >= 0.00005 else "< 0.0001"


def test_note(test: Mapping, *, x: str, trace: str) -> str:
    """Say one group's interaction test (a row of :func:`benchlib.views.interaction`'s tests) at the n it had."""
    verdict = test["verdict"]
    if verdict == "rate-capped":
        return "every run was rate-capped: the cap set the totals, so no interaction can show here"
    if verdict == "one level":
        return f"{inline(x)} or {inline(trace)} has one level here: nothing to interact"
    if verdict == "combinations without runs":
        return f"{test['missing']} combinations of {inline(x)} and {inline(trace)} have no runs"
    if verdict == "one run per combination":
        return "one run per combination: the interaction cannot be told from run-to-run noise"
    if verdict == "a zero total":
        return "a run total of 0: the test compares changes as ratios (on the log scale), which 0 has none of"
    runs, family = f"{test['per_combination']} runs per combination", test["family"]
    said = (
        f"p = {test['p_holm']:.4f} after Holm over {family} test{'s' if family != 1 else ''}, α = 0.05; before it, "
        f"permutation {test['p_permutation']:.4f} and ANOVA-type {_p(test['p_spread'])}, the larger counting"
    )
    if verdict == "interacts":
        smallest = f"; about the smallest p the permutation test can give at {runs}"
        floor = smallest if at_floor(test["p_permutation"], test["floor"]) else ""
        return f"the effect of {inline(x)}, as a ratio, depends on {inline(trace)} ({said}{floor})"
    if verdict == "cannot tell":
        return (
            f"cannot be told at {runs} (measured p = {test['p']:.4f}): the permutation test gives even an interaction "
            f"without run-to-run noise p = {test['floor']:.4f}, {min(1.0, test['floor'] * family):.4f} "
            f"after Holm over {family} tests; more runs per combination can tell"
        )
    return f"no evidence at this n that the effect of {inline(x)}, as a ratio, depends on {inline(trace)} ({said})"


#: how the interaction is tested, said once on a page where a group's runs were tested
METHOD = (
    "**How it is tested.** On the run totals (the experimental unit), on the log scale, so that a factor "
    "multiplying every figure by one ratio is no interaction by itself; an interaction is called only where two "
    "tests both find it: the Freedman-Lane permutation test (9,999 random permutations) and Brunner, Dette and "
    "Munk's ANOVA-type test (each combination its own spread). Alone, the permutation test called an interaction "
    "in 10% of simulated 2 x 2 designs without one (3 runs a combination, one spreading four times as wide, "
    "α = 0.05); the two together in 5%."
)


def tests_markdown(tests: pl.DataFrame, *, x: str, trace: str, by: list[str]) -> str:
    """Say every group's test, one Markdown bullet each, named by its levels of ``by``.

    Then how it is tested (:data:`METHOD`), where any group's runs were.
    """
    bullets = "\n".join(
        f"- **{levels_words({b: row[b] for b in by}) or 'all runs'}**: {test_note(row, x=x, trace=trace)}."
        for row in tests.iter_rows(named=True)
    )
    tested = tests.height and tests["verdict"].is_in(INTERACTION_CALLS).any()
    return bullets + (f"\n\n{METHOD}" if tested else "")


def settled_caveat(found: tuple[SettleRule, Looks] | None) -> str:
    """Say that the runs were repeated until a factor's comparisons settled, which the test does not know ("")."""
    if found is None:
        return ""
    rule, _ = found
    return (
        f"These runs were repeated until {inline(rule.factor)}'s comparisons settled: how many runs each "
        "combination has depends on what its runs showed, and the tests above read the counts as fixed; a p "
        "near α says less than it would in a fixed design."
    )
