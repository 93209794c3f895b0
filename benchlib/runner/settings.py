"""The vSphere settings a plan has benchlib set to each cell's level (``[vsphere] apply``), recorded and put back.

Storage I/O Control is set on the datastores the plan names, through vCenter's
``ConfigureDatastoreIORM_Task`` (:func:`benchlib.vsphere.set_sioc`), before each cell whose level differs
from what vCenter reports; each change waits for its task (Ctrl-C and SIGTERM wait for it too) and is read
back, and a cell never starts on a setting that differs from its level. Only with ``benchlib run
--apply-settings``: a plan travels inside studies and bundles, and the datastores it names are shared with
every VM on them. Every named datastore must hold a VM's disk under test, and every VM's disk under test
must be on one of them.

The record, ``benchlib-settings.json`` in the plan's output folder, is written before the first change: for
each run of the plan, this machine's name, what every datastore had, each change with its time and cell,
and when they were put back. The originals are put back when the run ends, is interrupted or fails; a run
killed before it could (kill -9, a power cut) leaves its record unrestored, and the next start on this
machine puts them back first, where every datastore is still as the record says the killed run left it
(else it stops and says what the record holds). Two runs on this machine never set one datastore at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import signal
import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchlib.errors import BenchlibError
from benchlib.runner.plan import Cell, Plan

#: the record of what was changed, in the plan's output folder
SETTINGS_FILE = "benchlib-settings.json"
#: the largest record read: far more changes than any plan makes
LARGEST_RECORD = 4 << 20


class SettingsError(BenchlibError):
    """A setting could not be brought to a cell's level, or put back; the run stops before the cell."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _said(on: bool) -> str:
    return "on" if on else "off"


