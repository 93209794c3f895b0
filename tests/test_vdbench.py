"""vdbench output (flatfile, output folders, console text, parameter files) from ../shared/corpus/vdbench and
fixtures shaped like it, with numbers read off each file."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import polars as pl
import pytest

from benchlib.schema import run_unit_expr
from benchlib.sources import detect, read
from tests.conftest import corpus_dir

MIB = 1024 * 1024

# folder (or file) -> run definitions, first RD's avg row: (rate, MB/sec, resp ms), first measured interval
EXPECTED = {
    "vdb__output/flatfile.html": (["random_write"], 15773.1017, 117.5485, 1.0093, 2),
    "vdb__output1/flatfile.html": (["rd1"], 107.5, 0.105, 1.557, 2),
    "vdb__create_file_32T/flatfile.html": (["format_for_rd1"], 390635.0, 48271.4826, 0.0999, 2),
    "vdb__random_read_128T_4K_8HOST/flatfile.html": (["rd1"], 1104872.7091, 4313.7267, 0.1148, 2),
    "vdb_nvme__nvme_1vm_raid0_read_seq_ran_4k_32t_w30_f3000_20190411/flatfile.html": (
        ["rd1"],
        2348508.0678,
        9169.2588,
        0.0023,
        2,
    ),
    "vdb_nvme__nvme_1vm_raid5_read_seq_ran_8k_32t_w30_f3000/flatfile.html": (
        ["rd1"],
        1156601.0847,
        9031.4015,
        0.0261,
        2,
    ),
    "vdbconvert__test/flatfile.html": (["rd1", "rd2", "rd3"], 50.0169, 0.1954, 5.3952, 2),
    "vdbconvert-root__flatfile.html": (["rd1", "rd2", "rd3"], 117.7458, 0.4599, 16.9653, 2),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_flatfile(name: str) -> None:
    path = corpus_dir("vdbench") / name
    rds, rate, mb, resp, first = EXPECTED[name]
    assert detect(path) == "vdbench-flatfile"
    tables = read(path)
    results = tables.results
    first_rd = results.filter(pl.col("job_name") == rds[0])
    assert results["job_name"].unique(maintain_order=True).to_list()[: len(rds)] == rds
    assert first_rd["iops"].sum() == pytest.approx(rate, rel=1e-9)
    assert first_rd["bandwidth_bytes_per_s"].sum() == pytest.approx(mb * MIB, rel=1e-9)
    weights = first_rd["iops"] / first_rd["iops"].sum()
    assert (first_rd["lat_mean_ns"] * weights).sum() == pytest.approx(
        resp * 1e6, rel=2e-3
    )  # vdbench's resp is the I/O-weighted mean
    warm = tables.intervals.filter(pl.col("job_name") == rds[0])
    assert set(warm.filter(pl.col("is_warmup"))["job_index"]) == set(range(1, first))
    assert not warm.filter(~pl.col("is_warmup"))["job_index"].is_in(list(range(1, first))).any()


def test_mb_per_sec_is_mebibytes() -> None:
    """Evidence for MB = 1024**2: rate x bytes/io / MB/sec in the raw-device flatfiles."""
    for name in ("vdb__output/flatfile.html", "vdbconvert__test/flatfile.html"):
        text = (corpus_dir("vdbench") / name).read_text().splitlines()
        header = next(line.split() for line in text if line.strip().startswith("tod"))
        index = {h: i for i, h in enumerate(header)}
        for line in text:
            fields = line.split()
            if len(fields) == len(header) and fields[index["Interval"]].startswith("avg_"):
                ratio = float(fields[index["rate"]]) * float(fields[index["bytes/io"]]) / float(fields[index["MB/sec"]])
                assert ratio == pytest.approx(MIB, rel=2e-3)


def test_workload_parameters_from_the_file() -> None:
    results = read(corpus_dir("vdbench") / "vdbconvert__test/flatfile.html").results
    assert set(results["rw"]) == {"randrw"} and set(results["block_size_bytes"]) == {4096}
    assert set(results["iodepth"]) == {2} and set(results["rwmixread_pct"]) == {75.0}
    rd1 = results.filter(pl.col("job_name") == "rd1").sort("direction")
    share = rd1["iops"][0] / rd1["iops"].sum()
    assert share == pytest.approx(0.759065, abs=1e-6)  # read% of the avg row


# ---------------------------------------------------------------- output folders, read as one unit

DATA = Path(__file__).parent / "data" / "vdbench"

# folder -> (hosts with per-host runs, total runs, first run's avg line of summary.html: rate, MB/sec, resp ms,
#            n1's (or hd1's) avg rate, version, UTC start of the first run or None)
FOLDERS = {
    "vdb__output": (
        ["n1", "n3", "n4", "n5", "n6", "n7", "n8"],
        1,
        (15773.1, 117.55, 1.009),
        2293.7,
        "vdbench50407",
        "2019-03-08 11:11:38",
    ),
    "vdb__output1": ([], 1, (107.5, 0.10, 1.557), None, "vdbench50407", "2019-03-08 06:45:13"),
    "vdb__create_file_32T": (
        [f"n{i}" for i in range(1, 9)],
        1,
        (390635, 48271, 0.100),
        47562,
        "vdbench50407",
        "2019-03-08 08:14:55",
    ),
    "vdb__random_read_128T_4K_8HOST": (
        [f"n{i}" for i in range(1, 9)],
        1,
        (1104872, 4313.7, 0.115),
        108527,
        "vdbench50407",
        "2019-03-08 09:23:27",
    ),
    "vdb_nvme__nvme_1vm_raid0_read_seq_ran_4k_32t_w30_f3000_20190411": (
        [],
        1,
        (2348508, 9169.2, 0.002),
        None,
        "vdbench50407",
        "2019-04-11 10:01:53",
    ),
    "vdb_nvme__nvme_1vm_raid5_read_seq_ran_8k_32t_w30_f3000": (
        [],
        1,
        (1156601, 9031.4, 0.026),
        None,
        "vdbench50407",
        "2019-04-05 03:31:55",
    ),
    "vdbconvert__test": (["hd1", "hd2"], 3, (50.02, 0.20, 5.395), 25.05, "vdbench50401", None),
}


@pytest.fixture(scope="module")
def corpus_ingest(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    """The whole vdbench corpus folder ingested in place (read only) into a temporary processed root."""
    from benchlib.ingest import ingest_study
    from benchlib.store import load_study_tables

    processed = tmp_path_factory.mktemp("processed")
    report = ingest_study(corpus_dir("vdbench"), processed)
    return report, load_study_tables(report.processed)


def test_every_corpus_file_is_read_or_skipped_with_a_reason(corpus_ingest: tuple) -> None:
    report, _ = corpus_ingest
    root = corpus_dir("vdbench")
    every = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    accounted = set(report.ingested) | {rel for rel, _ in report.skipped}
    assert not report.quarantined
    assert every == accounted
    skipped = dict(report.skipped)
    assert "vdbench parameter file" in skipped["vdbconvert__multihost_test.txt"]
    assert "3 rd" in skipped["vdbconvert__multihost_test.txt"]
    assert skipped["vdb__output/n1-0.stdout.html"].startswith("vdbench other file, not needed")


@pytest.mark.parametrize("folder", sorted(FOLDERS))
def test_output_folder(corpus_ingest: tuple, folder: str) -> None:
    _, tables = corpus_ingest
    hosts, total_runs, (rate, mb, resp), host_rate, version, start = FOLDERS[folder]
    runs = tables.runs.filter(pl.col("source").str.contains(f"/{folder}/", literal=True))
    results = tables.results.join(runs.select("run_id", "host"), on="run_id")
    totals = runs.filter(pl.col("host").is_null())
    assert totals.height == total_runs and set(totals["is_aggregate"]) == {bool(hosts)}
    assert sorted(runs["host"].drop_nulls().unique()) == sorted(hosts)
    assert set(runs["tool_version"]) == {version}
    first = results.filter(pl.col("run_id") == totals.sort("document_index")["run_id"][0])
    assert first["iops"].sum() == pytest.approx(
        rate, rel=5e-4
    )  # summary.html's avg line (4-6 digits) vs the flatfile's
    assert first["bandwidth_bytes_per_s"].sum() / MIB == pytest.approx(
        mb, rel=5e-3, abs=6e-3
    )  # printed with 2 decimals
    weights = first["iops"] / first["iops"].sum()
    assert (first["lat_mean_ns"] * weights).sum() / 1e6 == pytest.approx(resp, abs=6e-4, rel=2e-3)
    if start is None:
        assert totals["start_time"].is_null().all()  # vdbench50401 prints no UTC time to derive it from
    else:
        assert str(totals.sort("document_index")["start_time"][0]).startswith(start)
    if hosts:
        first_host = results.filter((pl.col("host") == hosts[0]) & (pl.col("job_name") == first["job_name"][0]))
        assert first_host["iops"].sum() == pytest.approx(host_rate, rel=1e-3)
        per_host = results.filter(pl.col("host").is_not_null()).group_by("job_name").agg(pl.col("iops").sum())
        # the hosts' rates add up to the folder's total (each rounded to 4-6 digits)
        assert per_host.filter(pl.col("job_name") == first["job_name"][0])["iops"][0] == pytest.approx(rate, rel=2e-3)


@pytest.mark.parametrize("folder", sorted(f for f, spec in FOLDERS.items() if spec[0]))
def test_the_hosts_of_a_run_definition_are_one_run_whose_total_is_vdbenchs(corpus_ingest: tuple, folder: str) -> None:
    """vdbench ran each run definition on every host at once: one run (not one per host), its total the folder's."""
    from benchlib.stats import summarise_runs

    _, tables = corpus_ingest
    runs = tables.runs.filter(pl.col("source").str.contains(f"/{folder}/", literal=True))
    results = tables.results.filter(pl.col("run_id").is_in(runs["run_id"].implode()))
    summary = summarise_runs(runs, results)
    totals = results.filter(pl.col("is_aggregate")).with_columns(run_unit_expr()).sort("run_unit", "direction")
    assert summary["run"].n_unique() == runs.filter(pl.col("is_aggregate"))["run_id"].n_unique()  # not × hosts
    assert summary.sort("run", "direction")["iops"].to_list() == pytest.approx(totals["iops"].to_list(), rel=2e-3)
    assert set(summary["rows"]) == {len(FOLDERS[folder][0]) * 1}  # every host in every run definition's total


