"""Findings, then words: nothing under ``benchlib.stats`` knows a sentence.

The statistics return numbers, intervals, verdict codes and flags; the sentences a page says of them live in
:mod:`benchlib.words` (and the pages). Read from the source itself, so a sentence added to a statistic
fails here, whatever it says: no text built outside an error message, no function that returns ``str``
beyond a code of a fixed vocabulary, no import of the modules that hold words.
"""

from __future__ import annotations

import ast
from pathlib import Path

from benchlib.stats.compare import cliffs_magnitude

STATS = Path(__file__).resolve().parents[1] / "benchlib" / "stats"

#: text a statistic may build, each with why it is no sentence: (file, function) -> reason
ALLOWED_TEXT = {
    ("compare.py", "_verdicts"): "benchstat's delta notation: a number with its sign and unit (+1.23%), or ~",
}
#: functions that return a code of a fixed vocabulary (a verdict, a magnitude), never text built from figures
CODES = {
    ("compare.py", "cliffs_magnitude"),
    ("compare.py", "change_verdict"),
    ("compare.py", "_verdict"),
    ("factorial.py", "interaction_call"),
    ("order.py", "sides_in_time"),
}
#: modules whose business is words
WORDY = ("benchlib.words", "benchlib.tables", "benchlib.views", "benchlib.caveats", "benchlib.report_html")


def _functions(tree: ast.Module) -> dict[int, str]:
    """Map every node id to the name of the function it is in."""
    owner = {}
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef):
            for node in ast.walk(fn):
                owner.setdefault(id(node), fn.name)  # the outermost function that holds it
    return owner


def _beside_a_raise(tree: ast.Module) -> set[int]:
    """Return the ids of nodes in a block that raises: text built there is an error message."""
    ids = set()
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and any(isinstance(s, ast.Raise) for s in block):
                for statement in block:
                    ids |= {id(sub) for sub in ast.walk(statement)}
    return ids


def test_no_statistic_builds_a_sentence() -> None:
    found = []
    for path in sorted(STATS.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        owner, erring = _functions(tree), _beside_a_raise(tree)
        for node in ast.walk(tree):
            where = (path.name, owner.get(id(node), "<module>"))
            built = isinstance(node, ast.JoinedStr) or (
                isinstance(node, ast.Call) and ast.unparse(node.func) in ("pl.format", "str.format")
            )
            if built and id(node) not in erring and where not in ALLOWED_TEXT:
                found.append(f"{path.name}:{node.lineno} in {where[1]}: {ast.unparse(node)[:80]}")
            returns = ast.unparse(node.returns) if isinstance(node, ast.FunctionDef) and node.returns else ""
            if returns in ("str", "str | None") and (path.name, node.name) not in CODES:
                found.append(f"{path.name}:{node.lineno}: {node.name} returns {returns}")
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(WORDY):
                found.append(f"{path.name}:{node.lineno}: imports {node.module}")
    assert not found, "sentences belong in benchlib.words:\n" + "\n".join(found)


def test_the_code_functions_return_their_vocabulary_only() -> None:
    assert {cliffs_magnitude(d) for d in (-1, -0.4, -0.2, 0, 0.1, 0.2, 0.4, 1)} == {
        "negligible",
        "small",
        "medium",
        "large",
    }


def test_an_interaction_call_is_one_of_its_codes() -> None:
    from benchlib.stats.factorial import INTERACTION_CALLS, interaction_call

    grid = [(p, floor, family) for p in (0.001, 0.05, 0.3) for floor in (0.002, 0.03) for family in (1, 2)]
    calls = [interaction_call(*point) for point in grid]
    assert set(calls) == set(INTERACTION_CALLS)


def test_a_run_order_is_one_of_its_codes() -> None:
    from datetime import datetime, timedelta

    from benchlib.stats.order import ORDERS, sides_in_time

    at = [datetime(2026, 1, 1) + timedelta(minutes=m) for m in range(6)]
    found = {sides_in_time(at[:3], at[3:]), sides_in_time(at[::2], at[1::2]), sides_in_time(at[:3], [None])}
    assert found == {*ORDERS, None}


def test_no_view_returns_a_sentence() -> None:
    """The views select, join and find; the sentences pages say of their findings are in benchlib.words. Only the
    study's word for its members (``VM``, ``host``) is text a view returns."""
    tree = ast.parse((STATS.parent / "views.py").read_text(encoding="utf-8"))
    texts = [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and node.returns is not None
        and ast.unparse(node.returns) in ("str", "str | None")
    ]
    # the members' word, and _condition: a code of what a column sets ("block size"), to count it once
    assert texts == ["_condition", "member_word", "_member_noun"], texts
