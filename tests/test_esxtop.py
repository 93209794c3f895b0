"""esxtop batch CSV: the raw capture and two spreadsheet re-saves in ../shared/corpus/esxtop."""

from __future__ import annotations

import csv
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from benchlib.errors import FormatError, StudyError
from benchlib.ingest import ingest_study
from benchlib.sources import detect, read
from benchlib.store import load_study_tables
from tests.conftest import corpus_dir

DEVICE = "Physical Disk SCSI Device"


def test_raw_capture_in_long_form() -> None:
    path = corpus_dir("esxtop") / "esxtopd__small-esxtop-data.csv"
    assert detect(path) == "esxtop"
    tables = read(path)
    counters = tables.host_counters
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    header = rows[0]
    assert counters.height == (len(rows) - 1) * (len(header) - 2)  # minus the time column and the trailing comma
    assert tables.runs["host"].to_list() == ["localhost.home"]
    assert tables.runs["duration_ns"][0] == 10 * 10**9  # 14:06:27 to 14:06:37
    column = header.index("\\\\localhost.home\\Physical Disk SCSI Device(mpx.vmhba0:C0:T5:L0)\\Device Q Depth")
    dqlen = counters.filter(
        (pl.col("object") == DEVICE)
        & (pl.col("instance") == "mpx.vmhba0:C0:T5:L0")
        & (pl.col("counter") == "Device Q Depth")
    ).sort("sample")
    assert dqlen["value"].to_list() == [float(r[column]) for r in rows[1:]]
    memory = counters.filter(pl.col("object") == "Memory")
    assert memory["instance"].null_count() == memory.height  # objects without an instance


def test_gavg_is_davg_plus_kavg() -> None:
    """FORMATS.md: GAVG = DAVG + KAVG holds to rounding in real captures (sample 0 is all zeros)."""
    counters = read(corpus_dir("esxtop") / "esxtopd__small-esxtop-data.csv").host_counters
    latency = counters.filter(
        (pl.col("object") == DEVICE) & pl.col("counter").str.starts_with("Average") & (pl.col("sample") > 0)
    ).pivot(on="counter", index=["instance", "sample"], values="value")
    assert latency.height > 0
    gap = (
        latency["Average Guest MilliSec/Command"]
        - latency["Average Driver MilliSec/Command"]
        - latency["Average Kernel MilliSec/Command"]
    )
    assert gap.abs().max() <= 0.02
    first = counters.filter(
        (pl.col("sample") == 0) & (pl.col("object") == DEVICE) & (pl.col("counter") == "Commands/sec")
    )
    assert (first["value"] == 0).all()


@pytest.mark.parametrize(
    ("name", "samples", "dated"),
    [
        ("VisualEsxtopOnline-1000__origincsvfile.csv", 514, True),
        ("VisualEsxtopOnline-1011__origincsv.csv", 4500, False),
    ],
)
def test_spreadsheet_resaves(name: str, samples: int, dated: bool) -> None:
    """Quotes stripped, CRLF or CR-only line ends, shortened time stamps."""
    path = corpus_dir("esxtop") / name
    tables = read(path)
    counters = tables.host_counters
    assert counters["sample"].n_unique() == samples
    assert tables.runs["host"].to_list() == ["proma-2n-dhcp60.eng.vmware.com"]
    assert (counters["time"].null_count() == 0) is dated
    assert counters["value"].null_count() == 0
    text = path.read_bytes().replace(b"\r\n", b"\n").replace(b"\r", b"\n").decode()
    second_line = text.splitlines()[1].split(",")
    first_value = counters.filter(pl.col("sample") == 0).sort("counter", "instance")
    assert float(second_line[1]) in first_value["value"].to_list()


def test_not_esxtop() -> None:
    path = corpus_dir("fio-json") / "fio-plot-M1015-PM883__randread-32-4.json"
    from benchlib.sources.esxtop import read_esxtop

    with pytest.raises(FormatError, match="PDH-CSV"):
        read_esxtop(path)