def test_per_host_runs_carry_the_workload_and_intervals(corpus_ingest: tuple) -> None:
    _, tables = corpus_ingest
    runs = tables.runs.filter(pl.col("source").str.contains("/vdbconvert__test/", literal=True))
    results = tables.results.join(runs.select("run_id", "host", "labels"), on="run_id")
    assert (
        set(results["rw"]) == {"randrw"}
        and set(results["block_size_bytes"]) == {4096}
        and set(results["iodepth"]) == {2}
    )
    assert runs["labels"].to_list()[0] == [{"name": "threads", "value": "2"}]  # "For loops: threads=2"
    intervals = tables.intervals.join(runs.select("run_id", "host"), on="run_id")
    per_run = intervals.filter(pl.col("metric") == "iops").group_by("run_id").agg(pl.col("job_index").n_unique())
    assert set(per_run["job_index"]) == {60}  # 60 one-second intervals per run, totals and each host
    rd1 = runs.filter(pl.col("host") == "hd1").sort("document_index")["run_id"][0]
    hd1 = intervals.filter((pl.col("run_id") == rd1) & (pl.col("metric") == "iops") & (pl.col("job_index") == 1))
    assert hd1["value"].sum() == pytest.approx(13.0)  # hd1.html, rd1 interval 1: 13.00 I/O per second
    assert hd1.filter(pl.col("direction") == "read")["value"][0] == pytest.approx(13.0 * 0.7692)  # read pct 76.92


