"""Statistics over the tidy tables; the aggregation rules live here, once."""

from benchlib.stats.aggregate import ADDITIVE, medians, summarise_runs, total_expr, weighted_mean_expr
from benchlib.stats.efficiency import cpus_used_expr, cycles_per_io_expr, iops_per_cpu_pct_expr, reconcile
from benchlib.stats.fairness import (
    fairness_over_runs,
    fairness_table,
    gini_expr,
    jain_expr,
    jain_per_interval,
    max_min_ratio_expr,
)
from benchlib.stats.queueing import adapter_queue_use, device_latency_means, outstanding_ios_expr, queue_check

__all__ = [
    "ADDITIVE",
    "adapter_queue_use",
    "cpus_used_expr",
    "cycles_per_io_expr",
    "device_latency_means",
    "fairness_over_runs",
    "fairness_table",
    "gini_expr",
    "iops_per_cpu_pct_expr",
    "medians",
    "jain_expr",
    "jain_per_interval",
    "max_min_ratio_expr",
    "outstanding_ios_expr",
    "queue_check",
    "reconcile",
    "summarise_runs",
    "total_expr",
    "weighted_mean_expr",
]
