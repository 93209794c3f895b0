"""Run a plan: every cell, repetition and host, safely, resumably, with provenance.

Layout written under the plan's output folder (a study folder under ``data/raw/``)::

    study.toml                      factors and levels (written by benchlib run)
    benchlib-plan.json              seed, run order, plan checksum
    <profile>/<factor>=<level>/.../r<repetition>/attempt-<n>/
        job-<host>.fio              the exact job file each host ran
        fio.json                    fio's json+ output (client/server: one entry per host)
        <host>/cell_bw.1.log ...    per-second bandwidth, IOPS and latency logs
        benchlib-run.json           provenance: command, fio version, host facts, times,
                                    factor levels, repetition, checksums of every file

A cell's output is written to a hidden ``.partial-*`` folder and renamed into
place only when fio finished; an interrupted cell's partial folder is removed
on the next start. A cell is done when every host has a result in one of its
attempts; a rerun runs only the hosts still missing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from benchlib import __version__
from benchlib.errors import BenchlibError, FormatError
from benchlib.runner.plan import Cell, Plan, PlanError, vcenter_problem
from benchlib.runner.reading import files_of, writing_jobs
from benchlib.runner.repetitions import (
    CellStopping,
    PrecisionRule,
    SettleRule,
    comparisons,
    outcome,
    run_total,
    stopping,
    write_record,
    write_settle_record,
)
from benchlib.runner.safety import UnsafeTargetError, replace_file
from benchlib.runner.settings import (
    AppliedSettings,
    SettingsError,
    journal_said,
    journals_of,
    left_on_vms,
    state_folder,
)
from benchlib.runner.targets import Targets, server_facts
from benchlib.runner.targets import is_this_machine as is_local
from benchlib.sources import read
from benchlib.sources._common import sha256_of
from benchlib.study import RUN_MANIFEST
from benchlib.vsphere import ESXI_FILE, FACTS_FILE

PLAN_RECORD = "benchlib-plan.json"
REPETITIONS_RECORD = "benchlib-repetitions.json"
STUDY_HEADER = "# written by `benchlib run` from its plan; edit the plan, not this file\n"
START_OVERHEAD_S = 1.5  # fio start-up per cell on this machine, for the time estimate
#: the same through fio's client and servers: a fixed part and a part per server (fio's client connects to each
#: and gathers each one's results). Measured on 2 cores with the servers on the same machine (bench/results.md):
#: 2 s runs took 4.06 s each on 4 servers, 8.6 s on 64; servers on machines of their own start faster
SERVER_OVERHEAD_S = 1.8
SERVER_OVERHEAD_PER_HOST_S = 0.075


class RunError(BenchlibError):
    """The run cannot start or continue (fio missing, output locked, study.toml not ours)."""


class RunInterrupted(BenchlibError):
    """The user stopped the run (Ctrl-C or SIGTERM); completed cells are kept."""


@dataclass
class Missing:
    """A (cell, repetition, host) without a result, and why."""

    cell: str
    repetition: int
    host: str
    reason: str


@dataclass
class RunSummary:
    """What a run did: runs done now, already done before, and still missing."""

    done: int = 0
    already: int = 0
    missing: list[Missing] = field(default_factory=list)
    down: dict[str, str] = field(default_factory=dict)
    #: adaptive plans: where each cell stands against the precision rule, and in words
    stopping: dict[str, tuple[CellStopping, str]] = field(default_factory=dict)


# ---------------------------------------------------------------- environment


def fio_binary() -> str:
    """Return the fio executable on PATH."""
    found = shutil.which("fio")
    if not found:
        raise RunError(
            "fio is not installed (or not on PATH); install it, e.g. `apt-get install fio`, "
            "or run `python3 tasks.py test`, which installs it where it can"
        )
    return found


def fio_version(fio: str) -> str:
    """``fio-3.33`` as the binary reports it."""
    return subprocess.run([fio, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout.strip()


def _first(path: Path, prefix: str) -> str | None:
    try:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith(prefix):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _block_device_of(path: Path) -> dict:
    """Model and I/O scheduler of the disk holding ``path`` (or the device itself)."""
    probe = path if path.exists() else path.parent
    while not probe.exists():
        probe = probe.parent
    st = os.stat(probe)
    dev = st.st_rdev if path.exists() and path.is_block_device() else st.st_dev
    node = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    if not node.exists():
        return {"device": None, "note": "not on a block device (overlay, tmpfs or network file system)"}
    node = node.resolve()
    disk = node.parent if (node / "partition").exists() else node
    scheduler = disk / "queue" / "scheduler"
    chosen = None
    if scheduler.exists():
        text = scheduler.read_text().strip()
        chosen = text[text.find("[") + 1 : text.find("]")] if "[" in text else text
    model = disk / "device" / "model"
    return {
        "device": disk.name,
        "partition": node.name if node != disk else None,
        "model": model.read_text().strip() if model.exists() else None,
        "scheduler": chosen,
        "rotational": (disk / "queue" / "rotational").read_text().strip() == "1"
        if (disk / "queue" / "rotational").exists()
        else None,
    }


def host_facts(target: str) -> dict:
    """Kernel, CPU, memory and target device of this machine."""
    mem = _first(Path("/proc/meminfo"), "MemTotal")
    return {
        "hostname": socket.gethostname(),
        "kernel": os.uname().release,
        "cpu_model": _first(Path("/proc/cpuinfo"), "model name"),
        "cpus": os.cpu_count(),
        "memory_bytes": int(mem.split()[0]) * 1024 if mem else None,
        "target": target,
        "target_device": _block_device_of(Path(target)),
    }


#: Run on a remote host through the plan's ``facts_command`` (on its stdin; ``$1`` is the target):
#: prints ``key=value`` lines with what :func:`host_facts` collects locally. POSIX sh, Linux /proc and /sys.
FACTS_SCRIPT = r"""
echo "hostname=$(uname -n)"
echo "kernel=$(uname -r)"
echo "cpu_model=$(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')"
echo "cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc)"
echo "memory_kib=$(awk '/^MemTotal/ {print $2}' /proc/meminfo 2>/dev/null)"
t="$1"; [ -e "$t" ] || t=$(dirname "$t")
dev=$(df -P "$t" 2>/dev/null | awk 'NR==2 {print $1}')
[ -b "$1" ] && dev="$1"
name=$(basename "$(readlink -f "$dev" 2>/dev/null)")
disk=$(lsblk -no PKNAME "/dev/$name" 2>/dev/null | head -n1); [ -n "$disk" ] || disk="$name"
echo "target_device=$disk"
[ -r "/sys/block/$disk/device/model" ] && echo "target_model=$(sed 's/ *$//' /sys/block/$disk/device/model)"
[ -r "/sys/block/$disk/queue/scheduler" ] && \
    echo "target_scheduler=$(sed 's/.*\[\(.*\)\].*/\1/' /sys/block/$disk/queue/scheduler)"
