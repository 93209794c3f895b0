"""Figures are tested on their Vega-Lite specs: data inline and sorted, annotations computed
by benchlib.stats, the same input giving the same spec."""

from __future__ import annotations

import json
import re

import polars as pl
import pytest

from benchlib import figures
from benchlib.claims import claims_frame
from benchlib.ingest import ingest_study
from benchlib.paths import RAW
from benchlib.stats import device_latency_means, jain_per_interval, medians, total_expr
from benchlib.store import load_study_tables
from benchlib.words.hostside import split_not_drawn


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> pl.DataFrame:
    report = ingest_study(RAW / "pvscsi-vs-lsi", tmp_path_factory.mktemp("processed"))
    return claims_frame(load_study_tables(report.processed))


@pytest.fixture(scope="module")
def loopback(tmp_path_factory: pytest.TempPathFactory):
    report = ingest_study(RAW / "loopback-fio", tmp_path_factory.mktemp("processed"))
    return load_study_tables(report.processed)


def _values(spec: dict) -> list[dict]:
    return spec["data"]["values"]


def test_per_vm_bars_annotate_jain_and_spread(published: pl.DataFrame) -> None:
    lsi_off = published.filter(
        pl.col("table") == "seqread_per_vm", pl.col("controller") == "LSI", pl.col("sioc") == "off"
    )
    chart = figures.per_vm_bars(lsi_off, value="bandwidth_mib_s", unit="MiB/s", title="LSI, SIOC off")
    spec = chart.to_dict()
    bars, written = spec["layer"]
    assert bars["mark"]["type"] == "bar" and written["mark"]["type"] == "text"
    assert spec["title"]["subtitle"] == ["Jain's index 0.6245; highest / lowest 5.66x (5 VMs)"]
    alone = figures.per_vm_bars(lsi_off.head(1), value="bandwidth_mib_s").to_dict()
    (said,) = alone["title"]["subtitle"]  # the member word is the last opened study's (VM, or host)
    assert re.fullmatch(r"one (VM|host): how evenly members shared needs two or more", said)  # not Jain 1.0000
    assert [v["vm"] for v in _values(spec)] == ["gus_fio_1", "gus_fio_2", "gus_fio_3", "gus_fio_4", "gus_fio_5"]
    assert [round(v["bandwidth_mib_s"]) for v in _values(spec)] == [401, 1148, 203, 326, 204]
    assert [v["value_label"] for v in _values(spec)] == ["401", "1,148", "203", "326", "204"]  # as the table shows them
    shared = figures.per_vm_bars(lsi_off, value="bandwidth_mib_s", y_max=4000).to_dict()
    assert shared["layer"][0]["encoding"]["y"]["scale"]["domain"] == [0, 4000]
    assert shared["title"]["subtitle"][1] == "the axis is shared by every cell page of this report"
    # bars under a quarter of the shared axis (1,148 of 5,000) are drawn again on their own axis beside it
    both = figures.per_vm_bars(lsi_off, value="bandwidth_mib_s", y_max=5000).to_dict()
    left, right = both["hconcat"]
    assert left["layer"][0]["encoding"]["y"]["scale"]["domain"] == [0, 5000]
    assert "scale" not in right["layer"][0]["encoding"]["y"]
    assert both["title"]["subtitle"][1].startswith("left: the axis every cell page of this report shares; right:")
    shuffled = lsi_off.sample(fraction=1.0, shuffle=True, seed=3)
    again = figures.per_vm_bars(shuffled, value="bandwidth_mib_s", unit="MiB/s", title="LSI, SIOC off").to_dict()
    assert json.dumps(again, sort_keys=True) == json.dumps(spec, sort_keys=True)  # row order does not matter
    lsi_on = published.filter(
        pl.col("table") == "seqread_per_vm", pl.col("controller") == "LSI", pl.col("sioc") == "on"
    )
    assert (
        "Jain's index 0.9793" in figures.per_vm_bars(lsi_on, value="bandwidth_mib_s").to_dict()["title"]["subtitle"][0]
    )


def test_per_vm_bars_show_each_run_where_a_member_ran_more_than_once() -> None:
    """Medians of 101,562 and 96,284 hide runs of 55,406 / 147,718 and 105,687 / 86,881: a dot per run shows
    them, and the subtitle says what the dots are; one run each draws no dots (the bars are the runs)."""
    medians = pl.DataFrame({"vm": ["vm-a", "vm-b"], "iops": [101_562.0, 96_284.0]})
    each = pl.DataFrame({"vm": ["vm-a", "vm-a", "vm-b", "vm-b"], "iops": [55_406.0, 147_718.0, 105_687.0, 86_881.0]})
    within = {"jain_median": 0.9, "max_min_median": 1.8, "runs_judged": 2}
    spec = figures.per_vm_bars(medians, value="iops", within=within, runs=each).to_dict()
    assert [layer["mark"]["type"] for layer in spec["layer"]] == ["bar", "text", "point"]
    assert sorted(v["iops"] for v in spec["layer"][2]["data"]["values"]) == [55_406, 86_881, 105_687, 147_718]
    assert spec["title"]["subtitle"][1] == "bars: each VM's median over the runs (of 2, their mean); dots: each run"
    once = figures.per_vm_bars(medians, value="iops", runs=medians).to_dict()
    assert [layer["mark"]["type"] for layer in once["layer"]] == ["bar", "text"]


