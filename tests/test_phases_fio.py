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
from tests.conftest import build_study_report
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


PHASED_STUDY_JOB = """
[global]
filename={target}
size=16m
ioengine=psync
direct=0
time_based=1
runtime=2

[reads]
rw=randread
bs=4k
rate_iops=1000

[writes]
stonewall
rw=write
bs=64k
rate_iops=300
"""


def test_a_study_of_one_phased_run_gets_a_page_per_phase_never_a_median_of_them(
    fio_binary: str, tmp_path: Path
) -> None:
    """A fio file of stonewalled groups (4k random reads, then 64k writes) in a study that declares no factor:
    each phase is a configuration of its own, said with its work, its figures its own (not the median of
    unlike work, not its histogram pooled with the other's)."""
    from benchlib import fit
    from benchlib.ingest import ingest_study
    from benchlib.store import open_study
    from benchlib.tables import phase_words
    from benchlib.views import buffered_runs, cell_frame, design, disk_ios, disk_view, member_table, tail_latency

    study = tmp_path / "study"
    study.mkdir()
    (study / "study.toml").write_text('[study]\nname = "phased"\n', encoding="utf-8")
    run_job_file(fio_binary, study, "phases", PHASED_STUDY_JOB)
    (study / "target.dat").unlink()
    (study / "phases.fio").unlink()
    ingest_study(study, tmp_path / "processed")
    opened = open_study(study, tmp_path / "processed")

    assert fit.axes(opened) == [fit.PHASE]
    assert fit.cell(opened)["levels"] == {fit.PHASE: "0"}  # a page alone opens on the first phase
    assert phase_words(fit.phase_work(opened)) == {"0": "0 (random read, 4 KiB)", "1": "1 (sequential write, 64 KiB)"}
    found = design(opened)
    assert (found.configurations, found.runs, found.phases) == (2, 1, 2)

    writes = member_table(cell_frame(opened, {fit.PHASE: "1"}), "iops")
    assert writes.height == 1 and writes["runs"][0] == 1
    assert writes["iops"][0] == pytest.approx(300, rel=0.05)  # the writes' own rate: not the median of 1,000 and 300
    tails = tail_latency(opened, by=[fit.PHASE], only={fit.PHASE: ["1"]})
    assert tails.height == 1 and tails["ios"][0] == pytest.approx(600, rel=0.1)  # 2 s at 300: the reads' are not in
    # fio's disk statistics cover the whole run: never set against one phase's I/Os, and their rates are over
    # both phases' time, not the longest job's
    assert buffered_runs(opened, [fit.PHASE], {fit.PHASE: ["1"]}).shares == {}
    disk = disk_ios(opened)
    ran_s = opened.tables(only=("results",)).results.group_by("group_id").agg(pl.col("runtime_ns").max())
    counted = (disk["read_ios"] + disk["write_ios"])[0] / (ran_s["runtime_ns"].sum() / 1e9)
    assert disk_view(opened, by=[])["device_ios_per_s"][0] == pytest.approx(counted)


def _study_of_runs(fio: str, study: Path, name: str, job: str, *, normal: bool) -> Path:
    """Write a study ``name`` of ``job`` run twice as json+ (r1, r2) and, with ``normal``, once as normal output."""
    import subprocess

    study.mkdir(parents=True)
    (study / "study.toml").write_text(f'[study]\nname = "{name}"\n', encoding="utf-8")
    for run in ("r1", "r2"):
        (study / run).mkdir()
        run_job_file(fio, study / run, "fio", job)
        (study / run / "fio.fio").unlink()
    if normal:
        text = study.parent / f"{name}.fio"
        text.write_text(job.format(target=study / "target.dat"), encoding="utf-8")
        (study / "normal").mkdir()
        command = [fio, "--output-format=normal", f"--output={study / 'normal' / 'fio.txt'}", str(text)]
        subprocess.run(command, check=True, capture_output=True, timeout=120)
        text.unlink()
    for scratch in study.rglob("target.dat"):
        scratch.unlink()
    return study


MIXED_FORMATS_JOB = (
    PHASED_STUDY_JOB.replace("runtime=2", "runtime=1")
    + """
[mix]
stonewall
rw=randrw
rwmixread=70
bs=8k
rate_iops=500
"""
)


