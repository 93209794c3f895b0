"""HCIBench result folders (fixtures shaped as HCIBench writes them; see tests/data/hcibench/README.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from benchlib.errors import FormatError
from benchlib.ingest import ingest_study
from benchlib.sources import detect, read
from benchlib.sources.hcibench import check_summary
from benchlib.store import load_study_tables

DATA = Path(__file__).parent / "data" / "hcibench"
VDB_CASE = "vdb-test/vdb-2vmdk-100ws-4k-70rdpct-100randompct-4threads-1700000000"
FIO_CASE = "fio-test/fio-1vmdk-100ws-4k-70rdpct-100randompct-1700000500"
MIB = 1024 * 1024


def _labels(run: dict) -> dict[str, str]:
    return {item["name"]: item["value"] for item in run["labels"]}


def test_vdbench_engine_summary_is_read_as_written() -> None:
    path = DATA / f"{VDB_CASE}-res.txt"
    assert detect(path) == "hcibench-summary"
    tables = read(path)
    assert tables.runs.height == 4 and tables.runs["is_aggregate"].all() and set(tables.runs["tool"]) == {"hcibench"}
    first = tables.runs.row(0, named=True)
    labels = _labels(first)
    assert first["tool_version"] == "vdbench50407"
    assert labels["datastore"] == "vsanDatastore" and labels["engine"] == "vdbench" and labels["vms"] == "2"
    assert labels["run_definition"].endswith("For loops: xfersize=4k threads=4")
    assert labels["usage_cpu_usage"] == "31.27%" and labels["usage_vsan_pcpu_usage"] == "6.12%"
    assert "not a measured percentile" in labels["p95"]
    total = tables.results.filter((pl.col("run_id") == first["run_id"]) & (pl.col("direction") == "total")).row(
        0, named=True
    )
    assert total["job_name"] == "run1" and total["iops"] == pytest.approx(16669.9)
    assert total["bandwidth_bytes_per_s"] == pytest.approx(65.12 * MIB) and total["lat_mean_ns"] == pytest.approx(
        0.48e6
    )
    assert total["lat_percentiles"] == [{"percentile": 95.0, "value_ns": pytest.approx(1.28e6)}]
    read_row = tables.results.filter((pl.col("run_id") == first["run_id"]) & (pl.col("direction") == "read"))
    assert read_row["lat_mean_ns"][0] == pytest.approx(0.37e6)


def test_fio_engine_summary_is_read_as_written() -> None:
    tables = read(DATA / f"{FIO_CASE}-res.txt")
    run = tables.runs.row(0, named=True)
    assert _labels(run)["engine"] == "fio" and run["tool_version"] is None
    rows = {r["direction"]: r for r in tables.results.iter_rows(named=True)}
    assert rows["total"]["job_name"] == "job0" and rows["total"]["iops"] == pytest.approx(91223.07)
    assert rows["total"]["bandwidth_bytes_per_s"] == pytest.approx(356.33 * MIB)
    assert rows["read"]["lat_mean_ns"] == pytest.approx(0.13e6) and rows["write"]["lat_mean_ns"] == pytest.approx(
        0.16e6
    )
    assert rows["read"]["lat_percentiles"][0]["value_ns"] == pytest.approx(0.20e6)


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory):
    processed = tmp_path_factory.mktemp("processed")
    report = ingest_study(DATA, processed)
    return report, load_study_tables(report.processed)


def test_worker_vms_become_hosts(ingested) -> None:
    report, tables = ingested
    assert not report.quarantined
    assert sorted(report.ingested) == sorted(
        [
            f"{VDB_CASE}-res.txt",
            f"{FIO_CASE}-res.txt",
            f"{VDB_CASE}/hci-vdb-datastore-11-1-1.txt",
            f"{VDB_CASE}/hci-vdb-datastore-11-1-2.txt",
            f"{FIO_CASE}/hci-fio-datastore-11-1-1.json",
            f"{FIO_CASE}/hci-fio-datastore-11-1-2.json",
        ]
    )  # the .cfg parameter files and README are not results
    vms = tables.runs.filter(~pl.col("is_aggregate"))
    assert sorted(vms["host"].unique()) == [
        "hci-fio-datastore-11-1-1",
        "hci-fio-datastore-11-1-2",
        "hci-vdb-datastore-11-1-1",
        "hci-vdb-datastore-11-1-2",
    ]
    assert vms.filter(pl.col("host") == "hci-vdb-datastore-11-1-2").height == 4  # one run per for-loop run


def test_check_reports_where_hcibench_disagrees(ingested) -> None:
    _, tables = ingested
    check = check_summary(tables.runs, tables.results)
    vdb = check.filter(
        pl.col("source").str.contains("vdb-test") & pl.col("run").str.ends_with("(xfersize=4k threads=4)")
    )
    by_metric = {r["metric"]: r for r in vdb.iter_rows(named=True)}
    # the avg_2-4 lines of the two consoles: rate, resp (VM 1: 10418.7 at 0.383 ms; VM 2: 6251.2 at 0.5745 ms)
    rates, resps = (10418.7, 6251.2), (0.383, 0.383 * 1.5)
    assert by_metric["iops"]["benchlib"] == pytest.approx(sum(rates), abs=0.1)
    assert by_metric["iops"]["hcibench"] == pytest.approx(16669.9)
    weighted = sum(r * t for r, t in zip(rates, resps, strict=True)) / sum(rates)
    assert by_metric["lat_mean_ms"]["benchlib"] == pytest.approx(weighted, rel=2e-3)
    assert by_metric["lat_mean_ms"]["hcibench"] == pytest.approx(round(sum(resps) / 2, 2))  # HCIBench: plain mean
    assert by_metric["lat_mean_ms"]["difference_pct"] > 4
    assert "1.645" in by_metric["lat_p95_ms"]["note"] and by_metric["lat_p95_ms"]["benchlib"] is None
    assert by_metric["vms"]["hcibench"] == by_metric["vms"]["benchlib"] == 2


def test_check_finds_hcibench_reading_a_status_snapshot(ingested) -> None:
    """HCIBench takes the first fio document with eta 0.

    In these real runs that is the last --status-interval snapshot.
    """
    _, tables = ingested
    check = check_summary(tables.runs, tables.results).filter(pl.col("source").str.contains("fio-test"))
    by_metric = {r["metric"]: r for r in check.iter_rows(named=True)}
    final, snapshot = 0.0, 0.0
    for path in sorted((DATA / FIO_CASE).glob("*.json")):
        text, decoder, documents, position = path.read_text(), json.JSONDecoder(), [], 0
        while (start := text.find("{", position)) >= 0:
            document, position = decoder.raw_decode(text, start)
            documents.append(document)
        final += sum(documents[-1]["jobs"][0][d]["iops"] for d in ("read", "write"))
        first_done = next(d for d in documents if d["jobs"][0]["eta"] == 0)
        snapshot += sum(first_done["jobs"][0][d]["iops"] for d in ("read", "write"))
    assert by_metric["iops"]["benchlib"] == pytest.approx(final)
    assert by_metric["iops"]["hcibench"] == pytest.approx(snapshot, abs=0.01)
    assert "status-interval" in by_metric["iops"]["note"]
    assert by_metric["read_lat_mean_ms"]["difference_pct"] < -10  # the busy VM's slower I/Os count for more
    assert "json+" in by_metric["read_lat_p95_ms"]["note"]


def test_a_broken_summary_figure_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "case-1-res.txt"
    text = (DATA / f"{VDB_CASE}-res.txt").read_text().replace("IOPS\t\t= 24966.4 IO/S", "IOPS\t\t= n/a IO/S")
    path.write_text(text)
    with pytest.raises(FormatError, match=r"line 16: a number with its unit"):
        read(path)


def test_the_cli_prints_the_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from benchlib.cli import main

    shutil.copytree(DATA / "vdb-test", tmp_path / "raw" / "hci")
    assert main(["ingest", str(tmp_path / "raw" / "hci"), "--processed", str(tmp_path / "processed")]) == 0
    out = capsys.readouterr().out
    assert "HCIBench's summary vs benchlib" in out and "plain mean of the VMs' means" in out


def test_parameter_files_fill_in_what_the_console_lacks(ingested) -> None:
    """vdbench's console has no seek %: the test's vdbench.cfg gives it; hcibench.cfg's settings label the summary."""
    _, tables = ingested
    vm = tables.runs.filter(pl.col("host") == "hci-vdb-datastore-11-1-1")
    results = tables.results.filter(pl.col("run_id").is_in(vm["run_id"].implode()))
    assert set(results["rw"]) == {"randrw"} and set(results["rwmixread_pct"]) == {70.0}
    summary = tables.runs.filter(pl.col("format") == "hcibench-summary").row(0, named=True)
    assert _labels(summary)["hcibench_number_vm"] == "2" and "hcibench_vc" in _labels(summary)


