"""Each page's parameters, fitted to the study it draws: what a parameter left as None means.

A notebook's parameters default to None, "from the study": the factors, levels, members and sweeps its
data hold decide them, and nothing here knows the bundled studies. A pipeline that names only its study
gets every page the data support; a page the data cannot support raises :class:`PageLeftOut` with the
reason, which the report's index says in one line instead of an empty page.

One function per notebook (:data:`PAGES`), each taking the study and the parameters given (None where
not given) and returning them complete. The notebooks and :func:`benchlib.pipeline.build_report` call
the same function, so a page and the report never disagree on what it draws.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from benchlib.errors import BenchlibError
from benchlib.schema import NOT_GIVEN, run_unit_expr
from benchlib.store import ProcessedStudy, open_study


class PageLeftOut(BenchlibError):
    """The study's data cannot support this page; the message says why, in a clause for the index."""


#: the job parameters that must hold still while a sweep varies one of them
_JOB = ("rw", "block_size_bytes", "iodepth", "numjobs", "ioengine_job", "rwmixread_pct")
#: a sweep needs this many points to have a shape
SWEEP_POINTS = 3
#: fio's reporting group of a row: where one run's groups ran one after another (``stonewall``), each is a
#: phase of its own work (a 4k random read, then a 512k write), never repetitions of one configuration
PHASE = "group_id"


@dataclass(frozen=True)
class Shape:
    """What a study's runs hold, for choosing each page's parameters."""

    #: every declared factor with the levels the runs hold, in study.toml's order
    factors: dict[str, list[str]]
    #: the factors with two levels or more in the runs
    varied: tuple[str, ...]
    #: varied factors that some runs do not have (a sweep of one profile: its factor is null elsewhere)
    partial: tuple[str, ...]
    #: varied factors whose levels are different work (their runs differ in fio's rw: read, write, a mix)
    workloads: tuple[str, ...]
    #: partial factors that are a sweep's own (queue depth within a depth sweep): not settings to compare
    swept: tuple[str, ...]
    #: the most members (VMs, hosts) of one run
    members: int
    #: the figure the pages draw: IOPS where the runs have it, else bandwidth (and across block sizes)
    value: str
    #: whether runs have CPU figures, and whether disk statistics or esxtop captures exist
    cpu: bool
    host_side: bool
    #: the study folder has a claims.toml
    claims: bool
    #: ``{factor: level}`` selecting a depth sweep, and a write-share sweep (None where the study has none)
    depth_sweep: dict | None
    mix_sweep: dict | None
    #: the sweeps whose points no factor of every run spans (a published table's depths): cells would pool them
    unspanned: tuple[dict, ...] = ()
    #: a factor whose levels each ran the depth sweep, with those levels (None: it ran under one setting)
    depth_compared: tuple[str, list[str]] | None = None
    #: varied factors whose levels are a job parameter's values (queue depth for iodepth): a sweep's points
    points: tuple[str, ...] = ()
    #: fio's groups of one run (:data:`PHASE`), as text, where a run held two or more: a page each; else ()
    phases: tuple[str, ...] = ()


def _opened(study: str | ProcessedStudy) -> ProcessedStudy:
    return study if isinstance(study, ProcessedStudy) else open_study(study)


