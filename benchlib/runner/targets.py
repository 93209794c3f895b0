"""The targets of a run on every host: checked before the run, re-checked before every cell.

:mod:`benchlib.runner.safety` holds the rules for one local file or device;
this module applies them to a plan's hosts. What the study created is recorded
in benchlib's record on this machine (:func:`state_folder`; a random token and
the region's size per host and path, see :class:`~benchlib.runner.safety.FileClaim`):
a file counts as benchlib's only when that record says so and the file still
holds the token in the 4 KiB after its region.

* **fio on this machine** (no ``[hosts]``): files are created, checked and
  opened here; fio gets the file or device as ``/dev/fd/N``, a descriptor
  benchlib opened and checked, so a name or folder swapped after the check
  cannot redirect the writes. A device is held with ``O_EXCL`` meanwhile.
* **fio servers**, loopback ones included (a server may live in another mount
  namespace or container, so its files are not necessarily this machine's):
  benchlib reaches a server only through fio. Whether a path exists is asked
  with fio's ``filestat`` engine in read-only mode; the target is created by a
  fio job writing the token after the region; before every cell fio reads the
  token back (``verify=pattern``, read-only). A device on a server is written
  only with ``--destroy-data`` naming it; when the server is this machine, the
  local device checks apply too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import ipaddress
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from benchlib.runner.plan import Plan
from benchlib.runner.safety import (
    TAIL_BYTES,
    DeviceReport,
    FileClaim,
    UnsafeTargetError,
    check_device,
    check_file,
    create_file,
    device_identity,
    held_exclusively,
    marker_for,
    new_claim,
    now,
    open_claimed,
    recheck_device,
    replace_file,
)

RECORD = "targets.json"


def state_folder() -> Path:
    """Return where benchlib keeps what it created on this machine.

    Where benchlib keeps what it created on this machine: ``$BENCHLIB_STATE``, else
    ``$XDG_STATE_HOME/benchlib``, else ``~/.local/state/benchlib``.

    The record of targets lives here, not in a study folder: a study copied from elsewhere (a
    repository, a bundle, a share) could otherwise carry a record naming someone's file as benchlib's.
    """
    if os.environ.get("BENCHLIB_STATE"):
        return Path(os.environ["BENCHLIB_STATE"])
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "benchlib"


def read_record() -> dict:
    """Return the record of every target benchlib created from this machine: ``{"<host> <path>": claim}``.

    Raises
    ------
    UnsafeTargetError
        When the record is not one benchlib wrote.

    """
    path = state_folder() / RECORD
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        recorded = None
    if path.is_symlink() or not isinstance(recorded, dict):
        raise UnsafeTargetError(
            f"{path} is not the record benchlib keeps of the targets it created; move it away "
            "(benchlib then treats every existing target as someone else's)"
        )
    return recorded


def write_record(key: str, claim: FileClaim | dict) -> None:
    """Add one claim (or a device's identity) to the record, under a lock (two runs may write it at once)."""
    folder = state_folder()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(folder / ".lock", os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        recorded = read_record() | {key: claim.as_record() if isinstance(claim, FileClaim) else claim}
        replace_file(folder / RECORD, json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    finally:
        os.close(fd)


_PROBE_OPTIONS = ("--readonly", "--clocksource=clock_gettime", "--output-format=json")


def on_server(
    fio: str, host: str, port: int, workdir: Path, job: str, *options: str, timeout: float = 120
) -> tuple[int, str]:
    """Run one small job file (text ``job``, its first section naming the file) on a fio server."""
    path = (workdir / f"{job[1 : job.index(']')]}.fio").resolve()
    path.write_text(job, encoding="utf-8")
    done = subprocess.run(
        [fio, f"--client={host},{port}", *options, str(path)],
        cwd=path.parent,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


def _fio_reason(said: str) -> str:
    """Return fio's own words of why a job failed (its ``fio:`` and ``err=`` lines), the last 300 characters."""
    return " ".join(line.strip() for line in said.splitlines() if "fio:" in line or "err=" in line)[-300:]


def write_seconds(size: int, passes: int) -> float:
    """How long writing a region ``passes`` times may take before it is called hung (20 MB/s, 2 min spare)."""
    return 120 + size * passes / 20e6


def write_region_on_server(fio: str, host: str, port: int, path: str, size: int, passes: int, workdir: Path) -> None:
    """Write the first ``size`` bytes of ``path`` on a fio server ``passes`` times, sequentially, through fio.

    Random data (fio's default buffers), 1 MiB blocks, flushed at the end. The file must exist and be at
    least ``size`` bytes long (fio lays out again, unlinking, a file shorter than its job), so it is written
    after the claim's token, which lies past the region.

    Raises
    ------
    UnsafeTargetError
        When fio could not write it (the region is then not counted as written).

    """
    whole, rest = divmod(size, 1 << 20)
    job = (
        f"[fill]\nfilename={path}\nrw=write\nbs=1M\noffset=0\nsize={whole << 20}\nloops={passes}\n"
        "ioengine=psync\nallow_file_create=0\nend_fsync=1\n"
        if whole
        else ""
    )
    if rest:  # the region's last part of a MiB, in one block of its own after the whole MiBs
        job += (
            f"[fill-rest]\nstonewall\nfilename={path}\nrw=write\nbs={rest}\noffset={whole << 20}\nsize={rest}\n"
            f"loops={passes}\nioengine=psync\nallow_file_create=0\nend_fsync=1\n"
        )
    code, said = on_server(fio, host, port, workdir, job, "--output-format=json", timeout=write_seconds(size, passes))
    if code != 0:
        raise UnsafeTargetError(
            f"cannot write the region of {path} on {host}: {_fio_reason(said) or 'fio failed'}; "
            "nothing was measured. Run again once the server can write it"
        )


def write_region_here(fd: int, size: int, passes: int) -> None:
    """Write the first ``size`` bytes behind descriptor ``fd`` (a file or device benchlib checked and holds).

    Random data, ``passes`` times, flushed after each pass. The descriptor is reopened for writing through
    ``/proc/self/fd``, so the writes go to the very file or device that was checked.
    """
    out = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY)
    try:
        chunk = os.urandom(1 << 20)
        for _ in range(passes):
            offset = 0
            while offset < size:
                offset += os.pwrite(out, chunk[: min(len(chunk), size - offset)], offset)
            os.fsync(out)
    finally:
        os.close(out)


def _exists_remotely(fio: str, host: str, port: int, path: str, workdir: Path) -> bool:
    """Whether anything (even an empty file) exists at ``path`` on a fio server, without writing.

    fio's ``filestat`` engine only stat()s; in read-only mode fio neither creates nor extends
    the file, and a missing one fails with ENOENT.
    """
    code, said = on_server(
        fio,
        host,
        port,
        workdir,
        f"[exists]\nfilename={path}\nioengine=filestat\nallow_file_create=0\nsize=4k\n",
        *_PROBE_OPTIONS,
    )
    if code == 0:
        return True
    if "No such file or directory" in said or '"error" : 2,' in said:
        return False
    if "failed to connect" in said or "Connection refused" in said:
        raise UnsafeTargetError(f"cannot check the target on {host}: no fio server answers on port {port}")
    reason = " ".join(
        line.removeprefix("<" + host + ">").strip() for line in said.splitlines() if "fio:" in line or "err=" in line
    )[-300:]
    raise UnsafeTargetError(
        f"cannot tell whether {path} exists on {host}; fio said: {reason or 'nothing'}. "
        "(fio >= 3.19 has the filestat engine benchlib asks with)"
    )


def _holds(fio: str, host: str, port: int, path: str, claim: FileClaim, offset: int, workdir: Path) -> bool:
    """Whether the remote file holds the claim's token at ``offset`` (4 KiB), read back by fio in read-only mode."""
    code, said = on_server(fio, host, port, workdir, _check_job(path, claim, offset), *_PROBE_OPTIONS)
    return code == 0 and _read_whole_tokens(said, {host})


def _read_whole_tokens(said: str, hosts: set[str]) -> bool:
    """Whether fio's JSON (``said``, its output) shows every host of ``hosts`` read its whole 4 KiB token.

    fio ends a read at the end of the file without an error: a file cut short inside the token (its
    first 100 bytes left) passes ``verify`` on what was read, so the bytes read are counted too.
    """
    start = said.find("{")
    try:
        output, _ = json.JSONDecoder().raw_decode(said[start:]) if start >= 0 else ({}, 0)
    except ValueError:
        return False
    read = {
        str(stats.get("hostname")): (stats.get("read") or {}).get("io_bytes", 0)
        for stats in output.get("client_stats", [])
        if stats.get("jobname") != "All clients"
    }
    return all(read.get(host, 0) >= TAIL_BYTES for host in hosts)


def _check_job(path: str, claim: FileClaim, offset: int) -> str:
    """Return the fio job that reads the claim's 4 KiB token at ``offset`` back and fails unless it matches."""
    return (
        f"[check]\nfilename={path}\nrw=read\nbs={TAIL_BYTES}\noffset={offset}\nsize={TAIL_BYTES}\n"
        f"ioengine=psync\nallow_file_create=0\nverify=pattern\nverify_pattern=0x{claim.token}\n"
    )


def _all_hold(fio: str, port: int, checks: dict[str, tuple[str, FileClaim, int]], workdir: Path) -> bool:
    """Whether every server's file holds its claim's token (``{host: (path, claim, offset)}``), in one fio call.

    One fio client reads every token at once, each server its own 4 KiB in read-only mode; False when any
    did not (:func:`_holds` then tells which).
    """
    command = [fio, "--output-format=json"]
    for host, (path, claim, offset) in sorted(checks.items()):
        job = workdir / f"check-{_safe_name(host)}.fio"
        job.write_text(_check_job(path, claim, offset), encoding="utf-8")
        # the job file right after --client, then --readonly: fio gives every server the first job file when
        # an option stands between them (:func:`benchlib.runner.execute.fio_command`)
        command += [f"--client={host},{port}", str(job.resolve()), "--readonly", "--clocksource=clock_gettime"]
    done = subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=120, check=False)
    return done.returncode == 0 and _read_whole_tokens(done.stdout, set(checks))


def _safe_name(host: str) -> str:
    """Return a host name fit for a file name (an IPv6 address has colons)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", host)


def _listeners() -> dict[tuple[str, int], int]:
    """Return this network namespace's listening TCP sockets: ``{(address, port): socket inode}``."""
    found = {}
    for table, width in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 16)):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if len(fields) < 10 or fields[3] != "0A":  # 0A: LISTEN
                    continue
                raw, port = fields[1].split(":")
                packed = bytes.fromhex(raw)
                # the kernel prints each 32-bit word of the address in host (little-endian) order
                address = b"".join(packed[i : i + 4][::-1] for i in range(0, width, 4))
                found[(str(ipaddress.ip_address(address)), int(port, 16))] = int(fields[9])
    return found


