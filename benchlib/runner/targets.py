"""The targets of a run on every host: checked before the run, re-checked before every cell.

:mod:`benchlib.runner.safety` holds the rules for one local file or device;
this module applies them to a plan's hosts, and to remote hosts through fio
itself (a fio server is all benchlib can reach there):

* a remote **file** target is used when benchlib created it. Its marker,
  ``<file>.benchlib-target``, is written through fio with a random 16-byte
  token as its content; the token is kept in the study's
  ``.benchlib-targets.json``, and before every cell fio reads the marker back
  with ``verify=pattern`` (reading only). A marker without this study's token
  (any other file of 4 KiB, another study's marker) is refused.
* a remote **device** is written only with ``--destroy-data`` naming it, since
  benchlib cannot look inside a remote device.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from benchlib.runner.plan import Plan
from benchlib.runner.safety import (
    DeviceReport,
    UnsafeTargetError,
    check_device,
    check_file,
    create_file,
    held_exclusively,
    marker_for,
    recheck_device,
)

TOKENS = ".benchlib-targets.json"


def on_server(fio: str, host: str, port: int, workdir: Path, job: str, *options: str) -> tuple[int, str]:
    """Run one small job file (text ``job``, its first section naming the file) on a fio server."""
    path = workdir / f"{job[1:job.index(']')]}.fio"
    path.write_text(job, encoding="utf-8")
    done = subprocess.run([fio, f"--client={host},{port}", *options, str(path)], cwd=workdir,
                          capture_output=True, text=True, timeout=60, check=False)
    return done.returncode, done.stdout + done.stderr


def _exists_remotely(fio: str, host: str, port: int, path: str, workdir: Path) -> bool:
    """Whether a non-empty file exists at ``path`` on a fio server, without writing.

    fio's ``filestat`` engine only stat()s; with no size given and file
    creation disallowed it fails on a missing or empty file and succeeds on
    a file with data. (A probe with a size would let fio extend, or even
    re-create, a small existing file.)
    """
    code, said = on_server(fio, host, port, workdir,
                           f"[probe]\nfilename={path}\nioengine=filestat\nallow_file_create=0\n", "--output-format=json")
    if "failed to connect" in said:
        raise UnsafeTargetError(f"cannot check the target on {host}: no fio server answers on port {port}")
    if "not loadable" in said:
        raise UnsafeTargetError(f"cannot check the target on {host}: its fio has no filestat engine (fio >= 3.19 has)")
    return code == 0


def _marker_holds(fio: str, host: str, port: int, marker: str, token: str, workdir: Path) -> bool:
    """Whether the remote marker holds ``token`` throughout, read back by fio (no size: fio never extends it)."""
    code, _ = on_server(fio, host, port, workdir,
                        f"[marker-check]\nfilename={marker}\nrw=read\nbs=16\nioengine=psync\nallow_file_create=0\n"
                        f"verify=pattern\nverify_pattern=0x{token}\n", "--output-format=json")
    return code == 0


@dataclass
class Targets:
    """Every host's target for one run: checked once, re-checked before each cell."""

    plan: Plan
    fio: str
    destroy_data: str | None
    remote: Callable[[str], bool]
    paths: dict[str, str] = field(default_factory=dict)
    devices: dict[str, DeviceReport] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)

    def prepare(self, hosts: list[str], writes: bool) -> dict[str, str]:
        """Check (and create) the target of every host; ``{host: target path}``.

        Raises
        ------
        UnsafeTargetError
            For a target benchlib must not use; nothing has been written to it.
        """
        recorded = self._recorded_tokens()
        with self._scratch() as scratch:
            for host in hosts:
                path = self.plan.target.path_for(host)
                self.paths[host] = path
                if self.plan.target.device is not None:
                    self._device(host, path, writes)
                elif self.remote(host):
                    self._claim_remote(host, path, scratch, recorded.get(f"{host} {path}"))
                elif not check_file(path):
                    create_file(path, self.plan.target.size_bytes)
        return dict(self.paths)

    def recheck(self, hosts: list[str], writes: bool) -> None:
        """Immediately before a cell: every target is still the one checked (same device, same file and marker,
        still not in use).

        Raises
        ------
        UnsafeTargetError
            When a target changed; the cell has not started.
        """
        with self._scratch() as scratch:
            for host in hosts:
                path = self.paths[host]
                if self.plan.target.device is not None:
                    if host in self.devices:
                        recheck_device(path, self.devices[host], writes=writes, destroy_data=self.destroy_data)
                    else:
                        self._device(host, path, writes)
                elif self.remote(host):
                    marker = str(marker_for(path))
                    if not _marker_holds(self.fio, host, self.plan.port, marker, self.tokens[host], scratch):
                        raise UnsafeTargetError(f"{marker} on {host} no longer holds the token benchlib wrote "
                                                "(replaced or removed since the run started); nothing was written in this cell")
                elif not check_file(path):
                    raise UnsafeTargetError(f"{path} is gone since the run started; nothing was written in this cell")

    @contextlib.contextmanager
    def held(self, hosts: list[str]) -> Iterator[None]:
        """While a cell runs, hold every local device target open exclusively (nothing can mount it meanwhile)."""
        with contextlib.ExitStack() as stack:
            for host in hosts:
                if host in self.devices:
                    stack.enter_context(held_exclusively(self.paths[host]))
            yield

    def _device(self, host: str, path: str, writes: bool) -> None:
        if not self.remote(host):
            self.devices[host] = check_device(path, writes=writes, destroy_data=self.destroy_data)
        elif writes and self.destroy_data != self.plan.target.device:
            raise UnsafeTargetError(f"{path} on {host}: the plan writes to this device and benchlib cannot inspect a "
                                    f"remote device; if it may be destroyed on every host, pass "
                                    f"--destroy-data={self.plan.target.device}")

    def _claim_remote(self, host: str, path: str, scratch: Path, token: str | None) -> None:
        """Use ``path`` on a fio server only if this study created it (``token``: the one recorded for it);
        claim it with a new marker when neither it nor a marker exists."""
        marker = str(marker_for(path))
        if _exists_remotely(self.fio, host, self.plan.port, marker, scratch):
            if token is None or not _marker_holds(self.fio, host, self.plan.port, marker, token, scratch):
                raise UnsafeTargetError(
                    f"{marker} on {host} exists but is not a marker this study wrote (its token is not in "
                    f"{self.plan.output / TOKENS}); choose a new path in [target]")
            self.tokens[host] = token
            return
        if _exists_remotely(self.fio, host, self.plan.port, path, scratch):
            raise UnsafeTargetError(f"{path} on {host} exists, holds data and benchlib did not create it "
                                    f"(no {Path(marker).name} beside it); choose a new path in [target]")
        token = secrets.token_hex(16)
        code, said = on_server(self.fio, host, self.plan.port, scratch,
                               f"[marker]\nfilename={marker}\nrw=write\nbs=4k\nsize=4k\nioengine=psync\n"
                               f"buffer_pattern=0x{token}\n")
        if code != 0:
            raise UnsafeTargetError(f"cannot create {marker} on {host}: {said.strip()[-300:]}")
        self.tokens[host] = token
        self._record_token(f"{host} {path}", token)

    def _recorded_tokens(self) -> dict[str, str]:
        try:
            recorded = json.loads((self.plan.output / TOKENS).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return {str(k): str(v) for k, v in recorded.items()} if isinstance(recorded, dict) else {}

    def _record_token(self, key: str, token: str) -> None:
        recorded = self._recorded_tokens() | {key: token}
        self.plan.output.mkdir(parents=True, exist_ok=True)
        (self.plan.output / TOKENS).write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n", encoding="utf-8")

    @contextlib.contextmanager
    def _scratch(self) -> Iterator[Path]:
        scratch = self.plan.output / ".benchlib-probe"
        scratch.mkdir(parents=True, exist_ok=True)
        try:
            yield scratch
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