def shape(study: str | ProcessedStudy) -> Shape:
    """Return what the study's runs hold (:class:`Shape`)."""
    from benchlib.views import _study_rows, disk_ios, esxtop_captures

    opened = _opened(study)
    rows = _study_rows(opened, None)
    declared = opened.study.factors
    factors = {
        f: [lvl for lvl in levels if lvl in set(rows[f].drop_nulls().to_list())] if f in rows.columns else []
        for f, levels in declared.items()
    }
    varied = tuple(f for f, levels in factors.items() if len(levels) >= 2)
    partial = tuple(f for f in varied if rows[f].null_count() > 0)
    units = rows.with_columns(run_unit_expr(rows.columns)).group_by("run_unit").agg(pl.col("vm").n_unique())
    members = int(units["vm"].max() or 0) if units.height else 0
    counted = {v: rows[v].drop_nulls().len() for v in ("iops", "bandwidth_mib_s") if v in rows.columns}
    value = "iops" if counted.get("iops", 0) >= counted.get("bandwidth_mib_s", 0) else "bandwidth_mib_s"
    cpu = "usr_cpu_pct" in rows.columns and rows["usr_cpu_pct"].drop_nulls().len() > 0
    host_side = disk_ios(opened).height > 0 or esxtop_captures(opened).height > 0
    sweeps_by = {varies: _sweep_of(rows, factors, varies) for varies in ("iodepth", "rwmixread_pct")}
    sweeps = [s for s in sweeps_by.values() if s]
    return Shape(
        factors=factors,
        varied=varied,
        partial=partial,
        workloads=tuple(f for f in varied if _is_workload(rows, f, varied)),
        swept=tuple(f for f in partial if _within_sweeps(rows, f, sweeps)),
        members=members,
        value=value,
        cpu=cpu,
        host_side=host_side,
        claims=(opened.study.folder / "claims.toml").is_file(),
        depth_sweep=sweeps_by["iodepth"],
        mix_sweep=sweeps_by["rwmixread_pct"],
        unspanned=tuple(
            sweep
            for varies, sweep in sweeps_by.items()
            if sweep and not _spanned(rows, sweep, varies, [f for f in factors if f in varied and f not in partial])
        ),
        depth_compared=_sweep_compared(rows, factors, sweeps_by["iodepth"], "iodepth"),
        points=tuple(  # two levels are no sweep: psync against libaio differ in depth (a sync engine keeps 1)
            f
            for f in varied
            if rows[f].n_unique() >= SWEEP_POINTS
            and any(v in rows.columns and _follows(rows, f, v) for v in ("iodepth", "rwmixread_pct"))
        ),
        phases=_phases(rows),
    )


def phase_work(study: str | ProcessedStudy) -> dict[str, list[tuple[str | None, int | None]]]:
    """Return each phase (:data:`PHASE`, as text) with the work its jobs ran: (fio's ``rw``, block size in bytes).

    Empty where no run held two phases.
    """
    from benchlib.views import _study_rows

    rows = _study_rows(_opened(study), None)
    if not _phases(rows):
        return {}
    rw = "rw_job" if "rw_job" in rows.columns else "rw"
    work = [c if c in rows.columns else pl.lit(None).alias(c) for c in (rw, "block_size_bytes")]
    held = rows.select(pl.col(PHASE).fill_null(0).cast(pl.String), *work).unique().sort(pl.all(), nulls_last=True)
    return {phase: [(w, size) for _, w, size in group.iter_rows()] for (phase,), group in held.group_by(PHASE)}


def _phases(rows: pl.DataFrame) -> tuple[str, ...]:
    """Return fio's groups (:data:`PHASE`) as text, in order, where one run held two or more; else ()."""
    if PHASE not in rows.columns or rows[PHASE].fill_null(0).n_unique() < 2:  # one group: no phases (most studies)
        return ()
    phase = pl.col(PHASE).fill_null(0)
    most = rows.with_columns(run_unit_expr(rows.columns)).group_by("run_unit").agg(phase.n_unique())[PHASE].max()
    return tuple(str(p) for p in sorted(rows[PHASE].fill_null(0).unique())) if most and most >= 2 else ()


def _is_workload(rows: pl.DataFrame, factor: str, varied: tuple[str, ...]) -> bool:
    """Whether ``factor``'s levels are different work: with the other factors held, fio's ``rw`` changes with it.

    ``profile`` (``benchlib run``'s own factor: each level a job of its own) always is.
    """
    if factor in ("profile", "rw"):
        return True
    rw = "rw_job" if "rw_job" in rows.columns else "rw"  # a factor named rw keeps the name; fio's is rw_job
    if rw not in rows.columns:
        return False
    others = [f for f in varied if f != factor]
    having = rows.filter(pl.col(factor).is_not_null()).select(*others, pl.col(rw).alias("_rw"))
    grouped = having.group_by(others) if others else having.group_by(pl.lit(1))
    return bool((grouped.agg(pl.col("_rw").drop_nulls().n_unique())["_rw"] > 1).any())


