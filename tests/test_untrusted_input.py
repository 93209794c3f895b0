"""Strings from data, study.toml and pipeline files stay data: never code (papermill parameter names),
never markup (the HTML report, checked in a real Chromium), and a bundle never packs what a link
outside the study points to, while ingest and the bundle agree on what the study holds."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from benchlib.bundle import write_bundle
from benchlib.ingest import ingest_study
from benchlib.paths import PROJECT_ROOT, RAW
from benchlib.pipeline import PipelineError, load_pipeline
from tests.browser import OFFLINE, chromium

FACTOR = "site<script>document.body.dataset.pwned='factor'</script>&amp"
LEVEL = 'lab"><img src=x onerror="document.body.dataset.pwned=\'level\'"> & co'
CONTROLLER = "LSI<script>document.body.dataset.pwned='csv'</script>"


def _evil_study(data: Path) -> Path:
    """The published PVSCSI-vs-LSI table with markup in a factor name, a level, a CSV value and the titles."""
    study = data / "raw" / "evil"
    study.mkdir(parents=True)
    table = (RAW / "pvscsi-vs-lsi" / "seqread-128k-per-vm.csv").read_text()
    (study / "seqread-128k-per-vm.csv").write_text(table.replace(",LSI,", f",{CONTROLLER},"))
    (study / "study.toml").write_text(
        '[study]\nname = "evil <i>&</i>"\ncitation = "<script>document.body.dataset.pwned=\'citation\'</script>"\n'
        f'[factors]\ncontroller = [{json.dumps(CONTROLLER)}, "PVSCSI"]\nsioc = ["off", "on"]\ntest = ["seqread"]\n'
        f"{json.dumps(FACTOR)} = [{json.dumps(LEVEL)}]\n"
        f'[[files]]\nglob = "*"\nlevels = {{ {json.dumps(FACTOR)} = {json.dumps(LEVEL)} }}\n'
    )
    return study


def test_pipeline_parameter_names_never_become_code(tmp_path: Path) -> None:
    proof = tmp_path / "ran"
    pipeline = tmp_path / "p.toml"
    for table in (
        f"[parameters]\n\"x = 1\\nimport os; os.system('touch {proof}')\\nz\" = 1\n",
        '[parameters]\n"class" = 1\n',
    ):
        pipeline.write_text(
            '[pipeline]\nstudy = "pvscsi-vs-lsi"\naxes = ["controller"]\n'
            f'cell_notebook = "notebooks/cell.ipynb"\n{table}'
        )
        with pytest.raises(PipelineError, match="is not a parameter name"):
            load_pipeline(pipeline)
    pipeline.write_text(
        '[pipeline]\nstudy = "pvscsi-vs-lsi"\naxes = ["controller"]\ncell_notebook = "notebooks/cell.ipynb"\n'
        'summary_notebooks = [{ notebook = "notebooks/claims.ipynb", parameters = { "a b" = 1 } }]\n'
    )
    with pytest.raises(PipelineError, match="summary notebook 1 parameters: 'a b' is not a parameter name"):
        load_pipeline(pipeline)
    assert not proof.exists()


def test_markup_from_data_is_escaped_in_every_page(tmp_path: Path) -> None:
    browser = chromium()
    _evil_study(tmp_path / "data")
    pipeline = tmp_path / "evil.toml"
    pipeline.write_text(
        f'[pipeline]\nstudy = "evil"\ntitle = "<script>document.body.dataset.pwned=\'title\'</script>"\n'
        f'axes = ["controller", {json.dumps(FACTOR)}]\ncell_notebook = "notebooks/cell.ipynb"\n'
        'summary_notebooks = ["notebooks/study-overview.ipynb"]\n[parameters]\nvalue = "bandwidth_mib_s"\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "benchlib.cli", "report", str(pipeline), "--reports", str(tmp_path / "out")],
        env={**os.environ, "BENCHLIB_DATA": str(tmp_path / "data")},
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    pages = sorted((tmp_path / "out" / "evil").glob("*.html"))
    assert len(pages) == 5  # index, glossary, two cells, the overview
    assert all(re.fullmatch(r"[A-Za-z0-9._=-]+\.html", p.name) for p in pages)  # file names carry no markup
    offline = [
        *OFFLINE,
        "--virtual-time-budget=2000",
    ]
    for page in pages:
        text = page.read_text()
        assert "<script>document" not in text and "<img src=x" not in text, page.name
        dom = subprocess.run(
            [browser, *offline, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=True
        ).stdout
        assert "data-pwned" not in dom, page.name  # no script from the data ran
    index = (tmp_path / "out" / "evil" / "index.html").read_text()
    assert "site&lt;script&gt;" in index and "&amp;amp" in index  # shown as the text it is


def test_a_bundle_packs_what_ingest_reads_and_never_what_a_link_out_of_the_study_points_to(tmp_path: Path) -> None:
    study = tmp_path / "raw" / "pvscsi-vs-lsi"
    shutil.copytree(RAW / "pvscsi-vs-lsi", study)
    (study / "tables").mkdir()
    for name in ("rwmix-sweep.csv", "iodepth-sweep.csv"):  # the tables two claims read, now behind a folder link
        (study / name).rename(study / "tables" / name)
    (study / "sweeps").symlink_to("tables")
    (study / "tables-alias").symlink_to(study / "tables")
    secret = tmp_path / "id_ed25519"
    secret.write_text("PRIVATE KEY\n")
    (study / "notes.csv").symlink_to(secret)  # a link out of the study
    (study / "loop").symlink_to(study)  # a loop
    os.mkfifo(study / "pipe.csv")  # opening it would wait for a writer for ever
    (study / "zeros.csv").symlink_to("/dev/zero")
    for _ in range(2):  # a first ingest and a repeated one take the same path
        report = ingest_study(study, tmp_path / "processed")
        skipped = dict(report.skipped)
        assert "outside the study" in skipped["notes.csv"] and "a loop" in skipped["loop"]
        assert "a FIFO, not a file; never opened" in skipped["pipe.csv"] and "outside the study" in skipped["zeros.csv"]
    (study / "pipe.csv").unlink()
    (study / "zeros.csv").unlink()
    bundle, links = write_bundle(study, tmp_path / "out", tmp_path / "processed")
    assert [(name.rsplit("/", 1)[-1], to) for name, to, _ in links] == [
        ("loop", str(study)),
        ("notes.csv", str(secret)),
    ]
    assert (tmp_path / "processed" / "pvscsi-vs-lsi" / "manifest.json").exists()
    with tarfile.open(bundle) as archive:
        names = archive.getnames()
        assert not any(b"PRIVATE KEY" in archive.extractfile(m).read() for m in archive.getmembers() if m.isfile())
        archive.extractall(tmp_path / "peer", filter="fully_trusted")
    root = tmp_path / "peer" / "pvscsi-vs-lsi-bundle"
    assert "pvscsi-vs-lsi-bundle/data/raw/pvscsi-vs-lsi/sweeps/rwmix-sweep.csv" in names  # the folder link followed
    assert "notes.csv" in (root / "VERIFY.md").read_text()
    recorded = {r["id"]: r["verdict"] for r in json.loads((root / "verdicts.json").read_text())}
    done = subprocess.run(
        [sys.executable, "-m", "benchlib.cli", "verify", "data/raw/pvscsi-vs-lsi"],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert "25 PASS, 8 FAIL, 0 UNSUPPORTED" in done.stdout, done.stdout + done.stderr  # the peer's verdicts...
    assert (
        sorted(recorded.values()).count("PASS") == 25 and sorted(recorded.values()).count("FAIL") == 8
    )  # ...the author's
