"""Claims bound to data: the published-table reader, the claims engine and `benchlib verify`
on the PVSCSI-vs-LSI write-up, whose every quantitative assertion is a claim."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import polars as pl
import pytest

from benchlib import views
from benchlib.bundle import BundleError, write_bundle
from benchlib.claims import ClaimError, load_claims, verify
from benchlib.cli import main
from benchlib.errors import FormatError
from benchlib.ingest import ingest_study
from benchlib.paths import RAW
from benchlib.sources import detect, read
from benchlib.store import load_study_tables
from tests.conftest import ROOT

STUDY = RAW / "pvscsi-vs-lsi"
SHARED = ROOT.parent / "shared" / "domain"
MIB = 1024 * 1024


def _verdicts(study: Path, processed: Path) -> dict:
    claims, tolerances = load_claims(study)
    report = ingest_study(study, processed)
    assert report.ok, report.quarantined
    return {v.claim.id: v for v in verify(load_study_tables(report.processed), claims, tolerances)}


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return _verdicts(STUDY, tmp_path_factory.mktemp("processed"))


def test_every_assertion_of_the_write_up_is_a_claim(verdicts: dict) -> None:
    listed = SHARED / "CLAIMS-pvscsi-vs-lsi.md"
    if not listed.exists():
        pytest.skip("no ../shared/domain")
    numbers = {int(m) for m in re.findall(r"^(\d+)\. ", listed.read_text(), flags=re.MULTILINE)}
    assert numbers == set(range(1, 27))
    covered = {int(re.match(r"\d+", claim_id).group()) for claim_id in verdicts}
    assert covered == numbers


def test_verdicts_are_what_the_data_say(verdicts: dict) -> None:
    failing = {k for k, v in verdicts.items() if v.verdict == "FAIL"}
    assert failing == {"4a", "9", "12b", "22", "23", "23b", "24b", "25"}
    assert not [k for k, v in verdicts.items() if v.verdict == "UNSUPPORTED"]
    assert verdicts["1"].recomputed == "5.66x"  # 1148 / 203
    assert verdicts["9"].recomputed == "LSI: -24.5%; PVSCSI: +27.3%"  # aggregate 2282 -> 1723 and 1794 -> 2283 MiB/s
    assert verdicts["12b"].recomputed == "gus_fio_3, gus_fio_5"
    # a PASS 0.04 points inside its tolerance says so beside the figure
    assert verdicts["15"].verdict == "PASS" and verdicts["15"].recomputed == (
        "1.05x (4.96% from 1: just inside ±5%, a reading of the words a little stricter would fail it)"
    )
    # and a PASS nearer its threshold than a figure's rounding: 40,120 against "more than 40,000"
    assert (
        verdicts["4b"].recomputed == "40,120 IOPS (0.3% above 40,000: nearer it than a stated figure's rounding, ±3%)"
    )
    assert not [
        k
        for k, v in verdicts.items()
        if ("just " in v.recomputed or "nearer" in v.recomputed) and k not in {"15", "4b"}
    ]
    assert verdicts["24b"].recomputed == "LSI: 1.39x; PVSCSI: 2.02x"
    assert verdicts["5a"].recomputed == "32" and verdicts["13"].recomputed == "decreasing (steps -16.2%, -12.2%)"
    # only the sequential-read CPU rows fail to reconcile (BRIEF: one CPU-efficiency row does not)
    said = verdicts["23"].recomputed  # the rows off first, each with how far; then the rows that agree
    assert said.startswith("2 of 8 rows off by more than 2%: seqread/LSI: reported 8,563, recomputed 1,158 (-86.5%)")
    assert ". The other 6 within 2%: " in said and "seqwrite/LSI: reported 1,807, recomputed 1,810 (+0.2%)" in said
    assert said.index("seqread/PVSCSI") < said.index("The other 6")
    # and whichever VM the post divided: the rows claim more than all five VMs delivered together (BRIEF's totals)
    bound = verdicts["23b"].recomputed  # 2,282 MiB/s = 18,256 IOPS at 128k over 2.77% CPU; 2,283 MiB/s over 1.99%
    assert bound == (
        "2 of 2 rows above their most: seqread/LSI: reported 8,563, at most 6,591 (29.9% above it); "
        "seqread/PVSCSI: reported 9,851, at most 9,178 (7.3% above it)"
    )
    assert verdicts["26"].verdict == "PASS" and verdicts["26"].recomputed == "20 values, 31.9 to 32.0"  # the range
    assert verdicts["14b"].recomputed == "0%: 2.12x; 50%: 2.12x; 100%: 2.00x"  # write shares in order, not as text
    assert verdicts["15"].tolerance == "essentially_equal: ±5%" and verdicts["16"].tolerance == "close: ±15%"
    # every value with its unit: bandwidth, IOPS, a signed change, a multiple
    assert verdicts["8"].recomputed == "292-406 MiB/s" and verdicts["4b"].recomputed.startswith("40,120 IOPS")
    assert verdicts["9"].tolerance == "below 0%" and verdicts["4b"].tolerance == "above 40,000 IOPS"
    assert verdicts["22"].tolerance == "between 0.4x and 0.7x"


def test_every_verdict_says_what_it_divides_over_which_rows(verdicts: dict) -> None:
    """A value like 0.731x says what it is: which members over which, the rows read, the groups judged."""
    assert verdicts["10"].computed == (
        "highest bandwidth (MiB/s) of gus_fio_3, gus_fio_5 / lowest of gus_fio_1, gus_fio_2 (below 1x: each trails "
        "each); rows: published table \u201cseqread_per_vm\u201d; controller LSI; SIOC on"
    )
    assert verdicts["25"].computed.endswith("; per controller / SIOC")
    assert verdicts["14b"].computed.endswith("; per write share (%)")
    # the queue-depth arithmetic reads the sequential-read table alone, and says so
    assert verdicts["26"].computed == (
        "outstanding I/Os (IOPS x mean latency) of every row; rows: published table \u201cseqread_per_vm\u201d"
    )
    # a study's words for its tables ([levels.table]) name them on the page
    from benchlib.claims import computed_as
    from benchlib.study import load_study
    from benchlib.tables import name_levels

    try:
        name_levels(load_study(RAW / "pvscsi-vs-lsi").level_words)
        assert computed_as(verdicts["26"].claim).endswith(
            "rows: published table \u201csequential read 128k per VM\u201d"
        )
    finally:
        name_levels({})
    assert verdicts["17b"].computed.startswith("mean latency (ms) of controller PVSCSI / that of controller LSI")
    assert verdicts["9"].computed.startswith("change in total bandwidth (MiB/s) from SIOC off to SIOC on")
    assert all(v.computed for v in verdicts.values())
    # where words allow more than one reading, the claims file says how it reads them
    assert "Read as: the sentence names no controller, so it is read for both" in verdicts["24b"].computed
    assert "1 / 1.30 = 0.77x the CPU per I/O" in verdicts["22"].computed


def test_a_trend_needs_a_practical_step(verdicts: dict, tmp_path: Path) -> None:
    """'Kept gaining past depth 32': +0.5% and +1.0% per doubling are steps the trend tolerance (5%) reads as
    flat, and flat is not gaining (the sweeps page finds gus_fio_4 saturated at 32)."""
    assert verdicts["4a"].recomputed == "rises, then flat (steps +23.6%, +0.5%, +1.0%)"
    assert verdicts["4a"].verdict == "FAIL" and "a step under 5% counts as flat" in verdicts["4a"].tolerance
    assert verdicts["13"].recomputed.startswith("decreasing")  # -16% then -12%: a fall at every step
    # a step against the claim by the tolerance or more still contradicts it: the same sweep is no fall
    from dataclasses import replace

    from benchlib.claims import claims_frame, verify_claim

    claims, tolerances = load_claims(STUDY)
    frame = claims_frame(load_study_tables(ingest_study(STUDY, tmp_path).processed))
    falling = replace(next(c for c in claims if c.id == "4a"), expect={"equals": "decreasing"})
    assert verify_claim(frame, falling, tolerances, ()).verdict == "FAIL"  # +23.6% is no fall


def test_every_verdict_says_how_many_runs_it_rests_on(verdicts: dict) -> None:
    """Every configuration of the write-up was run once: a PASS is arithmetic, not evidence of an effect."""
    cpu = {"19", "20", "21", "22", "23", "23b"}  # the CPU table's rows measured no I/O: they are not runs
    assert all(v.runs >= 1 and v.runs_per_configuration == 1 for k, v in verdicts.items() if k not in cpu)
    assert all(v.runs == 0 and v.note == "" for k, v in verdicts.items() if k in cpu)
    assert verdicts["1"].runs == 1 and verdicts["1"].note == "one run: the numbers describe that run"
    sioc = verdicts["9"]  # SIOC's effect on the aggregate: two configurations per controller, one run each
    assert sioc.runs == 4 and sioc.note.startswith("one run per configuration") and "not evidence" in sioc.note


def test_a_changed_raw_number_changes_the_verdict(tmp_path: Path) -> None:
    copy = tmp_path / "pvscsi-vs-lsi"
    shutil.copytree(STUDY, copy)
    table = copy / "seqread-128k-per-vm.csv"
    text = table.read_text()
    assert "seqread_per_vm,LSI,off,gus_fio_2,seqread,read,128k,1148,3.47" in text
    table.write_text(
        text.replace("LSI,off,gus_fio_2,seqread,read,128k,1148,", "LSI,off,gus_fio_2,seqread,read,128k,948,")
    )
    changed = _verdicts(copy, tmp_path / "processed")
    assert changed["1"].verdict == "FAIL" and changed["1"].recomputed == "4.67x"
    assert changed["6"].verdict == "FAIL"


def test_cli_verify_prints_the_table_and_exits_1_on_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", str(STUDY), "--processed", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "pvscsi-vs-lsi: 33 claims" in out  # the 26 assertions, seven of them in two parts
    assert "25 PASS, 8 FAIL, 0 UNSUPPORTED" in out


CLAIM = """
[tolerances]
about = 0.1
[[claims]]
id = "1"
says = "x"
metric = "bandwidth_mib_s"
where = { table = "seqread_per_vm", controller = "LSI", sioc = "off" }
compute = "max_over_min"
expect = { about = 5.6 }
"""


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (('metric = "bandwidth_mib_s"', 'metric = "bandwidth"'), "unknown metric 'bandwidth'"),
        (('table = "seqread_per_vm"', 'tabel = "seqread_per_vm"'), "no column or label 'tabel'"),
        (('compute = "max_over_min"', 'compute = "maximum"'), "unknown compute 'maximum'"),
        (("expect = { about = 5.6 }", 'expect = { about = 5.6, tolerance = "roughly" }'), "tolerance 'roughly'"),
        (("expect = { about = 5.6 }", "expect = { approx = 5.6 }"), "unknown expect key(s) approx"),
        (('compute = "max_over_min"', 'compute = "ratio"'), "needs of = {"),
        (("about = 0.1", 'about = 0.1\n[bounds]\ndevice_iops = "lots"'), "device_iops = 'lots': give a positive"),
        (("about = 0.1", "about = 0.1\n[bounds]\ndevice_iops = -5"), "[bounds] device_iops = -5: give a positive"),
        (("about = 0.1", "about = 0.1\n[bounds]\ndevice_iops = inf"), "[bounds] device_iops = inf: give a positive"),
        (("about = 0.1", "about = 0.1\n[bounds]\ndevice_iops = true"), "device_iops = True: give a positive"),
        (("expect = {", 'to = "device_iops"\nexpect = {'), 'to = "<bound>" divides a ratio'),
    ],
)
def test_bad_claims_say_what_is_wrong(tmp_path: Path, verdicts: dict, change: tuple[str, str], message: str) -> None:
    study = tmp_path / "pvscsi-vs-lsi"
    shutil.copytree(STUDY, study)
    assert change[0] in CLAIM
    (study / "claims.toml").write_text(CLAIM.replace(*change))
    with pytest.raises(ClaimError, match=re.escape(message)):
        _verdicts(study, tmp_path / "processed")


BOUND = """
[[claims]]
id = "b"
says = "The random-read rows are possible."
metric = "iops_per_cpu_pct_reported"
where = { table = "cpu", test = "randread" }
compute = "bounded"
iops_from = { table = "controllers", sioc = "off" }
join = ["test", "controller"]
expect = { }
reading = "a bound: <b>any</b> VM"
"""


def test_a_bound_passes_rows_at_or_below_it_and_a_reading_stays_text(tmp_path: Path) -> None:
    """gus_fio_1's random-read IOPS over the CPU table's CPU is the rows' own most: both pass, as claim 23 found."""
    study = tmp_path / "pvscsi-vs-lsi"
    shutil.copytree(STUDY, study)
    (study / "claims.toml").write_text(BOUND)
    verdict = _verdicts(study, tmp_path / "processed")["b"]
    assert verdict.verdict == "PASS" and verdict.recomputed.startswith("All 2 at or below it: randread/LSI: ")
    assert verdict.computed.endswith("Read as: a bound: <b>any</b> VM")  # words, escaped where the page shows them