def _within_sweeps(rows: pl.DataFrame, factor: str, sweeps: list[dict]) -> bool:
    """Whether every run that has ``factor`` is a run of one of the ``sweeps`` (the factor is a sweep's own)."""
    having = rows.filter(pl.col(factor).is_not_null())
    inside = pl.any_horizontal([pl.col(f) == lvl for sweep in sweeps for f, lvl in sweep.items()] or [pl.lit(False)])
    return having.height > 0 and having.filter(~inside.fill_null(False)).height == 0


def _sweep_of(rows: pl.DataFrame, factors: dict[str, list[str]], varies: str) -> dict | None:
    """Return the levels that select one sweep of job parameter ``varies``: the rest of the job held still.

    The first factor level (study order) whose runs hold ``varies`` at :data:`SWEEP_POINTS` values or
    more while every other job parameter has one value; another factor that varies within it (a setting
    compared across the sweep) is held at its first level, so one sweep is never several pooled. A
    factor whose levels are the sweep's points (``queue_depth`` for ``iodepth``) is the sweep's own.
    None where no runs sweep ``varies``.
    """
    if varies not in rows.columns:
        return None
    for factor, levels in factors.items():
        for level in levels:
            some = rows.filter(pl.col(factor) == level)
            if not _sweeps(some, varies):
                continue
            selection = {factor: level}
            for other, others in factors.items():
                present = set(some[other].drop_nulls().to_list()) if other in some.columns else set()
                if other == factor or len(present) < 2 or _follows(some, other, varies):
                    continue
                selection[other] = next(lvl for lvl in others if lvl in present)
                some = some.filter(pl.col(other) == selection[other])
            if some[varies].drop_nulls().n_unique() >= SWEEP_POINTS:
                return selection
    return None


def _sweeps(rows: pl.DataFrame, varies: str) -> bool:
    """Whether ``rows`` hold job parameter ``varies`` at :data:`SWEEP_POINTS` values or more, the rest still."""
    held = [f"{c}_job" if f"{c}_job" in rows.columns else c for c in (*_JOB, "ioengine") if c != varies]
    held = [c for c in dict.fromkeys(held) if c in rows.columns]
    return rows[varies].drop_nulls().n_unique() >= SWEEP_POINTS and all(
        rows[c].drop_nulls().n_unique() <= 1 for c in held
    )


def _sweep_compared(
    rows: pl.DataFrame, factors: dict[str, list[str]], sweep: dict | None, varies: str
) -> tuple[str, list[str]] | None:
    """Return a factor two or more of whose levels each ran the sweep (the rest of its selection the same).

    The factors of the sweep's selection first (a setting held at its first level to keep one sweep), then
    the others, in study order; a factor whose levels are the sweep's points is not one. None where no
    factor's levels each swept: the sweep ran under one setting.
    """
    if not sweep or varies not in rows.columns:
        return None
    for factor in dict.fromkeys([*sweep, *factors]):
        rest = rows.filter(pl.all_horizontal([pl.col(f) == lvl for f, lvl in sweep.items() if f != factor] or [True]))
        if factor not in rest.columns or _follows(rest, factor, varies):
            continue
        levels = [lvl for lvl in factors.get(factor, []) if _sweeps(rest.filter(pl.col(factor) == lvl), varies)]
        if len(levels) >= 2:
            return factor, levels
    return None


def _follows(rows: pl.DataFrame, factor: str, varies: str) -> bool:
    """Whether ``factor``'s levels are the points of job parameter ``varies``: one value each, each its own."""
    pairs = rows.select(factor, varies).drop_nulls().unique()
    return pairs[factor].n_unique() == pairs.height == pairs[varies].n_unique()


def _spanned(rows: pl.DataFrame, sweep: dict, varies: str, whole: list[str]) -> bool:
    """Whether a factor every run has (``whole``) spans the sweep's points: its cells separate them already."""
    some = rows.filter(pl.all_horizontal([pl.col(f) == lvl for f, lvl in sweep.items()]))
    return any(_follows(some, f, varies) for f in whole if f not in sweep)


