"""The results table: one row per configuration, each figure the median over the configuration's runs of
what the pages compute per run; on the index first, and beside it as CSV and Markdown."""

from __future__ import annotations

import csv
import io
import re

import polars as pl
import pytest

from benchlib import views
from benchlib.fit import shape
from benchlib.results import configuration_results
from benchlib.store import open_study


def _row(table: pl.DataFrame, **levels: str) -> dict:
    (row,) = table.filter(*(pl.col(k) == v for k, v in levels.items())).to_dicts()
    return row


def test_each_configuration_is_the_median_of_its_runs_as_the_pages_read_them() -> None:
    opened = open_study("loopback-fio")
    factors = list(shape(opened).varied)
    table = configuration_results(opened, factors)
    assert table.height == 29 and set(table["runs"]) == {3}  # every configuration, three runs each
    assert set(table["members"]) == {4}  # four fio servers in every run
    cell = {"profile": "randread", "block_size": "4k", "ioengine": "libaio", "rate_cap": "off"}
    only = {k: [v] for k, v in cell.items()}
    row = _row(table, **cell)
    runs = views.run_totals(opened, "iops", factors, only=only)["iops"]
    assert row["iops"] == pytest.approx(runs.median()) and row["iops_max_over_min"] == pytest.approx(
        runs.max() / runs.min()
    )
    latency = views.run_totals(opened, "lat_mean_ns", factors, only=only)["lat_mean_ns"]
    assert row["lat_mean_ms"] == pytest.approx(latency.median() / 1e6)
    tails = views.tail_latency(opened, by=factors, only=only)
    assert row["p99_ms"] == pytest.approx(tails["p99_ms"].median())  # each run's I/Os pooled, then the median
    assert 0 < row["cpu_pct"] < 100 * 4 * 2  # every job of four hosts: at most two CPUs' worth each on 2 cores
    assert table["iodepth" if "iodepth" in table.columns else "queue_depth"].len() == 29
    assert not table.select(pl.selectors.float().is_nan().any()).row(0).__contains__(True)


def test_a_published_study_keeps_its_sweeps_points_apart_and_has_no_figure_it_did_not_publish() -> None:
    opened = open_study("pvscsi-vs-lsi")
    table = configuration_results(opened, list(shape(opened).varied))
    sweep = table.filter(pl.col("test") == "iodepth_sweep")
    assert sweep["iodepth"].to_list() == ["16", "32", "64", "128"] and set(sweep["runs"]) == {1}  # not 4 runs
    assert _row(table, test="seqread", controller="LSI", sioc="off")["bandwidth_mib_s"] == pytest.approx(2282)
    assert _row(table, test="seqread", controller="LSI", sioc="off")["iops"] is None  # the table gave MiB/s only
    assert _row(table, test="seqread", controller="LSI", sioc="off")["members"] == 5  # the per-VM table: all five
    assert _row(table, test="randread", controller="LSI", sioc="off")["members"] == 1  # one VM of the five
    assert not {"p99_ms", "cpu_pct", "iops_max_over_min"} & set(table.columns)  # no histograms; one run each


def test_the_index_shows_the_table_first_and_links_its_downloads(tmp_path) -> None:
    from benchlib.report_html import _results

    opened = open_study("fio-sample")
    table = configuration_results(opened, list(shape(opened).varied))
    section = _results(table, tmp_path)
    assert "href='results.csv'" in section and "href='results.md'" in section
    rows = list(csv.DictReader(io.StringIO((tmp_path / "results.csv").read_text())))
    # fio's own samples: a 4k random read and a 4k 70/30 mix are two configurations of one block size
    assert sorted((r["block_size"], r["rw"]) for r in rows) == [
        ("4k", "randread"),
        ("4k", "randrw"),
        ("64k", "randread"),
    ]
    assert [float(r["iops"]) for r in rows] == pytest.approx(table["iops"].to_list(), rel=1e-8)
    # 9 significant digits at most: no binary noise such as 0.08755199999999999
    figures = [v for r in rows for v in r.values() if re.fullmatch(r"-?\d+\.\d+(e-?\d+)?", v)]
    assert figures and all(len(re.sub(r"e.*|^-|\.", "", v).lstrip("0")) <= 9 for v in figures), figures
    markdown = (tmp_path / "results.md").read_text().splitlines()
    # the members are called as the study last opened in this process calls them (VMs, or hosts of fio servers)
    assert markdown[0].startswith("| Block size | ") and re.search(
        r"\| Runs \| (VM|Host)s in the data of a run \| IOPS \|", markdown[0]
    )
    assert (
        markdown[1].startswith("|---|---:|---|---:|---:|---:|")
        and len(markdown) == 2 + 3
        and "nan" not in section.lower()
        and "inf" not in section.lower()
    )
    one = _results(table.with_columns(pl.lit(1, dtype=pl.UInt32).alias("runs")), tmp_path)
    assert "one run" in one  # one run has no spread, said so


