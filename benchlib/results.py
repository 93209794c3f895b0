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
    from benchlib.views import _study_rows, known_job, level_rank, run_totals

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

    # a run whose VMs or jobs ran unlike work at once is in a row per work: each counts the members it holds
    held = [c for c in by if c in rows.columns]
    members = (
        rows.with_columns(run_unit_expr(rows.columns))
        .group_by("run_unit", *held)
        .agg(pl.col("vm").n_unique().alias("members"))
    )
    members = members.cast({c: runs.schema[c] for c in held})  # a level as the run totals hold it
    runs = runs.join(members, on=["run_unit", *held], how="left", nulls_equal=True)
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
    runs = known_job(runs, [c for c in by if c not in factors], group)
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
        # a run's histogram and CPU are the whole run's: none for a run split over rows (unlike work at once)
        units = runs.select("run_unit", *by).unique().filter(pl.len().over("run_unit") == 1)
        table = _with(table, _per_run(_tails(study, rows, factors, only), units, group, "p99_ms"), group)
        table = _with(table, _per_run(_cpu(rows, factors), units, group, "cpu_pct"), group)
    table = table.with_columns(
        pl.when(pl.col(c).is_finite()).then(pl.col(c)).alias(c)
        for c in FIGURES
        if c in table.columns and table.schema[c].is_float()
    )
    present = [c for c in FIGURES if c in table.columns and table[c].drop_nulls().len() > 0]
    table = table.select(*group, "runs", "members", *present)
    # a run's phases in the order they ran, then the rest as the study declares them
    order = sorted(group, key=lambda c: c != "phase")
    return table.sort([level_rank(study, table, c) for c in order]) if group else table


#: the work (:data:`benchlib.fit.WORK`) that makes runs of one set of factor levels configurations of their
#: own (a sweep's points; fio's and vdbench's runs of one HCIBench study), in the order the table shows it
_JOB = ("tool", "ioengine", "iodepth", "numjobs", "rwmixread_pct", "block_size_bytes", "rw")