def test_file_system_layout_reads_rates_per_direction(corpus_ingest: tuple) -> None:
    _, tables = corpus_ingest
    runs = tables.runs.filter(
        pl.col("source").str.contains("/vdb__random_read_128T_4K_8HOST/", literal=True) & pl.col("host").is_null()
    )
    result = tables.results.filter(pl.col("run_id") == runs["run_id"][0])
    assert result["direction"].to_list() == ["read"]
    row = result.row(0, named=True)
    assert row["rw"] == "read" and row["block_size_bytes"] == 4096 and row["iodepth"] == 128  # fwd1 in parmfile.html
    assert row["runtime_ns"] == 55 * 10**9  # avg_2-12 at interval=5
    assert row["lat_stddev_ns"] == pytest.approx(5.1535e6, rel=1e-4)  # flatfile Resp_std


def test_each_host_of_a_multi_host_run_has_its_own_threads(corpus_ingest: tuple) -> None:
    """threads=128 over 8 hosts: the logfile gives each host's slave threads=16. A host's queue depth is its
    own 16, never the run's 128 (the queue check called every host rate-bound and the total impossible)."""
    _, tables = corpus_ingest
    runs = tables.runs.filter(pl.col("source").str.contains("/vdb__random_read_128T_4K_8HOST/", literal=True))
    depths = tables.results.join(runs.select("run_id", "host"), on="run_id").group_by("host").agg(pl.col("iodepth"))
    per_host = {r["host"]: set(r["iodepth"]) for r in depths.to_dicts()}
    assert per_host.pop(None) == {128}  # the run's total: every host's threads
    assert len(per_host) == 8 and all(d == {16} for d in per_host.values()), per_host
    from benchlib.sources.vdbench_folder import host_threads

    assert host_threads("12:00:00.000 slv=a-0 sd=sd1 threads=4\n12:00:00.000 slv=a-1 sd=sd1 threads=4\n") == [
        {"a": 8}
    ]  # a host's slaves add up