def test_configurations_without_a_factor_are_told_apart_by_their_jobs() -> None:
    """No factor named: fio's sample outputs are still three configurations (two block sizes, a mix), by their
    jobs; one set of runs of one job is one row with every run in it."""
    opened = open_study("fio-sample")
    by_job = configuration_results(opened, [])
    assert sorted(by_job["iops"]) == pytest.approx(sorted(configuration_results(opened, ["block_size"])["iops"]))
    (row,) = by_job.filter(pl.col("rw") == "randrw").to_dicts()
    assert row["runs"] == 1 and row["iops"] > 0 and row["p99_ms"] > 0 and row["cpu_pct"] > 0


def test_level_names_from_data_stay_text_in_the_downloads(tmp_path) -> None:
    """A level named like a formula or like markup: the CSV does not hand a spreadsheet a formula, the
    Markdown does not hand a renderer a tag, the page escapes it; numbers and dashes before digits stay."""
    from benchlib.report_html import _results

    table = pl.DataFrame(
        {
            "controller": ['=HYPERLINK("http://x","y")', "<img src=x onerror=alert(1)>|", "-5", "@SUM(A1)"],
            "runs": pl.Series([1, 1, 1, 1], dtype=pl.UInt32),
            "iops": [1.0, 2.0, 3.0, 4.0],
        }
    )
    section = _results(table, tmp_path)
    levels = [r["controller"] for r in csv.DictReader(io.StringIO((tmp_path / "results.csv").read_text()))]
    assert levels == ['\'=HYPERLINK("http://x","y")', "<img src=x onerror=alert(1)>|", "-5", "'@SUM(A1)"]
    markdown = (tmp_path / "results.md").read_text()
    assert "<img" not in markdown and "&lt;img src=x onerror=alert(1)&gt;\\|" in markdown
    assert "<img" not in section and "&lt;img" in section


