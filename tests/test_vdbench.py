"""vdbench flatfile.html in both layouts, from ../shared/corpus/vdbench, with numbers read off each file."""

from __future__ import annotations

import polars as pl
import pytest

from benchlib.sources import detect, read
from tests.conftest import corpus_dir

MIB = 1024 * 1024

# folder (or file) -> run definitions, first RD's avg row: (rate, MB/sec, resp ms), first measured interval
EXPECTED = {
    "vdb__output/flatfile.html": (["random_write"], 15773.1017, 117.5485, 1.0093, 2),
    "vdb__output1/flatfile.html": (["rd1"], 107.5, 0.105, 1.557, 2),
    "vdb__create_file_32T/flatfile.html": (["format_for_rd1"], 390635.0, 48271.4826, 0.0999, 2),
    "vdb__random_read_128T_4K_8HOST/flatfile.html": (["rd1"], 1104872.7091, 4313.7267, 0.1148, 2),
    "vdb_nvme__nvme_1vm_raid0_read_seq_ran_4k_32t_w30_f3000_20190411/flatfile.html": (["rd1"], 2348508.0678, 9169.2588, 0.0023, 2),
    "vdb_nvme__nvme_1vm_raid5_read_seq_ran_8k_32t_w30_f3000/flatfile.html": (["rd1"], 1156601.0847, 9031.4015, 0.0261, 2),
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
    assert (first_rd["lat_mean_ns"] * weights).sum() == pytest.approx(resp * 1e6, rel=2e-3)  # vdbench's resp is the I/O-weighted mean
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
