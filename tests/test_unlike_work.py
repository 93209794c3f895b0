"""Runs of unlike work under one configuration: a page each, never one median of both (issue 39, any study)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.conftest import build_study_report
from tests.fio_helpers import run_job_file


def test_a_folder_of_other_work_filed_under_one_level_is_a_configuration_of_its_own() -> None:
    """fio-sample files its 70/30 mix (the formats folder) under block size 4k beside three runs of random
    reads: the cell pages split them as the results table does, each page's figures are its own runs', and
    the mix's logs go with the mix."""
    from benchlib import fit
    from benchlib.results import configuration_results
    from benchlib.store import open_study
    from benchlib.views import cell_frame, member_table, run_steadiness_table, tail_latency

    opened = open_study("fio-sample")
    assert fit.axes(opened) == ["block_size", "rw"]
    assert fit.cell(opened)["levels"] == {"block_size": "4k", "rw": "randread"}
    assert fit.host_side(opened)["by"] == ["block_size", "rw"]  # its table has a row per work too
    table = configuration_results(opened, by=["block_size"])
    for (size, rw), runs in {("4k", "randread"): 3, ("4k", "randrw"): 1, ("64k", "randread"): 3}.items():
        levels = {"block_size": size, "rw": rw}
        only = {k: [v] for k, v in levels.items()}
        row = table.filter(pl.col("block_size") == size, pl.col("rw") == rw)
        page = member_table(cell_frame(opened, levels), "iops")
        assert (page["runs"][0], row["runs"][0]) == (runs, runs)
        assert page["iops"][0] == pytest.approx(row["iops"][0])  # one host: its median is the run totals'
        tails = tail_latency(opened, by=list(levels), only=only, member="vm")
        assert tails["run"].n_unique() == runs
        assert ("direction" in tails.columns) == (rw == "randrw")  # only the mix has writes
        logged = run_steadiness_table(opened, list(levels), only=only)
        assert logged.height == (1 if rw == "randrw" else 0)  # the formats folder's logs are the mix's


TWO_SIZES = """
[global]
filename={{target}}
size=8m
rw=randread
bs={size}
ioengine=psync
direct=0
time_based=1
runtime=1

[reads]
"""


@pytest.mark.fio
def test_a_study_that_declares_nothing_gets_a_page_per_work_its_runs_ran(fio_binary: str, tmp_path: Path) -> None:
    """Two runs at 4 KiB and two at 16 KiB, no factor declared: a page for each block size with its two runs
    (before: no page at all, and the summary pages took one median of both sizes), and no combination said
    to be missing, since the study declared none."""
    from benchlib.ingest import ingest_study

    data = tmp_path / "data"
    study = data / "raw" / "sizes"
    study.mkdir(parents=True)
    (study / "study.toml").write_text('[study]\nname = "sizes"\n', encoding="utf-8")
    for size in ("4k", "16k"):
        for run in ("a", "b"):
            folder = study / f"{size}-{run}"
            folder.mkdir()
            run_job_file(fio_binary, folder, "fio", TWO_SIZES.format(size=size))
            (folder / "fio.fio").unlink()
            (folder / "target.dat").unlink()
    ingest_study(study, data / "processed")
    folder = build_study_report(data, "sizes", tmp_path / "reports")
    pages = sorted(p.name for p in folder.glob("block_size_bytes=*.html"))
    assert pages == ["block_size_bytes=16384.html", "block_size_bytes=4096.html"]
    index = (folder / "index.html").read_text(encoding="utf-8")
    assert "Block size 4 KiB" in index and "Block size 16 KiB" in index
    assert "without runs" not in index  # the study declares no combination: none is missing
    assert "the runs differ in block size, which study.toml does not declare" in index  # how to compare them
    from benchlib.store import open_study
    from benchlib.views import cell_frame, member_table, tail_latency

    opened = open_study(study, data / "processed")
    for size in ("4096", "16384"):
        levels = {"block_size_bytes": size}
        assert member_table(cell_frame(opened, levels), "iops")["runs"].to_list() == [2]
        tails = tail_latency(opened, by=list(levels), only={"block_size_bytes": [size]})
        assert tails["run"].n_unique() == 2  # its own two runs' histograms, not the other size's


