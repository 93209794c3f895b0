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
        Per group: ``members``, ``jain``, ``max_min_ratio`` (inf when a member
        got nothing), ``cv`` (sample, ddof=1), ``gini``, ``min``, ``max``,
        ``total`` (the unnormalised sum), ``lowest`` and ``highest`` (member
        names) and ``outlier`` (the member furthest from the group mean),
        sorted by the group columns.

    """
    by = by or []
    x = share_normalised(value, shares)
    furthest = (x - x.mean()).abs().arg_max()
    aggregated = frame.group_by(by or pl.lit(0).alias("_all"), maintain_order=True).agg(
        pl.len().alias("members"),
        jain_expr(x).alias("jain"),
        max_min_ratio_expr(x).alias("max_min_ratio"),
        (x.std(ddof=1) / x.mean()).alias("cv"),
        gini_expr(x).alias("gini"),
        x.min().alias("min"),
        x.max().alias("max"),
        pl.col(value).sum().alias("total"),
        pl.col(member).get(x.arg_min()).alias("lowest"),
        pl.col(member).get(x.arg_max()).alias("highest"),
        pl.col(member).get(furthest).alias("outlier"),
    )
    return aggregated.sort(by) if by else aggregated.drop("_all")


def jain_per_interval(
    intervals: pl.DataFrame,
    *,
    member: str = "host",
    value: str = "value",
    time_ns: str = "time_ns",
    interval_s: float = 1.0,
) -> pl.DataFrame:
    """Jain's index across members in each interval of ``interval_s``: ``time_s``, ``jain``, ``members``.

    fio's per-host logs stamp the same second a few ms apart, so each time is put in its interval first.
    """
    step = interval_s * 1e9
    data = intervals.with_columns(((pl.col(time_ns) / step).round() * interval_s).alias("time_s"))
    data = data.group_by("time_s").agg(
        jain_expr(pl.col(value)).alias("jain"), pl.col(member).n_unique().alias("members")
    )
    return data.select("time_s", "jain", "members").sort("time_s")