def test_format_run_is_its_own_run(corpus_ingest: tuple) -> None:
    _, tables = corpus_ingest
    runs = tables.runs.filter(
        pl.col("source").str.contains("/vdb__create_file_32T/", literal=True) & pl.col("host").is_null()
    )
    result = tables.results.filter(pl.col("run_id") == runs["run_id"][0]).row(0, named=True)
    assert result["job_name"] == "format_for_rd1" and result["direction"] == "write"
    assert result["block_size_bytes"] is None or result["rw"] != "read"  # not the RD's read workload


def test_console_text_with_for_loops() -> None:
    path = DATA / "vdbench50407-console-forloops.txt"
    assert detect(path) == "vdbench-console"
    tables = read(path)
    labels = [{d["name"]: d["value"] for d in labels} for labels in tables.runs["labels"]]
    assert labels == [
        {"xfersize": "4k", "threads": "4"},
        {"xfersize": "4k", "threads": "8"},
        {"xfersize": "64k", "threads": "4"},
        {"xfersize": "64k", "threads": "8"},
    ]
    assert set(tables.runs["tool_version"]) == {"vdbench50407"}
    results = tables.results.sort("run_id", "direction")
    assert results["block_size_bytes"].to_list() == [4096] * 4 + [65536] * 4
    assert results["iodepth"].to_list() == [4, 4, 8, 8, 4, 4, 8, 8]
    first = results.head(2)
    assert first["iops"].sum() == pytest.approx(10418.7)
    assert first["iops"][0] / first["iops"].sum() == pytest.approx(0.70)
    assert first.filter(pl.col("direction") == "read")["lat_max_ns"][0] == pytest.approx(11.20e6)
    assert set(results["runtime_setting_ns"]) == {4 * 10**9} and set(results["ramp_time_ns"]) == {10**9}
    warm = tables.intervals.filter(pl.col("is_warmup"))
    assert set(warm["job_index"]) == {1}


def test_flatfile_for_loop_runs_are_split(tmp_path: Path) -> None:
    """A run definition with for-loops repeats its name; each repeat (intervals restart after avg_) is its own run."""
    text = (corpus_dir("vdbench") / "vdbconvert__test/flatfile.html").read_text()
    looped = tmp_path / "flatfile.html"  # imitates a for-loop RD: the three runs carry one RD name
    looped.write_text(re.sub(r"\brd[23]\b", "rd1", text))
    tables = read(looped)
    assert tables.runs.height == 3
    assert tables.results.group_by("run_id").agg(pl.col("iops").sum()).sort("run_id")[
        "iops"
    ].to_list() == pytest.approx(
        read(corpus_dir("vdbench") / "vdbconvert__test/flatfile.html")
        .results.group_by("run_id")
        .agg(pl.col("iops").sum())
        .sort("run_id")["iops"]
        .to_list()
    )


def test_parameter_files() -> None:
    from benchlib.sources.vdbench_parm import expand_run, parse_parmfile, values_of

    html = corpus_dir("vdbench") / "vdb__output/parmfile.html"
    parm = parse_parmfile(html, html.read_text())
    assert list(parm.hosts()) == ["n1", "n3", "n4", "n5", "n6", "n7", "n8"]  # hd=n2 is commented out
    assert parm.hosts()["n8"] == "10.233.233.211"
    assert [w["wd"] for w in parm.definitions["wd"]] == ["wd1", "wd2", "wd3"]
    assert parm.named("rd", "random_write")["iorate"] == "max"
    bare = corpus_dir("vdbench") / "vdbconvert__multihost_test.txt"
    parm = parse_parmfile(bare, bare.read_text())
    assert len(parm.definitions["wd"]) == 51 and [r["iorate"] for r in parm.definitions["rd"]] == ["50", "500", "5000"]
    own = parse_parmfile(DATA / "vsan_perf.parm", (DATA / "vsan_perf.parm").read_text())
    assert expand_run(own.definitions["rd"][0]) == [
        {"xfersize": "4k", "threads": "4"},
        {"xfersize": "4k", "threads": "8"},
        {"xfersize": "64k", "threads": "4"},
        {"xfersize": "64k", "threads": "8"},
    ]
    assert values_of("(1-64,d)") == ["1", "2", "4", "8", "16", "32", "64"]
    assert values_of("(10-30,10)") == ["10", "20", "30"]


