"""Fairness across VMs or clients sharing a datastore (METHODS.md section C1).

Every function takes per-VM throughputs measured over the same interval.
When VMs have different SIOC shares, divide each throughput by its share
first (``share_normalised``): fairness is then judged against entitlement.
"""

from __future__ import annotations

import polars as pl


def share_normalised(value: str, shares: str | None) -> pl.Expr:
    """``value / shares`` when a shares column is given, else ``value`` (x_i = T_i / s_i)."""
    return pl.col(value) / pl.col(shares) if shares else pl.col(value)


def jain_expr(x: pl.Expr) -> pl.Expr:
    """Jain's index (Σx)² / (n·Σx²), in [1/n, 1]; 1 when every VM gets the same."""
    return x.sum() ** 2 / (x.count() * (x**2).sum())


def max_min_ratio_expr(x: pl.Expr) -> pl.Expr:
    """Return the largest value over the smallest (inf when one member got nothing)."""
    return x.max() / x.min()


def gini_expr(x: pl.Expr) -> pl.Expr:
    """Gini coefficient ΣΣ|x_i − x_j| / (2n²·mean), in [0, (n−1)/n].

    Computed from the sorted values, Σ_i (2i − n − 1)·x_(i) / (n²·mean), which
    equals the double sum without building n² pairs.
    """
    ordered = x.sort()
    n = x.count()
    rank = pl.int_range(1, n + 1, dtype=pl.Int64).cast(pl.Float64)
    return ((2 * rank - n - 1) * ordered).sum() / (n**2 * x.mean())


def fairness_table(
    frame: pl.DataFrame,
    value: str,
    *,
    member: str,
    by: list[str] | None = None,
    shares: str | None = None,
) -> pl.DataFrame:
    """Fairness of ``value`` across ``member`` (VM, client) within each ``by`` group.

    Parameters
    ----------
    frame
        One row per member and group, e.g. per-VM bandwidth per configuration.
    value
        The throughput column (bytes/s, IOPS); its unit carries to ``min``/``max``.
    member
        The column naming the VM or client.
    by
        Grouping columns (configuration factors); every row is one group if empty.
    shares
        Optional column of SIOC shares; fairness is computed on value / shares.

    Returns
    -------
    polars.DataFrame
        Per group: ``members``, ``jain``, ``max_min_ratio`` (null when a member
        got nothing: unbounded, and ``starved`` counts such members), ``cv``
        (``jain``, ``max_min_ratio``, ``cv`` and ``gini`` are null for a group of one member: there
        is no sharing to judge)
        (sample, ddof=1), ``gini``, ``min``, ``max``,
        ``total`` (the unnormalised sum), ``lowest`` and ``highest`` (member
        names), ``outlier`` (the member furthest from the group mean) and ``lead`` (the highest
        member's value over the next one's),
        sorted by the group columns.

    """
    by = by or []
    _check_members(frame, value, member, by)
    x = share_normalised(value, shares)
    furthest = (x - x.mean()).abs().arg_max()
    second = x.sort(descending=True).get(1, null_on_oob=True)  # the next member's value after the highest
    shared = pl.len() >= 2  # fairness is between members: one member alone has no share to compare
    aggregated = frame.group_by(by or pl.lit(0).alias("_all"), maintain_order=True).agg(
        pl.len().alias("members"),
        pl.when(shared).then(jain_expr(x)).alias("jain"),
        pl.when(shared & (x.min() > 0)).then(max_min_ratio_expr(x)).alias("max_min_ratio"),
        (x == 0).sum().alias("starved"),
        pl.when(shared).then(x.std(ddof=1) / x.mean()).alias("cv"),
        pl.when(shared).then(gini_expr(x)).alias("gini"),
        x.min().alias("min"),
        x.max().alias("max"),
        pl.col(value).sum().alias("total"),
        pl.col(member).get(x.arg_min()).alias("lowest"),
        pl.col(member).get(x.arg_max()).alias("highest"),
        pl.col(member).get(furthest).alias("outlier"),
        # how far the highest led the next: a run whose two highest were within CLEAR_LEAD had no clear leader
        pl.when(shared & (second > 0)).then(x.max() / second).alias("lead"),
    )
    return aggregated.sort(by) if by else aggregated.drop("_all")


def _check_members(frame: pl.DataFrame, value: str, member: str, by: list[str]) -> None:
    """Refuse a member without a value: fairness over the members that have one would be another question."""
    bad = frame.filter(pl.col(value).is_null() | pl.col(value).is_nan() | (pl.col(value) < 0))
    if bad.height:
        row = bad.row(0, named=True)
        where = ", ".join(f"{k} {row[k]}" for k in by)
        raise ValueError(
            f"{value} of {member} {row[member]!r}{' at ' + where if where else ''} is "
            f"{row[value]!r}: fairness needs every member's value; leave the whole run out or find the value"
        )


#: Jain's index below which a run counts as unfair in :func:`fairness_over_runs` (a common choice; say yours).
UNFAIR_BELOW = 0.9

#: a run's highest member led it only where it got this many times the next member's figure: 54,776 against
#: 54,717 (0.1%) is a tie, not a lead, and a "different member on top" in such a run is noise
CLEAR_LEAD = 1.02