def _socket_owners(inodes: set[int]) -> dict[int, int]:
    """Return which process holds each socket inode: ``{inode: pid}`` (what this process may see of /proc)."""
    wanted = {f"socket:[{i}]": i for i in inodes}
    owners: dict[int, int] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or len(owners) == len(wanted):
            continue
        with contextlib.suppress(OSError):
            for fd in os.scandir(proc / "fd"):
                with contextlib.suppress(OSError):
                    if (inode := wanted.get(os.readlink(fd.path))) is not None:
                        owners.setdefault(inode, int(proc.name))
    return owners


def _credentials(pid: int | str) -> list[str]:
    """Return a process's user, group and supplementary groups as /proc says them (its Uid, Gid, Groups lines)."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return [line for line in lines if line.startswith(("Uid:", "Gid:", "Groups:"))]


def _shares_our_files(pid: int, fio: str) -> bool:
    """Whether process ``pid`` is a fio that sees this process's files exactly as this process does.

    The same fio program (a tunnel, proxy or forwarder holding the socket is not the server), the same
    mount namespace and root, and the same user and groups (a file one of them may not look at is not
    the same answer for both).
    """
    try:
        same_program = os.path.realpath(f"/proc/{pid}/exe") == os.path.realpath(shutil.which(fio) or fio)
        same_mounts = os.stat(f"/proc/{pid}/ns/mnt").st_ino == os.stat("/proc/self/ns/mnt").st_ino
        return (
            same_program
            and same_mounts
            and os.path.samefile(f"/proc/{pid}/root", "/proc/self/root")
            and _credentials(pid) == _credentials("self")
        )
    except OSError:
        return False


@dataclass(frozen=True)
class SameFiles:
    """A fio server on this machine that sees benchlib's own files: its process and its listening socket."""

    pid: int
    inode: int

    def still(self, address: str, port: int, fio: str, listening: dict[tuple[str, int], int] | None = None) -> bool:
        """Whether the same fio process still listens at ``address:port`` and still sees benchlib's files.

        ``listening``: :func:`_listeners`, when the caller read it once for many servers.
        """
        listening = _listeners() if listening is None else listening
        inode = listening.get((address, port)) or listening.get(("0.0.0.0", port))
        if inode != self.inode or not _shares_our_files(self.pid, fio):
            return False
        with contextlib.suppress(OSError):
            return any(os.readlink(fd.path) == f"socket:[{inode}]" for fd in os.scandir(f"/proc/{self.pid}/fd"))
        return False


