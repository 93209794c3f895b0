"""Runs to doubt in words: what :func:`benchlib.views.implausible` found of each run, and its likely cause."""

from __future__ import annotations

import polars as pl

from benchlib.tables import inline, levels_words, number, span
from benchlib.views import FINDINGS_COLUMNS


def _finding_words(row: dict, value: str) -> str:
    """Say one :func:`implausible` finding as a clause (the run is named before it)."""
    rule, figure, reference = row["rule"], row["figure"], row["reference"]
    member = f"{inline('vm')} {row['member']}" if row.get("member") else "a member"
    if rule == "apart":
        against = "the other run's" if row["runs"] == 2 else f"the median of the configuration's {row['runs']} runs"
        if not figure or not reference:  # one of them did nothing: no ratio to give
            return f"its total {inline(value)} was {number(figure)}, against {number(reference)}, {against}"
        times = figure / reference
        how = f"{number(times, 2)} times" if times >= 1 else f"1/{number(1 / times, 2)} of"
        return f"its total {inline(value)}, {number(figure)}, is {how} {against}, {number(reference)}"
    if rule in ("too fast", "too fast, several"):
        from benchlib.stats.plausibility import FASTEST_DIRECT_NS

        under = f"under {reference / 1e3:g} µs"
        quicker = (
            f"quicker than a disk or SSD answers through the kernel ({under})"
            if reference == FASTEST_DIRECT_NS
            else f"quicker than the study says its storage answers ({under}, its fastest_direct_us)"
        )
        if rule == "too fast":
            return f"{member}'s median completion latency was {number(figure / 1e3)} µs with direct I/O, {quicker}"
        return f"the median completion latency of {row['member']} was {figure} µs with direct I/O, {quicker}"
    if rule == "idle device":
        whose = f"the device under {member}" if row.get("member") else "its device"
        done = number(int(reference))
        return f"{whose} counted {number(int(figure))} I/Os while fio completed {done} direct I/Os on it"
    if rule == "not steady":
        tried = f" in {number(figure)} s" if figure is not None else ""
        return (
            f"{member}'s workload was not steady{tried} of preconditioning (fio's steady-state criterion did not hold)"
        )
    if rule == "apart in time":
        return f"its {inline('vm')}s did not run at once: the last began {number(figure)} s after the first ended"
    return (
        f"benchlib did not write the target of {member} before this run read it (a device it was not allowed to "
        "write): if that space was never written, reading it cost the disk nothing"
    )


def _members_together(run: pl.DataFrame) -> list[dict]:
    """Return one run's findings as rows to say, its members' "too fast" as one row where there are several."""
    fast = run.filter(pl.col("rule") == "too fast").sort("member")
    rows = run.filter(pl.col("rule") != "too fast").to_dicts()
    if fast.height < 2:
        return [*rows, *fast.to_dicts()]
    names = fast["member"].to_list()
    who = (
        f"{inline('vm')}s {', '.join(names[:-1])} and {names[-1]}"
        if len(names) <= 4
        else f"{len(names)} {inline('vm')}s"
    )
    figure = span(number(fast["figure"].min() / 1e3), number(fast["figure"].max() / 1e3))
    return [*rows, {**fast.row(0, named=True), "rule": "too fast, several", "member": who, "figure": figure}]


#: the likeliest cause of a run's findings, the most telling rule first (a cause is said once per run)
_CAUSE_ORDER = ("unwritten target", "idle device", "too fast", "apart in time", "not steady", "apart")


#: what each rule's finding most likely means (:data:`benchlib.stats.plausibility.RULES`)
_CAUSES = {
    "apart": "other work than its siblings did (space never written, a cache, a failing member or path)",
    "too fast": "reads of space never written, or a cache below the run",
    "idle device": "reads of space never written (a file system answers them with zeros, without the device)",
    "apart in time": "members that did not run at once (a server that started late or a clock apart)",
    "not steady": "a device still settling (a write cache filling, garbage collection starting)",
    "unwritten target": "space never written, if the region had never been written before",
}


#: each rule in a few words, for a summary page's list of runs
_RULE_WORDS = {
    "apart": "its total far from its siblings'",
    "too fast": "faster than a device",
    "idle device": "its device idle",
    "apart in time": "its members not at once",
    "not steady": "measured before steady",
    "unwritten target": "its target never written",
}


