"""The helpers the summary notebooks call, on the bundled studies: one value per run, per-VM values,
CPU efficiency, per-host series and the disk-statistics view of where latency was spent."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from benchlib.paths import PROCESSED, PROJECT_ROOT
from benchlib.schema import run_unit_expr
from benchlib.store import load_study_tables
from benchlib.views import disk_view, host_series, member_efficiency, member_values, run_totals

CELL = {"profile": "randread", "block_size": "4k", "ioengine": "libaio", "rate_cap": "off"}
AXES = ["profile", "block_size", "ioengine", "rate_cap"]


def test_a_run_is_one_invocation_across_its_hosts() -> None:
    units = run_totals("loopback-fio", "iops", AXES, only={"profile": ["randread"]})
    cell = units.filter(*[pl.col(k) == v for k, v in CELL.items()])
    assert cell.height == 3  # three repetitions, each one fio client/server run of four hosts
    tables = load_study_tables(PROCESSED / "loopback-fio", only=("runs", "results"))
    aggregate = tables.results.join(tables.runs.select("run_id", "sha256", "is_aggregate", *AXES), on="run_id")
    aggregate = aggregate.filter(
        pl.col("is_aggregate_right") if "is_aggregate_right" in aggregate.columns else pl.col("is_aggregate")
    )
    expected = (
        aggregate.filter(*[pl.col(k) == v for k, v in CELL.items()]).group_by(run_unit_expr()).agg(pl.col("iops").sum())
    )
    joined = cell.join(expected, on="run_unit", suffix="_fio")
    assert joined.height == 3
    # fio's "All clients" divides all I/Os by the longest host's runtime, so it is a little below the sum of rates
    assert joined["iops"].to_list() == pytest.approx(joined["iops_fio"].to_list(), rel=0.01)
    assert (joined["iops"] >= joined["iops_fio"]).all()


def test_the_vms_of_a_published_table_are_one_run() -> None:
    """Five VMs measured at once are one run of their configuration (METHODS.md R1), not five."""
    units = run_totals("pvscsi-vs-lsi", "bandwidth_mib_s", ["controller", "sioc"], only={"test": ["seqread"]})
    assert units.group_by("controller", "sioc").len()["len"].to_list() == [1, 1, 1, 1]
    lsi_off = units.filter((pl.col("controller") == "LSI") & (pl.col("sioc") == "off"))["bandwidth_mib_s"]
    assert lsi_off.to_list() == [401 + 1148 + 203 + 326 + 204]  # BRIEF.md: the five VMs together
    members = member_values("pvscsi-vs-lsi", "bandwidth_mib_s", by=["controller", "sioc"], only={"test": ["seqread"]})
    lsi_off = members.filter((pl.col("controller") == "LSI") & (pl.col("sioc") == "off"))
    assert lsi_off["bandwidth_mib_s"].max() / lsi_off["bandwidth_mib_s"].min() == pytest.approx(
        5.655, abs=1e-3
    )  # BRIEF: 5.6x


def test_efficiency_is_iops_over_guest_cpu() -> None:
    per_vm = member_efficiency("loopback-fio", by=AXES, only={"profile": ["randread"]})
    row = per_vm.filter(*[pl.col(k) == v for k, v in CELL.items()]).row(0, named=True)
    assert row["runs"] == 3 and row["iops_per_cpu_pct"] > 0 and 0 < row["cpu_pct"] <= 100


def test_host_series_has_every_host_per_second() -> None:
    series = host_series("loopback-fio", CELL, repetition=1)
    assert sorted(series["host"].unique()) == ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]
    per_host = series.group_by("host").agg(pl.len(), pl.col("value").mean())
    assert per_host["len"].min() >= 2 and per_host["value"].min() > 0


def test_disk_view_obeys_littles_law() -> None:
    """The kernel's stats: mean device queue = completions per second x await.

    in_queue and ticks count the same time.
    """
    view = disk_view("loopback-fio", by=AXES, only={"profile": ["randread", "randwrite"]})
    assert view.height == 16 and set(view["device"]) == {"vda"}
    busy = view.filter(*[pl.col(k) == v for k, v in CELL.items()]).row(0, named=True)
    assert busy["device_queue"] > 64  # four hosts x iodepth 32 waiting in the device
    assert busy["app_latency_ms"] == pytest.approx(busy["device_await_ms"] + busy["above_device_ms"], rel=1e-9)
    for row in view.filter(pl.col("device_queue") > 1).iter_rows(named=True):  # Little's law on the device
        assert row["device_queue"] == pytest.approx(row["device_ios_per_s"] * row["device_await_ms"] / 1e3, rel=0.1)
    quiet = view.filter((pl.col("ioengine") == "psync") & (pl.col("rate_cap") == "on"))
    assert (quiet["device_queue"] < 1).all()  # rate-capped synchronous I/O never queues
    # the counters run through fio's 1 s ramp: over the 3 s runtime alone, 4 hosts capped at 500 IOPS read
    # as 2,660 requests/s and the busiest queue as 163 with 128 I/Os in flight at most
    capped = view.filter(pl.col("rate_cap") == "on")["device_ios_per_s"]
    assert capped.min() > 1850 and capped.max() < 2050
    assert view["device_queue"].max() < 128


def test_a_figure_its_own_row_contradicts_is_unknown_with_the_reason() -> None:
    """fio's util of the rate-capped psync runs (0.1%) cannot hold a queue of 0.13 requests from 4 jobs at
    most (at least ~3% busy): the kernel's io_ticks, shown as unknown, with both figures in the note."""
    view = disk_view("loopback-fio", by=AXES, only={"profile": ["randread", "randwrite"]})
    capped = view.filter(pl.col("ioengine") == "psync", pl.col("rate_cap") == "on", pl.col("block_size") == "4k")
    unknown = capped.filter(pl.col("profile") == "randread").row(0, named=True)  # every run's util too low
    assert unknown["util_pct"] is None and unknown["note"].startswith("device busy unknown: fio's util says 0.1%")
    assert "a device queue of 0.1 I/Os on average (aqu-sz), with at most 4 in flight" in unknown["note"]
    # judged run by run: the runs whose util is too low leave the median and the range, and the note says how many
    some = capped.filter(pl.col("profile") == "randwrite").row(0, named=True)
    assert some["util_pct"] is not None and some["util_low"] > 5  # not the 0.1% runs the rule rejects
    # the four fio servers of a run report the one disk they share: a figure per run, not per host and run
    assert some["note"] == (
        "device busy: 2 of 3 figures (one per run; its hosts share one disk) left out: 2 less busy than its queue needs"
    )
    # and a util above its queue (60% busy with 0.3 requests on average) is the kernel's io_ticks too
    psync = view.filter(pl.col("ioengine") == "psync", pl.col("rate_cap") == "on", pl.col("profile") == "randwrite")
    both = psync.filter(pl.col("block_size") == "64k").row(0, named=True)
    assert both["util_pct"] is None and both["note"].endswith(
        "1 busier than its queue allows, 2 less busy than its queue needs"
    )
    libaio = view.filter(pl.col("ioengine") == "libaio", pl.col("rate_cap") == "on")
    # run 1 of random write 64k: 26.9% busy with 0.24 requests on average, 12% above what the queue allows
    rw64 = libaio.filter(pl.col("profile") == "randwrite", pl.col("block_size") == "64k").row(0, named=True)
    assert "left out: 1 busier than its queue allows; the 2 kept are both given" in rw64["note"]
    busy = view.filter(pl.col("rate_cap") == "off")
    assert busy["util_pct"].min() > 85  # queues of 3 to 163: not contradicted
    # fio's 12.745 ms against an await of 12.808: a 0 above the block layer that the note explains, not a measured 0
    near = busy.filter(pl.col("note").is_not_null())
    assert set(near["block_size"]) == {"64k"} and (near["above_device_ms"] == 0).all()
    assert near["note"].str.contains(r"^fio saw 0\.\d% less than the await \(measurement noise\)").all()


