"""The write-up's claims in words: what :func:`benchlib.views.claim_table` found, answer first."""

from __future__ import annotations

import polars as pl


def claims_headline(table: pl.DataFrame) -> str:
    """Say a claims page's answer first: how many claims hold, then each one the data contradict, in its words.

    From :func:`benchlib.views.claim_table` of any claims file: :func:`claim_counts`, then one line per
    FAIL (its id and section, what the write-up says, what it states and what the data give).
    """
    failed = table.filter(pl.col("verdict") == "FAIL")
    said = claim_counts(table)
    if failed.is_empty():
        return said
    lines = []
    for row in failed.iter_rows(named=True):
        where = f" ({row['section']})" if row.get("section") else ""
        stated = f"; stated {row['stated']}" if row.get("stated") else ""
        lines.append(f"- **Claim {row['claim']}**{where}: {row['says']} Recomputed: {row['recomputed']}{stated}.")
    return said + "\n\nWhere the data disagree with the write-up:\n\n" + "\n".join(lines)


def claim_counts(table: pl.DataFrame) -> str:
    """Say how many claims of :func:`benchlib.views.claim_table` pass and which fail ("25 of 33 claims pass; ...").

    The FAILs that carry the claims file's reading of their words are named after them.
    """
    failed = table.filter(pl.col("verdict") == "FAIL")
    undecided = table.filter(pl.col("verdict") == "UNSUPPORTED")["claim"].to_list()
    said = f"{(table['verdict'] == 'PASS').sum()} of {table.height} claims pass"
    if failed.height:
        said += (
            f"; {failed.height} fail: claims {', '.join(failed['claim'])} (each with its evidence in the claims table)"
        )
    if undecided:
        which = f"claim{'s' if len(undecided) > 1 else ''} {', '.join(undecided)}"
        said += f"; the data can neither bear out nor contradict {which}"
    said += "."
    read = failed.filter(pl.col("reading"))["claim"].to_list() if "reading" in failed.columns else []
    if read:
        said += (
            f" Of the FAILs, {', '.join(read)} say how the claims file reads their words (*Read as*, after what "
            "benchlib computed): weigh each FAIL with its reading."
        )
    return said


def conclusions_words(table: pl.DataFrame) -> str:
    """Say what the failed claims do to each of the write-up's conclusions (:func:`benchlib.views.conclusion_table`).

    One line per conclusion: it stands, or which claims it rests on fail (what they recompute to is said once,
    in :func:`claims_headline`), or which the data cannot decide. "" where the claims file states none.
    """
    if table.is_empty():
        return ""
    lines = []
    for row in table.iter_rows(named=True):
        rests = ", ".join(row["rests_on"])
        if row["failed"]:  # what each recomputed to is in the lines above: named here, not said twice
            said = f"Weakened by {_claims(row['failed'])}, which fail{'s' if len(row['failed']) == 1 else ''}"
        elif row["undecided"]:
            said = f"Open: the data cannot decide {_claims(row['undecided'])}"
        else:
            said = f"Stands: {_claims(row['rests_on'])} {'hold' if len(row['rests_on']) > 1 else 'holds'}"
        said += f" (it rests on {rests})" if row["failed"] or row["undecided"] else ""
        lines.append(f"- **{row['says']}** {said}.")
    weak = int((table["status"] == "weakened").sum())
    head = f"## The write-up's conclusions\n\n{weak} of its {table.height} conclusions rest on a claim that fails."
    return head + "\n\n" + "\n".join(lines)


def _claims(ids: list[str]) -> str:
    """Say claim ids: ``claim 4a``, ``claims 9, 24b``."""
    return f"claim{'s' if len(ids) > 1 else ''} {', '.join(ids)}"
