"""`benchlib run` with the real fio: a local plan end to end through ingest, many fio
servers on loopback with one killed mid-run and filled in by a rerun, resume after
SIGINT and after SIGKILL, and the remote (through fio) target checks."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from benchlib.ingest import ingest_study
from benchlib.runner import PlanError, UnsafeTargetError, load_plan, run_plan
from benchlib.runner.execute import RunError, host_facts, hosts_done, pending
from benchlib.runner.targets import Targets
from benchlib.store import scan_table
from benchlib.study import RUN_MANIFEST, load_study
from benchlib.words.implausible import implausible_words
from tests import esxi_standins

pytestmark = pytest.mark.fio

LOCAL_PLAN = """
[study]
name = "local-demo"
[run]
runtime_s = {runtime}
repetitions = {repetitions}
seed = 5
output = "study"
[target]
file = "{targets}/{{host}}.dat"
size = "16MiB"
[options]
ioengine = "psync"
direct = 0
log_avg_msec = 500
[matrix.block_size]
option = "bs"
levels = ["4k", "16k"]
[matrix.controller]
levels = ["pvscsi"]
[[profiles]]
use = "randread-4k"
[[profiles]]
use = "rwmix-sweep"
hold = {{ block_size = "4k" }}
sweep = {{ levels = [0, 100] }}
options = {{ numjobs = 2, iodepth = 1 }}
"""


def _local_plan(tmp_path: Path, runtime: int = 1, repetitions: int = 2) -> Path:
    path = tmp_path / "plan.toml"
    path.write_text(
        LOCAL_PLAN.format(runtime=runtime, repetitions=repetitions, targets=tmp_path / "targets"), encoding="utf-8"
    )
    return path


def _manifests(study: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(study.rglob(RUN_MANIFEST))]


def test_local_plan_end_to_end_through_ingest(fio_binary: str, tmp_path: Path) -> None:
    plan = load_plan(_local_plan(tmp_path))
    seen: list[tuple[float, float, str]] = []
    summary = run_plan(plan, progress=lambda done, total, label: seen.append((done, total, label)))
    assert summary.done == 8 and summary.missing == [] and summary.already == 0
    assert seen[-1][0] == pytest.approx(seen[-1][1]) and seen[-1][2].startswith("8/8")  # progress reached the end

    study = tmp_path / "study"
    manifests = _manifests(study)
    assert len(manifests) == 8
    first = manifests[0]
    assert first["fio_version"].startswith("fio-") and first["command"][0] == fio_binary
    facts = next(iter(first["host_facts"].values()))
    assert facts["kernel"] == os.uname().release and facts["cpus"] == os.cpu_count() and facts["memory_bytes"] > 0
    assert {m["repetition"] for m in manifests} == {1, 2}
    assert sorted(m["order_index"] for m in manifests) == list(range(8))
    job = (study / first["cell"] / f"r{first['repetition']}" / "attempt-1" / "job-local.fio").read_text()
    assert "runtime=1" in job and re.search(r"^filename=/dev/fd/\d+$", job, flags=re.M)  # the checked descriptor...
    assert f"is {tmp_path / 'targets' / 'local.dat'}, opened and checked by benchlib" in job  # ...of the target
    target = tmp_path / "targets" / "local.dat"
    marker = json.loads((tmp_path / "targets" / "local.dat.benchlib-target").read_text())
    assert marker["inode"] == target.stat().st_ino and target.stat().st_size == (16 << 20) + 4096  # not re-created
    assert "controller" in (study / "study.toml").read_text()
    recorded = json.loads((study / "benchlib-plan.json").read_text())
    assert recorded["seed"] == 5 and len(recorded["order"]) == 8

    report = ingest_study(study, tmp_path / "processed")
    assert report.ok, report.quarantined
    processed = tmp_path / "processed" / "study"
    runs = scan_table(processed, "runs").collect()
    results = scan_table(processed, "results").collect().join(runs, on="run_id")
    json_runs = runs.filter(pl.col("format") == "fio-json+")
    assert json_runs.height == 8
    assert json_runs["host"].to_list() == [facts["hostname"]] * 8
    assert sorted(json_runs["repetition"].to_list()) == [1, 1, 1, 1, 2, 2, 2, 2]
    assert set(json_runs["controller"]) == {"pvscsi"}
    by_cell = (
        results.filter(pl.col("profile") == "randread-4k")
        .group_by("block_size")
        .agg(pl.col("block_size_bytes").first())
    )
    assert dict(by_cell.iter_rows()) == {"4k": 4096, "16k": 16384}  # the matrix level reached fio
    mix = results.filter(pl.col("profile") == "rwmix-sweep", pl.col("io_count") > 0)
    assert set(zip(mix["write_pct"], mix["direction"], strict=True)) == {("0", "read"), ("100", "write")}
    logs = runs.filter(pl.col("format") == "fio-log")
    assert logs.height > 0 and logs["host"].null_count() == 0 and logs["profile"].null_count() == 0

    again = run_plan(plan)  # everything is done: nothing is rerun
    assert again.done == 0 and again.already == 8 and len(_manifests(study)) == 8


def _start_server(fio: str, host: str, port: int) -> subprocess.Popen:
    return subprocess.Popen(
        [fio, f"--server=ip:{host},{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _wait_listening(host: str, port: int) -> None:
    import socket

    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"fio server {host}:{port} did not start")


def _stop(server: subprocess.Popen) -> None:
    """Stop a fio server and the job processes it forked (its session)."""
    try:
        os.killpg(server.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    server.wait()


SERVERS = ["127.0.0.6", "127.0.0.7", "127.0.0.8"]
PORT = 8866

SERVER_PLAN = """
[study]
name = "cs-demo"
[run]
runtime_s = 3
repetitions = 1
seed = 11
output = "study"
[target]
file = "{targets}/{{host}}.dat"
size = "16MiB"
[hosts]
servers = {servers}
port = {port}
[options]
ioengine = "psync"
direct = 0
[matrix.rate_cap]
levels = ["off", "on"]
options.on = {{ rate_iops = 200 }}
[[profiles]]
use = "randread-4k"
"""


@pytest.fixture
def servers(fio_binary: str) -> Iterator[dict[str, subprocess.Popen]]:
    running = {host: _start_server(fio_binary, host, PORT) for host in SERVERS}
    for host in SERVERS:
        _wait_listening(host, PORT)
    try:
        yield running
    finally:
        for server in running.values():
            _stop(server)


def test_many_hosts_one_killed_mid_run_then_filled_in(fio_binary: str, tmp_path: Path, servers: dict) -> None:
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(SERVER_PLAN.format(targets=tmp_path / "targets", servers=json.dumps(SERVERS), port=PORT))
    plan = load_plan(plan_path)
    victim = SERVERS[1]
    timer = threading.Timer(0.8, _stop, args=(servers[victim],))

    def progress(done: float, total: float, label: str) -> None:
        if not timer.is_alive() and not timer.finished.is_set():
            timer.start()  # dies 0.8 s into the first cell (2 s of running)

    summary = run_plan(plan, progress=progress)
    assert summary.done == 2 + 2  # the two others, in both cells
    assert {m.host for m in summary.missing} == {victim} and len(summary.missing) == 2
    assert victim in summary.down and "dropped out" in summary.down[victim]
    first = plan.order()[0]
    manifests = _manifests(tmp_path / "study")
    assert len(manifests) == 2  # both cells kept what the other hosts measured
    manifest = next(m for m in manifests if m["cell"] == first[1].key)
    assert manifest["hosts_ok"] == sorted(set(SERVERS) - {victim}) and victim in manifest["hosts_failed"]
    assert not (tmp_path / "study" / first[1].key / "r1" / "attempt-1" / victim).exists()

    servers[victim] = _start_server(fio_binary, victim, PORT)  # the host is back: rerun fills in only it
    _wait_listening(victim, PORT)
    again = run_plan(plan)
    assert again.missing == [] and again.done == 2 and again.already == 4
    assert pending(plan) == []
    for repetition, cell in plan.order():
        folder = tmp_path / "study" / cell.key / f"r{repetition}"
        assert hosts_done(folder) == set(SERVERS)
    second = [m for m in _manifests(tmp_path / "study") if m["attempt"] == 2]
    assert second and all(m["hosts"] == [victim] for m in second)

    report = ingest_study(tmp_path / "study", tmp_path / "processed")
    assert report.ok, report.quarantined
    runs = scan_table(tmp_path / "processed" / "study", "runs").collect().filter(pl.col("format") == "fio-json+")
    results = scan_table(tmp_path / "processed" / "study", "results").collect().join(runs, on="run_id")
    per_host = (
        results.filter(~pl.col("is_aggregate"), pl.col("direction") == "read")
        .group_by("rate_cap", "host")
        .agg(pl.col("iops").sum())
    )
    assert per_host.height == 2 * len(SERVERS)  # one result per host and cell
    capped = per_host.filter(pl.col("rate_cap") == "on")["iops"]
    assert capped.min() > 150 and capped.max() < 210  # the per-client cap of 200 IOPS held on every host


def test_a_host_down_from_the_start_is_reported(fio_binary: str, tmp_path: Path, servers: dict) -> None:
    hosts = SERVERS[:2] + ["127.0.0.9"]
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(
        SERVER_PLAN.format(targets=tmp_path / "targets", servers=json.dumps(hosts), port=PORT).replace(
            "runtime_s = 3", "runtime_s = 1"
        )
    )
    summary = run_plan(load_plan(plan_path))
    assert summary.done == 4
    assert "no fio server on 127.0.0.9" in summary.down["127.0.0.9"] and "fio --server" in summary.down["127.0.0.9"]
    assert {(m.host, m.reason) for m in summary.missing} == {("127.0.0.9", summary.down["127.0.0.9"])}


def test_remote_targets_are_checked_through_fio(fio_binary: str, tmp_path: Path, servers: dict) -> None:
    plan_path = tmp_path / "plan.toml"
    text = SERVER_PLAN.format(targets=tmp_path / "targets", servers=json.dumps(SERVERS[:1]), port=PORT)
    # the facts command a user would write as "ssh {host} sh -s -- {target}", here a local shell
    plan_path.write_text(
        text.replace(f"port = {PORT}\n", f'port = {PORT}\nfacts_command = "sh -s -- {{target}} # {{host}}"\n')
    )
    with pytest.raises(PlanError, match="--allow-facts-command"):  # a shell command runs only when allowed
        load_plan(plan_path)
    plan = load_plan(plan_path, allow_facts_command=True)
    host = SERVERS[0]
    target = Path(plan.target.path_for(host))
    target.parent.mkdir(parents=True)
    target.write_bytes(b"precious" * 1000)
    with pytest.raises(UnsafeTargetError, match=f"on {host} exists and benchlib did not create it"):
        Targets(plan, fio_binary, None).prepare([host], writes=True)
    assert target.read_bytes() == b"precious" * 1000
    target.write_bytes(b"")  # even an empty file is someone's
    with pytest.raises(UnsafeTargetError, match=f"on {host} exists and benchlib did not create it"):
        Targets(plan, fio_binary, None).prepare([host], writes=True)
    target.unlink()
    Targets(plan, fio_binary, None).prepare([host], writes=True)  # missing: benchlib creates it through fio
    marker = Path(str(target) + ".benchlib-target")
    from benchlib.runner.targets import read_record

    claim = read_record()[f"{host} {target}"]
    tail = bytes.fromhex(claim["token"]) * 256
    assert marker.read_bytes() == tail  # the study's own random token, nothing else
    assert target.stat().st_size == claim["size"] + 4096 and target.read_bytes()[claim["size"] :] == tail
    summary = run_plan(plan, remote=lambda h: True)
    assert summary.missing == [] and summary.done == 2
    manifest = json.loads(next(plan.output.rglob(RUN_MANIFEST)).read_text())
    facts = manifest["host_facts"][host]  # what the remote fio server's probe reply said about its machine
    assert facts["hostname"] == socket.gethostname() and facts["os"] == "Linux" and facts["bits"] == 64
    assert facts["fio_version"] == manifest["fio_version"] and facts["target"] == str(target)
    assert isinstance(facts["target_disks"], list)
    local = host_facts(str(target))  # the facts command ran the facts script: the same facts as for this machine
    assert (
        facts["kernel"] == local["kernel"]
        and facts["cpus"] == local["cpus"]
        and facts["memory_bytes"] == local["memory_bytes"]
    )
    assert facts["target_device"] == local["target_device"]["device"]


def _cli(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "benchlib.cli", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finished_cells(study: Path) -> int:
    """Count the cells with a manifest; a folder the runner removes while this looks (its probe) is looked at again."""
    try:
        return len(list(study.rglob(RUN_MANIFEST)))
    except FileNotFoundError:  # Python 3.11's rglob raises when a folder vanishes mid-scan
        return 0


def _wait_for_cells(study: Path, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while _finished_cells(study) < count:
        if time.monotonic() > deadline:
            pytest.fail(f"{count} cells did not finish in {timeout} s")
        time.sleep(0.1)


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGKILL])
def test_resume_after_an_interruption(fio_binary: str, tmp_path: Path, stop: signal.Signals) -> None:
    plan_path = _local_plan(tmp_path, runtime=2, repetitions=1)
    study = tmp_path / "study"
    first = _cli("run", str(plan_path), cwd=tmp_path)
    _wait_for_cells(study, 1)
    time.sleep(1.0)  # inside the second cell
    first.send_signal(stop)
    out, err = first.communicate(timeout=60)
    done_before = {p.parent for p in study.rglob(RUN_MANIFEST)}
    times_before = {p: p.stat().st_mtime_ns for p in study.rglob(RUN_MANIFEST)}
    assert 1 <= len(done_before) < 4
    if stop == signal.SIGINT:
        assert first.returncode == 130
        assert "its partial output was discarded" in err and "run the same command again to continue" in err
        assert not list(study.rglob(".partial-*"))
    else:
        assert first.returncode == -signal.SIGKILL
        assert list(study.rglob(".partial-*"))  # the interrupted cell's half-written output...
    second = _cli("run", str(plan_path), cwd=tmp_path)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert f"{4 - len(done_before)} host runs done now, {len(done_before)} were done before" in out
    assert not list(study.rglob(".partial-*"))  # ...is discarded on the next start
    assert all(p.stat().st_mtime_ns == t for p, t in times_before.items())  # completed cells were not redone
    assert len(list(study.rglob(RUN_MANIFEST))) == 4 and not list(study.rglob("attempt-2"))


def test_cli_dry_run_and_errors(tmp_path: Path) -> None:
    plan_path = _local_plan(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "benchlib.cli", "run", str(plan_path), "--dry-run"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0
    assert "cells: 4 per repetition x 2 repetitions = 8 runs" in done.stdout
    assert "randread-4k/block_size=16k/controller=pvscsi: bs=16k" in done.stdout
    assert not (tmp_path / "study").exists() and not (tmp_path / "targets").exists()  # a dry run writes nothing
    done = subprocess.run(
        [sys.executable, "-m", "benchlib.cli", "run", str(tmp_path / "missing.toml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and "no such plan file" in done.stderr and "Traceback" not in done.stderr

    foreign = tmp_path / "targets" / "local.dat"
    foreign.parent.mkdir()
    foreign.write_bytes(b"data")
    done = subprocess.run(
        [sys.executable, "-m", "benchlib.cli", "run", str(plan_path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2 and "benchlib did not create it" in done.stderr and "in [target]" in done.stderr
    assert foreign.read_bytes() == b"data"


def test_study_folder_not_written_by_run_is_refused(fio_binary: str, tmp_path: Path) -> None:
    plan_path = _local_plan(tmp_path)
    (tmp_path / "study").mkdir()
    (tmp_path / "study" / "study.toml").write_text("[study]\nname = 'hand-made'\n")
    with pytest.raises(RunError, match="was not written by `benchlib run`"):
        run_plan(load_plan(plan_path))
    assert load_study(tmp_path / "study").name == "hand-made"
    assert not (tmp_path / "targets").exists()  # refused before any target was created


ESXTOP_PLAN = """
[study]
name = "with-esxtop"
[run]
runtime_s = 3
repetitions = 1
output = "study"
[target]
file = "{targets}/{{host}}.dat"
size = "8MiB"
[options]
ioengine = "psync"
direct = 0
[[esxtop]]
host = "esx01.lab"
command = "{python} {shell} {{esxi}} {{delay}} {{samples}} {source}"
delay = 1
[[esxtop]]
host = "esx02.lab"
command = "echo 'esxtop: cannot connect to {{esxi}}' >&2; exit 255"
[[profiles]]
use = "randread-4k"
"""


def test_esxtop_runs_on_each_esxi_host_with_every_cell_and_its_samples_fall_in_the_runs(
    fio_binary: str, tmp_path: Path
) -> None:
    """[[esxtop]]: a capture per ESXi host per cell, beside fio's output; a failed one costs only itself."""
    from benchlib.stats.hostside import counters_during_runs
    from tests.conftest import corpus_dir

    shell = esxi_standins.write(tmp_path, "esxtop-shell.py", esxi_standins.ESXTOP)
    source = corpus_dir("esxtop") / "esxtopd__small-esxtop-data.csv"
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(
        ESXTOP_PLAN.format(targets=tmp_path / "targets", python=sys.executable, shell=shell, source=source)
    )
    with pytest.raises(PlanError, match="allow-facts-command"):
        load_plan(plan_file)
    summary = run_plan(load_plan(plan_file, allow_facts_command=True))
    assert summary.done == 1 and not summary.missing
    (manifest,) = _manifests(tmp_path / "study")
    assert manifest["esxtop"]["esx01.lab"]["file"] == "esxtop-esx01.lab.csv"
    assert manifest["esxtop"]["esx02.lab"] == {"error": "exit 255: esxtop: cannot connect to esx02.lab"}
    report = ingest_study(tmp_path / "study", tmp_path / "processed")
    assert report.quarantined == []
    runs = scan_table(report.processed, "runs").collect()
    captured = runs.filter(pl.col("format") == "esxtop")
    assert captured["host"].to_list() == ["esx01.lab"] and captured["profile"].to_list() == ["randread-4k"]
    fio_runs = runs.filter(pl.col("tool") == "fio", ~pl.col("is_aggregate"))
    placed = counters_during_runs(fio_runs, scan_table(report.processed, "host_counters").collect())
    assert placed["sample"].n_unique() >= 2  # the samples taken while fio ran are attributed to its run