[ -r "/sys/block/$disk/queue/rotational" ] && echo "target_rotational=$(cat /sys/block/$disk/queue/rotational)"
"""


def child_environment() -> dict[str, str]:
    """Return this process's environment without vCenter's credentials, for every command benchlib starts.

    The plan's shell commands (facts, esxcli, esxtop) and fio need none of them; a command that
    printed its environment would otherwise write the password into the study.
    """
    from benchlib.vsphere import CREDENTIALS, PASSWORD, USER

    return {k: v for k, v in os.environ.items() if k not in (USER, PASSWORD, CREDENTIALS)}


def _shell(
    line: str, *, timeout: float, stdin: str | None = None, own_session: bool = False
) -> subprocess.CompletedProcess:
    """Run one of the plan's shell commands (allowed with --allow-facts-command), without vCenter's credentials.

    Its output is text: bytes that are not UTF-8 are replaced, never a failed run. ``own_session``: out of
    the terminal's reach (a Ctrl-C is benchlib's to handle: a setting being changed is finished first).
    """
    return subprocess.run(  # noqa: S602 -- the plan's own command
        line,
        shell=True,
        input=stdin,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=timeout,
        check=False,
        env=child_environment(),
        start_new_session=own_session,
    )


def command_facts(command: str, host: str, target: str) -> dict:
    """Return a remote host's facts through the plan's ``facts_command``.

    Return a remote host's facts through the plan's ``facts_command`` (e.g. ``ssh {host} sh -s -- {target}``),
    which gets :data:`FACTS_SCRIPT` on its stdin.
    """
    line = command.replace("{host}", shlex.quote(host)).replace("{target}", shlex.quote(target))
    try:
        done = _shell(line, timeout=60, stdin=FACTS_SCRIPT)
    except subprocess.TimeoutExpired:
        return {"facts_error": f"facts_command did not finish in 60 s: {line}"}
    if done.returncode != 0:
        return {
            "facts_error": f"facts_command exited with {done.returncode}: {(done.stderr or done.stdout).strip()[-300:]}"
        }
    facts: dict = {}
    for row in done.stdout.splitlines():
        key, sep, value = row.partition("=")
        if sep and key.strip() and value.strip():
            facts[key.strip()] = int(value) if key in ("cpus",) and value.strip().isdigit() else value.strip()
    if "memory_kib" in facts and str(facts["memory_kib"]).isdigit():
        facts["memory_bytes"] = int(facts.pop("memory_kib")) * 1024
    return facts


def reachable(host: str, port: int, timeout: float = 3.0) -> str | None:
    """None when a fio server answers on ``host:port``, else why not."""
    try:
        socket.create_connection((host, port), timeout=timeout).close()
        return None
    except OSError as exc:
        return f"no fio server on {host}:{port} ({exc.strerror or exc}); start one there with `fio --server`"


# ---------------------------------------------------------------- what fio makes of the plan


@dataclass(frozen=True)
class PlanReading:
    """fio's own reading of every cell: which cells write, and the files each host's job opens."""

    writing: frozenset[str]
    files: dict[tuple[str, str], tuple[str, ...]]


def read_plan(plan: Plan, fio: str, hosts: list[str] | None = None) -> PlanReading:
    """Ask fio about every cell's job file on every host.

    Ask fio (``--parse-only``) about every cell's job file on every host: it must accept it, open nothing but
    the host's target, and say whether it writes (see :mod:`benchlib.runner.reading`).

    Raises
    ------
    UnsafeTargetError
        When a job would open anything but the target.
    benchlib.runner.reading.FioRefusedJob
        When fio does not accept a job.

    """
    hosts = hosts or list(plan.hosts)
    cells = plan.cells()
    jobs = {(cell.key, host): job_lines(plan, cell, plan.target.path_for(host)) for cell in cells for host in hosts}
    files = files_of(fio, {f"{key} on {host}": lines for (key, host), lines in jobs.items()})
    opened = {(key, host): files[f"{key} on {host}"] for key, host in jobs}
    for (key, host), found in opened.items():
        if found != (plan.target.path_for(host),):
            raise UnsafeTargetError(
                f"cell {key} on {host}: fio would open {list(found)}, not only the target "
                f"{plan.target.path_for(host)}; benchlib runs no such job"
            )
    writing = writing_jobs(fio, {cell.key: jobs[(cell.key, hosts[0])] for cell in cells})
    return PlanReading(writing=frozenset(writing), files=opened)


# ---------------------------------------------------------------- plan output


def cell_dir(plan: Plan, repetition: int, cell: Cell) -> Path:
    """Return the folder of one cell and repetition."""
    return plan.output / cell.key / f"r{repetition}"


def _attempts(folder: Path) -> list[dict]:
    manifests = []
    for path in sorted(folder.glob(f"attempt-*/{RUN_MANIFEST}")):
        with contextlib.suppress(OSError, ValueError):
            manifests.append(json.loads(path.read_text(encoding="utf-8")))
    return manifests


def hosts_done(folder: Path) -> set[str]:
    """Hosts with a result in any completed attempt of a cell folder."""
    return {h for manifest in _attempts(folder) for h in manifest.get("hosts_ok", [])}


def study_toml(plan: Plan) -> str:
    """Return the study.toml a plan's runs are read with: its name, title, citation, factors and level words."""

    def q(text: str) -> str:  # a JSON string is a TOML basic string, once DEL is escaped too
        return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")

    lines = [
        STUDY_HEADER,
        "[study]",
        f"name = {q(plan.name)}",
        f"title = {q(plan.title)}",
        f"citation = {q(plan.citation)}",
        "",
        "[factors]",
    ]
    lines += [f"{name} = [{', '.join(q(level) for level in levels)}]" for name, levels in plan.study_factors().items()]
    if plan.vsphere and plan.vsphere.check:  # ingest checks these factors' levels against each cell's vCenter facts
        lines += ["", "[vsphere]", *(f"{fact} = {q(factor)}" for fact, factor in plan.vsphere.check.items())]
        lines += [f"device = {q(plan.vsphere.device)}"] if plan.vsphere.device else []
        lines += [f"disk = {q(plan.vsphere.disk)}"] if plan.vsphere.disk else []
    for factor, words in plan.level_words.items():  # the plan's levels in words, for every page
        lines += ["", f"[levels.{q(factor)}]", *(f"{q(level)} = {q(text)}" for level, text in words.items())]
    if plan.vsphere and plan.vsphere.shares:  # the shares the run held: how fairly the members shared is judged by them
        from benchlib.vsphere import SHARES_LEVELS

        lines += ["", "[shares]"]
        for host, vm in plan.vsphere.vms.items():
            shares = plan.vsphere.shares[vm]
            member = socket.gethostname() if host == "local" else host  # as the runs name their members
            lines.append(f"{q(member)} = {SHARES_LEVELS.get(str(shares), shares)}")
    return "\n".join(lines) + "\n"


