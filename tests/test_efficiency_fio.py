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
            "configuration": ["read 4k", "read 4k", "write 4k", "write 4k", "write 64k"],
            "ioengine": ["libaio", "psync", "libaio", "psync", "libaio"],
            "iops_per_cpu_pct": [1000.0, 500.0, 300.0, 600.0, 80.0],
        }
    )
    said = efficiency_finding(table, "ioengine")
    # a tie names both leaders; write 64k has one level and is not counted
    assert (
        "differs by configuration (libaio in 1, psync in 1 of 2)" in said
        and "2.00x" in said
        and "descriptive only" in said
    )
    won = efficiency_finding(table.filter(pl.col("configuration") != "write 4k"), "ioengine")
    assert (
        "I/O engine libaio was highest in the one configuration, with 2.00x I/O engine psync's IOPS per % of one "
        "CPU. Medians" in won
    )
    assert "nothing is compared" in efficiency_finding(table.filter(pl.col("configuration") == "write 64k"), "ioengine")
    no_cpu = table.with_columns(pl.lit(None, dtype=pl.Float64).alias("iops_per_cpu_pct"))
    assert "nothing is compared" in efficiency_finding(no_cpu, "ioengine")


def test_a_group_named_on_fios_command_line_counts_its_jobs(fio_binary: str, tmp_path: Path) -> None:
    """``--group_reporting`` given on fio's command line is not in its JSON's options (fio 3.33): fio-sample's
    random reads (numjobs 2) were read as one job, their CPU half what they used. One entry for several
    clones is a group, whatever the options say; per-job entries of the same job stay one job each."""
    import json
    import subprocess

    def run(*grouping: str) -> pl.DataFrame:
        out = tmp_path / f"out{len(grouping)}.json"
        subprocess.run(
            [fio_binary, "--name=clones", f"--filename={tmp_path / 'target.dat'}", "--size=16m", "--rw=randread",
             "--bs=4k", "--ioengine=psync", "--numjobs=4", "--time_based", "--runtime=1", *grouping,
             "--output-format=json+", f"--output={out}"],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        return claims_frame(read(out, "fio-json")).filter(~pl.col("is_aggregate")), json.loads(out.read_text())

    grouped, raw = run("--group_reporting")
    assert len(raw["jobs"]) == 1 and "group_reporting" not in raw["jobs"][0].get("job options", {})  # the case
    assert grouped["jobs"].to_list() == [4]
    per_job, raw = run()
    assert len(raw["jobs"]) == 4 and per_job["jobs"].to_list() == [1, 1, 1, 1]
    # the group's CPU is fio's average over its four jobs: counted four times (the per-job reading's sum; the
    # two agree within run-to-run noise in the test of eight jobs above)
    a = run_efficiency(grouped.with_columns(pl.lit("local").alias("vm")), member="vm", by=[]).row(0, named=True)
    assert a["cpu_used_pct"] == pytest.approx(4 * (grouped["usr_cpu_pct"][0] + grouped["sys_cpu_pct"][0]))