def test_a_phase_whose_runs_ran_several_block_sizes_is_said_by_its_patterns() -> None:
    """A phase's words name its work; where its runs ran one pattern at two sizes (a run of other work filed
    beside them) the sizes are pages of their own, and the phase is not said as 'mix, 4 KiB and mix, 64 KiB'."""
    from benchlib.tables import phase_words

    work = {
        "0": [("randrw", 4096), ("randrw", 65536)],
        "1": [("read", 131072)],
        "2": [("randread", 4096), ("write", 65536)],
    }
    assert phase_words(work) == {
        "0": "0 (random read/write mix)",
        "1": "1 (sequential read, 128 KiB)",
        "2": "2 (random read, 4 KiB and sequential write, 64 KiB)",  # two jobs of one run: both said, each its size
    }


def test_a_mixs_member_table_gives_reads_and_writes_their_own_mean_latency() -> None:
    """fio-sample's 70/30 mix: reads took 0.032 ms, writes (absorbed by the cache) 0.006 ms; one mean of
    both (0.0245 ms) was neither's. A job of one direction keeps its one column."""
    from benchlib.views import cell_frame, member_table

    mix = member_table(cell_frame("fio-sample", {"block_size": "4k", "rw": "randrw"}), "iops")
    assert mix.columns == ["vm", "iops", "read_total_latency_ms", "write_total_latency_ms", "runs"]
    rows = cell_frame("fio-sample", {"block_size": "4k", "rw": "randrw"})
    for way in ("read", "write"):
        side = rows.filter(pl.col("direction") == way)
        weighted = (side["lat_mean_ns"] * side["iops"]).sum() / side["iops"].sum() / 1e6  # its jobs, by I/Os
        assert mix[f"{way}_total_latency_ms"][0] == pytest.approx(weighted, rel=1e-3)  # by I/O counts, not rates
    reads = member_table(cell_frame("fio-sample", {"block_size": "4k", "rw": "randread"}), "iops")
    assert reads.columns == ["vm", "iops", "total_latency_ms", "runs"]


def test_a_pipeline_whose_only_keeps_a_factor_that_is_not_an_axis_still_expands(tmp_path: Path) -> None:
    """Reviewer's case: loopback with axes = block_size and only = ioengine libaio. Its runs differ in job
    parameters under one block size, so work axes join; the cells must still keep only libaio's runs (the
    combinations carried only the axes' columns, and the only filter failed on ioengine)."""
    import dataclasses

    from benchlib import fit
    from benchlib.pipeline import _with_derived, expand_cells, load_pipeline
    from benchlib.store import open_study

    path = tmp_path / "p.toml"
    path.write_text('[pipeline]\nstudy = "loopback-fio"\naxes = ["block_size"]\nonly = { ioengine = ["libaio"] }\n')
    pipeline = load_pipeline(path)
    study = open_study("loopback-fio")
    work = fit.work_axes(study, list(pipeline.axes), pipeline.only)
    assert work  # the profiles' unlike work under one block size
    axes = (*pipeline.axes, *work)
    runs, factors = _with_derived(study, (*axes, *pipeline.only), work, study.study.factors)
    cells, missing, _, _ = expand_cells(dataclasses.replace(pipeline, axes=axes), runs, factors, None, work=work)
    assert cells and all(set(c) == set(axes) for c in cells)
    kept = {c["block_size"] for c in cells}
    assert kept == {"4k", "64k"} and not missing


def test_a_member_table_splits_reads_and_writes_only() -> None:
    """A job with fsync has a 'sync' direction beside its reads: no second latency column for it."""
    from benchlib.views import cell_frame, member_table

    reads = cell_frame("fio-sample", {"block_size": "4k", "rw": "randread"})
    rows = pl.concat([reads, reads.with_columns(pl.lit("sync").alias("direction"), pl.col("lat_mean_ns") / 4)])
    table = member_table(rows, "iops")
    assert [c for c in table.columns if c.endswith("_ms")] == ["total_latency_ms"]


