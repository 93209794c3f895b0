"""Issue 44: a refusal quotes what it found, beside what it expected and what to do."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from benchlib.errors import FormatError
from benchlib.paths import PROJECT_ROOT
from benchlib.sources import read


def _quotes_its_evidence(call: ast.Call) -> bool:
    """Whether a ``FormatError(...)`` call names what it found: ``found=``, or a reason that quotes it.

    A reason quotes it where it says "found ..." or "..., but ...", names a value it refused ("not {x!r}"),
    or carries the error that stopped the read (an exception's own words: ``exc``, ``reason``).
    """
    if any(k.arg == "found" for k in call.keywords):
        return True
    reason = call.args[2] if len(call.args) >= 3 else None
    if reason is None:
        return False
    text = ast.unparse(reason)
    names = {n.id for n in ast.walk(reason) if isinstance(n, ast.Name)}
    return "found" in text or " but " in text or "not {" in text or bool(names & {"exc", "reason", "said"})


def test_every_refusal_in_the_code_names_what_it_found() -> None:
    """Every place that refuses a file (60 today) quotes its evidence: a new one that only says what it
    expected ('a CSV header after the comment lines') fails here."""
    calls = [
        (path.relative_to(PROJECT_ROOT), node)
        for path in sorted((PROJECT_ROOT / "benchlib").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "FormatError"
    ]
    assert len(calls) >= 50  # the walk found the readers' refusals
    silent = [f"{path}:{node.lineno}" for path, node in calls if not _quotes_its_evidence(node)]
    assert silent == []


@pytest.mark.parametrize(
    ("fmt", "text", "quoted"),
    [
        ("published-table", "# citation: x\nvm,colour\na,red\n", "found 'vm,colour'"),
        ("published-table", "vm,iops\na,1\n", "found columns 'vm, iops' and no such line"),
        ("published-table", "# citation: x\nvm,iops\n", "found the header alone"),
        ("fio-terse", "2;fio-2.1;job" + ";0" * 120 + "\n", "found version 2: '2;fio-2.1;job"),
        ("fio-terse", "hello\n", "found none; the first line is 'hello'"),
        ("fio-json", '{"fio version": "fio-3.33", "jobs": {"a": 1}}\n', "found a dict: \"{'a': 1}\""),
        ("fio-json", '{"fio version": "fio-3.33", "time": 1}\n', "found keys fio version, time"),
        ("fio-json", "Starting 1 process\n", "found 'Starting 1 process'"),
        ("fio-normal", "Starting 1 process\n", "found none; the first line is 'Starting 1 process'"),
        ("esxtop", "Time,CPU\n1,2\n", "found 'Time,CPU'"),
        ("hcibench-summary", "IOPS = 5 IO/S\n", "found 'IOPS = 5 IO/S'"),
    ],
)
def test_a_refused_file_is_quoted_in_its_reason(fmt: str, text: str, quoted: str, tmp_path: Path) -> None:
    """Files handed to a reader that cannot read them: the reason quotes the line or keys it found."""
    path = tmp_path / "file.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FormatError) as refused:
        read(path, fmt)
    assert quoted in str(refused.value)


def test_an_esxtop_capture_whose_sample_times_cannot_be_read_is_refused_at_the_first_bad_one(tmp_path: Path) -> None:
    """A real capture with one sample's time mangled: before, a bad first time left every sample unplaced
    (all 22,890 times null, exit 0) and a later one left that sample unplaced silently. Now the line and
    the cell are quoted; a header alone is refused too. A spreadsheet's time-of-day resave is still read."""
    from tests.conftest import corpus_dir

    lines = (corpus_dir("esxtop") / "esxtopd__small-esxtop-data.csv").read_text().splitlines(keepends=True)
    cases = {
        "first.csv": (1, "line 2, column 1", "found '13/45/2018 99:99:99'"),
        "later.csv": (3, "line 4, column 1", "found '13/45/2018 99:99:99'"),
    }
    for name, (row, where, quoted) in cases.items():
        cells = lines[row].split(",", 1)
        mangled = [*lines[:row], '"13/45/2018 99:99:99",' + cells[1], *lines[row + 1 :]]
        (tmp_path / name).write_text("".join(mangled))
        with pytest.raises(FormatError) as refused:
            read(tmp_path / name, "esxtop")
        assert f"{where}: " in str(refused.value) and quoted in str(refused.value)
    (tmp_path / "header.csv").write_text(lines[0])
    with pytest.raises(FormatError, match="esxtop samples after the header; found the header alone"):
        read(tmp_path / "header.csv", "esxtop")


def test_a_job_or_interval_line_whose_figures_do_not_read_is_refused_not_left_out(tmp_path: Path) -> None:
    """fio normal output with one job's 'read: IOPS=abc' line, and a vdbench report with a garbled avg_ line:
    before, that job (16 rows to 15) or that run's results vanished with exit 0; now the line is quoted."""
    from tests.conftest import corpus_dir

    text = (corpus_dir("fio-normal") / "pve-scripts__fio.out").read_text()
    assert "IOPS=2043," in text
    (tmp_path / "fio.out").write_text(text.replace("IOPS=2043,", "IOPS=abc,", 1))
    with pytest.raises(FormatError, match=r"line 13: a direction line as fio prints it .*; found 'read: IOPS=abc,"):
        read(tmp_path / "fio.out", "fio-normal")
    report = (corpus_dir("vdbench") / "vdb__output1" / "summary.html").read_text()
    line = next(x for x in report.splitlines() if "avg_" in x)
    figures = line.split("avg_", 1)[1].split()
    garbled = line.replace(figures[1], "XX" + figures[1], 1)
    (tmp_path / "summary.html").write_text(report.replace(line, garbled))
    with pytest.raises(FormatError, match="an interval line of numbers .*; found '"):
        read(tmp_path / "summary.html", "vdbench-console")


@pytest.mark.parametrize(
    ("fmt", "text", "quoted"),
    [
        ("fio-log", "500, 288, 9, 0\n1000, 290, 9, 0\n", "line 1, column 3: fio's direction there"),  # ddir 9
        ("fio-log", "0, 0, 288, 500\n0, 0, 290, 1000\n", "found '0, 0, 288, 500'"),  # columns swapped
        ("published-table", "# citation: x\ntest,iops,iops\na,1,2\n", "found iops twice"),
        ("published-table", "# citation:\ntest,iops\na,1\n", "and an empty one"),
    ],
)
def test_a_file_read_as_the_wrong_figures_is_refused(fmt: str, text: str, quoted: str, tmp_path: Path) -> None:
    """Files that were read with exit 0 as other figures than they hold: a log with fio's columns swapped or a
    direction fio never writes (values read as zeros and null directions), a table naming a column twice (the
    second silently stood for the first), a citation line that cites nothing."""
    path = tmp_path / ("x_bw.1.log" if fmt == "fio-log" else "x.csv")
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FormatError) as refused:
        read(path, fmt)
    assert quoted in str(refused.value)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("2;fio-2.1;job" + ";0" * 120 + "\n", "fio's terse output of version 2: benchlib reads versions 3, 4 and 5"),
        (
            "Datastore     = ds1\n=====\nVersion:\tvdbench50407\nRun Def:\tRD=run1\nVMs\t\t= 8\nTHROUGHPUT\t= 1 MB/s\n",
            "HCIBench's -res.txt with no run's figures",
        ),
    ],
)
def test_a_file_no_reader_takes_is_told_what_it_looks_like(text: str, said: str, tmp_path: Path) -> None:
    """Detection's refusal names what the file is: terse output of a version benchlib does not read (it had the
    generic 'no format' message), an HCIBench summary with no figures (it had been called a script's summary)."""
    path = tmp_path / "file.out"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FormatError) as refused:
        read(path)
    assert said in str(refused.value) and "found '" in str(refused.value)


