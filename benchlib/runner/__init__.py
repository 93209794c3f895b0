"""Run fio experiments: plans, many hosts at once, safe targets, resume, provenance."""

from benchlib.runner.describe import describe_plan
from benchlib.runner.execute import PlanReading, RunInterrupted, RunSummary, read_plan, run_plan
from benchlib.runner.plan import PROFILES, Plan, PlanError, load_plan
from benchlib.runner.safety import UnsafeTargetError

__all__ = [
    "PROFILES",
    "Plan",
    "PlanError",
    "PlanReading",
    "RunInterrupted",
    "RunSummary",
    "UnsafeTargetError",
    "describe_plan",
    "load_plan",
    "read_plan",
    "run_plan",
]