def axes(study: str | ProcessedStudy) -> list[str]:
    """Return the factors a report's cell pages span by default: every varied one (a page per configuration).

    A study whose factors each hold one level has one configuration: its declared factors with a level span
    it (one page), so that it has its page too. Runs of unlike work under one configuration add the job
    parameters that tell them apart (:func:`work_axes`), and runs of fio groups that ran one after another
    add the group (:data:`PHASE`): a page per phase.
    """
    found = shape(study)
    spanned = list(found.varied) or [f for f, levels in found.factors.items() if levels]
    work = work_axes(study, spanned, cell_only(study))  # runs of unlike work under one configuration: apart
    return spanned + work + ([PHASE] if found.phases else [])  # a phase's work is never pooled with another's


#: what tells one run's work from another's, as the results table has it: the load generator (fio's and
#: vdbench's runs of one HCIBench test are not one sample), fio's I/O engine and its job parameters
WORK = ("tool", "ioengine", "rw", "rwmixread_pct", "block_size_bytes", "iodepth", "numjobs")


def work_axes(study: str | ProcessedStudy, axes: list[str], only: dict | None = None) -> list[str]:
    """Return the job parameters (:data:`WORK`) in which runs of one configuration of ``axes`` differ.

    A folder of other work filed under one level (fio-sample's 70/30 mix under 4k, beside its random reads)
    would be pooled into that configuration's page: its medians and percentiles would be of two jobs. Each
    such parameter is one more axis: a page per value, as the results table has a row per value. The load
    generator (``tool``) is one: an HCIBench study's fio and vdbench tests are not one sample. Only where
    every run holds one value of it (per phase: fio's groups are pages of their own already; a run whose jobs
    or VMs ran unlike work at once, a job file with a randread and a randwrite job, is one workload, whose
    halves would be neither's figures), and never a measured figure (a read share with fractions: vdbench's of
    one setting differs run to run); a parameter a factor of ``axes`` names (a block-size factor's bytes)
    follows that factor, and is never one. A run whose output does not give the parameter (a vdbench
    file-creation run has no depth; fio's normal output prints no read share) is a level of its own,
    :data:`benchlib.schema.NOT_GIVEN`: nobody can say it ran the others' work, and one such run must not
    pool every other run's depths.
    """
    from benchlib.views import _SAME_AS, _study_rows

    rows = _study_rows(_opened(study), only)
    held = [a for a in axes if a in rows.columns]  # a factor named as fio's parameter (rw) is the factor
    chosen = {a.lower() for a in axes}
    unit = [run_unit_expr(rows.columns), pl.col(PHASE).fill_null(0) if PHASE in rows.columns else pl.lit(0)]
    found = []
    for param in WORK:
        column = "rw_job" if param == "rw" and "rw_job" in rows.columns else param  # a factor named rw keeps it
        if column not in rows.columns or column in axes or (_SAME_AS.get(param, set()) | {param}) & chosen:
            continue
        if rows[column].dtype.is_float() and (rows[column].drop_nulls() % 1 != 0).any():
            continue  # a measured share (vdbench's 69.9, 70.1 of one 70/30 setting) would make each run a page
        value = pl.col(column).cast(pl.String)
        per_run = rows.group_by(*unit, *held).agg(value.n_unique().alias("values"))  # a null is a value
        if per_run.height and (per_run["values"] == 1).all():
            apart = rows.group_by(*held, unit[1]) if held else rows.group_by(unit[1])
            if (apart.agg(value.n_unique())[column] > 1).any():
                found.append(column)
                held.append(column)
    return found


def cell_only(study: str | ProcessedStudy) -> dict:
    """Return the levels a report's cell pages read by default: all, but a sweep that no factor spans.

    A sweep found by its job parameter alone (a published table's depths, no depth factor) would make
    one cell page of every depth pooled; the sweeps page draws it instead.
    """
    found = shape(study)
    return {} if found.swept else _without_sweeps(found)


def _given(value: object, default: object) -> object:
    return default if value is None else value


def _settings(found: Shape) -> list[str]:
    """Return the varied factors to compare, in study order: settings, then workloads, then a sweep's points.

    A depth factor every run has is last: comparing depths is the sweeps page's. Never a sweep's own.
    """
    whole = [f for f in found.varied if f not in found.swept]
    settings = [f for f in whole if f not in found.workloads and f not in found.points]
    return settings + [f for f in whole if f in found.workloads] + [f for f in whole if f in found.points]