def test_iodepth_sweep_marks_the_knee_on_real_runs(loopback) -> None:
    runs = loopback.runs.filter(
        pl.col("profile") == "iodepth-sweep", ~pl.col("is_aggregate"), pl.col("format") == "fio-json+"
    )
    per_run = loopback.results.join(runs, on="run_id").filter(pl.col("direction") == "read")
    totals = per_run.group_by("run_id", "iodepth").agg(pl.col("iops").sum(), pl.col("lat_mean_ns").mean())
    spec = figures.iodepth_sweep(medians(totals, ["iops", "lat_mean_ns"], by=["iodepth"])).to_dict()
    inner = spec["layer"][0]["layer"]
    assert inner[0]["encoding"]["x"]["scale"] == {"base": 2, "type": "log"}
    depths = [v["iodepth"] for v in _values(inner[0])]
    assert depths == [1, 2, 4, 8, 16, 32, 64, 128]
    knee = _values(inner[1])
    assert len(knee) == 1 and f"at {knee[0]['iodepth']:g}" in knee[0]["note"]
    assert 4 <= knee[0]["iodepth"] <= 32
    # the subtitle says what the dashed rule is (the page's text says the shape, once)
    assert spec["title"]["subtitle"] == [f"Dashed line: the knee ({knee[0]['iodepth']:g})"]
    assert spec["resolve"] == {"scale": {"y": "independent"}}


def test_rwmix_curve_and_efficiency(published: pl.DataFrame) -> None:
    mix = published.filter(pl.col("table") == "rwmix_sweep")
    mix = mix.group_by("vm", "write_pct", "run_id").agg(total_expr("iops"))
    spec = figures.rwmix_curve(medians(mix, ["iops"], by=["vm", "write_pct"])).to_dict()
    values = _values(spec)
    assert [(v["vm"], v["write_pct"]) for v in values][:3] == [
        ("gus_fio_3", 0.0),
        ("gus_fio_3", 50.0),
        ("gus_fio_3", 100.0),
    ]
    assert spec["encoding"]["x"]["scale"]["domain"] == [0, 100]
    cpu = published.filter(pl.col("table") == "cpu").with_columns(pl.col("iops_per_cpu_pct_reported").cast(pl.Float64))
    spec = figures.cpu_efficiency(cpu, test="test", value="iops_per_cpu_pct_reported").to_dict()  # the study's own
    assert spec["encoding"]["column"]["sort"] == ["randread", "randwrite", "seqread", "seqwrite"]
    assert len(_values(spec)) == 8


def test_time_series_shades_the_window(loopback) -> None:
    runs = loopback.runs.filter(
        pl.col("format") == "fio-log",
        pl.col("profile") == "randread",
        pl.col("block_size") == "4k",
        pl.col("ioengine") == "libaio",
        pl.col("rate_cap") == "off",
        pl.col("repetition") == 1,
    )
    series = loopback.intervals.join(runs.select("run_id", "host"), on="run_id").filter(pl.col("metric") == "iops")
    spec = figures.time_series(series, window_s=(1.0, 3.0), title="IOPS per second").to_dict()
    band, line = spec["layer"]
    assert _values(band) == [{"start": 1.0, "end": 3.0}] and band["mark"]["type"] == "rect"
    hosts = sorted({v["host"] for v in _values(line)})
    assert hosts == ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]
    assert spec["config"]["font"] == figures.FONT
    assert spec["title"] == "IOPS per second" and all(v["value"] is not None for v in _values(line))


def test_a_time_series_breaks_its_line_where_nothing_was_logged() -> None:
    """A 250 ms log that stops at 0.5 s and resumes at 2.75 s (a write held 2.3 s): no line drawn across the gap."""
    held = [0.25, 0.5, 2.75, 3.0]
    steady = [0.25, 0.5, 0.75, 1.0]
    frame = pl.DataFrame(
        {"host": ["a"] * 4 + ["b"] * 4, "time_ns": [int(t * 1e9) for t in held + steady], "value": [5.0, 6, 4, 5] * 2}
    )
    spec = figures.time_series(frame, title="IOPS").to_dict()
    (line,) = spec["layer"]
    values = spec["data"]["values"]
    assert [(v["host"], v["time_s"]) for v in values if v["value"] is None] == [("a", 0.75)]
    assert line["mark"]["invalid"] == "break-paths-show-domains"
    assert spec["title"]["subtitle"] == [
        "A break in a line: no interval logged there (no I/O completed, or none written)",
        "A line that ends before the others: its host logged no interval after it",  # b's ends at 1.0 s, a's 3.0 s
    ]


def _randread(loopback, **levels) -> pl.DataFrame:
    runs = loopback.runs.filter(
        pl.col("format") == "fio-json+",
        ~pl.col("is_aggregate"),
        pl.col("profile") == "randread",
        *[pl.col(k) == v for k, v in levels.items()],
    )
    return loopback.results.join(runs, on="run_id").filter(pl.col("direction") == "read")