def test_each_setting_is_answered_from_the_comparison_pages_table() -> None:
    """The index's first section: per setting, the range of change of the median runs and what the design can
    call it; the published study's controller is the post's question (-68% on 64K writes to +33%)."""
    from benchlib.report_html import _answers
    from benchlib.results import factor_answers

    published = {a["factor"]: a for a in factor_answers("pvscsi-vs-lsi")}
    controller = published["controller"]
    assert (controller["baseline"], controller["levels"], controller["value"]) == ("LSI", ["PVSCSI"], "bandwidth_mib_s")
    assert controller["comparisons"] == 6 and controller["runs"] == 1
    assert controller["low"] == pytest.approx(-67.88, abs=0.01) and controller["high"] == pytest.approx(32.50, abs=0.01)
    assert controller["verdicts"] == {"descriptive only": 6} and set(published) == {"controller", "sioc"}
    assert controller["low_at"] == {"sioc": "off", "test": "randwrite_64k_8jobs"}  # where each end of it was
    assert controller["high_at"] == {"sioc": "on", "test": "seqread"}
    said = _answers(list(published.values()))
    # the same for both settings: said once, after them
    assert said.count("descriptive only") == 1
    assert "For every setting above, one run a side: descriptive only, the design cannot call any of it" in said
    measured = {a["factor"]: a for a in factor_answers("loopback-fio")}
    assert measured["rate_cap"]["runs"] == 3 and "rate-capped" in measured["ioengine"]["verdicts"]
    depth = measured["ioengine"]["confounders"]  # what came with the engine: I/Os in flight
    assert [c["param"] for c in depth] == ["configured_depth"] and depth[0]["values"] == {"libaio": [32], "psync": [1]}
    # IOPS of 4k against 64k is unlike work: the block size is answered in the bytes moved
    assert measured["block_size"]["value"] == "bandwidth_mib_s" and not measured["block_size"]["unlike_sizes"]
    assert measured["ioengine"]["value"] == "iops" and not controller["confounders"] + controller["unlike_sizes"]
    said = _answers(list(measured.values()))
    assert "3 runs a side: too few for a test" in said
    assert "I/Os in flight per host (libaio: 32, psync: 1; in every compared group" in said  # said with it
    # which way, plainly; and the comparisons of the one VM a published table lists, said to be its figure
    assert (controller["higher"], controller["lower"], controller["one_member"]) == (2, 4, 4)
    published_said = _answers(list(published.values()))
    # each kind's range on its own: a VM's -67.9% is not said as the end of a range of run totals
    totals, one = controller["split"]["totals"], controller["split"]["one_member"]
    assert (totals["n"], totals["higher"], totals["lower"], one["n"], one["higher"], one["lower"]) == (2, 1, 1, 4, 1, 3)
    assert round(totals["low"], 1) == -21.4 and round(one["low"], 1) == -67.9 and one["low_at"]["sioc"] == "off"
    assert re.search(
        r"\+32.5% \(SIOC on; test seq\w+( read 128k)?\) over 2 comparisons of run totals; where", published_said
    )
    assert (
        "only one of the run&#x27;s VMs (4 comparisons), that VM&#x27;s bandwidth (MiB/s) changed by -67.9%"
        in published_said
    )
    assert measured["ioengine"]["split"] is None  # every run of loopback holds all its hosts
    # SIOC on was published for one test: the answer says which runs it reads
    assert re.search(r"bandwidth \(MiB/s\) per run of test seq(read|uential read 128k) changed by", published_said)
    assert "64k higher in every one" in said
    # the rate cap against none: the cap set one side, so no number of runs tests it
    assert measured["rate_cap"]["one_side_capped"] == 8 and "the change is the cap&#x27;s" in said
    assert factor_answers("fio-sample")[0]["factor"] == "block_size"  # a workload, where the study has no setting


def test_tails_of_many_members_are_the_median_member_and_the_worst_by_p99() -> None:
    """Past 16 members the cell page gives a run's tail as one row: the median member's percentiles (a member
    whose percentile is unknown left out of that median) and the member with the worst p99, with its p99.9."""
    tails = pl.DataFrame(
        {
            "cfg": ["x"] * 4,
            "run": ["run 1"] * 4,
            "vm": ["vm-2", "vm-10", "vm-3", "vm-4"],
            "origin": ["fio json+"] * 4,
            "ios": [100_000, 100_000, 100_000, 5_000],
            "p50_ms": [1.0, 2.0, 3.0, 4.0],
            "p99_ms": [5.0, 9.0, 6.0, 7.0],
            "p99.9_ms": [8.0, 12.0, 10.0, None],
        }
    )
    row = views.tails_across_members(tails, ["cfg"], "vm").row(0, named=True)
    assert row["members"] == 4 and row["ios"] == 305_000
    assert row["p50_ms"] == 2.5 and row["p99_ms"] == 6.5 and row["p99.9_ms"] == 10.0
    assert (row["worst"], row["worst_p99_ms"], row["worst_p99.9_ms"]) == ("vm-10", 9.0, 12.0)