def cell(study: str | ProcessedStudy, *, levels: dict | None = None, value: str | None = None) -> dict:
    """Fit a cell page: ``levels`` (default: the first configuration the runs hold) and ``value``."""
    from benchlib.views import _study_rows

    if levels is not None and value is not None:  # a report's cell page is given both: nothing to fit
        return {"levels": levels, "value": value}
    found = shape(study)
    if levels is None:
        work = work_axes(study, list(found.varied), cell_only(study))  # a page never pools unlike work
        rows = _study_rows(_opened(study), None)
        phase = [pl.col(PHASE).fill_null(0).cast(pl.String).alias(PHASE)] if found.phases else []
        said = [pl.col(w).cast(pl.String).fill_null(NOT_GIVEN) for w in work]  # a level of its own (work_axes)
        rows = rows.select(*found.varied, *said, *phase).unique()
        rank = [
            pl.col(f).replace_strict(levels, list(range(len(levels))), default=None)
            for f, levels in ((f, found.factors[f]) for f in found.varied)
        ]
        given = [x for w in work for x in (pl.col(w) == NOT_GIVEN, w)]  # a run that gives its work first
        order = [*rank, *given, *([pl.col(PHASE).cast(pl.Int64)] if found.phases else [])]  # its first phase alone
        first = rows.sort(order, nulls_last=True).head(1)
        levels = {k: v for k, v in (first.to_dicts()[0] if first.height else {}).items() if v is not None}
    return {"levels": levels, "value": _given(value, found.value)}


def comparison(
    study: str | ProcessedStudy,
    *,
    value: str | None = None,
    factor: str | None = None,
    baseline: str | None = None,
    by: list[str] | None = None,
    only: dict | None = None,
) -> dict:
    """Fit a comparison page.

    ``factor`` (default: the first setting the runs vary), its first declared level as ``baseline``,
    within each configuration of the other varied factors (``by``), over the runs where the factor has
    two levels or more (``only``).
    """
    found = shape(study)
    candidates = _settings(found)
    if factor is None and not candidates:
        from benchlib.tables import inline

        undeclared = work_axes(study, list(found.varied), cell_only(study))  # the runs differ in a job's parameter
        raise PageLeftOut(
            "no factor has two levels in the runs: there is nothing to compare"
            + (
                f" (the runs differ in {' and '.join(map(inline, undeclared))}, which study.toml does not declare: "
                "declare it as a factor, with each folder's level, to compare it)"
                if undeclared
                else ""
            )
        )
    factor = _given(factor, candidates[0] if candidates else None)
    if factor not in found.factors:
        raise PageLeftOut(f"{factor!r} is not a factor of this study")
    if len(found.factors[factor]) < 2:
        raise PageLeftOut(f"the runs hold one level of {factor}: there is nothing to compare")
    baseline = str(_given(baseline, found.factors[factor][0]))
    if only is None:
        only = _where_varied(_opened(study), found, factor)
    if by is None:
        by = [f for f in found.varied if f != factor and len(only.get(f, "..")) > 1 and f not in found.swept]
        by, only = _complete(_opened(study), by, only)
        only = _same_work(_opened(study), factor, by, only)
        # work the study does not declare (fio's and vdbench's tests, two block sizes) is compared within itself
        by += [w for w in work_axes(study, [factor, *by], only) if w not in by]
    if value is None:
        value = _like_for_like(_opened(study), found, [(factor, baseline, by)], only)
    return {"value": value, "factor": factor, "baseline": baseline, "by": by, "only": only}


def _like_for_like(opened: ProcessedStudy, found: Shape, sides: list[tuple], only: dict) -> str:
    """Return the study's figure (:attr:`Shape.value`), or bandwidth where IOPS would compare unlike I/Os.

    Where a compared factor's levels ran different block sizes (fio-sample's 4k against 64k), one I/O on
    one side moves more bytes than on the other: IOPS would compare different work, and the page would lead
    with a change (-78%) that says nothing of the setting. Bandwidth compares the bytes moved; IOPS is the
    study's figure where the sides share their block sizes. ``sides``: ``(factor, baseline, by)`` for each
    way the page compares.
    """
    from benchlib.views import _study_rows, unlike_sizes

    rows = _study_rows(opened, only)
    if found.value != "iops" or "bandwidth_mib_s" not in rows.columns or rows["bandwidth_mib_s"].is_null().all():
        return found.value
    unlike = (unlike_sizes(opened, factor=f, baseline=base, value="iops", by=by, only=only) for f, base, by in sides)
    return "bandwidth_mib_s" if any(unlike) else found.value