def test_comparison_shows_interval_and_verdict(loopback) -> None:
    from benchlib.stats.compare import comparison_table

    # one value per run (the four hosts of one fio client/server invocation added), never per host
    per_run = _randread(loopback, rate_cap="off").group_by("sha256", "block_size", "ioengine").agg(pl.col("iops").sum())
    table = comparison_table(per_run, "iops", factor="ioengine", baseline="psync", by=["block_size"])
    spec = figures.comparison(table, label=["block_size", "ioengine"]).to_dict()
    zero, rule, point, text = spec["layer"]
    assert [v["comparison"] for v in _values(point)] == ["4k / libaio", "64k / libaio"]
    four_k = _values(point)[0]
    assert four_k["change_pct"] > 50  # libaio at depth 32 against psync
    assert four_k["verdict"] == "not testable at this n"  # 3 runs each: no p below 0.1 is possible
    assert _values(rule) == []  # and so no interval is drawn, and the axis does not promise one
    assert "no interval" in point["encoding"]["x"]["title"] and "95%" not in point["encoding"]["x"]["title"]
    assert _values(text) == []  # one verdict for all: the legend says it, not a label on every row
    # what a row names is the subtitle's to say: an axis title beside labels of any length ran into them
    assert point["encoding"]["y"]["title"] is None and spec["title"]["subtitle"] == "each row: block size / I/O engine"
    assert text["encoding"]["text"]["field"] == "label"

    many = per_run.vstack(per_run.with_columns(pl.col("iops") * 1.001)).vstack(
        per_run.with_columns(pl.col("iops") * 0.999)
    )
    table = comparison_table(many, "iops", factor="ioengine", baseline="psync", by=["block_size"])
    drawn = figures.comparison(table, label=["block_size", "ioengine"]).to_dict()["layer"][1]
    assert len(_values(drawn)) == 2 and all(v["low_pct"] <= v["high_pct"] for v in _values(drawn))
    assert "with its 95% interval" in drawn["encoding"]["x"]["title"]
    assert drawn["encoding"]["y"]["axis"]["labelLimit"] == 0  # whole names, never cut with an ellipsis

    # each run behind the change: 3 of libaio and the 3 of psync its row compares against, per block size
    sides = {"factor": "ioengine", "baseline": "psync"}
    spec = figures.comparison(table, label=["block_size", "ioengine"], runs=per_run, value="iops", **sides).to_dict()
    dots = _values(spec["layer"][1])
    assert len(dots) == 12 and {d["side"] for d in dots} == {"run of libaio", "baseline run (psync)"}
    for size in ("4k", "64k"):
        base = per_run.filter(pl.col("block_size") == size, pl.col("ioengine") == "psync")["iops"]
        new = per_run.filter(pl.col("block_size") == size, pl.col("ioengine") == "libaio")["iops"]
        drawn = sorted(d["pct"] for d in dots if d["comparison"] == f"{size} / libaio" and not d["baseline"])
        assert drawn == pytest.approx(sorted((new / base.median() - 1) * 100))
    assert "grey: each run against the baseline's median" in spec["title"]["subtitle"]
    furthest = {c: max(d["pct"] for d in dots if d["comparison"] == c) for c in ("4k / libaio", "64k / libaio")}
    labels = {v["comparison"]: v["label_at"] for v in _values(spec["layer"][4])}  # past the row's runs, not over them
    assert all(labels[c] >= furthest[c] for c in labels) and labels
    shape = spec["layer"][1]["encoding"]["shape"]["scale"]  # by role, whichever name sorts first
    assert shape == {"domain": ["baseline run (psync)", "run of libaio"], "range": ["circle", "square"]}
    one = table.with_columns(pl.lit(1).alias("runs"), pl.lit(1).alias("runs_baseline"))  # each run is the change
    drawn_once = figures.comparison(one, label=["block_size", "ioengine"], runs=per_run, value="iops", **sides)
    assert len(drawn_once.to_dict()["layer"]) == 4  # no runs layer: the one run a side is the change drawn
    # a verdict has one colour on every page: the scale names them all, the legend the ones drawn
    from benchlib.stats.compare import VERDICTS

    colour = spec["layer"][2]["encoding"]["color"]
    assert tuple(colour["scale"]["domain"]) == VERDICTS and colour["legend"]["values"] == [
        v for v in VERDICTS if v in set(table["verdict"])
    ]
    assert len(set(colour["scale"]["range"])) == len(VERDICTS)


def test_latency_exceedance_from_pooled_bins(loopback) -> None:
    from benchlib.stats.aggregate import pooled_percentiles

    runs = _randread(loopback, rate_cap="off", ioengine="libaio").select("run_id", "block_size").unique()
    bins = loopback.latency_bins.join(runs, on="run_id")
    pooled = pooled_percentiles(bins, [50, 90, 99, 99.9], by=["block_size"])
    spec = figures.latency_exceedance(pooled, series="block_size").to_dict()
    values = _values(spec)
    assert [(v["block_size"], v["exceeding_pct"]) for v in values][:4] == [
        ("4k", 50.0),
        ("4k", 10.0),
        ("4k", 1.0),
        ("4k", 0.1),
    ]
    four_k = [v["latency_us"] for v in values if v["block_size"] == "4k"]
    assert four_k == sorted(four_k)
    assert spec["encoding"]["y"]["scale"]["type"] == "log"