def _written_in_full(path: Path, size: int) -> bool:
    """Whether every MiB of the region holds data (an unwritten extent reads back as zeros)."""
    with open(path, "rb") as handle:
        return all(any(handle.read(1 << 20)) for _ in range(size >> 20))


def _unwritten_extents(path: Path) -> int | None:
    """How many extents filefrag calls unwritten (None where filefrag cannot tell on this file system)."""
    done = subprocess.run(["filefrag", "-v", str(path)], capture_output=True, text=True, check=False)
    return done.stdout.count("unwritten") if done.returncode == 0 and "ext:" in done.stdout else None


def test_a_server_target_is_written_in_full_before_the_first_cell_reads_it(
    fio_binary: str, tmp_path: Path, servers: dict
) -> None:
    """fio creates a file sparse: benchlib writes the region through the server before any cell reads it, so
    the first read run measures the disk, not unwritten extents (which read for free)."""
    host = SERVERS[0]
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(
        SERVER_PLAN.format(targets=tmp_path / "targets", servers=json.dumps([host]), port=PORT)
        .replace("runtime_s = 3", "runtime_s = 1")
        .replace("repetitions = 1", "repetitions = 3")
        .replace('levels = ["off", "on"]\noptions.on = { rate_iops = 200 }', 'levels = ["off"]')
        .replace("direct = 0", "direct = 1")
    )
    plan = load_plan(plan_path)
    assert run_plan(plan).done == 3
    from benchlib.runner.targets import servers_sharing_files

    # a server of this machine that sees benchlib's files: its token is read back here before each cell
    assert set(servers_sharing_files([host], PORT, fio_binary)) == {host}
    target = Path(plan.target.path_for(host))
    assert _written_in_full(target, 16 << 20)
    assert _unwritten_extents(target) in (0, None)
    manifests = _manifests(plan.output)
    states = [m["target_state"][host] for m in manifests]
    assert all(s["written"] and s["kind"] == "file" and s["path"] == str(target) for s in states)
    assert len({s["written"] for s in states}) == 1  # written once, when created, before the first cell
    first = min(m["start_time"] for m in manifests)
    assert states[0]["written"] <= first

    def iops(manifest: dict) -> float:
        folder = plan.output / manifest["cell"] / f"r{manifest['repetition']}" / f"attempt-{manifest['attempt']}"
        document = json.loads((folder / "fio.json").read_text())  # valid JSON as it is: a peer's jq reads it
        assert "randread-4k: (g=0)" in (folder / "fio.banner.txt").read_text()  # the client's banner, kept beside
        return next(j["read"]["iops"] for j in document["client_stats"] if j["jobname"] != "All clients")

    by_order = [iops(m) for m in sorted(manifests, key=lambda m: m["order_index"])]
    assert max(by_order) < 3 * min(by_order), by_order  # the first read run is in line with the later ones