def _where_varied(opened: ProcessedStudy, found: Shape, factor: str) -> dict:
    """Return ``only``: for each other factor, its levels under which ``factor`` has two levels or more.

    A factor left whole (every level qualifies, or runs without it do) is not named.
    """
    from benchlib.views import _study_rows

    rows = _study_rows(opened, None)
    only = {}
    for other in found.varied:
        if other == factor:
            continue
        counts = rows.group_by(other).agg(pl.col(factor).drop_nulls().n_unique().alias("n"))
        keep = counts.filter(pl.col("n") >= 2)
        if keep[other].null_count() or keep.height == counts.height:
            continue  # runs without this factor compare too, or every level does: nothing to leave out
        only[other] = [lvl for lvl in found.factors[other] if lvl in set(keep[other].to_list())]
    return only


def _complete(opened: ProcessedStudy, by: list[str], only: dict) -> tuple[list[str], dict]:
    """Return ``by`` and ``only`` such that every run read has a level of every ``by`` factor.

    A factor no run of ``only`` has is dropped from ``by``; one that some runs lack keeps its levels in
    ``only`` (the runs without it, another table's rows, are not pooled as a level of their own).
    """
    from benchlib.views import _study_rows

    rows = _study_rows(opened, only)
    by = [f for f in by if f in rows.columns and rows[f].null_count() < rows.height]
    only = dict(only)
    for f in by:
        if rows[f].null_count() and f not in only:
            only[f] = [lvl for lvl in opened.study.factors[f] if lvl in set(rows[f].drop_nulls().to_list())]
    return by, only


#: job parameters a comparison holds still where its sides share a value (not a factor's own: see _SAME_AS)
_HELD_WORK = ("tool", "ioengine", "rw", "rwmixread_pct", "iodepth", "numjobs")


def _same_work(opened: ProcessedStudy, factor: str, by: list[str], only: dict) -> dict:
    """Return ``only`` with the job parameters that changed with ``factor`` held at the values both sides ran.

    A run of other work filed under one level (fio-sample's 70/30 mix under 4k, beside random reads at
    4k and 64k) would be pooled into that side: its figure moves the side's median, and the change would
    be the work's, not the factor's. Where every level of the factor ran some values of a parameter, the
    comparison reads those; where the sides share none (psync at depth 1 against libaio at 32), nothing is
    held and :func:`benchlib.views.confounders` names the parameter. A parameter the factor or ``by`` is
    (a depth factor's iodepth) is never held.
    """
    from benchlib.views import _SAME_AS, _study_rows

    chosen = {factor.lower(), *(b.lower() for b in by)}
    rows = _study_rows(opened, only)
    only = dict(only)
    for param in _HELD_WORK:
        tied = next((names for names in _SAME_AS.values() if param in names), set()) | {param}
        if param not in rows.columns or param in only or tied & chosen or rows[param].null_count():
            continue
        sides = [set(values) for values in rows.group_by(factor).agg(pl.col(param).unique())[param].to_list()]
        common, every = set.intersection(*sides), set.union(*sides)
        if common and common != every:
            only[param] = sorted(common)
            rows = rows.filter(pl.col(param).is_in(only[param]))
    return only


def _without_sweeps(found: Shape) -> dict:
    """Return ``only`` leaving out the runs of sweeps whose points only a partial factor or no factor spans.

    A sweep of a profile of its own (its depth factor null elsewhere) or of a published table (no depth
    factor) would be pooled into one configuration: the sweeps page draws it. A level that is the whole
    study is never left out (nothing would remain).
    """
    only: dict[str, list[str]] = {}
    for sweep in found.unspanned + tuple(
        s for s in (found.depth_sweep, found.mix_sweep) if s and found.swept and s not in found.unspanned
    ):
        factor, level = next(iter(sweep.items()))
        kept = [lvl for lvl in only.get(factor, found.factors[factor]) if lvl != level]
        if kept:
            only[factor] = kept
    return only