def _varying_job(rows: pl.DataFrame, by: list[str]) -> list[str]:
    """Return the work that varies within a configuration of ``by`` (fio's I/O engine within a tool's runs)."""

    def varies(column: str, within: list[str]) -> bool:
        grouped = rows.group_by(within) if within else rows.group_by(pl.lit(0))
        return bool((grouped.agg(pl.col(column).drop_nulls().n_unique())[column] > 1).any())

    found: list[str] = []
    for c in _JOB:
        within = [*by, *(["tool"] if c == "ioengine" and "tool" in found else [])]  # vdbench's is "vdbench"
        if c in rows.columns and c not in by and varies(c, within):
            found.append(c)
    return found


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
    """Return each configuration's median over its runs of a figure per run (``run_unit``, ``name``).

    Null where a run of the configuration has none (no histogram, too few I/Os for a p99): a median of the
    runs left would be another configuration's figure than the row's other columns, over all its runs.
    """
    if figures.is_empty():
        return pl.DataFrame()
    joined = units.join(figures, on="run_unit", how="left")
    every = pl.when(pl.col(name).null_count() == 0).then(pl.col(name).median()).alias(name)
    return joined.group_by(group or pl.lit(0)).agg(every).drop("literal", strict=False)


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
    smallest and largest change, the median run-to-run ratio as the comparison pages give it, in percent,
    rate-capped comparisons left out), ``low_at`` and
    ``high_at`` (the other factors' levels of those two comparisons), ``confounders`` (job parameters that
    changed with the factor: :func:`benchlib.views.confounders`), ``unlike_sizes`` (the block sizes a
    per-I/O figure is compared across: :func:`benchlib.views.unlike_sizes`), ``buffered`` (the compared
    configurations fio ran through the page cache: :func:`benchlib.views.buffered`, None where none) and
    ``verdicts`` (``{verdict: count}``), as :func:`benchlib.stats.compare.comparison_table` finds them;
    ``one_side_capped``: how many comparisons set a rate-capped side against an uncapped one (the cap
    set one side's totals); ``one_member``: how many compare runs the data hold one member of, where other
    runs hold several (one VM's figure, not a run total), and ``split`` where both kinds are compared: each
    kind's range on its own (``{"totals": ..., "one_member": ...}``); ``higher`` and ``lower``: in how many comparisons
    the other level's median was above, and below, the baseline's. A factor no comparison can be made of is
    left out.
    """
    from benchlib import fit
    from benchlib.schema import run_unit_expr
    from benchlib.stats.compare import comparison_table
    from benchlib.stats.sequential import band_of
    from benchlib.views import _open, _study_rows, buffered_runs, confounders, run_totals, settled_looks, unlike_sizes

    levels = fit.shape(study).factors
    answers = []
    for factor, page in compared_settings(study):
        units = run_totals(study, page["value"], [factor, *page["by"]], only=page["only"])
        by = [*page["by"], "phase"] if units["phase"].n_unique() > 1 else page["by"]
        if units[factor].drop_nulls().n_unique() < 2:
            continue
        looks = settled_looks(study, factor)
        band = band_of(looks)  # the settled rule's, as the comparison page's
        table = comparison_table(
            units, page["value"], factor=factor, baseline=page["baseline"], by=by, band=band, looks=looks
        )
        if table.is_empty():
            continue
        # the change as the comparison pages give it (the median run-to-run ratio), so both say one number
        tested = table.filter(~pl.col("rate_capped")).drop_nulls("change_pct")
        held = [b for b in by if b != "phase"]
        whole = _changes(tested, held)  # with the other factors' levels where the change was smallest and largest
        # comparisons of a capped side against an uncapped one: the cap set one side's totals
        sides = units.group_by(*by, factor).agg(pl.col("rate_capped").fill_null(False).all().alias("capped"))
        base = sides.filter(pl.col(factor) == page["baseline"]).drop(factor).rename({"capped": "capped_baseline"})
        sides = sides.filter(pl.col(factor) != page["baseline"])
        sides = sides.join(base, on=by, nulls_equal=True) if by else sides.join(base, how="cross")
        one_capped = sides.filter(pl.col("capped") != pl.col("capped_baseline")).height
        # comparisons whose runs the data hold one member of, where other runs hold several (a published table
        # listing one VM of the five that ran): one member's figure, not a run total
        rows = _study_rows(_open(study), page["only"]).with_columns(run_unit_expr())
        held_members = rows.group_by("run_unit", *[c for c in (factor, *held) if c in rows.columns]).agg(
            pl.col("vm").n_unique().alias("members")
        )
        alone = held_members.group_by([c for c in held if c in held_members.columns] or pl.lit(0)).agg(
            pl.col("members").max()
        )
        one_member = int((alone["members"] == 1).sum()) if (held_members["members"].max() or 0) > 1 else 0
        # where some comparisons are one member's figure and others run totals, each kind's range on its own:
        # a VM's -68% is not said as the end of a range of run totals
        split = None
        if 0 < one_member < table.height and held and set(held) <= set(alone.columns):
            as_text = [pl.col(b).cast(pl.String) for b in held]
            kinds = tested.with_columns(as_text).join(alone.with_columns(as_text), on=held, how="left")
            split = {
                kind: _changes(
                    kinds.filter(pl.col("members").fill_null(2) > 1 if kind == "totals" else pl.col("members") == 1),
                    held,
                )
                for kind in ("totals", "one_member")
            }

        answers.append(
            {
                "factor": factor,
                "baseline": page["baseline"],
                "levels": [lv for lv in levels[factor] if lv != page["baseline"] and lv in set(table[factor])],
                "value": page["value"],
                "by": [b for b in by if b != "phase"],
                "only": page["only"] or {},  # the runs the comparison reads
                "comparisons": table.height,
                "runs": int(min(table["runs_baseline"].min(), table["runs"].min())),
                **{k: whole[k] for k in ("low", "high", "low_at", "high_at", "higher", "lower")},
                "verdicts": dict(table["verdict"].value_counts().iter_rows()),
                "one_side_capped": one_capped,
                "one_member": one_member,
                # {"totals": ..., "one_member": ...}, each as :func:`_changes`, where the two kinds mix (else None)
                "split": split,
                # what else changed with the factor (iodepth with the engine), and work unlike across it (IOPS of
                # 4k against 64k): the caveats that matter most, as the comparison page finds them
                "confounders": confounders(study, factor=factor, baseline=page["baseline"], by=held, only=page["only"]),
                "unlike_sizes": unlike_sizes(
                    study, factor=factor, baseline=page["baseline"], value=page["value"], by=held, only=page["only"]
                ),
                # fio's direct=0: the page cache may have answered the runs compared (:func:`benchlib.views.buffered`)
                "buffered": buffered_runs(study, [factor, *held], only=page["only"]),
            }
        )
    return answers


def _changes(tested: pl.DataFrame, held: list[str]) -> dict:
    """Return the range of a comparison table's changes (rate-capped rows out).

    ``n``, ``low``, ``high``, ``low_at`` and ``high_at`` (the other factors' levels there), ``higher`` and
    ``lower`` (how many each way).
    """
    tested = tested.sort("change_pct")
    changes = tested["change_pct"]
    at = ({b: tested[b][i] for b in held} if tested.height else {} for i in (0, -1))
    low_at, high_at = at
    return {
        "n": tested.height,
        "low": float(changes.min()) if changes.len() else None,
        "high": float(changes.max()) if changes.len() else None,
        "low_at": low_at,
        "high_at": high_at,
        "higher": int((changes > 0).sum()),
        "lower": int((changes < 0).sum()),
    }


def compared_settings(study: object) -> list[tuple[str, dict]]:
    """Return the factors the index answers for, each with its comparison page's parameters.

    The settings the runs vary (a sweep's points are the sweeps page's), or, where the study varies no
    setting, its workloads; a factor no comparison page can be made of is left out. A per-I/O figure (IOPS)
    across block sizes compares unlike work: such a factor is compared in MiB/s, the bytes moved, where
    the runs have it.
    """
    from benchlib import fit
    from benchlib.views import run_totals, unlike_sizes

    found = fit.shape(study)
    compared = [f for f in fit._settings(found) if f not in found.points]
    wanted = [f for f in compared if f not in found.workloads] or compared
    pages = []
    for factor in wanted:
        try:
            page = fit.fitted("comparison", study, {"factor": factor})
        except fit.PageLeftOut:
            continue
        unlike = unlike_sizes(study, factor=factor, **{k: page[k] for k in ("baseline", "value", "by", "only")})
        if (
            unlike
            and run_totals(study, "bandwidth_mib_s", [factor], page["only"])["bandwidth_mib_s"].is_not_null().any()
        ):
            page = {**page, "value": "bandwidth_mib_s"}
        pages.append((factor, page))
    return pages


def member_changes(study: object, factor: str, page: dict) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Return what changing ``factor`` did to each member, and to how evenly the members shared.

    ``page``: the comparison page's parameters (``value``, ``baseline``, ``by``, ``only``:
    :func:`compared_settings`). Within each configuration of ``by``, each member's run totals at the
    baseline and at each other level, the median over their runs:

    * members: ``by``, ``factor`` (the other level), ``vm``, ``baseline_value``, ``value``, ``change_pct``
      (null where the baseline is 0), ``runs_baseline``, ``runs``, ``capped`` (a rate cap on either side:
      the cap set those totals). A member on one side only is left out (nothing to hold it against).
    * fairness: ``by``, ``factor``, ``members`` (most in one run), ``jain_baseline`` and ``jain`` (Jain's
      index within each run, the median run's: :func:`benchlib.views.fairness`), ``runs_baseline``,
      ``runs``; null where a side's runs have one member (one member shares with nobody).
    """
    from benchlib.views import fairness, member_run_totals

    value, baseline, by, only = page["value"], page["baseline"], list(page["by"]), page["only"]
    keys = [*by, "vm"]
    totals = member_run_totals(study, value, by=[factor, *by], only=only)
    per = totals.group_by([*keys, factor]).agg(
        pl.col(value).median(), pl.len().alias("runs"), pl.col("rate_limited").fill_null(False).any().alias("capped")
    )
    base = per.filter(pl.col(factor) == baseline).drop(factor)
    base = base.rename({value: "baseline_value", "runs": "runs_baseline", "capped": "capped_baseline"})
    members = per.filter(pl.col(factor) != baseline).join(base, on=keys, how="inner", nulls_equal=True)
    members = members.select(
        *by,
        factor,
        "vm",
        "baseline_value",
        pl.col(value).alias("value"),
        pl.when(pl.col("baseline_value") > 0)
        .then((pl.col(value) / pl.col("baseline_value") - 1) * 100)
        .alias("change_pct"),
        "runs_baseline",
        "runs",
        (pl.col("capped") | pl.col("capped_baseline")).alias("capped"),
    )
    shared = fairness(study, value, by=[factor, *by], only=only).select(
        *by, factor, "members", pl.col("jain_median").alias("jain"), pl.col("runs_judged").alias("runs")
    )
    before = shared.filter(pl.col(factor) == baseline).drop(factor, "members")
    before = before.rename({"jain": "jain_baseline", "runs": "runs_baseline"})
    shared = (
        shared.filter(pl.col(factor) != baseline).join(before, on=by, how="inner", nulls_equal=True)
        if by
        else (shared.filter(pl.col(factor) != baseline).join(before, how="cross"))
    )
    shared = shared.select(*by, factor, "members", "jain_baseline", "jain", "runs_baseline", "runs")
    order = [*by, factor]
    return members.sort([*order, "vm"]), shared.sort(order)


#: a change in Jain's index smaller than this is no change in how evenly members shared (0.9999 against 0.9995)
JAIN_MOVED = 0.01


def member_change_summary(members: pl.DataFrame, fair: pl.DataFrame, factor: str, by: list[str]) -> dict:
    """Summarise :func:`member_changes`: the members' extremes, how often they moved together, fairness.

    ``low`` and ``high``: the smallest and largest member change (``change_pct``, ``vm`` and ``at``, the
    levels of ``by`` and ``factor`` it was in), None without any; ``several``: the configurations where two or
    more members are compared, ``together`` those where every member moved the same way (all up or all
    down); ``judged``: the configurations with Jain's index on both sides, ``fell`` those where it fell by
    :data:`JAIN_MOVED` or more,
    ``largest_fall``: the one where it fell most (``jain_baseline``, ``jain``, ``at``), None where none fell;
    ``rose`` and ``largest_rise`` likewise;
    ``runs``: the fewest runs of any side; ``capped``: configurations with a rate cap on either side, left
    out of everything above where there are others (the cap set their totals); ``all_capped``: none is left.
    """
    keys = [*by, factor]
    changed = members.drop_nulls("change_pct").sort("change_pct")
    if not changed["capped"].all():  # a cap set one side's totals: the extremes are of the uncapped
        changed = changed.filter(~pl.col("capped"))

    def extreme(i: int) -> dict | None:
        if changed.is_empty():
            return None
        row = changed.row(i, named=True)
        return {"change_pct": row["change_pct"], "vm": row["vm"], "at": {k: row[k] for k in keys}}

    groups = changed.group_by(keys).agg(
        pl.len().alias("n"), ((pl.col("change_pct") > 0).all() | (pl.col("change_pct") < 0).all()).alias("same")
    )
    several = groups.filter(pl.col("n") > 1)
    judged = fair.drop_nulls(["jain_baseline", "jain"]).with_columns(
        (pl.col("jain") - pl.col("jain_baseline")).alias("d")
    )
    if members.height and not members["capped"].all():  # as the changes: a capped configuration's are the cap's
        uncapped = members.group_by(keys).agg(pl.col("capped").any()).filter(~pl.col("capped")).drop("capped")
        judged = judged.join(uncapped, on=keys)
    fell = judged.filter(pl.col("d") <= -JAIN_MOVED).sort("d")
    rose = judged.filter(pl.col("d") >= JAIN_MOVED).sort("d", descending=True)

    def largest(moved: pl.DataFrame) -> dict | None:
        if moved.is_empty():
            return None
        row = moved.row(0, named=True)
        return {"jain_baseline": row["jain_baseline"], "jain": row["jain"], "at": {k: row[k] for k in keys}}

    runs = members.select(pl.min_horizontal(pl.col("runs").min(), pl.col("runs_baseline").min())).item()
    return {
        "low": extreme(0),
        "high": extreme(-1),
        "several": several.height,
        "together": several.filter(pl.col("same")).height,
        "judged": judged.height,
        "fell": fell.height,
        "largest_fall": largest(fell),
        "rose": rose.height,
        "largest_rise": largest(rose),
        "runs": runs,
        "capped": members.filter(pl.col("capped")).select(keys).unique().height,
        "all_capped": bool(members.height) and bool(members["capped"].all()),
    }


def published_tables(study: object) -> list[dict]:
    """Return the write-up's own tables, as they were entered: each published-table file, every cell as written.

    One dict per file of the study in benchlib's published-table format: ``file`` (its path in the study),
    ``table`` (its ``table`` column's one value, else the file's name), ``about`` (its ``# citation:`` line)
    and ``rows``: every cell a string as the file has it (19.63 stays 19.63; the pages compute from the
    numbers), the bookkeeping columns (``table``, ``source``) and columns with no value left out.
    """
    import io

    from benchlib.views import _open

    opened = _open(study)
    sources = opened.scan("runs").filter(pl.col("format") == "published-table").select("source").unique().collect()
    found = []
    for source in sorted(sources["source"].to_list()):
        path = opened.study.folder / source.split("/", 1)[1]
        lines = path.read_text(encoding="utf-8").splitlines()
        about = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("# citation:")), "")
        rows = pl.read_csv(
            io.StringIO("\n".join(line for line in lines if not line.startswith("#"))), infer_schema=False
        )
        name = rows["table"][0] if "table" in rows.columns and rows["table"].n_unique() == 1 else path.stem
        rows = rows.drop([c for c in ("table", "source") if c in rows.columns])
        rows = rows.select(c for c in rows.columns if rows[c].fill_null("").str.strip_chars().ne("").any())
        found.append({"file": source.split("/", 1)[1], "table": name, "about": about, "rows": rows})
    return found


def _run_units(rows: pl.DataFrame) -> pl.DataFrame:
    """Return each result row's run (``run_id``) with the run it is part of (``run_unit``: all its members)."""
    from benchlib.schema import run_unit_expr

    return rows.select("run_id", run_unit_expr(rows.columns)).unique("run_id")
