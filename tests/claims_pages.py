"""The property the claims are held to: for every configuration of a study, what ``verify`` computes over
its selection is what the pages show for it (the comparison's run totals, the fairness page's indices)."""

from __future__ import annotations

import polars as pl
import pytest

from benchlib import views
from benchlib.claims import UNSUPPORTED, Claim, claims_frame, configuration_columns, verify
from benchlib.store import ProcessedStudy, load_study_tables


def _claim(compute: str, metric: str, where: dict) -> Claim:
    return Claim(
        id=compute, section="", says="", stated="", metric=metric, compute=compute, where=where, expect={"above": 0}
    )


def _figure(recomputed: str) -> float:
    return float(recomputed.split(" ")[0].rstrip("x").replace(",", ""))


def assert_claims_agree_with_pages(opened: ProcessedStudy, metric: str, page_metric: str | None = None) -> int:
    """Check every configuration of ``opened``; return how many had a fairness figure (two members or more).

    ``page_metric``: the pages' column for ``metric`` where the claims name it otherwise (``bandwidth_mib_s``
    against ``bandwidth_bytes_per_s``, scaled).
    """
    tables = load_study_tables(opened.processed)
    frame = claims_frame(tables).filter(~pl.col("is_aggregate"))
    keys = list(configuration_columns(frame, tuple(opened.study.factors)))
    column = page_metric or metric
    scale = 1024 * 1024 if column == "bandwidth_bytes_per_s" and metric == "bandwidth_mib_s" else 1
    medians = views.run_totals(opened, column, keys).group_by(keys).agg(pl.col(column).median())
    fair = views.fairness(opened, column, by=keys)
    assert medians.height > 0
    judged = 0
    for row in medians.iter_rows(named=True):
        where = {k: row[k] for k in keys if row[k] is not None}
        total, jain, spread = verify(tables, [_claim(c, metric, where) for c in ("sum", "jain", "max_over_min")], {})
        assert _figure(total.recomputed) == pytest.approx(row[column] / scale, rel=5e-3), (where, total.recomputed)
        page = fair.filter(*(pl.col(k).eq_missing(row[k]) for k in keys))
        shown = page["jain_median"][0] if page.height else None
        if shown is None:  # one member: the page says no index, and so does the claim
            assert jain.verdict == spread.verdict == UNSUPPORTED, (where, jain.recomputed)
            continue
        judged += 1
        assert _figure(jain.recomputed) == pytest.approx(shown, abs=5e-3), (where, jain.recomputed)
        assert _figure(spread.recomputed) == pytest.approx(page["max_min_median"][0], rel=5e-3), where
    return judged