def sweeps(
    study: str | ProcessedStudy,
    *,
    depth_profile: dict | str | None = None,
    mix_profile: dict | str | None = None,
    depth_by: str | None = None,
) -> dict:
    """Fit the sweeps page: the runs of a queue-depth sweep and of a write-share sweep (either may be absent).

    ``depth_by``: a factor each of whose levels ran the depth sweep (the controllers, each swept), found when
    the depth sweep is found; ``""`` where it ran under one setting. ``depth_levels``: those levels.
    """
    found = shape(study)
    depth = _given(depth_profile, found.depth_sweep)
    mix = _given(mix_profile, found.mix_sweep)
    if depth is None and mix is None:
        raise PageLeftOut(
            f"no runs sweep the queue depth or the write share ({SWEEP_POINTS} or more points with the rest of "
            "the job held still)"
        )
    compared = found.depth_compared if depth_profile is None and depth_by is None else None
    if depth_by and isinstance(depth, dict):  # given: every level of it that ran the sweep
        opened = _opened(study)
        from benchlib.views import _study_rows

        compared = _sweep_compared(
            _study_rows(opened, None), {depth_by: found.factors.get(depth_by, [])}, depth, "iodepth"
        )
    by, levels = compared or ("", [])
    return {"depth_profile": depth, "mix_profile": mix, "depth_by": by, "depth_levels": levels}


def fairness(
    study: str | ProcessedStudy, *, value: str | None = None, by: list[str] | None = None, only: dict | None = None
) -> dict:
    """Fit the fairness page: how evenly each run's members shared, per configuration of the varied factors."""
    found = shape(study)
    if found.members < 2:
        raise PageLeftOut("every run has one member: there is no share to judge")
    if by is None or only is None:
        wanted, kept = _complete(_opened(study), list(found.varied), _given(only, _without_sweeps(found)))
        wanted += work_axes(study, wanted, kept)  # runs of unlike work under one configuration: apart
        by, only = _given(by, wanted), _given(only, kept)
    return {"value": _given(value, found.value), "by": by, "only": only}


def host_side(study: str | ProcessedStudy, *, by: list[str] | None = None, only: dict | None = None) -> dict:
    """Fit the host-side page: fio's disk statistics or esxtop captures, per configuration."""
    found = shape(study)
    if not found.host_side:
        raise PageLeftOut("no disk statistics (fio's disk_util) and no esxtop capture")
    if by is None or only is None:
        wanted, kept = _complete(_opened(study), list(found.varied), _given(only, _without_sweeps(found)))
        wanted += work_axes(study, wanted, kept)  # runs of unlike work under one configuration: apart
        by, only = _given(by, wanted), _given(only, kept)
    return {"by": by, "only": only}


def efficiency(
    study: str | ProcessedStudy,
    *,
    test: list[str] | None = None,
    setting: str | None = None,
    only: dict | None = None,
) -> dict:
    """Fit the CPU-efficiency page: work per CPU% of each level of ``setting``, within each ``test``.

    Fitted to the runs that report their CPU use (a published study may give CPU in a table of its own).
    """
    from benchlib.views import _study_rows

    found = shape(study)
    if not found.cpu:
        raise PageLeftOut("no run reports its CPU use")
    rows = _study_rows(_opened(study), only)
    rows = rows.filter(pl.col("iops_per_cpu_pct").is_not_null())  # CPU and I/O of the same run
    if rows.is_empty():
        raise PageLeftOut("no run reports its CPU use beside its I/O (CPU in a table of its own has no IOPS to divide)")
    varied = [f for f in found.varied if rows[f].drop_nulls().n_unique() >= 2]
    settings = [f for f in _settings(found) if f in varied]
    setting = _given(setting, settings[0] if settings else None)
    if setting is None or setting not in varied:
        raise PageLeftOut("no factor has two levels among the runs that report their CPU use")
    only = _given(only, _where_varied(_opened(study), found, setting))
    held = [f for f in varied if f != setting and len(only.get(f, "..")) > 1]
    if test is None:
        test, only = _complete(_opened(study), held, only)
        only = _same_work(_opened(study), setting, test, only)
    return {"test": test, "setting": setting, "only": only}