def test_device_queue_view() -> None:
    from benchlib.sources.esxtop import device_queue_view

    view = device_queue_view(read(corpus_dir("esxtop") / "esxtopd__small-esxtop-data.csv").host_counters)
    assert {"DQLEN", "ACTV", "QUED", "DAVG_ms", "KAVG_ms", "GAVG_ms", "QAVG_ms"} <= set(view.columns)
    assert view["sample"].n_unique() == 3 and view["device"].n_unique() >= 2
    later = view.filter(pl.col("sample") > 0)
    assert (later["GAVG_ms"] - later["DAVG_ms"] - later["KAVG_ms"]).abs().max() <= 0.02


def test_counters_during_runs() -> None:
    """esxtop samples are attributed to the benchmark run whose window holds their whole interval: sample 1
    averages 14:06:27 to :32, sample 2 :32 to :37; a run from :30 holds sample 1's time but not its interval."""
    from datetime import UTC, datetime

    from benchlib.stats.hostside import counters_during_runs

    counters = read(corpus_dir("esxtop") / "esxtopd__small-esxtop-data.csv").host_counters  # 14:06:27, :32, :37
    runs = pl.DataFrame(
        {
            "run_id": ["early", "late", "unplaced", "partly"],
            "start_time": [
                datetime(2018, 4, 26, 14, 6, 27, tzinfo=UTC),
                datetime(2018, 4, 26, 14, 6, 32, tzinfo=UTC),
                None,
                datetime(2018, 4, 26, 14, 6, 30, tzinfo=UTC),
            ],
            "duration_ns": [5 * 10**9, 60 * 10**9, 10**9, 3 * 10**9],
        }
    ).with_columns(pl.col("start_time").cast(pl.Datetime("ms", "UTC")))
    placed = counters_during_runs(runs, counters)
    by_run = placed.group_by("benchmark_run_id").agg(pl.col("sample").unique().sort()).sort("benchmark_run_id")
    assert by_run.rows() == [("early", [1]), ("late", [2])]  # "partly" (:30 to :33) holds no whole interval


def test_device_latency_is_weighted_by_commands_and_skips_idle_and_first_samples() -> None:
    """An idle sample (0 commands) and esxtop's all-zero first sample do not pull the mean down."""
    import polars as pl

    from benchlib.stats import device_latency_means

    queue = pl.DataFrame(
        {
            "host": ["esx1"] * 4 + ["esx1"] * 2,
            "device": ["naa.1"] * 4 + ["naa.idle"] * 2,
            "sample": [0, 1, 2, 3, 1, 2],
            "CMDS_per_s": [0.0, 100.0, 0.0, 300.0, 0.0, 0.0],
            "DAVG_ms": [0.0, 10.0, 0.0, 20.0, 0.0, 0.0],
            "KAVG_ms": [0.0, 1.0, 0.0, 2.0, 0.0, 0.0],
            "GAVG_ms": [0.0, 11.0, 0.0, 22.0, 0.0, 0.0],
            "ACTV": [0.0, 4.0, 0.0, 8.0, 0.0, 0.0],
            "QUED": [0.0, 0.0, 0.0, 3.0, 0.0, 0.0],
            "DQLEN": [64.0] * 6,
        }
    )
    rows = {r["device"]: r for r in device_latency_means(queue).iter_rows(named=True)}
    busy = rows["naa.1"]
    assert busy["DAVG"] == (100 * 10 + 300 * 20) / 400 == 17.5  # a plain mean over samples 0-3 gives 7.5
    assert busy["GAVG"] == (100 * 11 + 300 * 22) / 400 and busy["samples"] == 3
    assert busy["ACTV"] == 4.0 and busy["QUED"] == 1.0 and busy["DQLEN"] == 64.0  # queues: plain means, idle included
    assert rows["naa.idle"]["DAVG"] is None and rows["naa.idle"]["commands"] == 0.0  # no commands: no latency