def test_a_server_target_left_unwritten_by_an_earlier_benchlib_is_written_before_use(
    fio_binary: str, tmp_path: Path, servers: dict
) -> None:
    """A target an earlier version created (token after an unwritten region), or whose lay-out was interrupted,
    is written in full the next time a plan uses it, and only then recorded as written."""
    from benchlib.runner.safety import new_claim
    from benchlib.runner.targets import read_record, write_record

    host = SERVERS[0]
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(SERVER_PLAN.format(targets=tmp_path / "targets", servers=json.dumps([host]), port=PORT))
    plan = load_plan(plan_path)
    target = Path(plan.target.path_for(host))
    claim = new_claim(plan.target.size_bytes)
    target.parent.mkdir(parents=True)
    with open(target, "wb") as handle:  # what benchlib 0.x left on a server: a sparse region, then the token
        handle.truncate(plan.target.size_bytes)
        handle.seek(plan.target.size_bytes)
        handle.write(claim.tail())
    Path(str(target) + ".benchlib-target").write_bytes(claim.tail())
    write_record(f"{host} {target}", claim)
    assert not _written_in_full(target, plan.target.size_bytes)
    Targets(plan, fio_binary, None).prepare([host], writes=False)
    assert _written_in_full(target, plan.target.size_bytes)
    assert target.read_bytes()[plan.target.size_bytes :] == claim.tail()  # still the file benchlib created
    assert read_record()[f"{host} {target}"]["written"]