def servers_sharing_files(hosts: list[str], port: int, fio: str = "fio") -> dict[str, SameFiles]:
    """Return the fio servers among ``hosts`` that run on this machine and see its files as benchlib does.

    For those, a path names the same file for the server and for benchlib, so benchlib reads a target's token
    itself (a read of 4 KiB) instead of asking the server to (a fio client call of about a second). Found by
    the process that holds each server's listening socket (``/proc/net/tcp``, then ``/proc/*/fd``), for a
    server whose address is this machine's (:func:`is_this_machine`: a connection to it reaches that
    socket). A server in a container, another mount namespace or a chroot, one running as another user,
    one behind a tunnel or proxy (the socket is not fio's), or one this process may not look at, is not one.
    """
    listening = _listeners()
    addresses = {}
    for host in hosts:
        with contextlib.suppress(OSError, ValueError):
            if not is_this_machine(host):
                continue
            address = socket.gethostbyname(host)
            inode = listening.get((address, port)) or listening.get(("0.0.0.0", port))
            if inode:
                addresses[host] = inode
    owners = _socket_owners(set(addresses.values()))
    return {
        host: SameFiles(owners[inode], inode)
        for host, inode in addresses.items()
        if inode in owners and _shares_our_files(owners[inode], fio)
    }


def _holds_here(path: str, claim: FileClaim, offset: int) -> bool:
    """Whether ``path`` (as this process sees it) holds the claim's token at ``offset``."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        return os.pread(fd, TAIL_BYTES, offset) == claim.tail()
    except OSError:
        return False
    finally:
        os.close(fd)


def _own_addresses() -> set[str]:
    """Every address of this machine's interfaces (IPv4 from the kernel's routing trie, IPv6 from if_inet6)."""
    own = set()
    with contextlib.suppress(OSError):
        lines = Path("/proc/net/fib_trie").read_text().splitlines()
        own |= {
            lines[i - 1].split()[-1]
            for i, line in enumerate(lines)
            if "/32 host LOCAL" in line and i and lines[i - 1].strip().startswith("|--")
        }
    with contextlib.suppress(OSError):
        for line in Path("/proc/net/if_inet6").read_text().splitlines():
            raw = line.split()[0]
            own.add(str(ipaddress.IPv6Address(int(raw, 16))))
    return own


def is_this_machine(host: str) -> bool:
    """Whether a fio server address is this machine (loopback, unspecified, or an address of one of its interfaces)."""
    try:
        address = ipaddress.ip_address(socket.gethostbyname(host))
    except (OSError, ValueError):
        return False
    return address.is_loopback or address.is_unspecified or str(address) in _own_addresses()


_PROBE = re.compile(
    r"hostname=(?P<hostname>[^,]+), be=(?P<be>\d), (?P<bits>\d+)-bit, os=(?P<os>[^,]+), "
    r"arch=(?P<arch>[^,]+), fio=(?P<fio>[^,]+), flags=\d+"
)


def server_facts(fio: str, host: str, port: int, workdir: Path) -> dict:
    """Return what a remote fio server says about its machine when a client connects (its probe reply).

    fio sends its host name, operating system, architecture, word size and
    fio version, nothing more; the kernel release, CPU model and memory come
    from the plan's ``facts_command`` (:func:`benchlib.runner.execute.command_facts`) when it has one.
    """
    _, said = on_server(
        fio,
        host,
        port,
        workdir,
        "[facts]\nfilename=/nonexistent-benchlib-probe\nioengine=filestat\nallow_file_create=0\n",
        "--debug=net",
        "--readonly",
    )
    found = _PROBE.search(said)
    if found is None:
        return {"note": f"remote host: its fio server did not answer the probe ({said.strip()[-200:]})"}
    return {
        "hostname": found["hostname"],
        "os": found["os"],
        "arch": found["arch"],
        "bits": int(found["bits"]),
        "big_endian": found["be"] == "1",
        "fio_version": found["fio"],
        "note": "remote host: what its fio server reports (no kernel, CPU model or memory)",
    }


def server_names_this_machine(fio: str, host: str, port: int, workdir: Path) -> bool:
    """Tell whether the fio server at ``host`` runs on this machine.

    Whether the fio server at ``host`` says it runs on a machine with this machine's host name (a server in
    another network namespace of this kernel does: its devices are this machine's).
    """
    name = server_facts(fio, host, port, workdir).get("hostname")
    return name is None or name == socket.gethostname()  # no answer: assume it may be this machine


def _differences(before: dict, now: dict) -> str:
    """Say what changed between two device identities: ``backing 'file (1, 2)' -> 'file (1, 3)'``."""
    keys = sorted(set(before) | set(now))
    return ", ".join(f"{k} {before.get(k)!r} -> {now.get(k)!r}" for k in keys if before.get(k) != now.get(k))


@dataclass
class Targets:
    """Every host's target for one run: checked once, re-checked before each cell."""

    plan: Plan
    fio: str
    destroy_data: str | None
    paths: dict[str, str] = field(default_factory=dict)
    devices: dict[str, DeviceReport] = field(default_factory=dict)
    claims: dict[str, FileClaim] = field(default_factory=dict)
    #: per host, what identified its device when checked (number, size, serial, a loop device's file)
    identities: dict[str, dict] = field(default_factory=dict)
    #: per host, what was done to its region before the first cell (every run's manifest keeps it)
    state: dict[str, dict] = field(default_factory=dict)
    #: the fio servers on this machine that see benchlib's files: their tokens are read back here
    same_files: dict[str, SameFiles] = field(default_factory=dict)
    this_machine: Callable[[str], bool] = is_this_machine

    @property
    def on_servers(self) -> bool:
        """Whether fio runs on servers (reached only through fio) rather than on this machine."""
        return bool(self.plan.servers)

    def prepare(self, hosts: list[str], writes: bool) -> dict[str, str]:
        """Check (and create) the target of every host; ``{host: target path}``.

        Raises
        ------
        UnsafeTargetError
            For a target benchlib must not use; nothing has been written to it.

        """
        recorded = self._recorded()
        if self.on_servers and self.plan.target.device is None:
            self.same_files = servers_sharing_files(hosts, self.plan.port, self.fio)
        same_path: dict[str, list[str]] = {}
        for host in hosts:  # hosts whose targets have one path are prepared one after another (they may share it)
            same_path.setdefault(self.plan.target.path_for(host), []).append(host)

        def prepare_group(group: list[str], scratch: Path) -> None:
            for host in group:
                self._prepare_one(host, recorded, writes, scratch)

        with self._scratch() as scratch, ThreadPoolExecutor(max_workers=max(1, min(8, len(same_path)))) as pool:
            # the paths at once (each a few fio calls to its server); the first refusal is raised
            for _ in pool.map(lambda g: prepare_group(g, scratch), same_path.values()):
                pass
        return {h: self.paths[h] for h in hosts}

    def _here(self, host: str, listening: dict[tuple[str, int], int] | None = None) -> bool:
        """Whether ``host``'s fio server sees benchlib's files (:func:`servers_sharing_files`), still."""
        same = self.same_files.get(host)
        try:
            return same is not None and same.still(socket.gethostbyname(host), self.plan.port, self.fio, listening)
        except OSError:  # the name no longer resolves: ask the server through fio, which says why
            return False

    def _exists(self, host: str, path: str, scratch: Path) -> bool:
        """Whether anything is at ``path`` as ``host``'s server sees it (a link counts, even one leading nowhere).

        Here only when the answer is certain (there, or not found); anything else is asked through fio.
        """
        if self._here(host):
            try:
                os.lstat(path)
                return True
            except FileNotFoundError:
                return False
            except OSError:
                pass
        return _exists_remotely(self.fio, host, self.plan.port, path, scratch)

    def _has_token(self, host: str, path: str, claim: FileClaim, offset: int, scratch: Path) -> bool:
        """Whether ``path`` on ``host`` holds the claim's token at ``offset``: read here, or by the server."""
        if self._here(host):
            return _holds_here(path, claim, offset)
        return _holds(self.fio, host, self.plan.port, path, claim, offset, scratch)

    def _prepare_one(self, host: str, recorded: dict, writes: bool, scratch: Path) -> None:
        """Check (and create, and write) one host's target."""
        scratch = scratch / "prepare" / host  # one folder per host: the hosts are prepared at once
        scratch.mkdir(parents=True, exist_ok=True)
        path = self.plan.target.path_for(host)
        self.paths[host] = path
        claim = FileClaim.from_record(recorded.get(f"{host} {path}"))
        if self.plan.target.device is not None:
            self._device(host, path, writes)
            if host in self.devices:  # a device of this machine: fio gets its own name, never a link
                self.paths[host] = os.path.realpath(path)
        elif self.on_servers:
            self.claims[host] = self._claim_remote(host, path, claim, scratch)
        elif check_file(path, claim, self.plan.target.size_bytes):
            self.claims[host] = claim  # type: ignore[assignment]
        else:
            self.claims[host] = create_file(path, self.plan.target.size_bytes)
            self._record(f"{host} {path}", self.claims[host])
        self._prepare_region(host, scratch)

    def _prepare_region(self, host: str, scratch: Path) -> None:
        """Write what must be written before the study's first cell; keep in :attr:`state` what the region holds.

        A file's region was written when benchlib created it. A device named for destruction is written
        once per study (a new or thin-provisioned disk reads unwritten space for free); a plan's
        ``precondition`` writes the region ``passes`` times more, once per study. A device benchlib may
        not write is used as it is, and its state says so.
        """
        target, path = self.plan.target, self.paths[host]
        device = target.device is not None
        may_write = not device or self.destroy_data == target.device
        claim = self.claims.get(host)
        # a file's record goes with the file (its token): one created again is written again
        key = f"region {self.plan.output.resolve()} {host} {path}" + (f" {claim.token}" if claim else "")
        done = read_record().get(key)
        passes = target.passes or (1 if device and may_write else 0)
        if passes and not isinstance(done, dict):
            if not may_write:
                raise UnsafeTargetError(
                    f"{path} on {host}: [target] precondition writes the whole region; if the device may be "
                    f"destroyed on every host, pass --destroy-data={target.device}"
                )
            self._write_region(host, passes, scratch)
            done = {"at": now(), "passes": passes, "how": "sequential writes of random data, 1 MiB blocks"}
            write_record(key, done)
        written = claim.written if claim else (done["at"] if isinstance(done, dict) else None)
        self.state[host] = {
            "path": path,
            "kind": "device" if device else "file",
            "written": written,
            "preconditioned": done if isinstance(done, dict) and target.passes else None,
        }

    def _write_region(self, host: str, passes: int, scratch: Path) -> None:
        """Write the host's region ``passes`` times: here through a descriptor benchlib checked, else through fio."""
        size, path = self.plan.target.size_bytes, self.paths[host]
        if host in self.devices and not self.on_servers:  # a server's device is written by that server, through fio
            with held_exclusively(path, self.devices[host].rdev) as fd:
                self._same_identity(host, f"/dev/fd/{fd}")
                sectors = self.identities[host].get("sectors")
                length = os.lseek(fd, 0, os.SEEK_END) if sectors is None else int(sectors) * 512
                write_region_here(fd, min(size, length), passes)  # fio too stops at the device's end
        elif not self.on_servers:
            fd = open_claimed(path, self.claims[host])
            try:
                write_region_here(fd, size, passes)
            finally:
                os.close(fd)
        else:
            if host in self.devices:  # a device of this machine's server: fio too stops at the device's end
                size = min(size, int(self.identities[host].get("sectors") or size // 512) * 512)
            write_region_on_server(self.fio, host, self.plan.port, path, size, passes, scratch)

    def recheck(self, hosts: list[str], writes: bool) -> None:
        """Check every target again immediately before a cell.

        Immediately before a cell: every target is still the one checked (same device, same file and token,
        still not in use); the hosts are asked at once.

        Raises
        ------
        UnsafeTargetError
            When a target changed; the cell has not started.

        """
        with self._scratch() as scratch:
            if self.on_servers and self.plan.target.device is None:
                size, port = self.plan.target.size_bytes, self.plan.port
                listening = _listeners() if self.same_files else {}
                here = {
                    h for h in hosts if self._here(h, listening) and _holds_here(self.paths[h], self.claims[h], size)
                }
                checks = {h: (self.paths[h], self.claims[h], size) for h in hosts if h not in here}
                if not checks or _all_hold(self.fio, port, checks, scratch):
                    return  # every token read back (here, or through fio in one call); else host by host below
            with ThreadPoolExecutor(max_workers=max(1, min(8, len(hosts)))) as pool:
                for failure in pool.map(lambda h: self._recheck_one(h, writes, scratch), hosts):
                    if failure:
                        raise failure

    def _recheck_one(self, host: str, writes: bool, scratch: Path) -> UnsafeTargetError | None:
        path = self.paths[host]
        scratch = scratch / host  # one folder per host: the hosts are asked at once
        scratch.mkdir(exist_ok=True)
        try:
            if self.plan.target.device is not None:
                if host in self.devices:
                    given = self.plan.target.path_for(host)
                    recheck_device(given, self.devices[host], writes=writes, destroy_data=self.destroy_data)
                    if os.path.realpath(given) != path:
                        raise UnsafeTargetError(
                            f"{given} now names {os.path.realpath(given)}, not {path} as when the run started "
                            "(a link changed); nothing was written in this cell"
                        )
                    self._same_identity(host, path)
                else:
                    self._device(host, path, writes)
            elif self.on_servers:
                if not _holds(
                    self.fio, host, self.plan.port, path, self.claims[host], self.plan.target.size_bytes, scratch
                ):
                    raise UnsafeTargetError(
                        f"{path} on {host} no longer holds the token benchlib wrote after its region "
                        "(replaced, linked elsewhere or removed since); nothing was written in this cell"
                    )
            elif not check_file(path, self.claims[host], self.plan.target.size_bytes):
                raise UnsafeTargetError(f"{path} is gone since the run started; nothing was written in this cell")
        except UnsafeTargetError as exc:
            return exc
        return None

    @contextlib.contextmanager
    def opened(self, hosts: list[str]) -> Iterator[dict[str, int]]:
        """Open every target of this machine for the length of a cell.

        While a cell runs on this machine: each target opened by benchlib, ``{host: descriptor}`` for fio's
        ``/dev/fd/N`` (a device held with ``O_EXCL``, so nothing can mount it meanwhile). Empty for servers.
        """
        with contextlib.ExitStack() as stack:
            fds = {}
            for host in hosts:
                if host in self.devices:
                    # held open while the cell runs (a fio server of this machine too): nothing can mount it,
                    # and a loop device cannot be given another file; checked again now that it is held
                    fd = stack.enter_context(held_exclusively(self.paths[host], self.devices[host].rdev))
                    self._same_identity(host, f"/dev/fd/{fd}")
                    if not self.on_servers:
                        fds[host] = fd
                elif not self.on_servers:
                    fds[host] = open_claimed(self.paths[host], self.claims[host])
                    stack.callback(os.close, fds[host])
            yield fds

    def _device(self, host: str, path: str, writes: bool) -> None:
        if not self.on_servers or self.this_machine(host) or self._names_this_machine(host):
            self.devices[host] = check_device(path, writes=writes, destroy_data=self.destroy_data)
            self._same_device_as_before(host, path)
            self.identities[host] = device_identity(path)
        if self.on_servers and writes and self.destroy_data != self.plan.target.device:
            raise UnsafeTargetError(
                f"{path} on {host}: the plan writes to this device and benchlib cannot inspect a "
                f"remote device; if it may be destroyed on every host, pass "
                f"--destroy-data={self.plan.target.device}"
            )

    def _same_identity(self, host: str, path: str) -> None:
        """Refuse a device that is not, in every respect benchlib can see, the one checked when the run started.

        The device number alone stays the same when a loop device is given another file, or a hot-swapped
        disk takes the old one's name; its size, serial or WWID and backing file do not.
        """
        now, before = device_identity(path), self.identities[host]
        if now != before:
            changed = _differences(before, now)
            raise UnsafeTargetError(
                f"{self.paths[host]} on {host} is not the device checked when the run started ({changed}); "
                "nothing was written in this cell"
            )

    def _same_device_as_before(self, host: str, path: str) -> None:
        """Check that a study continues on the device it started on.

        A study continues on the device it started on: a path that now names another device (a disk renamed
        after a reboot, a loop device attached to another file) stops it.
        """
        key = f"device {self.plan.output.resolve()} {host} {path}"
        now = device_identity(path)
        before = read_record().get(key)
        if before is None:
            write_record(key, now)
        elif before != now:
            changed = _differences(before, now)
            raise UnsafeTargetError(
                f"{path} on {host} is not the device this study ran on before ({changed}); "
                "check what it is now, then give the plan a new output folder"
            )

    def _names_this_machine(self, host: str) -> bool:
        with self._scratch() as scratch:
            return server_names_this_machine(self.fio, host, self.plan.port, scratch)

    def _claim_remote(self, host: str, path: str, claim: FileClaim | None, scratch: Path) -> FileClaim:
        """Use ``path`` on a fio server only if this study created it.

        Create it when neither it nor its marker exists.
        """
        size, port = self.plan.target.size_bytes, self.plan.port
        if self._exists(host, path, scratch):
            if claim is None:
                raise UnsafeTargetError(
                    f"{path} on {host} exists and benchlib did not create it (its record, "
                    f"{state_folder() / RECORD}, does not name it); choose a new path in [target]"
                )
            if claim.size != size:
                raise UnsafeTargetError(
                    f"{path} on {host}: benchlib created it for a region of {claim.size:,} bytes "
                    f"and the plan now asks for {size:,}; choose a new path in [target]"
                )
            if not self._has_token(host, path, claim, size, scratch):
                raise UnsafeTargetError(
                    f"{path} on {host} does not hold the token benchlib wrote after its region "
                    "(replaced or changed since); choose a new path in [target]"
                )
            return claim if claim.written else self._lay_out_remote(host, path, claim, scratch)
        marker = str(marker_for(path))
        if self._exists(host, marker, scratch) and (
            claim is None or not self._has_token(host, marker, claim, 0, scratch)
        ):
            raise UnsafeTargetError(
                f"{marker} on {host} exists and is not benchlib's marker; benchlib would write "
                "over it. Choose a new path in [target]"
            )
        claim = new_claim(size)
        for name, job in ((path, f"offset={size}\nsize={TAIL_BYTES}\n"), (marker, f"size={TAIL_BYTES}\n")):
            code, said = on_server(
                self.fio,
                host,
                port,
                scratch,
                f"[create]\nfilename={name}\nrw=write\nbs={TAIL_BYTES}\n{job}ioengine=psync\n"
                f"buffer_pattern=0x{claim.token}\n",
                "--output-format=json",
            )
            if code != 0:
                raise UnsafeTargetError(
                    f"cannot create {name} on {host}: {_fio_reason(said) or 'fio failed'}; if fio left "
                    "a partial file there, remove it, then run again"
                )
        self._record(f"{host} {path}", claim)  # ours from now on: an interrupted lay-out is done again next time
        return self._lay_out_remote(host, path, claim, scratch)

    def _lay_out_remote(self, host: str, path: str, claim: FileClaim, scratch: Path) -> FileClaim:
        """Write the whole region of a server's file benchlib created, and record when (fio creates it sparse)."""
        write_region_on_server(self.fio, host, self.plan.port, path, claim.size, 1, scratch)
        claim = dataclasses.replace(claim, written=now())
        self._record(f"{host} {path}", claim)
        return claim

    def _recorded(self) -> dict:
        return read_record()

    def _record(self, key: str, claim: FileClaim) -> None:
        write_record(key, claim)

    @contextlib.contextmanager
    def _scratch(self) -> Iterator[Path]:
        """Return a new folder of benchlib's own for probe job files (removed after; nothing else is)."""
        self.plan.output.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=".benchlib-probe-", dir=self.plan.output))
        try:
            yield scratch
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
