"""Ingest end to end on the project's own recorded study: incremental, safe, factor-aware."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from benchlib.cli import main
from benchlib.errors import StudyError
from benchlib.ingest import ingest_study
from benchlib.paths import RAW
from benchlib.schema import TABLES, validate
from benchlib.sources import read
from benchlib.store import load_study_tables

SAMPLE = RAW / "fio-sample"


@pytest.fixture
def study(tmp_path: Path) -> Path:
    target = tmp_path / "raw" / "fio-sample"
    shutil.copytree(SAMPLE, target)
    return target


def _hashes(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_ingest_writes_valid_tables_with_factors(study: Path, tmp_path: Path) -> None:
    before = _hashes(study)
    report = ingest_study(study, tmp_path / "processed")
    assert report.ok and not report.unchanged
    assert _hashes(study) == before  # raw data is never touched
    tables = load_study_tables(report.processed)
    for name, frame in tables.items():
        validate(frame.select(list(TABLES[name])), name)
    runs = tables.runs
    assert set(runs["study"]) == {"fio-sample"}
    json_runs = runs.filter(pl.col("format") == "fio-json+")
    assert json_runs.group_by("block_size").len().sort("block_size").rows() == [("4k", 4), ("64k", 3)]
    assert runs["source"].str.starts_with("fio-sample/").all()
    results = tables.results.join(runs.select("run_id", "block_size"), on="run_id")
    by_level = (
        results.filter(pl.col("rw") == "randread").group_by("block_size").agg(pl.col("block_size_bytes").unique())
    )
    assert sorted(by_level.rows()) == [("4k", [4096]), ("64k", [65536])]
    assert tables.latency_bins.height > 0 and tables.intervals.height > 0


def test_latency_bins_read_back_equal_each_files_reader(study: Path, tmp_path: Path) -> None:
    """Stored one row per histogram, the bins read back one per bin, equal to what each file's reader returns."""
    report = ingest_study(study, tmp_path / "processed")
    ingested = load_study_tables(report.processed).latency_bins
    expected = pl.concat([read(study / rel).latency_bins for rel in report.ingested]).filter(pl.col("count") > 0)
    assert ingested.height == expected.height > 0
    assert ingested.sort(ingested.columns).equals(expected.sort(expected.columns))
    stored = pl.concat([pl.read_parquet(p) for p in (report.processed / "latency_bins").glob("*.parquet")])
    histograms = expected.select(pl.exclude("bin_index", "bin_value_ns", "count")).unique().height
    assert stored.height == histograms and stored["count"].list.len().sum() == expected.height


