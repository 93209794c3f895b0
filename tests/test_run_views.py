"""Tails, exceedance and steady state per run, on the bundled loopback study and on series with a known answer."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from benchlib.stats.steady import effective_sample_size, pts_window, run_steadiness
from benchlib.views import TAIL_BEYOND, _study_rows, latency_exceedance, run_steadiness_table, tail_latency
from benchlib.words.steady import steadiness_note

BY = ["profile", "block_size", "ioengine", "rate_cap"]
CELL = {"profile": ["randread"], "block_size": ["4k"], "ioengine": ["libaio"], "rate_cap": ["off"]}


def test_a_vms_tail_is_fios_own_percentile_of_that_job() -> None:
    """One job per host per run: pooling its bins must give back the p99 and p99.9 fio printed."""
    tails = tail_latency("loopback-fio", by=BY, only=CELL, member="vm")
    assert tails.height == 12  # 3 runs x 4 servers
    rows = _study_rows("loopback-fio", CELL).filter(pl.col("direction") == "read")
    for row in rows.iter_rows(named=True):
        fio = {p["percentile"]: p["value_ns"] / 1e6 for p in row["clat_percentiles"]}
        ours = tails.filter(pl.col("vm") == row["vm"], pl.col("run") == f"run {row['repetition']}").row(0, named=True)
        assert ours["p99_ms"] == pytest.approx(fio[99.0]) and ours["p99.9_ms"] == pytest.approx(fio[99.9])
        assert ours["p50_ms"] == pytest.approx(fio[50.0]) and ours["ios"] == pytest.approx(row["io_count"], rel=1e-3)


def test_a_percentile_with_too_few_ios_beyond_it_is_unknown_not_the_slowest_io() -> None:
    """A rate-capped cell holds about 1,500 I/Os a host per run: p99.9 would be its second slowest I/O."""
    from benchlib.views import TAIL_BEYOND

    capped = tail_latency("loopback-fio", by=BY, only={**CELL, "rate_cap": ["on"]}, member="vm")
    assert capped.height == 12 and (capped["ios"] < TAIL_BEYOND * 1000).all()
    assert capped["p99.9_ms"].is_null().all()
    assert capped.filter(pl.col("ios") >= TAIL_BEYOND * 100)["p99_ms"].is_not_null().all()
    assert capped["p50_ms"].is_not_null().all()


def test_run_tails_pool_every_vm_and_the_curve_stops_where_the_table_does() -> None:
    runs = tail_latency("loopback-fio", by=BY, only=CELL)
    assert runs.height == 3 and (runs["p99_ms"] > 5 * runs["p50_ms"]).all()  # the tail a mean would hide
    curve = latency_exceedance("loopback-fio", by=BY, only=CELL)
    slower = curve["slower"].to_list()
    assert slower == sorted(slower, reverse=True) and 0.98 < slower[0] <= 1
    # drawn down to the last point with 10 I/Os beyond it, as the percentile table: not to single I/Os
    assert TAIL_BEYOND <= curve["slower_ios"].min() < 2 * TAIL_BEYOND
    assert tail_latency("pvscsi-vs-lsi", by=["controller"]).is_empty()  # published tables: means only


def test_steady_state_says_too_short_steady_or_not() -> None:
    short = run_steadiness_table("loopback-fio", BY, only=CELL)
    assert set(short["state"]) == {"too short to assess"} and short.height == 3
    rng = np.random.default_rng(4)
    flat = run_steadiness(list(1000 + rng.normal(0, 20, 30)))
    assert flat.state == "steady" and flat.steady_from == 4
    rising = run_steadiness(list(np.linspace(100, 1500, 10)))  # +156 per round: never a flat window
    assert rising.state == "not steady" and rising.last_excursion > 0.1
    assert "excursion" in steadiness_note(rising) and steadiness_note(flat) == "steady from round 1 to 5 of 30"
    with pytest.raises(ValueError, match="5 rounds"):
        pts_window([1000.0, 1010.0])


def test_effective_sample_size_never_exceeds_n() -> None:
    alternating = [100.0, 110.0] * 20  # lag-1 autocorrelation -1
    assert effective_sample_size(alternating) == 40


def test_the_overview_counts_runs_not_rows_and_says_what_the_design_supports() -> None:
    from benchlib.views import design, overview
    from benchlib.words.design import design_statement

    table = {r["format"]: r for r in overview("loopback-fio").iter_rows(named=True)}
    assert table["fio-json+"]["runs"] == 87 and table["fio-json+"]["hosts"] == 4  # not 435 runs on 5 hosts
    assert table["fio-log"]["runs"] is None  # logs are files of the runs above
    assert table["fio-log"]["files"] == 3744  # every log with data, identical ones too (3,693 contents); 96 are empty
    local = {r["format"]: r for r in overview("fio-sample").iter_rows(named=True)}
    assert local["fio-json+"]["runs"] == 7 and local["fio-json+"]["hosts"] is None  # fio on one machine: none named
    text = design_statement(design("loopback-fio"))
    assert "87 runs: 3 per configuration; 4 hosts per run; runtime 3 s measured after a 1 s ramp" in text
    assert "fio-3." in text and "queue depth (1, 2," in text
    assert (
        "smallest exact two-sided p of a comparison of two configurations (Mann-Whitney on their run totals) is 0.1"
        in text
    )
    # the pooled test is named only where the report has its page
    assert "interaction" not in text
    pooled = design_statement(design("loopback-fio"), interaction_page=True)
    assert pooled.startswith(text) and "**A test that pools runs.** The interaction page's test pools" in pooled
    published = design_statement(design("pvscsi-vs-lsi"))
    assert "1 per configuration" in published and "descriptive only" in published
    assert "runtime 300 s as the source states (its data do not record it)" in published  # study.toml's runtime_s
    # the CPU table's rows measured no I/O: they are not runs of their own
    assert "19 runs: 1 per configuration" in published and "the data hold 8 rows of other figures" in published
    assert "did not run at once" not in text + published


def test_hosts_of_one_run_that_ran_one_after_another_are_said_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two VMs' files grouped into one run by their folders, run on different days: the design says their totals
    add rates that never shared the storage."""
    import shutil

    import benchlib.store
    from benchlib.ingest import ingest_study
    from benchlib.views import design
    from benchlib.words.design import design_statement
    from tests.conftest import corpus_dir

    study = tmp_path / "apart"
    for vm, name in (
        ("vm-a", "fio-plot-M1015-PM883__randread-32-4.json"),
        ("vm-b", "fio-plot-ceph-ssd__randwrite-4-1.json"),
    ):
        (study / "r1" / vm).mkdir(parents=True)
        shutil.copyfile(corpus_dir("fio-json") / name, study / "r1" / vm / "job.json")
    (study / "study.toml").write_text('[study]\nname = "apart"\n[[files]]\nglob = "*/{vm}/*"\n', encoding="utf-8")
    monkeypatch.setattr(benchlib.store, "PROCESSED", tmp_path / "processed")
    ingest_study(study, tmp_path / "processed")
    said = design_statement(design(str(study)))
    assert "1 configuration with runs, 1 run: 1 per configuration; 2 hosts per run" in said
    assert "**Hosts that did not run at once.** In the one run of several hosts, the last host started after" in said