def fairness_over_runs(
    frame: pl.DataFrame,
    value: str,
    *,
    member: str,
    run: str,
    by: list[str] | None = None,
    shares: str | None = None,
    capped: str | None = None,
    threshold: float = UNFAIR_BELOW,
) -> pl.DataFrame:
    """Fairness within each run, then summarised over the runs of each group (METHODS.md C1, R1).

    Members share a datastore within one run; across runs they do not meet. So Jain's index and the
    highest/lowest ratio are computed per run, then summarised: three runs where a different VM wins
    each time are three unfair runs (the per-VM medians over runs would look fair and hide it).

    Parameters
    ----------
    frame
        One row per run and member: each member's total in that run.
    run
        The column naming the run (one repetition of one configuration).
    shares
        Optional column of each member's shares (e.g. SIOC disk shares): fairness is then judged on
        ``value`` per share, so a VM with twice the shares getting twice the IOPS is fair. A member
        without shares is an error.
    capped
        Optional boolean column: the member's job was rate-limited (a cap makes shares equal by
        construction; ``capped_runs`` says how many runs had one).
    threshold
        A run with Jain's index below it counts in ``runs_below``.

    Returns
    -------
    polars.DataFrame
        Per group: ``runs``, ``runs_judged`` (those with two or more members: one member alone
        shares nothing, and its Jain's index is null), ``members`` (most in one run), ``jain_median``,
        ``jain_worst``, ``jain_best`` and ``worst_run``, ``runs_below``, ``max_min_median``, ``max_min_worst`` and
        ``max_min_best`` (null when a member got nothing: ``starved_runs`` counts those), ``cv_median`` (the
        coefficient of variation across members, median over runs), ``winners`` (how many different
        members were highest, in the runs where the highest led the next by :data:`CLEAR_LEAD` or more;
        more than one is a rotating winner), ``close_runs`` (the other runs: no clear leader), ``top``
        (the member highest in every
        run, null when that rotated), ``capped_runs`` and ``per_share`` (judged
        on ``value`` per share), sorted by the groups.

    """
    by = by or []
    if shares is not None and frame[shares].is_null().any():
        missing = sorted(frame.filter(pl.col(shares).is_null())[member].unique().to_list())
        raise ValueError(f"{', '.join(map(str, missing))}: no shares given; give every member its shares, or none")
    per_run = fairness_table(frame, value, member=member, by=[*by, run], shares=shares)
    if capped is not None:
        flags = frame.group_by([*by, run]).agg(pl.col(capped).fill_null(False).any().alias("_capped"))
        per_run = per_run.join(flags, on=[*by, run], how="left", nulls_equal=True)
    else:
        per_run = per_run.with_columns(pl.lit(False).alias("_capped"))
    keys = by or [pl.lit(0).alias("_all")]
    summary = per_run.group_by(keys, maintain_order=True).agg(
        pl.len().alias("runs"),
        pl.col("jain").is_not_null().sum().alias("runs_judged"),
        pl.col("members").max(),
        pl.col("jain").median().alias("jain_median"),
        pl.col("jain").min().alias("jain_worst"),
        pl.col("jain").max().alias("jain_best"),
        pl.col(run).get(pl.col("jain").arg_min()).alias("worst_run"),
        (pl.col("jain") < threshold).sum().alias("runs_below"),
        pl.col("max_min_ratio").median().alias("max_min_median"),
        pl.col("max_min_ratio").max().alias("max_min_worst"),
        pl.col("max_min_ratio").min().alias("max_min_best"),
        pl.col("cv").median().alias("cv_median"),
        (pl.col("starved") > 0).sum().alias("starved_runs"),
        pl.col("highest").filter(pl.col("lead") >= CLEAR_LEAD).n_unique().alias("winners"),
        (pl.col("lead") < CLEAR_LEAD).sum().alias("close_runs"),
        pl.when(pl.col("highest").n_unique() == 1).then(pl.col("highest").first()).alias("top"),
        pl.col("_capped").sum().alias("capped_runs"),
        pl.lit(shares is not None).alias("per_share"),
    )
    return summary.sort(by) if by else summary.drop("_all")


def jain_per_interval(
    intervals: pl.DataFrame,
    *,
    member: str = "host",
    value: str = "value",
    time_ns: str = "time_ns",
    interval_s: float = 1.0,
) -> pl.DataFrame:
    """Fairness across members in each interval of ``interval_s``.

    Columns ``time_s``, ``jain``, ``max_min_ratio`` (null when a member did nothing in it), ``cv`` and
    ``members``; the three measures are null in an interval with fewer than two members. fio's
    per-host logs stamp the same second a few ms apart, so each time is put in its interval first.
    """
    step = interval_s * 1e9
    data = intervals.with_columns(((pl.col(time_ns) / step).round() * interval_s).alias("time_s"))
    x = pl.col(value)
    shared = pl.col(member).n_unique() >= 2
    data = data.group_by("time_s").agg(
        pl.when(shared).then(jain_expr(x)).alias("jain"),
        pl.when(shared & (x.min() > 0)).then(max_min_ratio_expr(x)).alias("max_min_ratio"),
        pl.when(shared).then(x.std(ddof=1) / x.mean()).alias("cv"),
        pl.col(member).n_unique().alias("members"),
    )
    return data.select("time_s", "jain", "max_min_ratio", "cv", "members").sort("time_s")


#: A highest/lowest ratio from which who came out on top is worth saying (below it the shares were about equal).
UNEVEN_FROM = 1.10


def least_fair(table: pl.DataFrame, by: list[str]) -> dict:
    """Return the levels of ``by`` of the configuration whose worst run was least fair (empty: none judged)."""
    judged = table.filter(pl.col("jain_worst").is_not_null())
    return {b: judged.sort("jain_worst").row(0, named=True)[b] for b in by} if judged.height else {}
