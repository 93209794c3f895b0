"""Runs that cannot have measured the storage, recorded for real and named: the rules of
:mod:`benchlib.stats.plausibility` on a study whose first run read space never written, and on a
read-only device plan whose target benchlib was not allowed to write."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import polars as pl
import pytest

from benchlib import views
from benchlib.ingest import ingest_study
from benchlib.runner import load_plan, run_plan
from benchlib.runner.targets import Targets
from benchlib.stats import plausibility as rules
from benchlib.store import open_study
from benchlib.words.implausible import implausible_words
from tests.fio_helpers import fio_server

pytestmark = pytest.mark.fio

PLAN = """
[study]
name = "holes"
[run]
runtime_s = 1
repetitions = {repetitions}
seed = 3
output = "study"
[target]
file = "{targets}/{{host}}.dat"
size = "16MiB"
{hosts}[options]
ioengine = "psync"
direct = 1
[[profiles]]
use = "randread-4k"
"""


SERVER, PORT = "127.0.0.11", 8871


def _study(tmp_path: Path, repetitions: int, server: bool = False) -> Path:
    path = tmp_path / "plan.toml"
    hosts = f'[hosts]\nservers = ["{SERVER}"]\nport = {PORT}\n' if server else ""
    path.write_text(PLAN.format(repetitions=repetitions, targets=tmp_path / "targets", hosts=hosts), encoding="utf-8")
    return path


def test_a_run_that_read_space_never_written_is_named_with_its_figures(fio_binary: str, tmp_path: Path) -> None:
    """The first run reads, through a fio server, a region whose blocks were given back (holes read as zeros
    with no device I/O): what a target fio created sparse gave before benchlib wrote it. The later runs read
    it written. The first is named on its page: apart from its siblings, faster than a device, its device
    idle; the others are not."""
    if shutil.which("fallocate") is None:
        pytest.skip("fallocate (util-linux) is not installed")
    with fio_server(fio_binary, SERVER, PORT):
        plan = load_plan(_study(tmp_path, 1, server=True))
        target = Path(plan.target.path_for(SERVER))
        Targets(plan, fio_binary, None).prepare([SERVER], writes=False)  # created, written in full
        punched = subprocess.run(
            ["fallocate", "--punch-hole", "--offset", "0", "--length", str(16 << 20), str(target)], check=False
        )
        if punched.returncode:
            pytest.skip("this file system cannot punch holes")
        summary = run_plan(plan)
        if summary.missing and "Invalid argument" in summary.missing[0].reason:
            pytest.skip("the test folder's file system takes no direct I/O")
        assert summary.done == 1
        with open(target, "r+b") as handle:  # written from now on
            for offset in range(0, 16 << 20, 1 << 20):
                handle.seek(offset)
                handle.write(os.urandom(1 << 20))
            handle.flush()
            os.fsync(handle.fileno())
        assert run_plan(load_plan(_study(tmp_path, 3, server=True))).done == 2
    report = ingest_study(tmp_path / "study", tmp_path / "processed")
    assert report.ok, report.quarantined
    opened = open_study(tmp_path / "study", tmp_path / "processed")
    found = views.implausible(opened, "iops", by=["profile"])
    first = found.filter(pl.col("run") == "run 1")
    assert set(first["rule"]) >= {"apart", "too fast", "idle device"}, found
    assert found.filter(pl.col("run") != "run 1").is_empty(), found.to_dicts()
    apart = first.filter(pl.col("rule") == "apart").row(0, named=True)
    assert apart["figure"] >= rules.TIMES_APART * apart["reference"]
    words = implausible_words(found, "iops")
    assert words.startswith("**Run 1 may not have measured the storage**: its total IOPS, "), words
    assert "times the median of the configuration's 3 runs" in words and "µs with direct I/O" in words
    idle = first.filter(pl.col("rule") == "idle device").row(0, named=True)  # 0 I/Os, or a few of other work
    assert f"counted {int(idle['figure']):,} I/Os while fio completed" in words
    assert "Likely: reads of space never written" in words
    assert words.endswith("The figures on this page include these runs.")
    summary = implausible_words(found, "iops", page="summary")
    assert "run 1 of Profile randread-4k (its device idle, faster than a device, its total far" in summary


LATE_PLAN = """
[study]
name = "late"
[run]
runtime_s = 2
ramp_time_s = 0
repetitions = {repetitions}
seed = 3
output = "study"
[target]
file = "{targets}/{{host}}.dat"
size = "16MiB"
[hosts]
servers = ["127.0.0.12", "127.0.0.13"]
port = 8872
[options]
ioengine = "psync"
[[profiles]]
use = "randread-4k"
"""


def test_a_fio_server_that_started_after_the_other_had_ended_is_named(fio_binary: str, tmp_path: Path) -> None:
    """Two fio servers, one client: the second run's second server is paused (SIGSTOP) until the first has
    done its 2 s, so it takes its job late. fio's client JSON has one time for the run; each server's logs,
    stamped in Unix time by its own clock (``log_unix_epoch``, which ``benchlib run`` sets), show the two
    never ran at once. The first run, both servers together, is not named."""
    plan = tmp_path / "plan.toml"
    with fio_server(fio_binary, "127.0.0.12", 8872), fio_server(fio_binary, "127.0.0.13", 8872) as late:
        plan.write_text(LATE_PLAN.format(repetitions=1, targets=tmp_path / "targets"), encoding="utf-8")
        assert run_plan(load_plan(plan)).done == 2  # targets written, run 1 together
        plan.write_text(LATE_PLAN.format(repetitions=2, targets=tmp_path / "targets"), encoding="utf-8")
        os.killpg(late.pid, signal.SIGSTOP)  # it accepts no client until it is let go

        def let_go() -> None:  # once run 2's cell has begun: 4.5 s, past the first server's 2 s and its set-up
            deadline = time.monotonic() + 60  # (about 1 s on a loaded CI machine), within the client's 5 s wait
            while not list((tmp_path / "study").rglob(".partial-attempt-*")) and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(4.5)
            os.killpg(late.pid, signal.SIGCONT)

        waking = threading.Thread(target=let_go)
        waking.start()
        try:
            assert run_plan(load_plan(plan)).done == 2
        finally:
            waking.join()
            os.killpg(late.pid, signal.SIGCONT)
    ingest_study(tmp_path / "study", tmp_path / "processed")
    opened = open_study(tmp_path / "study", tmp_path / "processed")
    found = views.implausible(opened, "iops", by=["profile"])
    assert found.select("run", "rule").rows() == [("run 2", "apart in time")], found
    assert found["figure"][0] > 0.5  # seconds between the first server's end and the second's start (about 1.5)
    words = implausible_words(found, "iops")
    assert "did not run at once: the last began" in words, words


def test_a_device_benchlib_may_not_write_carries_never_written_on_every_run(fio_binary: str, tmp_path: Path) -> None:
    """A read-only plan on a device not named for destruction: benchlib writes nothing, and every run of it
    says the target was never written by benchlib, which the pages name."""
    if os.geteuid() != 0 or shutil.which("losetup") is None:
        pytest.skip("loop devices need root (CI runs as root)")
    image = tmp_path / "disk.img"
    with open(image, "wb") as handle:
        handle.truncate(16 << 20)  # a new thin disk: every block unwritten
    done = subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True, text=True, check=False)
    if done.returncode:
        pytest.skip(f"no loop device ({done.stderr.strip()})")
    device = done.stdout.strip()
    try:
        path = _study(tmp_path, 2)
        path.write_text(
            path.read_text().replace(f'file = "{tmp_path / "targets"}/{{host}}.dat"', f'device = "{device}"'),
            encoding="utf-8",
        )
        plan = load_plan(path)
        assert run_plan(plan).done == 2
    finally:
        subprocess.run(["losetup", "--detach", device], check=False)
    assert image.read_bytes() == bytes(16 << 20)  # nothing was written
    ingest_study(tmp_path / "study", tmp_path / "processed")
    opened = open_study(tmp_path / "study", tmp_path / "processed")
    runs = opened.tables(only=("runs",)).runs
    labels = runs.filter(pl.col("format") == "fio-json+")["labels"].to_list()
    assert all({"name": views.TARGET_WRITTEN, "value": "not by benchlib"} in run for run in labels), labels
    found = views.implausible(opened, "iops", by=["profile"])
    assert set(found.filter(pl.col("rule") == "unwritten target")["run"]) == {"run 1", "run 2"}
    assert "benchlib did not write the target of" in implausible_words(found, "iops")


def test_the_rules_on_figures_a_reader_can_check() -> None:
    totals = pl.DataFrame(
        {
            "run_unit": ["a", "b", "c", "d", "e"],
            "cfg": ["x", "x", "x", "y", "y"],
            "iops": [100.0, 95.0, 1000.0, 5.0, 60.0],
        }
    )
    apart = rules.apart_from_siblings(totals, "iops", ["cfg"])
    # c is 10x the median of the three (100); d and e are 12x apart, and with two runs neither can be told right
    assert apart["run_unit"].to_list() == ["c", "d", "e"]
    assert apart.filter(pl.col("run_unit") == "c")["reference"][0] == pytest.approx(100.0)
    second = 10**9
    spans = pl.DataFrame(
        {"run_unit": ["r"] * 2, "member": ["m1", "m2"], "start_ns": [0, 6 * second], "end_ns": [5 * second, 9 * second]}
    )
    assert rules.apart_in_time(spans)["figure"].to_list() == [pytest.approx(1.0)]
    counts = pl.DataFrame({"run_unit": ["r", "s"], "fio_ios": [100_000, 100_000], "device_ios": [12.0, 90_000.0]})
    assert rules.idle_device(counts)["run_unit"].to_list() == ["r"]
    # 200 members each on a disk of its own: each device saw its member's I/O, so none is idle
    many = pl.DataFrame({"run_unit": ["t"] * 200, "member": [f"m{i}" for i in range(200)], "fio_ios": [1000] * 200})
    assert rules.idle_device(many.with_columns(pl.lit(1000.0).alias("device_ios"))).is_empty()
    # a 2 µs median with direct I/O: no disk answers that fast; persistent memory declared at 1 µs does
    fast = pl.DataFrame(
        {"run_unit": ["p"], "member": ["m"], "direct": [True], "ioengine": ["libaio"], "clat_p50_ns": [2_000.0]}
    )
    assert rules.too_fast(fast)["reference"].to_list() == [rules.FASTEST_DIRECT_NS]
    assert rules.too_fast(fast, fastest_ns=1_000.0).is_empty()


def test_a_log_stamped_in_unix_time_reads_as_times_since_its_start(fio_binary: str, tmp_path: Path) -> None:
    """fio's log_unix_epoch log of a real run: its rows are times since the member began (the first at one
    interval), its run starts when the member did by this machine's clock; a log of one stamp shows no
    interval, so it claims no start of its own."""
    from datetime import UTC, datetime

    from benchlib.sources.fio_log import read_fio_log

    before = datetime.now(UTC)
    subprocess.run(
        [fio_binary, "--name=epoch", f"--filename={tmp_path / 't.dat'}", "--size=4MiB", "--rw=read", "--bs=4k",
         "--time_based=1", "--runtime=2", "--rate_iops=200", "--log_avg_msec=500", "--log_unix_epoch=1",
         f"--write_iops_log={tmp_path / 'e'}", "--output-format=json", f"--output={tmp_path / 'o.json'}"],
        check=True,
    )  # fmt: skip
    after = datetime.now(UTC)
    log = next(tmp_path.glob("e_iops*.log"))
    tables = read_fio_log(log)
    times = tables.intervals["time_ns"].to_list()
    assert abs(times[0] - 500_000_000) <= 2_000_000 and times[-1] <= 2_100_000_000, times  # fio's stamps drift a ms
    start = tables.runs["start_time"][0]
    assert before.replace(microsecond=0) <= start <= after, (before, start, after)
    one = tmp_path / "one_iops.1.log"
    one.write_text(log.read_text().splitlines()[0] + "\n")
    single = read_fio_log(one)
    assert single.runs["start_time"][0] is None and single.intervals["time_ns"].to_list() == [1_000_000_000]