MIX_FIRST_JOB = PHASED_STUDY_JOB.replace("runtime=2", "runtime=1").replace(
    "[reads]\n", "[mix]\nrw=randrw\nrwmixread=70\nbs=8k\nrate_iops=500\n\n[reads]\nstonewall\n"
)


@pytest.mark.parametrize(
    ("job_text", "shares", "mix"),
    [(MIXED_FORMATS_JOB, [100.0, 0.0, 70.0], "2"), (MIX_FIRST_JOB, [70.0, 100.0, 0.0], "0")],
    ids=["mix-last", "mix-first"],
)
def test_one_job_saved_as_json_plus_and_as_normal_output_is_one_configuration_per_phase(
    fio_binary: str, tmp_path: Path, job_text: str, shares: list[float], mix: str
) -> None:
    """The same phased job run twice as json+ and once as normal output: normal output prints no read share,
    but a job that does not mix has one (100 or 0), and a mix's is the one every run that prints it gives.
    Each phase is one configuration of three runs, in the design and in the results table, as on its page
    (before: the normal run was a configuration of its own in every phase, '1 of 6 configurations run once')."""

    from benchlib import figures, fit
    from benchlib.ingest import ingest_study
    from benchlib.results import configuration_results
    from benchlib.store import open_study
    from benchlib.views import design, latency_exceedance, runs_without_histograms, study_words, tail_latency

    study = _study_of_runs(fio_binary, tmp_path / "study", "formats", job_text, normal=True)
    ingest_study(study, tmp_path / "processed")
    opened = open_study(study, tmp_path / "processed")

    tables = opened.tables(only=("runs", "results"))
    normal_runs = tables.runs.filter(pl.col("format") == "fio-normal")["run_id"].to_list()
    normal = tables.results.filter(pl.col("run_id").is_in(normal_runs), ~pl.col("is_aggregate"))
    printed = dict(normal.select("rw", "rwmixread_pct").unique().iter_rows())
    assert printed == {"randread": 100.0, "write": 0.0, "randrw": None}  # a mix's share is not printed
    found = design(opened)
    assert (found.configurations, found.runs, found.once, found.phases) == (3, 3, 0, 3)
    table = configuration_results(opened, list(fit.shape(opened).varied)).sort("phase")
    assert table["runs"].to_list() == [3, 3, 3]
    assert table["rwmixread_pct"].to_list() == shares  # the design counted phase 0's share for every phase

    # the mix's tail: reads and writes apart, as fio gives them; the normal run's absence is said, not silent
    mixed = {fit.PHASE: [mix]}
    tails = tail_latency(opened, by=[fit.PHASE], only=mixed, member="vm")
    assert sorted(tails["direction"].to_list()) == ["read", "read", "write", "write"]
    assert runs_without_histograms(opened, by=[fit.PHASE], only=mixed) == ["normal"]
    curve = latency_exceedance(opened, by=[fit.PHASE], only=mixed, member="vm")
    with study_words(opened):  # fio runs on one machine: its members are hosts
        drawn = figures.exceedance_curve(curve, series="vm").to_dict()  # a curve per host and direction, said so
    assert drawn["encoding"]["color"]["title"] == "Host, direction"
    assert {row["_line"] for row in drawn["data"]["values"]} == {"host not recorded, read", "host not recorded, write"}
    reads = tail_latency(opened, by=[fit.PHASE], only={fit.PHASE: ["1" if mix == "0" else "0"]}, member="vm")
    assert "direction" not in reads.columns and reads.height == 2  # one direction: no split


TWO_JOBS_ONE_GROUP = JOB.replace("stonewall\n", "").replace("runtime=2", "runtime=1")  # one group of two jobs