def test_the_claims_are_answered_with_each_failure_in_the_write_ups_words() -> None:
    from benchlib.report_html import _claims_answer

    table = views.claim_table(open_study("pvscsi-vs-lsi"))
    said = _claims_answer(table, "claims.html")
    assert "25 of the write-up&#x27;s 33 claims hold; these 8 fail (<a href='claims.html'>" in said
    assert said.count("<li>") == 8 and "(claim 25, Takeaways)" in said
    assert "(claim 22, CPU cost; the claims page says how benchlib reads these words)" in said  # it has a reading
    hostile = table.head(1).with_columns(pl.lit("FAIL").alias("verdict"), pl.lit("<script>x</script>").alias("says"))
    assert "<script>" not in _claims_answer(hostile, "claims.html")
    passed = table.filter(pl.col("verdict") == "PASS").head(3)
    assert _claims_answer(passed, "c.html").endswith(
        "3 of the write-up&#x27;s 3 claims hold; each is recomputed on <a href='c.html'>the claims page</a>.</p>"
    )


def test_each_member_under_each_setting_is_its_median_run_against_the_baseline() -> None:
    """The settings-per-member page's findings on the published study: SIOC on against off per VM (gus_fio_2
    fell from 1,148 to 401 MiB/s with LSI, -65.07%) and Jain's index over the same VMs' figures."""
    from benchlib import fit
    from benchlib.results import compared_settings, member_change_summary, member_changes

    opened = open_study("pvscsi-vs-lsi")
    pages = dict(compared_settings(opened))
    members, fair = member_changes(opened, "sioc", pages["sioc"])
    row = _row(members, controller="LSI", vm="gus_fio_2")
    assert (row["baseline_value"], row["value"]) == (1148.0, 401.0) and row["runs"] == row["runs_baseline"] == 1
    assert row["change_pct"] == pytest.approx((401 / 1148 - 1) * 100)
    lsi = members.filter(pl.col("controller") == "LSI")
    jain = lambda xs: sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))  # noqa: E731
    shared = _row(fair, controller="LSI")
    assert shared["jain_baseline"] == pytest.approx(jain(lsi["baseline_value"].to_list()))
    assert shared["jain"] == pytest.approx(jain(lsi["value"].to_list())) and shared["members"] == 5
    summary = member_change_summary(members, fair, "sioc", pages["sioc"]["by"])
    assert summary["low"]["vm"] == "gus_fio_2" and summary["low"]["at"] == {"controller": "LSI", "sioc": "on"}
    assert (summary["several"], summary["together"], summary["rose"], summary["fell"]) == (2, 0, 2, 0)
    assert summary["largest_rise"]["at"]["controller"] == "LSI" and summary["runs"] == 1
    # a study whose runs each have one member: the comparison page says it all
    with pytest.raises(fit.PageLeftOut, match="each compared run has one member"):
        fit.fitted("settings-per-member", "fio-sample", {"factor": None})
    # a cap on one side of every comparison: its changes are the cap's, said so
    measured = dict(compared_settings("loopback-fio"))
    capped = member_change_summary(*member_changes("loopback-fio", "rate_cap", measured["rate_cap"]), "rate_cap",
                                   measured["rate_cap"]["by"])  # fmt: skip
    engine = member_change_summary(*member_changes("loopback-fio", "ioengine", measured["ioengine"]), "ioengine",
                                   measured["ioengine"]["by"])  # fmt: skip
    assert capped["all_capped"] and not engine["all_capped"] and engine["capped"] == 4 and engine["several"] == 4


def test_the_write_ups_tables_keep_their_own_digits() -> None:
    """The published study's tables as entered: 19.63 ms stays 19.63 (the pages' three digits say 19.6), the
    bookkeeping column left out, each file's citation line kept; a study of measured runs has no such page."""
    from benchlib import fit
    from benchlib.results import published_tables

    tables = {t["table"]: t for t in published_tables("pvscsi-vs-lsi")}
    assert set(tables) == {"controllers", "cpu", "iodepth_sweep", "rwmix_sweep", "seqread_per_vm"}
    per_vm = tables["seqread_per_vm"]
    assert per_vm["file"] == "seqread-128k-per-vm.csv" and "table" not in per_vm["rows"].columns
    assert "19.63" in per_vm["rows"]["lat_avg_ms"].to_list() and per_vm["rows"]["lat_avg_ms"].dtype == pl.String
    assert per_vm["about"].endswith("per-VM bandwidth and mean latency")
    assert "cpu_usr_pct" in tables["cpu"]["rows"].columns  # the CPU table the pages had not shown
    with pytest.raises(fit.PageLeftOut, match="no published table"):
        fit.fitted("published-tables", "loopback-fio", {})


