"""Host CPU from esxtop beside guest CPU from fio: a real client/server run on loopback, and an esxtop
capture (written here, in esxtop's batch CSV form) whose VM world groups are named after the fio hosts."""

from __future__ import annotations

import contextlib
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

import benchlib.store
from benchlib.ingest import ingest_study
from benchlib.views import host_efficiency
from tests.fio_helpers import fio_server

pytestmark = pytest.mark.fio
HOSTS = ["127.0.0.6", "127.0.0.7"]
PORT = 8871
#: each VM's world group % Used during the run (100 = one core)
USED = {"127.0.0.6": 20.0, "127.0.0.7": 40.0}


def _esxtop(path: Path, start: datetime, seconds: int) -> None:
    """A batch capture: sample 0 (all zero, as esxtop writes it), one sample before the run, one per
    second inside it, one after; only the samples whose interval lies inside may count (the first inside
    averages from the one before the run, and is left out)."""
    columns = [f'"\\\\esx01\\Group Cpu({1000 + i}:{vm})\\% Used"' for i, vm in enumerate(USED)]
    columns.append('"\\\\esx01\\Group Cpu(1:system)\\% Used"')
    rows = [(start - timedelta(seconds=5), [0.0] * 3), (start - timedelta(seconds=3), [95.0, 95.0, 5.0])]
    rows += [(start + timedelta(seconds=s), [*USED.values(), 5.0]) for s in range(1, seconds)]
    rows.append((start + timedelta(seconds=seconds + 4), [95.0, 95.0, 5.0]))
    lines = ['"(PDH-CSV 4.0) (UTC)(0)",' + ",".join(columns)]
    lines += [f'"{t:%m/%d/%Y %H:%M:%S}",' + ",".join(f'"{v}"' for v in values) for t, values in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_host_cpu_of_each_vms_worlds_beside_its_guest_cpu(
    fio_binary: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    study = tmp_path / "raw" / "host-cpu"
    study.mkdir(parents=True)
    (study / "study.toml").write_text('[study]\nname = "host-cpu"\n', encoding="utf-8")
    job = tmp_path / "job.fio"
    job.write_text(
        "[global]\nioengine=psync\nrw=randread\nbs=4k\nsize=8M\nruntime=4\ntime_based\nrate_iops=400\n"
        f"[vm]\nfilename={tmp_path}/scratch-$jobnum\n",
        encoding="utf-8",
    )
    hosts = tmp_path / "hosts.list"
    hosts.write_text("".join(f"{h},{PORT}\n" for h in HOSTS), encoding="utf-8")
    with contextlib.ExitStack() as stack:
        for host in HOSTS:
            stack.enter_context(fio_server(fio_binary, host, PORT))
        subprocess.run(
            [fio_binary, f"--client={hosts}", str(job), "--output-format=json+", f"--output={study / 'fio.json'}"],
            check=True,
            capture_output=True,
            timeout=120,
        )
    monkeypatch.setattr(benchlib.store, "PROCESSED", tmp_path / "processed")
    ingest_study(study, tmp_path / "processed")
    runs = benchlib.store.open_study(str(study)).tables(only=("runs",)).runs.filter(pl.col("host").is_not_null())
    start = runs["start_time"].min()
    seconds = int(runs["duration_ns"].max() // 1e9)
    assert seconds >= 4  # the run's span, not a moment
    _esxtop(study / "esxtop.csv", start, seconds)
    ingest_study(study, tmp_path / "processed")

    table = host_efficiency(str(study), by=[])
    assert sorted(table["vm"]) == HOSTS
    for row in table.iter_rows(named=True):
        assert row["host_cpu_used_pct"] == pytest.approx(USED[row["vm"]])  # neither sample 0 nor those outside
        assert row["host_samples"] == seconds - 2  # from start + 2 s: the sample at start + 1 s began before
        assert row["iops"] == pytest.approx(400, rel=0.05)
        assert row["iops_per_host_cpu_pct"] == pytest.approx(row["iops"] / USED[row["vm"]])
        assert row["cpu_used_pct"] is not None and row["host_reason"] is None  # the guest's figure beside it

    (study / "esxtop.csv").unlink()
    ingest_study(study, tmp_path / "processed")
    without = host_efficiency(str(study), by=[])
    assert without["iops_per_host_cpu_pct"].is_null().all()
    assert set(without["host_reason"]) == {"no esxtop capture with VM CPU (Group Cpu % Used) in the study"}


def test_a_vm_the_capture_does_not_name_gets_a_reason() -> None:
    """Stats level: the world groups are matched by the VM's name; a VM without a group has no host figure."""
    from benchlib.stats.hostside import vm_cpu_during_runs

    start = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)
    runs = pl.DataFrame({"run_id": ["r"], "start_time": [start], "duration_ns": [10 * 10**9]})
    counters = pl.DataFrame(
        {
            "object": ["Group Cpu"] * 3,
            "instance": ["7:vm-a", "7:vm-a", "8:vm-b:with-colon"],
            "counter": ["% Used"] * 3,
            "time": [start + timedelta(seconds=s) for s in (2, 4, 4)],
            "sample": [1, 2, 2],
            "value": [10.0, 30.0, 50.0],
        }
    )
    used = vm_cpu_during_runs(runs, counters)
    assert dict(zip(used["vm"], used["host_cpu_used_pct"], strict=True)) == {"vm-a": 20.0, "vm-b:with-colon": 50.0}
