"""The vSphere settings a plan has benchlib set to each cell's level (``[vsphere] apply``), and put back.

Storage I/O Control is set on the datastores the plan names, through vCenter's
``ConfigureDatastoreIORM_Task`` (:func:`benchlib.vsphere.set_sioc_of`), before each cell whose level differs
from what vCenter reports; each change waits for its task (Ctrl-C and SIGTERM wait for it too) and is read
back, and a cell never starts on a setting that differs from its level. Only with ``benchlib run
--apply-settings``: a plan travels inside studies and bundles, and the datastores it names are shared with
every VM on them. A datastore is the one each VM's disk under test is on (never another of the same name),
every named datastore must hold one, and every VM's must be named.

What must be put back is kept on this machine, not in the study: a journal per datastore in the user's
cache folder (:func:`state_folder`), written before each change with the change under way, removed once the
datastore is back as the run found it. A run killed before it could put it back (kill -9, a power cut) leaves
its journal, and the next run on this machine of any plan setting that datastore puts it back first, where
vCenter still has what the journal says was left (or was under way); else it stops and says what it had.
A record that came with a study can therefore never make benchlib change a setting. The study keeps the
provenance: ``benchlib-settings.json`` lists, for every run, what each datastore had and each change with its
time and cell.
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

#: the provenance of what was changed, in the plan's output folder (never read to change anything)
SETTINGS_FILE = "benchlib-settings.json"
#: the largest record or journal read: far more changes than any plan makes
LARGEST_RECORD = 4 << 20


class SettingsError(BenchlibError):
    """A setting could not be brought to a cell's level, or put back; the run stops before the cell."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _said(on: bool) -> str:
    return "on" if on else "off"


def _first(exc: BaseException) -> str:
    """Return an error's first line (its type where it says nothing)."""
    return str(exc).splitlines()[0][:300] if str(exc).strip() else type(exc).__name__