def test_declared_shares_judge_fairness_per_share(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """[shares] in study.toml: VMs given shares in proportion to what they got are fair (Jain 1 per share),
    though by throughput alone the same run is the post's least fair one; a VM without shares is an error."""
    import shutil

    import benchlib.store
    from benchlib.errors import StudyError
    from benchlib.ingest import ingest_study
    from benchlib.paths import RAW
    from benchlib.views import fairness, member_run_totals

    cell = {"test": ["seqread"], "controller": ["LSI"], "sioc": ["off"]}
    plain = fairness("pvscsi-vs-lsi", "bandwidth_mib_s", by=["test"], only=cell)
    assert plain["jain_median"][0] < 0.7 and not plain["per_share"][0]
    got = member_run_totals("pvscsi-vs-lsi", "bandwidth_mib_s", by=["test"], only=cell)
    study = tmp_path / "raw" / "pvscsi-shares"
    shutil.copytree(RAW / "pvscsi-vs-lsi", study)
    declared = (study / "study.toml").read_text(encoding="utf-8")
    shares = "".join(f"{r['vm']} = {r['bandwidth_mib_s']}\n" for r in got.iter_rows(named=True))
    (study / "study.toml").write_text(declared + "\n[shares]\n" + shares, encoding="utf-8")
    monkeypatch.setattr(benchlib.store, "PROCESSED", tmp_path / "processed")
    ingest_study(study, tmp_path / "processed")
    fair = fairness(str(study), "bandwidth_mib_s", by=["test"], only=cell)
    assert fair["per_share"][0] and fair["jain_median"][0] == pytest.approx(1.0)
    (study / "study.toml").write_text(declared + "\n[shares]\n" + shares.split("\n", 1)[1], encoding="utf-8")
    ingest_study(study, tmp_path / "processed")
    with pytest.raises(ValueError, match=f"{got['vm'][0]}: no shares given"):
        fairness(str(study), "bandwidth_mib_s", by=["test"], only=cell)
    (study / "study.toml").write_text(declared + "\n[share]\ngus_fio_1 = 1\n", encoding="utf-8")
    with pytest.raises(StudyError, match=r"the top level has 'share', which benchlib does not know"):
        ingest_study(study, tmp_path / "processed")
    (study / "study.toml").write_text(declared + "\n[shares]\ngus_fio_1 = -5\n", encoding="utf-8")
    with pytest.raises(StudyError, match=r"shares are positive numbers"):
        ingest_study(study, tmp_path / "processed")


@pytest.mark.fio
def test_without_json_plus_the_tail_comes_from_fios_histogram_log(
    fio_binary: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plain json output has no bins: the run's --write_hist_log gives its tail, and says so."""
    import benchlib.store
    from benchlib.ingest import ingest_study
    from benchlib.sources import read
    from tests.fio_helpers import run_fio

    study = tmp_path / "raw" / "hist-only"
    out = run_fio(fio_binary, study, "tails", "--rw=randread", "--bs=4k", formats="json")
    for log in study.glob("tails_*.log"):  # keep only the histogram log: no per-interval latency to fall back on
        if "_clat_hist." not in log.name:
            log.unlink()
    (study / "scratch.dat").unlink()
    (study / "study.toml").write_text('[study]\nname = "hist-only"\n', encoding="utf-8")
    monkeypatch.setattr(benchlib.store, "PROCESSED", tmp_path / "processed")
    ingest_study(study, tmp_path / "processed")
    tails = tail_latency(str(study), by=[])
    assert tails.height == 1 and tails["origin"][0] == "fio histogram log"
    fio = read(out).results.filter(pl.col("direction") == "read")
    printed = {p["percentile"]: p["value_ns"] / 1e6 for p in fio["clat_percentiles"][0]}
    # every logged interval's I/Os, added: fio logs whole intervals (250 ms here), so the last part-interval
    # of a 3-second run can be missing from the log
    assert 0.85 * fio["io_count"][0] < tails["ios"][0] <= fio["io_count"][0]
    # the median is one of fio's buckets either way; the 99th percentile of the logged I/Os can differ more from
    # fio's over all of them (the slowest I/Os of the missing part-interval; 10.7% on a busy 2-core machine)
    assert tails["p50_ms"][0] == pytest.approx(printed[50.0], rel=0.07)
    assert tails["p99_ms"][0] == pytest.approx(printed[99.0], rel=0.2)


def test_a_depth_sweep_per_run_and_per_vm_with_littles_law_beside_the_depth() -> None:
    """The loopback iodepth sweep: four hosts at 1 job each, so a run holds 4 x iodepth outstanding I/Os."""
    from benchlib.views import sweep, sweep_shapes

    totals = sweep("loopback-fio", "iodepth-sweep")
    assert totals["iodepth"].to_list() == [1, 2, 4, 8, 16, 32, 64, 128]
    assert (totals["configured"] == totals["iodepth"] * 4).all() and set(totals["runs"]) == {3}
    assert ((totals["outstanding_ios"] / totals["configured"] - 1).abs() < 0.05).all()  # fio kept its queues full
    assert set(totals["queue_state"]) == {"queue-full"}
    per_vm = sweep("loopback-fio", "iodepth-sweep", member="vm")
    assert per_vm["vm"].n_unique() == 4 and (per_vm["configured"] == per_vm["iodepth"]).all()
    # each VM's run totals add up to the run's (medians of sums vs sums of medians: close, not equal)
    added = per_vm.group_by("iodepth").agg(pl.col("iops").sum()).sort("iodepth")
    assert added["iops"].to_list() == pytest.approx(totals["iops"].to_list(), rel=0.05)
    shapes = sweep_shapes(per_vm, member="vm")
    assert shapes.height == 4 and shapes["note"].str.starts_with("saturated at").all()
    for vm, knee in shapes.select("vm", "knee").iter_rows():  # each knee is the first depth no deeper one beats by 10%
        iops = dict(per_vm.filter(pl.col("vm") == vm).select("iodepth", "iops").iter_rows())
        assert all(value < 1.1 * iops[knee] for depth, value in iops.items() if depth > knee)
        before = max(depth for depth in iops if depth < knee)
        assert any(value >= 1.1 * iops[before] for depth, value in iops.items() if depth > before)
    run = sweep_shapes(totals)
    assert run["saturated"][0] and run["knee_outstanding"][0] == pytest.approx(4 * run["knee"][0], rel=0.05)


@pytest.mark.fio
def test_a_steady_runs_window_is_found_in_its_per_second_log(
    fio_binary: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rate-capped 8-second fio run logging each second: steady, its PTS window inside the run's seconds."""
    import benchlib.store
    from benchlib.ingest import ingest_study
    from benchlib.views import run_time_series
    from tests.fio_helpers import run_fio

    study = tmp_path / "raw" / "steady"
    run_fio(
        fio_binary,
        study / "r1",
        "job",
        "--rw=randread",
        "--bs=4k",
        "--runtime=8",
        "--rate_iops=200",  # a rate a busy 2-core machine keeps each second (500 missed it beside other tests)
        "--write_iops_log=job",
        "--log_avg_msec=1000",
        formats="json+",
        logs=False,
    )
    (study / "r1" / "scratch.dat").unlink()
    (study / "study.toml").write_text('[study]\nname = "steady"\n', encoding="utf-8")
    monkeypatch.setattr(benchlib.store, "PROCESSED", tmp_path / "processed")
    ingest_study(study, tmp_path / "processed")
    found = run_time_series(str(study), {})
    assert (
        found is not None and found.run == "run 1" and found.note.startswith("steady: steady from second")
    )  # its one run: nothing to tell apart
    seconds = found.series["time_ns"] / 1e9
    start, end = found.window_s
    # 5 one-second rounds inside the run (a round logged at 1.001 s covers 0-1 s)
    assert end - start == 5 and seconds.min() - 1.1 <= start and end <= seconds.max() + 0.5
    assert found.series["iops"].median() == pytest.approx(200, rel=0.05)


def test_two_factors_together_are_tested_on_run_totals_or_said_untestable() -> None:
    """Loopback: block size x I/O engine interact uncapped (libaio gains at 4k only); under the cap nothing can show;
    the published tables have one run per combination, which cannot tell an interaction from noise."""
    from benchlib.views import interaction
    from benchlib.words.interaction import test_note

    by = ["profile", "rate_cap"]
    grid, tests = interaction(
        "loopback-fio", "iops", x="block_size", trace="ioengine", by=by, only={"profile": ["randread", "randwrite"]}
    )
    assert grid.height == 16 and set(grid["runs"]) == {3}
    rows = {(r["profile"], r["rate_cap"]): r for r in tests.iter_rows(named=True)}
    read = rows[("randread", "off")]
    assert read["p"] < 0.05 and rows[("randread", "on")]["p"] is None
    assert read["verdict"] == "interacts" and read["family"] == 2  # the capped groups are not in the family
    assert read["p_holm"] == pytest.approx(min(1.0, 2 * read["p"]))  # the smaller p of two: Holm doubles it
    said = test_note(read, x="block_size", trace="ioengine")
    assert said.startswith("the effect of block size, as a ratio, depends on I/O engine") and "over 2 tests" in said
    # 3 runs per combination: a 2 x 2 interaction this clear is as significant as they allow (2 in 924)
    assert read["p"] == read["floor"]
    assert "about the smallest p the permutation test can give at 3 runs per combination" in said
    assert read["p"] == max(read["p_permutation"], read["p_spread"]) and read["p_spread"] < read["p_permutation"]
    # random write's p is a Monte Carlo estimate too: within its error of the floor, it is said to be at it
    write = rows[("randwrite", "off")]
    assert write["p"] != write["floor"]
    assert "about the smallest p the permutation test can give" in test_note(write, x="block_size", trace="ioengine")
    assert rows[("randwrite", "on")]["verdict"] == "rate-capped"
    _, published = interaction("pvscsi-vs-lsi", "bandwidth_mib_s", x="controller", trace="sioc", by=["test"])
    verdicts = dict(zip(published["test"], published["verdict"], strict=True))
    assert verdicts["seqread"] == "one run per combination" and published["p"].is_null().all()
    assert verdicts["randread"] == "one level"  # SIOC on was published for seqread only
    assert published["family"].to_list() == [0] * published.height and published["p_holm"].is_null().all()


def test_an_interaction_the_runs_could_not_show_is_said_untold_not_absent() -> None:
    """2 runs per combination: even a noiseless 2 x 2 interaction gets p = 2 / 70; over two tests, Holm's
    0.057 is above alpha whatever the data, so the page says it cannot be told, not "no evidence"."""
    from benchlib.stats.factorial import interaction_call
    from benchlib.words.interaction import test_note

    test = {"p": 0.0264, "p_permutation": 0.0264, "p_spread": 0.0011, "floor": 0.0268, "per_combination": 2}
    test |= {"p_holm": 0.0528, "family": 2}
    test["verdict"] = interaction_call(test["p_holm"], test["floor"], test["family"])
    assert test["verdict"] == "cannot tell"
    said = test_note(test, x="block_size", trace="ioengine")
    assert said.startswith("cannot be told at 2 runs per combination (measured p = 0.0264)")
    assert "p = 0.0268, 0.0536 after Holm over 2 tests" in said and "no evidence" not in said
    alone = test | {"p_holm": 0.0264, "family": 1}
    alone["verdict"] = interaction_call(alone["p_holm"], alone["floor"], alone["family"])
    assert alone["verdict"] == "interacts"
    assert test_note(alone, x="block_size", trace="ioengine").startswith(
        "the effect of block size, as a ratio, depends on I/O engine (p = 0.0264 after Holm over 1 test, α = 0.05; "
        "before it, permutation 0.0264 and ANOVA-type 0.0011, the larger counting"
    )
    weak = {"p": 0.4, "p_permutation": 0.4, "p_spread": 0.3, "floor": 0.0018, "per_combination": 3}
    weak |= {"p_holm": 0.8, "family": 2}
    weak["verdict"] = interaction_call(weak["p_holm"], weak["floor"], weak["family"])
    assert weak["verdict"] == "no evidence" and test_note(weak, x="bs", trace="rw").startswith("no evidence at this n")


def test_comparisons_run_under_a_rate_cap_are_said_to_measure_the_cap() -> None:
    """Rate-capped rows get their own verdict, no p, no effect, and leave the family (the others' Holm)."""
    from benchlib.stats.compare import comparison_table, geomean_row, holm, runs_to_settle
    from benchlib.tables import verdict_lines
    from benchlib.views import run_totals
    from benchlib.words.compare import design_summary, untestable_caveat, with_settle_why

    by = ["profile", "block_size", "rate_cap"]
    units = run_totals("loopback-fio", "iops", ["ioengine", *by], only={"profile": ["randread", "randwrite"]})
    assert units.filter(pl.col("rate_cap") == "on")["rate_capped"].all()
    assert not units.filter(pl.col("rate_cap") == "off")["rate_capped"].any()
    table = comparison_table(units, "iops", factor="ioengine", baseline="psync", by=by)
    capped = table.filter(pl.col("rate_cap") == "on")
    assert capped.height == 4 and set(capped["verdict"]) == {"rate-capped"}
    assert capped["effect"].is_null().all() and capped["p_holm"].is_null().all() and set(capped["delta"]) == {"~"}
    assert (table["family"] == 4).all()  # the 4 uncapped comparisons: 3 v 3 runs, p_min 0.1 x 4 = 0.4
    free = table.filter(pl.col("rate_cap") == "off")
    assert free["p_holm"].to_list() == pytest.approx(list(holm(free["p"].to_numpy())))  # Holm over these 4 only
    summary = design_summary(table)
    assert "the 4 rate-capped rows are left out: their totals are what the cap allowed" in summary
    assert "5 runs per configuration would make every row testable" in untestable_caveat(table).text
    # the summary says both verdicts in full: no line repeats them (the table's Verdict column names the rows)
    assert verdict_lines(table, by=by, factor="ioengine") == []
    mixed_verdicts = table.with_columns(
        pl.when(pl.col("block_size") == "64k").then(pl.lit("inconclusive")).otherwise("verdict").alias("verdict")
    )
    lines = verdict_lines(mixed_verdicts, by=by, factor="ioengine")
    assert lines[0].startswith("- **2 comparisons**: not testable at this n. 3 vs 3 runs")
    settle = runs_to_settle(units, "iops", factor="ioengine", baseline="psync", by=by)
    assert settle.filter(pl.col("rate_cap") == "on")["runs"].is_null().all()
    assert set(settle.filter(pl.col("rate_cap") == "on")["reason"]) == {"rate-capped"}
    assert with_settle_why(settle).filter(pl.col("rate_cap") == "on")["why"].str.starts_with("rate-capped").all()
    assert geomean_row(free)["change_pct"] is not None
    # benchstat's bottom row (the medians' geometric means), said to be that, beside the changes' range
    from benchlib.words.compare import geomean_line

    line = geomean_line(table, by=by)
    assert line.startswith("- **Geometric means of the medians over the 4 uncapped rows**")
    assert f"{geomean_row(free)['change_pct']:+.2f}%" in line and "not a mean of the changes above" in line
    assert "differ in profile, block size." in line  # the uncapped rows share their rate cap: not said to differ
    published = run_totals("pvscsi-vs-lsi", "bandwidth_mib_s", ["controller", "sioc"], only={"test": ["seqread"]})
    mixed = comparison_table(published, "bandwidth_mib_s", factor="controller", baseline="LSI", by=["sioc"])
    assert "rate-capped" not in mixed["verdict"].to_list()  # published tables say no cap
    all_capped = comparison_table(
        units.filter(pl.col("rate_cap") == "on"), "iops", factor="ioengine", baseline="psync", by=by
    )
    assert design_summary(all_capped).startswith("Every comparison (4) ran under a rate cap")


def test_a_cell_table_gives_each_vm_its_mean_latency_beside_its_value() -> None:
    from benchlib.views import cell_frame, member_table

    rows = cell_frame("pvscsi-vs-lsi", {"test": "seqread", "controller": "LSI", "sioc": "off"})
    table = member_table(rows, "bandwidth_mib_s")
    assert table.columns == ["vm", "bandwidth_mib_s", "latency_ms", "runs"]
    best = table.filter(pl.col("vm") == "gus_fio_2").row(0, named=True)  # the write-up: 1,148 MiB/s at 3.47 ms
    assert round(best["bandwidth_mib_s"]) == 1148 and best["latency_ms"] == pytest.approx(3.47)
    without = member_table(rows.with_columns(pl.lit(None, dtype=pl.Float64).alias("lat_mean_ns")), "bandwidth_mib_s")
    assert "latency_ms" not in without.columns  # no latency anywhere: no column of dashes
    # fio's lat is submission + completion, its percentiles completion alone: a fio cell's column says which
    fio = member_table(cell_frame("loopback-fio", {k: v[0] for k, v in CELL.items()}), "iops")
    assert fio.columns == ["vm", "iops", "total_latency_ms", "runs"]


def test_only_a_study_on_vsphere_is_told_about_virtual_controllers_and_esxi_hosts() -> None:
    """The loopback study is four fio servers on one Linux disk; the write-up's study varies vSphere settings."""
    from benchlib.views import on_vsphere

    assert not on_vsphere("loopback-fio") and not on_vsphere("fio-sample")
    assert on_vsphere("pvscsi-vs-lsi")  # its factors are the controller and SIOC


def test_fio_servers_on_one_machine_are_called_hosts_not_vms() -> None:
    """A page of the loopback study names its members as what they are; the write-up's study keeps its VMs."""
    from benchlib.tables import LABELS, name_members, show
    from benchlib.views import cell_frame, member_word, per_member
    from benchlib.words.cell import describe_cell

    assert (member_word("loopback-fio"), member_word("pvscsi-vs-lsi")) == ("Host", "VM")
    levels = {"profile": "randread", "block_size": "4k", "ioengine": "libaio", "rate_cap": "off"}
    rows = cell_frame("loopback-fio", levels)
    try:
        name_members(member_word("loopback-fio"))
        said = describe_cell(per_member(rows, "iops"), "iops", levels)
        assert ": 4 hosts;" in said and "VM" not in said
        assert show(per_member(rows, "iops")).header[0] == "Host"
    finally:
        name_members("VM")
    assert LABELS["vm"] == "VM"


def test_a_cell_page_gives_the_fairness_pages_figures_and_names_no_winner_the_runs_do_not() -> None:
    """Every loopback cell: the sentence's Jain's index and spread are the fairness table's (within each run,
    the median run's); a host is named highest only when it was in every run and stood out by 1.1x."""
    from benchlib.stats.fairness import UNEVEN_FROM
    from benchlib.views import cell_capped, cell_frame, fairness, per_member, totals_of_runs
    from benchlib.words.cell import describe_cell

    by = ["profile", "block_size", "ioengine", "rate_cap"]
    table = fairness("loopback-fio", "iops", by=by, only={"profile": ["randread", "randwrite"]})
    named = 0
    for row in table.iter_rows(named=True):
        levels = {k: row[k] for k in by}
        rows = cell_frame("loopback-fio", levels)
        said = describe_cell(
            per_member(rows, "iops"),
            "iops",
            levels,
            capped=cell_capped(rows),
            run_totals=totals_of_runs(rows, "iops")["iops"],
            within=row,
        )
        assert (
            f"the highest got {row['max_min_median']:.2f} times the lowest, Jain's index {row['jain_median']:.4f}"
            in said
        )
        hosts = [h for h in per_member(rows, "iops")["vm"] if f"{h} was highest" in said]
        stands_out = row["max_min_median"] >= UNEVEN_FROM and row["capped_runs"] == 0
        assert hosts == ([row["top"]] if stands_out and row["top"] else [])
        # a run whose two highest were within 2% had no leader: said so, not counted as a different host on top
        assert ("no clear leader" in said) == (stands_out and row["close_runs"] > 0 and not row["top"])
        named += len(hosts)
        if row["capped_runs"]:
            assert "stands out" not in said and "rate-capped" in said
    assert named == 1  # randwrite 64k libaio: 127.0.0.5 on top in all 3 runs, 1.33x the lowest


def test_a_published_sweep_is_read_by_its_levels_with_its_depths_as_numbers() -> None:
    """The write-up's sweep: depths are text in its table ("128" sorts before "16"); per VM, the story it tells."""
    from benchlib.views import profile_totals, sweep, sweep_shapes

    per_vm = sweep("pvscsi-vs-lsi", {"test": "iodepth_sweep"}, member="vm")
    assert per_vm.schema["iodepth"] == pl.Int64 and per_vm["iodepth"].to_list() == [16, 32, 64, 128] * 2
    shapes = dict(sweep_shapes(per_vm, member="vm").select("vm", "shape").iter_rows())
    assert shapes == {"gus_fio_2": "peak at 32, then drop: 38% lower at 128", "gus_fio_4": "saturated at 32"}
    assert (per_vm["runs"] == 1).all() and set(per_vm["queue_state"]) == {"queue-full"}
    mix = profile_totals("pvscsi-vs-lsi", {"test": "rwmix_sweep"})
    assert sorted(set(mix["write_pct"])) == [0.0, 50.0, 100.0]


def test_a_comparison_says_what_else_changed_with_its_factor() -> None:
    """psync against libaio in the loopback study is also 1 I/O in flight per host against 32: the page says a
    change is not the engine's alone. A block-size factor changes the block size by design: nothing to say."""
    from benchlib.views import confounders
    from benchlib.words.confounding import confounded_note

    only = {"profile": ["randread", "randwrite"]}
    by = ["profile", "block_size", "rate_cap"]
    found = confounders("loopback-fio", factor="ioengine", baseline="psync", by=by, only=only)
    assert found == [
        {"param": "configured_depth", "values": {"libaio": [32], "psync": [1]}, "groups": 8, "compared": 8}
    ]
    said = confounded_note(found, "ioengine")
    assert said.startswith("**Besides I/O engine, the sides differ in** I/Os in flight per host")
    assert "I/Os in flight per host (libaio: 32, psync: 1; in every compared group; iodepth x jobs" in said
    assert "A change here is not the I/O engine's alone." in said
    other = confounders("loopback-fio", factor="ioengine", baseline="libaio", by=by, only=only)
    assert confounded_note(other, "ioengine") == said  # one sentence whichever baseline: the index says it once
    assert confounders("loopback-fio", factor="block_size", baseline="4k", by=["profile", "ioengine"], only=only) == []
    seqread = {"test": ["seqread"]}
    assert confounders("pvscsi-vs-lsi", factor="controller", baseline="LSI", by=["sioc"], only=seqread) == []
    assert confounded_note([], "controller") == ""


def test_a_sweep_says_what_it_held_fixed() -> None:
    """The write-up's sweeps, read from their rows: 4K random read, 1 job, LSI, SIOC off; the mix at 8 jobs x 8."""
    from benchlib.views import held_values
    from benchlib.words.sweeps import held_note

    def held_fixed(study: str, levels: dict | str, *, varied: str) -> str:
        return held_note(held_values(study, levels, varied=varied))

    assert held_fixed("pvscsi-vs-lsi", {"test": "iodepth_sweep"}, varied="iodepth") == (
        "controller LSI, SIOC off, I/O pattern random read, block size 4k, 1 job"
    )
    mix = held_fixed("pvscsi-vs-lsi", {"test": "rwmix_sweep"}, varied="write_pct")
    assert mix.endswith("I/O pattern random read/write mix, block size 4k, 8 jobs, iodepth 8")
    assert "iodepth" not in held_fixed("loopback-fio", "iodepth-sweep", varied="iodepth")  # what it stepped
    held = dict(held_values("loopback-fio", "iodepth-sweep", varied="iodepth"))
    assert held["block_size"] == "4k" and "block_size_bytes" not in held  # the factor and the job's: one condition


def test_buffered_jobs_are_said_to_be_the_page_caches() -> None:
    """fio's direct=0 (its default) leaves the page cache in the path: the pages say so; direct or unknown: not."""
    from benchlib.views import buffered, cell_frame, disk_ios
    from benchlib.words.cache import buffered_note

    def said(frame: pl.DataFrame, by: list[str], disk: pl.DataFrame | None = None) -> str:
        return buffered_note(buffered(frame, by, disk))

    direct = cell_frame(
        "loopback-fio", {"profile": "randread", "block_size": "4k", "ioengine": "libaio", "rate_cap": "off"}
    )
    assert buffered(direct, ["profile"]) is None and said(direct, ["profile"]) == ""  # the study ran direct=1
    cached = direct.with_columns(pl.lit(False).alias("direct"))
    found = buffered(cached, ["profile"])
    assert (found.buffered, found.configurations, found.shares) == (1, 1, {})
    assert said(cached, ["profile"]).startswith("These jobs ran buffered (fio's direct=0")
    # with the disk's own counters the note says how much of fio's I/O reached the disk
    disk = disk_ios("loopback-fio")
    # the four hosts share one disk, each reporting it: the disk did between the largest count and their sum
    low, high = buffered(cached, ["profile"], disk).shares["read"]
    assert 1 <= low < high
    text = said(cached, ["profile"], disk)
    assert re.search(
        r"hold 1\d\d% \(if a run's VMs shared one disk\) to \d+% \(if each had its own\) as many reads as fio did: "
        r"the cache answered few",
        text,
    ), text
    few = said(cached, ["profile"], disk.with_columns(pl.col("read_ios") / 1000))
    assert re.search(
        r"hold 0\.\d+% \(if a run's VMs shared one disk\) to 0\.\d+% \(if each had its own\) as many reads as fio "
        r"did: the cache answered most",
        few,
    ), few
    assert "write" not in few.split("hold", 1)[1]  # a read cell: nothing said of writes
    half = pl.concat([direct.with_columns(pl.lit("b").alias("profile")), cached])
    assert said(half, ["profile"]).startswith("In 1 of these 2 configurations the jobs ran buffered")
    published = cell_frame("pvscsi-vs-lsi", {"test": "seqread", "controller": "LSI", "sioc": "off"})
    assert buffered(published, ["test"]) is None  # a published table does not say: no claim


def test_fair_is_read_as_equal_shares_only_in_a_study_of_sioc_without_shares() -> None:
    from benchlib.views import equal_shares_assumed
    from benchlib.words.cache import equal_shares_note

    assert equal_shares_assumed("pvscsi-vs-lsi") and not equal_shares_assumed("loopback-fio")
    assert equal_shares_note(True).startswith("The study declares no per-VM disk shares") and not (
        equal_shares_note(False)
    )


def test_a_run_is_named_by_what_tells_it_apart_from_the_configurations_other_runs() -> None:
    """Runs name themselves by the folder that differs between them, VMs' files and a run's logs under one name;
    a folder holding several runs adds the file, a file holding several adds its place in it."""
    from benchlib.views import run_names

    def row(source: str, fmt: str = "fio-json+", doc: int = 0, group: str | None = None, rep: int | None = None):
        return {"run_id": f"{source}#{doc}", "source": source, "format": fmt, "document_index": doc,
                "run_group": group, "repetition": rep, "cell": source.split("/")[1]}  # fmt: skip

    rows = [
        *(row(f"s/a/r{r}/{vm}/job.out", group=f"r{r}") for r in (1, 2) for vm in ("vm-a", "vm-b")),
        *(row(f"s/a/r{r}/{vm}/job_iops.1.log", "fio-log", group=f"log{r}") for r in (1, 2) for vm in ("vm-a", "vm-b")),
        row("s/b/one.json"),
        row("s/b/two.json"),  # one folder, two runs
        row("s/c/batch.json", doc=0),
        row("s/c/batch.json", doc=1),  # one file, two runs
        row("s/d/x/job.out"),
        row("s/d/x/job_iops.1.log", "fio-log"),  # one run and its log
        row("s/e/r1/job.out", rep=3),
        row("s/e/r2/job.out", rep=4),  # benchlib run recorded the repetition
    ]
    frame = pl.DataFrame(rows, schema_overrides={"repetition": pl.Int32, "document_index": pl.Int32})
    names = dict(run_names(frame, ["cell"]).iter_rows())
    assert [names[f"s/a/r{r}/{vm}/job.out#0"] for r in (1, 2) for vm in ("vm-a", "vm-b")] == ["r1", "r1", "r2", "r2"]
    assert names["s/a/r2/vm-b/job_iops.1.log#0"] == "r2"  # the logs of a run carry its name
    assert names["s/b/one.json#0"] == "one.json" and names["s/b/two.json#0"] == "two.json"
    assert names["s/c/batch.json#1"] == "run 2 in batch.json"
    assert names["s/d/x/job.out#0"] == names["s/d/x/job_iops.1.log#0"] == "run 1"
    assert names["s/e/r2/job.out#0"] == "run 4"


def test_iops_across_block_sizes_is_said_to_be_other_work() -> None:
    """4k against 64k in IOPS compares I/Os of 16 times the bytes; in bandwidth, or between engines, it does not."""
    from benchlib.views import unlike_sizes
    from benchlib.words.confounding import unlike_work_note

    only = {"profile": ["randread", "randwrite"]}
    sizes = unlike_sizes("loopback-fio", factor="block_size", baseline="4k", value="iops", by=["profile"], only=only)
    assert sizes == [4096, 65536]
    said = unlike_work_note(sizes, "iops")
    assert said.startswith("**Not the same work.** The sides ran different block sizes (4k, 64k)")
    assert "one I/O of 64k moves 16 times the bytes of one of 4k" in said
    bandwidth = unlike_sizes(
        "loopback-fio", factor="block_size", baseline="4k", value="bandwidth_mib_s", by=[], only=only
    )
    engines = unlike_sizes("loopback-fio", factor="ioengine", baseline="psync", value="iops", by=BY[:2], only=only)
    assert bandwidth == engines == [] and unlike_work_note([], "iops") == ""


def test_a_write_share_sweep_is_said_in_words() -> None:
    """The write-up's table: both VMs fell at every step; the loopback hosts were lowest at 75% writes."""
    from benchlib.stats import medians
    from benchlib.views import mix_shapes, profile_totals
    from benchlib.words.sweeps import mix_note

    def mix_finding(mix: pl.DataFrame, runs: pl.DataFrame | None = None) -> str:
        return mix_note(mix_shapes(mix, runs=runs), mix)

    published = medians(profile_totals("pvscsi-vs-lsi", {"test": "rwmix_sweep"}), ["iops"], by=["vm", "write_pct"])
    shapes = mix_shapes(published)
    assert [(r["member"], r["shape"], r["clear"], r["first"], r["last"]) for r in shapes] == [
        ("gus_fio_3", "fell", True, 19_189, 14_888),
        ("gus_fio_4", "fell", True, 40_585, 29_838),
    ]
    assert mix_finding(published) == (
        "From 0% to 100% writes, IOPS of each VM: gus_fio_3 19,189 to 14,888 (-22%); gus_fio_4 40,585 to 29,838 "
        "(-26%). Every VM fell at every step."
    )
    runs = profile_totals("loopback-fio", "rwmix-sweep")
    recorded = medians(runs, ["iops"], by=["vm", "write_pct"])
    assert mix_finding(recorded).endswith("Every VM was lowest at 75% writes, higher again at 100%.")  # medians alone
    # each host's 3 runs at 75% and at 100% overlap (127.0.0.2: 15,523-18,471 against 17,310-18,668): no dip
    assert mix_finding(recorded, runs=runs).endswith(
        "Every VM had its lowest median at 75% writes, but its runs there and at 100% overlap: no dip the runs can "
        "tell from how they vary."
    )
    one = pl.DataFrame(
        {"vm": ["a", "a", "a", "b", "b", "b"], "write_pct": [0, 50, 100] * 2, "iops": [3.0, 2.0, 1.0, 1.0, 2.0, 3.0]}
    )
    assert mix_finding(one).endswith("a: fell at every step; b: rose at every step.")
    # two runs a share: ranges apart bear the shape out; overlapping ones leave it to the medians
    spread = pl.DataFrame({"vm": ["a"] * 6, "write_pct": [0, 0, 50, 50, 100, 100], "iops": [10.0, 9, 5, 6, 8, 7]})
    assert mix_finding(medians(spread, ["iops"], by=["vm", "write_pct"]), runs=spread).endswith(
        "The VM was lowest at 50% writes, higher again at 100%."
    )
    close = spread.with_columns(pl.Series("iops", [10.0, 9, 8.5, 9.5, 9, 8]))
    assert mix_finding(medians(close, ["iops"], by=["vm", "write_pct"]), runs=close).endswith(
        "The VM fell at every step in its medians (the runs of some neighbouring shares overlap)."
    )
    assert mix_finding(one.head(1)) == ""  # one share: nothing moved


def test_slowest_ios_every_host_met_are_said_on_their_cell() -> None:
    """Loopback random write 64k libaio, run 1: every host's slowest I/O took about 490 ms against about 27 ms in the
    configuration's other runs (its total 8,904 IOPS against 13,202 and 11,049): said, with the run named."""
    from benchlib.views import STALL_TIMES, cell_frame, stalls, use_study_words
    from benchlib.words.cell import stalls_note

    def stalled_runs(study: str, levels: dict) -> str:
        return stalls_note(stalls(cell_frame(study, levels), levels))

    paused_at = {"profile": "randwrite", "block_size": "64k", "ioengine": "libaio", "rate_cap": "off"}
    found = stalls(cell_frame("loopback-fio", paused_at), paused_at)
    assert [r["run"] for r in found["runs"]] == ["run 1"] and found["members"] == []  # the run, not one member
    assert found["runs"][0]["lowest"] and found["runs"][0]["low"] >= STALL_TIMES * found["runs"][0]["typical"]

    from benchlib.tables import name_levels, name_members

    use_study_words("loopback-fio")
    try:
        paused = stalled_runs(
            "loopback-fio", {"profile": "randwrite", "block_size": "64k", "ioengine": "libaio", "rate_cap": "off"}
        )
        assert re.match(
            r"\*\*The slowest I/Os of run 1\.\*\* In it, every host's slowest I/O took 48\d–49\d ms, 1\d times", paused
        )
        assert paused.endswith(
            "Its total, 8,904 IOPS, is the lowest of the configuration's runs (the others 11,049 to 13,202)."
        )
        # under a rate cap the total is the cap's: the sentence says nothing of it
        capped = stalled_runs(
            "loopback-fio", {"profile": "randwrite", "block_size": "64k", "ioengine": "psync", "rate_cap": "on"}
        )
        assert capped.startswith("**The slowest I/Os of run 1.**") and "total" not in capped
        assert "run 2" not in paused and "run 3" not in paused
        steady = stalled_runs(
            "loopback-fio", {"profile": "randread", "block_size": "4k", "ioengine": "libaio", "rate_cap": "off"}
        )
        assert steady == "" and STALL_TIMES == 10
        # one host's slowest I/O, 78 ms against about 3 ms: said as that host's, not the run's; capped, no IOPS
        alone = stalled_runs(
            "loopback-fio", {"profile": "randwrite", "block_size": "64k", "ioengine": "libaio", "rate_cap": "on"}
        )
        assert alone.startswith("**The slowest I/O of 127.0.0.5 in run 2.** It took 78.1 ms, 26 times the median")
        # ... in a run slow for every host (their slowest 3-6 times the other runs'): the stall its extreme
        assert (
            "; the whole run was slower: the other hosts' slowest took 10.5 to 17.5 ms, against a median of 2.56 ms "
            "in the other runs, and 127.0.0.5's stall was the worst of it." in alone
        )
        assert "IOPS" not in alone
        assert (
            stalled_runs("pvscsi-vs-lsi", {"test": "seqread", "controller": "LSI", "sioc": "off"}) == ""
        )  # no I/O maxima
    finally:  # the words are this process's: the tests after this one read the default "VM"
        name_members("VM")
        name_levels({})


def test_a_cell_of_two_runs_gives_both_runs_fairness_not_their_mean() -> None:
    """The median of two runs is their mean, a figure neither had (the written study's 1.20x and 7.95x read as
    4.58x): the sentence gives the range of the two runs, and says each run had a different highest member."""
    from benchlib.stats.fairness import fairness_over_runs
    from benchlib.words.cell import describe_cell

    frame = pl.DataFrame(
        {"run": ["r1", "r1", "r2", "r2"], "vm": ["a", "b", "a", "b"], "iops": [100.0, 120.0, 800.0, 100.0]}
    )
    row = fairness_over_runs(frame, "iops", member="vm", run="run").row(0, named=True)
    members = frame.group_by("vm").agg(pl.col("iops").median()).sort("vm")
    said = describe_cell(members, "iops", {"rw": "randwrite"}, within=row)
    assert "in its 2 runs, the highest got 1.20 to 8.00 times the lowest, Jain's index" in said
    assert f"Jain's index {row['jain_worst']:.4f} to {row['jain_best']:.4f}" in said and "median" not in said
    assert "each run had a different VM highest" in said and "4.60" not in said
    totals = describe_cell(members, "iops", {"rw": "randwrite"}, within=row, run_totals=pl.Series([220.0, 900.0]))
    assert totals.endswith("IOPS of all VMs together, its 2 runs' totals (220 and 900, lower first); their mean: 560.")
    even = fairness_over_runs(frame.with_columns(iops=pl.lit(100.0)), "iops", member="vm", run="run").row(0, named=True)
    said = describe_cell(members, "iops", {}, within=even)
    assert "the highest got 1.00 times the lowest in both, Jain's index 1.0000 in both runs" in said

    # the fairness page: the headline, the table and the chart give both runs too
    from benchlib import figures
    from benchlib.tables import fairness_rows
    from benchlib.words.fairness import fairness_headline

    table = fairness_over_runs(frame.with_columns(rw=pl.lit("randwrite")), "iops", member="vm", run="run", by=["rw"])
    assert fairness_headline(table, ["rw"]).startswith(
        f"Least fair: I/O pattern random write, Jain's index {row['jain_worst']:.4f} in its less fair run "
        f"({row['jain_best']:.4f} in the other)."
    )
    shown = fairness_rows(table, by=["rw"])
    assert "Jain, fairer run" in shown.header and "Jain, median over runs" not in shown.header
    assert "1.20 / 8.00" in shown.rows[0]
    spec = figures.fairness_summary(table, by=["rw"]).to_dict()
    assert spec["title"]["subtitle"][0].startswith("dot: the fairer run; black tick: the less fair")
    (dot,) = [layer for layer in spec["layer"] if layer["mark"]["type"] == "circle"]
    assert [v["jain_median"] for v in dot["data"]["values"]] == [pytest.approx(row["jain_best"])]
    assert dot["data"]["values"][0]["note"] == "2 runs, max/min 1.20x and 8.00x"
    bars = figures.per_vm_bars(members, value="iops", within=row).to_dict()
    assert bars["title"]["subtitle"][0].startswith(
        f"within each of its 2 runs: Jain's index {row['jain_worst']:.4f} to {row['jain_best']:.4f}; "
        "highest / lowest 1.20x to 8.00x (2 VMs)"
    )


def test_a_synchronous_engine_at_a_queue_depth_is_said_to_hold_one_io() -> None:
    """Loopback psync at iodepth 32: 0.99 I/Os in flight per host by Little's law; its cell page says so, so a
    reader of that page alone does not credit 44,646 against 103,748 IOPS to the engine. libaio says nothing."""
    from benchlib.tables import name_levels, name_members
    from benchlib.views import cell_frame, sync_depth, use_study_words
    from benchlib.words.cell import sync_depth_note

    use_study_words("loopback-fio")
    try:
        levels = {"profile": "randread", "block_size": "4k", "ioengine": "psync", "rate_cap": "off"}
        found = sync_depth(cell_frame("loopback-fio", levels))
        assert found["engines"] == ["psync"] and found["depth"] == 32 and 0.9 < found["held"] < 1
        said = sync_depth_note(found)
        assert said.startswith("**One I/O at a time.** The jobs set iodepth=32, but psync is a synchronous engine")
        assert re.search(r"Little's law on these runs: 0\.9\d+ in flight per host, the median", said)
        assert sync_depth(cell_frame("loopback-fio", {**levels, "ioengine": "libaio"})) is None
        # capped at 500 IOPS, the cap sets what is in flight (0.04 per host, as capped libaio's): nothing to say
        assert sync_depth(cell_frame("loopback-fio", {**levels, "rate_cap": "on"})) is None
        assert sync_depth_note(None) == ""
    finally:
        name_members("VM")
        name_levels({})


def test_the_index_says_two_settings_that_interact_beside_what_each_did() -> None:
    """The answers name the groups whose test finds an interaction (loopback: both uncapped profiles), with
    their Holm-adjusted p; tests that found none are counted; a design that made no test says nothing."""
    from benchlib.report_html import _together
    from benchlib.views import interaction, study_words

    by = ["profile", "rate_cap"]
    only = {"profile": ["randread", "randwrite"]}
    _, tests = interaction("loopback-fio", "iops", x="block_size", trace="ioengine", by=by, only=only)
    page = {"x": "block_size", "trace": "ioengine", "by": by, "page": "interaction.html"}
    calm = tests.with_columns(pl.when(pl.col("p").is_not_null()).then(pl.lit("no evidence")).alias("verdict"))
    with study_words("loopback-fio"):  # the study's words for this test only: later tests read the default "VM"
        said, quiet = _together({"tests": tests, **page}), _together({"tests": calm, **page})
    assert "the effect of block size, as a ratio, depends on I/O engine in each of the 2 groups tested (" in said
    p = tests.filter(profile="randread", rate_cap="off")["p_holm"][0]
    assert f"profile random read, rate cap off: p = {p:.4f}" in said and "Holm-adjusted over 2 tests" in said
    assert "href='interaction.html'" in said
    assert "no test finds that the effect of block size depends on I/O engine (no evidence in 2 of 2 groups" in quiet
    _, published = interaction("pvscsi-vs-lsi", "bandwidth_mib_s", x="controller", trace="sioc", by=["test"])
    assert _together({"tests": published, "x": "controller", "trace": "sioc", "by": ["test"], "page": "i.html"}) == ""


def test_the_jobs_of_a_run_add_up_in_each_interval_over_time() -> None:
    """fio-sample's 70/30 run has two jobs whose logs stamp each second a few ms apart (2,006 and 2,018 ms):
    the over-time figure drew them as separate points, one job's rate each, a false 50% drop after the first
    second. Each interval is now the jobs' sum: three seconds, three points, each above either job's rate."""
    from benchlib.store import open_study
    from benchlib.views import run_time_series

    found = run_time_series("fio-sample", {"block_size": "4k"})
    opened = open_study("fio-sample")
    logged = opened.scan("intervals").filter(pl.col("metric") == "iops").collect()
    per_job = logged.group_by("run_id", "job_index", "time_ns").agg(pl.col("value").sum())
    assert found is not None and found.series.height == 3 == per_job.height // 2  # two jobs, three seconds each
    assert (found.series["iops"] > per_job["value"].max()).all()
    assert found.series["iops"].sum() == pytest.approx(per_job["value"].sum())
    assert found.series["time_ns"].is_sorted() and found.series["time_ns"].n_unique() == 3
