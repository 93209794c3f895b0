"""Statistics over the tidy tables; the aggregation rules live here, once."""

from benchlib.stats.aggregate import summarise_runs

__all__ = ["summarise_runs"]
