"""The report: a pipeline run end to end with papermill, skipping what did not change;
nbval proving it bites on a changed raw number; the HTML report opened offline in a
real headless Chromium."""

from __future__ import annotations

import html
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from benchlib.figures import VEGALITE_MIME
from benchlib.paths import PROJECT_ROOT, RAW
from benchlib.pipeline import PipelineError, build_report, load_pipeline
from benchlib.sources import read
from tests import esxi_standins
from tests.browser import OFFLINE, chromium
from tests.conftest import corpus_dir

PIPELINE = PROJECT_ROOT / "pipelines" / "pvscsi-vs-lsi.toml"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory):
    reports = tmp_path_factory.mktemp("reports")
    return build_report(PIPELINE, reports=reports), reports


def test_report_runs_every_cell_and_summary(report) -> None:
    result, reports = report
    slugs = [e.slug for e in result.executions]
    assert slugs == [
        "test=seqread__controller=LSI__sioc=off",
        "test=seqread__controller=LSI__sioc=on",
        "test=seqread__controller=PVSCSI__sioc=off",
        "test=seqread__controller=PVSCSI__sioc=on",
        "study-overview",
        "published-tables",
        "claims",
        "comparison",
        "controllers-per-test",
        "settings-per-member",
        "sweeps",
        "fairness",
        "interaction",
    ]
    assert len(result.missing_cells) == 14  # of the whole declared matrix (the 4 drawn are all present)
    cell = result.folder / "cells" / slugs[0]
    spec = json.loads((cell / "figure-1.json").read_text())
    assert spec["title"]["subtitle"] == [
        "Jain's index 0.6245; highest / lowest 5.66x (5 VMs)",
        "the axis is shared by every cell page of this report",
    ]
    assert (cell / "figure-1.svg").read_text().startswith("<svg") and (cell / "figure-1.png").read_bytes()[
        :4
    ] == b"\x89PNG"
    executed = json.loads((cell / "cell.ipynb").read_text())
    prose = [o for c in executed["cells"] for o in c.get("outputs", []) if "text/markdown" in o.get("data", {})]
    said = "".join(prose[0]["data"]["text/markdown"])
    assert "in its one run, the highest (gus_fio_2) got 5.66 times the lowest, Jain's index 0.6245" in said
    assert "bandwidth (MiB/s) of all VMs together, in its one run: 2,282" in said  # the run total, as elsewhere
    page = (result.folder / "claims.html").read_text()
    assert "25 of 33 claims pass" in page and "http" not in page.replace("https://vega.github.io/schema", "")
    assert (PROJECT_ROOT / "notebooks" / "cell.ipynb").read_text() != (
        cell / "cell.ipynb"
    ).read_text()  # never overwritten

    fairness = json.loads((result.folder / "summary" / "fairness" / "figure-1.json").read_text())
    jain = {row["configuration"]: round(row["jain_median"], 4) for row in fairness["layer"][0]["data"]["values"]}
    assert jain == {"LSI / off": 0.6245, "LSI / on": 0.9793, "PVSCSI / off": 0.8203, "PVSCSI / on": 0.9139}  # BRIEF.md
    comparison = json.loads((result.folder / "summary" / "comparison" / "figure-1.json").read_text())
    # the five VMs of each configuration are one run: one run each side, nothing to test
    verdicts = {row["verdict"] for layer in comparison["layer"] for row in layer["data"]["values"] if "verdict" in row}
    assert verdicts == {"descriptive only"}
    page = (result.folder / "comparison.html").read_text()
    assert "no significant change" not in page and "nothing here is evidence of an effect" in page
    domains = {
        json.dumps(json.loads(p.read_text())["layer"][0]["encoding"]["y"]["scale"]["domain"])
        for p in (result.folder / "cells").glob("*/figure-1.json")
    }
    assert len(domains) == 1  # one value axis for every cell page: flipping pages compares bars
    index = (result.folder / "index.html").read_text()
    for part in ("The design", "What the pages find", "What this data is not", "Provenance", "One page per"):
        assert f"<h2>{part}" in index, part
    assert (
        "19 runs: 1 per configuration" in index and "8 rows of other figures" in index and "descriptive only" in index
    )  # the design, computed
    # the design says "one run per configuration" once; the findings under it do not say it again
    assert index.count("One run per configuration") == 1 and not re.search(r"(was|were) run once", index)
    # the claims are answered first, each failing one in the write-up's words, and not again among the findings
    assert "25 of the write-up&#x27;s 33 claims hold; these 8 fail" in index and "claims pass" not in index
    assert index.index("gus_fio_4 kept gaining past iodepth 32. (claim 4a, iodepth sweep") < index.index("Results")
    assert (
        "This report draws only the configurations with test sequential read 128k." in index
    )  # 4 of the 27 pages; the test in study.toml's words
    # the gaps are of the whole declared matrix, not of the 4 configurations drawn: SIOC on was published
    # for the sequential read only
    assert "14 of the 28 combinations of test × controller × SIOC have no runs" in index
    assert "<tr><td class='txt'>random read 4k</td><td class='txt'>LSI</td><td class='txt'>on</td></tr>" in index
    # claims 15-18's tests, compared: PVSCSI against LSI in gus_fio_1's table (one run each: descriptive)
    per_test = (result.folder / "controllers-per-test.html").read_text()
    assert "+4.96%" in per_test and "-67.88%" in per_test and "descriptive only" in per_test
    assert "with no run total" in per_test and "each run's total" not in per_test  # one VM of the five
    assert "the figure of gus_fio_1, the only VM the table lists" in per_test  # named, not "the members"
    assert "not replicates" in index  # the study README's caveats
    # the terms a page uses are linked from it to the report's glossary, which says each once
    assert "<a href='glossary.html#jain-s-index'>Jain&#x27;s index</a>" in index and "<dt" not in index
    glossary = (result.folder / "glossary.html").read_text()
    assert "<dt id='jain-s-index'>Jain&#x27;s index</dt>" in glossary and glossary.count("<dt") >= 3
    assert all("<dt" not in p.read_text() for p in result.folder.glob("*.html") if p.name != "glossary.html")
    assert re.search(r"benchlib \d+\.\d+\.\d+, commit ", index) and "raw data: digest " in index

    again = build_report(PIPELINE, reports=reports)  # nothing changed: nothing re-executed
    assert all(e.skipped for e in again.executions)


