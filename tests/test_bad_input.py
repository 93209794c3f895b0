"""Bad input: every case ends in one FormatError naming the file and the place; a batch keeps the good files."""

from __future__ import annotations

import codecs
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchlib.cli import main
from benchlib.errors import FormatError
from benchlib.ingest import ingest_study
from benchlib.sources import detect, read
from tests.conftest import corpus_dir
from tests.fio_helpers import run_fio


@pytest.fixture(scope="module")
def good_json(fio_binary: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    workdir = tmp_path_factory.mktemp("good")
    return run_fio(fio_binary, workdir, "good", "--rw=randread", "--bs=4k", formats="json", logs=False)


@pytest.fixture(scope="module")
def zero_io_json(fio_binary: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real fio run whose only job's target is a folder: fio reports error 21 and a JSON with no I/O."""
    workdir = tmp_path_factory.mktemp("zero")
    (workdir / "a-folder").mkdir()
    output = workdir / "zero.json"
    subprocess.run(
        [
            fio_binary,
            "--name=broken",
            f"--filename={workdir / 'a-folder'}",
            "--rw=read",
            "--size=1M",
            "--output-format=json",
            f"--output={output}",
        ],
        capture_output=True,
        timeout=60,
        check=False,
    )
    return output


def _bad_files(folder: Path, good_json: Path, zero_io_json: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    text = good_json.read_text()
    files = {
        "empty": folder / "empty.json",
        "truncated": folder / "truncated.json",
        "binary": folder / "binary.out",
        "latin1": folder / "latin1.out",
        "long-line": folder / "long-line.out",
        "zero-io": folder / "zero-io.json",
    }
    files["empty"].write_bytes(b"")
    files["truncated"].write_text(text[: len(text) // 2])
    files["binary"].write_bytes(bytes(range(256)) * 64)
    files["latin1"].write_bytes(
        b"job: (groupid=0, jobs=1): err= 0: pid=1: caf\xe9\n  read: IOPS=1, BW=4KiB/s (4kB/s)(4KiB/1000msec)\n"
    )
    files["long-line"].write_text("x" * 5_000_000)
    files["zero-io"].write_bytes(zero_io_json.read_bytes())
    return files


EXPECTED = {
    "empty": r"byte 0: .*empty",
    "truncated": r"line \d+: .*truncated",
    "binary": r"byte 0: .*binary",
    "latin1": r"line 1, byte \d+: .*not UTF-8",
    "long-line": r"first 64 KiB: .*supported tool",
    "zero-io": r"none with I/O \(fio error 21\)",
}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_each_bad_file_is_one_clear_format_error(
    case: str, tmp_path: Path, good_json: Path, zero_io_json: Path
) -> None:
    path = _bad_files(tmp_path, good_json, zero_io_json)[case]
    with pytest.raises(FormatError, match=EXPECTED[case]) as caught:
        read(path)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize(
    ("other", "fmt"),
    [
        ("vdbench/vdb__output/totals.html", "vdbench-output"),
        ("vdbench/vdb__output/summary.html", "vdbench-output"),
        ("vdbench/vdbconvert__multihost_test.txt", "vdbench-parmfile"),
    ],
)
def test_other_tools_output_is_not_taken_for_fio(other: str, fmt: str) -> None:
    path = corpus_dir("vdbench").parent / other
    assert detect(path) == fmt


def test_utf16_with_bom_is_read(tmp_path: Path, good_json: Path) -> None:
    """PowerShell's `>` writes UTF-16 with a BOM; that is still fio output."""
    path = tmp_path / "powershell.json"
    path.write_bytes(codecs.BOM_UTF16_LE + good_json.read_text().encode("utf-16-le"))
    assert read(path).results.height == read(good_json).results.height


def test_a_batch_keeps_every_good_file(
    tmp_path: Path, good_json: Path, zero_io_json: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study = tmp_path / "raw" / "mixed"
    files = _bad_files(study / "bad", good_json, zero_io_json)
    (study / "good.json").write_bytes(good_json.read_bytes())
    report = ingest_study(study, tmp_path / "processed")
    assert report.ingested == ["good.json"]
    assert sorted(rel for rel, _ in report.quarantined) == sorted(f"bad/{p.name}" for p in files.values())
    quarantine = (tmp_path / "processed" / "mixed" / "quarantine.csv").read_text()
    assert "bad/truncated.json" in quarantine and "truncated" in quarantine
    assert main(["ingest", str(study), "--processed", str(tmp_path / "processed"), "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "6 quarantined" in out and "quarantine.csv" in out


def test_pdsh_prefixed_json_is_read_with_its_host(tmp_path: Path, good_json: Path) -> None:
    """pdsh/clush prefix every line of remote output with 'host: '; the host becomes the client."""
    prefixed = tmp_path / "pdsh.out"
    prefixed.write_text("".join(f"vm-07: {line}\n" for line in good_json.read_text().splitlines()))
    tables = read(prefixed)
    plain = read(good_json)
    assert tables.results["client"].unique().to_list() == ["vm-07"]
    assert tables.runs["host"].to_list() == ["vm-07"]
    assert tables.results["iops"].to_list() == plain.results["iops"].to_list()


def test_a_character_cut_by_the_detection_window_is_not_an_encoding_error(tmp_path: Path, good_json: Path) -> None:
    """Detection reads the first 64 KiB; a two-byte character across that boundary is still UTF-8."""
    from benchlib.sources._common import SNIFF_BYTES

    text = good_json.read_text() + "\n"
    padding = "x" * (SNIFF_BYTES - 1 - len(text.encode())) + "é\n"  # 'é' takes bytes 65535 and 65536
    path = tmp_path / "study" / "warned.json"
    path.parent.mkdir()
    path.write_text(text + padding, encoding="utf-8")
    assert path.read_bytes()[SNIFF_BYTES - 1 : SNIFF_BYTES + 1] == "é".encode()
    assert detect(path) == "fio-json"
    report = ingest_study(path.parent, tmp_path / "processed")
    assert report.ingested == ["warned.json"] and not report.quarantined


def test_no_failure_of_one_file_escapes_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A count made negative, JSON nested 100,000 deep and a NaN beside good files: the good files are all kept,
    the bad ones quarantined with the reason, exit 1 (some quarantined), no traceback."""
    import polars as pl

    from benchlib.errors import ImpossibleValue
    from benchlib.schema import Tables

    study = tmp_path / "study"
    study.mkdir()
    good = sorted(corpus_dir("fio-json").glob("fio-plot-*.json"))[:6]
    for path in good:
        (study / path.name).write_bytes(path.read_bytes())
    text = good[0].read_text()
    (study / "negative.json").write_text(text.replace('"total_ios" : ', '"total_ios" : -', 1))
    (study / "deep.json").write_text('{"fio version": "fio-3.1", "jobs": ' + "[" * 100_000 + "]" * 100_000 + "}")
    (study / "nan.json").write_text(text.replace('"iops" : ', '"iops" : NaN, "was" : ', 1))
    report = ingest_study(study, tmp_path / "processed")
    assert sorted(report.ingested) == sorted([p.name for p in good] + ["nan.json"])  # NaN read as unknown (null)
    reasons = dict(report.quarantined)
    assert set(reasons) == {"negative.json", "deep.json"}
    assert "io_count is -" in reasons["negative.json"] and "below 0" in reasons["negative.json"]
    assert "RecursionError" in reasons["deep.json"]
    assert main(["ingest", str(study), "--processed", str(tmp_path / "again"), "--quiet"]) == 1
    assert "Traceback" not in capsys.readouterr().err
    with pytest.raises(ImpossibleValue, match="iops is inf"):
        Tables.build(results=pl.DataFrame({"run_id": ["r"], "iops": [float("inf")]}))


@pytest.mark.fio
def test_a_failed_fio_run_is_quarantined_with_fios_own_words(fio_binary: str, tmp_path: Path) -> None:
    """fio's error output saved as its results, and a normal-format run whose job failed: each is quarantined
    quoting fio's error line (the run failed, not the parser), and the good file beside them is kept."""
    study = tmp_path / "study"
    study.mkdir()
    with (study / "typo.json").open("w") as out:  # "fio ... --output-format=json > typo.json 2>&1"
        subprocess.run([fio_binary, "--name=x", "--bogus_option=1", "--output-format=json"], stdout=out, stderr=out)
    subprocess.run(  # writing to /proc/version fails for root too: fio prints err=, func= and the error
        [fio_binary, "--name=y", "--filename=/proc/version", "--rw=write", "--size=4k", f"--output={study / 'y.out'}"],
        capture_output=True,
    )
    run_fio(fio_binary, study / "good", "good", "--rw=randread", "--runtime=1", formats="json+", logs=False)
    (study / "good" / "scratch.dat").unlink()
    report = ingest_study(study, tmp_path / "processed")
    quarantined = dict(report.quarantined)
    assert "fio's error output" in quarantined["typo.json"] and "bogus_option" in quarantined["typo.json"]
    assert "the run failed and fio said: fio: pid=" in quarantined["y.out"] and "err=" in quarantined["y.out"]
    assert report.ingested == ["good/good.out"]


def test_an_esxtop_capture_keeps_every_readable_column_and_its_complete_samples(tmp_path: Path) -> None:
    """Stray characters around one quoted counter name and a name that is no counter cost those two columns
    only; a capture stopped mid-line keeps the samples before the cut; both are said, as notes."""
    original = (corpus_dir("esxtop") / "esxtopd__small-esxtop-data.csv").read_bytes()
    end = original.index(b"\n")
    cells = original[:end].decode().split(",")
    cells[5] = "x" + cells[5] + 'junk"'  # a stray quote: must not swallow the samples after it
    cells[9] = '"not a counter"'
    study = tmp_path / "study"
    study.mkdir()
    (study / "edited.csv").write_bytes(",".join(cells).encode() + original[end:])
    last = original.rstrip(b"\n").rindex(b"\n")
    (study / "cut.csv").write_bytes(original[: last + 200])  # the third sample cut after 200 bytes
    report = ingest_study(study, tmp_path / "processed")
    assert not report.quarantined
    notes = dict(report.notes)
    assert notes["edited.csv"].startswith("2 columns without an esxtop counter name left out: column 6")
    assert notes["cut.csv"] == "its last line was cut off (no newline at the end): left out"
    full = read(corpus_dir("esxtop") / "esxtopd__small-esxtop-data.csv").host_counters
    edited = read(study / "edited.csv").host_counters
    assert full.height - edited.height == 2 * full["sample"].n_unique()  # two columns, every sample
    cut = read(study / "cut.csv").host_counters
    assert cut["sample"].max() == full["sample"].max() - 1 and cut.height == full.height * 2 // 3


def test_a_fio_log_cut_inside_its_last_line_loses_that_line_only(tmp_path: Path) -> None:
    log = corpus_dir("fio-logs") / "SO-Kernel-trace__iops_iops.1.log"
    cut = tmp_path / "cut_iops.1.log"
    cut.write_bytes(log.read_bytes()[:-9])  # "78, 1, 0, 131072, 0" cut to "78, 1, 0, 1"
    whole, part = read(log).intervals, read(cut).intervals
    assert part.height == whole.height - 1 and part["value"].to_list() == whole["value"].to_list()[:-1]


_FUZZ_SOURCES = [
    ("fio-json", "fio-plot-P420i-INTEL-RW__randrw-16-4.json"),
    ("fio-json", "pkb__fio-parser-sample-result.json"),
    ("fio-normal", "ceph-fio-results-erasure21__rw-4k.out"),
    ("fio-logs", "SO-Kernel-trace__lat_clat.1.log"),
    ("fio-logs", "fio-plot-HIGHPOINT-RAID5RW__randrw-iodepth-8-numjobs-8_iops.1.log"),
    ("esxtop", "VisualEsxtopOnline-1000__origincsvfile.csv"),
]
_BAD_NUMBERS = ["NaN", "nan", "-1", "-0.5", "1e309", "inf", "-inf", "", "99999999999999999999999", "abc", "0x1f"]


def _mutate(text: bytes, mutation: str, where: float, bad: str) -> bytes:
    """Return a file's text with one mutation at ``where`` (a share of its numbers, lines or bytes)."""
    import re

    numbers = [m.span() for m in re.finditer(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", text)]
    at = int(where * (len(numbers) - 1)) if numbers else 0
    if mutation == "number" and numbers:
        start, end = numbers[at]
        return text[:start] + bad.encode() + text[end:]
    if mutation in ("sign", "grow") and numbers:
        start, end = numbers[at]
        number = text[start:end]
        changed = number[1:] if number.startswith(b"-") else b"-" + number
        return text[:start] + (changed if mutation == "sign" else number + b"e25") + text[end:]
    if mutation == "swap" and len(numbers) > 1:
        (a0, a1), (b0, b1) = numbers[min(at, len(numbers) - 2)], numbers[min(at, len(numbers) - 2) + 1]
        return text[:a0] + text[b0:b1] + text[a1:b0] + text[a0:a1] + text[b1:]
    if mutation == "truncate":
        return text[: int(where * len(text))]
    if mutation == "drop_line":
        lines = text.split(b"\n")
        del lines[int(where * (len(lines) - 1))]
        return b"\n".join(lines)
    at = int(where * len(text))
    return text[:at] + b'\x00\xff{]",' + text[at:]


@settings(max_examples=70, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    source=st.sampled_from(_FUZZ_SOURCES),
    mutation=st.sampled_from(["number", "truncate", "drop_line", "garbage", "sign", "grow", "swap"]),
    where=st.floats(min_value=0.0, max_value=1.0),
    bad=st.sampled_from(_BAD_NUMBERS),
)
def test_a_mutated_corpus_file_never_escapes_ingest_nor_costs_the_others(
    source: tuple[str, str], mutation: str, where: float, bad: str
) -> None:
    """Each example: one real corpus file, mutated (a number made NaN, negative, huge or text; a number's sign
    flipped, its exponent grown, or two neighbouring numbers swapped, as percentiles; the file cut anywhere; a
    line dropped; bytes of garbage), beside two good files. Ingest never raises; the good files are kept; no
    table holds NaN, an infinity, a negative count, size, time or rate, or a row that breaks a rule no real
    measurement breaks (percentiles in order, a mean within its min and max, a rate its count allows)."""
    import tempfile

    from benchlib.schema import _NON_NEGATIVE, TABLES, broken_rules
    from benchlib.store import load_study_tables

    folder, name = source
    text = _mutate((corpus_dir(folder) / name).read_bytes(), mutation, where, bad)
    with tempfile.TemporaryDirectory() as tmp:
        study = Path(tmp) / "study"
        study.mkdir()
        (study / "mutated").mkdir()
        (study / "mutated" / name).write_bytes(text)  # the name as the tool wrote it (fio logs are told by name)
        good = [
            corpus_dir("fio-json") / "fio-plot-ceph-ssd__randwrite-4-1.json",
            corpus_dir("esxtop") / "esxtopd__small-esxtop-data.csv",
        ]
        for path in good:
            (study / path.name).write_bytes(path.read_bytes())
        report = ingest_study(study, Path(tmp) / "processed")  # never raises
        assert {p.name for p in good} <= set(report.ingested)
        tables = load_study_tables(report.processed)
        for table, frame in tables.items():
            for column, dtype in frame.schema.items():
                if dtype.is_float():
                    assert not frame[column].is_nan().any() and not frame[column].is_infinite().any(), (table, column)
            for column in _NON_NEGATIVE[table]:
                assert not (frame[column] < 0).any(), (table, column)
            if table in TABLES:  # the stored bins' lists are checked as they are written
                assert broken_rules(frame, table) == 0, (table, mutation)


def test_a_latency_log_whose_unit_nothing_states_says_which_it_assumed(tmp_path: Path) -> None:
    """A fio 2.x latency log alone (us) would be read 1,000 times too small without a word: ingest says
    which unit it assumed and how to set it; with the unit declared, or output beside it, it says nothing."""
    study = tmp_path / "study"
    study.mkdir()
    for name in ("SO-Kernel-trace__lat_clat.1.log", "SO-Kernel-trace__iops_iops.1.log"):
        (study / name).write_bytes((corpus_dir("fio-logs") / name).read_bytes())
    notes = dict(ingest_study(study, tmp_path / "p1").notes)
    assert list(notes) == ["SO-Kernel-trace__lat_clat.1.log"]  # an IOPS log has no latency unit
    assert (
        "read as ns (fio 3.x)" in notes["SO-Kernel-trace__lat_clat.1.log"]
        and 'log_latency_unit = "us"' in (notes["SO-Kernel-trace__lat_clat.1.log"])
    )
    (study / "study.toml").write_text('[study]\nname = "s"\n[fio]\nlog_latency_unit = "us"\n')
    assert not ingest_study(study, tmp_path / "p2").notes


def test_notes_and_job_files_are_listed_with_why_they_were_not_read(tmp_path: Path) -> None:
    """Every file ingest leaves out is listed; a note that quotes fio output says so, and how to ingest it."""
    output = (corpus_dir("fio-normal") / "ceph-fio-results-erasure21__rw-4k.out").read_text()
    study = tmp_path / "raw" / "notes"
    study.mkdir(parents=True)
    (study / "run1.txt").write_text(output)
    (study / "notes.md").write_text(f"# What I saw\n\nOn the PVSCSI VM:\n\n```\n{output}```\n\nDone.\n")
    (study / "README.md").write_text("# Notes\n\nNothing pasted here.\n")
    (study / "job.fio").write_text("[global]\nrw=randread\n")
    report = ingest_study(study, tmp_path / "processed")
    skipped = dict(report.skipped)
    assert report.ingested == ["run1.txt"] and report.quarantined == []
    assert skipped["README.md"] == "notes or documentation; not read"
    assert "holds what reads as fio-normal output" in skipped["notes.md"] and "a file of its own" in skipped["notes.md"]
    assert skipped["job.fio"] == "a job or configuration file; not read"
    assert [name for name, _ in detect_all_named(study / "notes.md")] == ["fio-normal"]  # as inspect reads it


def detect_all_named(path: Path) -> list[tuple[str, Path]]:
    from benchlib.sources import detect_all

    return [(name, path) for name in detect_all(path)]


@pytest.mark.parametrize(
    ("levels", "says"),
    [
        ('[levels.tset]\nseqread = "sequential read"', "[levels.tset] names a factor [factors] does not declare"),
        ('[levels.test]\nseqraed = "sequential read"', "gives words for 'seqraed', which is not one of its levels"),
        ('[levels.test]\nseqread = "read, sequential"', "give the level in words: letters, digits"),
        ('[levels.test]\nseqread = "read / sequential"', "no ' / '"),
        ('[levels.test]\nseqread = "<script>alert(1)</script>"', "letters, digits"),
        ('[levels.test]\nseqread = "**read**"', "letters, digits"),
        ('[levels.test]\nseqread = "[read](javascript:x)"', "letters, digits"),
        ('[levels.test]\nseqread = "seq_read"', "letters, digits"),
        ('[levels.test]\nseqread = "read\\nwrite"', "letters, digits"),
        ('[levels.test]\nseqread = "  "', "give the level in words"),
        ('[levels.test]\nseqread = ""', "give the level in words"),
        ("[levels.test]\nseqread = 3", "give the level in words"),
        ('[levels.test]\nseqread = "randread"', "'randread' would name two of its levels"),
        ('[levels.test]\nseqread = "read"\nrandread = "read"', "'read' would name two of its levels"),
        ('[levels]\ntest = "words"', "[levels.test] must be a table of level = words"),
        (
            '[levels.table]\nseqread_per_vm = "per_vm"',
            "[levels.table] seqread_per_vm = 'per_vm'; give the level in words",
        ),
    ],
)
def test_level_words_that_would_mislead_are_refused_with_the_place_to_fix(tmp_path: Path, levels: str, says: str):
    """[levels] for an undeclared factor or level, with list punctuation, or naming two levels alike: refused."""
    from benchlib.errors import StudyError
    from benchlib.study import load_study

    (tmp_path / "study.toml").write_text(f'[factors]\ntest = ["seqread", "randread"]\n{levels}\n')
    with pytest.raises(StudyError) as refused:
        load_study(tmp_path)
    assert says in str(refused.value) and "study.toml" in str(refused.value)


@pytest.mark.parametrize("value", ['"300 s"', "-5", "0", "true", "inf", "nan", "[300]"])
def test_a_stated_runtime_that_is_no_length_is_refused(tmp_path: Path, value: str):
    """[study] runtime_s is a positive number of seconds: words, a list, 0, NaN or inf are refused by name."""
    from benchlib.errors import StudyError
    from benchlib.study import load_study

    (tmp_path / "study.toml").write_text(f"[study]\nruntime_s = {value}\n")
    with pytest.raises(StudyError, match=r"study.toml: \[study\] runtime_s = .*a positive number"):
        load_study(tmp_path)
    (tmp_path / "study.toml").write_text("[study]\nruntime_s = 300\n")
    assert load_study(tmp_path).stated_runtime_s == 300.0


@pytest.mark.parametrize("value", ['"1 us"', "-1", "0", "true", "inf", "nan", "[1]"])
def test_a_fastest_direct_latency_that_is_no_time_is_refused(tmp_path: Path, value: str):
    """[study] fastest_direct_us (memory-fast storage's quickest answer) is a positive number of µs."""
    from benchlib.errors import StudyError
    from benchlib.study import load_study

    (tmp_path / "study.toml").write_text(f"[study]\nfastest_direct_us = {value}\n")
    with pytest.raises(StudyError, match=r"\[study\] fastest_direct_us = .*quickest median completion in µs"):
        load_study(tmp_path)
    (tmp_path / "study.toml").write_text("[study]\nfastest_direct_us = 0.8\n")
    assert load_study(tmp_path).fastest_direct_us == 0.8


@pytest.mark.parametrize("value", ['"two VMs"', '"VM<b>"', '""', "3", '["VM"]', '"jobs_1"'])
def test_members_that_are_not_one_word_are_refused(tmp_path: Path, value: str):
    """[study] members is one word of letters, said on every page ("VMs", "jobs"): markup, digits or a phrase
    are refused by name."""
    from benchlib.errors import StudyError
    from benchlib.study import load_study

    (tmp_path / "study.toml").write_text(f"[study]\nmembers = {value}\n")
    with pytest.raises(StudyError, match=r"study.toml: \[study\] members = .*one word of letters"):
        load_study(tmp_path)
    (tmp_path / "study.toml").write_text('[study]\nmembers = "vm"\n')
    assert load_study(tmp_path).members == "VM"


def _root_with(*tools: str) -> None:
    import os
    import shutil

    if os.geteuid() != 0 or any(shutil.which(t) is None for t in tools):
        pytest.skip(f"needs root and {', '.join(tools)}")


def test_a_folder_of_the_study_that_cannot_be_listed_is_named_with_why(good_json: Path) -> None:
    """Run as an ordinary user (nobody), ingest cannot list a folder of 0700 that is root's: it says so, and
    reads the rest; nothing is passed over without a word."""
    import json
    import os
    import shutil
    import sys
    import tempfile

    _root_with("setpriv")
    base = Path(tempfile.mkdtemp(prefix="benchlib-unreadable-", dir="/tmp"))
    try:
        base.chmod(0o755)
        study = base / "study"
        (study / "locked").mkdir(parents=True)
        (study / "open").mkdir()
        shutil.copy(good_json, study / "open" / "run.json")
        shutil.copy(good_json, study / "locked" / "run.json")
        for folder in (study, study / "open"):
            folder.chmod(0o755)
        (study / "open" / "run.json").chmod(0o644)
        (study / "locked").chmod(0o700)
        script = (
            "import json, sys; from benchlib.study import study_files; "
            "print(json.dumps([[rel, why] for _, rel, why in study_files(sys.argv[1])]))"
        )
        done = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", script, str(study)],
            capture_output=True,
            text=True,
            check=False,
            cwd=Path(__file__).parent.parent,
            env={**os.environ, "HOME": str(base)},
        )
        if done.returncode and "Permission denied" in done.stderr and "benchlib" not in done.stdout:
            pytest.skip(f"the user nobody cannot run this checkout's Python: {done.stderr.strip()[-200:]}")
        listed = dict(json.loads(done.stdout))
        assert listed["open/run.json"] is None
        assert "a folder that cannot be listed (Permission denied)" in listed["locked"]
    finally:
        shutil.rmtree(base)


def test_a_processed_folder_that_cannot_be_written_is_one_message(
    tmp_path: Path, good_json: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    _root_with("chattr")
    study = tmp_path / "study"
    study.mkdir()
    shutil.copy(good_json, study / "run.json")
    processed = tmp_path / "processed"
    processed.mkdir()
    if subprocess.run(["chattr", "+i", str(processed)], capture_output=True, check=False).returncode:
        pytest.skip("this file system keeps no immutable flag")
    try:
        assert main(["ingest", str(study), "--processed", str(processed)]) == 2
    finally:
        subprocess.run(["chattr", "-i", str(processed)], check=True)
    said = capsys.readouterr().err
    assert "Operation not permitted" in said and "--processed, or BENCHLIB_DATA" in said and "Traceback" not in said


def test_refusals_quote_what_they_found(tmp_path: Path) -> None:
    """Issue 44: fio's own error line verbatim where the run failed, the opening lines of a file no format
    fits (a script's summary of a run), and a start time no clock gives, each named with where it was."""
    import json

    study = tmp_path / "study"
    study.mkdir()
    (study / "maxjobs.out").write_text(
        "job1: (g=0): rw=randread, bs=(R) 4096B-4096B, (W) 4096B-4096B, (T) 4096B-4096B, ioengine=libaio, "
        "iodepth=32\nfio-3.28\nStarting 9 processes\nerror: maximum number of jobs (8) reached.\n"
    )
    (study / "summary.txt").write_text("Benchmark summary\nMax read throughput: 32186 IOPS\n")
    doc = json.loads((corpus_dir("fio-json") / "fio-plot-ceph-ssd__randwrite-4-1.json").read_text())
    doc["timestamp_ms"] = 10**18
    for job in doc["jobs"]:
        job.pop("job_start", None)
    (study / "far.json").write_text(json.dumps(doc))
    reasons = dict(ingest_study(study, tmp_path / "processed").quarantined)
    assert "fio said: error: maximum number of jobs (8) reached." in reasons["maxjobs.out"]
    assert "found 'Benchmark summary' then 'Max read throughput: 32186 IOPS'" in reasons["summary.txt"]
    assert "summary a script wrote" in reasons["summary.txt"]
    assert reasons["far.json"].startswith("key timestamp_ms: 999,999,999,999,9") and "no clock" in reasons["far.json"]


def test_a_file_no_format_fits_is_told_the_step_its_content_calls_for(tmp_path: Path) -> None:
    """Each refusal quotes what it found, and what to do follows from it: a script's summary is told to keep the
    tool's own file, a CSV how a write-up's table is declared, anything else to leave the study folder; none is
    told it is a summary when it is not."""
    study = tmp_path / "study"
    study.mkdir()
    (study / "latency.txt").write_text("read: 4.2 ms average\nwrite: 6.1 ms average\n")
    (study / "table.csv").write_text("vm,iops\nvm1,1200\n")
    (study / "page.html").write_text("<html><body>results</body></html>\n")
    reasons = dict(ingest_study(study, tmp_path / "processed").quarantined)
    assert "found 'read: 4.2 ms average' then 'write: 6.1 ms average'" in reasons["latency.txt"]
    assert "summary a script wrote" in reasons["latency.txt"]
    assert "found 'vm,iops' then 'vm1,1200'" in reasons["table.csv"]
    assert "'# benchlib published table'" in reasons["table.csv"] and "a script wrote" not in reasons["table.csv"]
    assert "found '<html><body>results</body></html>'" in reasons["page.html"]
    assert "outside the study folder" in reasons["page.html"] and "a script wrote" not in reasons["page.html"]