def test_missing_claims_file(tmp_path: Path) -> None:
    with pytest.raises(ClaimError, match="no claims file"):
        load_claims(tmp_path)


def test_published_reader_on_the_shared_tables() -> None:
    folder = SHARED / "published"
    if not folder.is_dir():
        pytest.skip("no ../shared/domain/published")
    rows = {}
    for path in sorted(folder.glob("*.csv")):
        assert detect(path) == "published-table"
        tables = read(path)
        rows[path.name] = tables.results.height
        assert set(tables.runs["tool"]) == {"published"}
    assert rows == {
        "controller_gus_fio_1.csv": 8,
        "cpu_efficiency.csv": 8,
        "iodepth_sweep.csv": 8,
        "rwmix_sweep.csv": 6,
        "seqread128k_per_vm.csv": 20,
    }
    seq = read(folder / "seqread128k_per_vm.csv").results
    assert seq["bandwidth_bytes_per_s"][0] == 401 * MIB and seq["lat_mean_ns"][0] == pytest.approx(9.95e6)
    mix = read(folder / "rwmix_sweep.csv").results
    assert mix["rwmixread_pct"].to_list()[:3] == [100.0, 50.0, 0.0] and set(mix["direction"]) == {"total"}


def test_bad_published_table(tmp_path: Path) -> None:
    path = tmp_path / "table.csv"
    path.write_text("# benchlib published table\n# citation: a post\nvm,iops\nvm1,12k\n")
    with pytest.raises(FormatError, match="line 4, column iops: a number, not '12k'"):
        read(path)
    path.write_text("# benchlib published table\nvm,iops\nvm1,12\n")
    with pytest.raises(FormatError, match="a citation"):
        read(path)