def test_several_datastores_are_said_not_guessed(tmp_path: Path) -> None:
    """A summary of two datastores cannot be matched to VM files named by datastore id: the check says so."""
    study = tmp_path / "raw" / "hci"
    shutil.copytree(DATA / "vdb-test", study)
    summary = study / f"{Path(VDB_CASE).name}-res.txt"
    text = summary.read_text()
    first_block = text.split("Resource Usage:")[0]
    summary.write_text(
        first_block
        + first_block.replace("vsanDatastore", "vsanDatastore-2")
        + "Resource Usage:"
        + text.split("Resource Usage:")[1]
    )
    report = ingest_study(study, tmp_path / "processed")
    tables = load_study_tables(report.processed)
    check = check_summary(tables.runs, tables.results)
    assert set(check["metric"]) == {"datastores"} and check.height == 8
    assert "cannot be split per datastore" in check["note"][0]


def test_the_worker_vms_of_a_test_case_are_one_run(ingested) -> None:
    """HCIBench's VMs ran at once and each wrote its own file: per run definition one run of both VMs,
    whose total is HCIBench's own (16,669.9 IOPS for run1), never two runs of one VM each."""
    from benchlib.stats import summarise_runs

    _, tables = ingested
    runs = tables.runs.filter(pl.col("source").str.contains(VDB_CASE + "/", literal=True))
    summary = summarise_runs(runs, tables.results.filter(pl.col("run_id").is_in(runs["run_id"].implode())))
    assert summary["run"].n_unique() == 4 and set(summary["rows"]) == {2}  # 4 run definitions x 2 VMs each
    first = summary.filter(pl.col("run") == summary["run"].sort()[0])
    assert first["iops"].sum() == pytest.approx(16669.9, rel=1e-4)


