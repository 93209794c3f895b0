"""The results table: one row per configuration with the figures a post's table has.

Findings only (numbers and counts, never sentences): the report's index lays the table out in words
and writes it as ``results.csv`` and ``results.md`` beside the pages (:mod:`benchlib.report_html`).

Every figure is read as the pages read runs: each run's total over its members (rates add,
latencies are I/O-weighted, :func:`benchlib.views.run_totals`), then the median over the
configuration's runs. A figure the data do not hold is null (no column of zeros); a column no
configuration has is left out.
"""

from __future__ import annotations

import polars as pl

#: the table's figures, in the order a post lays them out
FIGURES = ("iops", "bandwidth_mib_s", "lat_mean_ms", "p99_ms", "cpu_pct", "iops_max_over_min")
_MIB = 1024 * 1024


def configuration_results(study: object, by: list[str], only: dict | None = None) -> pl.DataFrame:
    """Return one row per configuration of ``by``: its runs and the median run's figures.

    Columns: ``by``, ``runs``, ``members`` (the most members the data hold of one of its runs: a published
    table may list one VM of five that ran), ``iops``, ``bandwidth_mib_s``, ``lat_mean_ms`` (the run's I/O-weighted mean
    latency), ``p99_ms`` (the 99th percentile of all the run's I/Os, pooled from its latency histogram as
    fio pools them; null where fewer than 1,000 I/Os were recorded), ``cpu_pct`` (usr + sys of every job of
    the run, percent of one CPU) and ``iops_max_over_min`` (the largest run's IOPS over the smallest's: null
    for one run). A study whose runs ran in phases (fio's ``stonewall``) has a row per phase.
    """
    from benchlib.views import _study_rows, level_rank, run_totals

    rows = _study_rows(study, only)
    factors = [f for f in by if f in rows.columns]
    by = factors + _varying_job(rows, factors)
    frames = {
        value: run_totals(study, value, by, only)
        for value in ("iops", "bandwidth_bytes_per_s", "lat_mean_ns")
        if value in rows.columns
    }
    if not frames:
        return pl.DataFrame()
    keys = ["run_unit", "phase", *by]
    runs = pl.concat([f.select(keys) for f in frames.values()]).unique()
    from benchlib.schema import run_unit_expr

    members = (
        rows.with_columns(run_unit_expr(rows.columns))
        .group_by("run_unit")
        .agg(pl.col("vm").n_unique().alias("members"))
    )
    runs = runs.join(members, on="run_unit", how="left")
    for value, frame in frames.items():
        runs = runs.join(frame.select(*keys, value), on=keys, how="left", nulls_equal=True)
    runs = runs.with_columns(
        *(
            [(pl.col("bandwidth_bytes_per_s") / _MIB).alias("bandwidth_mib_s")]
            if "bandwidth_bytes_per_s" in runs
            else []
        ),
        *([(pl.col("lat_mean_ns") / 1e6).alias("lat_mean_ms")] if "lat_mean_ns" in runs else []),
    )
    phases = runs["phase"].n_unique() > 1
    group = [*by, *(["phase"] if phases else [])]
    figures = [c for c in ("iops", "bandwidth_mib_s", "lat_mean_ms") if c in runs.columns]
    table = runs.group_by(group or pl.lit(0), maintain_order=True).agg(
        pl.col("run_unit").n_unique().alias("runs"),
        pl.col("members").max(),
        *[pl.col(c).median() for c in figures],
        *(
            [
                pl.when(pl.col("iops").drop_nulls().len() > 1)
                .then(pl.col("iops").max() / pl.col("iops").min())
                .alias("iops_max_over_min")
            ]
            if "iops" in runs.columns
            else []
        ),
    )
    if not group:
        table = table.drop("literal")
    if not phases:  # a run's histogram and CPU are the whole run's, not a phase's
        units = runs.select("run_unit", *by).unique("run_unit")
        table = _with(table, _per_run(_tails(study, rows, factors, only), units, group, "p99_ms"), group)
        table = _with(table, _per_run(_cpu(rows, factors), units, group, "cpu_pct"), group)
    table = table.with_columns(
        pl.when(pl.col(c).is_finite()).then(pl.col(c)).alias(c)
        for c in FIGURES
        if c in table.columns and table.schema[c].is_float()
    )
    present = [c for c in FIGURES if c in table.columns and table[c].drop_nulls().len() > 0]
    table = table.select(*group, "runs", "members", *present)
    return table.sort([level_rank(study, table, c) for c in group]) if group else table


#: job parameters that make runs of one set of factor levels different configurations (a sweep's points)
_JOB = ("iodepth", "numjobs", "rwmixread_pct", "block_size_bytes", "rw")


def _varying_job(rows: pl.DataFrame, by: list[str]) -> list[str]:
    """Return the job parameters that vary within a configuration of ``by`` (a published sweep's depths)."""
    grouped = rows.group_by(by) if by else rows.group_by(pl.lit(0))
    return [
        c
        for c in _JOB
        if c in rows.columns and c not in by and (grouped.agg(pl.col(c).drop_nulls().n_unique())[c] > 1).any()
    ]


def _with(table: pl.DataFrame, extra: pl.DataFrame, group: list[str]) -> pl.DataFrame:
    """Join a figure per configuration (``extra``) onto ``table``, where it has one."""
    if extra.is_empty():
        return table
    on = [c for c in group if c in extra.columns]
    if not on:
        if extra.height != 1:
            return table
        return table.with_columns(pl.lit(v).alias(k) for k, v in extra.row(0, named=True).items())
    return table.join(extra, on=on, how="left", nulls_equal=True)