def test_precondition_writes_the_region_the_plan_asks_once_per_study(fio_binary: str, tmp_path: Path) -> None:
    plan_path = _local_plan(tmp_path, runtime=1, repetitions=1)
    plan_path.write_text(
        plan_path.read_text().replace('size = "16MiB"', 'size = "16MiB"\nprecondition = "sequential"\npasses = 2')
    )
    plan = load_plan(plan_path)
    assert plan.target.passes == 2
    guard = Targets(plan, fio_binary, None)
    guard.prepare(["local"], writes=True)
    done = guard.state["local"]["preconditioned"]
    assert done["passes"] == 2 and done["at"] and "sequential" in done["how"]
    target = tmp_path / "targets" / "local.dat"
    before = target.read_bytes()[:4096]
    again = Targets(plan, fio_binary, None)
    again.prepare(["local"], writes=True)  # the same study: not preconditioned again
    assert again.state["local"]["preconditioned"] == done and target.read_bytes()[:4096] == before
    run_plan(plan)
    assert all(m["target_state"]["local"]["preconditioned"] == done for m in _manifests(plan.output))


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ('precondition = "pts"', 'say "sequential"'),
        ("passes = 2", 'passes needs precondition = "sequential"'),
        ('precondition = "sequential"\npasses = 17', "passes must be at most 16"),
        ('steady = "iops:20%"', 'steady needs precondition = "steady"'),
        ('precondition = "steady"\nsteady = "iops:20%\\nrw=write"', "give fio's steady-state criterion"),
        ('precondition = "steady"\nsteady = "latency:5%"', "give fio's steady-state criterion"),
        ('precondition = "steady"\nsteady_window_s = 1', "steady_window_s must be a whole number >= 2"),
        ('precondition = "steady"\nsteady_window_s = 30\nsteady_max_s = 10', "steady_max_s must be a whole"),
        ('precondition = "steady"\nsteady_max_s = 86401', "steady_max_s must be at most 86,400"),
    ],
)
def test_precondition_is_refused_with_its_line(tmp_path: Path, lines: str, message: str) -> None:
    plan_path = _local_plan(tmp_path)
    plan_path.write_text(plan_path.read_text().replace('size = "16MiB"', f'size = "16MiB"\n{lines}'))
    with pytest.raises(PlanError, match=message):
        load_plan(plan_path)