def test_bundle_lets_a_peer_get_the_same_verdicts(tmp_path: Path, verdicts: dict) -> None:
    path, links = write_bundle(STUDY, tmp_path / "out", tmp_path / "processed")
    again, _ = write_bundle(STUDY, tmp_path / "again", tmp_path / "processed")
    assert links == []
    assert path.read_bytes() == again.read_bytes()  # reproducible: same inputs, same bytes
    with pytest.raises(BundleError, match="never overwrites"):
        write_bundle(STUDY, tmp_path / "out", tmp_path / "processed")
    with tarfile.open(path) as archive:
        archive.extractall(tmp_path / "peer", filter="data")
    root = tmp_path / "peer" / "pvscsi-vs-lsi-bundle"
    for line in (root / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ", 1)
        assert hashlib.sha256((root / name).read_bytes()).hexdigest() == digest, name
    for needed in (
        "tasks.py",
        "pyproject.toml",
        "environment.yml",
        "README.md",
        "VERIFY.md",
        "benchlib/claims.py",
        "data/raw/pvscsi-vs-lsi/claims.toml",
        "data/raw/pvscsi-vs-lsi/study.toml",
    ):
        assert (root / needed).exists(), needed
    assert [p.name for p in (root / "pipelines").glob("*.toml")] == ["pvscsi-vs-lsi.toml"]  # none for absent studies
    recorded = {r["id"]: r["verdict"] for r in json.loads((root / "verdicts.json").read_text())}
    assert recorded == {k: v.verdict for k, v in verdicts.items()}
    # the peer runs the bundle's own code on the bundle's own data
    done = subprocess.run(
        [sys.executable, "-m", "benchlib.cli", "verify", "data/raw/pvscsi-vs-lsi"],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and "25 PASS, 8 FAIL, 0 UNSUPPORTED" in done.stdout
    machine = subprocess.run(
        [sys.executable, "-m", "benchlib.cli", "verify", "data/raw/pvscsi-vs-lsi", "--json", "-"],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    record = json.loads(machine.stdout)  # a peer's CI reads this
    assert machine.returncode == 1 and record["counts"] == {"PASS": 25, "FAIL": 8, "UNSUPPORTED": 0}
    assert {r["id"]: r["verdict"] for r in record["verdicts"]} == recorded
    runs = [r for r in record["verdicts"] if r["runs"]]  # the CPU table's claims read no run
    assert len(runs) == 27 and all(r["runs_per_configuration"] == 1 and r["note"] for r in runs)
    from benchlib.paths import PROCESSED
    from benchlib.store import raw_data_digest

    assert (record["format"], record["format_version"]) == ("benchlib-verify", 1)
    # the unpacked files are new (other times): the same data gives the same digest as this checkout's
    assert record["raw_data_sha256"] == raw_data_digest(PROCESSED / "pvscsi-vs-lsi") is not None
    claims = (root / "data" / "raw" / "pvscsi-vs-lsi" / "claims.toml").read_bytes()
    assert record["claims_sha256"] == hashlib.sha256(claims).hexdigest()
    assert (root / "data" / "processed" / "pvscsi-vs-lsi" / "manifest.json").exists()  # its own processed folder


def test_a_sweeps_shape_is_said_in_its_phases_with_its_steps() -> None:
    """A sweep that rises and levels off is not one that 'rises and falls': each phase, then every step."""
    from benchlib.claims import _shape

    assert _shape([0.2, -0.1], 0.05) == "rises, then falls (steps +20.0%, -10.0%)"
    assert _shape([0.1, 0.01, 0.1], 0.05) == "rises, then flat, then rises (steps +10.0%, +1.0%, +10.0%)"
    assert _shape([0.01, -0.02], 0.05) == "flat (steps +1.0%, -2.0%)"
    assert _shape([0.01, 0.02], 0.0) == "increasing (steps +1.0%, +2.0%)"  # no step rule: any rise counts


# ---------------------------------------------------------------- claims read runs as the pages do


def _loopback_claim(compute: str, where: dict, expect: dict | None = None, **params: object) -> object:
    from benchlib.claims import Claim

    return Claim(
        id=compute,
        section="",
        says="",
        stated="",
        metric="iops",
        compute=compute,
        where=where,
        params=params,
        expect=expect or {"above": 0},
    )


def _figure(verdict: object) -> float:
    return float(re.sub(r"[^0-9.e+-]", "", verdict.recomputed.split(" ")[0].rstrip("x")))


def test_a_claim_over_measured_runs_gives_the_figure_the_pages_show() -> None:
    """The bundled loopback study: 4 hosts at once, 3 runs per configuration, every row per job and direction
    and fio's "All clients" row beside them. Each kind of claim reads each run first (its members' totals),
    then the median over the runs, as the comparison, fairness and sweeps pages do."""
    from benchlib import views
    from benchlib.store import open_study

    opened = open_study("loopback-fio")
    tables = load_study_tables(opened.processed)
    cell = {"profile": "randread", "block_size": "4k", "rate_cap": "off"}
    only = {k: [v] for k, v in cell.items()}
    units = views.run_totals(opened, "iops", ["ioengine"], only=only)
    medians = {r["ioengine"]: r["iops"] for r in units.group_by("ioengine").agg(pl.col("iops").median()).to_dicts()}
    fair = {r["ioengine"]: r for r in views.fairness(opened, "iops", by=["ioengine"], only=only).to_dicts()}
    sweep = views.sweep(opened, "iodepth-sweep")
    claims = [
        _loopback_claim("sum", {**cell, "ioengine": "libaio"}),
        _loopback_claim("ratio", cell, of={"ioengine": "psync"}, to={"ioengine": "libaio"}),
        _loopback_claim("jain", {**cell, "ioengine": "libaio"}),
        _loopback_claim("max_over_min", {**cell, "ioengine": "libaio"}),
        _loopback_claim("argmax", {"profile": "iodepth-sweep"}, {"equals": "64"}, over="iodepth"),
    ]
    got = {v.claim.id: v for v in verify(tables, claims, {})}
    assert _figure(got["sum"]) == pytest.approx(medians["libaio"], rel=5e-3)
    assert _figure(got["ratio"]) == pytest.approx(medians["psync"] / medians["libaio"], rel=5e-3)
    assert _figure(got["jain"]) == pytest.approx(fair["libaio"]["jain_median"], abs=5e-4)
    assert _figure(got["max_over_min"]) == pytest.approx(fair["libaio"]["max_min_median"], rel=5e-3)
    peak = sweep.sort("iops", descending=True)["iodepth"][0]
    assert got["argmax"].recomputed == str(peak)
    for verdict in got.values():  # each says it is the median of runs, not a test
        assert verdict.runs_per_configuration == 3 and verdict.note.startswith("the median of 3 runs"), verdict


def test_across_worst_and_each_read_the_runs_as_told() -> None:
    from benchlib.store import open_study

    tables = load_study_tables(open_study("loopback-fio").processed)
    cell = {"profile": "randread", "block_size": "4k", "rate_cap": "off", "ioengine": "libaio"}
    each, worst, best = verify(
        tables,
        [
            _loopback_claim("sum", cell, across="each"),
            _loopback_claim("sum", cell, across="worst"),
            _loopback_claim("sum", cell, across="best"),
        ],
        {},
    )
    runs = sorted(float(x.replace(",", "")) for x in re.findall(r"\d[\d,]*\.?\d*", each.recomputed))
    assert len(runs) == 3 and _figure(worst) == pytest.approx(runs[0], rel=5e-3)
    assert _figure(best) == pytest.approx(runs[-1], rel=5e-3)


def test_members_given_a_run_each_are_read_as_one_run() -> None:
    """A published table whose rows carry a label of their own gives each member a run of its own: those
    "runs" share no member, so they are one run's members (a sum is their total, not the median member's)."""
    from benchlib.claims import verify_claim

    rows = pl.DataFrame(
        {
            "run_id": [f"abc-{i}-vm{i}" for i in range(5)],
            "vm": [f"vm{i}" for i in range(5)],
            "controller": ["LSI"] * 5,
            "iops": [100.0, 200, 300, 400, 500],
            "io_count": [None] * 5,
            "bandwidth_bytes_per_s": [None] * 5,
            "lat_mean_ns": [None] * 5,
        }
    )

    lsi = {"controller": "LSI"}
    assert verify_claim(rows, _loopback_claim("sum", lsi), {}, ("controller",)).recomputed == "1,500 IOPS"
    assert verify_claim(rows, _loopback_claim("max_over_min", lsi), {}, ("controller",)).recomputed == "5.00x"


@pytest.mark.parametrize(
    ("name", "metric", "page_metric", "fair"),
    [
        ("pvscsi-vs-lsi", "iops", None, 7),  # the sweeps' per-VM tables; the others are one row per configuration
        ("pvscsi-vs-lsi", "bandwidth_mib_s", "bandwidth_bytes_per_s", 4),  # the sequential per-VM tables
        ("loopback-fio", "iops", None, 29),
        ("fio-sample", "iops", None, 0),
    ],
)
def test_every_configuration_claims_what_its_pages_show(name: str, metric: str, page_metric: str, fair: int) -> None:
    """The bundled studies and fio's own sample outputs: one run per configuration or three, one member or
    four, published tables or measured runs; each configuration's total and fairness, as verify and as the
    pages compute them. (A study the tests record is checked in test_new.)"""
    from benchlib.store import open_study
    from tests.claims_pages import assert_claims_agree_with_pages

    assert assert_claims_agree_with_pages(open_study(name), metric, page_metric) == fair


def test_a_ratio_to_a_declared_bound_and_a_bound_misnamed(tmp_path: Path) -> None:
    """A ratio to a bound divides the runs' median total by it; a bound the claim names but [bounds] does not
    declare leaves the claim unsupported, naming what is declared (a typo shows)."""
    from benchlib.store import open_study

    (tmp_path / "claims.toml").write_text(
        "[bounds]\ndevice_iosp = 450000\ndevice_mib_s = 2000\n"
        + "".join(
            f'[[claims]]\nid = "{i}"\nsays = "x"\nmetric = "{metric}"\ncompute = "ratio"\nto = "{bound}"\n'
            'where = { profile = "randread", block_size = "4k", rate_cap = "off" }\n'
            'of = { ioengine = "libaio" }\nexpect = { above = 0 }\n'
            for i, (metric, bound) in enumerate([("iops", "device_iops"), ("bandwidth_mib_s", "device_mib_s")])
        )
    )
    claims, tolerances = load_claims(tmp_path)
    opened = open_study("loopback-fio")
    misnamed, declared = verify(load_study_tables(opened.processed), claims, tolerances)
    assert misnamed.verdict == "UNSUPPORTED" and "[bounds] declares device_iosp, device_mib_s: a typo?" in (
        misnamed.recomputed
    )
    cell = {"profile": ["randread"], "block_size": ["4k"], "rate_cap": ["off"], "ioengine": ["libaio"]}
    runs = views.run_totals(opened, "bandwidth_bytes_per_s", ["ioengine"], only=cell)["bandwidth_bytes_per_s"]
    assert _figure(declared) == pytest.approx(runs.median() / 1024**2 / 2000, rel=5e-3)


QUEUING = RAW / "esxi-queuing"


def test_the_queuing_post_is_checked_by_littles_law_and_by_the_queue_model(tmp_path: Path) -> None:
    """Issue 41: the ESXi queuing post's figures: Little's law on its own numbers (a `value` claim) and the
    queue model given the device latency its figures imply. A changed figure changes both kinds."""
    found = _verdicts(QUEUING, tmp_path / "processed")
    assert {k: v.verdict for k, v in found.items()} == dict.fromkeys(
        ["1", "2", "3", "4", "5", "6a", "6b", "7a", "7b"], "PASS"
    )
    assert (found["1"].recomputed, found["5"].recomputed, found["6a"].recomputed) == ("91.0", "0.985 ms", "1.00x")
    copy = tmp_path / "esxi-queuing"
    shutil.copytree(QUEUING, copy)
    table = copy / "queuing.csv"
    table.write_text(table.read_text().replace(",64,32,65000,1.4", ",64,32,80000,1.4"))  # a figure 23% higher
    changed = _verdicts(copy, tmp_path / "changed")
    assert changed["1"].verdict == "FAIL" and changed["1"].recomputed.startswith("112")  # 80,000 x 1.4 ms
    assert changed["5"].verdict == "FAIL" and changed["4"].verdict == "PASS"  # GAVG 0.8 ms; QUED still 32


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('metric = "queued_in_kernel"\ncompute', 'metric = "bandwidth_mib_s"\ncompute', "predicts .*'bandwidth_mib_s'"),
        ("device = [{ active = 32", "device = [{ active = 'x'", "each point's active commands"),
        ("device = [{ active = 32", "device = [{ active = 0", "each point's active commands"),
        (
            "device = [{ active = 32, of = { stack",
            'device = [{ active = 32, of = "x" }, { of = { stack',
            "rows of one configuration",
        ),
        ("stack = { outstanding = 96,", "stack = { outstanding = 96, nonsense = 3,", "the model's limits"),
        ("stack = { outstanding = 96,", "stack = { outstanding = true, x = 1,", "limits as whole numbers"),
        ("relative = true", 'relative = "yes"', "relative = true or false"),
    ],
)
def test_a_queue_model_claim_names_its_mistakes(tmp_path: Path, old: str, new: str, message: str) -> None:
    """Each mistake in a queue_model claim is one ClaimError naming it, never a traceback."""
    copy = tmp_path / "esxi-queuing"
    shutil.copytree(QUEUING, copy)
    claims = copy / "claims.toml"
    text = claims.read_text()
    assert old in text
    claims.write_text(text.replace(old, new, 1))
    with pytest.raises(ClaimError, match=message):
        _verdicts(copy, tmp_path / "processed")


def test_a_queue_model_claim_beyond_its_points_or_of_nothing_is_unsupported(tmp_path: Path) -> None:
    """A prediction that needs the device's latency beyond the measured points, or a point of rows without
    IOPS, is not judged: UNSUPPORTED, saying why."""
    copy = tmp_path / "esxi-queuing"
    shutil.copytree(QUEUING, copy)
    claims = copy / "claims.toml"
    text = claims.read_text().replace(
        "change = { guest_disk = 96, device_queue = 96 }",
        "change = { outstanding = 128, guest_disk = 128, device_queue = 128 }",
    )
    claims.write_text(
        text.replace('{ active = 96, of = { stack = "both_96" } }', '{ active = 96, of = { stack = "none" } }')
    )
    found = _verdicts(copy, tmp_path / "processed")
    assert found["4"].verdict == "UNSUPPORTED" and "no iops" in found["4"].recomputed.lower()
    claims.write_text(text)
    found = _verdicts(copy, tmp_path / "processed2")
    assert found["7a"].verdict == "UNSUPPORTED" and "beyond the points given" in found["7a"].recomputed


def test_the_queuing_posts_report_builds_and_reads_in_chromium(tmp_path: Path) -> None:
    """pipelines/esxi-queuing.toml on a copy of its study: the index gathers the claims, the claims page shows
    the model's predictions beside the post's figures, and every link of every page reaches a file."""
    import html
    import os

    from tests.browser import OFFLINE, chromium

    browser = chromium()
    data = tmp_path / "data"
    shutil.copytree(QUEUING, data / "raw" / "esxi-queuing")
    build = (
        "import sys; from pathlib import Path; from benchlib.pipeline import build_report; "
        "build_report(Path(sys.argv[1]), reports=Path(sys.argv[2]))"
    )
    env = {**os.environ, "BENCHLIB_DATA": str(data)}
    env.pop("BENCHLIB_PROCESSED", None)
    pipeline = ROOT / "pipelines" / "esxi-queuing.toml"
    done = subprocess.run(
        [sys.executable, "-c", build, str(pipeline), str(tmp_path / "reports")],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    folder = tmp_path / "reports" / "esxi-queuing"

    def dom(page: str) -> str:
        shown = subprocess.run(
            [browser, *OFFLINE, "--dump-dom", (folder / page).as_uri()],
            capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
        return html.unescape(re.sub(r"<[^>]+>", " ", shown.stdout))

    index, claims = dom("index.html"), dom("claims.html")
    assert "9 of the write-up's 9 claims hold" in re.sub(r"\s+", " ", index)
    assert "0.768 ms" in claims and "the queue model's I/Os queued in the ESXi kernel (QUED)" in claims
    for page in folder.glob("*.html"):
        targets = re.findall(r"href='([^'#]+)'", page.read_text())
        assert all((folder / html.unescape(t)).is_file() for t in targets), page.name


def test_each_conclusion_of_the_write_up_is_weighed_by_the_claims_it_rests_on(tmp_path: Path) -> None:
    """Issue 41: the PVSCSI post's conclusions (claims.toml's [[conclusions]]) each name the claims they rest
    on; a conclusion stands where all hold, is weakened where one fails, and is open where the data cannot
    decide one. The placement story rests on claims 12b and 25, which fail (only gus_fio_5 trails in every
    configuration). Any study's claims file may state conclusions; one resting on no claim is refused."""
    from benchlib.claims import Conclusion, load_conclusions, weigh_conclusions
    from benchlib.report_html import _claims_answer
    from benchlib.words.claims import conclusions_words

    table = views.claim_table("pvscsi-vs-lsi")
    found = views.conclusion_table("pvscsi-vs-lsi", table)
    status = {r["conclusion"]: (r["status"], r["failed"]) for r in found.iter_rows(named=True)}
    assert status["placement"] == ("weakened", ["12b", "25"])
    assert status["PVSCSI"] == ("weakened", ["22", "23"]) and status["depth"] == ("weakened", ["4a"])
    said = conclusions_words(found)
    assert "Two VMs were slower in every configuration" in said and "Weakened by claims 12b, 25, which fail" in said
    assert said.count("recomputed") == 0  # what a claim recomputes to is said once, in the claims' lines
    index = _claims_answer(table, "claims.html", found)
    assert "<strong>Conclusions</strong>: 4 of the write-up's 4 rest on a claim that fails" in index
    assert "placement (claims 12b, 25)" in index

    rule = Conclusion("c", "It holds.", ("1", "2", "3"))
    (weighed,) = weigh_conclusions([rule], {"1": "PASS", "2": "PASS", "3": "PASS"})
    assert (weighed.status, weighed.failed, weighed.undecided) == ("stands", (), ())
    (weighed,) = weigh_conclusions([rule], {"1": "PASS", "2": "UNSUPPORTED", "3": "PASS"})
    assert (weighed.status, weighed.undecided) == ("open", ("2",))
    (weighed,) = weigh_conclusions([rule], {"1": "FAIL", "2": "UNSUPPORTED", "3": "PASS"})
    assert weighed.status == "weakened"

    copy = tmp_path / "pvscsi-vs-lsi"
    shutil.copytree(STUDY, copy)
    claims = copy / "claims.toml"
    text = claims.read_text()
    for bad, message in (
        ('rests_on = ["10", "12a", "12b", "25"]', "rests on 99, which no claim"),
        ('rests_on = ["10", "12a", "12b", "25"]', "rests_on = \\["),
        ('id = "depth"', "give id, says and rests_on only"),
    ):
        new = {
            "rests on 99, which no claim": 'rests_on = ["10", "99"]',
            "rests_on = \\[": "rests_on = []",
            "give id, says and rests_on only": 'id = "depth"\nweight = 2',
        }[message]
        claims.write_text(text.replace(bad, new, 1))
        with pytest.raises(ClaimError, match=message):
            load_conclusions(copy)
    claims.write_text(text.split("[[conclusions]]")[0])  # a claims file without conclusions: none said
    assert (
        load_conclusions(copy) == [] and conclusions_words(views.conclusion_table("pvscsi-vs-lsi", table).clear()) == ""
    )