def _locks() -> Path:
    """Return the folder of this machine's locks on datastores being set (the user's cache folder)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "benchlib" / "settings-locks"


@contextlib.contextmanager
def _signals_wait() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM until the block ends (a vCenter task under way is waited for and recorded)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    before = {
        sig: signal.signal(sig, lambda number, _frame: held.append(number)) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        if held:
            raise KeyboardInterrupt


class AppliedSettings:
    """The settings of one run of a plan: brought to each cell's levels, every change recorded, put back.

    The record holds every run of the plan (``runs``): a run that continues the plan adds to it, never over it.
    """

    def __init__(self, plan: Plan, service: Any) -> None:
        assert plan.vsphere is not None and plan.vsphere.apply  # noqa: S101 -- only for a plan that applies
        self.plan, self.service = plan, service
        self.server = plan.vsphere.server
        self.factor = plan.vsphere.apply["sioc"]
        self.datastores = list(plan.vsphere.datastores)
        self.path = plan.output / SETTINGS_FILE
        self.record: dict = {"factor": self.factor, "runs": []}
        self.run: dict | None = None
        self.held: list[int] = []

    def start(self) -> None:
        """Lock the datastores, put back what a killed run left changed, check the VMs' disks, record originals."""
        from benchlib.vsphere import datastore_sioc

        self._lock()
        self.record = read_record(self.path) or self.record
        left = left_changed(self.record)
        if left is not None:
            self._put_back_left(left)
        self._check_disks()
        original = self._reading(lambda: datastore_sioc(self.service, self.datastores), "reading SIOC")
        self.run = {
            "server": self.server,
            "host": socket.gethostname(),
            "started": _now(),
            "original": {name: {"sioc": on} for name, on in original.items()},
            "changes": [],
            "restored": None,
        }
        self.record["runs"].append(self.run)
        self._write()

    def bring(self, cell: Cell) -> None:
        """Set every named datastore's SIOC to ``cell``'s level where it differs; raise where it did not take."""
        from benchlib.vsphere import datastore_sioc, sioc_level

        want = sioc_level(cell.levels[self.factor])
        assert want is not None  # noqa: S101 -- the plan's levels were checked (plan._applied)
        now = self._reading(lambda: datastore_sioc(self.service, self.datastores), f"before {cell.key}")
        for name, on in now.items():
            if on != want:
                got = self._set(cell.key, name, on, want)
                if got != want:
                    raise SettingsError(
                        f"before {cell.key}: vCenter reports SIOC {_said(got)} on {name} after setting it "
                        f"{_said(want)}; the cell was not run"
                    )

    def restore(self) -> None:
        """Put every datastore back as this run found it (nothing where nothing was recorded or changed)."""
        if self.run is None or self.run["restored"] is not None:
            return
        self._put_back(self.run)

    def close(self) -> None:
        """Let other runs on this machine set these datastores again."""
        for fd in self.held:
            os.close(fd)  # closing the file lets its lock go
        self.held = []

    def _put_back(self, run: dict) -> None:
        from benchlib.vsphere import datastore_sioc

        original = {name: state["sioc"] for name, state in run["original"].items()}
        unnamed = sorted(set(original) - set(self.datastores))
        if unnamed:  # the plan names every object benchlib changes, also when it puts one back
            raise SettingsError(
                f"{self.path} says a run changed SIOC on {', '.join(unnamed)}, which this plan's [vsphere] "
                "datastores does not name: put it back by hand (the file says what it was), then move the file away"
            )
        now = self._reading(lambda: datastore_sioc(self.service, list(original)), "putting SIOC back")
        for name, on in now.items():
            if on != original[name]:
                self._set(None, name, on, original[name], run)
        run["restored"] = _now()
        self._write()

    def _put_back_left(self, run: dict) -> None:
        """Put back what a killed run left changed: only its own (this machine's), only where nothing moved since."""
        from benchlib.vsphere import datastore_sioc

        if run.get("host") != socket.gethostname() or run.get("server") != self.server:
            raise SettingsError(
                f"{self.path}: a run on {run.get('host')!r} through {run.get('server')!r} changed SIOC and did not "
                "put it back; this is another machine or vCenter: make sure each datastore's SIOC is as it should "
                "be (the file says what it had), then move the file away"
            )
        left = {name: state["sioc"] for name, state in run["original"].items()}
        for change in run["changes"]:  # where the killed run left each datastore
            left[change["datastore"]] = change["to"]
        known = [name for name in left if name in self.datastores]
        now = self._reading(lambda: datastore_sioc(self.service, known), "reading SIOC")
        moved = sorted(name for name in known if now[name] != left[name])
        if moved:
            raise SettingsError(
                f"{self.path}: a run killed before it put SIOC back left {', '.join(moved)} otherwise than vCenter "
                "has it now: someone set it since. Make sure each datastore's SIOC is as it should be (the file "
                "says what it had), then move the file away"
            )
        self._put_back(run)

    def _set(self, cell: str | None, name: str, before: bool, want: bool, run: dict | None = None) -> bool:
        """Set one datastore's SIOC (an interrupt waits for vCenter's task), record the change, return it read back."""
        from benchlib.vsphere import set_sioc

        with _signals_wait():
            got = self._reading(lambda: set_sioc(self.service, name, want), f"setting SIOC {_said(want)} on {name}")
            change = {"time": _now(), "cell": cell, "datastore": name, "setting": "sioc", "from": before, "to": got}
            (run or self.run or {"changes": []})["changes"].append(change)
            self._write()
        return got

    def _reading(self, call: Any, doing: str) -> Any:
        """Call vCenter; any failure (a fault, a lost session, the network) is one SettingsError saying what to do."""
        try:
            return call()
        except Exception as exc:  # noqa: BLE001 -- whatever vCenter or the network raised, said once with the way out
            first = str(exc).splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
            raise SettingsError(
                f"{doing} through vCenter failed ({first}); {self.path} says what each datastore had: the next "
                "run puts it back, or set it by hand"
            ) from None

    def _check_disks(self) -> None:
        """Refuse a VM whose disk under test is not on a named datastore, and a named datastore with none."""
        from benchlib.vsphere import disk_under_test, read_facts

        vsphere = self.plan.vsphere
        assert vsphere is not None  # noqa: S101 -- only for a plan that applies
        facts = self._reading(lambda: read_facts(self.service, list(vsphere.vms.values())), "reading the VMs")
        tested = set()
        for vm in facts["vms"]:
            disk, why = disk_under_test(vm, vsphere.disk)
            if disk is None:
                raise SettingsError(f"VM {vm['vm']} {why.replace('in study.toml', 'in the plan')}")
            if disk.get("datastore") not in self.datastores:
                raise SettingsError(
                    f"VM {vm['vm']}'s disk under test ({disk.get('label')}) is on {disk.get('datastore')}, not on "
                    f"the datastores [vsphere] apply changes ({', '.join(self.datastores)}): name its datastore"
                )
            tested.add(disk["datastore"])
        idle = [name for name in self.datastores if name not in tested]
        if idle:
            raise SettingsError(
                f"[vsphere] datastores names {', '.join(idle)}, which holds no VM's disk under test: benchlib changes "
                "only what a cell measures; leave it out"
            )

    def _lock(self) -> None:
        """Hold this machine's lock on each datastore (a second run setting one of them stops here)."""
        folder = _locks()
        folder.mkdir(parents=True, exist_ok=True)
        for name in self.datastores:
            key = "".join(c if c.isalnum() or c in "-._" else "_" for c in f"{self.server}-{name}")[:200]
            fd = os.open(folder / f"{key}.lock", os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                self.close()
                raise SettingsError(
                    f"another benchlib run on this machine is setting SIOC on {name}; wait for it to end"
                ) from None
            self.held.append(fd)

    def _write(self) -> None:
        """Write the record whole and to disk (a new file renamed over it: a kill never leaves half a record)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f".{SETTINGS_FILE}.{secrets.token_hex(4)}")
        with open(temporary, "x", encoding="utf-8") as handle:  # a new file: never through a link
            handle.write(json.dumps(self.record, indent=2) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)


def read_record(path: Path) -> dict | None:
    """Return the record earlier runs of a plan left (None where there is none); refuse one not as written."""
    if not path.exists() and not path.is_symlink():
        return None
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > LARGEST_RECORD:
            raise ValueError("not a file benchlib wrote")
        record = json.loads(path.read_text(encoding="utf-8"))
        _check_record(record)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SettingsError(
            f"{path}: the record of settings earlier runs changed cannot be read ({exc}); make sure each "
            "datastore's SIOC is as it should be, then move the file away"
        ) from None
    return record


def _check_record(record: object) -> None:
    """Raise ValueError where a record is not as :class:`AppliedSettings` writes it."""

    def text(value: object) -> bool:
        return isinstance(value, str) and len(value) <= 1000

    if not isinstance(record, dict) or not isinstance(record.get("runs"), list):
        raise ValueError("no list of runs")
    for run in record["runs"]:
        original = run.get("original") if isinstance(run, dict) else None
        if not isinstance(original, dict) or not all(
            text(name) and isinstance(state, dict) and isinstance(state.get("sioc"), bool)
            for name, state in original.items()
        ):
            raise ValueError("a run without each datastore's SIOC as true or false")
        changes = run.get("changes")
        if not isinstance(changes, list) or not all(
            isinstance(c, dict) and text(c.get("datastore")) and isinstance(c.get("to"), bool) for c in changes
        ):
            raise ValueError("a change without its datastore and SIOC")
        if not (run.get("restored") is None or text(run.get("restored"))):
            raise ValueError("restored is neither a time nor null")


def left_changed(record: dict | None) -> dict | None:
    """Return the last run of a record when it did not put its settings back (a run killed), else None."""
    if record and record["runs"] and record["runs"][-1]["restored"] is None:
        return record["runs"][-1]
    return None


def planned_changes(plan: Plan, order: list[tuple[int, Cell]]) -> list[str]:
    """Return the dry run's lines: what a killed run left to put back, then the level changes in run order."""
    if plan.vsphere is None or not plan.vsphere.apply:
        return []
    from benchlib.vsphere import sioc_level

    factor = plan.vsphere.apply["sioc"]
    lines, before = [], None
    for repetition, cell in order:
        want = sioc_level(cell.levels[factor])
        if want != before:
            lines.append(f"  before {cell.key} r{repetition}: SIOC {_said(bool(want))}")
            before = want
    where = ", ".join(plan.vsphere.datastores)
    head = (
        f"SIOC set through vCenter on {where}, before each cell whose level it does not have already: at the "
        f"{len(lines)} level changes below at most, on each datastore"
        + (" (adaptive rounds add their own)" if plan.adaptive else "")
    )
    try:
        left = left_changed(read_record(plan.output / SETTINGS_FILE))
    except SettingsError as exc:
        return [f"{exc}", head, *lines]
    first = []
    if left is not None:
        had = ", ".join(f"{name} {_said(state['sioc'])}" for name, state in left["original"].items())
        first = [f"first, put back what a run killed before it could left changed: {had}"]
    return [*first, head, *lines, f"then put back on {where} as vCenter had it, also after an interrupt"]