def test_buffered_io_spends_nothing_above_the_device_it_never_waited_for() -> None:
    """fio saw 0.003 ms while the block layer's await was 11 ms: the page cache answered, the device's I/Os
    were the write-back's; 'above the block layer' is unknown, not 0, and the chart leaves the bar out."""
    from benchlib import figures
    from benchlib.stats.queueing import device_latency_split
    from benchlib.words.hostside import latency_split_notes

    runs = pl.DataFrame(
        {
            "cell": ["buffered", "direct"],
            "app_latency_ms": [0.0026, 1.2],
            "runtime_ns": [10**9, 10**9],
            "read_ios": [0, 1000],
            "write_ios": [1000, 0],
            "read_ticks_ms": [0, 900],
            "write_ticks_ms": [11000, 0],
            "in_queue_ms": [11000, 900],
            "util_pct": [60.0, 90.0],
            "instance": ["vda", "vda"],
            "configured_depth": [1.0, 1.0],
            "run_iops": [500_000.0, 1000.0],
        }
    )
    split = {r["cell"]: r for r in latency_split_notes(device_latency_split(runs, ["cell"])).iter_rows(named=True)}
    assert split["buffered"]["above_device_ms"] is None and "page cache" in split["buffered"]["note"]
    # 11 requests queued on average while fio's one job held one I/O: the queue was the kernel's write-back
    assert split["buffered"]["note"].endswith(
        "the device queue of 11.0 is more than the 1 I/O fio's jobs held at once: it is the kernel's write-back "
        "of the cached writes"
    )
    assert split["direct"]["above_device_ms"] == pytest.approx(0.3) and split["direct"]["note"] is None
    spec = figures.latency_split(latency_split_notes(device_latency_split(runs, ["cell"])), where=["cell"]).to_dict()
    assert {v["configuration"] for v in spec["layer"][0]["data"]["values"]} == {"direct"}
    assert "buffered" in spec["title"]["subtitle"][-1]


