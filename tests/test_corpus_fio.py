"""Every fio file of ../shared/corpus parses, with real numbers read off each file.

The expected values are copied from the files themselves (and from SOURCES.md,
which quotes them); a new corpus file without an entry here fails the
completeness test.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from benchlib.errors import FormatError
from benchlib.sources import detect, read
from benchlib.sources.fio_log import read_fio_log
from tests.conftest import CORPUS, corpus_dir

KIB = 1024
COMPANIONS = (".fio", ".job", ".conf", ".md")

# file -> (format, [(row filter, column, expected)], other checks)
JSON_EXPECTED: dict[str, dict] = {
    "fio-json/pkb__fio-parser-sample-result.json": {
        "version": "fio-2.1.4",
        "rows": 5,
        "values": [
            ("sequential_write", "write", "iops", 133.0),
            ("sequential_write", "write", "bandwidth_bytes_per_s", 68118 * KIB),
            ("sequential_write", "write", "clat_mean_ns", 477734.84 * 1000),
        ],
        "params": {"rw": None, "block_size_bytes": None},
    },
    "fio-json/pkb__pkb-7fb0c9d8-0_fio.json": {
        "version": "fio-2.17",
        "rows": 2,
        "values": [
            ("rand_16k_read_100%-io-depth-1-num-jobs-2", "read", "iops", 8086.673998),
            ("rand_16k_read_100%-io-depth-1-num-jobs-2", "read", "clat_mean_ns", 238.357679 * 1000),
            ("rand_16k_read_100%-io-depth-1-num-jobs-2", "read", "io_bytes", 1294256 * KIB),
        ],
        "params": {"block_size_bytes": 16384, "numjobs": 2, "iodepth": 1, "jobs": 2},
    },
    "fio-json/pbench-fio1__fio-result.txt": {
        "version": "fio-3.19",
        "rows": 16,
        "values": [
            ("job-/dev/nvme8n1", "read", "iops", 96.77941),
            ("job-/dev/nvme8n1", "read", "clat_mean_ns", 325444045.939162),
        ],
        "params": {"rw": "rw", "block_size_bytes": 4096, "iodepth": 64, "numjobs": 8},
    },
    "fio-json/fio-plot-testdata01__randread-01-01.json": {
        "version": "fio-2.18-59-g618e",
        "rows": 1,
        "values": [
            (None, "read", "iops", 73.182907),
            (None, "read", "bandwidth_bytes_per_s", 292 * KIB),
            (None, "read", "clat_mean_ns", 13643.395634 * 1000),
        ],
        "params": {"rw": "randread", "block_size_bytes": 4096, "iodepth": 1},
    },
    "fio-json/fio-plot-exampledata__randwrite-32.json": {
        "version": "fio-2.18-59-g618e",
        "rows": 1,
        "values": [(None, "write", "iops", 288.256878), (None, "write", "clat_mean_ns", 110923.036632 * 1000)],
        "params": {"rw": "randwrite", "iodepth": 32},
    },
    "fio-json/fio-plot-M1015-PM883__randread-32-4.json": {
        "version": "fio-3.1",
        "rows": 1,
        "values": [
            (None, "read", "iops", 42310.195987),
            (None, "read", "bandwidth_bytes_per_s", 169240 * KIB),
            (None, "read", "clat_mean_ns", 3016736.023492),
        ],
        "params": {"rw": "randread", "iodepth": 32, "numjobs": 4, "jobs": 4},
    },
    "fio-json/fio-plot-P420i-INTEL-RW__randrw-16-4.json": {
        "version": "fio-3.1",
        "rows": 2,
        "values": [(None, "read", "iops", 24854.038199), (None, "write", "iops", 24856.654778)],
        "params": {"rw": "randrw", "iodepth": 16, "numjobs": 4},
    },
    "fio-json/fio-plot-ceph-ssd__randwrite-4-1.json": {
        "version": "fio-3.6-31-g4386",
        "rows": 1,
        "values": [
            ("random-read", "write", "iops", 240.372598),
            ("random-read", "write", "clat_mean_ns", 16575007.380243),
        ],
        "params": {"rw": "randwrite", "iodepth": 4},
    },
    "fio-json/fio-plot-G8-INTELD3S4610__randread-16-1.json": {
        "version": "fio-3.14-6-g97134",
        "rows": 1,
        "values": [(None, "read", "iops", 49340.127665), (None, "read", "bandwidth_bytes_per_s", 202097162)],
        "params": {"rw": "randread", "iodepth": 16},
    },
    "fio-json/fio-plot-HIGHPOINT-RAID5RW__randrw-8-8.json": {
        "version": "fio-3.16",
        "rows": 2,
        "values": [(None, "read", "iops", 317.511513), (None, "write", "iops", 322.066867)],
        "params": {"rw": "randrw", "iodepth": 8, "numjobs": 8},
    },
    "fio-json/fio-plot-deleteme-4k__randread-1-1.json": {
        "version": "fio-3.34",
        "rows": 1,
        "values": [(None, "read", "iops", 10102.601156)],
        "params": {"rw": "randread"},
    },
    "fio-json/SO-Kernel-trace__fio_output.json": {
        "version": "fio-3.36",
        "rows": 1,
        "values": [
            (None, "read", "iops", 3266.695555),
            (None, "read", "bandwidth_bytes_per_s", 428172319),  # bw_bytes; bw 418137 KiB/s is rounded
            (None, "read", "clat_mean_ns", 2353097.46419),
        ],
        "params": {"rw": "read", "block_size_bytes": 131072, "iodepth": 4, "numjobs": 2, "jobs": 2},
    },
    "fio-json/SO-Kernel-trace-baseline-mix-1G__result_1G_run1.json": {
        "version": "fio-3.36",
        "rows": 2,
        "values": [(None, "read", "iops", 401.019796), (None, "write", "iops", 409.818036)],
        "params": {"rw": "randrw", "block_size_bytes": 131072},
    },
    "fio-json/SO-Kernel-trace-baselineVM-rand-1G__result_1G_run2.json": {
        "version": "fio-3.36",
        "rows": 1,
        "values": [(None, "read", "iops", 2047.39526), (None, "read", "clat_mean_ns", 487279.90882)],
        "params": {"rw": "randread", "block_size_bytes": 131072},
    },
    "fio-json/fio-plot-testdata500gb__randwrite-4-4.json": {
        "version": "fio-3.6-31-g4386",
        "rows": 4,
        "first": ("write", "iops", 31.263526),
        "params": {"rw": "randwrite", "iodepth": 4, "jobs": 1},
    },
    "fio-json/fio-results-tmp-t2rand__out-rand-50rw32k.fio-0": {
        "version": "fio-3.12",
        "rows": 2,
        "values": [(None, "read", "iops", 223.57216), (None, "write", "iops", 222.367763)],
        "params": {"block_size_bytes": 32768, "iodepth": 16},
    },
    "fio-json/fio-results-tmp-t1writes__writes-100-0": {
        "version": "fio-3.12",
        "rows": 1,
        "values": [(None, "write", "iops", 457.18591)],
        "intervals": 0,
    },
}


def _rows(path: Path) -> pl.DataFrame:
    return read(path).results


def _pick(results: pl.DataFrame, job: str | None, direction: str) -> dict:
    frame = results.filter(pl.col("direction") == direction)
    if job is not None:
        frame = frame.filter(pl.col("job_name") == job)
    return frame.row(0, named=True)


@pytest.mark.parametrize("name", sorted(JSON_EXPECTED))
def test_fio_json_corpus(name: str) -> None:
    corpus_dir("fio-json")
    expected = JSON_EXPECTED[name]
    path = CORPUS / name
    assert detect(path) == "fio-json"
    tables = read(path)
    results = tables.results
    assert tables.runs["tool_version"].to_list() == [expected["version"]]
    assert results.height == expected["rows"]
    for job, direction, column, value in expected.get("values", []):
        assert _pick(results, job, direction)[column] == pytest.approx(value, rel=1e-9)
    if "first" in expected:
        direction, column, value = expected["first"]
        assert results.filter(pl.col("job_index") == 1)[column][0] == pytest.approx(value)
    for column, value in expected.get("params", {}).items():
        assert results[column].unique().to_list() == [value], column
    if "intervals" in expected:
        assert tables.intervals.height == expected["intervals"]


def test_fio_json_failed_job_is_a_clear_format_error() -> None:
    path = corpus_dir("fio-json") / "fio-plot-party-1m__write-64-1.json"
    with pytest.raises(FormatError) as caught:
        read(path)
    message = str(caught.value)
    assert "fio error 22" in message and "time_based requires a runtime" in message and str(path) in message


def test_fio_json_percentiles_in_ns_and_padding_dropped() -> None:
    results = read(corpus_dir("fio-json") / "pkb__pkb-7fb0c9d8-0_fio.json").results
    percentiles = results.filter(pl.col("direction") == "read")["clat_percentiles"][0].to_list()
    assert all(p["percentile"] > 0 for p in percentiles)  # the "0.00": 0 padding is gone
    p99 = next(p["value_ns"] for p in percentiles if p["percentile"] == 99.0)
    assert p99 == 1000 * 1352  # "99.000000" : 1352 (usec) in the file


def test_client_server_json() -> None:
    tables = read(corpus_dir("fio-client-server") / "pbench-fio0__fio-result.txt")
    results = tables.results
    assert tables.runs.height == 3
    assert sorted(tables.runs["host"].drop_nulls().to_list()) == ["perf36", "perf84"]
    per_host = results.filter(~pl.col("is_aggregate")).group_by("client").len().sort("client")
    assert per_host.rows() == [("perf36", 5), ("perf84", 5)]
    total = results.filter(pl.col("is_aggregate")).row(0, named=True)
    assert total["client"] is None
    assert total["iops"] == pytest.approx(93198.150858)
    assert total["bandwidth_bytes_per_s"] == 381824630  # bw_bytes; "bw" 372875 KiB/s is the rounded form
    assert results["rw"].unique().to_list() == ["read"]
    assert results["iodepth"].unique().to_list() == [32]
    assert results["runtime_setting_ns"].unique().to_list() == [15_000_000_000]
    assert results["ramp_time_ns"].unique().to_list() == [5_000_000_000]


NORMAL_EXPECTED = {
    # file: (runs, result rows, version of first run, job, direction, printed IOPS, printed rounding, clat mean ns)
    "HardwareTest__fio.log": (1, 4, "fio-2.2.10", "read4k-rand", "read", 63647, 0.001, 63834.11e3),
    "ceph-fio-results-erasure21__rw-4k.out": (1, 2, "fio-2.2.10", "ceph-erasure-2-1", "read", None, None, None),
    "ceph-fio-results-fourjobs3disks__randread-1M.out": (
        1,
        4,
        "fio-2.16",
        "ceph-fuse-replicated",
        "read",
        47,
        0.02,
        2546981.88e3,
    ),
    "ceph-fio-results-nvme__rw-4k.out": (1, 2, "fio-3.1", "nvme-direct", "read", 47.3e3, 0.002, None),
    "corsair_mp510__fio_results.txt": (2, 2, "fio-3.12", "random-write-steady", "write", 121e3, 0.005, 1049.76e3),
    "nfs-smb-bench__fio_output.txt": (10, 12, "fio-3.36", "sequential_read", "read", 110, 0.01, 36091.93e3),
    "pve-scripts__fio.out": (1, 8, "fio-3.25", "Seq-Read", "read", 2043, 0.001, None),
}


@pytest.mark.parametrize("name", sorted(NORMAL_EXPECTED))
def test_fio_normal_corpus(name: str) -> None:
    path = corpus_dir("fio-normal") / name
    n_runs, n_rows, version, job, direction, iops, rounding, clat = NORMAL_EXPECTED[name]
    assert detect(path) == "fio-normal"
    tables = read(path)
    assert tables.runs.height == n_runs
    assert tables.results.filter(pl.col("job_index").is_not_null()).height == n_rows  # the jobs' (and All clients')
    assert tables.runs["tool_version"][0] == version
    row = _pick(tables.results, job, direction)
    if iops is not None:
        assert row["iops"] == pytest.approx(iops, rel=rounding)
    if clat is not None:
        assert row["clat_mean_ns"] == pytest.approx(clat)


def test_fio_normal_details() -> None:
    folder = corpus_dir("fio-normal")
    hw = read(folder / "HardwareTest__fio.log").results
    first = hw.row(0, named=True)
    assert (first["io_count"], first["numjobs"], first["iodepth"], first["block_size_bytes"]) == (
        7638626,
        32,
        128,
        4096,
    )
    assert hw.filter(pl.col("job_name") == "read64k-seq")["block_size_bytes"][0] == 512 * KIB
    assert first["slat_max_ns"] == 32311e3 and first["usr_cpu_pct"] == 0.14
    ceph = read(folder / "ceph-fio-results-fourjobs3disks__randread-1M.out").results.row(0, named=True)
    assert ceph["clat_max_ns"] == pytest.approx(3733.6e3 * 1e3)  # "max=3733.6K" usec
    assert ceph["slat_mean_ns"] == pytest.approx(84.08e6)  # "slat (msec)"
    p50 = next(p["value_ns"] for p in ceph["clat_percentiles"] if p["percentile"] == 50.0)
    assert p50 == 2573e6  # "50.00th=[ 2573]" msec
    nfs = read(folder / "nfs-smb-bench__fio_output.txt")
    random_read = nfs.results.filter(pl.col("job_name") == "random_read")
    assert random_read["iops"].round(0).to_list()[0] == pytest.approx(7334, rel=0.001)
    pve = read(folder / "pve-scripts__fio.out").results.filter(~pl.col("is_aggregate"))
    assert pve.height == 8 and [round(v, -3) for v in sorted(pve["iops"].to_list())[-2:]] == [310000.0, 366000.0]
    disks = read(folder / "corsair_mp510__fio_results.txt").host_counters
    assert disks.filter((pl.col("instance") == "nvme0n1") & (pl.col("counter") == "write_ios"))["value"][0] == 23442312


def test_fio_terse_corpus() -> None:
    path = corpus_dir("fio-terse") / "fio-parser-jtulak__fio-test.out"
    assert detect(path) == "fio-terse"
    tables = read(path)
    results = tables.results
    assert results.height == 24 and results["job_name"].n_unique() == 3
    assert tables.runs["tool_version"][0] == "fio-2.1.2"
    first = results.row(0, named=True)
    assert first["io_bytes"] == 52392 * KIB
    assert first["bandwidth_bytes_per_s"] == 5208 * KIB
    assert first["iops"] == 651
    assert first["runtime_ns"] == 10058 * 10**6
    assert first["clat_mean_ns"] == pytest.approx(4610.434417e3)
    assert results["group_id"].unique().sort().to_list() == [0, 1, 2]
    assert tables.host_counters.filter(pl.col("counter") == "util_pct")["instance"].to_list() == ["vda"]


LOG_EXPECTED = {
    # file: (rows, metric, first value in base units, latency unit)
    "SO-Kernel-trace__bw_bw.1.log": (20, "bw", 2042 * KIB, "ns"),
    "SO-Kernel-trace__iops_iops.1.log": (20, "iops", 1, "ns"),
    "SO-Kernel-trace__lat_clat.1.log": (20, "clat", None, "ns"),
    "ceph-fio-results-erasure21__rw-4k-KERNEL_bw.log": (234, "bw", None, "us"),
    "ceph-fio-results-erasure21__rw-4k-KERNEL_lat.log": (458, "lat", None, "us"),
    "ceph-fio-results-nvme__rw-4k-KERNEL_lat.log": (482, "lat", None, "ns"),
    "fio-plot-HIGHPOINT-RAID5RW__randrw-iodepth-8-numjobs-8_bw.1.log": (480, "bw", None, "ns"),
    "fio-plot-HIGHPOINT-RAID5RW__randrw-iodepth-8-numjobs-8_iops.1.log": (480, "iops", None, "ns"),
    "fio-plot-HIGHPOINT-RAID5RW__randrw-iodepth-8-numjobs-8_lat.1.log": (482, "lat", None, "ns"),
    "fio-plot-test-ceph-ssd__random-read-depth-16_bw.1.log": (83, "bw", None, "ns"),
    "fio-plot-test-ceph-ssd__random-read-depth-16_clat.1.log": (121, "clat", None, "ns"),
    "fio-plot-testdata01__randread-4k-01-01_bw.1.log": (20, "bw", None, "us"),
    "fio-plot-testdata01__randread-4k-01-01_clat.1.log": (20, "clat", None, "us"),
    "fio-plot-testdata01__randread-4k-01-01_iops.1.log": (20, "iops", None, "us"),
    "fio-plot-testdata01__randread-4k-01-01_lat.1.log": (20, "lat", None, "us"),
    "fio-plot-testdata01__randread-4k-01-01_slat.1.log": (20, "slat", None, "us"),
    "fio-tools-garyjlittle-3.28__4vcpu_uvm_default_fio_bw.1.log": (1199, "bw", None, "ns"),
    "fio-tools-garyjlittle__random-rw-4-jobs_iops.1.log": (120, "iops", None, "ns"),
    "pbench-fio0-perf36__fio_bw.2.log": (15, "bw", None, "ns"),
    "pbench-fio0-perf36__fio_clat.2.log": (16, "clat", None, "ns"),
    "pbench-fio0-perf36__fio_iops.2.log": (15, "iops", None, "ns"),
    "pbench-fio0-perf84__fio_bw.1.log": (15, "bw", None, "ns"),
    "pbench-fio0-perf84__fio_clat.1.log": (16, "clat", None, "ns"),
    "pbench-fio0-perf84__fio_iops.1.log": (15, "iops", None, "ns"),
    "pbench-fio0-perf84__fio_lat.1.log": (16, "lat", None, "ns"),
    "pbench-fio0-perf84__fio_slat.1.log": (15, "slat", None, "ns"),
}
HIST_EXPECTED = {
    "pkb__pkb_fio_avg_1506559526.49_clat_hist.1.log": (9, 1216),
    "pkb__pkb_fio_avg_1506559526.49_clat_hist.2.log": (10, 1216),
    "pkb__pkb_fio_avg_1506559526.49_clat_hist.3.log": (9, 1216),
    "pkb__pkb_fio_avg_1506559526.49_clat_hist.4.log": (9, 1216),
}


def _first_fields(path: Path) -> list[str]:
    return [f.strip() for f in path.read_text().splitlines()[0].split(",")]


@pytest.mark.parametrize("name", sorted(LOG_EXPECTED))
def test_fio_log_corpus(name: str) -> None:
    path = corpus_dir("fio-logs") / name
    rows, metric, first_value, unit = LOG_EXPECTED[name]
    assert detect(path) == "fio-log"
    intervals = read_fio_log(path, latency_unit=unit).intervals
    assert intervals.height == rows
    assert intervals["metric"].unique().to_list() == [metric]
    fields = _first_fields(path)
    factor = {"bw": KIB, "iops": 1}.get(metric, 1000 if unit == "us" else 1)
    first = intervals.row(0, named=True)
    assert first["time_ns"] == int(fields[0]) * 10**6
    assert first["value"] == pytest.approx(float(fields[1]) * factor)
    assert first["direction"] == ["read", "write", "trim"][int(fields[2])]
    if first_value is not None:
        assert first["value"] == first_value or first["value"] == pytest.approx(float(fields[1]) * factor)


def test_fio_log_known_values() -> None:
    folder = corpus_dir("fio-logs")
    lat = read_fio_log(folder / "pbench-fio0-perf84__fio_lat.1.log").intervals
    assert lat["value"].max() == 673437935  # the 673 ms outlier, ns
    old = read_fio_log(folder / "fio-plot-testdata01__randread-4k-01-01_lat.1.log", latency_unit="us").intervals
    assert (old["value"].min(), old["value"].max()) == (12050e3, 15084e3)  # 12-15 ms written in usec
    ceph = read_fio_log(folder / "fio-plot-test-ceph-ssd__random-read-depth-16_bw.1.log").intervals
    assert ceph["direction"].unique().to_list() == ["write"]  # the name says read; the rows say write
    per_io = read_fio_log(folder / "SO-Kernel-trace__bw_bw.1.log").intervals
    assert per_io["block_size_bytes"].unique().to_list() == [131072]
    assert per_io["priority"].unique().to_list() == [0]
    no_index = read_fio_log(folder / "ceph-fio-results-nvme__rw-4k-KERNEL_lat.log").intervals
    assert no_index["job_index"].null_count() == no_index.height
    assert sorted(no_index["direction"].unique().to_list()) == ["read", "write"]


@pytest.mark.parametrize("name", sorted(HIST_EXPECTED))
def test_fio_hist_log_corpus(name: str) -> None:
    path = corpus_dir("fio-logs") / name
    n_rows, n_bins = HIST_EXPECTED[name]
    bins = read_fio_log(path).latency_bins
    lines = path.read_text().splitlines()
    assert len(lines) == n_rows and len(lines[0].split(",")) == n_bins + 3
    total = sum(int(v) for line in lines for v in line.split(",")[3:])
    assert bins["count"].sum() == total
    assert bins["time_ns"].n_unique() == n_rows
    assert bins["bin_index"].max() < n_bins


def test_pkb_hist_logs_count_what_the_json_counts() -> None:
    """Jobs 1 and 2 of the PKB run are the read group: their histogram logs hold its I/Os.

    80,124 of the JSON's 80,891 reads are in the logs (99.1%): the rest fell in
    the last, partial interval, which fio does not log.
    """
    folder = corpus_dir("fio-logs")
    logged = sum(
        read_fio_log(folder / f"pkb__pkb_fio_avg_1506559526.49_clat_hist.{i}.log").latency_bins["count"].sum()
        for i in (1, 2)
    )
    reads = read(CORPUS / "fio-json" / "pkb__pkb-7fb0c9d8-0_fio.json").results.filter(pl.col("direction") == "read")
    assert logged == 80124
    assert logged / reads["io_count"].sum() == pytest.approx(1.0, abs=0.01)


def test_corrupt_hist_log_is_refused() -> None:
    """The pbench fio-3.7 histogram log has impossible counts (2.9e17 in bin 1598, up to 8.2e18)."""
    path = corpus_dir("fio-logs") / "pbench-fio0-perf84__fio_clat_hist.1.log"
    with pytest.raises(FormatError, match=r"line 1.*bin 1598"):
        read_fio_log(path)


def test_every_corpus_fio_file_has_expectations() -> None:
    corpus_dir("fio-json")
    covered = {Path(n).name for n in JSON_EXPECTED} | set(NORMAL_EXPECTED) | set(LOG_EXPECTED) | set(HIST_EXPECTED)
    covered |= {
        "pbench-fio0-perf84__fio_clat_hist.1.log",
        "fio-plot-party-1m__write-64-1.json",
        "pbench-fio0__fio-result.txt",
        "fio-parser-jtulak__fio-test.out",
    }
    on_disk = {
        p.name
        for folder in ("fio-json", "fio-client-server", "fio-normal", "fio-terse", "fio-logs", "fio-jsonplus")
        for p in (CORPUS / folder).iterdir()
        if not p.name.endswith(COMPANIONS)
    }
    assert on_disk - covered == set()


def test_a_file_whose_printed_figures_disagree_with_its_counts_says_so(tmp_path: Path) -> None:
    """Issue 44: fio 2.2.10 with group_reporting prints a group's bw= about 6.4% above its issued count x block
    size over its runtime. benchlib keeps the count's figure and records the printed one; the cell page and
    inspect say both. No other corpus normal-output file differs beyond what printing 3 digits loses."""
    import json
    import shutil
    import subprocess
    import sys

    from benchlib.ingest import ingest_study
    from benchlib.paths import PROJECT_ROOT
    from benchlib.stats.plausibility import printed_apart

    def apart(path: Path) -> pl.DataFrame:
        tables = read(path)
        return printed_apart(tables.results.join(tables.runs.select("run_id", "source"), on="run_id"))

    odd = corpus_dir("fio-normal") / "HardwareTest__fio.log"
    found = apart(odd)
    assert found["figure"].to_list() == ["bandwidth_bytes_per_s"] * 2
    assert [round(100 * a, 1) for a in found["apart"]] == [-6.4, -6.3]
    from benchlib.sources.registry import detect_all

    others = [p for p in sorted(corpus_dir("fio-normal").iterdir()) if p != odd and detect_all(p)[:1] == ["fio-normal"]]
    assert others and all(apart(p).is_empty() for p in others)
    study = tmp_path / "raw" / "odd"
    study.mkdir(parents=True)
    shutil.copyfile(odd, study / "fio.log")
    (study / "study.toml").write_text('[study]\nname = "odd"\n', encoding="utf-8")
    assert ingest_study(study, tmp_path / "processed").ok
    out = tmp_path / "cell.ipynb"
    subprocess.run(
        [sys.executable, "-m", "papermill", "--log-level", "ERROR", str(PROJECT_ROOT / "notebooks" / "cell.ipynb")]
        + [str(out), "-p", "study", "odd", "-y", 'levels: {group_id: "1"}'],  # its second phase, 512k reads
        env={**__import__("os").environ, "BENCHLIB_DATA": str(tmp_path)},
        check=True,
        cwd=PROJECT_ROOT,
        capture_output=True,
        timeout=300,
    )
    cells = json.loads(out.read_text())["cells"]
    text = "".join("".join(o.get("data", {}).get("text/markdown", "")) for c in cells for o in c.get("outputs", []))
    assert "**The file's own figures disagree with its counts**: odd/fio.log, read64k-seq, read: bandwidth" in text
    assert "printed 541 MiB/s, recomputed 506 MiB/s (-6.4%)" in text
    assert "write64k-seq" not in text  # the fourth phase's disagreement is its own page's
    assert "****" not in text and text.count("1 host (host not recorded)") == 1  # no factors: no empty bold name


def test_fio_normal_run_status_lines_are_each_groups_total_and_the_groups_ran_one_after_another() -> None:
    """A group's "Run status group N (all jobs)" line is kept as its total (an aggregate row: bytes, rate, the
    longest job's run), in fio 2.x's aggrb form and 3.x's bw form; a file of groups lasted them all."""
    hw = read(corpus_dir("fio-normal") / "HardwareTest__fio.log")
    totals = hw.results.filter(pl.col("job_index").is_null()).sort("group_id")
    assert totals["is_aggregate"].all() and totals["job_name"].is_null().all()
    assert totals["direction"].to_list() == ["read", "read", "write", "write"]
    # READ: io=29854MB, aggrb=254726KB/s, ..., maxt=120014msec (fio 2.x's MB and KB are binary)
    first = totals.row(0, named=True)
    assert (first["io_bytes"], first["bandwidth_bytes_per_s"], first["runtime_ns"]) == (
        29854 * 2**20,
        254726 * 2**10,
        120_014_000_000,
    )
    # four stonewalled groups of 120.0, 58.4, 95.6 and 68.4 s: the run lasted their sum, not its longest job
    assert hw.runs["duration_ns"][0] == (120014 + 58410 + 95604 + 68428) * 1_000_000
    nfs = read(corpus_dir("fio-normal") / "nfs-smb-bench__fio_output.txt").results
    group = nfs.filter(pl.col("job_index").is_null()).row(0, named=True)
    jobs = nfs.filter(pl.col("job_index").is_not_null(), pl.col("run_id") == group["run_id"])
    assert group["io_bytes"] == pytest.approx(
        jobs.filter(pl.col("direction") == group["direction"])["io_bytes"].sum(), rel=0.01
    )