def test_a_comparison_holds_undeclared_work_apart_and_any_factor_name_draws(tmp_path: Path) -> None:
    """Two sides, each an HCIBench study of a fio and a vdbench test at two block sizes, nothing declared but
    the side: the comparison is made within each tool and block size (before: one median of fio's and
    vdbench's runs at both sizes a side). A factor named like a column the figure uses (side) still draws."""
    import shutil

    from benchlib import fit
    from benchlib.figures import _runs_against_baseline
    from benchlib.ingest import ingest_study
    from benchlib.store import open_study

    study = tmp_path / "raw" / "two"
    for side in ("a", "b"):
        shutil.copytree(
            Path(__file__).parent / "data" / "hcibench", study / side, ignore=shutil.ignore_patterns("*.md")
        )
    for copy in (study / "b").rglob("*"):  # another capture of the same tests: the same bytes would be one file
        if copy.is_file():
            copy.write_bytes(copy.read_bytes() + b"\n")
    (study / "study.toml").write_text(
        '[study]\nname = "two"\n[factors]\nside = ["a", "b"]\n'
        '[[files]]\nglob = "a/**"\nlevels = { side = "a" }\n[[files]]\nglob = "b/**"\nlevels = { side = "b" }\n',
        encoding="utf-8",
    )
    ingest_study(study, tmp_path / "processed")
    opened = open_study(study, tmp_path / "processed")
    page = fit.comparison(opened)
    assert page["factor"] == "side" and page["by"] == ["tool", "block_size_bytes"]
    runs = pl.DataFrame({"baseline": ["x", "x", "x", "x"], "side": ["a", "a", "b", "b"], "iops": [1.0, 3.0, 2.0, 4.0]})
    table = pl.DataFrame({"baseline": ["x"], "side": ["b"], "runs": [2], "runs_baseline": [2]})
    dots = _runs_against_baseline(runs, table, value="iops", factor="side", baseline="a", label=["baseline", "side"])
    assert dots is not None and dots.height == 4 and set(dots.columns) == {"comparison", "side", "baseline", "pct"}


def test_a_run_that_does_not_give_a_parameter_is_a_level_of_its_own_and_pools_nothing(tmp_path: Path) -> None:
    """Public vdbench folders, nothing declared: a file-creation run (no pattern, block size or depth), a
    random-write run (no block size) and 100% reads at 4 KiB x 16 threads, 4 KiB x 32 and 8 KiB x 32. Before,
    the one run without a depth turned every job parameter but the read share off, and the three read runs were
    one page, one median of three workloads. Now each run is its own configuration, the same five on the pages,
    in the results table and in the design; the runs that do not give a parameter are said "not given"."""
    import shutil

    from benchlib import fit
    from benchlib.ingest import ingest_study
    from benchlib.results import configuration_results
    from benchlib.store import open_study
    from benchlib.views import cell_frame, design
    from tests.conftest import corpus_dir

    study = tmp_path / "data" / "raw" / "mixed"
    names = (
        "vdb__create_file_32T",
        "vdb__output",
        "vdb__random_read_128T_4K_8HOST",
        "vdb_nvme__nvme_1vm_raid0_read_seq_ran_4k_32t_w30_f3000_20190411",
        "vdb_nvme__nvme_1vm_raid5_read_seq_ran_8k_32t_w30_f3000",
    )
    for name in names:
        shutil.copytree(corpus_dir("vdbench") / name, study / name)
    (study / "study.toml").write_text('[study]\nname = "mixed"\n', encoding="utf-8")
    ingest_study(study, tmp_path / "data" / "processed")
    opened = open_study(study, tmp_path / "data" / "processed")
    axes = fit.axes(opened)
    assert axes == ["rw", "block_size_bytes", "iodepth"]
    reads = {("4096", "16"): "vdb__random_read_128T_4K_8HOST", ("4096", "32"): "raid0", ("8192", "32"): "raid5"}
    for (size, depth), folder in reads.items():
        page = cell_frame(opened, {"rw": "read", "block_size_bytes": size, "iodepth": depth})
        assert page["source"].str.contains(folder).all() and page.height  # its run alone
    created = cell_frame(opened, dict.fromkeys(axes, "not-given"))
    assert created.height == 8 and created["source"].str.contains("create_file").all()
    table = configuration_results(opened, by=axes)
    assert table.height == 5 and (table["runs"] == 1).all()
    assert design(opened).configurations == 5

    folder = build_study_report(tmp_path / "data", "mixed", tmp_path / "reports")
    pages = sorted(p.stem for p in folder.glob("rw=*.html"))
    assert len(pages) == 5 and "rw=not-given__block_size_bytes=not-given__iodepth=not-given" in pages
    index = (folder / "index.html").read_text(encoding="utf-8")
    assert "I/O pattern not given, block size not given, queue depth (iodepth) not given" in index