def test_a_capture_read_in_small_batches_and_streamed_to_parquet_equals_the_whole_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bounded memory changes nothing: batches of a few samples, streamed by ingest, give the rows of one read."""
    from benchlib.ingest import reading
    from benchlib.sources import esxtop

    source = corpus_dir("esxtop") / "esxtopd__small-esxtop-data.csv"
    order = ["sample", "counter", "instance"]
    whole = read(source).host_counters.sort(order)
    monkeypatch.setattr(esxtop, "BATCH_BYTES", 50_000)  # a handful of samples per batch
    assert read(source).host_counters.sort(order).equals(whole)
    monkeypatch.setattr(reading, "STREAM_BYTES", 0)  # every capture streamed
    study = tmp_path / "raw" / "esx"
    study.mkdir(parents=True)
    shutil.copy(source, study / source.name)
    report = ingest_study(study, tmp_path / "processed")
    tables = load_study_tables(report.processed)
    stored = tables.host_counters
    assert stored.schema == whole.schema
    in_memory = read(source).runs  # a streamed capture's span, from its first and last lines, is the same
    assert tables.runs.select("start_time", "duration_ns").equals(in_memory.select("start_time", "duration_ns"))
    assert stored.sort(order).equals(whole)


def test_a_study_keeps_only_the_esxtop_objects_it_names(tmp_path: Path) -> None:
    source = corpus_dir("esxtop") / "esxtopd__small-esxtop-data.csv"
    whole = read(source).host_counters
    study = tmp_path / "raw" / "esx"
    study.mkdir(parents=True)
    shutil.copy(source, study / source.name)
    (study / "study.toml").write_text('[esxtop]\nobjects = ["Physical Disk", "Physical Cpu"]\n')
    kept = load_study_tables(ingest_study(study, tmp_path / "processed").processed).host_counters
    expected = whole.filter(pl.col("object").is_in(["Physical Disk", "Physical Cpu"]))
    assert set(kept["object"]) == {"Physical Disk", "Physical Cpu"} and kept.height == expected.height > 0
    (study / "study.toml").write_text('[esxtop]\nobjects = "Physical Disk"\n')
    with pytest.raises(StudyError, match=r"\[esxtop\] objects must be a list"):
        ingest_study(study, tmp_path / "processed")


def test_adapter_queue_depth_beside_the_commands_the_adapter_held(tmp_path: Path) -> None:
    """AQLEN from a capture of every counter, and the commands at the adapter by Little's law, from the raw CSV."""
    from benchlib.sources.esxtop import adapter_queue_view
    from benchlib.stats import adapter_queue_use
    from tests.esxi_standins import capture_with_adapter_queue_depth

    source = corpus_dir("esxtop") / "esxtopd__small-esxtop-data.csv"
    assert adapter_queue_view(read(source).host_counters).is_empty()  # captured without -a: AQLEN unknown
    full = capture_with_adapter_queue_depth(source, tmp_path / "full.csv", 128)
    view = adapter_queue_view(read(full).host_counters)
    assert view["adapter"].unique().to_list() == ["vmhba0"]  # the adapter, not its paths (vmhba0:C0:T2:L0)
    assert view["AQLEN"].to_list() == [0.0, 128.0, 128.0]

    rows = list(csv.reader(source.open(newline="")))
    column = {name.rsplit("\\", 1)[1]: i for i, name in enumerate(rows[0]) if "Physical Disk Adapter(vmhba0)" in name}
    samples = [[float(row[column[c]]) for c in ("Commands/sec", "Average Driver MilliSec/Command")] for row in rows[2:]]
    at_adapter = [commands * davg / 1000 for commands, davg in samples]  # sample 0 is left out

    use = adapter_queue_use(view).row(0, named=True)
    assert use["AQLEN"] == 128 and use["samples"] == 2
    assert use["at_adapter"] == pytest.approx(sum(at_adapter) / 2)
    assert use["peak_at_adapter"] == pytest.approx(max(at_adapter))
    assert use["used_pct"] == pytest.approx(100 * sum(at_adapter) / 2 / 128)