def test_the_run_page_says_where_hcibenchs_summary_differs_from_its_vms(tmp_path: Path) -> None:
    """Disagreement is data: the cell page says HCIBench's figure and benchlib's, with why, for its own runs only."""
    from benchlib.store import open_study
    from benchlib.views import cell_frame, summary_apart
    from benchlib.words.implausible import summary_apart_words

    study = tmp_path / "raw" / "hci"
    shutil.copytree(DATA / "vdb-test", study)
    ingest_study(study, tmp_path / "processed")
    opened = open_study(study, tmp_path / "processed")
    rows = cell_frame(opened, {})
    big = summary_apart(opened, rows.filter(pl.col("block_size_bytes") == 65536))
    assert set(big["run"]) == {
        "vsanDatastore / run1 (xfersize=64k threads=4)",
        "vsanDatastore / run1 (xfersize=64k threads=8)",
    }
    assert (big["difference_pct"].abs() > 1).all() and "lat_mean_ms" in set(big["metric"])
    said = summary_apart_words(big)
    assert "mean latency (ms): HCIBench 1.64, benchlib 1.56 (+5.2%)" in said
    assert said.count("plain mean of the VMs' means") == 1  # each reason once
    assert summary_apart(opened, rows.head(0)).is_empty() and summary_apart_words(big.head(0)) == ""


def test_fio_and_vdbench_tests_of_one_study_are_pages_of_their_own(ingested) -> None:
    """HCIBench ran a vdbench test and a fio test, nothing declared: before, both tools' runs were one
    configuration, one median of vdbench's and fio's totals. The tool is work: a page each. The fio test's
    two VMs ran depths 1 and 16 at once: one workload, kept whole on its page; where the results table shows
    its depths apart, each row counts the VM it holds and no whole-run figure (its CPU, its p99)."""
    from benchlib import fit
    from benchlib.results import configuration_results
    from benchlib.store import open_study
    from benchlib.views import cell_frame

    report, _ = ingested
    opened = open_study(DATA, report.processed.parent)
    axes = fit.axes(opened)
    assert axes == ["tool", "block_size_bytes"]
    for tool, vms in (("fio", 2), ("vdbench", 2)):
        page = cell_frame(opened, {"tool": tool, "block_size_bytes": "4096"})
        assert set(page["tool"]) == {tool} and page["vm"].n_unique() == vms
    fio = cell_frame(opened, {"tool": "fio", "block_size_bytes": "4096"})
    assert sorted(set(fio["iodepth"])) == [1, 16]  # the run whole, both its VMs
    table = configuration_results(opened, by=axes)
    for row in table.filter(pl.col("tool") == "fio").iter_rows(named=True):
        assert row["members"] == 1 and row["cpu_pct"] is None


def test_inspect_checks_a_summary_against_its_vms_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 44: `benchlib inspect <test>-res.txt` says where HCIBench's figures differ from its VMs' (the
    folder beside it), as ingest does; alone, it says there is nothing to check them against."""
    from benchlib.cli import main

    summary = DATA / f"{VDB_CASE}-res.txt"
    assert main(["inspect", str(summary)]) == 0
    out = capsys.readouterr().out
    assert "HCIBench's summary vs benchlib" in out and "plain mean of the VMs' means" in out
    alone = tmp_path / summary.name
    shutil.copy(summary, alone)
    assert main(["inspect", str(alone)]) == 0
    out = capsys.readouterr().out
    assert "is not beside it: nothing to check its figures against" in out and "vs benchlib" not in out
