"""`benchlib new <kind>`: each kind of study the field publishes, written, run for real on loopback fio
servers level by level (the settings set by hand), ingested, its claims skeleton verified; the controller
study's report built from its name alone."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import polars as pl
import pytest

from benchlib.bundle import write_bundle
from benchlib.claims import UNSUPPORTED, claims_frame, load_claims, verify
from benchlib.ingest import ingest_study
from benchlib.new import KINDS, NewStudyError, write_study
from benchlib.runner import PlanError, load_plan, run_plan
from benchlib.runner.describe import design_advice
from benchlib.runner.plan import chosen_levels
from benchlib.store import load_study_tables, open_study
from tests.claims_pages import assert_claims_agree_with_pages
from tests.fio_helpers import fio_server

pytestmark = pytest.mark.fio

SERVERS = ["127.0.0.31", "127.0.0.32"]
PORT = 8879


def _run_every_level(folder: Path) -> int:
    """Run the study's plan once per combination of the factors set by hand, as its README says."""
    plan = load_plan(folder / "plan.toml")
    by_hand = [f for f in plan.factors if not f.options]  # a factor with no fio option is a setting set by hand
    done = 0
    for combination in itertools.product(*(f.levels for f in by_hand)):
        given = [f"{f.name}={level}" for f, level in zip(by_hand, combination, strict=True)]
        done += run_plan(plan, levels=chosen_levels(plan, given) or None).done
    return done


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_kind_is_a_study_that_runs_level_by_level_and_verifies(kind: str, fio_binary: str, tmp_path: Path) -> None:
    folder = tmp_path / "raw" / kind
    servers = SERVERS[: len(KINDS[kind].servers) if len(KINDS[kind].servers) < 2 else 2]
    write_study(
        kind,
        folder,
        servers=servers,
        runtime_s=1,
        size="16MiB",
        repetitions=2,
        target=str(tmp_path / "targets" / "{host}.dat"),
        port=PORT,
    )
    plan = load_plan(folder / "plan.toml")
    assert plan.repetitions == 2 and plan.servers == tuple(servers)
    readme = (folder / "README.md").read_text()
    together = " ".join(f"--levels {factor}=<level>" for factor in KINDS[kind].by_hand)
    assert f"benchlib run plan.toml {together}" in readme  # every factor set by hand named in one run
    assert "## What this data is not" in readme and "drift" in readme
    cells = len(plan.cells())
    with fio_server(fio_binary, SERVERS[0], PORT), fio_server(fio_binary, SERVERS[1], PORT):
        assert _run_every_level(folder) == cells * 2 * len(servers)
    assert ingest_study(folder, tmp_path / "processed").ok
    claims, tolerances = load_claims(folder)
    verdicts = verify(load_study_tables(tmp_path / "processed" / kind), claims, tolerances)
    if kind == "virtual-to-native":  # the device's bound is the author's to declare; until then, unsupported
        verdicts = _against_the_declared_bound(folder, tmp_path, verdicts)
    assert verdicts and all(v.verdict != UNSUPPORTED for v in verdicts), [(v.claim.id, v.recomputed) for v in verdicts]
    assert all(v.runs_per_configuration == 2 for v in verdicts if v.runs)
    if kind == "multipath":  # every configuration's claims are its pages' figures; a peer's rebuild agrees
        judged = assert_claims_agree_with_pages(open_study(folder, tmp_path / "processed"), "iops")
        assert judged == cells  # two servers in every run: each configuration has a fairness figure
        _a_peer_rebuilds_the_same_verdicts(folder, tmp_path, verdicts)


def _against_the_declared_bound(folder: Path, tmp_path: Path, verdicts: list) -> list:
    """Claim 2 of virtual-to-native divides the native runs' IOPS by the device's bound from [bounds]."""
    (undeclared,) = [v for v in verdicts if v.claim.id == "2"]
    assert undeclared.verdict == UNSUPPORTED and "[bounds]" in undeclared.recomputed
    path = folder / "claims.toml"
    path.write_text(path.read_text().replace("# device_iops = 450000", "device_iops = 450000"))
    claims, tolerances = load_claims(folder)
    tables = load_study_tables(tmp_path / "processed" / "virtual-to-native")
    verdicts = verify(tables, claims, tolerances)
    (declared,) = [v for v in verdicts if v.claim.id == "2"]
    assert "the declared bound device_iops (450,000)" in declared.computed
    rows = claims_frame(tables).filter(
        (pl.col("platform") == "native") & (pl.col("block_size") == "4k") & ~pl.col("is_aggregate")
    )
    native = rows.group_by("run_id").agg(pl.col("iops").sum())
    assert native.height == 2  # two runs, each all its members together; their median over the bound
    shown = float(declared.recomputed.removesuffix("x"))
    assert shown == pytest.approx(native["iops"].median() / 450000, rel=5e-3), declared.recomputed
    return verdicts


def _a_peer_rebuilds_the_same_verdicts(folder: Path, tmp_path: Path, verdicts: list) -> None:
    path, _ = write_bundle(folder, tmp_path / "out", tmp_path / "processed")
    with tarfile.open(path) as archive:
        archive.extractall(tmp_path / "peer", filter="data")
    root = tmp_path / "peer" / f"{folder.name}-bundle"
    assert not [p for p in root.rglob("*") if p.suffix == ".so" or ".ipynb_checkpoints" in p.parts]
    done = subprocess.run(
        [sys.executable, "-m", "benchlib.cli", "verify", f"data/raw/{folder.name}", "--json", "-"],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]
    peer = json.loads(done.stdout[done.stdout.index("{") :])
    assert {v["id"]: (v["verdict"], v["recomputed"]) for v in peer["verdicts"]} == {
        v.claim.id: (v.verdict, v.recomputed) for v in verdicts
    }


def test_repetitions_are_sized_for_a_verdict_and_new_never_overwrites(tmp_path: Path) -> None:
    folder = tmp_path / "ctl"
    write_study("controller", folder)
    plan = load_plan(folder / "plan.toml")
    # the controller's 2 comparisons in each of 6 block size x read share groups: a family of 12 needs 6 runs
    assert plan.repetitions == 6
    advice = " ".join(design_advice(plan))
    assert "a verdict at α = 0.05 is possible" in advice
    assert "can reach a verdict at α = 0.05" in (folder / "README.md").read_text()
    fewer = tmp_path / "fewer"
    write_study("controller", fewer, repetitions=2)  # the author's choice stands, and its README says what it costs
    said = (fewer / "README.md").read_text()
    assert "too few for any of controller's" in said and "(6 runs each are needed)" in said
    with pytest.raises(NewStudyError, match="holds files already"):
        write_study("fairness", folder)
    with pytest.raises(NewStudyError, match="no study kind 'nope'; the kinds: controller, fairness"):
        write_study("nope", tmp_path / "other")
    with pytest.raises(PlanError, match="controller has no level 'scsi'"):
        chosen_levels(plan, ["controller=scsi"])
    with pytest.raises(PlanError, match="give factor=level"):
        chosen_levels(plan, ["nothing=1"])