def _own_file(path: Path, looks_ours: Callable[[str], bool]) -> None:
    """Refuse a file in the output folder that benchlib did not write (or a link, which it never follows)."""
    if not (path.exists() or path.is_symlink()):
        return
    try:
        ours = not path.is_symlink() and path.is_file() and looks_ours(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        ours = False
    if not ours:
        raise RunError(
            f"{path} exists and was not written by `benchlib run`; the plan's output must be a study "
            "folder of its own (set [run] output in the plan)"
        )


def _write_study(plan: Plan) -> None:
    path = plan.output / "study.toml"
    text = study_toml(plan)
    _own_file(path, lambda old: old.startswith(STUDY_HEADER))
    if path.exists() and tomllib.loads(path.read_text(encoding="utf-8")).get("study", {}).get("name") != plan.name:
        raise RunError(
            f"{path} holds the runs of study {tomllib.loads(path.read_text(encoding='utf-8'))['study']['name']!r}, "
            f"not {plan.name!r}; give this plan an output folder of its own ([run] output)"
        )
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        replace_file(path, text)


def _write_plan_record(plan: Plan, order: list[tuple[int, Cell]]) -> None:
    record = {
        "plan": os.path.relpath(plan.path, plan.output),
        "plan_sha256": sha256_of(plan.path),
        "seed": plan.seed,
        "target": plan.target.file or plan.target.device,
        "order": [{"repetition": r, "cell": c.key} for r, c in order],
    }
    if plan.adaptive:
        record["repetitions"] = {
            "min": plan.repetitions,
            "max": plan.adaptive.maximum,
            "until": plan.adaptive.rule.text,
            "decisions": REPETITIONS_RECORD,
        }
        if isinstance(plan.adaptive.rule, SettleRule):  # its parts, the baseline named: the report reads by them
            record["repetitions"]["settled"] = plan.adaptive.rule.recorded()
    if plan.grouped_by:  # a split-plot order: the report's design statement says it
        record["grouped_by"] = plan.grouped_by
    path = plan.output / PLAN_RECORD
    _own_file(path, lambda old: "plan_sha256" in json.loads(old))
    earlier = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    if earlier.get("target", record["target"]) != record["target"]:
        raise RunError(
            f"{plan.output} holds runs made on {earlier['target']}, and the plan now names "
            f"{record['target']}; give this plan an output folder of its own ([run] output)"
        )
    replace_file(path, json.dumps(record, indent=1) + "\n")


def job_lines(plan: Plan, cell: Cell, target: str) -> list[str]:
    """Return the option lines of one cell's job on one host.

    Return the option lines of one cell's job on one host (``filename`` first); every word passed the plan's
    vocabulary check (:mod:`benchlib.runner.vocabulary`).
    """
    lines = [f"filename={target}", f"size={plan.target.size_bytes}", f"runtime={plan.runtime_s}"]
    if plan.ramp_time_s:
        lines.append(f"ramp_time={plan.ramp_time_s}")
    return lines + [f"{k}={v}" for k, v in sorted(cell.options.items())]


def job_text(plan: Plan, cell: Cell, target: str, fd: int | None = None) -> str:
    """Return the fio job file of one cell on one host: the lines fio was asked about, then the job's section.

    With ``fd`` (a descriptor of ``target`` that benchlib opened and checked) fio opens ``/dev/fd/<fd>``.
    """
    if fd is None:
        return "[global]\n" + "\n".join(job_lines(plan, cell, target)) + f"\n\n[{cell.profile}]\n"
    lines = job_lines(plan, cell, f"/dev/fd/{fd}")
    return (
        f"# /dev/fd/{fd} is {target}, opened and checked by benchlib just before fio started\n[global]\n"
        + "\n".join(lines)
        + f"\n\n[{cell.profile}]\n"
    )


#: fio's output of a cell's steady-state job, kept in the cell's folder (a ``benchlib-`` name: not a run)
STEADY_FILE = "benchlib-steady-state.json"
#: options a steady-state job leaves out: it keeps no logs, and runs until steady rather than for the runtime
_NOT_WHILE_STEADYING = re.compile(
    r"write_\w+_log|log_\w+|per_job_logs|runtime|ramp_time|time_based|steadystate\w*|ss\w*"
)


def steady_job_text(plan: Plan, cell: Cell, target: str, fd: int | None = None) -> str:
    """Return the job that brings one host's target to steady state under the cell's own workload.

    The cell's job (:func:`job_text`) without its logs and runtime, run until fio's steady-state criterion
    (``[target] steady``) holds over ``steady_window_s``, for at most ``steady_max_s``: fio ends it then.
    """
    name = f"/dev/fd/{fd}" if fd is not None else target
    lines = [
        line
        for line in job_lines(plan, cell, name)
        if not _NOT_WHILE_STEADYING.fullmatch(line.split("=", 1)[0].strip())
    ]
    lines += [
        "time_based=1",
        f"runtime={plan.target.steady_max_s}",
        f"steadystate={plan.target.steady}",
        f"steadystate_duration={plan.target.steady_window_s}",
    ]
    return "[global]\n" + "\n".join(lines) + f"\n\n[{cell.profile}]\n"


def _steadied(
    plan: Plan,
    fio: str,
    cell: Cell,
    hosts: list[str],
    targets: dict[str, str],
    fds: dict[str, int],
    writes: bool,
    folder: Path,
    tick: Callable[[float], None],
) -> dict[str, dict]:
    """Run the cell's workload on ``hosts`` until steady (:func:`steady_job_text`); return per host what fio said.

    ``{host: {"attained": bool, "seconds": float, "criterion": str, "window_s": int}}``; a host fio said
    nothing of is absent. fio's output is kept as :data:`STEADY_FILE`, never read as a run.
    """
    local = not plan.servers
    jobs = _job_files(folder, "steady", hosts, lambda h: steady_job_text(plan, cell, targets[h], fds.get(h)))
    command = fio_command(fio, jobs, plan.port if not local else None, writes, output=STEADY_FILE, histograms=False)
    _run_fio(command, folder, plan.target.steady_max_s + 120, tick, tuple(fds.values()))
    for job in jobs.values():
        (folder / job).unlink()
    output = folder / STEADY_FILE
    if not output.exists():
        return {}
    text = output.read_text(encoding="utf-8", errors="replace")
    try:
        document = json.loads(text[text.find("{") :])
    except ValueError:
        return {}
    jobs_per_host = int(cell.options["numjobs"]) if str(cell.options.get("numjobs", "")).isdigit() else 1
    found = {}
    for job in document.get("client_stats", document.get("jobs", [])):
        host = hosts[0] if local else job.get("hostname")
        state = job.get("steadystate")
        if host in hosts and isinstance(state, dict) and host not in found:
            found[host] = {
                "attained": bool(state.get("attained")),
                # fio sums job_runtime over a host's numjobs (group_reporting): one job's time is the share
                "seconds": round(float(job.get("job_runtime", 0)) / 1000 / max(jobs_per_host, 1), 1),
                "criterion": plan.target.steady,
                "window_s": plan.target.steady_window_s,
            }
    return found


def _every_folder(plan: Plan) -> Iterator[tuple[int, Cell]]:
    """Every (repetition, cell) the plan may run, adaptive repetitions included."""
    for cell in plan.cells():
        for repetition in range(1, plan.max_repetitions + 1):
            yield repetition, cell


def _check_cell_folders(plan: Plan) -> None:
    """Refuse cell folders reached through a link: benchlib writes and deletes inside them."""
    for repetition, cell in _every_folder(plan):
        _refuse_linked(plan, cell_dir(plan, repetition, cell))


def _refuse_linked(plan: Plan, folder: Path) -> None:
    """Refuse a folder under the plan's output that is reached through a link (checked again before each cell)."""
    if folder.resolve() != plan.output.resolve() / folder.relative_to(plan.output):  # a link on the way
        raise RunError(
            f"{folder} is reached through a link; benchlib writes only into cell folders it made itself. "
            "Remove the link"
        )


def _discard_partials(plan: Plan) -> int:
    """Remove the half-written output of interrupted cells.

    Remove the half-written output of interrupted cells: ``.partial-attempt-N`` folders in the plan's
    own cell folders, and nothing else (the output folder may hold other things).
    """
    _check_cell_folders(plan)
    stale = [
        p
        for repetition, cell in _every_folder(plan)
        for p in cell_dir(plan, repetition, cell).glob(".partial-attempt-*")
        if p.is_dir() and not p.is_symlink()
    ]
    for path in stale:
        shutil.rmtree(path)
    return len(stale)


@contextlib.contextmanager
def _locked(output: Path) -> Iterator[None]:
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunError(
            f"cannot make the plan's output folder {output} ({exc.strerror}); set [run] output to a folder "
            "benchlib may write"
        ) from None
    try:  # never truncated, never through a link: the file only carries the lock
        fd = os.open(output / ".benchlib-run.lock", os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        raise RunError(
            f"cannot lock {output} ({exc.strerror}); the plan's output must be a folder benchlib may write"
        ) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunError(f"another `benchlib run` is writing to {output}; wait for it or stop it") from None
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _die_with_parent() -> None:  # runs in the fio child before exec
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


# ---------------------------------------------------------------- one cell


def _host_results(path: Path, hosts: list[str], local: bool) -> tuple[set[str], dict[str, str], dict[str, list[str]]]:
    """Return the hosts with error-free results in a fio output file.

    Hosts with error-free results in a fio output file, reasons for the others, and per host
    the disks under its target as fio reported them (``disk_util``).
    """
    try:
        tables = read(path, "fio-json")
    except FormatError as exc:
        return set(), dict.fromkeys(hosts, f"fio wrote no usable result ({exc.expected})"), {}
    counters = tables.host_counters.drop_nulls("host")
    disks = {
        host: group["instance"].unique(maintain_order=True).to_list()
        for (host,), group in counters.group_by("host", maintain_order=True)
    }
    results = tables.results.join(tables.runs.select("run_id", "host"), on="run_id")
    ok, failed = set(), {}
    for host in hosts:
        rows = results if local else results.filter(results["host"] == host)
        errors = [e for e in rows["error"].to_list() if e]
        if rows.height and not errors:
            ok.add(host)
        else:
            failed[host] = (
                f"fio error {errors[0]}" if errors else "no result from this host (it dropped out or never started)"
            )
    return ok, failed, disks


def _reasons_from_stderr(text: str, failed: dict[str, str]) -> None:
    """Add fio's own words to each failure: the host's last line, else fio's last error line."""
    said = [line.strip() for line in text.splitlines() if "fio:" in line or "err=" in line or "error" in line.lower()]
    for host in failed:
        lines = [line.strip() for line in text.splitlines() if host in line] or said
        if lines:
            failed[host] += f": {lines[-1]}"


def esxi_devices(plan: Plan, host: str) -> dict:
    """Return ``{"devices": [...]}`` from an ESXi host's esxcli lists (benchlib.esxcli), or ``{"error": why}``."""
    from benchlib.esxcli import EsxcliError, host_devices

    assert plan.esxi is not None  # noqa: S101 -- only for a plan with [esxi]
    texts = []
    for esxcli in ("esxcli storage core device list", "esxcli storage nmp device list"):
        line = plan.esxi.line(host, esxcli)
        try:
            done = _shell(line, timeout=120)
        except subprocess.TimeoutExpired:
            return {"error": f"{esxcli} did not finish in 120 s"}
        if done.returncode != 0:
            return {"error": f"{esxcli}: exit {done.returncode}: {(done.stderr or done.stdout).strip()[-300:]}"}
        texts.append(done.stdout)
    try:
        return {"read_at": datetime.now(UTC).isoformat(timespec="seconds"), "devices": host_devices(*texts)}
    except EsxcliError as exc:
        return {"error": str(exc)}
    except Exception as exc:  # noqa: BLE001 -- text no reader foresaw costs this host's lists, never the cell
        return {"error": f"esxcli's text could not be read: {type(exc).__name__}: {str(exc)[:200]}"}


@dataclass
class _Capture:
    """An esxtop batch capture running on an ESXi host while a cell runs (``[[esxtop]]`` of the plan)."""

    host: str
    file: Path
    process: subprocess.Popen
    delay_s: int


def _start_esxtop(plan: Plan, folder: Path) -> list[_Capture]:
    """Start every ``[[esxtop]]`` capture, its CSV going to ``esxtop-<host>.csv`` in the cell's folder."""
    captures = []
    for entry in plan.esxtop:
        target = folder / f"esxtop-{''.join(c if c.isalnum() or c in '-._' else '_' for c in entry.host)}.csv"
        with open(target, "wb") as out:
            process = subprocess.Popen(  # noqa: S602 -- the plan's own command, allowed with --allow-facts-command
                entry.line(plan.runtime_s + plan.ramp_time_s),
                shell=True,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.PIPE,
                start_new_session=True,
                env=child_environment(),
            )
        captures.append(_Capture(entry.host, target, process, entry.delay_s))
    return captures


def _stop_esxtop(captures: list[_Capture]) -> dict[str, dict]:
    """Let each capture take one more sample, stop it, and say what it left (a failed one costs only itself).

    A capture asks for samples to cover the cell and 10 s more; once fio is done it gets one more
    interval, then its session is stopped (a line cut by that is left out at ingest).

    Returns ``host -> {"file": name, "bytes": size}`` or ``host -> {"error": why}``; a failed capture's
    file is removed, its reason kept in the cell's manifest.
    """
    out = {}
    for capture in captures:
        try:
            _, stderr = capture.process.communicate(timeout=capture.delay_s + 1)
        except subprocess.TimeoutExpired:
            os.killpg(capture.process.pid, signal.SIGTERM)
            _, stderr = capture.process.communicate(timeout=10)
        size = capture.file.stat().st_size if capture.file.exists() else 0
        code = capture.process.returncode
        if size == 0 or code not in (0, -signal.SIGTERM):
            capture.file.unlink(missing_ok=True)
            why = (stderr or b"").decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
            out[capture.host] = {"error": f"exit {code}: {why[0][:300]}"}
        else:
            out[capture.host] = {"file": capture.file.name, "bytes": size}
    return out


def _run_fio(
    command: list[str], cwd: Path, limit: float, tick: Callable[[float], None], fds: tuple[int, ...] = ()
) -> tuple[int, str]:
    """Run fio in its own session, stopping it on any interruption.

    Run fio in its own session (with ``fds`` open in it); on Ctrl-C stop it (and the servers' jobs),
    remove ``cwd`` and re-raise.
    """
    began = time.monotonic()
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_die_with_parent,
        pass_fds=fds,
        env=child_environment(),
    )
    try:
        while proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.2)  # back as soon as fio ends, not at the next fifth of a second
            tick(time.monotonic() - began)
            if proc.returncode is None and time.monotonic() - began > limit:
                os.killpg(proc.pid, signal.SIGKILL)
        _, stderr = proc.communicate()
    except BaseException:  # Ctrl-C, SIGTERM, or an error in a progress callback: fio must not run on
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)  # fio asks its servers to stop their jobs
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(cwd, ignore_errors=True)
        raise
    return proc.returncode, stderr


