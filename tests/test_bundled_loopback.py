"""The bundled study recorded by `benchlib run`: complete, intact, small, and what its README says."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from benchlib.ingest import ingest_study
from benchlib.paths import RAW
from benchlib.runner import load_plan
from benchlib.runner.execute import PLAN_RECORD, pending
from benchlib.sources._common import sha256_of
from benchlib.store import load_study_tables
from benchlib.study import RUN_MANIFEST, load_study

STUDY = RAW / "loopback-fio"


def test_every_cell_is_complete_on_every_host() -> None:
    plan = load_plan(STUDY / "plan.toml")
    assert len(plan.servers) >= 4 and all(s.startswith("127.") for s in plan.servers)
    assert plan.repetitions >= 3
    assert pending(plan) == []
    factors = load_study(STUDY).factors
    assert factors["block_size"] == ["4k", "64k"] and factors["ioengine"] == ["psync", "libaio"]
    assert factors["rate_cap"] == ["off", "on"]
    assert {"iodepth-sweep", "rwmix-sweep"} <= set(factors["profile"])
    order = json.loads((STUDY / PLAN_RECORD).read_text())
    assert order["seed"] == plan.seed and [o["cell"] for o in order["order"]] == [c.key for _, c in plan.order()]


def test_recorded_files_are_intact_and_small() -> None:
    manifests = sorted(STUDY.rglob(RUN_MANIFEST))
    assert len(manifests) == len(load_plan(STUDY / "plan.toml").order())
    for path in manifests:
        manifest = json.loads(path.read_text())
        for rel, entry in manifest["files"].items():
            assert sha256_of(path.parent / rel) == entry["sha256"], f"{path.parent / rel} changed since it was recorded"
    size = sum(p.stat().st_size for p in STUDY.rglob("*") if p.is_file())
    assert size < 30 * 1024 * 1024


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory):
    processed = tmp_path_factory.mktemp("processed")
    report = ingest_study(STUDY, processed)
    assert report.ok, report.quarantined
    return load_study_tables(processed / STUDY.name)


def test_ingest_gives_one_result_per_host_and_cell(tables) -> None:
    runs = tables.runs.filter(pl.col("format") == "fio-json+", ~pl.col("is_aggregate"))
    assert runs.height == 87 * 4
    assert runs.group_by("host").len()["len"].to_list() == [87] * 4
    assert runs["repetition"].null_count() == 0 and runs["profile"].null_count() == 0
    results = tables.results.join(runs, on="run_id").filter(pl.col("io_count") > 0)
    capped = results.filter(pl.col("rate_cap") == "on")
    per_job = capped["iops"] / capped["jobs"]
    assert per_job.min() > 450 and per_job.max() < 510  # the 500 IOPS cap held on every host
    sweep = results.filter(pl.col("profile") == "iodepth-sweep")
    assert sorted(sweep["iodepth"].unique().to_list()) == [1, 2, 4, 8, 16, 32, 64, 128]
    logs = tables.runs.filter(pl.col("format") == "fio-log")
    assert logs.height > 3000 and logs["host"].null_count() == 0


def test_readme_says_what_it_is_and_is_not() -> None:
    text = (STUDY / "README.md").read_text()
    assert "Not vSphere" in text and "record.sh" in text and "fio-3.33" in text
    assert Path(STUDY / "record.sh").stat().st_mode & 0o111