def test_direct_io_below_the_await_is_other_io_on_the_disk_not_the_page_cache() -> None:
    """fio saw 0.05 ms with direct=1 while the disk's await was 0.2 ms: the cache cannot have answered (fio
    bypassed it), so the counters hold someone else's I/O; the note and the page's finding say that, and
    the same figures from a buffered run still say the page cache."""
    from benchlib.stats.queueing import device_latency_split
    from benchlib.words.hostside import disk_finding, latency_split_notes

    one = {"app_latency_ms": 0.05, "runtime_ns": 10**9, "read_ios": 1000, "write_ios": 0, "read_ticks_ms": 200}
    one |= {"write_ticks_ms": 0, "in_queue_ms": 200, "util_pct": 20.0, "instance": "vda", "configured_depth": 1.0}
    one |= {"run_iops": 1000.0}
    runs = pl.DataFrame([one | {"cell": "direct", "direct_io": True}, one | {"cell": "buffered", "direct_io": False}])
    split = device_latency_split(runs, ["cell"])
    flags = {r["cell"]: (r["cached"], r["other_io"], r["above_device_ms"]) for r in split.iter_rows(named=True)}
    assert flags == {"direct": (False, True, None), "buffered": (True, False, None)}
    notes = {r["cell"]: r["note"] for r in latency_split_notes(split).iter_rows(named=True)}
    assert "bypassed the page cache (direct=1): the disk's counters hold other I/O" in notes["direct"]
    assert notes["buffered"].startswith("fio's latency is below the await: the page cache answered")
    direct = latency_split_notes(split.filter(pl.col("cell") == "direct"))
    assert "hold other I/O than fio's" in disk_finding(direct, ["cell"]) and "buffered" not in disk_finding(
        direct, ["cell"]
    )