def test_esxtop_stack_adds_up_to_gavg() -> None:
    from benchlib.sources import read
    from benchlib.sources.esxtop import device_queue_view
    from tests.conftest import corpus_dir

    queue = device_queue_view(read(corpus_dir("esxtop") / "esxtopd__small-esxtop-data.csv").host_counters)
    spec = figures.esxtop_latency_stack(device_latency_means(queue)).to_dict()
    parts = _values(spec)
    by_where: dict[str, float] = {}
    for row in parts:  # a label is host|device|commands/s: the latency of a few commands says so
        host, device, rate = row["label"].split("|")
        assert rate.endswith(" commands/s")
        assert "__" not in device and device.replace("_", "") == row["device"].replace("_", "")  # padding cut
        by_where[f"{host}|{row['device']}"] = by_where.get(f"{host}|{row['device']}", 0.0) + row["ms"]
    busy = queue.filter(pl.col("sample") > 0, pl.col("CMDS_per_s") > 0)
    gavg = busy.group_by("host", "device").agg(
        ((pl.col("GAVG_ms") * pl.col("CMDS_per_s")).sum() / pl.col("CMDS_per_s").sum()).alias("mean"),
        pl.col("CMDS_per_s").mean().alias("rate"),
    )
    # devices of under one command/s beside busier ones are left out (their few commands would set the axis)
    idle = gavg.filter(pl.col("rate") < figures.FEW_COMMANDS)
    drawn = gavg.filter(pl.col("rate") >= figures.FEW_COMMANDS)
    assert idle.height and drawn.height and set(by_where) == {f"{h}|{d}" for h, d, _, _ in drawn.iter_rows()}
    for host, device, mean, _ in drawn.iter_rows():
        assert by_where[f"{host}|{device}"] == pytest.approx(mean, abs=0.02)
    assert spec["title"]["subtitle"].startswith(f"Left out: {idle.height} bars of devices under 1 command/s")
    assert any("__" in d for _, d, _, _ in gavg.iter_rows())  # the capture has padded t10.ATA names
    guest = {w: 1.0 for w in by_where}
    with_guest = figures.esxtop_latency_stack(device_latency_means(queue), guest_ms=guest).to_dict()
    assert with_guest["layer"][1]["mark"]["type"] == "tick"
    ticks = with_guest["layer"][1]["data"]["values"]
    assert len(ticks) == len(by_where)  # every device's tick found its bar, long names too
    assert spec["encoding"]["y"]["axis"]["labelLimit"] == 0  # device names not cut: they end in the serial
    # where every device is that idle, all are drawn, faded
    only_idle = device_latency_means(queue).filter(pl.col("commands") < figures.FEW_COMMANDS)
    faded = figures.esxtop_latency_stack(only_idle).to_dict()
    assert faded["title"]["subtitle"].startswith("Faded: every device had under 1 command/s")
    assert faded["encoding"]["opacity"]["condition"]["test"] == f"datum.commands < {figures.FEW_COMMANDS}"


def test_fairness_over_time_is_jain_per_interval(loopback) -> None:
    runs = loopback.runs.filter(
        pl.col("format") == "fio-log",
        pl.col("profile") == "randwrite",
        pl.col("block_size") == "64k",
        pl.col("ioengine") == "libaio",
        pl.col("rate_cap") == "off",
        pl.col("repetition") == 1,
    )
    iops = loopback.intervals.join(runs.select("run_id", "host"), on="run_id").filter(pl.col("metric") == "iops")
    per_interval = jain_per_interval(iops, member="host")
    import vl_convert as vlc

    for jain in (per_interval, per_interval.with_columns(pl.col("jain") * 0.9)):  # as measured, and 10% less fair
        spec = figures.fairness_over_time(jain).to_dict()
        *line, chart = spec["layer"]
        values = _values(chart if "data" in chart else spec)  # one layer: Altair lifts its data to the top
        low = min(v["jain"] for v in values)
        assert all(0.2 <= v["jain"] <= 1.0 for v in values) and all(v["members"] == 4 for v in values)
        assert [v["time_s"] for v in values] == sorted(v["time_s"] for v in values)
        # the axis starts just below the lowest interval or the 0.9 line: 0.98-1.0 is no flat line on a 0-1 axis;
        # with every interval at 0.95 or more it zooms to them, the 0.9 line off the axis and said so
        start = chart["encoding"]["y"]["scale"]["domain"][0]
        (y,) = [s for s in vlc.vegalite_to_vega(spec)["scales"] if s["name"] == "y"]  # as Vega draws it
        assert y["domain"] == [start, 1] and not y.get("zero")  # the rule's layer once pulled 0 back in
        if low >= 0.95:
            assert low - 0.015 <= start < low and not line and "is off the axis" in spec["title"]["subtitle"][0]
        else:
            assert start <= min(0.9, low) - 0.02 + 1e-9 and line[0]["mark"]["type"] == "rule"
            assert spec["title"]["subtitle"] == ["dashed line: 0.9 (below it, unfair)"]