def test_a_mean_above_its_p99_is_said(tmp_path) -> None:
    """The mean past the p99 means under 1% of the I/Os were slow enough to outweigh the rest: the index says so."""
    from benchlib.report_html import _results

    table = pl.DataFrame(
        {
            "engine": ["a", "b"],
            "runs": pl.Series([3, 3], dtype=pl.UInt32),
            "lat_mean_ms": [4.0, 1.0],
            "p99_ms": [2.0, 3.0],
        }
    )
    said = _results(table, tmp_path)
    assert "In 1 row the mean latency is above the p99" in said
    assert "above the p99" not in _results(table.tail(1), tmp_path)


def test_a_studys_words_end_with_the_block_that_set_them() -> None:
    """A report's index words its study its way and puts back what was there: the next study's tables say
    their own members and levels whatever was built before them in the process."""
    from benchlib.tables import label, level

    before, said = label("vm"), level("test", "seqread")
    with views.study_words("loopback-fio"):
        assert label("vm") == "Host"
    assert (label("vm"), level("test", "seqread")) == (before, said)
    with views.study_words("pvscsi-vs-lsi"):
        assert label("vm") == "VM" and level("test", "seqread") == "sequential read 128k"
    assert (label("vm"), level("test", "seqread")) == (before, said)


def test_a_published_tables_latency_is_weighted_by_each_vms_ios() -> None:
    """Sequential read 128k, LSI, SIOC off: five VMs' mean latencies weighted by their I/Os (MiB/s over one
    block size), 8.74 ms; their plain mean, 12.97 ms, made LSI look 3 ms slower than PVSCSI with SIOC on."""
    opened = open_study("pvscsi-vs-lsi")
    table = configuration_results(opened, list(shape(opened).varied))
    bw, lat = [401, 1148, 203, 326, 204], [9.95, 3.47, 19.63, 12.22, 19.60]
    row = _row(table, controller="LSI", sioc="off", test="seqread")
    assert row["lat_mean_ms"] == pytest.approx(sum(b * t for b, t in zip(bw, lat, strict=True)) / sum(bw))


def test_a_read_write_mix_is_said_as_its_write_share_as_the_sweeps_say_it(tmp_path) -> None:
    """The post's mix sweep is by write share: the results table says it so (write 100%: 29,838 + 14,888 IOPS)."""
    from benchlib.report_html import _results

    opened = open_study("pvscsi-vs-lsi")
    _results(configuration_results(opened, list(shape(opened).varied)), tmp_path)
    rows = list(csv.DictReader(io.StringIO((tmp_path / "results.csv").read_text())))
    mix = {r["write_pct"]: float(r["iops"]) for r in rows if r["test"] == "rwmix_sweep"}
    assert mix["100"] == 29_838 + 14_888 and mix["0"] == 40_585 + 19_189  # as set: 100, not 100.0


def test_a_cell_page_given_its_levels_and_figure_reads_nothing_to_fit_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """A report passes every cell page its levels and figure: fitting them costs no look at the study (0.19 s a page
    at 1,024 configurations); a page given neither fits both from the study."""
    from benchlib import fit

    given = {"levels": {"block_size": "64k"}, "value": "iops"}
    real = fit.shape
    monkeypatch.setattr(fit, "shape", lambda study: pytest.fail("the study's shape was read"))
    assert fit.fitted("cell", "fio-sample", given) == given
    monkeypatch.setattr(fit, "shape", real)
    found = fit.fitted("cell", "fio-sample", {"levels": None, "value": None})
    assert found["levels"] and found["value"] in ("iops", "bandwidth_mib_s")