def test_a_run_status_groups_total_is_checked_against_its_own_jobs(fio_binary: str, tmp_path: Path) -> None:
    """Issue 44: fio's "Run status group" line is the group's total; with two jobs in the group it is set
    against their bytes added over the group's longest run (fio's own arithmetic). A real file agrees; the same
    file with the total's bw raised 20% is said to disagree, named as the group's total, not a job."""
    import re
    import subprocess

    from benchlib.sources.fio_normal import read_fio_normal
    from benchlib.stats.plausibility import printed_apart
    from benchlib.words.implausible import printed_apart_words

    job = tmp_path / "two.fio"
    job.write_text(TWO_JOBS_ONE_GROUP.format(target=tmp_path / "target.dat"), encoding="utf-8")
    out = tmp_path / "fio.txt"
    subprocess.run([fio_binary, "--output-format=normal", f"--output={out}", str(job)], check=True, timeout=120)

    def checked(path: Path) -> tuple[dict, pl.DataFrame]:
        tables = read_fio_normal(path)
        results = tables.results.join(tables.runs.select("run_id", "source"), on="run_id")
        return results.filter(pl.col("is_aggregate"), pl.col("direction") == "read").row(0, named=True), results

    total, results = checked(out)
    jobs = results.filter(~pl.col("is_aggregate"), pl.col("direction") == "read")
    assert jobs.height == 2 and total["io_bytes"] == jobs["io_bytes"].sum()
    assert total["bandwidth_bytes_per_s"] == pytest.approx(total["io_bytes"] / (total["runtime_ns"] / 1e9))
    assert total["bandwidth_bytes_per_s"] == pytest.approx(total["printed_bandwidth_bytes_per_s"], rel=0.01)
    assert printed_apart(results).filter(pl.col("job_name").is_null()).is_empty()  # the total agrees with its jobs

    text = out.read_text(encoding="utf-8")
    line = re.search(r"^\s+READ: bw=([\d.]+)[KMG]iB/s", text, flags=re.MULTILINE)
    assert line, text
    raised = text.replace(line.group(0), line.group(0).replace(line.group(1), f"{float(line.group(1)) * 1.2:.4g}"))
    edited = tmp_path / "edited.txt"
    edited.write_text(raised, encoding="utf-8")
    found = printed_apart(checked(edited)[1]).filter(pl.col("job_name").is_null())  # the group's, not a job's
    assert found.height == 1 and found["group_id"][0] == 0
    assert round(100 * found["apart"][0]) == -17  # 1 / 1.2 - 1
    assert "run status group 0's total, read: bandwidth printed" in printed_apart_words(found)


def test_a_configurations_p99_is_said_only_where_each_of_its_runs_gives_one(fio_binary: str, tmp_path: Path) -> None:
    """The results table's p99 is the median over the configuration's runs: where one run has no histogram
    (normal output), a median of the others would stand beside IOPS of all three; it is unknown instead."""

    from benchlib.ingest import ingest_study
    from benchlib.results import configuration_results
    from benchlib.store import open_study

    job = TWO_JOBS_ONE_GROUP.replace("runtime=1", "runtime=2")
    tables = {}
    for with_normal in (False, True):
        study = _study_of_runs(fio_binary, tmp_path / f"study-{with_normal}", "tails", job, normal=with_normal)
        ingest_study(study, tmp_path / f"processed-{with_normal}")
        tables[with_normal] = configuration_results(open_study(study, tmp_path / f"processed-{with_normal}"), [])
    assert tables[False]["runs"][0] == 2 and tables[False]["p99_ms"][0] > 0
    unknown = tables[True].get_column("p99_ms", default=None)  # a column no row has is not shown
    assert tables[True]["runs"][0] == 3 and (unknown is None or unknown[0] is None)


def test_a_study_with_no_factor_and_one_phase_says_it_has_no_configuration_page(
    fio_binary: str, tmp_path: Path
) -> None:
    """Two runs of one job, nothing declared: the index says there is no page per configuration and how to
    get one of all the runs, rather than promising 'a page for its one configuration' and listing none."""
    from benchlib.ingest import ingest_study

    data = tmp_path / "data"
    study = _study_of_runs(fio_binary, data / "raw" / "plain", "plain", TWO_JOBS_ONE_GROUP, normal=False)
    ingest_study(study, data / "processed")
    folder = build_study_report(data, "plain", tmp_path / "reports")
    index = (folder / "index.html").read_text(encoding="utf-8")
    assert "no page per configuration (the study declares no factor" in index
    assert "benchlib notebook cell --study plain" in index and "One page per configuration" not in index
    assert (folder / "results.csv").is_file()