def test_a_change_to_benchlib_re_executes_the_pages(report) -> None:
    """The fingerprint covers benchlib's own code: a changed figure builder must not leave stale pages."""
    result, reports = report
    figures = PROJECT_ROOT / "benchlib" / "figures.py"
    original = figures.read_bytes()
    build = [
        sys.executable,
        "-c",
        "import sys; from pathlib import Path; from benchlib.pipeline import build_report; "
        "r = build_report(Path(sys.argv[1]), reports=Path(sys.argv[2])); "
        "print(sum(not e.skipped for e in r.executions), len(r.executions))",
        str(PIPELINE),
        str(reports),
    ]
    unchanged = subprocess.run(build, capture_output=True, text=True, check=True, cwd=PROJECT_ROOT).stdout.split()
    assert unchanged == ["0", str(len(result.executions))]
    try:
        figures.write_bytes(original + b"\n# a figure builder changed (test_report)\n")
        changed = subprocess.run(build, capture_output=True, text=True, check=True, cwd=PROJECT_ROOT).stdout.split()
    finally:
        figures.write_bytes(original)
    assert changed == [str(len(result.executions))] * 2  # every page draws through benchlib: all re-executed


PLAIN = '\n    "notebooks/claims.ipynb",'


def test_summary_notebooks_take_their_own_parameters(tmp_path: Path) -> None:
    pipeline = tmp_path / "p.toml"
    text = PIPELINE.read_text()
    assert PLAIN in text
    pipeline.write_text(
        text.replace(
            PLAIN,  # a plain entry; a comparison with parameters of its own goes after it
            PLAIN + '\n    { notebook = "notebooks/comparison.ipynb", name = "sioc", '
            'parameters = { factor = "sioc", baseline = "off", by = ["controller"] } },',
        )
    )
    loaded = load_pipeline(pipeline)
    assert "sioc" in loaded.summary_names
    assert loaded.summary_parameters[loaded.summary_names.index("sioc")]["baseline"] == "off"
    pipeline.write_text(text.replace(PLAIN, PLAIN + '\n    { notebook = "notebooks/comparison.ipynb", nmae = "x" },'))
    with pytest.raises(PipelineError, match="unknown keys \\['nmae'\\]"):
        load_pipeline(pipeline)
    pipeline.write_text(text.replace(PLAIN, PLAIN + '\n    "notebooks/claims.ipynb",'))
    with pytest.raises(PipelineError, match="same page name"):
        load_pipeline(pipeline)


def test_missing_cells_are_reported_not_errors(tmp_path: Path) -> None:
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        PIPELINE.read_text().replace('only = { test = ["seqread"] }', 'only = { test = ["seqread", "seqwrite"] }')
    )
    result = build_report(pipeline, reports=tmp_path / "reports")
    assert {"test": "seqwrite", "controller": "LSI", "sioc": "on"} in result.missing_cells
    row = "<tr><td class='txt'>sequential write</td><td class='txt'>LSI</td><td class='txt'>on</td></tr>"
    assert row in (result.folder / "index.html").read_text()


def test_bad_pipeline(tmp_path: Path) -> None:
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(PIPELINE.read_text().replace('axes = ["test", "controller", "sioc"]', 'axes = ["test", "hba"]'))
    with pytest.raises(PipelineError, match=r"axes \['hba'\] are not factors"):
        load_pipeline(pipeline)


