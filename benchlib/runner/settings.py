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
import re
import secrets
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Collection, Iterator
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
    if threading.current_thread() is not threading.main_thread() or _HOLDING:
        yield  # a hold inside a hold: the outer one has the signals, and says what happens after it
        return
    _HOLDING.append(True)
    held: list[int] = []
    signals = (signal.SIGINT, signal.SIGTERM)
    before = {sig: signal.signal(sig, lambda number, _frame: held.append(number)) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        _HOLDING.clear()
        if held and again:
            raise KeyboardInterrupt


#: whether this process holds Ctrl-C and SIGTERM now (:func:`_signals_held`)
_HOLDING: list[bool] = []


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


class _Setting:
    """One setting a plan applies (``[vsphere] apply``): on which objects, how it is read, changed and said.

    ``find`` returns the objects by name (managed objects: their ids key this machine's locks and journals);
    a state is what a journal keeps (JSON); ``extra`` is what a journal needs besides to put it back.
    """

    setting = ""
    what = ""  # said: "SIOC", "the controller of the disk under test"
    noun = ""  # what it is set on: "datastore", "VM"

    def __init__(self, owner: AppliedSettings, factor: str) -> None:
        self.owner, self.factor = owner, factor
        self.objects: dict[str, Any] = {}

    def find(self) -> dict[str, Any]:
        raise NotImplementedError

    def state(self, name: str) -> Any:
        raise NotImplementedError

    def want(self, level: str) -> Any:
        raise NotImplementedError

    def said(self, state: Any) -> str:
        return str(state)

    def target(self, name: str, cell: Cell) -> Any:
        """Return what ``name`` must have for ``cell``: its level of the setting's factor."""
        return self.want(cell.levels[self.factor])

    def valid(self, state: object) -> bool:
        raise NotImplementedError

    def change(self, name: str, want: Any, *, back: bool) -> tuple[Any, str]:
        """Bring ``name`` to ``want`` (``back``: as the run found it); return it read back and how (said)."""
        raise NotImplementedError

    def extra(self, name: str) -> dict:
        return {}

    def moved(self, name: str, original: Any) -> bool:
        """Whether ``name`` is not as the run found it (``original``: its state then)."""
        return self.state(name) != original

    def resume(self, name: str, journal: dict) -> None:
        """Take what a killed run's journal says is needed to put ``name`` back."""

    def ident(self, name: str) -> str:
        """Return the object's own id (vCenter's managed object id), whatever its name is spelled."""
        return self.objects[name]._moId

    def ready(self, name: str) -> None:
        """Wait until ``name`` can be measured after a change (Ctrl-C is not held here)."""


class _Sioc(_Setting):
    """Storage I/O Control, on the datastores the VMs' disks under test are on (ConfigureDatastoreIORM_Task)."""

    setting, what, noun = "sioc", "SIOC", "datastore"

    def find(self) -> dict[str, Any]:
        vsphere = self.owner.vsphere
        found: dict[str, Any] = {}
        for vm, (label, datastore) in self.owner.disks().items():
            if datastore.name not in vsphere.datastores:
                raise SettingsError(
                    f"VM {vm}'s disk under test ({label}) is on {datastore.name}, not on the datastores [vsphere] "
                    f"apply changes ({', '.join(vsphere.datastores)}): name its datastore"
                )
            other = found.setdefault(datastore.name, datastore)
            if other._moId != datastore._moId:  # two datacenters' datastores of one name: one would go unset
                raise SettingsError(
                    f"the VMs' disks under test are on two datastores named {datastore.name} (one per datacenter or "
                    "folder): benchlib cannot tell them apart by the plan's name; give them names of their own"
                )
        idle = [name for name in vsphere.datastores if name not in found]
        if idle:
            raise SettingsError(
                f"[vsphere] datastores names {', '.join(idle)}, which holds no VM's disk under test: benchlib changes "
                "only what a cell measures; leave it out"
            )
        return found

    def state(self, name: str) -> bool:
        from benchlib.vsphere import sioc_of

        return sioc_of(self.objects[name])

    def want(self, level: str) -> bool:
        from benchlib.vsphere import sioc_level

        on = sioc_level(level)
        assert on is not None  # noqa: S101 -- the plan's levels were checked (plan._applied)
        return on

    def said(self, state: Any) -> str:
        return _said(bool(state))

    def valid(self, state: object) -> bool:
        return isinstance(state, bool)

    def change(self, name: str, want: Any, *, back: bool) -> tuple[Any, str]:
        from benchlib.vsphere import set_sioc_of

        return set_sioc_of(self.owner.service, self.objects[name], want), ""


class _DiskIO(_Setting):
    """Each named VM's test disk's shares and IOPS limit, held through the run (``[vsphere] shares``, ``limits``).

    Not a factor: the same for every cell, set before the first and checked before each (a disk moved to another
    controller keeps its allocation, and this says so). Set by an edit of the disk (``ReconfigVM_Task``), the VM
    left running; what the plan does not name (a VM's limit where only its shares are named) is kept.
    """

    setting, what, noun = "disk_io", "the shares and IOPS limit of the disk under test", "VM"

    def __init__(self, owner: AppliedSettings, factor: str) -> None:
        super().__init__(owner, factor)
        self.file: dict[str, str] = {}  # VM -> its disk under test's file: the disk, wherever it hangs

    def find(self) -> dict[str, Any]:
        from benchlib.vsphere import disk_file

        named = set(self.owner.vsphere.shares) | set(self.owner.vsphere.limits)
        found = {}
        for vm, (label, _datastore) in self.owner.disks().items():
            if vm in named:
                found[vm], self.file[vm] = self.owner.vms[vm], disk_file(self.owner.vms[vm], label)
        return found

    def state(self, name: str) -> dict:
        from benchlib.vsphere import disk_io_of

        return disk_io_of(self.objects[name], self.file[name])

    def target(self, name: str, cell: Cell) -> dict:
        from benchlib.vsphere import SHARES_LEVELS

        want = dict(self.owner.original[(self.setting, name)])  # as this run found it, a killed run's put back
        shares = self.owner.vsphere.shares.get(name)
        if isinstance(shares, str):
            want |= {"level": shares, "shares": SHARES_LEVELS[shares]}
        elif shares is not None:
            want |= {"level": "custom", "shares": shares}
        if name in self.owner.vsphere.limits:
            want["limit"] = self.owner.vsphere.limits[name]
        return want

    def said(self, state: Any) -> str:
        return _disk_io_said(state)

    def valid(self, state: object) -> bool:
        return (
            isinstance(state, dict)
            and isinstance(state.get("level"), str)
            and all(isinstance(state.get(k), int) and not isinstance(state.get(k), bool) for k in ("shares", "limit"))
        )

    def ident(self, name: str) -> str:
        return f"{self.objects[name]._moId}-disk-io"  # the VM's controller journal is its own

    def extra(self, name: str) -> dict:
        return {"file": self.file[name]}  # which of the VM's disks: another plan may test another

    def resume(self, name: str, journal: dict) -> None:
        left = journal.get("file")
        if left is not None and left != self.file[name]:
            raise SettingsError(
                f"a run killed on this machine left the shares and IOPS limit of VM {name}'s disk {left} changed "
                f"(it had {_disk_io_said(journal.get('original'))}), and this plan tests {self.file[name]}: run the "
                "plan that changed it again to put it back, or set it by hand and remove its journal in "
                f"{state_folder()}"
            )

    def change(self, name: str, want: Any, *, back: bool) -> tuple[Any, str]:
        from benchlib.vsphere import set_disk_io_of

        return set_disk_io_of(self.objects[name], self.file[name], want), ""


class _SiocThreshold(_Sioc):
    """SIOC's congestion threshold, on the datastores SIOC is set on: milliseconds, or a percent of peak."""

    setting, what, noun = "sioc_threshold", "the SIOC congestion threshold", "datastore"

    def state(self, name: str) -> dict:
        from benchlib.vsphere import threshold_of

        return threshold_of(self.objects[name])

    def want(self, level: str) -> dict:
        from benchlib.vsphere import threshold_level

        threshold = threshold_level(level)
        assert threshold is not None  # noqa: S101 -- the plan's levels were checked (plan._applied)
        return threshold

    def said(self, state: Any) -> str:
        from benchlib.vsphere import threshold_said

        return threshold_said(state)

    def valid(self, state: object) -> bool:
        from benchlib.vsphere import threshold_level

        if not isinstance(state, dict):
            return False
        level = f"{state.get('percent')}%" if state.get("mode") == "automatic" else str(state.get("ms"))
        return threshold_level(level) == state

    def ident(self, name: str) -> str:
        return f"{self.objects[name]._moId}-threshold"  # the datastore's SIOC journal is its own

    def change(self, name: str, want: Any, *, back: bool) -> tuple[Any, str]:
        from benchlib.vsphere import set_threshold_of

        return set_threshold_of(self.owner.service, self.objects[name], want), ""


def _disk_io_said(state: object) -> str:
    """Say a disk's allocation: ``2000 shares and a limit of 500 IOPS``, ``1000 shares (normal) and no IOPS limit``."""
    if not isinstance(state, dict):
        return str(state)
    limit = state.get("limit")
    limited = isinstance(limit, int) and limit >= 0
    level = "" if state.get("level") == "custom" else f" ({state.get('level')})"
    return f"{state.get('shares')} shares{level} and " + (f"a limit of {limit:,} IOPS" if limited else "no IOPS limit")


class _Controller(_Setting):
    """The controller each VM's disk under test hangs on: the VM stopped, the disk moved, the VM started.

    Only a VM whose disks are its OS disk and the disk under test (named), never one this machine runs on.
    The disk is known by its file once found, whatever vCenter labels it after a move. A level of the
    controller type the disk was found on is always that controller and unit (a disk beside the OS disk
    stays beside it); another type gets a controller of its own. A controller benchlib added is removed
    when the disk leaves it, and at the put-back any controller the VM did not have before, left empty; the
    one the disk was on is kept. A VM is started again whenever it was on, whatever failed in between.
    """

    setting, what, noun = "controller", "the controller of the disk under test", "VM"

    def __init__(self, owner: AppliedSettings, factor: str) -> None:
        super().__init__(owner, factor)
        self.original: dict[str, dict] = {}  # VM -> where its disk was, whether it was on, its controllers
        self.added: dict[str, frozenset[int]] = {}
        self.file: dict[str, str] = {}  # VM -> its disk under test's file: the disk, however labelled
        self.answering: set[str] = set()  # VMs whose fio server answered before their change

    def find(self) -> dict[str, Any]:
        from pyVmomi import vim

        from benchlib.vsphere import boot_disks, disk_file

        hosts = {vm: host for host, vm in self.owner.vsphere.vms.items()}
        found = {}
        for vm, (label, _datastore) in self.owner.disks().items():
            if hosts[vm] == "local":
                raise SettingsError(
                    f"VM {vm} is this plan's host local: benchlib would stop the machine it runs on to move its "
                    "disk; run fio on the VM as a server ([hosts] servers) and benchlib from another machine"
                )
            obj = self.owner.vms[vm]
            disks = [d for d in obj.config.hardware.device if isinstance(d, vim.vm.device.VirtualDisk)]
            if len(disks) == 1 or label in boot_disks(obj):
                raise SettingsError(
                    f"VM {vm}'s disk under test ({label}) is "
                    + (
                        "its only disk"
                        if len(disks) == 1
                        else "a disk it boots from (Hard disk 1, or in its boot order)"
                    )
                    + ": benchlib moves only a disk that is under test alone; give the VM a test disk and name it "
                    "([vsphere] disk)"
                )
            if len(disks) > 2:  # noqa: PLR2004 -- the OS disk and the disk under test
                raise SettingsError(
                    f"VM {vm} has {len(disks)} disks: benchlib stops and starts only a VM that holds its OS disk and "
                    "the disk under test, nothing else a power cycle could cost"
                )
            if obj.runtime.powerState == "suspended":
                raise SettingsError(f"VM {vm} is suspended: stopping it would lose what it holds; resume it first")
            found[vm], self.file[vm] = obj, disk_file(obj, label)
        return found

    def state(self, name: str) -> str:
        from benchlib.vsphere import place_of

        return place_of(self.objects[name], self.file[name]).controller

    def want(self, level: str) -> str:
        from benchlib.vsphere import controller_level

        controller = controller_level(level)
        assert controller is not None  # noqa: S101 -- the plan's levels were checked (plan._applied)
        return controller

    def valid(self, state: object) -> bool:
        return isinstance(state, str)

    def extra(self, name: str) -> dict:
        if name not in self.original:
            from pyVmomi import vim

            from benchlib.vsphere import place_of

            vm = self.objects[name]
            place = place_of(vm, self.file[name])
            controllers = [d.key for d in vm.config.hardware.device if isinstance(d, vim.vm.device.VirtualController)]
            self.original[name] = {
                "key": place.key,
                "unit": place.unit,
                "controller": place.controller,
                "on": vm.runtime.powerState == "poweredOn",
                "controllers": sorted(controllers),
            }
        return {
            "place": self.original[name],
            "added": sorted(self.added.get(name, frozenset())),
            "file": self.file[name],
        }

    def _strays(self, name: str) -> frozenset[int]:
        """Return the controllers benchlib added: as recorded, and any the VM did not have before, left empty."""
        from pyVmomi import vim

        had = set(self.original[name].get("controllers", []))
        devices = self.objects[name].config.hardware.device
        holding = {getattr(d, "controllerKey", None) for d in devices}
        new = {
            d.key
            for d in devices
            if isinstance(
                d,
                vim.vm.device.VirtualSCSIController
                | vim.vm.device.VirtualNVMEController
                | vim.vm.device.VirtualSATAController,
            )
            and had
            and d.key not in had
            and d.key not in holding
        }
        return self.added.get(name, frozenset()) | new

    def moved(self, name: str, original: Any) -> bool:
        from benchlib.vsphere import place_of

        had = self.original.get(name)
        if had is None:  # nothing moved yet: where it was is read before the first move
            return False
        vm = self.objects[name]
        place = place_of(vm, self.file[name])
        off = had["on"] and vm.runtime.powerState != "poweredOn"  # stopped by a run that failed or was killed
        return off or bool(self._strays(name)) or (place.key, place.unit) != (had["key"], had["unit"])

    def resume(self, name: str, journal: dict) -> None:
        place, added, file = journal.get("place"), journal.get("added"), journal.get("file", self.file.get(name))
        if not (
            isinstance(place, dict)
            and all(isinstance(place.get(k), int) and not isinstance(place.get(k), bool) for k in ("key", "unit"))
            and isinstance(place.get("on"), bool)
            and isinstance(added, list)
            and all(isinstance(k, int) for k in added)
            and isinstance(file, str)
        ):
            raise ValueError("not a journal benchlib wrote")
        self.original[name], self.added[name], self.file[name] = place, frozenset(added), file

    def change(self, name: str, want: Any, *, back: bool) -> tuple[Any, str]:
        from benchlib.runner.execute import reachable
        from benchlib.vsphere import Place, move_disk, power_off, power_on

        vm = self.objects[name]
        self.extra(name)  # where it was, before anything moves
        if not back and reachable(self._host(name), self.owner.plan.port) is None:
            self.answering.add(name)  # its fio server answered: it must again before the cell
        original = self.original[name]
        home = Place(str(original.get("controller", want)), original["key"], original["unit"])
        to = home if back or want == home.controller else None  # the level it was found at: where it was
        added = self._strays(name) if back else self.added.get(name, frozenset())
        stopped = power_off(vm)
        try:
            place, self.added[name] = move_disk(vm, self.file[name], want, to=to, added=added)
        finally:  # started again whatever failed: a cell needs it, and a put-back leaves it as it was
            if not back or original["on"]:
                power_on(vm)
        return place.controller, f"VM {stopped}, started again" if stopped else "VM was off"

    def _host(self, name: str) -> str:
        return next(h for h, vm in self.owner.vsphere.vms.items() if vm == name)

    def ready(self, name: str) -> None:
        """Wait for the VM's fio server to answer after its start, where it answered before (the guest boots).

        A host down before the change is one the run counts as down already: it is not waited for.
        """
        from benchlib.runner.execute import reachable

        if name not in self.answering:
            return
        self.answering.discard(name)
        host = self._host(name)
        deadline = time.monotonic() + BOOT_S
        while (why := reachable(host, self.owner.plan.port)) is not None:
            if time.monotonic() > deadline:
                raise SettingsError(
                    f"VM {name} was started on its new controller and its fio server did not answer in {BOOT_S} s "
                    f"({why}); its guest may lack a driver for it. Nothing ran on it; the run puts it back"
                )
            time.sleep(1)


#: a Round Robin limit as a journal keeps it
RR_STATE = re.compile(r"iops=[0-9]{1,9}|bytes=[0-9]{1,12}|default")


class _RoundRobin(_Setting):
    """The Round Robin IO operation limit of the plan's LUN, on each ESXi host of ``[esxi]``, through esxcli.

    A state is the device's limit as esxcli says it: ``iops=1``, ``default`` (Round Robin's own, 1,000 I/Os)
    or ``bytes=10485760``; each is put back with its own ``--type``. The LUN must be on Round Robin on every
    host, and not on its latency policy; the path policy is never changed.
    """

    setting, what, noun = "rr_iops", "the Round Robin IO operation limit", "host"

    def find(self) -> dict[str, Any]:
        plan = self.owner.plan
        assert plan.esxi is not None and plan.vsphere is not None  # noqa: S101 -- plan._round_robin_needs
        self.device = str(plan.vsphere.device)
        return dict.fromkeys(plan.esxi.hosts)

    def ident(self, name: str) -> str:
        return _lun_ident(name, self.device)

    def _esxcli(self, host: str, esxcli: str) -> str:
        from benchlib.runner.execute import _shell

        assert self.owner.plan.esxi is not None  # noqa: S101 -- plan._round_robin_needs
        line = self.owner.plan.esxi.line(host, esxcli)
        try:
            done = _shell(line, timeout=120, own_session=True)
        except subprocess.TimeoutExpired:
            raise SettingsError(f"{esxcli.split(' --', 1)[0]} on ESXi host {host} did not finish in 120 s") from None
        if done.returncode != 0:
            raise SettingsError(
                f"{esxcli.split(' --', 1)[0]} on ESXi host {host} exited with {done.returncode}: "
                f"{(done.stderr or done.stdout).strip()[-300:]}"
            )
        return done.stdout

    def state(self, name: str) -> str:
        from benchlib.esxcli import parse_nmp_device_list

        text = self._esxcli(name, f"esxcli storage nmp device list --device={self.device}")
        lun = next((d for d in parse_nmp_device_list(text) if d["device"] == self.device), None)
        if lun is None:
            raise SettingsError(f"ESXi host {name} lists no device {self.device} (esxcli storage nmp device list)")
        if lun["path_policy"] != "VMW_PSP_RR":
            raise SettingsError(
                f"{self.device} is on {lun['path_policy']} on ESXi host {name}, not Round Robin (VMW_PSP_RR): "
                "benchlib sets only the limit, never the path policy; set the policy by hand"
            )
        kind = lun["rr_limit_type"]
        if kind == "iops":
            return f"iops={lun['rr_iops_limit']}"
        if kind == "bytes":
            return f"bytes={lun['rr_bytes_limit']}"
        if kind == "latency":  # its own settings (evaluation time, sampled I/Os) could not be put back as they were
            raise SettingsError(
                f"{self.device} on ESXi host {name} uses Round Robin's latency policy: benchlib could not put its "
                "settings back as they are; set an IO operation limit by hand first, or run the levels by hand"
            )
        return "default"

    def want(self, level: str) -> str:
        return f"iops={int(level)}"

    def valid(self, state: object) -> bool:
        return isinstance(state, str) and RR_STATE.fullmatch(state) is not None

    def change(self, name: str, want: Any, *, back: bool) -> tuple[Any, str]:
        kind, _, value = str(want).partition("=")
        options = f"--type={kind}" + (f" --{kind}={int(value)}" if value else "")
        self._esxcli(name, f"esxcli storage nmp psp roundrobin deviceconfig set --device={self.device} {options}")
        return self.state(name), ""


#: how long a VM started after its disk moved may take to boot and start its fio server
BOOT_S = 600
#: the settings a plan may apply, by the plan's name
KINDS: dict[str, type[_Setting]] = {
    "sioc": _Sioc, "controller": _Controller, "rr_iops": _RoundRobin, "sioc_threshold": _SiocThreshold,
}  # fmt: skip
#: what a plan holds through the run, by no factor (``[vsphere] shares`` and ``limits``)
HELD = "disk_io"


class AppliedSettings:
    """The settings of one run of a plan: brought to each cell's levels, journalled, recorded, put back."""

    def __init__(self, plan: Plan, service: Any) -> None:
        assert plan.vsphere is not None and plan.vsphere.applies  # noqa: S101 -- only for a plan that applies
        self.plan, self.service = plan, service
        self.vsphere = plan.vsphere
        # the controller first: its change stops and starts the VMs; SIOC and the Round Robin limit after it,
        # then each disk's shares and limit (checked after a move)
        order = sorted(plan.vsphere.apply, key=lambda s: s != "controller")
        self.kinds = [KINDS[s](self, plan.vsphere.apply[s]) for s in order]
        if plan.vsphere.shares or plan.vsphere.limits:
            self.kinds.append(_DiskIO(self, ""))
        self.path = plan.output / SETTINGS_FILE
        self.journals: dict[tuple[str, str], Path] = {}
        self.original: dict[tuple[str, str], Any] = {}
        self.record: dict = {"factors": dict(plan.vsphere.apply), **_held(plan), "runs": []}
        self.run: dict | None = None
        self.held: list[int] = []
        self.vms: dict[str, Any] = {}
        self._disks: dict | None = None

    def disks(self) -> dict:
        """Each VM's disk under test (label, datastore), read once (:func:`benchlib.vsphere.disks_under_test`)."""
        from benchlib.vsphere import VSphereError, disks_under_test, vms_named

        if self._disks is None:
            names = list(self.vsphere.vms.values())
            try:
                self._disks = disks_under_test(self.service, names, self.vsphere.disk)
                self.vms = vms_named(self.service, names)
            except VSphereError as exc:  # a VM not there, a name twice, a disk not told: the plan's to mend
                raise SettingsError(str(exc)) from None
            except Exception as exc:  # noqa: BLE001 -- whatever vCenter or the network raised, said once
                raise SettingsError(f"finding the VMs' test disks through vCenter failed ({_first(exc)})") from None
        return self._disks

    def _each(self) -> Iterator[tuple[_Setting, str]]:
        for kind in self.kinds:
            for name in kind.objects:
                yield kind, name

    def start(self) -> None:
        """Find the objects, lock them, put back what a killed run left, record what they have now."""
        for kind in self.kinds:
            try:
                kind.objects = kind.find()
            except SettingsError:
                raise
            except Exception as exc:  # noqa: BLE001 -- whatever vCenter or the network raised; nothing changed yet
                raise SettingsError(f"finding what {kind.what} is set on failed ({_first(exc)})") from None
        self._lock()
        self._read_record()
        self.run = {"server": self.vsphere.server, "host": socket.gethostname(), "started": _now(), "original": {}}
        self.run.update(changes=[], restored=None)  # a killed run's put back first, as changes of no cell
        self.record["runs"].append(self.run)
        try:
            with _signals_held():
                for kind, name in self._each():
                    self._put_back_left(kind, name)
            for kind, name in self._each():
                now = self.original[(kind.setting, name)] = self._now_of(kind, name)
                self.run["original"].setdefault(name, {})[kind.setting] = now
        except SettingsError as exc:  # recorded as refused, and nothing of this run to put back
            self.run["refused"] = str(exc)
            self._write_record()
            self.run = None
            raise
        self._write_record()

    def bring(self, cell: Cell) -> None:
        """Bring every named object to ``cell``'s levels where it differs; raise where it did not take.

        Every VM is changed first, then each is waited for (their guests boot at once).
        """
        changed = []
        for kind, name in self._each():
            want = kind.target(name, cell)
            now = self._now_of(kind, name)
            if now != want:
                got = self._set(cell.key, kind, name, now, want)
                if got != want:
                    raise SettingsError(
                        f"before {cell.key}: vCenter reports {kind.what} {kind.said(got)} on {name} after setting it "
                        f"{kind.said(want)}; the cell was not run"
                    )
                changed.append((kind, name))
        for kind, name in changed:
            kind.ready(name)

    def restore(self) -> None:
        """Put everything back as this run found it; a second Ctrl-C waits for it (the run is ending)."""
        if self.run is None or self.run["restored"] is not None:
            return
        failed = []
        with _signals_held(again=False):
            for kind, name in self._each():  # each one tried, whatever another did
                original = self.original[(kind.setting, name)]
                try:
                    if self._vcenter(
                        lambda k=kind, n=name, o=original: k.moved(n, o), f"reading {kind.what} on {name}"
                    ):
                        self._set(None, kind, name, self._now_of(kind, name), original, back=True)
                except SettingsError as exc:
                    failed.append(str(exc))
                    continue
                self.journals[(kind.setting, name)].unlink(missing_ok=True)
            if not failed:
                self.run["restored"] = _now()
            self._write_record()
        if failed:
            raise SettingsError("putting back failed: " + " | ".join(failed))

    def close(self) -> None:
        """Let other runs on this machine set these objects again."""
        for fd in self.held:
            os.close(fd)  # closing the file lets its lock go
        self.held = []

    def _lock(self) -> None:
        """Hold this machine's lock on each object, by vCenter's id and the object's (however spelled)."""
        instance = self._vcenter(lambda: _instance(self.service, self.vsphere.server), "reading vCenter's id")
        folder = state_folder()
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for kind, name in self._each():
                key = _key(instance, kind.ident(name))
                self.journals[(kind.setting, name)] = folder / f"{key}.json"
                fd = os.open(folder / f"{key}.lock", os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    raise SettingsError(
                        f"another benchlib run on this machine is setting {kind.what} on {name}; wait for it to end"
                    ) from None
                self.held.append(fd)
        except OSError as exc:
            self.close()
            raise SettingsError(
                f"cannot keep what benchlib changes in {folder} ({exc.strerror}); set XDG_CACHE_HOME to a folder "
                "of yours benchlib may write"
            ) from None

    def _put_back_left(self, kind: _Setting, name: str) -> None:
        """Put back what a run killed on this machine left changed on ``name``, where nothing moved since."""
        journal = self.journals[(kind.setting, name)]
        if not journal.exists() and not journal.is_symlink():
            return
        try:
            left = _read_json(journal)
            assert isinstance(left, dict) and kind.valid(left["original"])  # noqa: S101 -- caught below
            states = [s for s in (left["now"], left.get("pending")) if s is not None]
            assert states and all(kind.valid(s) for s in states)  # noqa: S101 -- caught below
            kind.resume(name, left)
        except (OSError, ValueError, KeyError, TypeError, AssertionError):
            raise SettingsError(
                f"{journal}: benchlib's note of what it changed on {name} cannot be read; make sure "
                f"{kind.what} is as it should be, then remove the file"
            ) from None
        now = self._now_of(kind, name)
        if now not in states:
            raise SettingsError(
                f"a run killed on this machine left {kind.what} {' or '.join(map(kind.said, states))} on {name}, "
                f"and vCenter has it {kind.said(now)}: someone set it since. It had {kind.said(left['original'])} "
                f"before that run; make sure it is as it should be, then remove {journal}"
            )
        if self._vcenter(lambda: kind.moved(name, left["original"]), f"reading {kind.what} on {name}"):
            self.original[(kind.setting, name)] = left["original"]
            self._set(None, kind, name, now, left["original"], back=True)
        journal.unlink(missing_ok=True)

    def _now_of(self, kind: _Setting, name: str) -> Any:
        return self._vcenter(lambda: kind.state(name), f"reading {kind.what} on {name}")

    def _set(self, cell: str | None, kind: _Setting, name: str, before: Any, want: Any, *, back: bool = False) -> Any:
        """Change one object's setting, journalled before and after; record the change; return it read back."""
        key = (kind.setting, name)
        note = {
            "setting": kind.setting,
            kind.noun.lower(): name,
            "original": self.original.get(key, before),
            "output": str(self.plan.output.resolve()),
        }
        with _signals_held():
            extra = self._vcenter(lambda: kind.extra(name), f"reading {kind.what} on {name}")
            _write_json(self.journals[key], {**note, **extra, "now": before, "pending": want})
            got, how = self._vcenter(lambda: kind.change(name, want, back=back), f"setting {kind.what} on {name}")
            _write_json(self.journals[key], {**note, **kind.extra(name), "now": got, "pending": None})
            change = {"time": _now(), "cell": cell, kind.noun.lower(): name, "setting": kind.setting}
            change |= {"from": before, "to": got} | ({"how": how} if how else {})
            if self.run is not None:
                self.run["changes"].append(change)
                self._write_record()
        return got

    def _vcenter(self, call: Any, doing: str) -> Any:
        """Call vCenter (or esxcli); any failure (a fault, a lost session, the network) is one SettingsError."""
        try:
            return call()
        except SettingsError:
            raise
        except Exception as exc:  # noqa: BLE001 -- whatever vCenter or the network raised, said once with the way out
            raise SettingsError(
                f"{doing} failed ({_first(exc)}); benchlib's journal in {state_folder()} keeps what "
                "each had: the next run puts it back, or set it by hand"
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
        held = _held(self.plan).get("held", {})
        ran = [r for r in record["runs"] if isinstance(r, dict) and not r.get("refused")]
        if ran and record.get("held", {}) != held:  # the study's [shares] would judge them wrongly
            raise SettingsError(
                f"{self.path}: this study's runs were made with other test disk shares or limits "
                f"({record.get('held') or 'none set'}) than this plan holds ({held or 'none'}): give this plan an "
                "output folder of its own ([run] output), so that each study's runs had the shares it says"
            )
        self.record = {**record, "factors": dict(self.vsphere.apply), **_held(self.plan)}

    def _write_record(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _write_json(self.path, self.record)


def _held(plan: Plan) -> dict:
    """Return what the record says a plan holds through its run: each VM's test disk's shares and limit."""
    vsphere = plan.vsphere
    if vsphere is None or not (vsphere.shares or vsphere.limits):
        return {}
    return {"held": {"shares": dict(vsphere.shares), "limits": dict(vsphere.limits)}}


def _instance(service: Any, server: str) -> str:
    """Return vCenter's own id (its instance UUID; the plan's address where it has none)."""
    return getattr(service.RetrieveContent().about, "instanceUuid", None) or server


def _key(instance: str, ident: str) -> str:
    """Return an object's name in this machine's locks and journals: vCenter's id and the object's."""
    return "".join(c if c.isalnum() or c in "-." else "_" for c in f"{instance}-{ident}")


def _lun_ident(host: str, device: str) -> str:
    """Return a LUN's id on one ESXi host, as locks and journals name it."""
    return f"esxi-{host}-{device}"


def left_on_vms(plan: Plan, service: Any, handled: Collection[Path] = ()) -> str | None:
    """Say where a run killed on this machine left a setting changed on the plan's VMs or their datastores.

    None: nowhere. Its cells would run on a setting nobody put back. ``handled``: the journals this plan's own
    settings put back (:attr:`AppliedSettings.journals`), left out.
    """
    from benchlib.vsphere import vm_datastores, vms_named

    if plan.vsphere is None or not state_folder().is_dir():
        return None
    try:
        instance = _instance(service, plan.vsphere.server)
        names = list(plan.vsphere.vms.values())
        objects = {}
        for ds in vm_datastores(service, names):
            objects |= {
                f"datastore {ds.name}": ds._moId,
                f"datastore {ds.name}'s SIOC threshold": f"{ds._moId}-threshold",
            }
        for name, vm in vms_named(service, names).items():
            objects |= {f"VM {name}": vm._moId, f"VM {name}'s test disk": f"{vm._moId}-disk-io"}
    except Exception:  # noqa: BLE001 -- the facts read after says what vCenter would not
        return None
    if plan.esxi is not None and plan.vsphere.device:
        objects |= {f"LUN {plan.vsphere.device} on {h}": _lun_ident(h, plan.vsphere.device) for h in plan.esxi.hosts}
    journals, handled = (
        {name: state_folder() / f"{_key(instance, key)}.json" for name, key in objects.items()},
        set(handled),
    )
    left = sorted(name for name, path in journals.items() if path.exists() and path not in handled)
    if not left:
        return None
    return (
        f"a run killed on this machine left a setting changed on {', '.join(left)} of this plan's VMs, and this "
        f"plan does not set it: run the plan that did again to put it back (its journal is in {state_folder()}), "
        "or set it by hand and remove the journal"
    )


def journals_of(plan: Plan) -> list[dict]:
    """Return this machine's journals of objects a run of ``plan`` left changed (none where it can't tell)."""
    folder = state_folder()
    found = []
    with contextlib.suppress(OSError):
        for path in sorted(folder.glob("*.json")):
            with contextlib.suppress(OSError, ValueError):
                journal = _read_json(path)
                if isinstance(journal, dict) and journal.get("output") == str(plan.output.resolve()):
                    found.append(journal)
    return found


def journal_said(journal: dict) -> str:
    """Say what a journal says an object had before a run changed it (``LocalDS_0 SIOC on``)."""
    from benchlib.vsphere import threshold_said

    setting = journal.get("setting", "sioc")
    name = journal.get("datastore") or journal.get("vm") or journal.get("host")
    had = journal.get("original")
    said = {"sioc": f"SIOC {_said(bool(had))}", "controller": f"disk on {had}", "rr_iops": f"Round Robin {had}"}
    said[HELD] = f"test disk with {_disk_io_said(had)}"
    said["sioc_threshold"] = f"SIOC congestion threshold {threshold_said(had)}"
    return f"{name} {said.get(str(setting), had)}"


def _held_said(plan: Plan) -> str:
    """Say what a plan holds through its run: ``the test disk of vm1 at 2000 shares, of vm2 at ...``."""
    vsphere = plan.vsphere
    if vsphere is None or not (vsphere.shares or vsphere.limits):
        return ""
    each = []
    for vm in dict.fromkeys([*vsphere.shares, *vsphere.limits]):
        parts = [f"{vsphere.shares[vm]} shares"] if vm in vsphere.shares else []
        limit = vsphere.limits.get(vm)
        parts += [] if limit is None else ["no IOPS limit" if limit < 0 else f"a limit of {limit:,} IOPS"]
        each.append(f"{vm} with {' and '.join(parts)}")
    return "the test disk of " + ", of ".join(each)


def _levels_said(plan: Plan, cell: Cell) -> str:
    """Say the settings a cell's levels ask for: ``disk on NVMe, SIOC off``."""
    from benchlib.vsphere import controller_level, sioc_level, threshold_level, threshold_said

    apply, said = plan.vsphere.apply if plan.vsphere else {}, []
    if "controller" in apply:
        said.append(f"disk on {controller_level(cell.levels[apply['controller']])}")
    if "sioc" in apply:
        said.append(f"SIOC {_said(bool(sioc_level(cell.levels[apply['sioc']])))}")
    if "rr_iops" in apply:
        said.append(f"Round Robin limit {int(cell.levels[apply['rr_iops']])}")
    if "sioc_threshold" in apply:
        wanted = threshold_level(cell.levels[apply["sioc_threshold"]])
        said.append(f"SIOC congestion threshold {threshold_said(wanted)}")
    return ", ".join(said)


def _objects_said(plan: Plan) -> list[str]:
    """Say what the factors of ``[vsphere] apply`` set, and on which objects."""
    apply, objects = plan.vsphere.apply if plan.vsphere else {}, []
    if "controller" in apply:
        objects.append(f"the test disk's controller on {', '.join(plan.vsphere.vms.values())}")
    if "sioc" in apply:
        objects.append(f"SIOC on {', '.join(plan.vsphere.datastores)}")
    if "sioc_threshold" in apply:
        objects.append(f"SIOC's congestion threshold on {', '.join(plan.vsphere.datastores)}")
    if "rr_iops" in apply and plan.esxi is not None:
        objects.append(f"the Round Robin limit of {plan.vsphere.device} on {', '.join(plan.esxi.hosts)} (esxcli)")
    return objects


def planned_changes(plan: Plan, order: list[tuple[int, Cell]]) -> list[str]:
    """Return the dry run's lines: the level changes, in the order the cells still to run will run."""
    if plan.vsphere is None or not plan.vsphere.applies:
        return []
    apply, grouped = plan.vsphere.apply, plan.grouped_by
    held = _held_said(plan)
    if not apply:
        if not order:
            return [f"{held}: no cell left to run; the run sets it only to put back what a killed run left"]
        return [f"{held}: set before the first cell, checked before each, then put back as vCenter had it"]
    lines, before = [], None
    for repetition, cell in order:
        want = _levels_said(plan, cell)
        if want != before:
            lines.append(f"  before {cell.key} r{repetition}: {want}")
            before = want
    objects = _objects_said(plan) + ([f"{held} (held through the run)"] if held else [])
    if not lines:
        return [
            f"{' and '.join(objects)}: no cell left to run; the run changes them only to put back what a run killed "
            "on this machine left changed there"
        ]
    head = (
        f"{' and '.join(objects)} set, before each cell whose level they do not have already: at "
        f"the {len(lines)} level changes below at most"
        + (" (adaptive rounds add their own)" if plan.adaptive else "")
        + "; first, whatever a run killed on this machine left changed there is put back"
    )
    if grouped:
        levels = [cell.levels[grouped] for _, cell in order]
        cycles = sum(i == 0 or level != levels[i - 1] for i, level in enumerate(levels))
        head += (
            f". A controller change stops each VM (its guest shut down, or powered off without VMware Tools), moves "
            f"its test disk and starts it again: {cycles} power cycles of each VM at most, and one more to put it "
            f"back. The cells of each repetition run grouped by {grouped}, the groups in a random order"
        )
    return [head, *lines, "then put back as vCenter had it, also after an interrupt"]