@pytest.mark.parametrize("writes", [False, True])
def test_each_server_runs_its_own_job_file_and_reads_only_when_told(
    fio_binary: str, tmp_path: Path, servers: dict, writes: bool
) -> None:
    """fio 3.33 gives every server the first host's job file when an option stands between ``--client`` and the
    job file: a read-only cell then read the first host's target on every server. Each server must run its own
    job (here: its own file, of its own size), and a read-only cell must be refused a write on every server."""
    from benchlib.runner.execute import fio_command

    jobs = {}
    for i, host in enumerate(SERVERS[:2], 1):
        target = tmp_path / f"{host}.dat"
        target.write_bytes(os.urandom(i << 20))  # 1 MiB for the first host, 2 MiB for the second
        (tmp_path / f"job-{host}.fio").write_text(f"[j]\nfilename={target}\nrw=read\nbs=64k\n")
        jobs[host] = f"job-{host}.fio"
    done = subprocess.run(
        fio_command(fio_binary, jobs, PORT, writes), cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    text = (tmp_path / "fio.json").read_text()
    document = json.loads(text[text.index("{") :])
    read = {c["hostname"]: c["read"]["io_bytes"] for c in document["client_stats"] if c["jobname"] != "All clients"}
    assert read == {SERVERS[0]: 1 << 20, SERVERS[1]: 2 << 20}, done.stderr  # each its own file
    for host in SERVERS[:2]:
        (tmp_path / f"job-{host}.fio").write_text(f"[j]\nfilename={tmp_path / f'{host}.dat'}\nrw=write\nbs=64k\n")
    before = {h: (tmp_path / f"{h}.dat").read_bytes() for h in SERVERS[:2]}
    subprocess.run(fio_command(fio_binary, jobs, PORT, writes), cwd=tmp_path, capture_output=True, timeout=60)
    after = {h: (tmp_path / f"{h}.dat").read_bytes() for h in SERVERS[:2]}
    assert (after == before) is not writes  # read-only: no server wrote; writing: both did


def test_only_a_fio_of_this_machine_that_sees_its_files_is_checked_here(fio_binary: str, tmp_path: Path) -> None:
    """A listener that is not fio (a tunnel, a proxy), or a fio listening on every address while the plan names a
    remote host, never counts as a server whose files benchlib reads itself: those are asked through fio."""
    from benchlib.runner.targets import servers_sharing_files
    from tests.fio_helpers import fio_server

    port = 8874
    listener = socket.create_server(("127.0.0.21", port))  # this process: a Python program, not fio
    try:
        assert servers_sharing_files(["127.0.0.21"], port, fio_binary) == {}
    finally:
        listener.close()
    with fio_server(fio_binary, "0.0.0.0", port):
        assert servers_sharing_files(["127.0.0.22"], port, fio_binary) != {}  # this machine: the wildcard answers
        assert servers_sharing_files(["192.0.2.7"], port, fio_binary) == {}  # another machine's address: not here


def test_a_region_that_is_no_whole_number_of_mib_is_written_to_its_last_byte(
    fio_binary: str, tmp_path: Path, servers: dict
) -> None:
    from benchlib.runner.targets import write_region_on_server

    size = (3 << 20) + 12_345
    target = tmp_path / "odd.dat"
    with open(target, "wb") as handle:
        handle.truncate(size + 4096)
    write_region_on_server(fio_binary, SERVERS[0], PORT, str(target), size, 1, tmp_path)
    data = target.read_bytes()
    assert any(data[size - 12_345 : size]) and any(data[size - 512 : size])  # the last part of a MiB too
    assert not any(data[size:])  # and nothing past the region


def test_a_target_created_again_is_preconditioned_again(fio_binary: str, tmp_path: Path) -> None:
    plan_path = _local_plan(tmp_path, runtime=1, repetitions=1)
    text = plan_path.read_text().replace('size = "16MiB"', 'size = "16MiB"\nprecondition = "sequential"')
    plan_path.write_text(text)
    plan = load_plan(plan_path)
    first = Targets(plan, fio_binary, None)
    first.prepare(["local"], writes=True)
    target = tmp_path / "targets" / "local.dat"
    target.unlink()
    Path(str(target) + ".benchlib-target").unlink()
    again = Targets(plan, fio_binary, None)
    again.prepare(["local"], writes=True)  # a new file, a new token: its record is its own
    assert again.claims["local"].token != first.claims["local"].token
    assert again.state["local"]["preconditioned"]["passes"] == 1
    from benchlib.runner.targets import read_record

    regions = [k for k in read_record() if k.startswith(f"region {plan.output.resolve()} ")]  # this study's
    assert len(regions) == 2 and {k.rsplit(" ", 1)[1] for k in regions} == {
        first.claims["local"].token,
        again.claims["local"].token,
    }  # preconditioned once for each file, each record keyed by its file's token


STEADY = 'size = "16MiB"\nprecondition = "steady"\nsteady = "iops:50%"\nsteady_window_s = 2\nsteady_max_s = {longest}'


def test_steady_preconditioning_runs_each_runs_workload_until_steady_and_labels_the_runs(
    fio_binary: str, tmp_path: Path
) -> None:
    """precondition = "steady": the region written twice, then before every run its own workload until fio's
    steady-state criterion holds; every run's manifest and labels say whether it was steady, and the
    steady-state output is never read as a run."""
    plan_path = _local_plan(tmp_path, runtime=1, repetitions=1)
    plan_path.write_text(plan_path.read_text().replace('size = "16MiB"', STEADY.format(longest=8)))
    plan = load_plan(plan_path)
    assert plan.target.passes == 2 and plan.target.steady == "iops:50%"
    run_plan(plan)
    manifests = _manifests(plan.output)
    assert len(manifests) == 4
    for manifest in manifests:
        steady = manifest["target_state"]["local"]["steady"]
        assert steady["criterion"] == "iops:50%" and steady["window_s"] == 2
        assert (
            1.5 <= steady["seconds"] <= 8 + 1
        )  # about the window at least (fio counts in whole samples), at most the longest
        assert isinstance(steady["attained"], bool)
    steady_outputs = list(plan.output.rglob("benchlib-steady-state.json"))
    assert len(steady_outputs) == 4 and all(json.loads(p.read_text())["jobs"][0]["steadystate"] for p in steady_outputs)
    assert ingest_study(plan.output, tmp_path / "processed").ok
    runs = scan_table(tmp_path / "processed" / "study", "runs").collect()
    assert set(runs["source"].map_elements(lambda s: Path(s).name, return_dtype=pl.String)) >= {"fio.json"}
    assert not runs["source"].str.contains("steady").any()  # the steady-state jobs are not runs
    runs = runs.filter(pl.col("format") == "fio-json+")
    assert runs.height == 4
    said = runs.select(pl.col("labels").list.eval(pl.element().filter(pl.element().struct["name"] == "target.steady")))
    values = [x["value"] for row in said.to_series() for x in row]
    assert len(values) == 4 and set(values) <= {"yes", "no"}


def test_a_run_never_steady_is_named_on_the_pages(fio_binary: str, tmp_path: Path) -> None:
    """A criterion fio all but never meets: every IOPS sample of 3 s within 0.1% of their mean, where the I/O
    arrives as a Poisson process of 200 a second (samples about 7% apart, so three seconds' counts would have
    to be equal; two seconds' were, once in CI, and buffered reads at full speed sometimes are that steady):
    the run is measured anyway and named as measured before steady."""
    from benchlib import views
    from benchlib.store import open_study

    plan_path = _local_plan(tmp_path, runtime=1, repetitions=1)
    text = plan_path.read_text().replace('size = "16MiB"', STEADY.format(longest=4).replace("50%", "0.1%"))
    text = text.replace("steady_window_s = 2", "steady_window_s = 3")
    text = text.replace("direct = 0", 'direct = 0\nrate_iops = 200\nrate_process = "poisson"')
    plan_path.write_text(text.replace('levels = ["4k", "16k"]', 'levels = ["4k"]'))
    plan = load_plan(plan_path)
    run_plan(plan)
    steadies = [m["target_state"]["local"]["steady"] for m in _manifests(plan.output)]
    assert steadies and not any(s["attained"] for s in steadies)
    assert all(s["seconds"] <= 4 + 1 for s in steadies)  # one job's time, though the sweep's runs have two
    ingest_study(plan.output, tmp_path / "processed")
    found = views.implausible(open_study(plan.output, tmp_path / "processed"), "iops", by=["profile"])
    assert set(found.filter(pl.col("rule") == "not steady")["run_unit"].unique()) == set(found["run_unit"].unique())
    words = implausible_words(found, "iops")
    assert "was not steady in" in words and "a device still settling" in words


def test_steady_preconditioning_on_servers_is_recorded_per_server(
    fio_binary: str, tmp_path: Path, servers: dict
) -> None:
    plan_path = tmp_path / "plan.toml"
    text = SERVER_PLAN.format(targets=tmp_path / "targets", servers=json.dumps(SERVERS), port=PORT)
    text = (
        text.replace("runtime_s = 3", "runtime_s = 1")
        .replace("options.on = { rate_iops = 200 }", "")
        .replace('levels = ["off", "on"]', 'levels = ["off"]')
    )
    plan_path.write_text(text.replace('size = "16MiB"', STEADY.format(longest=6)))
    run_plan(load_plan(plan_path))
    (manifest,) = _manifests(tmp_path / "study")
    for host in SERVERS:  # each server's own steady state, found by fio's host name in its output
        steady = manifest["target_state"][host]["steady"]
        assert isinstance(steady, dict) and steady["criterion"] == "iops:50%", steady
        assert 1.5 <= steady["seconds"] <= 6 + 1


def test_a_factor_no_fio_option_sets_runs_one_level_at_a_time(fio_binary: str, tmp_path: Path) -> None:
    """A controller benchlib does not set: running both levels shuffled would label runs with a setting
    nobody made, so the run is refused until --levels names the one set; the dry run says so and goes on."""
    plan_path = _local_plan(tmp_path, repetitions=1)
    plan_path.write_text(plan_path.read_text().replace('levels = ["pvscsi"]', 'levels = ["lsi", "pvscsi"]'))
    refused = subprocess.run(
        [sys.executable, "-m", "benchlib.cli", "run", str(plan_path)], capture_output=True, text=True, check=False
    )
    assert refused.returncode == 2 and "controller has no fio option" in refused.stderr
    assert f"benchlib run {plan_path} --levels controller=<level>" in refused.stderr.replace("\n", " ")
    assert not (tmp_path / "study").exists() or not list((tmp_path / "study").rglob(RUN_MANIFEST))
    dry = subprocess.run(
        [sys.executable, "-m", "benchlib.cli", "run", str(plan_path), "--dry-run"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert dry.returncode == 0 and "note: " in dry.stdout and "controller has no fio option" in dry.stdout


def test_a_token_cut_short_by_truncation_is_not_held(fio_binary: str, tmp_path: Path, servers: dict) -> None:
    """fio ends a read at the end of a file without an error, and verifies what it read: a target truncated to
    the first 100 bytes of its token passed the check through fio. The bytes read are counted too."""
    from benchlib.runner.safety import new_claim
    from benchlib.runner.targets import _all_hold, _holds

    size = 1 << 20
    claim = new_claim(size)
    target = tmp_path / "cut.dat"
    target.write_bytes(os.urandom(size) + claim.tail())
    host = SERVERS[0]
    assert _holds(fio_binary, host, PORT, str(target), claim, size, tmp_path)
    assert _all_hold(fio_binary, PORT, {host: (str(target), claim, size)}, tmp_path)
    with open(target, "r+b") as handle:
        handle.truncate(size + 100)
    assert not _holds(fio_binary, host, PORT, str(target), claim, size, tmp_path)
    assert not _all_hold(fio_binary, PORT, {host: (str(target), claim, size)}, tmp_path)