def test_the_page_says_where_latency_went_at_the_deepest_and_shallowest_queue() -> None:
    """Libaio 64k: 123 requests queued, all of fio's 12.7 ms in the device; psync capped: a third above it."""
    from benchlib.words.hostside import disk_finding

    view = disk_view("loopback-fio", by=AXES, only={"profile": ["randread", "randwrite"]})
    said = disk_finding(view, AXES)
    assert said.startswith("Deepest queue: Profile randread, block size 64k, I/O engine libaio, rate cap off, 123 I/Os")
    assert (
        "100% of the 12.7 ms fio saw" in said
        and "Shallowest: Profile randread, block size 4k, I/O engine psync" in said
    )
    assert disk_finding(view.head(1), AXES) == ""


def test_a_device_cannot_be_busier_than_its_queue() -> None:
    """60% busy with 0.3 requests in the queue on average: a device busy x of the time holds x or more."""
    from benchlib.stats.queueing import device_latency_split
    from benchlib.words.hostside import latency_split_notes

    sparse = {"cell": "capped", "app_latency_ms": 0.5, "runtime_ns": 10**9, "read_ios": 1000, "write_ios": 0}
    sparse |= {"read_ticks_ms": 300, "write_ticks_ms": 0, "in_queue_ms": 300, "instance": "vda"}
    sparse |= {"configured_depth": 1.0, "run_iops": 1000.0}
    rows = pl.DataFrame([sparse | {"util_pct": 60.0}, sparse | {"util_pct": 25.0}])
    both = latency_split_notes(device_latency_split(rows, ["cell"])).row(0, named=True)
    assert both["util_pct"] == 25.0 and both["note"].endswith("left out: 1 busier than its queue allows")
    alone = latency_split_notes(device_latency_split(rows.head(1), ["cell"])).row(0, named=True)
    assert alone["util_pct"] is None and alone["note"] == (
        "device busy unknown: fio's util says 60.0% (the median of 1 figure, one per host and run), but a device "
        "queue of 0.3 I/Os on average (aqu-sz) keeps it busy at most 30.0% of the time (the kernel counts sparse "
        "I/O in whole clock ticks)"
    )


def test_claim_rows_give_units_plain_tolerances_and_each_kind_of_note_once() -> None:
    import polars as pl

    from benchlib.tables import claim_rows

    table = pl.DataFrame(
        {
            "claim": ["1", "2", "3"],
            "stated": ["5.6x", "-65%", "rising"],
            "recomputed": ["5.66", "-65.1", "rises, then flat (steps +23.6%, +0.5%)"],
            "tolerance": ["as_stated: ±3%", "about: ±10%", "equals increasing"],
            "note": ["one run: the numbers describe that run", "one run: the numbers describe that run", "x"],
        }
    )
    rows, support = claim_rows(table)
    assert rows["recomputed"].to_list() == ["5.66x", "-65.1%", "rises, then flat (steps +23.6%, +0.5%)"]
    assert rows["tolerance"].to_list() == ["±3%", "±10%", "= increasing"] and "note" not in rows.columns
    assert support == "**Claims 1, 2**: one run: the numbers describe that run.\n\n**Claim 3**: x."
    # a claim that read no run (a CPU table's rows) says so, instead of a blank or a 0 in its runs
    cpu = table.with_columns(runs=pl.Series([1, 1, None]), note=pl.Series(["x", "x", ""]))
    assert claim_rows(cpu)[1].endswith(
        "**Claim 3**: they read rows of other figures (no IOPS, bandwidth or latency, such as a table of CPU use), "
        "not runs."
    )