def state_folder() -> Path:
    """Return this machine's folder of datastore locks and journals (in the user's cache folder)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "benchlib" / "settings"


@contextlib.contextmanager
def _signals_held(*, again: bool = True) -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM until the block ends: a vCenter task under way is waited for and recorded.

    ``again``: raise KeyboardInterrupt after the block where one came (not while putting back at the end).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    signals = (signal.SIGINT, signal.SIGTERM)
    before = {sig: signal.signal(sig, lambda number, _frame: held.append(number)) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        if held and again:
            raise KeyboardInterrupt


def _write_json(path: Path, data: object) -> None:
    """Write a JSON file whole and to disk: a new file (never through a link) renamed over it."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    with open(temporary, "x", encoding="utf-8") as handle:
        handle.write(json.dumps(data, indent=2) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def _read_json(path: Path) -> object:
    """Read a JSON file benchlib wrote: a file, not a link, not huge (ValueError otherwise)."""
    if path.is_symlink() or not path.is_file() or path.stat().st_size > LARGEST_RECORD:
        raise ValueError("not a file benchlib wrote")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except RecursionError:
        raise ValueError("nested deeper than benchlib writes") from None


class AppliedSettings:
    """The settings of one run of a plan: brought to each cell's levels, journalled, recorded, put back."""

    def __init__(self, plan: Plan, service: Any) -> None:
        assert plan.vsphere is not None and plan.vsphere.apply  # noqa: S101 -- only for a plan that applies
        self.plan, self.service = plan, service
        self.vsphere = plan.vsphere
        self.factor = plan.vsphere.apply["sioc"]
        self.path = plan.output / SETTINGS_FILE
        self.objects: dict[str, Any] = {}  # datastore name -> managed object, from the VMs' disks
        self.journals: dict[str, Path] = {}
        self.original: dict[str, bool] = {}
        self.record: dict = {"factor": self.factor, "runs": []}
        self.run: dict | None = None
        self.held: list[int] = []

    def start(self) -> None:
        """Find the datastores, lock them, put back what a killed run left, record what they have now."""
        self._find()
        self._lock()
        self._read_record()
        self.run = {"server": self.vsphere.server, "host": socket.gethostname(), "started": _now(), "original": {}}
        self.run.update(changes=[], restored=None)  # a killed run's put back first, as changes of no cell
        self.record["runs"].append(self.run)
        try:
            with _signals_held():
                for name in self.objects:
                    self._put_back_left(name)
        except SettingsError as exc:  # recorded as refused, and nothing of this run to put back
            self.run["refused"] = str(exc)
            self._write_record()
            self.run = None
            raise
        self.original = {name: self._now_of(name) for name in self.objects}
        self.run["original"] = {name: {"sioc": on} for name, on in self.original.items()}
        self._write_record()

    def bring(self, cell: Cell) -> None:
        """Set every named datastore's SIOC to ``cell``'s level where it differs; raise where it did not take."""
        from benchlib.vsphere import sioc_level

        want = sioc_level(cell.levels[self.factor])
        assert want is not None  # noqa: S101 -- the plan's levels were checked (plan._applied)
        for name in self.objects:
            on = self._now_of(name)
            if on != want:
                got = self._set(cell.key, name, on, want)
                if got != want:
                    raise SettingsError(
                        f"before {cell.key}: vCenter reports SIOC {_said(got)} on {name} after setting it "
                        f"{_said(want)}; the cell was not run"
                    )

    def restore(self) -> None:
        """Put every datastore back as this run found it; a second Ctrl-C waits for it (the run is ending)."""
        if self.run is None or self.run["restored"] is not None:
            return
        with _signals_held(again=False):
            for name, on in self.original.items():
                now = self._now_of(name)
                if now != on:
                    self._set(None, name, now, on)
                self.journals[name].unlink(missing_ok=True)
            self.run["restored"] = _now()
            self._write_record()

    def close(self) -> None:
        """Let other runs on this machine set these datastores again."""
        for fd in self.held:
            os.close(fd)  # closing the file lets its lock go
        self.held = []

    def _find(self) -> None:
        """Find each VM's disk under test and its datastore; refuse a VM's not named, or a named one with none."""
        from benchlib.vsphere import VSphereError, disks_under_test

        vms = list(self.vsphere.vms.values())
        try:
            disks = disks_under_test(self.service, vms, self.vsphere.disk)
        except VSphereError as exc:  # a VM not there, a name twice, a disk not told: the plan's to mend
            raise SettingsError(str(exc)) from None
        except Exception as exc:  # noqa: BLE001 -- whatever vCenter or the network raised, said once
            raise SettingsError(f"finding the VMs' test disks through vCenter failed ({_first(exc)})") from None
        for vm, (label, datastore) in disks.items():
            if datastore.name not in self.vsphere.datastores:
                raise SettingsError(
                    f"VM {vm}'s disk under test ({label}) is on {datastore.name}, not on the datastores [vsphere] "
                    f"apply changes ({', '.join(self.vsphere.datastores)}): name its datastore"
                )
            other = self.objects.setdefault(datastore.name, datastore)
            if other._moId != datastore._moId:  # two datacenters' datastores of one name: one would go unset
                raise SettingsError(
                    f"the VMs' disks under test are on two datastores named {datastore.name} (one per datacenter or "
                    "folder): benchlib cannot tell them apart by the plan's name; give them names of their own"
                )
        idle = [name for name in self.vsphere.datastores if name not in self.objects]
        if idle:
            raise SettingsError(
                f"[vsphere] datastores names {', '.join(idle)}, which holds no VM's disk under test: benchlib changes "
                "only what a cell measures; leave it out"
            )

    def _lock(self) -> None:
        """Hold this machine's lock on each datastore, by vCenter's id and the datastore's (however spelled)."""
        instance = self._vcenter(lambda: _instance(self.service, self.vsphere.server), "reading vCenter's id")
        folder = state_folder()
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for name, datastore in self.objects.items():
                key = _key(instance, datastore)
                self.journals[name] = folder / f"{key}.json"
                fd = os.open(folder / f"{key}.lock", os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    raise SettingsError(
                        f"another benchlib run on this machine is setting SIOC on {name}; wait for it to end"
                    ) from None
                self.held.append(fd)
        except OSError as exc:
            self.close()
            raise SettingsError(
                f"cannot keep what benchlib changes in {folder} ({exc.strerror}); set XDG_CACHE_HOME to a folder "
                "of yours benchlib may write"
            ) from None

    def _put_back_left(self, name: str) -> None:
        """Put back what a run killed on this machine left changed on ``name``, where nothing moved since."""
        journal = self.journals[name]
        if not journal.exists() and not journal.is_symlink():
            return
        try:
            left = _read_json(journal)
            assert isinstance(left, dict) and isinstance(left["original"], bool)  # noqa: S101 -- caught below
            states = {left["now"], left.get("pending")} - {None}
            assert states and all(isinstance(s, bool) for s in states)  # noqa: S101 -- caught below
        except (OSError, ValueError, KeyError, TypeError, AssertionError):
            raise SettingsError(
                f"{journal}: benchlib's note of what it changed on {name} cannot be read; make sure its SIOC is as "
                "it should be, then remove the file"
            ) from None
        now = self._now_of(name)
        if now not in states:
            raise SettingsError(
                f"a run killed on this machine left SIOC {' or '.join(map(_said, sorted(states)))} on {name}, and "
                f"vCenter has it {_said(now)}: someone set it since. It had {_said(left['original'])} before that "
                f"run; make sure it is as it should be, then remove {journal}"
            )
        if now != left["original"]:
            self.original[name] = left["original"]
            self._set(None, name, now, left["original"])
        journal.unlink(missing_ok=True)

    def _now_of(self, name: str) -> bool:
        from benchlib.vsphere import sioc_of

        return self._vcenter(lambda: sioc_of(self.objects[name]), f"reading SIOC on {name}")

    def _set(self, cell: str | None, name: str, before: bool, want: bool) -> bool:
        """Set one datastore's SIOC, journalled before and after; record the change; return it read back."""
        from benchlib.vsphere import set_sioc_of

        note = {
            "datastore": name,
            "original": self.original.get(name, before),
            "output": str(self.plan.output.resolve()),
        }
        with _signals_held():
            _write_json(self.journals[name], {**note, "now": before, "pending": want})
            got = self._vcenter(lambda: set_sioc_of(self.service, self.objects[name], want), f"setting SIOC on {name}")
            _write_json(self.journals[name], {**note, "now": got, "pending": None})
            change = {"time": _now(), "cell": cell, "datastore": name, "setting": "sioc", "from": before, "to": got}
            if self.run is not None:
                self.run["changes"].append(change)
                self._write_record()
        return got

    def _vcenter(self, call: Any, doing: str) -> Any:
        """Call vCenter; any failure (a fault, a lost session, the network) is one SettingsError saying what to do."""
        try:
            return call()
        except Exception as exc:  # noqa: BLE001 -- whatever vCenter or the network raised, said once with the way out
            raise SettingsError(
                f"{doing} through vCenter failed ({_first(exc)}); benchlib's journal in {state_folder()} keeps what "
                "each datastore had: the next run puts it back, or set it by hand"
            ) from None

    def _read_record(self) -> None:
        """Read the provenance earlier runs of the plan left, to add to it; refuse one not as benchlib writes it."""
        if not self.path.exists() and not self.path.is_symlink():
            return
        try:
            record = _read_json(self.path)
            assert isinstance(record, dict) and isinstance(record.get("runs"), list)  # noqa: S101 -- caught below
        except (OSError, ValueError, AssertionError):
            raise SettingsError(
                f"{self.path}: the record of settings earlier runs changed cannot be read; move it away (it is "
                "a record only: what must be put back is kept on this machine)"
            ) from None
        self.record = record

    def _write_record(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _write_json(self.path, self.record)


def _instance(service: Any, server: str) -> str:
    """Return vCenter's own id (its instance UUID; the plan's address where it has none)."""
    return getattr(service.RetrieveContent().about, "instanceUuid", None) or server


def _key(instance: str, datastore: Any) -> str:
    """Return a datastore's name in this machine's locks and journals: vCenter's id and the datastore's."""
    return "".join(c if c.isalnum() or c in "-." else "_" for c in f"{instance}-{datastore._moId}")


def left_on_vms(plan: Plan, service: Any) -> str | None:
    """Say where a run killed on this machine left SIOC changed on a datastore of the plan's VMs (None: nowhere).

    For a plan that applies nothing: its cells would run on a setting nobody put back.
    """
    from benchlib.vsphere import vm_datastores

    if plan.vsphere is None or not state_folder().is_dir():
        return None
    try:
        instance = _instance(service, plan.vsphere.server)
        stores = {ds.name: _key(instance, ds) for ds in vm_datastores(service, list(plan.vsphere.vms.values()))}
    except Exception:  # noqa: BLE001 -- the facts read after says what vCenter would not
        return None
    left = sorted(name for name, key in stores.items() if (state_folder() / f"{key}.json").exists())
    if not left:
        return None
    return (
        f"a run killed on this machine left SIOC changed on {', '.join(left)}, a datastore of this plan's VMs, and "
        f"this plan does not set it: run the plan that did again to put it back (its journal is in "
        f"{state_folder()}), or set it by hand and remove the journal"
    )


def journals_of(plan: Plan) -> list[dict]:
    """Return this machine's journals of datastores a run of ``plan`` left changed (none where it can't tell)."""
    folder = state_folder()
    found = []
    with contextlib.suppress(OSError):
        for path in sorted(folder.glob("*.json")):
            with contextlib.suppress(OSError, ValueError):
                journal = _read_json(path)
                if isinstance(journal, dict) and journal.get("output") == str(plan.output.resolve()):
                    found.append(journal)
    return found


def planned_changes(plan: Plan, order: list[tuple[int, Cell]]) -> list[str]:
    """Return the dry run's lines: the level changes, in the order the cells still to run will run."""
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
    if not lines:
        return [
            f"SIOC on {where}: no cell left to run; the run sets it only to put back what a run killed on this "
            "machine left changed there"
        ]
    head = (
        f"SIOC set through vCenter on {where}, before each cell whose level it does not have already: at the "
        f"{len(lines)} level changes below at most, on each datastore"
        + (" (adaptive rounds add their own)" if plan.adaptive else "")
        + "; first, whatever a run killed on this machine left changed there is put back"
    )
    return [head, *lines, f"then put back on {where} as vCenter had it, also after an interrupt"]