def test_a_capture_of_another_time_is_not_the_studys_io(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A capture from 2018 beside a run of another day: none of its samples is drawn, and the page says why,
    with the capture's span; moved into the run's window, its samples count, with the run's levels."""
    import benchlib.store
    from benchlib.views import esxtop_against_guests, esxtop_captures, esxtop_view
    from benchlib.words.hostside import esxtop_coverage, esxtop_match_note
    from tests.esxi_standins import capture_with_adapter_queue_depth

    study = tmp_path / "raw" / "elsewhen"
    study.mkdir(parents=True)
    toml = '[study]\nname = "elsewhen"\n[factors]\ntest = ["seq"]\n'
    toml += '[[files]]\nglob = "fio.json"\nlevels = { test = "seq" }\n'
    (study / "study.toml").write_text(toml, encoding="utf-8")
    fio = corpus_dir("fio-json") / "fio-plot-M1015-PM883__randread-32-4.json"
    shutil.copyfile(fio, study / "fio.json")
    source = corpus_dir("esxtop") / "esxtopd__small-esxtop-data.csv"
    shutil.copyfile(source, study / "esxtop-esx01.csv")
    monkeypatch.setattr(benchlib.store, "PROCESSED", tmp_path / "processed")
    ingest_study(study, tmp_path / "processed")
    captures = esxtop_captures(str(study))
    assert captures.select("samples", "in_runs").row(0) == (2, 0)
    from benchlib.views import overview

    held = {r["format"]: r for r in overview(str(study)).iter_rows(named=True)}
    assert held["esxtop"]["files"] == 1 and held["esxtop"]["hosts"] is None  # an ESXi host is not one of the VMs
    assert esxtop_view(str(study)).is_empty()
    said = esxtop_coverage(captures)
    assert said.startswith("No esxtop sample of this study was taken during one of its runs")
    assert "localhost.home, 2018-04-26 14:06:32 UTC to 2018-04-26 14:06:37 UTC: 0 of 2 samples inside a run" in said

    runs = read(fio).runs.filter(pl.col("start_time").is_not_null())
    start = runs["start_time"].min()
    second = start.replace(microsecond=0) + timedelta(seconds=1 if start.microsecond else 0)  # esxtop's whole seconds
    inside = [second + timedelta(seconds=s) for s in (0, 1, 2)]  # sample 0 (left out), then two intervals in the run
    capture_with_adapter_queue_depth(source, study / "esxtop-esx01.csv", 64, inside)
    ingest_study(study, tmp_path / "processed")
    assert esxtop_captures(str(study)).select("samples", "in_runs").row(0) == (2, 2)
    assert esxtop_coverage(esxtop_captures(str(study))) == ""
    view = esxtop_view(str(study), by=["test"])
    assert set(view["test"]) == {"seq"} and sorted(set(view["sample"])) == [1, 2]
    # a second run of the same configuration over the same seconds (windows from whole-second times overlap a
    # neighbour's): each sample still counts once
    (study / "fio-again.json").write_text(fio.read_text().replace("{", "{ ", 1))
    toml += '[[files]]\nglob = "fio-again.json"\nlevels = { test = "seq" }\n'
    (study / "study.toml").write_text(toml, encoding="utf-8")
    ingest_study(study, tmp_path / "processed")
    again = esxtop_view(str(study), by=["test"])
    assert again.height == view.height and again.equals(view)
    # a run of another configuration over the same seconds: which of the two a sample saw is unknown
    other = toml.replace('test = ["seq"]', 'test = ["seq", "rand"]')
    (study / "fio-rand.json").write_text(fio.read_text().replace("{", "{  ", 1))
    (study / "study.toml").write_text(other + '[[files]]\nglob = "fio-rand.json"\nlevels = { test = "rand" }\n')
    ingest_study(study, tmp_path / "processed")
    assert esxtop_view(str(study), by=["test"]).is_empty()
    (study / "fio-rand.json").unlink()
    (study / "study.toml").write_text(toml, encoding="utf-8")
    ingest_study(study, tmp_path / "processed")
    # tied by time alone: its devices' few commands/s are not the run's I/O, and the page says so
    iops = float(read(fio).results.filter(~pl.col("is_aggregate"))["iops"].sum())  # each of its two runs
    against = esxtop_against_guests(str(study), by=["test"])
    assert against["guest_iops"][0] == pytest.approx(iops) and not against["matches"][0]
    # the two runs' windows both hold the two samples: each counts once, not once per run
    assert against["samples"][0] == 2 and esxtop_match_note(against).startswith("**The capture may not be")
    assert "far fewer commands than fio did I/Os" in esxtop_match_note(against)
    capture_with_adapter_queue_depth(source, study / "esxtop-esx01.csv", 64, inside, commands=iops * 1.1)
    ingest_study(study, tmp_path / "processed")
    against = esxtop_against_guests(str(study), by=["test"])
    assert against["ratio"][0] == pytest.approx(1.1, rel=0.01) and against["matches"][0]
    assert esxtop_match_note(against).startswith("esxtop's devices carried fio's I/O: in every configuration")


def test_a_capture_copied_to_another_time_is_said_to_be_one_measurement(tmp_path: Path) -> None:
    """Two files of one capture, their times moved apart, beside a capture of another host: the two are named as one
    capture copied (rows that agree because they are the same samples), the third is not."""
    from benchlib.store import open_study
    from benchlib.views import esxtop_copied
    from benchlib.words.hostside import copies_note
    from tests.esxi_standins import capture_with_adapter_queue_depth

    source = corpus_dir("esxtop") / "esxtopd__small-esxtop-data.csv"
    study = tmp_path / "raw" / "esx"
    study.mkdir(parents=True)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for name, hours in (("monday", 0), ("tuesday", 24)):
        times = [start + timedelta(hours=hours, seconds=s) for s in (0, 2, 4)]
        capture_with_adapter_queue_depth(source, study / f"{name}.csv", 128, times)
    other = corpus_dir("esxtop") / "VisualEsxtopOnline-1000__origincsvfile.csv"
    shutil.copy(other, study / other.name)
    ingest_study(study, tmp_path / "processed")
    copied = esxtop_copied(open_study(study, tmp_path / "processed"))
    assert copied == [["esx/monday.csv", "esx/tuesday.csv"]]  # the finding: one group of two files
    said = copies_note(copied)
    assert said.startswith("**One capture, copied.** `esx/monday.csv` and `esx/tuesday.csv` hold the same samples")
    assert other.name not in said
    (study / "tuesday.csv").unlink()
    ingest_study(study, tmp_path / "processed")
    assert copies_note(esxtop_copied(open_study(study, tmp_path / "processed"))) == ""


@pytest.mark.parametrize("stream", [False, True])
def test_a_negative_rate_is_refused_by_its_sample_and_a_kavg_rounded_below_zero_is_kept(
    stream: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 44: a capture with Commands/sec of -3.5 in its second sample was stored; now it is quarantined
    naming the sample, the instance and the counter, streamed or not. esxtop prints KAVG (GAVG minus DAVG)
    a little below 0 when the two round apart: that capture is kept."""
    from benchlib.ingest import reading

    source = corpus_dir("esxtop") / "esxtopd__small-esxtop-data.csv"
    rows = list(csv.reader(source.open(encoding="utf-8", newline="")))
    rate = next(i for i, name in enumerate(rows[0]) if name.endswith("Physical Disk Adapter(vmhba0)\\Commands/sec"))
    kavg = next(i for i, name in enumerate(rows[0]) if name.endswith("Average Kernel MilliSec/Command"))
    study = tmp_path / "raw" / "esx"
    study.mkdir(parents=True)
    for name, column, value in (("rate.csv", rate, "-3.5"), ("kavg.csv", kavg, "-0.01")):
        edited = [list(row) for row in rows]
        edited[2][column] = value
        with (study / name).open("w", encoding="utf-8", newline="") as handle:
            csv.writer(handle).writerows(edited)
    monkeypatch.setattr(reading, "STREAM_BYTES", 0 if stream else 1 << 40)
    report = ingest_study(study, tmp_path / "processed")
    assert report.ingested == ["kavg.csv"]
    ((rel, why),) = report.quarantined
    assert rel == "rate.csv"
    assert (
        "(sample 2 after the header, instance 'vmhba0', counter 'Commands/sec'): Commands/sec is -3.5, below 0" in why
    )
    kept = load_study_tables(report.processed).host_counters
    assert kept.filter(pl.col("value") < 0)["counter"].to_list() == [rows[0][kavg].rsplit("\\", 1)[-1]]
