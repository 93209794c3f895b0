"""IOPS per CPU% from real fio runs: eight jobs reported as one group count their CPU eight times."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from benchlib.claims import claims_frame
from benchlib.sources import read
from benchlib.stats.efficiency import run_efficiency
from tests.fio_helpers import run_job_file

pytestmark = pytest.mark.fio

JOB = """
[global]
filename={target}
size=16m
rw=randrw
bs=4k
ioengine=psync
direct=0
numjobs=8
time_based=1
runtime=2
{grouping}
[mix]
"""


def _run(fio: str, folder: Path, grouping: str) -> pl.DataFrame:
    out = run_job_file(fio, folder, grouping or "per-job", JOB.replace("{grouping}", grouping))
    frame = claims_frame(read(out, "fio-json")).filter(~pl.col("is_aggregate"))
    return frame.with_columns(pl.lit("local").alias("vm"))


def test_a_group_of_eight_jobs_counts_eight_jobs_cpu(fio_binary: str, tmp_path: Path) -> None:
    grouped = _run(fio_binary, tmp_path, "group_reporting=1")
    per_job = _run(fio_binary, tmp_path, "")
    assert grouped["jobs"].unique().to_list() == [8] and per_job["job_index"].n_unique() == 8
    a = run_efficiency(grouped, member="vm", by=[]).row(0, named=True)
    b = run_efficiency(per_job, member="vm", by=[]).row(0, named=True)
    # the same workload twice: the CPU used and the efficiency agree within run-to-run noise
    assert a["cpu_used_pct"] == pytest.approx(b["cpu_used_pct"], rel=0.5)
    assert a["iops_per_cpu_pct"] == pytest.approx(b["iops_per_cpu_pct"], rel=0.5)
    # the old reading (a group's IOPS over one job's CPU) was about numjobs times too high
    group_cpu = grouped.group_by("job_index").agg(pl.col("cpu_pct").first())["cpu_pct"].sum()
    assert a["iops"] / group_cpu > 4 * b["iops_per_cpu_pct"]
    # each job's read and write rows report one CPU figure: counted once, not per direction
    assert per_job.filter(pl.col("direction") == "write").height == 8
    # the bytes moved per CPU%: 4 KiB I/Os, so MiB/s per CPU% is IOPS per CPU% x 4/1024
    assert a["mib_s_per_cpu_pct"] == pytest.approx(a["iops_per_cpu_pct"] * 4 / 1024, rel=1e-3)


def test_no_cpu_figure_gives_a_reason_not_a_number() -> None:
    frame = pl.DataFrame(
        {
            "run_id": ["a", "b", "c"],
            "vm": ["x", "x", "x"],
            "client": [None] * 3,
            "job_index": [1, 1, 1],
            "jobs": [1, 1, 1],
            "iops_or_derived": [100.0, 100.0, None],
            "usr_cpu_pct": [0.0, None, 1.0],
            "sys_cpu_pct": [0.0, None, 1.0],
        }
    )
    table = run_efficiency(frame, member="vm", by=[])
    assert table["iops_per_cpu_pct"].to_list() == [None, None, None]
    assert table["reason"].to_list() == ["0% CPU reported: nothing to divide by", "no CPU figure", "no IOPS figure"]


def test_the_efficiency_finding_names_the_level_and_the_spread() -> None:
    from benchlib.words.efficiency import efficiency_finding

    table = pl.DataFrame(
        {
            "test": ["read 4k", "read 4k", "write 4k", "write 4k", "write 64k"],
            "ioengine": ["libaio", "psync", "libaio", "psync", "libaio"],
            "iops_per_cpu_pct": [1000.0, 500.0, 300.0, 600.0, 80.0],
        }
    )
    said = efficiency_finding(table, "ioengine")
    # a tie names both leaders; write 64k has one level and is not counted
    assert "differs by test (libaio in 1, psync in 1 of 2)" in said and "2.00x" in said and "descriptive only" in said
    won = efficiency_finding(table.filter(pl.col("test") != "write 4k"), "ioengine")
    assert "I/O engine libaio was highest in 1 of 1 tests, with 2.00x I/O engine psync's IOPS per" in won
    assert "nothing is compared" in efficiency_finding(table.filter(pl.col("test") == "write 64k"), "ioengine")
    no_cpu = table.with_columns(pl.lit(None, dtype=pl.Float64).alias("iops_per_cpu_pct"))
    assert "nothing is compared" in efficiency_finding(no_cpu, "ioengine")