def interaction(
    study: str | ProcessedStudy,
    *,
    value: str | None = None,
    x: str | None = None,
    trace: str | None = None,
    by: list[str] | None = None,
    only: dict | None = None,
) -> dict:
    """Fit the interaction page: whether one setting's effect depends on another's level (two crossed factors)."""
    found = shape(study)
    settings = [f for f in _settings(found) if f not in (x, trace)]
    x = _given(x, settings.pop(0) if settings else None)
    trace = _given(trace, settings.pop(0) if settings else None)
    if x is None or trace is None:
        raise PageLeftOut("fewer than two factors have two levels: no effect can depend on another")
    if only is None:
        only = _where_varied(_opened(study), found, trace)
        only = {k: v for k, v in only.items() if k != x}
    held = [f for f in found.varied if f not in (x, trace) and f not in found.swept and len(only.get(f, "..")) > 1]
    if by is None:
        by, only = _complete(_opened(study), held, only)
    if value is None:
        levels = found.factors
        value = _like_for_like(
            _opened(study), found, [(x, levels[x][0], [*by, trace]), (trace, levels[trace][0], [*by, x])], only
        )
    return {"value": value, "x": x, "trace": trace, "by": by, "only": only}


def claims(study: str | ProcessedStudy) -> dict:
    """Fit the claims page: only where the study has a claims.toml."""
    if not shape(study).claims:
        raise PageLeftOut("the study has no claims.toml (the write-up's assertions, which `benchlib verify` reads)")
    return {}


def settings_per_member(study: str | ProcessedStudy, *, factor: str | None = None) -> dict:
    """Fit the settings-per-member page: what each setting did to each member, where a run has two or more.

    ``factor``: one setting; None: every setting the index answers (:func:`benchlib.results.compared_settings`).
    """
    from benchlib.results import compared_settings, member_changes

    settings = [(f, p) for f, p in compared_settings(study) if factor in (None, f)]
    if not settings:
        raise PageLeftOut(
            f"{factor!r} is not a setting the runs compare" if factor else "no setting has two levels in the runs"
        )

    def most_members(factor: str, page: dict) -> int:  # the most members compared in one configuration
        changed, _ = member_changes(study, factor, page)
        return int(changed.group_by([*page["by"], factor]).len()["len"].max() or 0) if changed.height else 0

    if not any(most_members(f, p) > 1 for f, p in settings):
        raise PageLeftOut("each compared run has one member: the comparison page gives its change")
    return {"factor": factor}


def published_tables(study: str | ProcessedStudy) -> dict:
    """Fit the published-tables page: only where the study's data are a write-up's tables entered by hand."""
    opened = _opened(study)
    if opened.scan("runs").filter(pl.col("format") == "published-table").select(pl.len()).collect().item() == 0:
        raise PageLeftOut("the data hold no published table (a write-up's tables entered as CSV)")
    return {}


#: the notebook each function fits, by the notebook's name
#: the pages that choose their figure where none is given, not the study's (:func:`_like_for_like`)
OWN_VALUE = frozenset({"comparison", "interaction"})

PAGES = {
    "cell": cell,
    "comparison": comparison,
    "sweeps": sweeps,
    "fairness": fairness,
    "host-side": host_side,
    "efficiency": efficiency,
    "interaction": interaction,
    "claims": claims,
    "settings-per-member": settings_per_member,
    "published-tables": published_tables,
}


def fitted(notebook: str, study: str | ProcessedStudy, given: dict) -> dict:
    """Return the parameters of ``notebook`` (its name) for ``study``: ``given`` completed where it is None.

    Only the parameters the page's function takes are fitted; the rest of ``given`` passes as it is. A
    notebook without a function here gets ``given`` unchanged.

    Raises
    ------
    PageLeftOut
        Where the study's data cannot support the page.
    """
    page = PAGES.get(notebook)
    if page is None:
        return dict(given)
    names = page.__code__.co_varnames[1 : page.__code__.co_argcount + page.__code__.co_kwonlyargcount]
    return {**given, **page(study, **{k: given.get(k) for k in names})}