def test_the_index_leaves_out_the_one_run_caveats_by_their_flag() -> None:
    """The pages print the one-run sentences as flagged outputs; the index drops them by flag, where the
    design says once that every configuration ran once, and keeps every other caveat and the headline."""
    from IPython.core.formatters import DisplayFormatter

    from benchlib.caveats import COMPARISON_ONCE, ONE_RUN, PAGE_CACHE, Caveat, flag_of
    from benchlib.report_html import _finding
    from benchlib.words.compare import design_caveat, design_summary

    one_run = pl.DataFrame({"family": [2, 2], "verdict": ["descriptive only", "descriptive only"]})
    assert design_summary(one_run) == "Verdicts: 2 descriptive only."
    caveat = design_caveat(one_run)
    assert caveat.flag == ONE_RUN and caveat.text == COMPARISON_ONCE
    assert design_caveat(one_run.with_columns(pl.lit("not testable at this n").alias("verdict"))) is None
    # as a notebook saves it: the flag in the output's metadata
    data, metadata = DisplayFormatter().format(caveat)
    output = {"output_type": "display_data", "data": data, "metadata": metadata}
    assert data["text/markdown"] == COMPARISON_ONCE and flag_of(output) == ONE_RUN
    assert flag_of({"output_type": "display_data", "data": {"text/markdown": "x"}, "metadata": {}}) is None
    other = Caveat(PAGE_CACHE, "These jobs ran buffered.")
    caveats = [(caveat.flag, caveat.text), (other.flag, other.text)]
    said = {ONE_RUN}  # the design says one run per configuration
    assert _finding("Verdicts: 2 descriptive only.", caveats, said=said) == (
        "Verdicts: 2 descriptive only.\n\nThese jobs ran buffered."
    )
    # a flag is said once: a later page's caveat of the same flag, in other words, is left out
    assert _finding("MiB/s per CPU.", [(PAGE_CACHE, "In 1 of 2 configurations the jobs ran buffered.")], said=said) == (
        "MiB/s per CPU."
    )
    assert COMPARISON_ONCE in _finding("Verdicts: 2 descriptive only.", caveats, said=set())
    # no comparison can reach α with 3 runs a side: the index's design statement says it, once for the report
    from benchlib.pipeline import front_matter
    from benchlib.store import open_study

    assert (
        front_matter(open_study("fio-sample"))["too_few"] and not front_matter(open_study("pvscsi-vs-lsi"))["too_few"]
    )


def test_a_long_paragraph_two_pages_share_is_said_in_full_on_the_first_alone() -> None:
    """Two comparison pages of one report opened with the same 135 words of method: the second links to it."""
    from benchlib.report_html import _markdown, _said_once

    method = "The unit is the run. " + "Each word of the method, said once. " * 10
    said: dict[str, str] = {}
    first = _said_once(f"## How\n\n{method}\n\nA short line, said on both.", said, "[Comparison](comparison.html)")
    assert method in first and said == {" ".join(method.split()): "[Comparison](comparison.html)"}
    again = _said_once(f"## How\n\n{method}\n\nA short line, said on both.", said, "[Per test](per-test.html)")
    linked = "The unit is the run (said in full on [Comparison](comparison.html))."
    assert again == f"## How\n\n{linked}\n\nA short line, said on both."
    assert "the run (said in full on <a href='comparison.html'>Comparison</a>).</p>" in _markdown(again)
    # a link to a page of the report alone: no scheme, no folder, no markup from the text
    for text in (
        "[x](javascript:alert(1).html)",
        "[x](../a.html)",
        "[x](http://a.b/c.html)",
        "[x](a.html' onclick='y)",
    ):
        assert "<a " not in _markdown(text)


def test_a_host_side_the_page_cache_answered_everywhere_says_so_first_and_once() -> None:
    """fio-sample ran buffered: fio saw less than the await at 4k and 64k. The page's finding says it, and
    no second sentence explains the missing chart (its first screen had only 'No esxtop capture')."""
    from benchlib.views import disk_view
    from benchlib.words.hostside import disk_finding, split_not_drawn

    view = disk_view("fio-sample", by=["block_size"])
    assert view["cached"].all() and view.height == 2
    said = disk_finding(view, ["block_size"])
    assert said.startswith("In every configuration fio saw less latency than the block layer's await")
    assert split_not_drawn(view) == ""
    shared = disk_view("loopback-fio", by=AXES, only={"profile": ["randread", "randwrite"]})
    assert disk_finding(shared, AXES).startswith("Deepest queue:") and not shared["cached"].all()