def test_a_bad_file_quarantines_its_whole_folder_and_costs_no_other_folder(tmp_path: Path) -> None:
    from benchlib.ingest import ingest_study
    from benchlib.store import load_study_tables

    study = tmp_path / "raw" / "vdb"
    for name in ("vdb__output", "vdbconvert__test"):
        shutil.copytree(corpus_dir("vdbench") / name, study / name)
    summary = study / "vdb__output" / "summary.html"
    lines = summary.read_text().splitlines()
    index = next(i for i, line in enumerate(lines) if re.match(r"^\d\d:\d\d:\d\d\.\d{3}\s+5\s", line))
    lines[index] += "   9.9"  # one column too many on interval 5
    summary.write_text("\n".join(lines) + "\n")
    report = ingest_study(study, tmp_path / "processed")
    quarantined = dict(report.quarantined)
    members = {p.relative_to(study).as_posix() for p in (study / "vdb__output").iterdir()}
    assert {rel for rel in quarantined if rel.startswith("vdb__output/")} >= members - {
        rel for rel, _ in report.skipped
    }
    assert f"line {index + 1}" in quarantined["vdb__output/summary.html"]
    assert "vdb__output/summary.html could not be read" in quarantined["vdb__output/totals.html"]
    tables = load_study_tables(report.processed)
    assert set(tables.runs["source"].str.split("/").list.get(1)) == {"vdbconvert__test"}  # the other folder whole
    assert tables.runs.height == 9


def _without_cpu(text: str) -> str:
    """A vdbench report as a build that reports no CPU prints it (vdbench50407 on macOS): 11 values a line."""
    out = []
    for line in text.splitlines():
        if re.search(r"interval\s+i/o\s+MB/sec", line) or re.search(r"rate\s+1024\*\*2", line):
            line = re.sub(r"\s+\S+\s+\S+\s*$", "", line)  # the two cpu% header words
        elif re.match(r"^\d\d:\d\d:\d\d\.\d{3}\s+(\d+|avg_\d+-\d+|std_\d+-\d+|max_\d+-\d+)\s", line):
            line = re.sub(r"\s+\S+\s+\S+\s*$", "", line)
        out.append(line)
    return "\n".join(out) + "\n"


def test_a_build_without_cpu_columns_reads_the_same_runs(tmp_path: Path) -> None:
    from benchlib.ingest import ingest_study
    from benchlib.store import load_study_tables

    study = tmp_path / "raw" / "vdb"
    folder = study / "vdb__output"
    shutil.copytree(corpus_dir("vdbench") / "vdb__output", folder)
    for page in folder.glob("*.html"):
        if page.name != "flatfile.html":
            page.write_text(_without_cpu(page.read_text()))
    (folder / "flatfile.html").unlink()  # the reports alone: nothing to borrow CPU or rows from
    summary = (folder / "summary.html").read_text()
    assert re.search(r"^\d\d:\d\d:\d\d\.\d{3}\s+1\s+(\S+\s+){10}\S+$", summary, re.MULTILINE)  # 11 values
    report = ingest_study(study, tmp_path / "processed")
    assert report.quarantined == []
    tables = load_study_tables(report.processed)
    total = tables.runs.filter(pl.col("host").is_null())
    assert total.height == 1 and total["start_time"][0] is not None
    results = tables.results.filter(pl.col("run_id") == total["run_id"][0])
    assert results["iops"].sum() == pytest.approx(15773.1017)
    assert results["usr_cpu_pct"].is_null().all() and results["sys_cpu_pct"].is_null().all()
    assert tables.runs.filter(pl.col("host").is_not_null()).height == 7
    console = tmp_path / "console.txt"  # the console, with no report header before its lines
    body = [line for line in summary.splitlines() if not re.search(r"interval|1024\*\*2", line)]
    console.write_text("Vdbench distribution: vdbench50407\n" + "\n".join(body) + "\n")
    assert read(console).results["iops"].sum() == pytest.approx(15773.1017)