def test_a_run_of_other_work_filed_under_one_level_is_not_pooled_into_its_side() -> None:
    """fio-sample files its one 70/30 mix run under 4k beside three random-read runs at 4k and at 64k: the
    block-size comparison, its efficiency and the index's answer read the random reads alone (three a side),
    so nothing else changed with the block size; a parameter the sides share no value of is not held."""
    from benchlib import fit
    from benchlib.results import factor_answers

    opened = open_study("fio-sample")
    page = fit.comparison(opened)
    assert page["factor"] == "block_size" and page["only"] == {"rw": ["randread"]}
    units = views.run_totals(opened, page["value"], ["block_size"], only=page["only"])
    assert dict(units.group_by("block_size").len().iter_rows()) == {"4k": 3, "64k": 3}
    assert views.confounders(opened, factor="block_size", baseline="4k", by=[], only=page["only"]) == []
    assert fit.efficiency(opened)["only"] == {"rw": ["randread"]}
    (answer,) = factor_answers(opened)
    assert answer["only"] == {"rw": ["randread"]} and answer["confounders"] == [] and answer["runs"] == 3
    # the engines of loopback-fio ran at depth 1 (psync) and 32 (libaio): no depth both ran, none is held
    engines = fit.comparison("loopback-fio", factor="ioengine")
    assert not {"iodepth", "numjobs"} & set(engines["only"])
    assert views.confounders(
        "loopback-fio", factor="ioengine", baseline="psync", by=engines["by"], only=engines["only"]
    )


@pytest.mark.fio
def test_a_two_level_engine_setting_is_answered_though_its_depth_follows_it(fio_binary: str, tmp_path) -> None:
    """A study a test records with fio's normal output only: psync against libaio, 5 runs each, both asked for
    depth 8 (a sync engine keeps 1). Two levels are no depth sweep: the index answers for the engine with its
    verdict, and its comparison, whose runs carry no start time, says the order cannot be checked."""
    import subprocess

    from benchlib.ingest import ingest_study
    from benchlib.results import compared_settings, factor_answers
    from benchlib.stats.compare import comparison_table
    from benchlib.words.compare import order_caveat

    study = tmp_path / "raw" / "untimed"
    for engine in ("psync", "libaio"):
        for run in range(1, 6):
            folder = study / engine / f"r{run}"
            folder.mkdir(parents=True)
            subprocess.run(
                [fio_binary, "--name=job", f"--filename={tmp_path / 'scratch.dat'}", "--size=8m", "--rw=randread"]
                + ["--bs=4k", f"--ioengine={engine}", "--iodepth=8", "--runtime=1", "--time_based"]
                + [f"--output={folder / 'job.out'}"],
                check=True,
                capture_output=True,
            )
    (study / "study.toml").write_text(
        '[study]\nname = "untimed"\nmembers = "host"\n[factors]\nengine = ["psync", "libaio"]\n'
        '[[files]]\nglob = "{engine}/*/*.out"\n',
        encoding="utf-8",
    )
    assert ingest_study(study, tmp_path / "processed").ok
    opened = open_study(study, tmp_path / "processed")
    assert shape(opened).points == ()
    assert [factor for factor, _ in compared_settings(opened)] == ["engine"]
    (answer,) = factor_answers(opened)
    assert answer["factor"] == "engine" and answer["low"] is not None and answer["comparisons"] == 1
    from benchlib.report_html import _answers

    said = _answers([answer], support="**What it can support.** the design statement")
    verdicts = "; ".join(f"{k} {v}" for v, k in sorted(answer["verdicts"].items()))  # said beside the change
    assert f"verdicts: {verdicts}" in said and said.index("changed by") < said.index("What it can support")
    units = views.run_totals(opened, "iops", ["engine"])
    assert units["start_time"].is_null().all()  # fio's normal output: local time without a zone, not kept
    table = comparison_table(units, "iops", factor="engine", baseline="psync")
    caveat = order_caveat(table)
    assert table["order"][0] is None and (caveat is not None) == (
        table["verdict"][0] not in ("not testable at this n",)
    )