def test_the_runs_to_settle_section_leaves_capped_rows_out_and_says_one_reason_once() -> None:
    """Capped comparisons are left out and said so; a table of one reason and no plan is that reason, once."""
    from benchlib.tables import settle_section

    table = pl.DataFrame({"bs": ["4k", "64k"], "engine": ["libaio", "libaio"], "verdict": ["improved", "rate-capped"]})
    settle = pl.DataFrame(
        {"bs": ["4k", "64k"], "engine": ["libaio", "libaio"], "runs_baseline": [1, 1], "runs_now": [1, 1]}
    ).with_columns(
        spread_pct=None,
        change_pct=pl.lit(5.0),
        runs=pl.lit(None, pl.Int64),
        runs_high=pl.lit(None, pl.Int64),
        why=pl.lit("one run per side"),
    )
    said, rows = settle_section(settle, table, by=["bs"], factor="engine")
    assert rows is None and said[0].startswith("Left out: the 1 rate-capped comparisons")
    assert said[1] == "For the one comparison: one run per side."
    planned = settle.with_columns(runs=pl.Series([4, 441]), runs_high=pl.Series([9, 1234]))
    said, rows = settle_section(planned, table.with_columns(verdict=pl.lit("improved")), by=["bs"], factor="engine")
    # an estimate from a few runs' spread: two significant digits, not 441 as if counted
    assert said == [] and rows is not None and rows["runs"].to_list() == [4, 440]
    assert rows["runs_high"].to_list() == [9, 1200]
    # the change as the comparison table says it, to 2 decimals: not 3 significant digits of its own
    assert rows["change_pct"].to_list() == ["+5.00%", "+5.00%"]


def test_a_member_table_of_several_runs_says_its_rows_are_medians_column_by_column() -> None:
    """The written study's vm-b: 73,471 IOPS and 0.0249 ms, medians of two runs taken apart, give 1.83 I/Os at
    once from a job that held one: the caption says a row is no one run."""
    from benchlib.words.cell import member_caption

    two = pl.DataFrame(
        {"vm": ["vm-a", "vm-b"], "iops": [130_441.0, 73_471.0], "latency_ms": [0.01, 0.0249], "runs": [2, 2]}
    )
    # the member word is the last opened study's (VM, or host for fio servers on one machine)
    assert re.match(
        r"Each figure is the median over the (VM|host)'s runs \(of 2 runs, their mean\), column", member_caption(two)
    )
    assert "(of 2 runs" not in member_caption(two.with_columns(runs=pl.lit(3)))
    assert member_caption(two.with_columns(runs=pl.lit(1))) == ""


def test_two_kept_device_busy_figures_are_both_given_not_their_mean() -> None:
    """Loopback random write 64k libaio capped: one run's util left out, the others 0.6% and 31.4%. Their median,
    16.0, is their mean, a figure neither run had: the table gives both, and the note says why the median is —."""
    view = disk_view("loopback-fio", by=AXES, only={"profile": ["randwrite"]})
    row = view.filter(pl.col("block_size") == "64k", pl.col("ioengine") == "libaio", pl.col("rate_cap") == "on").row(
        0, named=True
    )
    assert row["util_pct"] is None and row["util_range"] == "0.6 and 31.4"
    assert row["note"].endswith("; the 2 kept are both given, not their median (of two, their mean)")
    three = view.filter(pl.col("block_size") == "4k", pl.col("ioengine") == "libaio", pl.col("rate_cap") == "off")
    assert three["util_pct"][0] is not None and " and " not in three["util_range"][0]