@pytest.mark.parametrize(
    ("bs", "reads"),
    [("4zz", None), ("4k-64k", "range"), ("4k/50:64k/50", "split"), ("4k,64k", 4096), ("x", None)],
)
def test_a_block_size_no_fio_accepts_is_refused_and_a_range_or_split_is_read(
    bs: str, reads: object, tmp_path: Path
) -> None:
    """A json file's ``bs`` that is no size fio takes was changed after fio wrote it: refused, quoted; a range or
    split of sizes has no single block size and reads as unknown."""
    from tests.conftest import corpus_dir

    text = (corpus_dir("fio-json") / "fio-plot-testdata01__randread-01-01.json").read_text()
    assert '"bs" : "4k"' in text
    path = tmp_path / "run.json"
    path.write_text(text.replace('"bs" : "4k"', f'"bs" : "{bs}"'))
    if reads is None:
        with pytest.raises(FormatError, match=f"bs={bs!r} is not a size") as error:
            read(path, "fio-json")
        assert "job 'random-io'" in str(error.value) and "changed after fio wrote it" in str(error.value)
        return
    sizes = read(path, "fio-json").results["block_size_bytes"].to_list()
    assert sizes == [reads if isinstance(reads, int) else None] * len(sizes)


@pytest.mark.parametrize(("last", "group"), [(32, 0), (182, 1), (179, 0)])
def test_a_normal_report_cut_before_fios_summary_is_refused_not_read_as_fewer_jobs(
    last: int, group: int, tmp_path: Path
) -> None:
    """pve-scripts' 8 stonewalled jobs, cut after the first job's block, after the first group's summary, and
    before any summary: each would have read as a run of fewer jobs, its total too small."""
    from tests.conftest import corpus_dir

    lines = (corpus_dir("fio-normal") / "pve-scripts__fio.out").read_text().splitlines(keepends=True)
    (tmp_path / "cut.out").write_text("".join(lines[:last]))
    with pytest.raises(FormatError, match=rf"Run status group {group} \(all jobs\):' summary.*cut short") as error:
        read(tmp_path / "cut.out", "fio-normal")
    assert "found the file ends after job " in str(error.value)
    assert read(corpus_dir("fio-normal") / "pve-scripts__fio.out", "fio-normal").results.height > 0  # whole: read


@pytest.mark.parametrize(("cut", "found"), [(-5, "found 1214"), (2, "found 1221: '3001, 0, 16384")])
def test_a_histogram_log_row_with_another_count_of_values_is_refused(cut: int, found: str, tmp_path: Path) -> None:
    """A row short of bins had read as if its missing bins were empty; a long one leaked polars' words."""
    from tests.conftest import corpus_dir

    lines = (corpus_dir("fio-logs") / "pkb__pkb_fio_avg_1506559526.49_clat_hist.1.log").read_text().splitlines()
    values = lines[2].split(",")
    row = ",".join(values[:cut]) if cut < 0 else lines[2] + ", 0" * cut
    (tmp_path / "x_clat_hist.1.log").write_text("\n".join([*lines[:2], row, *lines[3:8]]) + "\n")
    with pytest.raises(FormatError, match="line 3: histogram log rows of integers, each with the 1219 values") as error:
        read(tmp_path / "x_clat_hist.1.log")
    assert found in str(error.value)