def test_ingest_is_incremental(study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    processed = tmp_path / "processed"
    first = ingest_study(study, processed)
    parts = {p: p.stat().st_mtime_ns for p in processed.rglob("*.parquet")}
    second = ingest_study(study, processed)
    assert not second.ingested and sorted(second.unchanged) == sorted(first.ingested)
    assert {p: p.stat().st_mtime_ns for p in processed.rglob("*.parquet")} == parts
    assert main(["ingest", str(study), "--processed", str(processed), "--quiet"]) == 0
    assert "nothing changed since the last ingest" in capsys.readouterr().out
    changed = study / "bs-4k" / "randread-rep1.json"
    changed.write_text(changed.read_text().replace('"jobname" : "randread-4k"', '"jobname" : "renamed"', 1))
    (study / "bs-64k" / "randread-rep3.json").unlink()
    third = ingest_study(study, processed)
    assert third.ingested == ["bs-4k/randread-rep1.json"] and third.removed == ["bs-64k/randread-rep3.json"]
    tables = load_study_tables(third.processed)
    assert "renamed" in tables.results["job_name"].to_list()
    assert tables.runs.filter(pl.col("source") == "fio-sample/bs-64k/randread-rep3.json").height == 0


def test_changing_study_toml_rebuilds(study: Path, tmp_path: Path) -> None:
    processed = tmp_path / "processed"
    ingest_study(study, processed)
    toml = study / "study.toml"
    toml.write_text(toml.read_text().replace('levels = { block_size = "64k" }', 'levels = { block_size = "4k" }'))
    report = ingest_study(study, processed)
    assert not report.unchanged
    runs = load_study_tables(report.processed).runs
    assert runs.filter(pl.col("format") == "fio-json+")["block_size"].unique().to_list() == ["4k"]


def test_bad_study_toml_is_a_clear_error(study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    toml = study / "study.toml"
    toml.write_text(toml.read_text().replace('levels = { block_size = "64k" }', 'levels = { controller = "pvscsi" }'))
    with pytest.raises(StudyError, match="names factor 'controller'"):
        ingest_study(study, tmp_path / "processed")
    assert main(["ingest", str(study), "--processed", str(tmp_path / "processed")]) == 2
    assert "controller" in capsys.readouterr().err


def test_one_bad_study_toml_costs_its_study_not_the_others(
    study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`benchlib ingest` over several studies: a bad study.toml is one message and that study is left out; the
    others are ingested, and the exit status says something was refused."""
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(study, bad)
    (bad / "study.toml").write_text(
        '[study]\nmembers = "two VMs"\n' + (bad / "study.toml").read_text().split("\n", 1)[1]
    )
    processed = tmp_path / "processed"
    assert main(["ingest", str(bad), str(study), "--processed", str(processed), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "bad/study.toml: [study] members = 'two VMs'" in err and "not ingested: bad" in err
    assert (processed / study.name).exists() and not (processed / "bad").exists()


def test_inspect_prints_format_and_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(SAMPLE / "formats" / "randrw-4k.out")]) == 0
    out = capsys.readouterr().out
    assert "fio-json, fio-normal, fio-terse" in out and "read as fio-json+" in out
    assert main(["inspect", str(SAMPLE / "formats" / "randrw-4k.out"), "--format", "fio-terse"]) == 0
    assert "read as fio-terse" in capsys.readouterr().out


def test_inspect_reads_a_vdbench_folder_as_the_unit_it_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.conftest import corpus_dir

    folder = corpus_dir("vdbench") / "vdb__output"
    assert main(["inspect", str(folder)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(str(folder)) and "read as vdbench-output" in out and "runs: 8 rows" in out
    assert main(["inspect", str(tmp_path)]) == 2
    assert "a vdbench output folder" in capsys.readouterr().err


def test_a_vdbench_folder_whose_summary_is_quarantined_names_the_files_it_is_read_from(tmp_path: Path) -> None:
    """An empty summary.html: the folder is read from its totals; the files not needed say so, not 'its summary'."""
    from tests.conftest import corpus_dir

    study = tmp_path / "raw" / "vdt"
    shutil.copytree(corpus_dir("vdbench") / "vdb__output1", study / "out")
    (study / "out" / "summary.html").write_text("")
    (study / "study.toml").write_text('[study]\nname = "vdt"\n')
    report = ingest_study(study, tmp_path / "processed")
    assert [rel for rel, _ in report.quarantined] == ["out/summary.html"]
    reasons = {why for _, why in report.skipped if "not needed" in why}
    assert reasons and all("read from " in why and "totals.html" in why and "summary" not in why for why in reasons)


@pytest.mark.parametrize("stream", [False, True])
def test_streamed_and_in_memory_ingest_agree(stream: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Large logs and esxtop captures are streamed to Parquet; the result is the same table."""
    import benchlib.ingest.reading as reading
    from tests.conftest import corpus_dir

    study = tmp_path / "raw" / "mixed"
    study.mkdir(parents=True)
    # copies in the test's own folder: ingest does not follow links out of a study
    shutil.copyfile(corpus_dir("esxtop") / "esxtopd__small-esxtop-data.csv", study / "esxtop.csv")
    shutil.copyfile(corpus_dir("fio-logs") / "pbench-fio0-perf84__fio_bw.1.log", study / "fio_bw.1.log")
    monkeypatch.setattr(reading, "STREAM_BYTES", 0 if stream else 1 << 40)
    streamed = []
    write = reading.write_parquet
    monkeypatch.setattr(
        reading, "write_parquet", lambda frame, target: (streamed.append(target.parent.name), write(frame, target))
    )
    report = ingest_study(study, tmp_path / "processed")
    assert report.ok and sorted(report.ingested) == ["esxtop.csv", "fio_bw.1.log"]
    assert sorted(streamed) == (["host_counters", "intervals"] if stream else [])  # the lazy path really ran
    tables = load_study_tables(report.processed)
    assert tables.host_counters.height == 22890 and tables.intervals.height == 15
    assert tables.runs.filter(pl.col("format") == "esxtop")["duration_ns"][0] == 10 * 10**9
    assert tables.intervals["value"].sum() == pytest.approx(
        sum(float(line.split(",")[1]) * 1024 for line in (study / "fio_bw.1.log").read_text().splitlines())
    )


@pytest.mark.parametrize("stream", [False, True])
def test_a_log_row_with_more_values_than_its_first_is_quoted_streamed_or_not(
    stream: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """polars cannot read a row wider than the first: the refusal quotes that row, never polars' own words."""
    import benchlib.ingest.reading as reading
    from tests.conftest import corpus_dir

    study = tmp_path / "raw" / "ragged"
    study.mkdir(parents=True)
    lines = (corpus_dir("fio-logs") / "pbench-fio0-perf84__fio_bw.1.log").read_text().splitlines()
    (study / "fio_bw.1.log").write_text("\n".join([*lines[:3], lines[3] + ", 7, 8", *lines[4:]]) + "\n")
    monkeypatch.setattr(reading, "STREAM_BYTES", 0 if stream else 1 << 40)
    report = ingest_study(study, tmp_path / "processed")
    ((rel, why),) = report.quarantined
    assert rel == "fio_bw.1.log" and why.startswith("line 4: numeric fio log rows, each with the ")
    assert "found " in why and ", 7, 8'" in why and "polars" not in why.lower() and "new_columns" not in why


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("row", [3, 3000])
def test_a_log_row_shorter_than_the_first_is_refused_by_its_line(
    stream: bool, row: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 44: a row with fewer values than line 1 (cut by a full disk, then written on) read as a block size
    of none; near the top it was "not a supported format". Now it is refused quoting the row, in the first
    lines or deep in a log, streamed or not; the log beside it is kept."""
    import benchlib.ingest.reading as reading

    study = tmp_path / "raw" / "short"
    study.mkdir(parents=True)
    good = [f"{i * 1000}, {200 + i % 7}, {i % 2}, 4096" for i in range(1, 4001)]
    (study / "good_iops.1.log").write_text("\n".join(good) + "\n")
    lines = list(good)
    lines[row] = lines[row].rsplit(",", 1)[0]  # the block size gone
    (study / "cut_iops.1.log").write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(reading, "STREAM_BYTES", 0 if stream else 1 << 40)
    report = ingest_study(study, tmp_path / "processed")
    assert report.ingested == ["good_iops.1.log"]
    ((rel, why),) = report.quarantined
    assert rel == "cut_iops.1.log"
    assert why == f"line {row + 1}: numeric fio log rows, each with the 4 values of line 1; found 3: {lines[row]!r}"
    assert load_study_tables(report.processed).intervals["block_size_bytes"].null_count() == 0


@pytest.mark.parametrize("stream", [False, True])
def test_a_log_with_an_impossible_value_is_refused_streamed_or_not(
    stream: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 44: a bandwidth log with one value made negative is quarantined naming it, whether it is read in
    memory or streamed straight to Parquet (a large log), and leaves no part behind; the good log is kept."""
    import benchlib.ingest.reading as reading
    from tests.conftest import corpus_dir

    study = tmp_path / "raw" / "logs"
    study.mkdir(parents=True)
    good = (corpus_dir("fio-logs") / "pbench-fio0-perf84__fio_bw.1.log").read_text()
    (study / "good_bw.1.log").write_text(good)
    lines = good.splitlines()
    fields = lines[3].split(",")
    lines[3] = ",".join([fields[0], " -" + fields[1].strip(), *fields[2:]])
    (study / "bad_bw.1.log").write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(reading, "STREAM_BYTES", 0 if stream else 1 << 40)
    report = ingest_study(study, tmp_path / "processed")
    reasons = dict(report.quarantined)
    assert report.ingested == ["good_bw.1.log"] and list(reasons) == ["bad_bw.1.log"]
    assert "table intervals, row 4" in reasons["bad_bw.1.log"] and "value is -" in reasons["bad_bw.1.log"]
    stamp = int(lines[3].split(",")[0])  # the line, found by its time stamp (the log starts at 0 ms)
    assert f"logged {stamp:,} ms into the run" in reasons["bad_bw.1.log"]
    assert load_study_tables(report.processed).intervals.height == len(lines)  # the good log's rows only


def _recorded_run(study: Path, cell: str, levels: dict, log: Path) -> Path:
    """A run folder as `benchlib run` leaves it: a manifest and a log of one host."""
    folder = study / cell / "r1" / "attempt-1"
    (folder / "vm1").mkdir(parents=True)
    shutil.copy(log, folder / "vm1" / "cell_iops.1.log")
    manifest = {"levels": levels, "repetition": 1, "files": {"vm1/cell_iops.1.log": {"host": "vm1"}}}
    (folder / "benchlib-run.json").write_text(json.dumps(manifest))
    return folder


def test_identical_logs_of_different_recorded_runs_are_both_kept(tmp_path: Path) -> None:
    """A rate-capped IOPS log can repeat byte for byte in two cells; both are data, not duplicates."""
    study = tmp_path / "capped"
    study.mkdir()
    (study / "study.toml").write_text('[study]\nname = "capped"\n[factors]\nprofile = ["a", "b"]\n')
    log = RAW / "fio-sample" / "formats" / "randrw_iops.1.log"
    _recorded_run(study, "a", {"profile": "a"}, log)
    second = _recorded_run(study, "b", {"profile": "b"}, log)
    shutil.copy(log, study / "b" / "r1" / "attempt-1" / "vm1" / "copy_iops.1.log")  # a true duplicate inside one run
    report = ingest_study(study, tmp_path / "processed")
    assert len(report.ingested) == 2
    assert report.skipped == [
        ("b/r1/attempt-1/vm1/copy_iops.1.log", "same content as a/r1/attempt-1/vm1/cell_iops.1.log")
    ]
    tables = load_study_tables(tmp_path / "processed" / "capped")
    runs = tables.runs.sort("profile")
    assert runs["profile"].to_list() == ["a", "b"] and runs["host"].to_list() == ["vm1", "vm1"]
    assert runs["run_id"].n_unique() == 2 and runs["sha256"].n_unique() == 1
    per_run = tables.intervals.group_by("run_id").len()
    assert per_run.height == 2 and per_run["len"].n_unique() == 1

    again = ingest_study(study, tmp_path / "processed")  # unchanged: nothing redone
    assert again.ingested == [] and len(again.unchanged) == 2
    shutil.rmtree(second)  # removing the copy removes only its rows
    third = ingest_study(study, tmp_path / "processed")
    assert third.removed == ["b/r1/attempt-1/vm1/cell_iops.1.log"]
    tables = load_study_tables(tmp_path / "processed" / "capped")
    assert tables.runs["profile"].to_list() == ["a"] and tables.intervals["run_id"].n_unique() == 1


def _many_runs(folder: Path, count: int) -> None:
    """``count`` distinct fio json+ files: one real run of the bundled study, each copy with its own time stamp."""
    text = (SAMPLE / "bs-4k" / "randread-rep1.json").read_text()
    stamp = json.loads(text)["timestamp"]
    folder.mkdir(parents=True)
    for i in range(count):
        (folder / f"run-{i:04d}.json").write_text(
            text.replace(f'"timestamp" : {stamp}', f'"timestamp" : {stamp + i}', 1)
        )


def test_workers_match_one_process_and_a_script_without_main_guard_runs_once(tmp_path: Path) -> None:
    """More files than a batch go to worker processes while the rest is listed; the tables equal a one-process ingest.

    The caller's script has no ``if __name__ == "__main__"`` guard: workers must not run it again.
    """
    from benchlib.ingest import JSON_BATCH, PARALLEL_FROM

    files = PARALLEL_FROM + 7
    study = tmp_path / "raw" / "many"
    _many_runs(study, files)
    script = tmp_path / "unguarded.py"
    script.write_text(
        "import sys\nfrom benchlib.ingest import ingest_study\n"
        "print('script ran', flush=True)\n"
        f"report = ingest_study({str(study)!r}, {str(tmp_path / 'pool')!r})\n"
        "print('ingested', len(report.ingested), 'quarantined', len(report.quarantined))\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["script ran", f"ingested {files} quarantined 0"]
    parts = {p.stem for p in (tmp_path / "pool" / "many" / "results").glob("*.parquet")}
    assert len(parts) == files // JSON_BATCH + 1  # full batches in workers, the rest in the calling process

    serial = tmp_path / "serial"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("os.cpu_count", lambda: 1)
        ingest_study(study, serial)
    pooled, alone = load_study_tables(tmp_path / "pool" / "many"), load_study_tables(serial / "many")
    for name, frame in pooled.items():
        assert frame.equals(getattr(alone, name)), name
    assert pooled.runs.height == files and pooled.latency_bins.height > 0


def test_a_first_ingest_sorts_out_what_the_batches_hashed_as_when_this_process_hashes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a first ingest the batches hash the files; duplicates, empty files and UTF-16 JSON still come out as before.

    Batches of two: ``c.json`` repeats ``a.json`` of the batch before and was already extracted with ``d.json``
    (which is then extracted again without it); ``f.json`` is fio JSON in UTF-16, which the batches do not take
    from its first bytes; empty files: a log is skipped, another file quarantined, its copy skipped.
    """
    import codecs

    monkeypatch.setattr("benchlib.ingest.batches.BATCH", 2)
    runs = tmp_path / "runs"
    _many_runs(runs, 4)
    text = [(runs / f"run-{i:04d}.json").read_text() for i in range(4)]
    study = tmp_path / "raw" / "first"
    study.mkdir(parents=True)
    for name, content in {
        "a.json": text[0],
        "b.json": text[1],
        "c.json": text[0],
        "d.json": text[2],
        "e.json": text[2],
    }.items():
        (study / name).write_text(content)
    (study / "f.json").write_bytes(codecs.BOM_UTF16_LE + text[3].encode("utf-16-le"))
    for name in ("g_bw.1.log", "h.json", "i.json"):
        (study / name).write_bytes(b"")
    report = ingest_study(study, tmp_path / "processed")
    assert report.ingested == ["a.json", "b.json", "d.json", "f.json"]
    assert sorted(report.skipped) == [
        ("c.json", "same content as a.json"),
        ("e.json", "same content as d.json"),
        (
            "g_bw.1.log",
            "empty fio log (nothing logged: slat with a synchronous engine, or a run shorter than log_avg_msec)",
        ),
        ("i.json", "same content as h.json"),
    ]
    assert report.quarantined == [("h.json", "byte 0: output of a benchmark tool, but the file is empty")]
    tables = load_study_tables(report.processed)
    shas = {
        hashlib.sha256((study / name).read_bytes()).hexdigest() for name in ("a.json", "b.json", "d.json", "f.json")
    }
    assert tables.runs.height == 4 and set(tables.runs["sha256"]) == shas  # every run once, none of the copies
    assert tables.results.height == 4 and tables.latency_bins.height > 0
    assert not (report.processed / ".batches").exists()  # where workers leave results: gone when done
    again = ingest_study(study, tmp_path / "processed")  # this process hashes now: nothing to do
    assert sorted(again.unchanged) == report.ingested and not again.ingested
    assert again.quarantined == report.quarantined


def test_files_hashed_in_chunks_ingest_as_files_held_whole(
    study: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first ingest hashes large files in chunks (a 1 GB log must not sit in memory): same manifest, same tables."""
    whole = ingest_study(study, tmp_path / "whole")
    monkeypatch.setattr("benchlib.sources.fio_json_batch.WHOLE_BYTES", 100)  # every file of the study is "large" now
    monkeypatch.setattr("benchlib.sources.fio_json_batch.SNIFF_BYTES", 200)  # and its head shorter than the file
    chunked = ingest_study(study, tmp_path / "chunked")
    assert chunked.ingested == whole.ingested and chunked.skipped == whole.skipped and not chunked.quarantined
    manifest = [json.loads((r.processed / "manifest.json").read_text())["files"] for r in (whole, chunked)]
    assert {rel: e["sha256"] for rel, e in manifest[0].items()} == {rel: e["sha256"] for rel, e in manifest[1].items()}
    for name, frame in load_study_tables(whole.processed).items():
        assert frame.sort(frame.columns).equals(
            getattr(load_study_tables(chunked.processed), name).sort(frame.columns)
        ), name


def test_parts_left_by_an_interrupted_ingest_are_removed(study: Path, tmp_path: Path) -> None:
    """A part the manifest does not list would double rows: the next ingest deletes it.

    Such a part is left by an ingest stopped after writing it.
    """
    processed = tmp_path / "processed"
    report = ingest_study(study, processed)
    results = sorted((report.processed / "results").glob("*.parquet"))
    rows = load_study_tables(report.processed).results.height
    stray = results[0].with_name("b0123456789abcdef.parquet")
    shutil.copy(results[0], stray)
    assert load_study_tables(report.processed).results.height > rows  # read twice while it is there
    again = ingest_study(study, processed)
    assert not stray.exists() and not again.ingested
    assert load_study_tables(report.processed).results.height == rows


def test_two_ingests_of_one_study_at_once_leave_every_row_once(tmp_path: Path) -> None:
    """Two ingests of one study at the same time: the second waits, nothing is lost or doubled."""
    from benchlib.ingest import JSON_BATCH

    study = tmp_path / "raw" / "many"
    _many_runs(study, JSON_BATCH + 50)
    code = (
        "from benchlib.ingest import ingest_study\n"
        f"print(len(ingest_study({str(study)!r}, {str(tmp_path / 'processed')!r}).ingested))\n"
    )
    both = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = sorted(int(p.communicate(timeout=300)[0]) for p in both)
    assert [p.returncode for p in both] == [0, 0]
    assert outputs == [0, JSON_BATCH + 50]  # the one that waited found nothing to do
    tables = load_study_tables(tmp_path / "processed" / "many")
    assert tables.runs.height == JSON_BATCH + 50 and tables.runs["sha256"].n_unique() == JSON_BATCH + 50
    assert tables.results.height == JSON_BATCH + 50


def test_processed_data_of_another_schema_version_is_refused_with_what_to_do(study: Path, tmp_path: Path) -> None:
    from benchlib.errors import BenchlibError
    from benchlib.schema import SCHEMA_VERSION
    from benchlib.store import MANIFEST

    report = ingest_study(study, tmp_path / "processed")
    manifest = report.processed / MANIFEST
    old = {
        **json.loads(manifest.read_text()),
        "schema_version": SCHEMA_VERSION - 1,
        "study_key": "written by an older benchlib",
    }
    manifest.write_text(json.dumps(old, indent=2))
    with pytest.raises(BenchlibError, match=f"schema version {SCHEMA_VERSION - 1}.*run `benchlib ingest`"):
        load_study_tables(report.processed)
    assert ingest_study(study, tmp_path / "processed").ingested  # a new ingest rebuilds every part
    assert load_study_tables(report.processed).latency_bins.height > 0


@pytest.mark.parametrize("name", ["host", "repetition", "vm", "run"])
def test_a_factor_named_like_a_runs_own_column_is_refused_by_name(tmp_path: Path, name: str) -> None:
    """A factor called host or repetition crashed ingest with polars' DuplicateError; now study.toml is refused."""
    from benchlib.errors import StudyError

    study = tmp_path / "clash"
    study.mkdir()
    (study / "study.toml").write_text(f'[study]\nname = "clash"\n[factors]\n{name} = ["a", "b"]\n')
    with pytest.raises(StudyError, match=rf"\[factors\] '{name}' is a name benchlib uses .* e\.g\. {name}_level"):
        ingest_study(study, tmp_path / "processed")