def _job_files(folder: Path, prefix: str, hosts: list[str], text: Callable[[str], str]) -> dict[str, str]:
    """Write each host's job file (``<prefix>-<host>.fio``) into ``folder``; return ``{host: file name}``."""
    jobs = {}
    for host in hosts:
        job = folder / f"{prefix}-{host}.fio"
        job.write_text(text(host), encoding="utf-8")
        jobs[host] = job.name
    return jobs


def fio_command(
    fio: str, jobs: dict[str, str], port: int | None, writes: bool, *, output: str = "fio.json", histograms: bool = True
) -> list[str]:
    """Return the fio command line of one cell: ``jobs`` is each host's job file, ``port`` None on this machine.

    To servers: ``--client=<host>,<port> <its job file> [--readonly]`` per host, the job file first. fio
    (3.33) gives every server the first host's job file when an option stands between ``--client`` and
    the job file, and sends ``--readonly`` to a server only when it follows that server's ``--client``.
    ``output``: the file fio writes; ``histograms``: json+ (with its latency bins), else plain json.
    """
    readonly = [] if writes else ["--readonly"]
    command = [fio, f"--output-format={'json+' if histograms else 'json'}", f"--output={output}"]
    if port is None:
        return [*command, *readonly, *jobs.values()]
    for host, job in jobs.items():
        command += [f"--client={host},{port}", job, *readonly]
    return command