def test_changing_one_file_rereads_its_folder_only(tmp_path: Path) -> None:
    from benchlib.ingest import ingest_study
    from benchlib.store import load_study_tables

    study = tmp_path / "raw" / "vdb"
    for name in ("vdb__output", "vdbconvert__test"):
        shutil.copytree(corpus_dir("vdbench") / name, study / name)
    first = ingest_study(study, tmp_path / "processed")
    before = load_study_tables(first.processed).runs
    (study / "vdb__output" / "n8.html").unlink()
    second = ingest_study(study, tmp_path / "processed")
    assert all(rel.startswith("vdb__output/") for rel in second.ingested) and second.removed == ["vdb__output/n8.html"]
    assert all(rel.startswith("vdbconvert__test/") for rel in second.unchanged)
    after = load_study_tables(second.processed).runs
    assert after.height == before.height - 1 and "n8" not in after["host"].to_list()
    third = ingest_study(study, tmp_path / "processed")
    assert not third.ingested and load_study_tables(third.processed).runs.height == after.height


def test_rates_over_runs_use_the_measured_intervals(corpus_ingest: tuple) -> None:
    """io_count and io_bytes cover the avg_ span (warm-up excluded), so rate_over_runs gives back vdbench's rate."""
    from benchlib.stats.aggregate import rate_over_runs

    _, tables = corpus_ingest
    runs = tables.runs.filter(
        pl.col("source").str.contains("/vdbconvert__test/", literal=True) & pl.col("host").is_null()
    )
    results = tables.results.filter(pl.col("run_id").is_in(runs["run_id"].implode())).with_columns(
        is_aggregate=pl.lit(False)
    )
    rates = rate_over_runs(results, ["job_name"])
    assert rates["iops"].to_list() == pytest.approx([50.0169, 212.4237, 310.0508], rel=1e-3)  # flatfile avg_2-60 rates


def test_response_time_histograms_become_latency_bins(corpus_ingest: tuple) -> None:
    """histogram.html per run and direction; counts cover the avg_ span.

    Per host where vdbench50401 writes host histograms.
    """
    from benchlib.stats.aggregate import pooled_percentiles

    _, tables = corpus_ingest
    runs = tables.runs.filter(pl.col("source").str.contains("/vdbconvert__test/", literal=True))
    bins = tables.latency_bins.join(runs.select("run_id", "host", "document_index"), on="run_id")
    first = bins.filter((pl.col("document_index") == 0) & pl.col("host").is_null())  # the totals of rd1
    counts = {
        r["direction"]: r["count"] for r in first.group_by("direction").agg(pl.col("count").sum()).iter_rows(named=True)
    }
    assert counts == {"read": 2240, "write": 711}  # histogram.html, rd1: "Reads" 2,240 and "Writes" 711 I/Os
    assert sum(counts.values()) == round(50.0169 * 59)  # = rate x the 59 seconds of avg_2-60
    per_host = bins.filter(pl.col("host").is_not_null()).group_by("direction").agg(pl.col("count").sum())
    assert per_host.sort("direction")["count"].to_list() == [25377, 8400]  # hd1 + hd2 = the totals of the three runs
    p95 = pooled_percentiles(first.filter(pl.col("direction") == "read"), [95.0])
    assert p95["value_ns"][0] == 40e6  # the 20-40 ms bucket holds the 95th percentile of rd1's reads
    fsd = tables.runs.filter(pl.col("source").str.contains("/vdb__random_read_128T_4K_8HOST/summary", literal=True))
    fsd_bins = tables.latency_bins.filter(pl.col("run_id") == fsd["run_id"][0])
    assert set(fsd_bins["direction"]) == {"total"} and fsd_bins["count"][0] == 60_522_012


def test_host_runs_say_where_the_host_is_and_its_slaves(corpus_ingest: tuple) -> None:
    _, tables = corpus_ingest
    runs = tables.runs.filter(pl.col("source").str.contains("/vdb__output/n8.html", literal=True))
    labels = {item["name"]: item["value"] for item in runs["labels"][0]}
    assert labels == {"system": "10.233.233.211", "slaves": "2"}  # parmfile hd=n8,system=...; n8-0 and n8-1