def test_fairness_summary_writes_jain_and_spread(published: pl.DataFrame) -> None:
    from benchlib.stats import fairness_over_runs

    seqread = published.filter((pl.col("test") == "seqread") & (pl.col("table") == "seqread_per_vm"))
    seqread = seqread.with_columns(pl.lit("the table").alias("run"))  # a published per-VM table is one run
    table = fairness_over_runs(seqread, "bandwidth_mib_s", member="vm", run="run", by=["controller", "sioc"])
    spec = figures.fairness_summary(table, by=["controller", "sioc"]).to_dict()
    span, line, worst, median, text = spec["layer"]
    rows = {r["configuration"]: r for r in median["data"]["values"]}
    assert round(rows["LSI / off"]["jain_median"], 4) == 0.6245 and rows["LSI / off"]["note"] == "1 run, max/min 5.66x"
    assert text["encoding"]["text"]["field"] == "note" and worst["encoding"]["x"]["field"] == "jain_worst"
    # the axis starts below the worst run (0.6245), not at 0 where every index near 1 looks the same
    assert (
        median["encoding"]["x"]["scale"]["domain"] == [0.6, 1] and "starts at 0.6" in median["encoding"]["x"]["title"]
    )
    assert line["data"]["values"] == [{"fair": 0.9}]
    assert spec == figures.fairness_summary(table, by=["controller", "sioc"]).to_dict()


def test_latency_split_stacks_to_the_applications_latency() -> None:
    frame = pl.DataFrame({"cell": ["a", "b"], "device_await_ms": [0.9, 0.05], "above_device_ms": [0.3, 0.02]})
    spec = figures.latency_split(frame, where=["cell"]).to_dict()
    bars, totals = spec["layer"]
    values = bars["data"]["values"]
    total = {c: sum(v["ms"] for v in values if v["configuration"] == c) for c in ("a", "b")}
    assert total == pytest.approx({"a": 1.2, "b": 0.07})
    # shares of each bar's own total: 0.07 ms split 5:2 is as readable as 1.2 ms split 3:1
    share = {(v["configuration"], v["part"]): v["share_pct"] for v in values}
    assert share[("b", "in the block layer and the device (await, its queue included)")] == pytest.approx(500 / 7)
    assert bars["encoding"]["x"]["stack"] == "zero" and bars["encoding"]["x"]["scale"]["domain"] == [0, 100]
    labels = {v["configuration"]: v["label"] for v in totals["data"]["values"]}
    assert labels == {"a": "1.20 ms", "b": "0.0700 ms"}
    # fio saw 12.745 ms against an await of 12.8075 (noise): the bar is all await, the figure written fio's
    noisy = pl.DataFrame(
        {"cell": ["c"], "device_await_ms": [12.8075], "above_device_ms": [0.0], "app_latency_ms": [12.745]}
    )
    written = figures.latency_split(noisy, where=["cell"]).to_dict()["layer"][1]["data"]["values"]
    assert written == [{"configuration": "c", "label": "12.7 ms"}]
    # the page cache answered everywhere (fio-sample): no frame of empty axes, the page says why instead
    cached = pl.DataFrame({"cell": ["4k", "64k"], "device_await_ms": [0.04, 0.18], "above_device_ms": [None, None]})
    assert figures.latency_split(cached, where=["cell"]) is None
    assert "a part of it is unknown" in split_not_drawn(cached) and split_not_drawn(cached.clear()) == ""


def test_two_charts_combine(published: pl.DataFrame) -> None:
    """The theme is registered once, not baked into each chart: builder outputs concatenate and layer."""
    import altair as alt

    seqread = published.filter(pl.col("table") == "seqread_per_vm", pl.col("sioc") == "off")
    lsi, pvscsi = (
        figures.per_vm_bars(seqread.filter(pl.col("controller") == c), value="bandwidth_mib_s", title=c)
        for c in ("LSI", "PVSCSI")
    )
    side_by_side = alt.hconcat(lsi, pvscsi).to_dict()
    assert [part["title"]["text"] for part in side_by_side["hconcat"]] == ["LSI", "PVSCSI"]
    assert side_by_side["config"]["font"] == figures.FONT and "config" not in side_by_side["hconcat"][0]
    stacked = (lsi & pvscsi).to_dict()
    assert len(stacked["vconcat"]) == 2