def test_the_notebooks_readme_lists_every_parameter_as_the_notebooks_declare_them() -> None:
    """notebooks/README.md's parameter tables are generated from the parameters cells: they never drift."""
    from benchlib.pipeline import parameters_markdown

    readme = (PROJECT_ROOT / "notebooks" / "README.md").read_text(encoding="utf-8")
    start = readme.index("-->", readme.index("<!-- parameters: generated")) + len("-->\n")
    end = readme.index("<!-- end of the generated parameters -->")
    assert readme[start:end] == parameters_markdown()


def test_pages_fit_themselves_to_each_bundled_study() -> None:
    """Nothing in benchlib.fit knows the bundled studies: what it chooses follows from their runs."""
    from benchlib import fit

    loopback = fit.shape("loopback-fio")
    assert loopback.members == 4 and loopback.swept == ("queue_depth", "write_pct")
    assert loopback.depth_sweep == {"profile": "iodepth-sweep"} and loopback.mix_sweep == {"profile": "rwmix-sweep"}
    interaction = fit.fitted("interaction", "loopback-fio", {})
    assert (interaction["x"], interaction["trace"]) == ("block_size", "ioengine")
    assert interaction["only"] == {"profile": ["randread", "randwrite"]}  # not the sweeps: they have one level
    published = fit.fitted("comparison", "pvscsi-vs-lsi", {})
    assert published["factor"] == "controller" and published["baseline"] == "LSI"
    assert published["only"]["sioc"] == ["off", "on"]  # rows of a table without SIOC are not a level of their own
    with pytest.raises(fit.PageLeftOut, match="no disk statistics"):
        fit.fitted("host-side", "pvscsi-vs-lsi", {})
    with pytest.raises(fit.PageLeftOut, match="every run has one member"):
        fit.fitted("fairness", "fio-sample", {})
    with pytest.raises(fit.PageLeftOut, match="no runs sweep"):
        fit.fitted("sweeps", "fio-sample", {})
    given = fit.fitted("comparison", "loopback-fio", {"factor": "ioengine", "baseline": "psync"})
    assert given["factor"] == "ioengine" and given["baseline"] == "psync"  # what a pipeline gives stands
    # block sizes compared: IOPS would set an I/O of 64k against one of 4k, so the page compares MiB/s;
    # IOPS where the sides share their block sizes (the engines, within each block size), or where asked for
    assert fit.fitted("comparison", "fio-sample", {})["value"] == "bandwidth_mib_s"
    assert interaction["value"] == "bandwidth_mib_s" and given["value"] == "iops"
    assert fit.fitted("comparison", "fio-sample", {"value": "iops"})["value"] == "iops"


def test_a_changed_claims_file_or_study_words_re_execute_the_pages(tmp_path: Path) -> None:
    """The claims page reads claims.toml, every page study.toml's words: a change to either is a new page,
    though the data did not change (the claims page once stayed UNSUPPORTED after a bound was declared)."""
    import shutil

    from benchlib.ingest import ingest_study
    from benchlib.pipeline import _fingerprint
    from benchlib.store import open_study

    folder = tmp_path / "raw" / "fio-sample"
    shutil.copytree(PROJECT_ROOT / "data" / "raw" / "fio-sample", folder)
    assert ingest_study(folder, tmp_path / "processed").ok
    study = open_study(folder, tmp_path / "processed")
    notebook = PROJECT_ROOT / "notebooks" / "claims.ipynb"
    before = _fingerprint(notebook, {"study": "fio-sample"}, study)
    assert _fingerprint(notebook, {"study": "fio-sample"}, study) == before  # nothing changed: skipped
    (folder / "claims.toml").write_text("[bounds]\ndevice_iops = 450000\n")
    declared = _fingerprint(notebook, {"study": "fio-sample"}, study)
    assert declared != before
    (folder / "study.toml").write_text((folder / "study.toml").read_text() + "\n# a comment\n")
    assert _fingerprint(notebook, {"study": "fio-sample"}, study) != declared