def test_a_run_definitions_tail_pools_its_hosts_histograms(
    corpus_ingest: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vdbench's response time histograms give the tail of each run definition, all its hosts added, its reads'
    and writes apart (vdbench prints them apart, as fio does a mix's)."""
    import benchlib.store
    from benchlib.views import tail_latency

    report, _ = corpus_ingest
    monkeypatch.setattr(benchlib.store, "PROCESSED", report.processed.parent)
    tails = tail_latency(str(corpus_dir("vdbench")), by=[], percentiles=(50.0, 95.0))
    rd1 = tails.filter(
        pl.col("run").str.contains("vdbconvert__test", literal=True) & pl.col("run").str.starts_with("run 1 in ")
    )
    assert rd1["direction"].to_list() == ["read", "write"]
    assert set(rd1["origin"]) == {"vdbench histogram (total latency)"}
    assert rd1["ios"].sum() == 2240 + 711  # hd1 + hd2 = histogram.html's rd1 reads and writes


def test_an_older_flatfile_with_kernel_statistics_and_no_time_columns_is_read_alone(tmp_path: Path) -> None:
    """A flatfile of a build that wrote kstat columns and no ``tod``: read, its run has no start time, no NaN."""
    from benchlib.cli import main
    from benchlib.ingest import ingest_study
    from benchlib.store import load_study_tables

    columns = (
        "Run Interval reqrate rate MB/sec bytes/io read% resp read_resp write_resp resp_max resp_std xfersize "
        "threads rdpct rhpct whpct seekpct lunsize version ks_rate ks_resp ks_wait ks_svct ks_mb ks_read% "
        "ks_busy% ks_avwait ks_avact ks_bytes cpu_used cpu_user cpu_kernel cpu_wait cpu_idle"
    )
    row = "1000.0 7.8125 8192 100.0 1.5 1.5 0.0 9.0 0.3 8192 8 100 0 0 100 10.0 vdbench500 " + "1.0 " * 15
    lines = [f"rd1 {i} max {row}" for i in range(1, 6)] + [f"rd1 avg_2-5 max {row}"]
    folder = tmp_path / "raw" / "old" / "run1"
    folder.mkdir(parents=True)
    banner = "<pre>\n*\n* 'flatfile.html' contains Vdbench generated information in a column by column format.\n*\n"
    (folder / "flatfile.html").write_text(banner + columns + "\n" + "\n".join(lines) + "\n")
    report = ingest_study(folder.parent, tmp_path / "processed")
    assert report.ingested == ["run1/flatfile.html"], report.quarantined
    tables = load_study_tables(report.processed)
    assert tables.runs["start_time"].to_list() == [None]
    assert tables.results["iops"].to_list() == [1000.0] and tables.results["lat_mean_ns"].to_list() == [1.5e6]
    assert main(["ingest", str(folder.parent), "--processed", str(tmp_path / "processed")]) == 0


def test_a_run_without_its_length_weighs_latency_by_rate_and_never_prints_nan(capsys: pytest.CaptureFixture) -> None:
    from benchlib.stats import summarise_runs

    runs = pl.DataFrame(
        {"run_id": ["r"], "source": ["f"], "format": ["x"], "tool_version": [None], "is_aggregate": [False]}
    )
    results = pl.DataFrame(
        {
            "run_id": ["r", "r"],
            "is_aggregate": [False, False],
            "group_id": [0, 0],
            "direction": ["read", "read"],
            "iops": [9000.0, 1000.0],
            "bandwidth_bytes_per_s": [None, None],
            "lat_mean_ns": [1e6, 1e7],
            "clat_mean_ns": [None, None],
            "io_count": [None, None],
            "runtime_ns": [None, None],
        },
        schema_overrides={"bandwidth_bytes_per_s": pl.Float64, "clat_mean_ns": pl.Float64, "io_count": pl.Int64},
    )
    summary = summarise_runs(runs, results)
    assert summary["lat_mean_ns"].to_list() == [pytest.approx(1.9e6)]
    none = summarise_runs(runs, results.with_columns(pl.lit(None, pl.Float64).alias("iops")))
    assert none["lat_mean_ns"].to_list() == [None]


def _fsd_dots_and_spacing(text: str) -> str:
    """A file-system report whose header has other dots and spacing: ``.Interval.``, one space between words."""
    lines = text.splitlines()
    for i, line in enumerate(lines[:-1]):
        if "..Interval.." in line:
            lines[i] = re.sub(
                r"\s+", " ", line.replace("..Interval..", ".Interval.").replace(".ReqstdOps...", ".ReqstdOps.")
            )
            lines[i + 1] = re.sub(r"\s+", " ", lines[i + 1])
    return "\n".join(lines) + "\n"


def _fsd_without_cpu(text: str) -> str:
    """A file-system report with no cpu% group: its header and every interval line without those two values."""
    lines, out, header = text.splitlines(), [], False
    for line in lines:
        if "..Interval.." in line:
            line, header = line.replace(" ...cpu%...", ""), True
        elif header and re.match(r"^\s+rate\s+resp\s+total\s+sys", line):
            line, header = re.sub(r"(rate\s+resp)\s+total\s+sys", r"\1", line), False
        elif re.match(r"^\d\d:\d\d:\d\d\.\d{3}\s+(\d+|avg_\d+-\d+)\s", line):
            parts = line.split()
            line = " ".join(parts[:4] + parts[6:])
        out.append(line)
    return "\n".join(out) + "\n"


def _ingested(study: Path, processed: Path) -> tuple:
    from benchlib.ingest import ingest_study
    from benchlib.store import load_study_tables

    report = ingest_study(study, processed)
    return report, load_study_tables(report.processed)


@pytest.mark.parametrize("variant", ["dots and spacing", "no cpu columns", "flatfile alone", "swat_mon beside"])
def test_every_file_system_layout_read_before_is_read_still(variant: str, tmp_path: Path) -> None:
    """Issue 44's layout regression set for vdbench's file-system runs (fsd/fwd): a header whose dots and spacing
    differ (25 values a line, refused before as 'found 25'), a build without the cpu% group, the flatfile
    alone in a folder, and swat_mon files beside the reports: each reads the runs and figures the corpus
    folder gives, nothing quarantined."""
    source = corpus_dir("vdbench") / "vdb__create_file_32T"
    _, want = _ingested(source, tmp_path / "want")  # the corpus folder as it is, read in place
    study = tmp_path / "raw" / "fs"
    folder = study / "vdb__create_file_32T"
    shutil.copytree(source, folder)
    change = {"dots and spacing": _fsd_dots_and_spacing, "no cpu columns": _fsd_without_cpu}.get(variant)
    for page in folder.glob("*.html"):
        if change and page.name != "flatfile.html":
            page.write_text(change(page.read_text()))
    if change:
        (folder / "flatfile.html").unlink()  # the reports alone: nothing to borrow rows from
    if variant == "flatfile alone":
        for page in folder.iterdir():
            if page.name != "flatfile.html":
                page.unlink()
    if variant == "swat_mon beside":
        (folder / "swat_mon.bin").write_bytes(b"\x00\x01swat\x00" * 64)
    report, got = _ingested(study, tmp_path / "processed")
    assert report.quarantined == [] and report.ok, report.quarantined
    total = pl.col("host").is_null()
    iops = [t.results.join(t.runs.filter(total), on="run_id")["iops"].sum() for t in (want, got)]
    assert iops[1] == pytest.approx(iops[0], rel=1e-4) and iops[0] > 0
    if variant == "swat_mon beside":
        assert "swat_mon.bin" in " ".join(rel for rel, _ in report.skipped)


def test_a_totals_line_apart_from_its_own_intervals_is_said_with_both_figures(tmp_path: Path) -> None:
    """Issue 44: a real vdbench folder (flatfile left out, so the report's own rows are read) whose avg_ line
    is edited 10% above its intervals keeps vdbench's totals and the intervals' mean beside them; the words
    name both. Every corpus folder as published has none: its lines and intervals agree within printing."""
    import shutil

    from benchlib.stats.plausibility import printed_apart
    from benchlib.words.implausible import printed_apart_words

    folder = tmp_path / "vdb"
    shutil.copytree(corpus_dir("vdbench") / "vdb__random_read_128T_4K_8HOST", folder)
    (folder / "flatfile.html").unlink()
    summary = folder / "summary.html"
    line = "avg_2-12 1104872  0.115   1.3 0.83 100.0 1104872"  # total rate, resp, cpu, read %, read rate
    assert summary.read_text().count(line) == 1
    summary.write_text(summary.read_text().replace(line, line.replace("1104872", "1215359")))
    tables = read(summary)
    rows = tables.results.join(tables.runs.select("run_id", "source", "format"), on="run_id")
    total = rows.filter(pl.col("is_aggregate"), pl.col("direction") == "read").row(0, named=True)
    assert total["iops"] == 1215359 and total["printed_iops"] == pytest.approx(1104872, rel=1e-4)  # the intervals'
    said = printed_apart_words(printed_apart(rows))
    assert "rd1, read: IOPS 1,215,359 in its totals line, its intervals' mean 1,104,8" in said
    assert said.count("vdbench's totals line") == 1 and "issued count" not in said
    for name in ("vdb__random_read_128T_4K_8HOST", "vdb__output1"):
        published = read(corpus_dir("vdbench") / name / "summary.html").results
        assert published["printed_iops"].is_null().all()  # vdbench's own lines agree with their intervals