def test_a_faceted_heatmap_has_one_legend_for_all_its_panels() -> None:
    """Compiled by Vega-Lite: the shared colour scale's legend is drawn once, beside the panels, not in each.

    The cells' text colour (white on dark squares) was a second colour scale; Vega-Lite could not merge it with
    the squares' and drew the legend inside every facet cell.
    """
    import vl_convert as vlc

    grid = pl.DataFrame(
        {
            "profile": ["randread"] * 4 + ["randwrite"] * 4,
            "block_size": ["4k", "64k"] * 4,
            "ioengine": ["libaio", "libaio", "psync", "psync"] * 2,
            "iops": [103_748.0, 10_033.0, 44_646.0, 9_982.0, 86_650.0, 11_049.0, 30_462.0, 10_128.0],
            "runs": [3] * 8,
        }
    )
    vega = vlc.vegalite_to_vega(
        figures.heatmap(grid, value="iops", x="block_size", y="ioengine", by=["profile"]).to_dict()
    )
    nested = []

    def walk(node: object, top: bool) -> None:
        if isinstance(node, dict):
            if not top and node.get("legends"):
                nested.append(node.get("name"))
            for child in node.values():
                walk(child, False)
        elif isinstance(node, list):
            for child in node:
                walk(child, False)

    walk(vega, True)
    assert len(vega.get("legends", [])) == 1 and nested == []


def test_a_studys_level_words_name_its_levels_on_charts_and_in_tables() -> None:
    """study.toml's [levels] give a level words: the chart's labels and a table's cells say them, not the data's
    short name; a level without words keeps its name; the words are reset per study."""
    from benchlib.study import load_study
    from benchlib.tables import level, levels_words, name_levels, show

    words = load_study(RAW / "pvscsi-vs-lsi").level_words
    assert words["test"]["randwrite_64k_8jobs"] == "random write 64k with 8 jobs"
    table = pl.DataFrame(
        {"test": ["randwrite_64k_8jobs", "seqread"], "controller": ["PVSCSI", "PVSCSI"], "sioc": ["off", "off"]}
    ).with_columns(
        change_pct=pl.Series([-67.9, 4.96]), ratio_low=None, ratio_high=None, delta=pl.lit("~"), verdict=pl.lit("x")
    )
    try:
        name_levels(words)
        drawn = json.dumps(figures.comparison(table, label=["test", "sioc", "controller"]).to_dict())
        assert "random write 64k with 8 jobs / off / PVSCSI" in drawn and "randwrite_64k_8jobs" not in drawn
        shown = show(table.select("test", "controller"))._repr_html_()
        assert ">sequential read 128k<" in shown and "seqread" not in shown
        assert (
            levels_words({"test": "iodepth_sweep", "sioc": "on"}) == "Test queue depth sweep (random read 4k), SIOC on"
        )
        assert level("table", "seqread_per_vm") == "sequential read 128k per VM"  # a published table's name
    finally:
        name_levels({})
    assert "randwrite_64k_8jobs / off" in json.dumps(figures.comparison(table, label=["test", "sioc"]).to_dict())
    # fio's I/O patterns are said in words in every study, unless a study words them its own way
    patterns = pl.DataFrame({"rw": ["randread", "write", "randrw"]})
    shown = show(patterns)._repr_html_()
    assert all(f">{w}<" in shown for w in ("random read", "sequential write", "random read/write mix")), shown
    assert ">randread<" not in shown
    try:
        name_levels({"rw": {"randread": "4k random reads"}})
        assert level("rw", "randread") == "4k random reads" and level("rw", "randwrite") == "random write"
    finally:
        name_levels({})


def test_an_interaction_says_one_line_hides_another_only_where_one_does() -> None:
    """Two traces within 2% at every point draw as one line: the subtitle says so there, and not elsewhere."""
    apart = pl.DataFrame(
        {
            "bs": ["4k", "64k", "4k", "64k"],
            "engine": ["psync", "psync", "libaio", "libaio"],
            "iops": [1e4, 9e3, 4e4, 1e4],
        }
    ).with_columns(pl.lit(3).alias("runs"))
    spec = figures.interaction(apart, value="iops", x="bs", trace="engine").to_dict()
    assert "hiding another" not in spec["title"]["subtitle"][0]
    # drawn on the log scale the test uses: parallel lines there are equal ratios, no interaction
    # not rounded out to whole decades, where 1,723-2,283 filled a tenth of a 1,000-10,000 axis
    assert spec["encoding"]["y"]["scale"] == {"type": "log", "nice": False, "padding": 10}
    assert spec["encoding"]["y"]["title"].endswith("(log scale)")
    with_zero = apart.with_columns(pl.Series("iops", [0.0, 9e3, 4e4, 1e4]))
    assert (
        "scale" not in figures.interaction(with_zero, value="iops", x="bs", trace="engine").to_dict()["encoding"]["y"]
    )
    capped = apart.with_columns(pl.lit(2000.0).alias("iops"))  # a cap: every total the same
    said = figures.interaction(capped, value="iops", x="bs", trace="engine").to_dict()["title"]["subtitle"][0]
    assert said.endswith("; one line hiding another: the same totals")
    # the runs behind each median: the 3 of each point drawn, a crossing told from their spread
    runs = pl.concat([apart.with_columns(pl.col("iops") * f) for f in (0.9, 1.0, 1.1)]).drop("runs")
    drawn = figures.interaction(apart, value="iops", x="bs", trace="engine", runs=runs).to_dict()
    rows = drawn["data"]["values"]
    assert sum(r["_kind"] == "run" for r in rows) == 12 and sum(r["_kind"] == "median" for r in rows) == 4
    assert [layer["mark"]["type"] for layer in drawn["layer"]] == ["point", "line"]
    assert drawn["title"]["subtitle"][0].endswith("; small open points: each run")


