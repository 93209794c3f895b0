"""Cross-format truth: one real fio run written as json+, normal and terse at once.

The three parses must agree within fio's own rounding:
- IOPS and bandwidth: normal prints 3 significant digits (benchlib recomputes
  them from the exact issued counts), terse prints whole IOPS and KiB/s -> 0.1%.
- Mean latencies and their standard deviations: normal prints 2 decimals in
  the line's unit, terse 6 decimals in usec -> 0.1%, or 6 ns for small values
  printed in usec.
- Percentiles: normal prints whole units of its block (ns, usec, or msec once
  latencies reach 10 ms); terse prints whole microseconds -> within one unit.
The per-interval logs (250 ms averages) and the histogram logs must hold no
more I/O than the JSON counts, and no less than the unlogged tail (fio does not
log the last, partial interval) can explain.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from benchlib.sources.fio_common import plat_idx_to_val
from benchlib.sources.fio_json import read_fio_json
from benchlib.sources.fio_log import read_fio_log
from benchlib.sources.fio_normal import read_fio_normal
from benchlib.sources.fio_terse import read_fio_terse
from tests.fio_helpers import run_fio

pytestmark = pytest.mark.fio

CASES = {
    "randrw-2jobs-per-job": ["--rw=randrw", "--rwmixread=70", "--bs=4k", "--numjobs=2"],
    "randread-3jobs-grouped": ["--rw=randread", "--bs=8k", "--numjobs=3", "--group_reporting"],
    "write-seq-64k": ["--rw=write", "--bs=64k"],
}
KEY = ["job_index", "direction"]


@pytest.fixture(scope="module", params=sorted(CASES))
def run(request: pytest.FixtureRequest, fio_binary: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    workdir = tmp_path_factory.mktemp(request.param)
    return request.param, run_fio(fio_binary, workdir, request.param, *CASES[request.param])


def _by_key(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.filter(~pl.col("is_aggregate")).sort(KEY)


def test_three_parses_agree(run: tuple[str, Path]) -> None:
    name, output = run
    json_rows = _by_key(read_fio_json(output).results)
    normal = _by_key(read_fio_normal(output).results)
    terse = _by_key(read_fio_terse(output).results)
    assert json_rows.height == normal.height == terse.height > 0
    assert json_rows.select(KEY).equals(normal.select(KEY)) and json_rows.select(KEY).equals(terse.select(KEY))
    for column in ("iops", "bandwidth_bytes_per_s", "clat_mean_ns", "lat_mean_ns", "clat_stddev_ns"):
        for other in (normal, terse):
            # 0.1%, or 6 ns: normal prints two decimals of usec on lines in usec (a 1.23 usec stdev is +-5 ns)
            assert other[column].to_list() == pytest.approx(json_rows[column].to_list(), rel=1e-3, abs=6), column
    assert normal["io_count"].to_list() == json_rows["io_count"].to_list()
    for column in ("rw", "block_size_bytes", "iodepth", "ioengine"):
        assert normal[column].to_list() == json_rows[column].to_list(), column
    assert normal["numjobs"].to_list() == json_rows["numjobs"].to_list()
    for j, n, t in zip(
        json_rows["clat_percentiles"], normal["clat_percentiles"], terse["clat_percentiles"], strict=True
    ):
        j_values = {p["percentile"]: p["value_ns"] for p in j}
        n_values = {p["percentile"]: p["value_ns"] for p in n}
        t_values = {p["percentile"]: p["value_ns"] for p in t}
        assert set(j_values) == set(n_values) == set(t_values)
        for pct, value in j_values.items():
            # normal prints whole ns or usec, or msec when the block's latencies reach milliseconds
            assert abs(n_values[pct] - value) <= (1000 if value < 10_000_000 else 1_000_000), pct
            assert abs(t_values[pct] - value) <= 1000, pct  # terse truncates to whole usec


def test_json_plus_bins_reproduce_fio_percentiles(run: tuple[str, Path]) -> None:
    """fio computes its percentiles from the very bins json+ prints: walking them gives the same values."""
    _, output = run
    tables = read_fio_json(output)
    bins = tables.latency_bins.filter(pl.col("latency_kind") == "clat")
    assert bins.height > 0
    for row in tables.results.iter_rows(named=True):
        mine = bins.filter((pl.col("job_index") == row["job_index"]) & (pl.col("direction") == row["direction"])).sort(
            "bin_index"
        )
        assert mine["count"].sum() == row["io_count"]
        assert (mine["bin_value_ns"] == [plat_idx_to_val(i) for i in mine["bin_index"]]).all()
        cumulative = mine["count"].cum_sum().to_list()
        for point in row["clat_percentiles"]:
            target = row["io_count"] * point["percentile"] / 100
            index = next(i for i, c in enumerate(cumulative) if c >= target)
            assert mine["bin_value_ns"][index] == point["value_ns"], point["percentile"]


def _within_the_logged_span(logged: float, exact: float, tail_s: float, peak: float, rounding: float) -> bool:
    """Whether a log's total can be the run's: never more than the run did, and less by at most what the unlogged
    tail (fio logs whole intervals only) could have done at twice the fastest logged interval's rate."""
    return logged <= exact * 1.01 + rounding and exact - logged <= tail_s * 2 * peak + rounding + exact * 0.01