def _nbval(notebook: Path, data: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--nbval",
            "--nbval-sanitize-with",
            str(PROJECT_ROOT / "notebooks" / "sanitize.cfg"),
            str(notebook),
        ],
        cwd=notebook.parent,
        env={**os.environ, "BENCHLIB_DATA": str(data)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_nbval_bites_on_a_changed_raw_number(tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(RAW / "pvscsi-vs-lsi", data / "raw" / "pvscsi-vs-lsi")
    copy = tmp_path / "nb" / "cell.ipynb"
    copy.parent.mkdir()
    shutil.copy(PROJECT_ROOT / "notebooks" / "cell.ipynb", copy)
    ingest = [
        sys.executable,
        "-m",
        "benchlib.cli",
        "ingest",
        "--quiet",
        str(data / "raw" / "pvscsi-vs-lsi"),
        "--processed",
        str(data / "processed"),
    ]
    subprocess.run(ingest, check=True, capture_output=True)
    assert _nbval(copy, data).returncode == 0  # the copy passes on unchanged data
    table = data / "raw" / "pvscsi-vs-lsi" / "seqread-128k-per-vm.csv"
    table.write_text(
        table.read_text().replace(
            "LSI,off,gus_fio_2,seqread,read,128k,1148,", "LSI,off,gus_fio_2,seqread,read,128k,1149,"
        )
    )
    stale = _nbval(copy, data)  # notebooks only read: a changed raw file is refused, not silently drawn from old tables
    assert stale.returncode != 0 and "seqread-128k-per-vm.csv" in stale.stdout and "benchlib ingest" in stale.stdout
    subprocess.run(ingest, check=True, capture_output=True)
    failed = _nbval(copy, data)
    assert failed.returncode != 0 and ("1,149" in failed.stdout or "1149" in failed.stdout)  # the changed number


def test_html_report_renders_offline_in_chromium(report) -> None:
    browser = chromium()
    result, _ = report
    artefacts = PROJECT_ROOT / "reports" / "test-artefacts"
    artefacts.mkdir(parents=True, exist_ok=True)
    page = result.folder / "test=seqread__controller=LSI__sioc=off.html"
    offline = [
        *OFFLINE,
        "--window-size=1200,1600",
    ]
    shot = artefacts / "report-cell.png"
    subprocess.run(
        [browser, *offline, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120, check=True
    )
    assert shot.stat().st_size > 10_000
    dom = subprocess.run(
        [browser, *offline, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    figures = re.findall(r"<div class=\"figure\" id=\"figure-\d+\"([^>]*)>(.*?)</div>", dom, flags=re.S)
    assert figures and all("<svg" in f and ("<path" in f or "<rect" in f) for _, f in figures)
    # a screen reader is told each chart's title and findings, not its points' column names
    assert all('role="img" aria-label="' in named for named, _ in figures)
    assert "Jain's index" in figures[0][0] and "value_label" not in dom
    assert "gus_fio_2" in dom
    # every link of every page reaches a file of the report: each figure's SVG, PNG and Vega-Lite, the downloads
    for html_page in result.folder.glob("*.html"):
        targets = re.findall(r"href='([^'#]+)'", html_page.read_text())
        assert all((result.folder / html.unescape(t)).is_file() for t in targets), html_page.name
    cell_page = page.read_text()
    assert cell_page.count("This figure as <a href=") == len(figures)
    assert "href='results.csv'" in (result.folder / "index.html").read_text()


def test_only_a_change_to_the_reports_own_study_re_executes(tmp_path: Path) -> None:
    """An edit to another study's raw file re-executes nothing; an edit to this study's re-executes its pages."""
    data = tmp_path / "data"
    for study in ("pvscsi-vs-lsi", "fio-sample"):
        shutil.copytree(RAW / study, data / "raw" / study)
    env = {**os.environ, "BENCHLIB_DATA": str(data)}
    env.pop("BENCHLIB_PROCESSED", None)
    build = [
        sys.executable,
        "-c",
        "import sys; from pathlib import Path; from benchlib.pipeline import build_report; "
        "r = build_report(Path(sys.argv[1]), reports=Path(sys.argv[2])); "
        "print(sum(not e.skipped for e in r.executions), len(r.executions))",
        str(PIPELINE),
        str(tmp_path / "reports"),
    ]

    def executed() -> list[str]:
        done = subprocess.run(build, capture_output=True, text=True, check=True, cwd=PROJECT_ROOT, env=env)
        return done.stdout.split()

    first = executed()
    assert first[0] == first[1]  # a first build runs everything (it ingested the study first)
    other = next(p for p in sorted((data / "raw" / "fio-sample").rglob("*.json")) if p.is_file())
    other.write_text(other.read_text().replace('"jobs"', '"jobs" ', 1))
    assert executed() == ["0", first[1]]
    table = data / "raw" / "pvscsi-vs-lsi" / "seqread-128k-per-vm.csv"
    table.write_text(table.read_text().replace(",1148,", ",1149,"))
    assert executed() == [first[1], first[1]]  # ingested once by the build, then every page re-executed
    # gus_fio_1's table holds no sequential read, the only test this report has cell pages of: its four cell
    # pages do not read it and are not executed again; the summary pages, which read the whole study, are
    other_tests = data / "raw" / "pvscsi-vs-lsi" / "controllers-gus_fio_1.csv"
    other_tests.write_text(other_tests.read_text().replace(",19238,", ",19239,"))
    assert executed() == [str(int(first[1]) - 4), first[1]]


_MEASURE = """<script>
window.addEventListener('load', () => {
  const width = document.documentElement.clientWidth;
  const wide = [...document.querySelectorAll('body *')]
    .filter(e => !e.closest('.benchlib-table') && e.getBoundingClientRect().right > width + 1)
    .map(e => e.tagName + '.' + e.className);
  const figures = [...document.querySelectorAll('.figure svg')];
  const empty = figures.filter(f => f.getBoundingClientRect().width < 50 || f.querySelectorAll('path,rect').length < 2);
  const out = document.createElement('pre');
  out.id = 'benchlib-measure';
  out.textContent = JSON.stringify({wide: wide.slice(0, 5), figures: figures.length, empty: empty.length,
                                    text: document.body.innerText});
  document.body.appendChild(out);
});
</script>"""


@pytest.fixture(scope="module")
def loopback_report(tmp_path_factory: pytest.TempPathFactory):
    return build_report(PIPELINE.with_name("loopback-fio.toml"), reports=tmp_path_factory.mktemp("reports")), None


WRITTEN_PIPELINE = """[pipeline]
study = "written"
title = "A test fixture, not a measurement: random reads and writes at two block sizes, two fio jobs at once on one local disk"
axes = ["rw", "bs"]
cell_notebook = "notebooks/cell.ipynb"
summary_notebooks = [
    "notebooks/study-overview.ipynb",
    { notebook = "notebooks/comparison.ipynb", parameters = { factor = "bs", baseline = "4k", by = ["rw"], only = {} } },
    { notebook = "notebooks/fairness.ipynb", parameters = { by = ["rw", "bs"], only = {}, series_levels = {} } },
    { notebook = "notebooks/efficiency.ipynb", parameters = { test = ["rw"], setting = "bs", only = {} } },
    { notebook = "notebooks/host-side.ipynb", parameters = { by = ["rw", "bs"], only = {} } },
]
[parameters]
value = "iops"
"""  # noqa: E501 (an inline table is one line in TOML)


@pytest.fixture(scope="module")
def written_report(fio_binary: str, tmp_path_factory: pytest.TempPathFactory):
    """A third report, from a study this test writes: real fio runs on local files, two factors, two runs
    each, two VMs per run named only by the folder each wrote into (``{vm}`` in study.toml), json+ with
    per-second and histogram logs. The VMs' files of one run are one run."""
    from tests.fio_helpers import run_fio

    data = tmp_path_factory.mktemp("data")
    study = data / "raw" / "written"
    mappings, starts = [], {}
    for rw in ("randread", "randwrite"):
        mappings.append(f'[[files]]\nglob = "rw={rw}/**"\nlevels = {{ rw = "{rw}" }}\n')
        for bs in ("4k", "64k"):
            for repetition in (1, 2):

                def one_vm(vm: str, rw: str = rw, bs: str = bs, repetition: int = repetition) -> Path:
                    folder = study / f"rw={rw}" / f"bs={bs}" / f"r{repetition}" / vm
                    out = run_fio(fio_binary, folder, "job", f"--rw={rw}", f"--bs={bs}", "--runtime=3", formats="json+")
                    (folder / "scratch.dat").unlink()
                    return out

                with ThreadPoolExecutor(2) as both:  # the two VMs of a run run at once, as a run's VMs do
                    outs = list(both.map(one_vm, ("vm-a", "vm-b")))
                begun = min(read(out).runs["start_time"].min() for out in outs)  # when benchlib places the run
                starts[(rw, bs, repetition)] = begun.timestamp()
    mappings += [f'[[files]]\nglob = "*/bs={bs}/**"\nlevels = {{ bs = "{bs}" }}\n' for bs in ("4k", "64k")]
    mappings.append('[[files]]\nglob = "*/*/*/{vm}/*"\n')
    (study / "study.toml").write_text(
        '[study]\nname = "written"\ntitle = "Written by the report test"\nmembers = "job"\n'
        "citation = \"Recorded by benchlib's report test: 3-second fio jobs, two at a time, on one Linux machine's "
        "local disk, with another host's esxtop capture (2018) placed into two of its runs\"\n"
        '[factors]\nrw = ["randread", "randwrite"]\nbs = ["4k", "64k"]\n' + "".join(mappings)
    )
    (study / "README.md").write_text(
        "# Written by the test\n\n## What it is not\n\nA vSphere measurement: its two members are fio jobs on one "
        "Linux machine, buffered (fio's default) and 3 seconds long. The esxtop capture is another host's, from 2018, "
        "copied twice with its timestamps moved into two runs to exercise the host-side page: its two "
        "configurations' host-side rows are the same samples. Nothing here measures a storage setting.\n"
    )
    # a real esxtop capture beside the runs, with the adapter queue depth a capture of every counter has, twice:
    # each one's samples 1 and 2 average whole seconds inside one run (sample 0, always zero, at its first second)
    esxtop = corpus_dir("esxtop") / "esxtopd__small-esxtop-data.csv"
    for name, run in (("esx01", ("randread", "4k", 1)), ("esx02", ("randwrite", "64k", 2))):
        first = datetime.fromtimestamp(math.ceil(starts[run]), tz=UTC)
        times = [first + timedelta(seconds=s) for s in (0, 1, 2)]
        esxi_standins.capture_with_adapter_queue_depth(esxtop, study / f"esxtop-{name}.csv", 128, times)
    pipeline = data / "written.toml"
    pipeline.write_text(WRITTEN_PIPELINE)
    env = {**os.environ, "BENCHLIB_DATA": str(data)}
    build = (
        "import sys; from pathlib import Path; from benchlib.pipeline import build_report; "
        "r = build_report(Path(sys.argv[1]), reports=Path(sys.argv[2])); print(len(r.executions))"
    )
    reports = data / "reports"
    done = subprocess.run(
        [sys.executable, "-c", build, str(pipeline), str(reports)],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        env=env,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    executions = [None] * int(done.stdout.split()[-1])
    return types.SimpleNamespace(folder=reports / "written", executions=executions), None


def test_vms_named_by_their_folders_are_members_of_one_run(written_report) -> None:
    """Each VM wrote its own file; study.toml's {vm} names it: 8 runs of 2 VMs, not 16 runs of one."""
    result, _ = written_report

    def said(page: str) -> str:
        executed = result.folder / "summary" / page / f"{page}.ipynb"
        cells = json.loads(executed.read_text())["cells"]
        return "".join(
            "".join(o["data"]["text/markdown"])
            for c in cells
            for o in c.get("outputs", [])
            if "text/markdown" in o.get("data", {})
        )

    assert "4 configurations with runs, 8 runs: 2 per configuration; 2 jobs per run" in said("study-overview")
    # how many of the 8 real runs were unfair depends on the machine's load; that it counts 8 runs does not
    page = (result.folder / "comparison.html").read_text()
    assert page.count(">2 / 2</td>") == 2 and ">4 / 4</td>" not in page  # runs per side: 2, not 4 (the VMs' files)
    assert re.search(r"\b\d of 8 runs fell below", said("fairness"))
    # the test's fio jobs ran buffered (direct=0, fio's default): the pages say whose figures they are
    assert "ran buffered (fio's direct=0, its default)" in said("comparison")
    # ... and how much of it the disk did: a buffered read still reaches the disk when the file outgrows the cache
    assert (
        "The disk's own counters (fio's disk statistics, median over runs; they count all the disk's I/O, not "
        "fio's alone) hold" in said("comparison")
    )
    # IOPS across block sizes is different work: the comparison also says the same runs in MiB/s
    assert re.search(
        r"\*\*In the bytes moved\.\*\* .*: 64k \+\d+\.\d\d% \(I/O pattern random read\)", said("comparison")
    )
    # across block sizes, CPU efficiency is judged on the bytes moved, not on IOPS (different work)
    assert said("efficiency").startswith(
        "**MiB/s per % of one CPU**: Block size 64k was highest in 2 of 2 configurations"
    )
    # its members are fio jobs on one machine (study.toml's members = "job"): no guest CPU nor virtual controller,
    # though it holds esxtop captures
    assert "jobs" in said("efficiency") and "guest" not in said("efficiency") and "VM" not in said("efficiency")
    # a run is named by the folder that tells it apart (r1, r2), its VMs' rows and logs under that one name:
    # the steady-state table judges each run's total once, not each VM's log as a run of its own
    cell = (result.folder / "rw=randwrite__bs=4k.html").read_text()
    assert "job.out" not in cell and cell.count(">r1</td>") == 2 + 1 and cell.count(">r2</td>") == 2 + 1


def test_the_host_side_page_sets_each_adapters_queue_depth_beside_the_commands_it_held(written_report) -> None:
    """The written study has two captures of every counter, each with two samples inside one run: the
    host-side page shows AQLEN and its use in those two configurations, and says nothing was left out."""
    result, _ = written_report
    page = (result.folder / "host-side.html").read_text()
    assert "Adapter queue depth (AQLEN)" in page and "vmhba0" in page and ">128<" in page
    assert page.count(">vmhba0<") == 2  # randread 4k and randwrite 64k, a capture each
    assert "a capture of another time" not in page
    # the test's capture is a 2018 one moved into two runs' seconds: its devices' commands/s are not the runs' I/O
    said = html.unescape(page)
    assert "The capture may not be these runs' I/O." in said and "far fewer commands than fio did" in said
    # the two captures are one copied: the page says so before their matching rows
    assert "One capture, copied." in said and "esxtop-esx01.csv</code> and <code>written/esxtop-esx02.csv" in said


DOUBT_PLAN = """
[study]
name = "doubtful"
title = "A test fixture: two engines on a target whose first runs read space never written"
[run]
runtime_s = 2
repetitions = {repetitions}
seed = 3
output = "raw/doubtful"
[target]
file = "{targets}/{{host}}.dat"
size = "32MiB"
[hosts]
servers = ["127.0.0.14", "127.0.0.15"]
port = 8873
[options]
direct = 1
log_avg_msec = 1000
[matrix.ioengine]
option = "ioengine"
levels = ["psync", "libaio"]
[[profiles]]
use = "randread-4k"
"""

DOUBT_PIPELINE = """[pipeline]
study = "doubtful"
title = "A test fixture, not a measurement: two engines, the first runs on a target whose blocks were given back"
axes = ["ioengine"]
cell_notebook = "notebooks/cell.ipynb"
summary_notebooks = [
    "notebooks/study-overview.ipynb",
  {notebook = "notebooks/comparison.ipynb", parameters = {factor = "ioengine", baseline = "psync", by = [], only = {}}},
]
[parameters]
value = "iops"
"""


@pytest.fixture(scope="module")
def doubtful_report(fio_binary: str, tmp_path_factory: pytest.TempPathFactory):
    """A study recorded for real whose first repetition read a target whose blocks were given back (holes read
    as zeros, with no device I/O, as a file fio created sparse did), then the report built from it."""
    from benchlib.runner import load_plan, run_plan
    from benchlib.runner.targets import Targets
    from tests.fio_helpers import fio_server

    if shutil.which("fallocate") is None:
        pytest.skip("fallocate (util-linux) is not installed")
    data = tmp_path_factory.mktemp("doubtful")
    plan_path = data / "plan.toml"
    hosts = ["127.0.0.14", "127.0.0.15"]
    with fio_server(fio_binary, hosts[0], 8873), fio_server(fio_binary, hosts[1], 8873):
        plan_path.write_text(DOUBT_PLAN.format(repetitions=1, targets=data / "targets"))
        plan = load_plan(plan_path)
        Targets(plan, fio_binary, None).prepare(hosts, writes=False)
        for host in hosts:
            target = plan.target.path_for(host)
            punched = subprocess.run(["fallocate", "--punch-hole", "-o", "0", "-l", str(32 << 20), target], check=False)
            if punched.returncode:
                pytest.skip("this file system cannot punch holes")
        assert run_plan(plan).done == 4
        for host in hosts:
            with open(plan.target.path_for(host), "r+b") as handle:
                handle.write(os.urandom(32 << 20))
                os.fsync(handle.fileno())
        plan_path.write_text(DOUBT_PLAN.format(repetitions=3, targets=data / "targets"))
        assert run_plan(load_plan(plan_path)).done == 8
    pipeline = data / "doubtful.toml"
    pipeline.write_text(DOUBT_PIPELINE)
    built = _build_elsewhere(pipeline, data)
    executions = [None] * len(built["pages"])
    return types.SimpleNamespace(folder=data / "reports" / "doubtful", executions=executions), None


def _build_elsewhere(pipeline: Path, data: Path) -> dict:
    """Build ``pipeline``'s report in a process of its own with ``data`` as data/; return its pages and left-out."""
    build = (
        "import sys, json; from pathlib import Path; from benchlib.pipeline import build_report; "
        "r = build_report(Path(sys.argv[1]), reports=Path(sys.argv[2])); "
        "print(json.dumps({'pages': [e.slug for e in r.executions], 'left_out': r.left_out}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", build, str(pipeline), str(data / "reports")],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        env={**os.environ, "BENCHLIB_DATA": str(data)},
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_runs_that_cannot_have_measured_the_storage_are_named_on_every_page_that_uses_them(doubtful_report) -> None:
    """The cell page names its run with the figures and the likely cause; the comparison and the index list the
    runs (said once on the index, before the findings)."""
    result, _ = doubtful_report
    index = html.unescape((result.folder / "index.html").read_text())
    assert index.count("may not have measured the storage") == 1
    assert "<h2>Runs to doubt</h2>" in index and index.index("Runs to doubt") < index.index("What the pages find")
    assert "run 1 of I/O engine psync" in index and "run 1 of I/O engine libaio" in index
    cell = html.unescape((result.folder / "ioengine=psync.html").read_text())
    assert "Run 1 may not have measured the storage</strong>: its total IOPS, " in cell
    # the device counts every I/O on it, the machine's own too (a page being written beside the run): a few
    counted = re.search(r"counted ([\d,]+) I/Os while fio completed ([\d,]+) direct I/Os", cell)
    assert counted and int(counted[1].replace(",", "")) * 100 < int(counted[2].replace(",", "")), counted
    assert "Likely: reads of space never written" in cell
    assert "Run 2 may not" not in cell and "Run 3 may not" not in cell
    comparison = html.unescape((result.folder / "comparison.html").read_text())
    assert "2 runs may not have measured the storage" in comparison


UNTUNED_PLAN = """
[study]
name = "untuned"
title = "A test fixture: two engines at two block sizes and a queue-depth sweep, on two fio servers"
[run]
runtime_s = 1
repetitions = 2
seed = 9
output = "raw/untuned"
[target]
file = "{targets}/{{host}}.dat"
size = "16MiB"
[hosts]
servers = ["127.0.0.16", "127.0.0.17"]
port = 8874
[options]
direct = 0
[matrix.engine]
option = "ioengine"
levels = ["psync", "libaio"]
[matrix.block_size]
option = "bs"
levels = ["4k", "64k"]
[[profiles]]
use = "randread-4k"
[[profiles]]
name = "depth"
options = {{ rw = "randread", bs = "4k", ioengine = "libaio" }}
hold = {{ engine = "libaio", block_size = "4k" }}
sweep = {{ factor = "queue_depth", option = "iodepth", levels = [1, 4, 16] }}
"""


@pytest.fixture(scope="module")
def untuned_report(fio_binary: str, tmp_path_factory: pytest.TempPathFactory):
    """A study no page was tuned on, recorded for real on two loopback fio servers, and a pipeline that names
    only the study: every page its data support is built, the rest are named on the index with why."""
    from benchlib.runner import load_plan, run_plan
    from tests.fio_helpers import fio_server

    data = tmp_path_factory.mktemp("untuned")
    plan_path = data / "plan.toml"
    plan_path.write_text(UNTUNED_PLAN.format(targets=data / "targets"))
    with fio_server(fio_binary, "127.0.0.16", 8874), fio_server(fio_binary, "127.0.0.17", 8874):
        assert run_plan(load_plan(plan_path)).done == 2 * 7 * 2
    pipeline = data / "untuned.toml"
    pipeline.write_text('[pipeline]\nstudy = "untuned"\n')
    built = _build_elsewhere(pipeline, data)
    executions = [None] * len(built["pages"])
    return types.SimpleNamespace(folder=data / "reports" / "untuned", executions=executions, built=built), None


def test_a_study_nobody_tuned_for_builds_every_page_its_data_support_from_its_name(untuned_report) -> None:
    result, _ = untuned_report
    pages, left_out = result.built["pages"], dict(result.built["left_out"])
    cells = [p for p in pages if "=" in p]
    assert len(cells) == 4 + 3  # a page per configuration: 2 engines x 2 block sizes, and each depth of the sweep
    assert {"study-overview", "comparison", "sweeps", "fairness", "interaction", "efficiency"} <= set(pages)
    assert "settings-per-member" in pages  # two fio servers: what each setting did to each
    assert set(left_out) - {"host-side"} == {"claims", "published-tables"}, left_out
    assert "claims.toml" in left_out["claims"]
    index = html.unescape((result.folder / "index.html").read_text())
    assert "Claims: not drawn, the study has no claims.toml" in index
    assert "<h1>A test fixture: two engines at two block sizes" in index  # the study's own title
    comparison = html.unescape((result.folder / "comparison.html").read_text())
    assert "engine libaio against psync" in comparison.replace("I/O engine", "engine")  # the first setting compared
    sweeps = html.unescape((result.folder / "sweeps.html").read_text())
    assert "Queue depth 1 to 16, 3 depths" in sweeps and "write share" not in sweeps.lower().split("sweeps")[0]
    executed = json.loads((result.folder / "summary" / "comparison" / "comparison.ipynb").read_text())
    said = "".join(
        "".join(c["source"]) for c in executed["cells"] if "injected-parameters" in c["metadata"].get("tags", [])
    )
    assert "factor = 'engine'" in said or 'factor = "engine"' in said  # the fitted parameters, visible


TWO_SWEEPS_PLAN = """
[study]
name = "two-sweeps"
[run]
runtime_s = 1
repetitions = 1
seed = 4
output = "raw/two-sweeps"
[target]
file = "{targets}/{{host}}.dat"
size = "16MiB"
[options]
direct = 0
rw = "randread"
bs = "4k"
[matrix.engine]
option = "ioengine"
levels = ["psync", "libaio"]
[[profiles]]
name = "depth"
options = {{ numjobs = 1 }}
sweep = {{ factor = "queue_depth", option = "iodepth", levels = [1, 4, 16] }}
"""


@pytest.mark.fio
def test_a_sweep_run_under_each_level_of_a_setting_is_drawn_for_each(fio_binary: str, tmp_path: Path) -> None:
    """The depth sweep ran under both engines: the sweeps page draws both engines' run totals and says each
    one's shape, from the study's name alone; its other sections say which engine they read."""
    from benchlib import fit
    from benchlib.ingest import ingest_study
    from benchlib.runner import load_plan, run_plan
    from benchlib.store import open_study

    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(TWO_SWEEPS_PLAN.format(targets=tmp_path / "targets"))
    assert run_plan(load_plan(plan_path)).done == 6
    env = {**os.environ, "BENCHLIB_DATA": str(tmp_path)}
    assert ingest_study(tmp_path / "raw" / "two-sweeps", tmp_path / "processed").ok
    opened = open_study(tmp_path / "raw" / "two-sweeps", tmp_path / "processed")
    page = fit.sweeps(opened)
    assert page["depth_by"] == "engine" and page["depth_levels"] == ["psync", "libaio"]
    assert fit.fitted("comparison", opened, {})["factor"] == "engine"  # not queue depth: the sweep's points
    from benchlib.results import factor_answers

    assert [a["factor"] for a in factor_answers(opened)] == ["engine"]  # the index answers for the setting
    out = tmp_path / "sweeps.ipynb"
    subprocess.run(
        [sys.executable, "-m", "papermill", "--log-level", "ERROR", str(PROJECT_ROOT / "notebooks" / "sweeps.ipynb")]
        + [str(out), "-p", "study", "two-sweeps"],
        env=env,
        check=True,
        cwd=PROJECT_ROOT,
        capture_output=True,
        timeout=300,
    )
    outputs = [o.get("data", {}) for c in json.loads(out.read_text())["cells"] for o in c.get("outputs", [])]
    text = "".join("".join(o.get("text/markdown", "")) for o in outputs)
    assert "**Run totals by I/O engine** (the sweep ran under each): **psync** " in text.replace(
        "engine**", "I/O engine**"
    )
    assert "**libaio** " in text and "The sections below are at" in text
    assert "Runs read: " in text and "psync, libaio" in text
    chart = next(o[kind] for o in outputs for kind in o if kind.startswith("application/vnd.vegalite"))
    title = chart["title"] if isinstance(chart["title"], str) else chart["title"]["text"]  # a string: no knee to say
    assert title.startswith("Run totals by")  # the page's first chart: both engines' sweeps
    spec = json.dumps(chart)
    assert '"engine": "psync"' in spec and '"engine": "libaio"' in spec


@pytest.mark.parametrize("which", ["report", "loopback_report", "written_report", "doubtful_report", "untuned_report"])
def test_every_page_of_the_report_in_chromium(which: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Each page offline: nothing wider than the window (tables scroll inside their box), every figure drawn,
    no NaN, inf or None printed, no console error; screenshots kept for a person to look at."""
    browser = chromium()
    result, _ = request.getfixturevalue(which)
    artefacts = PROJECT_ROOT / "reports" / "test-artefacts" / result.folder.name
    artefacts.mkdir(parents=True, exist_ok=True)
    offline = [
        *OFFLINE,
        "--window-size=1200,1600",
    ]
    pages = sorted(result.folder.glob("*.html"))
    assert len(pages) == len(result.executions) + 2  # every page, the index and the glossary
    for page in pages:
        subprocess.run(
            [browser, *offline, f"--screenshot={artefacts / (page.stem + '.png')}", page.as_uri()],
            capture_output=True,
            timeout=120,
            check=True,
        )
        probe = tmp_path / page.name
        shutil.copytree(result.folder, tmp_path, dirs_exist_ok=True)
        probe.write_text(page.read_text().replace("</body>", _MEASURE + "</body>"))
        run = subprocess.run(
            [
                browser,
                *offline,
                "--enable-logging=stderr",
                "--v=0",
                "--virtual-time-budget=5000",
                "--dump-dom",
                probe.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        found = re.search(r'<pre id="benchlib-measure">(.*?)</pre>', run.stdout, flags=re.S)
        assert found, page.name
        measured = json.loads(html.unescape(found[1]))
        assert len(measured["text"]) > (60 if page.name == "glossary.html" else 200), page.name  # the probe read it
        assert measured["wide"] == [], f"{page.name}: wider than the window: {measured['wide']}"
        assert measured["empty"] == 0, f"{page.name}: {measured['empty']} empty figures"
        words = re.findall(r"[A-Za-z]+", measured["text"])
        assert not {"NaN", "nan", "inf", "None", "null"} & set(words), page.name
        assert "CONSOLE" not in run.stderr or "error" not in run.stderr.lower(), page.name


def test_a_cell_run_in_the_warm_kernel_is_what_a_fresh_kernel_gives(loopback_report, tmp_path: Path) -> None:
    """The build runs the cells in one kernel per worker (namespace reset between them): the last cell of
    the loopback report, run after seven others, has the outputs a fresh papermill kernel gives."""
    from benchlib.pipeline import _papermill

    result, _ = loopback_report
    warm = [e for e in result.executions if e.levels][-1]
    fresh = tmp_path / "fresh.ipynb"
    done = _papermill(warm, fresh)
    assert done.returncode == 0, done.stderr

    def outputs(path: Path) -> list:
        cells = json.loads(path.read_text())["cells"]
        return [[{k: v for k, v in o.items() if k != "execution_count"} for o in c.get("outputs", [])] for c in cells]

    built = outputs(warm.output_dir / warm.notebook.name)
    assert built == outputs(fresh) and any(built)
    # the pages draw the exported SVG: a build's notebooks carry the Vega-Lite spec, no PNG drawn for nothing
    data = [o.get("data", {}) for cell in built for o in cell]
    assert any(VEGALITE_MIME in d for d in data) and not any("image/png" in d for d in data)
    assert (warm.output_dir / "figure-1.svg").is_file() and (warm.output_dir / "figure-1.png").is_file()


def test_each_figure_file_is_the_figure_its_page_shows(loopback_report, tmp_path: Path) -> None:
    """The page's kernel writes its figures as it shows them (BENCHLIB_FIGURES): on every page of a build,
    figure N's Vega-Lite file is the N-th figure of the page's notebook, with its SVG and PNG, and no other;
    a figure the kernel did not write (its files lost) is written by the build from the notebook, the same
    (a gradient's id is the figure's own, not the count of gradients its process drew before)."""
    from benchlib.figures import figure_json, figure_svg
    from benchlib.pipeline import VEGALITE, _export_figures, _vegalite_outputs

    result, _ = loopback_report
    pages = 0
    for execution in result.executions:
        notebook = execution.output_dir / execution.notebook.name
        specs = [next(d[m] for m in VEGALITE if m in d) for d in _vegalite_outputs(notebook)]
        files = sorted(execution.output_dir.glob("figure-*.json"))
        assert len(files) == len(specs), execution.slug
        for index, spec in enumerate(specs, 1):
            stem = execution.output_dir / f"figure-{index}"
            assert stem.with_suffix(".json").read_text(encoding="utf-8") == figure_json(spec), execution.slug
            assert stem.with_suffix(".svg").read_text(encoding="utf-8") == figure_svg(spec, stem.name), execution.slug
            assert stem.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        pages += bool(specs)
    assert pages >= 5  # cells and summaries with figures
    # the files of one page lost: the build writes them from its notebook, and drops a figure it does not show
    page = next(e for e in result.executions if e.levels)
    copy = tmp_path / "page"
    copy.mkdir()
    (copy / page.notebook.name).write_bytes((page.output_dir / page.notebook.name).read_bytes())
    (copy / "figure-9.svg").write_text("<svg/>")
    _export_figures(copy / page.notebook.name, copy)
    for made in copy.glob("figure-*.*"):
        assert made.read_bytes() == (page.output_dir / made.name).read_bytes(), made.name
    assert not (copy / "figure-9.svg").exists()


def test_a_failing_cell_names_its_page_and_the_next_cell_still_runs(tmp_path: Path) -> None:
    """A cell notebook that raises for one configuration: the build stops with its name and the error,
    and the worker's next kernel is a new one (the failed one is dropped)."""
    from benchlib.pipeline import Execution, PipelineError, WarmKernels

    notebook = tmp_path / "cell.ipynb"
    cells = [
        {"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": "levels = {}\n"},
        {"cell_type": "code", "metadata": {}, "source": "assert levels['x'] != 'bad', 'a bad level'\nprint(levels)\n"},
    ]
    for index, cell in enumerate(cells):
        cell |= {"id": f"c{index}", "execution_count": None, "outputs": []}
    kernel = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    notebook.write_text(json.dumps({"cells": cells, "metadata": kernel, "nbformat": 4, "nbformat_minor": 5}))
    before = set(Path(tempfile.gettempdir()).glob("benchlib-kernel-*"))
    kernels = WarmKernels()
    try:
        good = Execution("x=good", notebook, {"levels": {"x": "good"}}, tmp_path / "good", {"x": "good"})
        bad = Execution("x=bad", notebook, {"levels": {"x": "bad"}}, tmp_path / "bad", {"x": "bad"})
        kernels.execute(good, tmp_path / "good.ipynb")
        with pytest.raises(PipelineError, match=r"cell.ipynb for x=bad failed(.|\n)*a bad level"):
            kernels.execute(bad, tmp_path / "bad.ipynb")
        kernels.execute(good, tmp_path / "again.ipynb")
        text = json.loads((tmp_path / "again.ipynb").read_text())["cells"][-1]["outputs"][0]["text"]
        assert "".join(text).strip() == "{'x': 'good'}"
    finally:
        kernels.close()
    assert set(Path(tempfile.gettempdir()).glob("benchlib-kernel-*")) <= before  # no kernel folder left behind


def test_a_pipeline_is_found_by_the_name_its_error_lists(tmp_path: Path) -> None:
    """`benchlib report pvscsi-vs-lsi` once said "no such pipeline file (pipelines here: ..., pvscsi-vs-lsi)"."""
    assert load_pipeline("pvscsi-vs-lsi").study == load_pipeline(PIPELINE).study == "pvscsi-vs-lsi"
    with pytest.raises(
        PipelineError, match=r"no-such: no such pipeline file \(pipelines here: esxi-queuing, loopback-fio, "
    ):
        load_pipeline("no-such")
    with pytest.raises(PipelineError, match="no such pipeline file"):  # a path that is not there is not a name
        load_pipeline(tmp_path / "pvscsi-vs-lsi")


def test_combinations_a_recorded_plan_never_listed_are_not_missing(tmp_path: Path) -> None:
    """The loopback plan sweeps depth and write share at 4k/libaio/no cap: of the 32 combinations of its four
    axes it lists 18, all run. The other 14 are not 'without runs'; a study without a record keeps the old wording."""
    from benchlib.pipeline import planned_combinations
    from benchlib.report_html import _without_runs

    axes = ["profile", "block_size", "ioengine", "rate_cap"]
    planned = planned_combinations(RAW / "loopback-fio", axes)
    assert planned is not None and len(planned) == 18 and ("iodepth-sweep", "4k", "libaio", "off") in planned
    assert ("iodepth-sweep", "64k", "psync", "on") not in planned
    said = _without_runs(0, 32, "profile x block size", 14)
    assert said.startswith("Every one of the 18 combinations of profile x block size that the recorded plan")
    assert "the other 14 of the 32 combinations were never planned, so none of them is missing" in said
    assert planned_combinations(RAW / "pvscsi-vs-lsi", ["test"]) is None  # published tables: no plan
    (tmp_path / "benchlib-plan.json").write_text('{"order": [{"cell": 3}', encoding="utf-8")  # cut short
    assert planned_combinations(tmp_path, axes) is None
    assert "may never have been meant to run" in _without_runs(14, 28, "test", None)


def test_a_page_lists_the_terms_it_uses_and_only_those() -> None:
    """A term of statistics or of iostat and esxtop gets one sentence on the page that uses it, charts' text too."""
    from benchlib.report_html import _terms, used_terms

    said = _terms("<p>Cliff&#x27;s δ +0.33; Holm over 2 tests; aqu-sz 1.2</p><svg><text>KAVG</text></svg>")
    terms = re.findall(r"<a href='glossary.html#[a-z0-9-]+'>(.*?)</a>", said)
    assert said.startswith("<p class='terms'>Terms on this page, each said once in <a href='glossary.html'>")
    assert terms == ["Cliff&#x27;s δ", "Holm", "aqu-sz", "KAVG, DAVG, GAVG"]
    assert _terms("<p>IOPS and MiB/s only, a little more</p>") == ""  # no term, no list; "little" is no law
    tail = used_terms("<th>p99.9 (ms)</th><p>fio's json+ histograms; a 10% excursion</p>")
    assert tail == ["p50, p99, p99.9", "json+", "Excursion"]
    assert len(used_terms("<p>p (Holm) 0.667; fio-3.33</p>")) == 1  # a p-value is no percentile


def test_one_pipeline_that_cannot_build_costs_its_report_not_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`benchlib report` over several pipelines: one naming a study that does not exist is one message; the other's
    report is still built, and the exit status says one was not."""
    from benchlib.cli import main

    cell = '[parameters]\nvalue = "iops"\n'
    (tmp_path / "absent.toml").write_text(
        '[pipeline]\nstudy = "no-such-study"\ntitle = "x"\naxes = ["block_size"]\n'
        'cell_notebook = "notebooks/cell.ipynb"\nsummary_notebooks = []\n' + cell
    )
    (tmp_path / "sample.toml").write_text(
        '[pipeline]\nstudy = "fio-sample"\ntitle = "Sample"\naxes = ["block_size"]\n'
        'cell_notebook = "notebooks/cell.ipynb"\nsummary_notebooks = []\n' + cell
    )
    pipelines = [str(tmp_path / "absent.toml"), str(tmp_path / "sample.toml")]
    assert main(["report", *pipelines, "--reports", str(tmp_path / "reports")]) == 2
    err = capsys.readouterr().err
    assert "no-such-study: not a folder" in err and "not built: absent (see above); the other 1 reports were" in err
    assert (tmp_path / "reports" / "sample" / "index.html").exists() and not (tmp_path / "reports" / "absent").exists()
