"""Golden words: what the report's index says first, for the bundled studies and fio's own sample, as text.

The tests elsewhere assert findings (numbers, verdict codes, flags); these few pages guard the wording a
reader meets first: the answers (what each setting did, the write-up's claims) and the design's statement.
A change of wording shows here as a diff of the golden file; after reading it, write the new text with
``BENCHLIB_GOLDEN=update python3 tasks.py test -k golden`` and commit it with the change.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

import pytest

from benchlib.store import open_study

GOLDEN = Path(__file__).parent / "golden"


def _text(markup: str) -> str:
    """The words of an HTML fragment, one block a line, as a reader sees them."""
    blocks = re.sub(r"</?(strong|em|a|code)\b[^>]*>", "", re.sub(r"</(p|li|h2|h3|tr)>", "\n", markup))
    return "\n".join(
        " ".join(html.unescape(re.sub(r"<[^>]+>", " ", line)).split()) for line in blocks.splitlines()
    ).strip()


def _index_first(study: str) -> str:
    """The index's answers and design, as :func:`benchlib.pipeline.front_matter` and the index say them."""
    from benchlib import fit
    from benchlib.pipeline import front_matter
    from benchlib.report_html import _answers, _claims_answer, _together
    from benchlib.results import factor_answers
    from benchlib.views import claim_table, conclusion_table, interaction, study_words

    opened = open_study(study)
    with study_words(opened):
        front = front_matter(opened)
        claims = claim_table(opened) if (opened.study.folder / "claims.toml").is_file() else None
        together = ""
        try:  # the interaction page's tests, where the report has the page
            page = fit.fitted("interaction", opened, {})
        except fit.PageLeftOut:
            page = None
        if page is not None:
            _, tests = interaction(
                opened, page["value"], x=page["x"], trace=page["trace"], by=page["by"], only=page["only"]
            )
            found = {"tests": tests, "x": page["x"], "trace": page["trace"], "by": page["by"] or [], "page": "i.html"}
            together = _together(found)
        page_of_claims = "claims.html" if claims is not None else None
        conclusions = conclusion_table(opened, claims) if claims is not None else None
        told = _claims_answer(claims, page_of_claims, conclusions)
        said = _answers(factor_answers(opened), told, front["support"], together)
        return _text(said) + "\n\n" + front["design"] + "\n"


@pytest.mark.parametrize("study", ["pvscsi-vs-lsi", "loopback-fio", "fio-sample"])
def test_the_index_says_what_it_said(study: str) -> None:
    said = _index_first(study)
    golden = GOLDEN / f"{study}-index.txt"
    if os.environ.get("BENCHLIB_GOLDEN") == "update":
        golden.write_text(said, encoding="utf-8")
    assert golden.is_file(), f"no golden words yet: BENCHLIB_GOLDEN=update writes {golden}"
    assert said == golden.read_text(encoding="utf-8")