def test_interval_logs_agree_with_json_totals(run: tuple[str, Path]) -> None:
    """What fio's logs guarantee, whatever the machine's load: each interval's rate times its length is what
    it did, and the logs cover whole intervals up to the last one logged."""
    name, output = run
    folder = output.parent
    results = read_fio_json(output).results.filter(~pl.col("is_aggregate"))
    grouped = "grouped" in name
    runtime_s = results["runtime_ns"].max() / 1e9
    for direction in results["direction"].unique().to_list():
        mine = results.filter(pl.col("direction") == direction)
        logs = sorted(folder.glob(f"{name}_iops.*.log"))
        assert logs, "fio wrote no IOPS logs"
        peak_iops = 0.0
        for column, suffix in (("io_count", "_iops."), ("io_bytes", "_bw.")):
            logged, tail, peak, rounding = 0.0, 0.0, 0.0, 0.0
            for log in logs:
                series = read_fio_log(log.with_name(log.name.replace("_iops.", suffix))).intervals
                series = series.filter(pl.col("direction") == direction).sort("time_ns")
                seconds = (series["time_ns"].diff().fill_null(series["time_ns"][0]) / 1e9).to_list()
                rates = series["value"].to_list()
                logged += sum(r * s for r, s in zip(rates, seconds, strict=True))
                tail = max(tail, runtime_s - series["time_ns"].max() / 1e9)
                peak += max(rates)
                rounding += sum(seconds) * (1 if suffix == "_iops." else 1024)  # fio logs whole IOPS and KiB/s
            peak_iops = peak if suffix == "_iops." else peak_iops
            assert _within_the_logged_span(logged, float(mine[column].sum()), tail, peak, rounding), column
        hists = [
            read_fio_log(h).latency_bins.filter(pl.col("direction") == direction)
            for h in folder.glob(f"{name}_clat_hist.*.log")
        ]
        hist_total = float(sum(h["count"].sum() for h in hists))
        tail = runtime_s - min(h["time_ns"].max() for h in hists) / 1e9  # the log that stopped first
        assert _within_the_logged_span(hist_total, float(mine["io_count"].sum()), tail, peak_iops, 0.0)
        assert grouped or len(logs) == results["job_index"].n_unique()


def test_status_interval_snapshots_become_cumulative_intervals(fio_binary: str, tmp_path: Path) -> None:
    """``--status-interval=1`` writes a JSON document per second; the last is the result."""
    output = run_fio(
        fio_binary, tmp_path, "status", "--rw=randread", "--bs=4k", "--status-interval=1", formats="json", logs=False
    )
    text = output.read_text()
    assert text.count('"fio version"') >= 2  # about one a second, and the final one
    tables = read_fio_json(output)
    assert tables.results.height == 1
    snapshots = tables.intervals.filter(pl.col("metric") == "io_count").sort("time_ns")
    assert snapshots.height == text.count('"fio version"') - 1 and snapshots["is_cumulative"].all()
    assert snapshots["value"].is_sorted() and snapshots["time_ns"].is_sorted()
    assert snapshots["value"][-1] <= tables.results["io_count"][0]
    assert tables.runs["document_index"][0] == text.count('"fio version"') - 1


def test_fsync_latencies_become_sync_rows(fio_binary: str, tmp_path: Path) -> None:
    output = run_fio(fio_binary, tmp_path, "sync", "--rw=write", "--bs=4k", "--fsync=8", formats="json", logs=False)
    results = read_fio_json(output).results
    assert sorted(results["direction"].to_list()) == ["sync", "write"]
    sync = results.filter(pl.col("direction") == "sync").row(0, named=True)
    write = results.filter(pl.col("direction") == "write").row(0, named=True)
    assert sync["io_count"] == pytest.approx(write["io_count"] / 8, abs=1)
    assert sync["lat_mean_ns"] > 0 and sync["iops"] is None


def test_json_disk_util_matches_the_normal_reports_disk_stats(tmp_path: Path, fio_binary: str) -> None:
    """fio's JSON ``disk_util`` and the normal report's "Disk stats" land in host_counters under the same names."""
    output = run_fio(
        fio_binary, tmp_path, "disks", "--rw=randread", "--bs=4k", "--direct=1", formats="json,normal", logs=False
    )
    counters = read_fio_json(output).host_counters
    if counters.is_empty():
        pytest.skip("fio reported no disk statistics for this file system")
    normal = read_fio_normal(output).host_counters
    names = {
        "read_ios",
        "write_ios",
        "read_merges",
        "write_merges",
        "read_ticks_ms",
        "write_ticks_ms",
        "in_queue_ms",
        "util_pct",
    }
    assert set(counters["counter"]) == set(normal["counter"]) == names
    for disk in counters["instance"].unique():
        as_json = {r["counter"]: r["value"] for r in counters.filter(pl.col("instance") == disk).iter_rows(named=True)}
        as_text = {r["counter"]: r["value"] for r in normal.filter(pl.col("instance") == disk).iter_rows(named=True)}
        assert as_json["read_ios"] == as_text["read_ios"] > 0 and as_json["read_ticks_ms"] == as_text["read_ticks_ms"]
        assert as_json["util_pct"] == pytest.approx(as_text["util_pct"], abs=0.01)