def implausible_words(found: pl.DataFrame, value: str, *, page: str = "cell") -> str:
    """Say the runs of :func:`implausible` as Markdown ("" where none): each run, why, the likely cause.

    ``page``: ``"cell"`` names each run with its figures; ``"summary"`` lists the runs with their
    configurations (their cell pages give the figures). Either way it says once that the pages'
    figures include them.
    """
    if found.is_empty():
        return ""
    by = [c for c in found.columns if c not in (*FINDINGS_COLUMNS, "run")]
    runs = found.partition_by(["run_unit"], maintain_order=True)
    if page == "summary":
        listed = "; ".join(
            f"{r['run'][0]} of {levels_words({b: r[b][0] for b in by if r[b][0] is not None})} "
            f"({', '.join(_RULE_WORDS[x] for x in _CAUSE_ORDER if x in set(r['rule']))})"
            for r in runs
        )
        return (
            f"**{len(runs)} run{'s' if len(runs) > 1 else ''} may not have measured the storage**: {listed}. "
            "Each configuration's page gives the figures; the medians and comparisons include these runs."
        )
    said = []
    for r in runs:
        clauses = [_finding_words(row, value) for row in _members_together(r)]
        cause = _CAUSES[next(x for x in _CAUSE_ORDER if x in set(r["rule"]))]
        said.append(
            f"**{r['run'][0].capitalize()} may not have measured the storage**: {'; '.join(clauses)}. Likely: {cause}."
        )
    return "\n\n".join(said) + "\n\nThe figures on this page include these runs."


def printed_apart_words(found: pl.DataFrame, most: int = 3) -> str:
    """Say where a file's own IOPS or bandwidth differ from what benchlib recomputed (:func:`printed_apart`)."""
    if found.is_empty():
        return ""
    words = {"iops": "IOPS", "bandwidth_bytes_per_s": "bandwidth"}
    said = []
    tools = set()
    for row in found.head(most).iter_rows(named=True):
        group = row.get("group_id")
        whose = row.get("job_name") or (f"run status group {group}'s total" if group is not None else None)
        where = ", ".join(str(part) for part in (row.get("source"), whose, row.get("direction")) if part is not None)
        scale, unit = (1, "") if row["figure"] == "iops" else (1 / 1048576, " MiB/s")
        printed, recomputed = (f"{number(row[k] * scale)}{unit}" for k in ("printed", "recomputed"))
        if str(row.get("format") or "").startswith("vdbench"):  # its totals line kept, its intervals beside it
            tools.add("vdbench")
            off = 100 * (row["printed"] / row["recomputed"] - 1)
            said.append(
                f"{where}: {words[row['figure']]} {recomputed} in its totals line, its intervals' mean "
                f"{printed} ({off:+.1f}%)"
            )
        else:
            tools.add("fio")
            said.append(
                f"{where}: {words[row['figure']]} printed {printed}, recomputed {recomputed} "
                f"({100 * row['apart']:+.1f}%)"
            )
    more = f"; and {found.height - most} more" if found.height > most else ""
    kept = {
        "fio": "The pages use the issued count over the runtime, a group's total its jobs' added (fio prints 3 "
        "digits, so more than 1% apart is not its rounding).",
        "vdbench": "The pages use vdbench's totals line, its count over the measured intervals (the intervals are "
        "printed to two decimals, so more than 1% apart is not their rounding).",
    }
    head = "disagree with its counts" if tools == {"fio"} else "disagree with each other"
    return (
        f"**The file's own figures {head}**: "
        + "; ".join(said)
        + more
        + ". "
        + " ".join(kept[t] for t in sorted(tools))
    )


#: the figures :func:`benchlib.sources.hcibench.check_summary` sets side by side, in words
SUMMARY_FIGURES = {
    "iops": "IOPS",
    "bandwidth_mib_s": "MiB/s",
    "lat_mean_ms": "mean latency (ms)",
    "read_lat_mean_ms": "read mean latency (ms)",
    "write_lat_mean_ms": "write mean latency (ms)",
    "lat_p95_ms": "p95 latency (ms)",
    "vms": "VMs",
}


def summary_apart_words(found: pl.DataFrame, most: int = 4) -> str:
    """Say where HCIBench's own summary differs from benchlib's aggregation of its VMs (:func:`summary_apart`).

    Each difference with both figures; each reason (``note``) once, after them.
    """
    if found.is_empty():
        return ""
    said = [
        f"{row['run']}, {SUMMARY_FIGURES.get(row['metric'], row['metric'])}: HCIBench "
        f"{number(row['hcibench'])}, benchlib {number(row['benchlib'])} ({row['difference_pct']:+.1f}%)"
        for row in found.head(most).iter_rows(named=True)
    ]
    more = f"; and {found.height - most} more (`benchlib ingest` lists them)" if found.height > most else ""
    why = "; ".join(dict.fromkeys(n for n in found.head(most)["note"].to_list() if n))
    return (
        "**HCIBench's own summary differs from its VMs' figures**: "
        + "; ".join(said)
        + more
        + "."
        + (f" Why: {why}." if why else "")
        + " The pages use benchlib's aggregation of the VMs."
    )
