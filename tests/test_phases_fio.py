"""fio groups that ran one after another are phases: never summed, each with its own rate, and the
run lasts from its first job's start to fio's end."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from benchlib.sources import read
from benchlib.stats import summarise_runs
from benchlib.stats.aggregate import rate_over_runs
from tests.fio_helpers import run_job_file

pytestmark = pytest.mark.fio

JOB = """
[global]
filename={target}
size=16m
rw=randread
bs=4k
ioengine=psync
direct=0
time_based=1
runtime=2

[capped-1000]
rate_iops=1000

[capped-3000]
stonewall
rate_iops=3000
"""


def test_two_stonewalled_groups_are_two_phases_not_one_sum(fio_binary: str, tmp_path: Path) -> None:
    out = run_job_file(fio_binary, tmp_path, "phases", JOB)
    tables = read(out, "fio-json")
    summary = summarise_runs(tables.runs, tables.results).filter(pl.col("direction") == "read").sort("phase")
    assert summary["phase"].to_list() == [0, 1]
    low, high = summary["iops"].to_list()
    assert low == pytest.approx(1000, rel=0.05) and high == pytest.approx(3000, rel=0.05)  # not 4,000
    rates = rate_over_runs(tables.results.with_columns(pl.lit("x").alias("cfg")), ["cfg"])
    assert rates["runs"][0] == 1 and rates["iops"][0] == pytest.approx(2000, rel=0.05)  # 8,000 I/Os over 4 s
    # the run lasted both phases (about 4 s and fio's start-up), not the longest job's 2 s
    duration = tables.runs["duration_ns"][0] / 1e9
    assert 3.9 < duration < 8


SS_JOB = """
[global]
filename={target}
size=16m
rw=randread
bs=4k
ioengine=psync
direct=0
time_based=1
runtime=3
rate_iops=500

[steady]
ss=iops:20%
ss_dur=2

[plain]
stonewall
"""


def test_fios_own_steady_state_check_is_kept(fio_binary: str, tmp_path: Path) -> None:
    out = run_job_file(fio_binary, tmp_path, "ss", SS_JOB)
    results = read(out, "fio-json").results.filter(~pl.col("is_aggregate"), pl.col("direction") == "read")
    attained = dict(zip(results["job_name"], results["ss_attained"], strict=True))
    jobs = {job["jobname"]: job for job in json.loads(out.read_text())["jobs"]}
    said = bool(jobs["steady"]["steadystate"]["attained"])  # what fio decided (a loaded machine may not settle)
    assert attained == {"steady": said, "plain": None}  # the job that asked carries fio's verdict; the other none
