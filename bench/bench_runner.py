"""`benchlib run` against bare fio: the same jobs on the same fio servers, alternating.

Starts ``--servers`` fio servers on loopback addresses (127.0.1.1 up), each with its own file target
benchlib creates (written in full once, in the warm-up). Then, ``--rounds`` times in turn:

* ``benchlib run`` of a plan of ``--cells`` cells x ``--repetitions`` runs of ``--runtime`` s into a new
  output folder (every safety check: targets re-read before each cell, manifests, checksums, facts);
* a shell loop of the same job files through ``fio --client`` on the same servers, one fio per run, as
  an author without benchlib would run them.

Each side is checked for what it did before a figure is kept: the runs benchlib recorded (manifests
with every host ok) and the JSON results the loop wrote (one per run, every server in it) must equal the
plan's runs; a shortfall stops the bench with the counts. Records both sides' seconds per round, the ratio,
the seconds each run costs beyond bare fio, and the dry run's estimate against the time taken. With
``--pipeline``, the last round's study is then ingested and a report of it built (cell page and summary
pages), timed, for the many-host case.

    .venv/bin/python bench/bench_runner.py                  # 4 servers, 8 runs of 2 s, 3 rounds
    .venv/bin/python bench/bench_runner.py --servers 64 --rounds 1 --pipeline
    .venv/bin/python bench/bench_runner.py --smoke          # 2 servers, 2 runs of 1 s, 1 round: checks only
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import record  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BENCHLIB = [sys.executable, "-m", "benchlib.cli"]

PLAN = """[study]
name = "bench-runner"
[run]
runtime_s = {runtime}
repetitions = {repetitions}
seed = 7
output = "{output}"
[target]
file = "{targets}/{{host}}.dat"
size = "{size}"
[hosts]
servers = {servers}
port = {port}
[options]
ioengine = "libaio"
direct = {direct}
log_avg_msec = 1000
[matrix.block_size]
option = "bs"
levels = {levels}
[[profiles]]
use = "randread-4k"
"""


def addresses(count: int) -> list[str]:
    """``count`` loopback addresses, 127.0.1.1 upward (the whole 127/8 answers on Linux's loopback)."""
    return [f"127.0.{1 + i // 250}.{1 + i % 250}" for i in range(count)]


@contextlib.contextmanager
def servers(hosts: list[str], port: int) -> Iterator[None]:
    """Run one ``fio --server`` per address until the block ends."""
    running = [
        subprocess.Popen(
            ["fio", f"--server={host},{port}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for host in hosts
    ]
    try:
        for host in hosts:
            deadline = time.monotonic() + 30
            while True:
                try:
                    socket.create_connection((host, port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise SystemExit(f"no fio server came up on {host}:{port}") from None
                    time.sleep(0.05)
        yield
    finally:
        for server in running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def write_plan(work: Path, name: str, args: argparse.Namespace, hosts: list[str]) -> Path:
    """Write a plan whose study goes to ``work/name``; return its path."""
    sizes = ["4k", "8k", "16k", "32k", "64k", "128k", "256k", "512k"][: args.cells]
    path = work / f"{name}.toml"
    path.write_text(
        PLAN.format(
            runtime=args.runtime,
            repetitions=args.repetitions,
            output=name,
            targets=work / "targets",
            size=args.size,
            servers=json.dumps(hosts),
            port=args.port,
            direct=0 if args.buffered else 1,
            levels=json.dumps(sizes),
        ),
        encoding="utf-8",
    )
    return path


def run_benchlib(plan: Path) -> float:
    """Run ``benchlib run`` on ``plan``; return the wall seconds."""
    began = time.perf_counter()
    done = subprocess.run([*BENCHLIB, "run", str(plan)], cwd=ROOT, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - began
    if done.returncode:
        raise SystemExit(f"benchlib run failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return seconds


def recorded_runs(study: Path, hosts: list[str]) -> int:
    """Count the runs ``benchlib run`` recorded in ``study`` with every host ok."""
    count = 0
    for manifest in study.rglob("benchlib-run.json"):
        data = json.loads(manifest.read_text())
        count += sorted(data["hosts_ok"]) == sorted(hosts)
    return count


def bare_script(study: Path, out: Path, port: int) -> tuple[Path, int]:
    """Write the shell loop an author without benchlib runs: one ``fio --client`` per run, the same job files.

    Returns the script and how many runs it holds (the study's runs, in the order benchlib ran them).
    """
    order = json.loads((study / "benchlib-plan.json").read_text())["order"]
    lines = ["#!/bin/sh", "set -e"]
    for i, entry in enumerate(order):
        folder = study / entry["cell"] / f"r{entry['repetition']}" / "attempt-1"
        clients = " ".join(
            f"--client={job.stem.removeprefix('job-')},{port} {job}" for job in sorted(folder.glob("job-*.fio"))
        )
        lines.append(f"fio --output-format=json+ --output={out / f'run-{i}.json'} {clients}")
    script = out / "loop.sh"
    script.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return script, len(order)


def run_bare(script: Path) -> float:
    """Run the shell loop; return the wall seconds."""
    began = time.perf_counter()
    done = subprocess.run(["sh", str(script)], cwd=script.parent, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"the bare fio loop failed: {done.stdout[-1500:]} {done.stderr[-1500:]}")
    return time.perf_counter() - began


def bare_runs(out: Path, hosts: list[str]) -> int:
    """Count the loop's results that hold every server's job."""
    count = 0
    for result in out.glob("run-*.json"):
        text = result.read_text()
        document = json.loads(text[text.index("{") :])
        count += {c["hostname"] for c in document["client_stats"] if c["jobname"] != "All clients"} == set(hosts)
    return count


def dry_estimate(plan: Path) -> float:
    """The dry run's estimate of the whole run, in seconds (its "time:" line)."""
    done = subprocess.run([*BENCHLIB, "run", "--dry-run", str(plan)], cwd=ROOT, capture_output=True, text=True)
    line = next(line for line in done.stdout.splitlines() if line.startswith("time:"))
    said = line.rsplit("about ", 1)[1]
    parts = said.replace("h", "").replace("min", "").replace("s", "").split()
    units = [3600, 60, 1][-len(parts) :]
    return float(sum(int(p) * u for p, u in zip(parts, units, strict=True)))


def check(what: str, got: int, wanted: int) -> None:
    """Stop the bench when a side did less than it was asked: a figure of less work is no figure."""
    if got != wanted:
        raise SystemExit(f"{what}: {got} runs done, {wanted} planned; no figure recorded")


def pipeline(study: Path, work: Path, hosts: int) -> list[tuple[str, object]]:
    """Ingest the study and build its report (a cell page per block size, the summary pages); time both."""
    data = work / "data"
    raw = data / "raw" / "bench-runner"  # the name the pipeline gives
    shutil.copytree(study, raw)
    env = {**os.environ, "BENCHLIB_DATA": str(data)}
    began = time.perf_counter()
    done = subprocess.run([*BENCHLIB, "ingest", str(raw)], cwd=ROOT, env=env, capture_output=True)
    ingest = time.perf_counter() - began
    if done.returncode:
        raise SystemExit(f"ingest failed: {done.stderr.decode()[-2000:]}")
    toml = work / "bench-runner.toml"
    toml.write_text(
        '[pipeline]\nstudy = "bench-runner"\ntitle = "Runner bench"\naxes = ["block_size"]\n'
        'cell_notebook = "notebooks/cell.ipynb"\nsummary_notebooks = ["notebooks/study-overview.ipynb", '
        '{ notebook = "notebooks/fairness.ipynb", parameters = { by = ["block_size"], only = {} } }]\n'
        '[parameters]\nvalue = "iops"\n'
    )
    began = time.perf_counter()
    done = subprocess.run(
        [*BENCHLIB, "report", str(toml), "--reports", str(work / "reports")], cwd=ROOT, env=env, capture_output=True
    )
    report = time.perf_counter() - began
    if done.returncode:
        raise SystemExit(f"report failed: {done.stdout.decode()[-2000:]} {done.stderr.decode()[-2000:]}")
    pages = len(list((work / "reports" / "bench-runner").glob("*.html")))
    keep = os.environ.get("BENCH_KEEP_REPORT")  # a folder to copy the report to, to look at its pages
    if keep:
        shutil.copytree(work / "reports" / "bench-runner", keep, dirs_exist_ok=True)
    return [
        (f"ingest of the {hosts}-host study, seconds", ingest),
        ("report build (cell pages, overview, fairness), seconds", report),
        ("report pages", pages),
    ]


def main() -> None:
    """Run the bench; record the figures in bench/results.md (not with --smoke)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=4)
    parser.add_argument("--cells", type=int, default=2)
    parser.add_argument("--repetitions", type=int, default=4)
    parser.add_argument("--runtime", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--size", default="64MiB")
    parser.add_argument("--port", type=int, default=8890)
    parser.add_argument("--buffered", action="store_true", help="direct = 0 (a file system without O_DIRECT)")
    parser.add_argument("--pipeline", action="store_true", help="then ingest the study and build its report")
    parser.add_argument("--smoke", action="store_true", help="2 servers, 1 cell x 2 runs of 1 s, 1 round; no record")
    args = parser.parse_args()
    if args.smoke:
        args.servers, args.cells, args.repetitions, args.runtime, args.rounds, args.size = 2, 1, 2, 1, 1, "4MiB"
    hosts = addresses(args.servers)
    runs = args.cells * args.repetitions
    work = Path(tempfile.mkdtemp(prefix="bench-runner-"))
    os.environ["BENCHLIB_STATE"] = str(work / "state")  # the targets this bench creates, recorded apart
    ours, bare = [], []
    try:
        with servers(hosts, args.port):
            warm = write_plan(work, "warm-up", args, hosts)
            run_benchlib(warm)  # creates and writes the targets, starts the page cache and Python's caches
            check("warm-up", recorded_runs(work / "warm-up", hosts), runs)
            estimate = dry_estimate(write_plan(work, "estimate", args, hosts))
            for round_ in range(args.rounds):
                plan = write_plan(work, f"round-{round_}", args, hosts)
                ours.append(run_benchlib(plan))
                check("benchlib run", recorded_runs(work / f"round-{round_}", hosts), runs)
                out = work / f"bare-{round_}"
                out.mkdir()
                script, planned = bare_script(work / f"round-{round_}", out, args.port)
                check("the plan's order", planned, runs)
                bare.append(run_bare(script))
                check("bare fio loop", bare_runs(out, hosts), runs)
            extra = pipeline(work / f"round-{args.rounds - 1}", work, args.servers) if args.pipeline else []
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ours_median, bare_median = sorted(ours)[len(ours) // 2], sorted(bare)[len(bare) // 2]
    rows = [
        ("fio servers (loopback)", args.servers),
        ("runs per side per round (cells x repetitions)", f"{args.cells} x {args.repetitions} = {runs}"),
        ("runtime per run, seconds", args.runtime),
        ("rounds (benchlib and bare fio alternating)", args.rounds),
        ("runs checked per side per round (benchlib's manifests, the loop's JSON)", runs),
        ("benchlib run, seconds, each round", ", ".join(f"{s:.1f}" for s in ours)),
        ("bare fio loop, seconds, each round", ", ".join(f"{s:.1f}" for s in bare)),
        ("benchlib / bare (medians)", ours_median / bare_median),
        ("benchlib beyond bare fio, seconds per run (medians)", (ours_median - bare_median) / runs),
        ("dry-run estimate, seconds", estimate),
        ("dry-run estimate / benchlib run (median)", estimate / ours_median),
        *extra,
    ]
    if args.smoke:
        print("\n".join(f"{k}: {v}" for k, v in rows))
        return
    record(f"benchlib run against bare fio, {args.servers} servers", rows)


if __name__ == "__main__":
    main()