def test_the_exceedance_chart_says_where_its_curves_stop() -> None:
    """The curves end where fewer than 10 I/Os lie beyond: a maximum quoted on the page is past their end."""
    from benchlib.views import latency_exceedance

    curve = latency_exceedance(
        "loopback-fio", by=["profile"], only={"profile": ["randread"], "block_size": ["4k"]}, member="vm"
    )
    spec = figures.exceedance_curve(curve, series="vm").to_dict()
    assert spec["title"]["subtitle"] == [
        "each curve stops where fewer than 10 I/Os lie beyond it; the slowest I/Os are past its end"
    ]
    assert min(v["slower_pct"] for v in spec["data"]["values"]) > 0


def test_a_heatmap_spanning_a_decade_shades_on_a_log_scale() -> None:
    """Capped 2,000 beside uncapped 10,000-100,000: from zero, everything under 20,000 is one pale blue."""
    grid = pl.DataFrame(
        {
            "block_size": ["4k", "64k", "4k", "64k"],
            "ioengine": ["libaio", "libaio", "psync", "psync"],
            "iops": [103_748.0, 10_033.0, 1_999.0, 2_000.0],
            "runs": [3] * 4,
        }
    )
    spec = figures.heatmap(grid, value="iops", x="block_size", y="ioengine").to_dict()
    squares = spec["layer"][0]
    assert squares["encoding"]["color"]["scale"] == {"scheme": "blues", "type": "log"}
    assert squares["encoding"]["color"]["title"] == "IOPS (log scale)"
    # white text past the middle of the log range (about 14,400)
    assert [r["dark"] for r in spec["data"]["values"]] == [True, False, False, False]
    within = grid.with_columns(iops=pl.Series([4_000.0, 2_000.0, 3_000.0, 1_000.0]))
    linear = figures.heatmap(within, value="iops", x="block_size", y="ioengine").to_dict()
    assert linear["layer"][0]["encoding"]["color"]["scale"] == {"scheme": "blues", "zero": True}
    assert [r["dark"] for r in linear["data"]["values"]] == [True, False, True, False]


def test_knees_several_hosts_share_are_one_grey_rule() -> None:
    """Loopback's per-host sweep: three hosts' knees at 16 drew three rules on one another in the last one's colour;
    now one grey rule there, named in the subtitle, and 127.0.0.4's own at 32 in its colour."""
    from benchlib.views import sweep

    per_host = sweep("loopback-fio", "iodepth-sweep", member="vm")
    spec = figures.iodepth_sweep(per_host, series="vm").to_dict()
    inner = spec["layer"][0]["layer"]
    alone, shared = inner[1], inner[2]
    assert [v["vm"] for v in _values(alone)] == ["127.0.0.4"] and alone["encoding"]["color"]["field"] == "vm"
    assert _values(shared) == [{"iodepth": 16}] and shared["mark"]["color"] == "#555555"
    assert spec["title"]["subtitle"] == [
        "Dashed lines, each VM's knee: 16 (127.0.0.2, 127.0.0.3, 127.0.0.5; grey); 32 (127.0.0.4)"
    ]


def test_an_interaction_of_single_runs_says_no_test_can_read_its_crossing() -> None:
    """The write-up's 2x2 of single runs draws a crossing on a 1,700-2,300 axis: the chart says what it cannot show."""
    grid = pl.DataFrame(
        {
            "controller": ["LSI", "LSI", "PVSCSI", "PVSCSI"],
            "sioc": ["off", "on", "off", "on"],
            "bandwidth_mib_s": [2282.0, 1723.0, 1794.0, 2283.0],
            "runs": [1] * 4,
        }
    )
    spec = figures.interaction(grid, value="bandwidth_mib_s", x="sioc", trace="controller").to_dict()
    assert spec["title"]["subtitle"] == [
        "each point: the one run's total; one run each: no test can tell lines that cross from run-to-run noise"
    ]
    three = figures.interaction(
        grid.with_columns(runs=pl.lit(3)), value="bandwidth_mib_s", x="sioc", trace="controller"
    )
    assert "no test" not in three.to_dict()["title"]["subtitle"][0]


def test_sixty_four_members_get_a_readable_row_each_in_the_order_a_reader_counts() -> None:
    """Past 16 members the bars lie down, one 16-pixel row each, their names in order (127.0.1.2 before
    127.0.1.10), each value at its bar's end; the table's rows come in the same order."""
    from benchlib.tables import natural_sort

    hosts = [f"127.0.1.{i}" for i in range(1, 65)]
    frame = pl.DataFrame({"vm": hosts[::-1], "iops": [1000.0 + i for i in range(64)]})
    spec = figures.per_vm_bars(frame, value="iops").to_dict()
    bars = spec["layer"][0]
    assert bars["encoding"]["y"]["field"] == "vm" and bars["encoding"]["y"]["sort"] == hosts
    assert bars["encoding"]["x"]["field"] == "iops" and (bars.get("height") or spec["height"]) == 16 * 64
    assert spec["layer"][1]["mark"]["type"] == "text"  # one run each: the values are written
    assert natural_sort(frame, "vm")["vm"].to_list() == hosts
    few = figures.per_vm_bars(frame.head(4), value="iops").to_dict()
    assert few["layer"][0]["encoding"]["x"]["field"] == "vm"  # four members keep their standing bars