def _banner_apart(output: Path) -> None:
    """Keep fio's JSON valid JSON on disk: the job lines a fio client prints before it go to ``fio.banner.txt``.

    A peer's ``jq`` then reads the raw result as it is; the banner is kept beside it, byte for byte.
    """
    text = output.read_bytes()
    start = 0 if text.startswith(b"{") else text.find(b"\n{") + 1
    if start > 0:
        output.with_name("fio.banner.txt").write_bytes(text[:start])
        output.write_bytes(text[start:])


def _sort_logs(partial: Path, hosts: list[str], local: bool, failed: dict[str, str]) -> None:
    """Move fio's logs into one folder per host (fio's client names them ``*.log.<host>``)."""
    for host in hosts:
        (partial / host).mkdir()
    for log in sorted(partial.glob("cell_*.log*")):
        host = hosts[0] if local else next((h for h in hosts if log.name.endswith(f".log.{h}")), None)
        if host is not None:
            log.rename(partial / host / log.name.removesuffix(f".{host}"))
    for host in hosts:
        if host in failed:  # what a host that failed logged is partial: its rerun records it afresh
            shutil.rmtree(partial / host)
        elif not any((partial / host).iterdir()):
            (partial / host).rmdir()


def run_cell(
    plan: Plan,
    fio: str,
    version: str,
    repetition: int,
    cell: Cell,
    hosts: list[str],
    targets: dict[str, str],
    order_index: int,
    tick: Callable[[float], None],
    remote_facts: dict[str, dict] | None = None,
    writes: bool = True,
    fds: dict[str, int] | None = None,
    vsphere_facts: Callable[[list[str], str | None], dict] | None = None,
    target_state: dict[str, dict] | None = None,
) -> tuple[set[str], dict[str, str]]:
    """Run one cell on ``hosts`` at once; keep what succeeded; return (hosts ok, failed host -> reason).

    ``remote_facts``: what each remote host's fio server said about its machine (:func:`server_facts`).
    ``writes``: whether fio said the cell writes; a cell that does not runs with fio's ``--readonly``
    (passed to every server too), so fio itself refuses any write.
    ``fds``: per host, a descriptor of its target that benchlib opened and checked; fio then uses
    ``/dev/fd/N``, so nothing done to the target's name after the check reaches fio.
    ``target_state``: per host, what was written to its region before the first cell and when
    (:attr:`benchlib.runner.targets.Targets.state`), kept in the manifest.
    ``vsphere_facts``: ``(hosts, this machine's name for a local run) -> facts``, written beside the
    output as ``benchlib-vsphere.json`` (:mod:`benchlib.vsphere`).
    """
    fds = fds or {}
    remote_facts = remote_facts or {}
    folder = cell_dir(plan, repetition, cell)
    attempt = len(list(folder.glob("attempt-*"))) + 1
    partial = folder / f".partial-attempt-{attempt}"
    _refuse_linked(plan, partial)  # a cell folder swapped for a link during the run: never delete or write there
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    _refuse_linked(plan, partial)
    local = not plan.servers
    jobs = _job_files(partial, "job", hosts, lambda h: job_text(plan, cell, targets[h], fds.get(h)))
    command = fio_command(fio, jobs, plan.port if not local else None, writes)
    steady = _steadied(plan, fio, cell, hosts, targets, fds, writes, partial, tick) if plan.target.steady else None
    captures = _start_esxtop(plan, partial)
    start = datetime.now(UTC)
    limit = plan.runtime_s + plan.ramp_time_s + 120 + plan.target.size_bytes / 20e6
    try:
        returncode, stderr = _run_fio(command, partial, limit, tick, tuple(fds.values()))
    finally:
        end = datetime.now(UTC)
        esxtop = _stop_esxtop(captures)
    output = partial / "fio.json"
    if not output.exists() or output.stat().st_size == 0:
        shutil.rmtree(partial)
        reason = (stderr.strip().splitlines() or [f"fio exited with {returncode} and wrote nothing"])[-1]
        return set(), dict.fromkeys(hosts, reason)
    _banner_apart(output)
    ok, failed, disks = _host_results(output, hosts, local)
    _reasons_from_stderr(stderr, failed)
    if not ok:
        shutil.rmtree(partial)
        return ok, failed
    _sort_logs(partial, hosts, local, failed)
    if stderr.strip():
        (partial / "fio.stderr.txt").write_text(stderr, encoding="utf-8")
    facts = {
        h: host_facts(targets[h])
        if h not in remote_facts and (local or is_local(h))
        else {
            **remote_facts.get(h, {"note": "remote host: only what fio reports"}),
            "target": targets[h],
            "target_disks": disks.get(h, []),
        }
        for h in hosts
    }
    local_name = facts[hosts[0]]["hostname"] if local else None
    if vsphere_facts is not None:
        document = vsphere_facts(hosts, local_name)
        (partial / FACTS_FILE).write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    if plan.esxi is not None:
        devices = {host: esxi_devices(plan, host) for host in plan.esxi.hosts}
        (partial / ESXI_FILE).write_text(json.dumps(devices, indent=1) + "\n", encoding="utf-8")
    files = {
        p.relative_to(partial).as_posix(): {
            "sha256": sha256_of(p),
            "host": local_name or (p.parent.name if p.parent != partial else None),
        }
        for p in sorted(partial.rglob("*"))
        if p.is_file()
    }
    manifest = {
        "benchlib_version": __version__,
        "study": plan.name,
        "plan": os.path.relpath(plan.path, plan.output),
        "plan_sha256": sha256_of(plan.path),
        "cell": cell.key,
        "profile": cell.profile,
        "levels": cell.levels,
        "repetition": repetition,
        "attempt": attempt,
        "order_index": order_index,
        "seed": plan.seed,
        "fio_version": version,
        "command": command,
        "hosts": hosts,
        "hosts_ok": sorted(ok),
        "hosts_failed": failed,
        "targets": {h: targets[h] for h in hosts},
        "target_state": {
            h: {**state, "steady": (steady or {}).get(h, "fio said nothing")} if steady is not None and state else state
            for h in hosts
            for state in [(target_state or {}).get(h)]
        },
        "start_time": start.isoformat(timespec="milliseconds"),
        "end_time": end.isoformat(timespec="milliseconds"),
        "host_facts": facts,
        "files": files,
    }
    if esxtop:
        manifest["esxtop"] = esxtop
    (partial / RUN_MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.rename(partial, folder / f"attempt-{attempt}")
    return ok, failed


# ---------------------------------------------------------------- the plan


def at_levels(cell: Cell, levels: dict[str, list[str]] | None) -> bool:
    """Whether ``cell`` is at one of ``levels``' levels of each factor named (every cell when None)."""
    return not levels or all(cell.levels.get(factor) in wanted for factor, wanted in levels.items())


def cell_seconds(plan: Plan) -> float:
    """Estimated wall time of one cell (a steady-state job before it: its window, the least it can take)."""
    start = SERVER_OVERHEAD_S + SERVER_OVERHEAD_PER_HOST_S * len(plan.servers) if plan.servers else START_OVERHEAD_S
    steadying = plan.target.steady_window_s + start if plan.target.steady else 0
    return plan.runtime_s + plan.ramp_time_s + start + steadying


def pending(plan: Plan) -> list[tuple[int, int, Cell, list[str]]]:
    """``(order index, repetition, cell, hosts still missing)`` for every cell not yet complete."""
    todo = []
    for index, (repetition, cell) in enumerate(plan.order()):
        missing = sorted(set(plan.hosts) - hosts_done(cell_dir(plan, repetition, cell)))
        if missing:
            todo.append((index, repetition, cell, missing))
    return todo


def _default_remote(plan: Plan) -> Callable[[str], bool]:
    """Which hosts are described through fio: every fio server that is not this machine."""
    return lambda host: bool(plan.servers) and not is_local(host)


def _remote_facts(plan: Plan, live: list[str], fio: str, remote: Callable[[str], bool] | None) -> dict[str, dict]:
    """Ask each remote fio server about its machine once per run."""
    remote = remote or _default_remote(plan)
    hosts = [h for h in live if plan.servers and remote(h)]
    if not hosts:
        return {}
    workers = max(1, min(8, len(hosts)))  # the servers are asked at once, each in a folder of its own
    with tempfile.TemporaryDirectory(prefix="benchlib-facts-") as scratch, ThreadPoolExecutor(workers) as pool:
        folders = [Path(tempfile.mkdtemp(dir=scratch)) for _ in hosts]
        facts = dict(zip(hosts, pool.map(lambda h, f: server_facts(fio, h, plan.port, f), hosts, folders), strict=True))
    if plan.facts_command:
        with ThreadPoolExecutor(workers) as pool:
            told = list(pool.map(lambda h: command_facts(plan.facts_command, h, plan.target.path_for(h)), hosts))
        for host, own in zip(hosts, told, strict=True):
            facts[host] = {
                **facts[host],
                **own,
                "note": "remote host: its fio server's probe and the plan's facts_command"
                if "facts_error" not in own
                else facts[host].get("note"),
            }
    return facts


class _VSphereFacts:
    """A plan's vCenter, logged in to once per run; called per cell for the facts of its hosts' VMs.

    A cell whose facts cannot be read keeps its output: its facts file says why (``error``).
    """

    def __init__(self, plan: Plan) -> None:
        from benchlib.vsphere import Server, connect

        assert plan.vsphere is not None  # noqa: S101 -- only made for a plan with [vsphere]
        self.section = plan.vsphere
        self.server = Server.parse(self.section.server)
        self.service = connect(self.server, insecure=self.section.insecure)  # no credentials: nothing runs

    def __call__(self, hosts: list[str], local_name: str | None) -> dict:
        from benchlib.vsphere import facts_document, failed_document

        wanted = {self.section.vms[h]: local_name or h for h in hosts if h in self.section.vms}
        try:
            facts = facts_document(self.service, self.server, list(wanted))
        except Exception as exc:  # noqa: BLE001 -- a failed read costs this cell's facts only, and says why
            return failed_document(self.server, exc)
        for vm in facts["vms"]:
            vm["fio_host"] = wanted[vm["vm"]]  # the name the runs carry: fio's host, or this machine's
        return facts

    def close(self) -> None:
        from pyVim.connect import Disconnect

        Disconnect(self.service)


def _unallowed(plan: Plan, apply_settings: bool) -> str | None:
    """Say why a plan that sets vSphere settings may not run without ``--apply-settings`` (None when it may)."""
    if not (plan.vsphere and plan.vsphere.applies):
        left = journals_of(plan)
        if not left:
            return None
        had = ", ".join(journal_said(j) for j in left)
        return (
            f"an earlier run of this plan on this machine changed settings and did not put them back (they had: "
            f"{had}); this plan no longer sets them: put them back by running the plan with its [vsphere] settings "
            f"again, or by hand and then remove its journal in {state_folder()}"
        )
    if apply_settings:
        return None
    changes = {
        "sioc": f"Storage I/O Control on {', '.join(plan.vsphere.datastores)} (every VM on them feels it)",
        "controller": f"the controller of the test disk of {', '.join(plan.vsphere.vms.values())} (stopping and "
        "starting each VM)",
        "rr_iops": f"the Round Robin limit of LUN {plan.vsphere.device} on its ESXi hosts (every VM on it feels it)",
        "sioc_threshold": f"SIOC's congestion threshold on {', '.join(plan.vsphere.datastores)} (every VM on them "
        "feels it)",
    }
    said = [changes[s] for s in plan.vsphere.apply]
    if plan.vsphere.shares or plan.vsphere.limits:
        vms = dict.fromkeys([*plan.vsphere.shares, *plan.vsphere.limits])
        said.append(f"the shares and IOPS limit of the test disk of {', '.join(vms)} (held through the run)")
    return (
        f"{plan.path}: [vsphere] sets {' and '.join(said)}: run with --apply-settings to let it (it is put back "
        "at the end; benchlib-settings.json records every change)"
    )


def _applied_settings(plan: Plan, vsphere: _VSphereFacts | None, stack: contextlib.ExitStack) -> Callable[[Cell], None]:
    """Start the settings a plan applies (what a killed run left changed put back, the originals recorded).

    Returns what brings them to a cell's levels (nothing, for a plan that applies none). They are put back
    when ``stack`` closes, before its vCenter session (opened earlier) logs out.
    """
    if vsphere is not None and not (plan.vsphere and plan.vsphere.applies):
        if (left := left_on_vms(plan, vsphere.service)) is not None:
            raise SettingsError(left)
    if vsphere is None or not (plan.vsphere and plan.vsphere.applies):
        return lambda _cell: None
    settings = AppliedSettings(plan, vsphere.service)
    stack.callback(settings.close)  # the datastores' locks, after they are put back
    stack.callback(settings.restore)
    settings.start()
    # what a killed run of another plan left changed here, which this plan does not set, would hold its cells
    if (left := left_on_vms(plan, vsphere.service, set(settings.journals.values()))) is not None:
        raise SettingsError(left)
    return settings.bring


def run_plan(
    plan: Plan,
    *,
    destroy_data: str | None = None,
    progress: Callable[[float, float, str], None] | None = None,
    remote: Callable[[str], bool] | None = None,
    reading: PlanReading | None = None,
    vcenter: str | None = None,
    vcenter_insecure: bool = False,
    levels: dict[str, list[str]] | None = None,
    apply_settings: bool = False,
) -> RunSummary:
    """Run every cell of a plan that is not done yet (of ``levels``' cells only, where given).

    Parameters
    ----------
    plan
        From :func:`benchlib.runner.load_plan`.
    destroy_data
        The exact block device the user allows benchlib to overwrite.
    progress
        Called with (seconds done, seconds planned, label) as the run advances.
    remote
        Which hosts to describe by what their fio server reports rather than by this machine's facts
        (default: servers that are not this machine). Targets on servers are always checked through fio.
    reading
        fio's reading of the plan (:func:`read_plan`), when the caller already has it.
    vcenter
        The vCenter the user named (``--vcenter``): a plan's ``[vsphere]`` is read only from it
        (:func:`benchlib.runner.plan.vcenter_problem`).
    vcenter_insecure
        The user's ``--vcenter-insecure``: only with it may a plan's ``insecure = true`` turn certificate checks off.
    levels
        ``{factor: [levels]}`` (``--levels``): run only the cells at these levels, the rest stay to do. A
        setting changed by hand between runs of the plan (a controller, SIOC) runs one level at a time.
    apply_settings
        The user's ``--apply-settings``: only with it does a plan's ``[vsphere] apply`` change vCenter's
        settings (:mod:`benchlib.runner.settings`); a plan with one is refused without it.

    Raises
    ------
    RunInterrupted
        On Ctrl-C or SIGTERM: completed cells are kept, the current one is discarded.
    UnsafeTargetError
        Before anything is written, or before the cell whose target changed.

    """
    if (problem := vcenter_problem(plan, vcenter, vcenter_insecure) or _unallowed(plan, apply_settings)) is not None:
        raise PlanError(problem)
    fio = fio_binary()
    version = fio_version(fio)
    reading = reading or read_plan(plan, fio)
    summary = RunSummary()
    with _locked(plan.output), _sigterm_as_interrupt(), contextlib.ExitStack() as stack:
        _discard_partials(plan)
        _write_study(plan)
        order = plan.order()
        _write_plan_record(plan, order)
        todo = [step for step in pending(plan) if at_levels(step[2], levels)]
        summary.already = len(order) * len(plan.hosts) - sum(len(m) for *_, m in pending(plan))
        with ThreadPoolExecutor(max(1, min(32, len(plan.servers)))) as pool:  # a host that does not answer waits 3 s
            answers = dict(zip(plan.servers, pool.map(lambda h: reachable(h, plan.port), plan.servers), strict=True))
        summary.down = {h: r for h, r in answers.items() if r}
        live = [h for h in plan.hosts if h not in summary.down]
        vsphere = _VSphereFacts(plan) if plan.vsphere else None  # a vCenter that does not answer stops it here
        stack.callback(lambda: vsphere and vsphere.close())
        bring_settings = _applied_settings(plan, vsphere, stack)
        guard = Targets(plan, fio, destroy_data)
        targets = guard.prepare(live, writes=bool(reading.writing)) if live else {}
        remote_facts = _remote_facts(plan, live, fio, remote)
        extra = len(plan.cells()) * (plan.max_repetitions - plan.repetitions)
        total = (len(todo) + extra) * cell_seconds(plan)  # an adaptive plan's most
        spent = 0.0

        def run_one(index: int, repetition: int, cell: Cell, missing: list[str], label: str) -> None:
            nonlocal spent
            if not at_levels(cell, levels):  # an adaptive round's cell of another level: not this run's
                return
            hosts = [h for h in missing if h in live]
            for host in sorted(set(missing) - set(hosts)):
                summary.missing.append(Missing(cell.key, repetition, host, summary.down.get(host, "host down")))
            if hosts:
                writes = cell.key in reading.writing
                try:
                    bring_settings(cell)  # the cell's settings ([vsphere] apply), read back, before its first I/O
                    guard.recheck(hosts, writes)  # after them: a VM started again has its target checked anew
                    with guard.opened(hosts) as fds:
                        ok, failed = run_cell(
                            plan,
                            fio,
                            version,
                            repetition,
                            cell,
                            hosts,
                            targets,
                            index,
                            lambda s, base=spent, lab=label: (
                                progress and progress(base + min(s, cell_seconds(plan)), total, lab)
                            ),
                            remote_facts,
                            writes,
                            fds,
                            vsphere,
                            guard.state,
                        )
                except KeyboardInterrupt:
                    raise RunInterrupted(
                        f"interrupted during {cell.key} (repetition {repetition}); its partial output was discarded. "
                        f"{summary.already + summary.done} host runs are done; "
                        "run the same command again to continue"
                    ) from None
                _tally(summary, plan, cell, repetition, ok, failed, live)
            spent += cell_seconds(plan)
            if progress and hosts:
                progress(spent, total, label)

        for count, (index, repetition, cell, missing) in enumerate(todo, 1):
            run_one(index, repetition, cell, missing, f"{count}/{len(todo)} {cell.key} r{repetition}")
        if plan.adaptive:
            summary.already += _adaptive_done_before(plan, summary.done)
            summary.stopping = _adaptive_rounds(plan, len(order), run_one)
    return summary


def cell_stopping(
    plan: Plan, cell: Cell, upto: int, totals: dict | None = None, rule: PrecisionRule | None = None
) -> CellStopping:
    """Where ``cell`` stands against a precision rule after repetitions ``1 .. upto`` (those that exist).

    ``rule``: the adaptive plan's rule unless given. ``totals``: a cache of run totals by folder and attempts.
    """
    rule = rule or (plan.adaptive.rule if plan.adaptive else None)
    assert rule is not None
    folders = []
    for repetition in range(1, upto + 1):
        folder = cell_dir(plan, repetition, cell)
        if not folder.is_dir():
            break
        folders.append(folder)
    cache = totals if totals is not None else {}

    def total(folder: Path) -> float | None:
        key = (folder, rule.metric, tuple(sorted(p.name for p in folder.glob("attempt-*"))))
        if key not in cache:
            cache[key] = run_total(folder, plan.hosts, rule.metric, RUN_MANIFEST)
        return cache[key]

    return stopping(cell.key, folders, rule, total)


def _adaptive_done_before(plan: Plan, done_now: int) -> int:
    """Host runs of the adaptive rounds already on disk when this run started (for the summary)."""
    on_disk = sum(
        len(hosts_done(cell_dir(plan, repetition, cell)))
        for cell in plan.cells()
        for repetition in range(plan.repetitions + 1, plan.max_repetitions + 1)
    )
    return max(0, on_disk - done_now)


def _adaptive_rounds(
    plan: Plan, fixed: int, run_one: Callable[[int, int, Cell, list[str], str], None]
) -> dict[str, tuple[CellStopping, str]]:
    """Run each cell once more per round until its rule holds or it reaches the maximum; record every decision."""
    assert plan.adaptive is not None
    cells = plan.cells()
    totals: dict = {}
    maximum = plan.adaptive.maximum
    judge = _settle_round if isinstance(plan.adaptive.rule, SettleRule) else _precision_round
    last = plan.order()[-1][1]  # a round never opens on the hard-to-change level the run ended on
    for repetition in range(plan.repetitions + 1, maximum + 1):
        states = judge(plan, repetition - 1, totals)
        going = {s.cell for s in states if s.complete and not s.met and s.runs == repetition - 1}
        if not going:
            break
        round_cells = plan.round_order(repetition, [c for c in cells if c.key in going], last)
        last = round_cells[-1]
        base = fixed + (repetition - plan.repetitions - 1) * len(cells)
        for position, cell in enumerate(round_cells):
            missing = sorted(set(plan.hosts) - hosts_done(cell_dir(plan, repetition, cell)))
            if missing:
                label = f"round {repetition} ({position + 1}/{len(round_cells)}) {cell.key} r{repetition}"
                run_one(base + position, repetition, cell, missing, label)
    states = judge(plan, maximum, totals)
    return {s.cell: (s, _outcome(plan, s)) for s in states}


def _precision_round(plan: Plan, upto: int, totals: dict) -> list[CellStopping]:
    """Judge every cell against the precision rule after repetitions ``1 .. upto``; record the decisions."""
    assert plan.adaptive is not None and isinstance(plan.adaptive.rule, PrecisionRule)
    states = [cell_stopping(plan, c, upto, totals) for c in plan.cells()]
    write_record(plan.output / REPETITIONS_RECORD, plan.adaptive.rule, plan.repetitions, plan.adaptive.maximum, states)
    return states


def _settle_round(plan: Plan, upto: int, totals: dict) -> list[CellStopping]:
    """Judge every comparison of a settled rule after repetitions ``1 .. upto``; a cell is done when all of its are.

    A cell in no comparison of the rule's factor (a profile that holds it at one level) keeps its fixed runs.
    Each comparison's looks so far go to the record (``totals`` keeps them between rounds).
    """
    from benchlib.sources.fio_common import rate_limited
    from benchlib.stats.sequential import Looks

    assert plan.adaptive is not None and isinstance(plan.adaptive.rule, SettleRule)
    rule, maximum = plan.adaptive.rule, plan.adaptive.maximum
    count = PrecisionRule(rule.metric, "mean", 1.0, 0.95, "")  # reads the run totals only
    states = {c.key: cell_stopping(plan, c, upto, totals, rule=count) for c in plan.cells()}
    cells = {c.key: (c.profile, c.levels, rate_limited(c.options)) for c in plan.cells()}
    looks = Looks(plan.repetitions, maximum, rule.alpha)
    history = totals.setdefault("looks", {})
    if not history:  # resumed: the looks the runs on disk already made
        for n in range(plan.repetitions, max((s.runs for s in states.values()), default=0)):
            _remember(history, comparisons(rule, cells, {k: s.values[:n] for k, s in states.items()}, looks))
    looked = comparisons(rule, cells, {key: s.values for key, s in states.items()}, looks)
    _remember(history, looked)
    open_cells = {key for c in looked if not c.settled for key in (c.baseline, c.other)}
    done = [dataclasses.replace(s, half_width=None, met=key not in open_cells) for key, s in states.items()]
    write_settle_record(plan.output / REPETITIONS_RECORD, rule, plan.repetitions, maximum, done, looked, history)
    return done


def _remember(history: dict, looked: list) -> None:
    """Keep each comparison's verdict at each look it reached (its fewer side's runs)."""
    for c in looked:
        if min(c.runs) > 0:
            history.setdefault((c.baseline, c.other), {})[min(c.runs)] = c


def _outcome(plan: Plan, state: CellStopping) -> str:
    """Say how a cell's adaptive repetitions ended, under either rule."""
    assert plan.adaptive is not None
    rule, maximum = plan.adaptive.rule, plan.adaptive.maximum
    if isinstance(rule, PrecisionRule):
        return outcome(state, rule, maximum)
    if not state.complete:
        return f"incomplete after {state.runs} complete runs (a host's result is missing)"
    if state.met:
        return f"every comparison of {rule.factor} it is in settled, or it is in none: {state.runs} runs"
    if state.runs < maximum:
        return f"{state.runs} runs so far, a comparison of {rule.factor} it is in not yet settled"
    return (
        f"NOT settled: stopped at the maximum of {maximum} runs with a comparison of {rule.factor} still "
        "open; benchlib-repetitions.json has its interval at each look"
    )


def _tally(
    summary: RunSummary, plan: Plan, cell: Cell, repetition: int, ok: set[str], failed: dict[str, str], live: list[str]
) -> None:
    summary.done += len(ok)
    for host, reason in failed.items():
        summary.missing.append(Missing(cell.key, repetition, host, reason))
        if plan.servers and reachable(host, plan.port, timeout=2.0):
            live.remove(host)
            summary.down[host] = f"dropped out during {cell.key} r{repetition}: {reason}"