def _per_run(figures: pl.DataFrame, units: pl.DataFrame, group: list[str], name: str) -> pl.DataFrame:
    """Return each configuration's median over its runs of a figure per run (``run_unit``, ``name``)."""
    if figures.is_empty():
        return pl.DataFrame()
    joined = figures.join(units, on="run_unit")
    return joined.group_by(group or pl.lit(0)).agg(pl.col(name).median()).drop("literal", strict=False)


def _tails(study: object, rows: pl.DataFrame, factors: list[str], only: dict | None) -> pl.DataFrame:
    """Return each run's p99 of all its I/Os, pooled from its json+ latency bins as fio pools them.

    Null where fewer than :data:`benchlib.views.TAIL_BEYOND` I/Os lie beyond it (p99 of fewer than 1,000).
    """
    from benchlib.stats.aggregate import pooled_percentiles
    from benchlib.views import BIN_ORIGINS, TAIL_BEYOND, _run_bins

    bins = _run_bins(study, factors, only, "clat", None)
    bins = bins.filter(pl.col("origin") == BIN_ORIGINS[0]) if not bins.is_empty() else bins
    if bins.is_empty():
        return pl.DataFrame()
    p99 = pooled_percentiles(bins.join(_run_units(rows), on="run_id"), [99.0], by=["run_unit"])
    known = pl.col("count") * 0.01 >= TAIL_BEYOND
    return p99.select("run_unit", pl.when(known).then(pl.col("value_ns") / 1e6).alias("p99_ms"))


def _cpu(rows: pl.DataFrame, factors: list[str]) -> pl.DataFrame:
    """Return each run's CPU: every job of every member, usr + sys, percent of one CPU."""
    from benchlib.stats.efficiency import run_efficiency

    if "usr_cpu_pct" not in rows.columns or rows["usr_cpu_pct"].drop_nulls().is_empty():
        return pl.DataFrame()
    counted = run_efficiency(rows, member="vm", by=factors).filter(pl.col("reason").is_null())
    if counted.is_empty():
        return pl.DataFrame()
    return (
        counted.join(_run_units(rows), on="run_id")
        .group_by("run_unit")
        .agg(pl.col("cpu_used_pct").sum().alias("cpu_pct"))
    )


def factor_answers(study: object) -> list[dict]:
    """Return, per setting the study varies, what changing it did: the comparison page's table, summarised.

    One dict per factor the comparison page would compare (settings first; a sweep's points never):
    ``factor``, ``baseline``, ``levels`` (the others), ``value``, ``by`` (held within each comparison),
    ``comparisons``, ``runs`` (the fewest of either side of any comparison), ``low`` and ``high`` (the
    smallest and largest change of the medians, in percent, rate-capped comparisons left out), ``low_at`` and
    ``high_at`` (the other factors' levels of those two comparisons), ``caveat`` (what else changed with
    the factor, or unlike work across it: the comparison page's words, "" where none) and
    ``verdicts`` (``{verdict: count}``), as :func:`benchlib.stats.compare.comparison_table` finds them. A
    factor no comparison can be made of is left out.
    """
    from benchlib import fit
    from benchlib.stats.compare import comparison_table
    from benchlib.views import confounded, run_totals, unlike_work

    found = fit.shape(study)
    compared = [f for f in fit._settings(found) if f not in found.points]  # a sweep's points: the sweeps page's
    wanted = [f for f in compared if f not in found.workloads] or compared
    answers = []
    for factor in wanted:
        try:
            page = fit.fitted("comparison", study, {"factor": factor})
        except fit.PageLeftOut:
            continue
        units = run_totals(study, page["value"], [factor, *page["by"]], only=page["only"])
        by = [*page["by"], "phase"] if units["phase"].n_unique() > 1 else page["by"]
        if units[factor].drop_nulls().n_unique() < 2:
            continue
        table = comparison_table(units, page["value"], factor=factor, baseline=page["baseline"], by=by)
        if table.is_empty():
            continue
        tested = table.filter(~pl.col("rate_capped")).drop_nulls("median_change_pct").sort("median_change_pct")
        changes = tested["median_change_pct"]
        held = [b for b in by if b != "phase"]
        # the comparisons' other factors where the change was smallest and largest
        low_at, high_at = ({b: tested[b][i] for b in held} if tested.height else {} for i in (0, -1))

        answers.append(
            {
                "factor": factor,
                "baseline": page["baseline"],
                "levels": [lv for lv in found.factors[factor] if lv != page["baseline"] and lv in set(table[factor])],
                "value": page["value"],
                "by": [b for b in by if b != "phase"],
                "comparisons": table.height,
                "runs": int(min(table["runs_baseline"].min(), table["runs"].min())),
                "low": float(changes.min()) if changes.len() else None,
                "high": float(changes.max()) if changes.len() else None,
                "low_at": low_at,
                "high_at": high_at,
                "verdicts": dict(table["verdict"].value_counts().iter_rows()),
                # what else changed with the factor (iodepth with the engine), or work unlike across it (IOPS of
                # 4k against 64k): the caveat that matters most, as the comparison page says it
                "caveat": confounded(study, factor=factor, baseline=page["baseline"], by=held, only=page["only"])
                or unlike_work(
                    study, factor=factor, baseline=page["baseline"], value=page["value"], by=held, only=page["only"]
                ),
            }
        )
    return answers


def _run_units(rows: pl.DataFrame) -> pl.DataFrame:
    """Return each result row's run (``run_id``) with the run it is part of (``run_unit``: all its members)."""
    from benchlib.schema import run_unit_expr

    return rows.select("run_id", run_unit_expr(rows.columns)).unique("run_id")