def test_an_exceedance_of_more_members_than_colours_names_the_two_tails_and_greys_the_rest() -> None:
    """64 hosts: a colour each would repeat, and a legend of 64 says nothing; every curve is drawn in grey
    and the slowest and fastest at 1% in colour, named. Fewer: a colour each, in a reader's order."""
    hosts = [f"127.0.0.{i}" for i in range(2, 66)]
    latencies = [0.1, 0.5, 1.0, 5.0]
    curve = pl.DataFrame(
        {
            "vm": [h for h in hosts for _ in latencies],
            "latency_ms": [lat * (1 + i / 100) for i, _ in enumerate(hosts) for lat in latencies],
            "slower": [s for _ in hosts for s in (0.5, 0.05, 0.005, 0.0005)],
        }
    )
    spec = figures.exceedance_curve(curve, series="vm").to_dict()
    grey, named = spec["layer"]
    assert grey["mark"]["color"] == "#b8b8b8" and "color" not in grey["encoding"]
    assert sorted({row["_named"] for row in named["data"]["values"]}) == [
        "fastest at 1%: 127.0.0.2",
        "slowest at 1%: 127.0.0.65",
    ]
    assert spec["title"]["subtitle"][0].startswith("64 ")
    few = figures.exceedance_curve(
        curve.filter(pl.col("vm").is_in(["127.0.0.10", "127.0.0.9", "127.0.0.2"])), series="vm"
    )
    color = few.to_dict()["encoding"]["color"]
    assert color["sort"] == ["127.0.0.2", "127.0.0.9", "127.0.0.10"] and "legend" not in color  # not text order


def test_a_synchronous_engine_swept_over_iodepth_has_no_knee() -> None:
    """psync ignores iodepth: its 'sweep' kept one I/O in flight, so no knee is said or drawn, while the
    asynchronous engine beside it keeps its own."""
    from benchlib.views import sweep_shapes

    depths = [1, 4, 16]
    frame = pl.DataFrame(
        {
            "engine": ["psync"] * 3 + ["libaio"] * 3,
            "iodepth": depths * 2,
            "iops": [5000.0, 2900, 1400, 8000, 30000, 31000],
            "lat_mean_ns": [2e5, 3e5, 7e5, 1.2e5, 1.3e5, 5e5],
            "configured": [1, 1, 1, 1, 4, 16],
        }
    )
    said = dict(sweep_shapes(frame, member="engine").select("engine", "note").iter_rows())
    assert said["psync"].startswith("not a sweep of concurrency: 1 I/O in flight at every depth set")
    assert not said["libaio"].startswith("not a sweep")
    spec = figures.iodepth_sweep(frame, series="engine").to_dict()

    def rows(node: object) -> list[dict]:
        if isinstance(node, dict):
            return [node] if "note" in node and "engine" in node else [r for v in node.values() for r in rows(v)]
        return [r for v in node for r in rows(v)] if isinstance(node, list) else []

    assert {knee["engine"] for knee in rows(spec)} == {"libaio"}  # only the engine that swept has a knee
    assert "_held" not in json.dumps(spec)


_SHOWN = """
import json, sys
from IPython.core.interactiveshell import InteractiveShell
import altair as alt
import polars as pl
from benchlib import figures

shell = InteractiveShell.instance()
figures.use_in_notebooks()
chart = figures.per_vm_bars(pl.DataFrame({"vm": ["a", "b"], "iops": [1.0, 2.0]}), value="iops")
shown, _ = shell.display_formatter.format(chart)
try:
    alt.Chart(pl.DataFrame({"x": [1]})).mark_bar(size="wide")  # not a number: the schema says so as it is built
    checked = False
except Exception:
    checked = True
print(json.dumps({"mimes": sorted(shown), "spec": shown[figures.VEGALITE_MIME], "checked": checked}))
"""


@pytest.mark.parametrize("kernel", ["", "1"])
def test_a_report_kernel_shows_charts_without_a_png_or_a_schema_check(kernel: str) -> None:
    """In benchlib report's kernels (BENCHLIB_REPORT_KERNEL=1) a chart is shown as the same Vega-Lite spec with no
    PNG (the pages draw the exported SVG) and nothing is checked against the schema as it is built; in a
    notebook otherwise, the PNG is there and altair checks every chart it builds. Each in a Python of its own."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != figures.REPORT_KERNEL} | (
        {figures.REPORT_KERNEL: kernel} if kernel else {}
    )
    done = subprocess.run([sys.executable, "-c", _SHOWN], capture_output=True, text=True, env=env, check=True)
    shown = json.loads(done.stdout.strip().splitlines()[-1])
    assert "vega-lite" in shown["spec"]["$schema"] and '"bar"' in json.dumps(shown["spec"])  # the chart, whole
    assert ("image/png" in shown["mimes"]) is (not kernel) and shown["checked"] is (not kernel)
