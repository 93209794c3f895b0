"""vSphere facts: what vCenter says about a study's VMs, read through its API (pyVmomi).

A study's ``controller``, ``sioc`` and multipath levels are what its author typed; this reads
what the VMs had: for each VM, every virtual disk with the controller it hangs on (LSI Logic
SAS, PVSCSI, NVMe ...), its bus and unit, its storage I/O allocation (shares, limit,
reservation) and datastore; the datastore's Storage I/O Control state where the API reports
it; the host's LUNs with their path selection policy, path count and queue depth; the VM's
vCPUs and memory. :func:`read_facts` returns them as plain data with the time they were read.

Credentials come from the environment (``BENCHLIB_VSPHERE_USER``, ``BENCHLIB_VSPHERE_PASSWORD``)
or a file named by ``BENCHLIB_VSPHERE_CREDENTIALS`` (TOML: ``user``, ``password``), never from
a plan or a study, and never written anywhere. TLS is verified unless the caller says the
server's certificate is self-signed (``insecure``); plain HTTP is taken only to a loopback
address (a simulator).
"""

from __future__ import annotations

import ipaddress
import os
import re
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import polars as pl

from benchlib.errors import BenchlibError
from benchlib.tomlfile import read_toml

#: the API's controller types, by the names engineers (and study.toml levels) use
CONTROLLERS = {
    "ParaVirtualSCSIController": "PVSCSI",
    "VirtualLsiLogicSASController": "LSI Logic SAS",
    "VirtualLsiLogicController": "LSI Logic Parallel",
    "VirtualBusLogicController": "BusLogic",
    "VirtualNVMEController": "NVMe",
    "VirtualAHCIController": "SATA",
    "VirtualIDEController": "IDE",
}
USER, PASSWORD, CREDENTIALS = "BENCHLIB_VSPHERE_USER", "BENCHLIB_VSPHERE_PASSWORD", "BENCHLIB_VSPHERE_CREDENTIALS"
#: the facts a study's levels are checked against: vCenter's (per VM) and esxcli's (per LUN, ``device``)
VCENTER_CHECKS, LUN_CHECKS = ("controller", "sioc", "sioc_threshold"), ("path_policy", "rr_iops")
CHECKS = VCENTER_CHECKS + LUN_CHECKS


class VSphereError(BenchlibError):
    """vCenter could not be reached or asked, or a VM the study names is not there."""


@dataclass(frozen=True)
class Server:
    """Where vCenter is: ``https://vc.example`` (TLS, port 443 unless given) or ``http://127.0.0.1:PORT``."""

    host: str
    port: int
    protocol: str

    @classmethod
    def parse(cls, text: str) -> Server:
        """Read a server address; plain HTTP only to a loopback address (a simulator), never over a network.

        A message about a bad address never repeats it whole: it may hold a password (``user:pw@``).
        """
        usage = "a vCenter address is https://host[:port] (or http://127.0.0.1:port)"
        text = text.strip()
        if "@" in text:  # before anything else: a message must not echo what may be a password
            raise VSphereError(f"credentials never go in the vCenter address (drop 'user@'); set {USER} and {PASSWORD}")
        parts = urlsplit(text if "://" in text else f"https://{text}")
        try:
            port = parts.port
        except ValueError:
            raise VSphereError(f"{parts.hostname or text}: the port is not a number from 1 to 65535; {usage}") from None
        host = parts.hostname
        if host and not host.isascii():  # a look-alike letter makes another server's name: write it as punycode
            raise VSphereError(
                f"{host.encode('ascii', 'backslashreplace').decode()}: a vCenter name in letters other than ASCII "
                "can look like another server's; give it in ASCII (its xn-- form) or by address"
            )
        if parts.scheme not in ("https", "http") or not host or any(c.isspace() for c in text) or port == 0:
            raise VSphereError(f"{text!r}: {usage}")
        if parts.path.strip("/") not in ("", "sdk"):
            raise VSphereError(f"{text!r}: {usage}; no path beyond /sdk")
        if parts.scheme == "http" and not _loopback(host):
            raise VSphereError(
                f"{host}: plain http would send the password in clear; use https:// "
                "(plain http only to 127.0.0.1, ::1 or localhost: a simulator)"
            )
        return cls(host, port or (443 if parts.scheme == "https" else 80), parts.scheme)

    @property
    def address(self) -> str:
        """``host:port``, as a facts file records the server it was read from (never with credentials)."""
        return f"{self.host}:{self.port}"


def _loopback(host: str) -> bool:
    """Tell whether a host is a loopback address as written.

    Resolving a name here and again at connect time would let a name that answers 127.0.0.1 now and
    another address then carry the password in clear.
    """
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def credentials() -> tuple[str, str]:
    """Return ``(user, password)`` from the environment, or the TOML file it names."""
    user, password = os.environ.get(USER), os.environ.get(PASSWORD)
    file = os.environ.get(CREDENTIALS)
    if file and not (user and password):
        path = Path(file).resolve()
        if not path.is_file():
            raise VSphereError(f"{file}: no such credentials file ({CREDENTIALS} names it)")
        inside = next((d for d in path.parents if (d / "study.toml").is_file() or (d / "plan.toml").is_file()), None)
        if inside is not None:  # a study's files are bundled and published: a password there leaks
            raise VSphereError(
                f"{file}: the credentials file is inside the study or plan folder {inside}; keep it outside "
                "(e.g. ~/.config/benchlib/vcenter.toml), where no bundle or ingest reads it"
            )
        try:
            data = read_toml(path, VSphereError)
        except OSError as exc:
            raise VSphereError(f"{file}: cannot read the credentials file ({exc.strerror})") from None
        user, password = user or data.get("user"), password or data.get("password")
    if not (isinstance(user, str) and user and isinstance(password, str) and password):
        raise VSphereError(
            f"no vCenter credentials: set {USER} and {PASSWORD}, or {CREDENTIALS} to a TOML file with user and "
            "password (kept outside the study: credentials never go in a plan or a study)"
        )
    return user, password


def connect(server: Server, *, insecure: bool = False) -> Any:
    """Log in to vCenter; the caller disconnects (:func:`pyVim.connect.Disconnect`)."""
    from pyVim.connect import SmartConnect
    from pyVmomi import vim

    user, password = credentials()
    # a verifying context always, unless told: pyVmomi's own default skips verification for loopback
    # names, and a lab's CA is trusted through SSL_CERT_FILE rather than by turning checks off
    context = ssl._create_unverified_context() if insecure else ssl.create_default_context()  # noqa: S323
    try:
        return SmartConnect(
            host=server.host,
            port=server.port,
            user=user,
            pwd=password,
            protocol=server.protocol,
            sslContext=context if server.protocol == "https" else None,
            disableSslCertValidation=insecure,
            httpConnectionTimeout=30,
        )
    except vim.fault.InvalidLogin:
        raise VSphereError(f"{server.host}: vCenter refused the user {user!r} and its password") from None
    except Exception as exc:  # noqa: BLE001 -- whatever a server that is not vCenter makes pyVmomi raise
        hint = (
            " (a lab's own CA: trust it with SSL_CERT_FILE=<its PEM file>; a self-signed certificate: --insecure)"
            if "CERTIFICATE" in str(exc).upper()
            else ""
        )
        said = str(exc).replace(password, "***") if password else str(exc)
        raise VSphereError(
            f"{server.host}:{server.port}: no vCenter answered there ({type(exc).__name__}: {said[:200]}){hint}"
        ) from None


def read_facts(service: Any, vms: list[str]) -> dict[str, Any]:
    """Return the facts of the VMs named (every VM when the list is empty), with the time they were read.

    Raises
    ------
    VSphereError
        When a VM named is not in the inventory (the message lists the ones that are).

    """
    from pyVmomi import vim

    found = _inventory(service, vim.VirtualMachine, vms, "VMs")
    return {
        "read_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "vms": [_vm_facts(found[name]) for name in (vms or sorted(found))],
    }


def _inventory(service: Any, kind: type, names: list[str], said: str) -> dict[str, Any]:
    """Return every object of ``kind`` in vCenter's inventory, by name.

    Raises where one of ``names`` is not there, or is the name of two objects (names are unique only within
    a datacenter or folder: the other datacenter's datastore of that name is never read or changed).
    """
    content = service.RetrieveContent()
    view = content.viewManager.CreateContainerView(content.rootFolder, [kind], True)
    try:
        items = list(view.view)
    finally:
        view.Destroy()
    found = {item.name: item for item in items}
    missing = [name for name in names if name not in found]
    if missing:
        known = ", ".join(sorted(found)[:20]) or "none"
        raise VSphereError(f"{said} not in vCenter's inventory: {', '.join(missing)} ({said} there: {known})")
    twice = sorted({name for name in names if sum(item.name == name for item in items) > 1})
    if twice:
        raise VSphereError(
            f"{said} named {', '.join(twice)} are more than one in vCenter's inventory (one per datacenter or "
            "folder): benchlib cannot tell which is meant; give them names of their own"
        )
    return found


def _datastores(service: Any, names: list[str]) -> dict[str, Any]:
    """Return the datastores named, by name (:class:`VSphereError` where one is not in the inventory)."""
    from pyVmomi import vim

    found = _inventory(service, vim.Datastore, names, "datastores")
    return {name: found[name] for name in names}


def datastore_sioc(service: Any, names: list[str]) -> dict[str, bool]:
    """Return each named datastore's Storage I/O Control: on (True) or off (False) (:func:`sioc_of`)."""
    return {name: sioc_of(datastore) for name, datastore in _datastores(service, names).items()}


def sioc_of(datastore: Any) -> bool:
    """Return a datastore's Storage I/O Control (the managed object): on (True) or off (False)."""
    iorm = datastore.iormConfiguration
    if iorm is None:
        raise VSphereError(f"vCenter reports no Storage I/O Control for datastore {datastore.name}: it cannot be set")
    return bool(iorm.enabled)


def set_sioc_of(service: Any, datastore: Any, enabled: bool) -> bool:
    """Turn a datastore's (the managed object's) SIOC on or off, wait for vCenter's task; return it read back.

    Through the StorageResourceManager's ``ConfigureDatastoreIORM_Task`` (only vCenter has it); every host
    of the datastore must support SIOC, or the task fails and says so.
    """
    from pyVim.task import WaitForTask
    from pyVmomi import vim, vmodl

    spec = vim.StorageResourceManager.IORMConfigSpec(enabled=enabled)
    task = service.RetrieveContent().storageResourceManager.ConfigureDatastoreIORM_Task(datastore=datastore, spec=spec)
    try:
        WaitForTask(task)
    except vmodl.MethodFault as exc:
        said = "on" if enabled else "off"
        raise VSphereError(f"vCenter did not set SIOC {said} on {datastore.name}: {exc.msg}") from None
    return sioc_of(datastore)


#: the congestion threshold vCenter takes: milliseconds (manual), or a percent of peak throughput (automatic)
THRESHOLD_MS, THRESHOLD_PERCENT = (5, 100), (50, 100)


def threshold_level(level: str) -> dict[str, Any] | None:
    """Return the SIOC congestion threshold a level names: ``30`` (ms, manual), ``90%`` (of peak, automatic).

    None where it names none vCenter takes (5 to 100 ms; 50 to 100% of peak throughput).
    """
    text = str(level).strip().lower().removesuffix("ms").strip()
    found = re.fullmatch(r"([0-9]{1,3})\s*(%?)", text)
    if found is None:
        return None
    value, percent = int(found[1]), bool(found[2])
    low, high = THRESHOLD_PERCENT if percent else THRESHOLD_MS
    if not low <= value <= high:
        return None
    return {"mode": "automatic", "percent": value} if percent else {"mode": "manual", "ms": value}


def threshold_said(state: object) -> str:
    """Say a congestion threshold as :func:`threshold_of` gives it: ``30 ms``, ``90% of peak throughput``."""
    if not isinstance(state, dict):
        return str(state)
    if state.get("mode") == "automatic":
        return f"{state.get('percent')}% of peak throughput (automatic)"
    return f"{state.get('ms')} ms"


def threshold_of(datastore: Any) -> dict[str, Any]:
    """Return a datastore's SIOC congestion threshold as it is in effect, as :func:`threshold_level` names one.

    In automatic mode vCenter moves the milliseconds itself: the percent of peak throughput is the setting.
    """
    iorm = datastore.iormConfiguration
    if iorm is None:
        raise VSphereError(f"vCenter reports no Storage I/O Control for datastore {datastore.name}: it cannot be set")
    if (iorm.congestionThresholdMode or "manual") == "automatic":
        return {"mode": "automatic", "percent": int(iorm.percentOfPeakThroughput or 90)}
    return {"mode": "manual", "ms": int(iorm.congestionThreshold)}


def set_threshold_of(service: Any, datastore: Any, want: dict[str, Any]) -> dict[str, Any]:
    """Set a datastore's SIOC congestion threshold (``want`` as :func:`threshold_of` gives it); return it read back.

    Through ``ConfigureDatastoreIORM_Task``, its mode with its value; SIOC itself is left as it is.
    """
    from pyVim.task import WaitForTask
    from pyVmomi import vim, vmodl

    spec = vim.StorageResourceManager.IORMConfigSpec(congestionThresholdMode=want["mode"])
    if want["mode"] == "automatic":
        spec.percentOfPeakThroughput = int(want["percent"])
    else:
        spec.congestionThreshold = int(want["ms"])
    task = service.RetrieveContent().storageResourceManager.ConfigureDatastoreIORM_Task(datastore=datastore, spec=spec)
    try:
        WaitForTask(task)
    except vmodl.MethodFault as exc:
        raise VSphereError(
            f"vCenter did not set the congestion threshold of {datastore.name} to {threshold_said(want)}: {exc.msg}"
        ) from None
    return threshold_of(datastore)


def disks_under_test(service: Any, vms: list[str], label: str | None) -> dict[str, tuple[str, Any]]:
    """Return each VM's disk under test as (its label, its datastore's managed object), by VM name.

    The datastore is the one the disk's file is on, so a datastore of the same name elsewhere is never taken.

    Raises
    ------
    VSphereError
        Where a VM is not in the inventory, is named twice, or its disk under test cannot be told.

    """
    from pyVmomi import vim

    found = _inventory(service, vim.VirtualMachine, vms, "VMs")
    disks = {}
    for name in vms:
        vm = found[name]
        chosen, why = disk_under_test(_vm_facts(vm), label)
        if chosen is None:
            raise VSphereError(f"VM {name} {why.replace('in study.toml', 'in the plan')}")
        device = next(
            d
            for d in vm.config.hardware.device
            if isinstance(d, vim.vm.device.VirtualDisk) and d.deviceInfo and d.deviceInfo.label == chosen["label"]
        )
        datastore = getattr(device.backing, "datastore", None)
        if datastore is None:
            raise VSphereError(f"VM {name}'s disk under test ({chosen['label']}) is on no datastore vCenter names")
        disks[name] = (chosen["label"], datastore)
    return disks


def vms_named(service: Any, vms: list[str]) -> dict[str, Any]:
    """Return the named VMs' managed objects, by name (:class:`VSphereError` where one is missing or twice)."""
    from pyVmomi import vim

    found = _inventory(service, vim.VirtualMachine, vms, "VMs")
    return {name: found[name] for name in vms}


def vm_datastores(service: Any, vms: list[str]) -> list[Any]:
    """Return the datastores (managed objects) every disk of the named VMs is on."""
    from pyVmomi import vim

    found = _inventory(service, vim.VirtualMachine, vms, "VMs")
    return [
        d.backing.datastore
        for name in vms
        for d in found[name].config.hardware.device
        if isinstance(d, vim.vm.device.VirtualDisk) and getattr(d.backing, "datastore", None) is not None
    ]


#: the controllers benchlib can move a disk under test to: vCenter's name -> the API's type
MOVABLE = {
    "PVSCSI": "ParaVirtualSCSIController",
    "LSI Logic SAS": "VirtualLsiLogicSASController",
    "LSI Logic Parallel": "VirtualLsiLogicController",
    "NVMe": "VirtualNVMEController",
    "SATA": "VirtualAHCIController",
}
#: the controllers that share bus numbers: a VM has buses 0 to 3 of SCSI controllers of any kind, of NVMe, of SATA
_BUSES = {
    "SCSI": (
        "ParaVirtualSCSIController",
        "VirtualLsiLogicSASController",
        "VirtualLsiLogicController",
        "VirtualBusLogicController",
    ),
    "NVMe": ("VirtualNVMEController",),
    "SATA": ("VirtualAHCIController",),
}
#: how long a guest may take to shut down, and vCenter's tasks to end
SHUTDOWN_S, TASK_S = 300, 600


def controller_level(level: str) -> str | None:
    """Return the one controller (vCenter's name) a level names that a disk can be moved to, or None."""
    named = controllers_named(level) or set()
    return next(iter(named)) if len(named) == 1 and next(iter(named)) in MOVABLE else None


@dataclass(frozen=True)
class Place:
    """Where a VM's disk hangs: its controller (vCenter's name), that controller's key and the disk's unit."""

    controller: str
    key: int
    unit: int


def _kind(device: Any) -> str:
    return type(device).__name__.rsplit(".", 1)[-1]


def _disk_named(vm: Any, disk: str) -> Any:
    """Return a VM's disk by its file (``[ds] vm/vm_1.vmdk``), or by its label where none has that file."""
    from pyVmomi import vim

    disks = [d for d in vm.config.hardware.device if isinstance(d, vim.vm.device.VirtualDisk)]
    found = [d for d in disks if getattr(d.backing, "fileName", None) == disk] or [
        d for d in disks if d.deviceInfo and d.deviceInfo.label == disk
    ]
    if len(found) != 1:
        raise VSphereError(f"VM {vm.name} has {len(found)} disks of {disk!r}; benchlib moves only one it can tell")
    return found[0]


def disk_file(vm: Any, label: str) -> str:
    """Return a VM's disk's file (``[ds] vm/vm_1.vmdk``), by which benchlib follows it whatever its label becomes.

    Its label where it has no file.
    """
    return str(getattr(_disk_named(vm, label).backing, "fileName", "") or label)


def place_of(vm: Any, name: str) -> Place:
    """Return where VM ``vm``'s (the managed object's) disk hangs (its file, or its label), as vCenter has it now."""
    disk = _disk_named(vm, name)
    controller = next((d for d in vm.config.hardware.device if d.key == disk.controllerKey), None)
    kind = _kind(controller) if controller is not None else "none"
    return Place(CONTROLLERS.get(kind, kind), int(disk.controllerKey), int(disk.unitNumber or 0))


def boot_disks(vm: Any) -> set[str]:
    """Return the labels of the disks a VM may boot from.

    Those in its boot order (with none, the one disk at bus 0, unit 0: the firmware's first), and Hard disk 1.
    """
    from pyVmomi import vim

    order = getattr(vm.config.bootOptions, "bootOrder", None) or []
    keys = {b.deviceKey for b in order if isinstance(b, vim.vm.BootOptions.BootableDiskDevice)}
    devices = vm.config.hardware.device
    disks = [d for d in devices if isinstance(d, vim.vm.device.VirtualDisk) and d.deviceInfo]
    buses = {d.key: getattr(d, "busNumber", None) for d in devices}
    first = [d for d in disks if buses.get(d.controllerKey) == 0 and d.unitNumber == 0]
    if not keys and len(first) == 1:  # no boot order: the firmware's first disk, the one at 0:0 of its kind
        keys = {first[0].key}
    return {d.deviceInfo.label for d in disks if d.key in keys or d.deviceInfo.label == "Hard disk 1"}


def _wait(task: Any, doing: str) -> None:
    """Wait for a vCenter task (at most :data:`TASK_S`); raise VSphereError saying ``doing`` where it failed."""
    deadline = time.monotonic() + TASK_S
    while task.info.state not in ("success", "error"):
        if time.monotonic() > deadline:
            raise VSphereError(f"{doing}: vCenter's task did not end in {TASK_S} s")
        time.sleep(0.2)
    if task.info.state == "error":
        fault = task.info.error
        raise VSphereError(f"{doing}: {getattr(fault, 'msg', None) or type(fault).__name__}")


def power_off(vm: Any) -> str:
    """Stop a VM: the guest shut down through VMware Tools where they run, else powered off; say which.

    "" where it was off already. A guest that does not shut down in :data:`SHUTDOWN_S` raises.
    """
    if vm.runtime.powerState == "poweredOff":
        return ""
    if vm.guest.toolsRunningStatus == "guestToolsRunning":
        vm.ShutdownGuest()
        deadline = time.monotonic() + SHUTDOWN_S
        while vm.runtime.powerState != "poweredOff":
            if time.monotonic() > deadline:
                raise VSphereError(f"VM {vm.name}'s guest did not shut down in {SHUTDOWN_S} s; benchlib stops here")
            time.sleep(1)
        return "shut down"
    _wait(vm.PowerOffVM_Task(), f"powering VM {vm.name} off")
    return "powered off (VMware Tools not running)"


def power_on(vm: Any) -> None:
    """Power a VM on and wait for vCenter's task."""
    if vm.runtime.powerState != "poweredOn":
        _wait(vm.PowerOnVM_Task(), f"powering VM {vm.name} on")


def move_disk(
    vm: Any, label: str, controller: str, *, to: Place | None = None, added: frozenset[int] = frozenset()
) -> tuple[Place, frozenset[int]]:
    """Move a powered-off VM's disk ``label`` (its file, or its label) to a ``controller`` (ReconfigVM_Task).

    To ``to`` where given (the place it had: its controller is never removed); else to a controller of that
    type that holds no device, else to a new one on the first bus free for its kind. The controller it leaves
    is removed where benchlib added it (``added``, the keys of the controllers it added) and nothing else hangs
    on it. Returns where the disk is, read back, and the keys of the controllers benchlib added that remain.
    """
    from pyVmomi import vim

    devices = list(vm.config.hardware.device)
    disk = _disk_named(vm, label)
    holding = {d.controllerKey for d in devices if getattr(d, "controllerKey", None) is not None}
    changes, new = [], None
    if to is not None:  # by its key: a controller benchlib never moves to (BusLogic, IDE) is put back too
        if not any(d.key == to.key for d in devices):
            raise VSphereError(f"VM {vm.name} no longer has the {to.controller} controller its disk {label} was on")
        key, unit = to.key, to.unit
    else:
        api = MOVABLE[controller]
        free = [d for d in devices if _kind(d) == api and d.key not in holding]
        if free:
            key, unit = free[0].key, 0
        else:
            kinds = next(k for k in _BUSES.values() if api in k)
            buses = {d.busNumber for d in devices if _kind(d) in kinds}
            bus = next((b for b in range(4) if b not in buses), None)
            if bus is None:
                raise VSphereError(f"VM {vm.name} has four controllers of {controller}'s kind already: none is free")
            new = getattr(vim.vm.device, api)(key=-1000, busNumber=bus)
            if hasattr(new, "sharedBus"):
                new.sharedBus = "noSharing"
            changes.append(vim.vm.device.VirtualDeviceSpec(operation="add", device=new))
            key, unit = new.key, 0
    if (disk.controllerKey, disk.unitNumber) != (key, unit):
        disk.controllerKey, disk.unitNumber = key, unit
        changes.append(vim.vm.device.VirtualDeviceSpec(operation="edit", device=disk))
    # the controllers benchlib added that nothing hangs on once the disk has moved
    held = {d.controllerKey for d in devices if getattr(d, "controllerKey", None) is not None and d.key != disk.key}
    gone = [d for d in devices if d.key in added and d.key != key and d.key not in held]
    changes += [vim.vm.device.VirtualDeviceSpec(operation="remove", device=d) for d in gone]
    if changes:
        _wait(
            vm.ReconfigVM_Task(vim.vm.ConfigSpec(deviceChange=changes)),
            f"moving VM {vm.name}'s {label} to {controller}",
        )
    now = place_of(vm, label)
    kept = set(added) - {d.key for d in gone} | ({now.key} if new is not None else set())
    return now, frozenset(kept)


#: the disk shares vCenter gives a named level (a custom level carries its own number)
SHARES_LEVELS = {"low": 500, "normal": 1000, "high": 2000}


def disk_io_of(vm: Any, disk: str) -> dict[str, Any]:
    """Return a VM's disk's (its file, or its label) storage I/O allocation: shares level, shares, IOPS limit.

    ``{"level": "custom", "shares": 2000, "limit": -1}``; -1 is the API's "unlimited".
    """
    allocation = _disk_named(vm, disk).storageIOAllocation
    shares = allocation.shares if allocation is not None else None
    return {
        "level": str(shares.level) if shares is not None else "normal",
        "shares": int(shares.shares) if shares is not None and shares.shares is not None else SHARES_LEVELS["normal"],
        "limit": int(allocation.limit) if allocation is not None and allocation.limit is not None else -1,
    }


def set_disk_io_of(vm: Any, disk: str, want: dict[str, Any]) -> dict[str, Any]:
    """Set a VM's disk's shares and IOPS limit (``want`` as :func:`disk_io_of` gives it); return it read back.

    An edit of the disk's ``storageIOAllocation`` through ``ReconfigVM_Task``, the VM left running.
    """
    from pyVmomi import vim

    device = _disk_named(vm, disk)
    level = str(want["level"])
    shares = vim.SharesInfo(level=level, shares=int(want["shares"] if level == "custom" else SHARES_LEVELS[level]))
    allocation = device.storageIOAllocation or vim.StorageResourceManager.IOAllocationInfo()
    allocation.shares, allocation.limit = shares, int(want["limit"])  # its reservation kept
    device.storageIOAllocation = allocation
    change = vim.vm.device.VirtualDeviceSpec(operation="edit", device=device)
    _wait(
        vm.ReconfigVM_Task(vim.vm.ConfigSpec(deviceChange=[change])),
        f"setting the shares and limit of VM {vm.name}'s {disk}",
    )
    return disk_io_of(vm, disk)


def set_sioc(service: Any, name: str, enabled: bool) -> bool:
    """Turn the named datastore's SIOC on or off (:func:`set_sioc_of`); return it read back."""
    return set_sioc_of(service, _datastores(service, [name])[name], enabled)


def facts_document(service: Any, server: Server, vms: list[str]) -> dict[str, Any]:
    """Return what a facts file holds (:data:`FACTS_FILE`): the server, the time read and the VMs' facts."""
    return {"server": server.address, **read_facts(service, vms)}


def failed_document(server: Server, exc: BaseException) -> dict[str, Any]:
    """Return a facts file for facts that could not be read: no VMs, and why (its first line)."""
    first = str(exc).splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
    return {
        "server": server.address,
        "read_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "error": first,
        "vms": [],
    }


def _vm_facts(vm: Any) -> dict[str, Any]:
    from pyVmomi import vim

    hardware = vm.config.hardware
    controllers = {d.key: d for d in hardware.device if isinstance(d, vim.vm.device.VirtualController)}
    disks, datastores = [], {}
    for disk in (d for d in hardware.device if isinstance(d, vim.vm.device.VirtualDisk)):
        controller = controllers.get(disk.controllerKey)
        kind = type(controller).__name__.rsplit(".", 1)[-1] if controller is not None else None
        allocation = disk.storageIOAllocation
        shares = allocation.shares if allocation is not None else None
        datastore = getattr(disk.backing, "datastore", None)
        disks.append(
            {
                "label": disk.deviceInfo.label if disk.deviceInfo else None,
                "controller": CONTROLLERS.get(kind, kind),
                "bus": getattr(controller, "busNumber", None),
                "unit": disk.unitNumber,
                "capacity_bytes": disk.capacityInBytes,
                "file": getattr(disk.backing, "fileName", None),
                "datastore": datastore.name if datastore is not None else None,
                "shares": shares.shares if shares is not None else None,
                "shares_level": str(shares.level) if shares is not None else None,
                # -1 is the API's "unlimited"
                "limit_iops": None if allocation is None or allocation.limit in (None, -1) else allocation.limit,
                "reservation_iops": allocation.reservation if allocation is not None else None,
            }
        )
        if datastore is not None and datastore.name not in datastores:
            datastores[datastore.name] = _datastore_facts(datastore)
    host = vm.runtime.host
    return {
        "vm": vm.name,
        "host": host.name if host is not None else None,
        "vcpus": hardware.numCPU,
        "memory_mb": hardware.memoryMB,
        "disks": disks,
        "datastores": datastores,
        "luns": _lun_facts(host) if host is not None else [],
    }


def _datastore_facts(datastore: Any) -> dict[str, Any]:
    """Return a datastore's type, its LUNs (VMFS extents) and its Storage I/O Control state where reported."""
    facts: dict[str, Any] = {"type": datastore.summary.type, "sioc_enabled": None, "congestion_threshold_ms": None}
    facts |= {"congestion_threshold_mode": None, "percent_of_peak": None}
    try:
        iorm = datastore.iormConfiguration
    except Exception:  # noqa: BLE001 -- a server that does not implement it (the simulator) says nothing about SIOC
        iorm = None
    if iorm is not None:
        facts["sioc_enabled"] = bool(iorm.enabled)
        facts["congestion_threshold_ms"] = iorm.congestionThreshold
        facts["congestion_threshold_mode"] = iorm.congestionThresholdMode
        facts["percent_of_peak"] = iorm.percentOfPeakThroughput
    vmfs = getattr(getattr(datastore, "info", None), "vmfs", None)
    facts["extents"] = [e.diskName for e in vmfs.extent] if vmfs is not None else []
    return facts


def _lun_facts(host: Any) -> list[dict[str, Any]]:
    """Return the host's SCSI LUNs: canonical name, queue depth, path selection policy, paths and states.

    With each LUN the host bus adapters its paths run through (``vmhba0``, model, driver): the API
    reports no adapter queue depth (``HostHostBusAdapter`` has none, and esxtop's batch mode leaves
    AQLEN out), but the adapter and its driver say which queue limits apply.
    """
    storage = host.configManager.storageSystem
    info = storage.storageDeviceInfo if storage is not None else None
    if info is None:
        return []
    paths = {lun.lun: lun for lun in (info.multipathInfo.lun if info.multipathInfo else [])}
    adapters = {hba.key: hba for hba in (info.hostBusAdapter or [])}
    out = []
    for lun in info.scsiLun:
        multipath = paths.get(lun.key)
        behind = sorted({p.adapter for p in multipath.path if p.adapter} if multipath is not None else set())
        out.append(
            {
                "lun": lun.canonicalName,
                "queue_depth": getattr(lun, "queueDepth", None),
                "path_policy": multipath.policy.policy if multipath is not None and multipath.policy else None,
                "paths": len(multipath.path) if multipath is not None else None,
                "path_states": sorted({p.state for p in multipath.path}) if multipath is not None else [],
                "adapters": [_adapter_facts(adapters.get(key), key) for key in behind],
            }
        )
    return out


def _adapter_facts(hba: Any, key: str) -> dict[str, Any]:
    """Return a host bus adapter's name, model and driver (only its API key when the host did not list it)."""
    if hba is None:
        return {"adapter": key.rsplit("-", 1)[-1], "model": None, "driver": None}
    return {"adapter": hba.device, "model": hba.model, "driver": hba.driver}


# ---------------------------------------------------------------- a study's levels against the facts

#: the file ``benchlib vsphere facts --output`` writes into a study (or ``benchlib run`` beside a cell)
FACTS_FILE = "benchlib-vsphere.json"
_ON = {"on", "enabled", "enable", "true", "yes", "y", "1"}
_OFF = {"off", "disabled", "disable", "false", "no", "n", "0"}

#: what a study may call each controller, as vCenter, the vSphere Client and .vmx files name them (case,
#: spaces, hyphens and underscores ignored); ``LSI`` and ``LSI Logic`` alone mean either LSI Logic controller
CONTROLLER_NAMES = {
    "PVSCSI": {"pvscsi", "paravirtual", "paravirtualscsi", "vmwareparavirtual", "vmwarepvscsi", "pvscsicontroller"},
    "LSI Logic SAS": {"lsilogicsas", "lsisas", "lsisas1068", "lsilogicsascontroller"},
    "LSI Logic Parallel": {"lsilogicparallel", "lsiparallel", "lsilogicparallelcontroller"},
    "BusLogic": {"buslogic", "buslogicparallel"},
    "NVMe": {"nvme", "vnvme", "nvmecontroller", "vmwarenvme"},
    "SATA": {"sata", "ahci", "satacontroller", "ahcicontroller"},
    "IDE": {"ide"},
}
_EITHER_LSI = {"lsi", "lsilogic"}
#: path selection policies by what a study may call them
POLICY_NAMES = {
    "VMW_PSP_RR": {"rr", "roundrobin", "vmwpsprr", "psprr"},
    "VMW_PSP_MRU": {"mru", "mostrecentlyused", "vmwpspmru", "pspmru"},
    "VMW_PSP_FIXED": {"fixed", "vmwpspfixed", "pspfixed"},
}
#: a Round Robin limit level for a LUN that is not on Round Robin
_NO_LIMIT = {"none", "na", "", "off"}


def _plain(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def controllers_named(level: str) -> set[str] | None:
    """Return the controllers (vCenter's names) a study's level names, or None when it names none."""
    plain = _plain(level)
    if plain in _EITHER_LSI:
        return {"LSI Logic SAS", "LSI Logic Parallel"}
    named = {name for name, words in CONTROLLER_NAMES.items() if plain in words or plain == _plain(name)}
    return named or None


def controller_matches(level: str, fact: str) -> bool:
    """Tell whether a study's controller level names the controller vCenter reports.

    ``PVSCSI``, ``ParaVirtual`` or ``VMware Paravirtual`` for PVSCSI; ``LSI Logic SAS`` (``lsisas1068``)
    only that one; ``LSI`` either LSI Logic. A level that names no controller matches nothing
    (:func:`level_problem` says so).
    """
    named = controllers_named(level)
    return named is not None and fact in named


def sioc_level(level: str) -> bool | None:
    """Return what a study's SIOC level says (True on, False off), or None when it says neither.

    ``on``, ``enabled``, ``yes`` ... and the same with "SIOC" before them (``SIOC on``, ``sioc-enabled``).
    """
    word = re.sub(r"[^a-z0-9]", "", level.lower().replace("sioc", ""))
    return True if word in _ON else False if word in _OFF else None


def policy_named(level: str) -> str | None:
    """Return the path selection policy a study's multipath level names (``VMW_PSP_RR`` ...), or None."""
    plain = _plain(level)
    known = next((name for name, words in POLICY_NAMES.items() if plain in words), None)
    if known is None and "psp" in plain:  # a vendor's plugin policy, named whole
        return level.strip()
    return known


def level_problem(fact: str, level: str) -> str | None:
    """Say why a study's level cannot be checked against a fact (None when it can)."""
    if fact == "controller" and controllers_named(level) is None:
        return f"names no controller; use one of {', '.join(CONTROLLER_NAMES)} (or LSI for either LSI Logic)"
    if fact == "sioc" and sioc_level(level) is None:
        return "says neither on nor off"
    if fact == "sioc_threshold" and threshold_level(level) is None:
        return "is no congestion threshold (5 to 100 ms, e.g. 30; or 50% to 100% of peak throughput, e.g. 90%)"
    if fact == "path_policy" and policy_named(level) is None:
        return "names no path selection policy; use RR, MRU, Fixed or the policy's VMW_PSP_ name"
    if fact == "rr_iops" and _plain(level) not in _NO_LIMIT and not re.fullmatch(r"\s*[0-9]+\s*", level):
        return "is not a Round Robin IO operation limit (a whole number, or none for a LUN not on Round Robin)"
    return None


#: esxcli's device lists of a cell (``[esxi]`` of a run plan), by ESXi host
ESXI_FILE = "benchlib-esxi.json"


def policy_matches(level: str, policy: str | None) -> bool:
    """Tell whether a study's multipath level names the path selection policy esxcli reports.

    ``RR``, ``round robin`` or ``VMW_PSP_RR`` for Round Robin; ``Fixed``, ``MRU`` likewise.
    """
    named = policy_named(level)
    return named is not None and policy is not None and _plain(named) == _plain(policy)


def limit_matches(level: str, limit: int | None) -> bool:
    """Tell whether a study's Round Robin limit level is the IO operation limit esxcli reports (none: no limit)."""
    if _plain(level) in _NO_LIMIT:
        return limit is None
    return limit is not None and re.fullmatch(r"\s*[0-9]+\s*", level) is not None and int(level) == limit


def _nearest(documents: dict[str, dict], rel: str) -> tuple[str, dict] | None:
    folder = Path(rel).parent
    for near in (folder, *folder.parents):
        if str(near) in documents:
            return str(near), documents[str(near)]
    return None


def _lun_contradictions(study: Any, runs: Any, esxi: dict[str, dict]) -> dict[str, str]:
    """Each run's multipath levels (``path_policy``, ``rr_iops``) against esxcli's lists of its cell."""
    checks = {f: study.vsphere[f] for f in LUN_CHECKS if f in study.vsphere}
    device, found = study.vsphere.get("device"), {}
    if not checks or not esxi:
        return {}
    columns = [c for c in ("source", *checks.values()) if c in runs.columns]
    for run in runs.select(columns).unique().iter_rows(named=True):
        near = _nearest(esxi, str(run["source"]).split("/", 1)[-1])
        if near is None:
            continue
        folder, hosts = near
        where = str(Path(folder) / ESXI_FILE) if folder != "." else ESXI_FILE
        if not device:
            found["device"] = f'study.toml checks {", ".join(checks)} of a LUN: name it in [vsphere] device = "naa..."'
            continue
        for host, listed in hosts.items():
            lun = next((d for d in listed.get("devices", []) if d.get("device") == device), None)
            if lun is None:
                continue
            found |= _lun_disagreements(checks, run, host, lun, f"{device} ({where})")
    return found


def _checked_levels(checks: dict[str, str], run: dict, found: dict[str, str]) -> Iterator[tuple[str, str, str]]:
    """Yield each of a run's levels that a fact checks; a level that names nothing goes into ``found`` instead."""
    for fact, factor in checks.items():
        level = run.get(factor)
        if level is None:
            continue
        problem = level_problem(fact, str(level))
        if problem:
            found[f"level/{factor}/{level}"] = f"study.toml's {factor} level {level!r} {problem}"
            continue
        yield fact, factor, level


def _lun_disagreements(checks: dict[str, str], run: dict, host: str, lun: dict, device: str) -> dict[str, str]:
    """One run's multipath levels against one host's listing of the LUN: what disagrees, in words."""
    found: dict[str, str] = {}
    for fact, factor, level in _checked_levels(checks, run, found):
        said = lun.get("path_policy") if fact == "path_policy" else lun.get("rr_iops_limit")
        if not (policy_matches(level, said) if fact == "path_policy" else limit_matches(level, said)):
            what = "path policy" if fact == "path_policy" else "Round Robin IO operation limit"
            found[f"{host}/{factor}/{level}"] = (
                f"{host}: study.toml gives {factor} = {level!r} (run {run['source']}), esxcli says {what} "
                f"{_said(said)} for {device}"
            )
    return found


def contradictions(study: Any, runs: Any, facts: dict[str, dict], esxi: dict[str, dict] | None = None) -> list[str]:
    """Return each contradiction between a study's levels and vCenter's facts, in words (empty: none).

    ``runs``: the study's runs (``source``, ``host``: the VM, or the fio host ``benchlib run`` recorded
    beside the VM's name, and the factor columns);
    ``facts``: facts files by their folder in the study. A run is checked against the nearest
    facts file up its folders that lists its VM; the factors checked are ``[vsphere] controller``
    and ``sioc`` of study.toml, on the disk ``[vsphere] disk`` names (a VM's only disk otherwise).
    A fact the API did not report (SIOC on the simulator) cannot contradict anything. ``esxi``:
    esxcli's lists by folder (``[esxi]`` of a plan); ``path_policy`` and ``rr_iops`` are checked
    on the LUN ``[vsphere] device`` names, on every ESXi host that lists it.
    """
    found = _lun_contradictions(study, runs, esxi or {})
    checks = {fact: study.vsphere[fact] for fact in VCENTER_CHECKS if fact in study.vsphere}
    if not checks or not facts:
        return sorted(found.values())
    columns = [c for c in ("source", "host", *checks.values()) if c in runs.columns]
    for run in runs.select(columns).unique().iter_rows(named=True):
        vm = run.get("host")
        vm_facts, facts_file = _vm_near(facts, str(run["source"]).split("/", 1)[-1], vm)
        if vm_facts is None:
            continue
        disk, why = disk_under_test(vm_facts, study.vsphere.get("disk"))
        name = vm_facts["vm"] if vm_facts.get("vm") == vm else f"{vm_facts.get('vm')} (fio host {vm})"
        for fact, factor, level in _checked_levels(checks, run, found):
            if disk is None:
                found[f"{vm}/{factor}"] = f"{name}: {why} ({facts_file})"
                continue
            said, agrees = _fact_and_agreement(fact, level, vm_facts, disk)
            if said is None:
                continue  # not reported: nothing to check against
            if agrees is False:
                found[f"{vm}/{factor}/{level}"] = (
                    f"{name}: study.toml gives {factor} = {level!r} (run {run['source']}), vCenter says "
                    f"{fact} {_said(said)} for {disk.get('label')} ({facts_file}, "
                    f"read {vm_facts_read(facts, facts_file)})"
                )
    return sorted(found.values())


def find_vm(listed: list, name: str | None) -> dict | None:
    """Return the VM of a facts file's list that a run's host names.

    Its VM name or fio host, exactly, else ignoring case, else by the first label of a DNS name
    (``vm0`` for ``vm0.lab.local``) when only one fits.
    """
    if not name:
        return None
    vms = [v for v in listed if isinstance(v, dict)]
    for same in (lambda a, b: a == b, lambda a, b: a.lower() == b.lower()):
        found = [v for v in vms if any(isinstance(n, str) and same(n, name) for n in (v.get("vm"), v.get("fio_host")))]
        if found:
            return found[0]
    short = name.lower().split(".")[0]
    found = [
        v
        for v in vms
        if any(isinstance(n, str) and n.lower().split(".")[0] == short for n in (v.get("vm"), v.get("fio_host")))
    ]
    return found[0] if len(found) == 1 and not _is_address(name) else None


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _vm_near(facts: dict[str, dict], rel: str, vm: str | None) -> tuple[dict | None, str]:
    """Return the facts of the run's VM (by name or fio host) from the nearest file up that lists it, and that file."""
    folder = Path(rel).parent
    for near in (folder, *folder.parents) if vm is not None else ():
        found = find_vm(facts.get(str(near), {}).get("vms", []), vm)
        if found is not None:
            return found, str(near / FACTS_FILE) if str(near) != "." else FACTS_FILE
    return None, ""


def unchecked(study: Any, runs: Any, facts: dict[str, dict]) -> list[str]:
    """Say which runs' VMs no facts file lists, though one is up their folders: their levels go unchecked.

    Host-side captures (esxtop: their host is an ESXi host, not a VM) are not runs of a VM.
    """
    if not facts or not any(f in study.vsphere for f in VCENTER_CHECKS):
        return []
    said = {}
    columns = [c for c in ("source", "host") if c in runs.columns]
    guests = runs.filter(pl.col("tool") != "esxtop") if "tool" in runs.columns else runs
    for run in guests.select(columns).unique().iter_rows(named=True):
        rel = str(run["source"]).split("/", 1)[-1]
        if _vm_near(facts, rel, run.get("host"))[0] is not None:
            continue
        folder = Path(rel).parent
        near = next(
            (str(f) for f in (folder, *folder.parents) if str(f) in facts and not facts[str(f)].get("error")), None
        )
        if near is not None:
            listed = ", ".join(str(v.get("vm")) for v in facts[near].get("vms", [])[:10]) or "none"
            said[(run.get("host"), near)] = (
                f"host {run.get('host')!r} is no VM of {Path(near) / FACTS_FILE} (VMs there: {listed}): its runs' "
                "controller and SIOC levels are not checked; name the VM as vCenter does, or give the fio host"
            )
    return [said[k] for k in sorted(said, key=str)]


def vm_facts_read(facts: dict[str, dict], facts_file: str) -> str:
    """Return when a facts file was read from vCenter."""
    folder = str(Path(facts_file).parent)
    return str(facts.get(folder, {}).get("read_at", "at an unknown time"))


def _said(value: object) -> str:
    """Return a fact for a message: text quoted (records are checked printable), numbers as is, flags on/off."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, str | int):
        return repr(value)
    return "not reported"


def disk_under_test(vm: dict, label: str | None) -> tuple[dict | None, str]:
    """Return a VM's disk under test (labelled ``label``, or its only disk), or None and why not."""
    disks = [d for d in vm.get("disks") or [] if isinstance(d, dict)]
    if label:
        chosen = [d for d in disks if d.get("label") == label]
        if chosen:
            return chosen[0], ""
        return None, f"has no disk labelled {label!r} ([vsphere] disk); its disks: " + ", ".join(
            str(d.get("label")) for d in disks
        )
    if len(disks) == 1:
        return disks[0], ""
    return None, (
        f"has {len(disks)} disks ({', '.join(str(d.get('label')) for d in disks)}); say which one is under test "
        'with [vsphere] disk = "<label>" in study.toml'
    )


def _fact_and_agreement(fact: str, level: str, vm: dict, disk: dict) -> tuple[object, bool | None]:
    """Return what vCenter says of ``fact`` for a VM's disk, and whether ``level`` agrees (None: cannot tell)."""
    if fact == "controller":
        said = disk.get("controller")
        return said, None if said is None else controller_matches(level, said)
    if fact == "sioc":
        said = _sioc_fact(vm, disk)
        return said, _sioc_agrees(level, said)
    store = vm.get("datastores", {}).get(disk.get("datastore"), {})
    mode = store.get("congestion_threshold_mode") or ("manual" if store.get("congestion_threshold_ms") else None)
    said = (
        {"mode": "automatic", "percent": store.get("percent_of_peak")}
        if mode == "automatic"
        else {"mode": "manual", "ms": store.get("congestion_threshold_ms")}
        if mode
        else None
    )
    wanted = threshold_level(level)
    return (None, None) if said is None or None in said.values() else (threshold_said(said), wanted == said)


def _sioc_fact(vm: dict, disk: dict) -> bool | None:
    return vm.get("datastores", {}).get(disk.get("datastore"), {}).get("sioc_enabled")


def _sioc_agrees(level: str, fact: bool | None) -> bool | None:
    said = sioc_level(level)
    return None if said is None or fact is None else said == fact


#: a record's fields and their types (``None`` allowed everywhere: a fact not reported)
_TEXT, _COUNT, _FLAG = (str,), (int,), (bool,)
_FACTS_TOP = {"server": _TEXT, "read_at": _TEXT, "error": _TEXT}
_VM = {"vm": _TEXT, "fio_host": _TEXT, "host": _TEXT, "vcpus": _COUNT, "memory_mb": _COUNT}
_DISK = {
    "label": _TEXT, "controller": _TEXT, "bus": _COUNT, "unit": _COUNT, "capacity_bytes": _COUNT, "file": _TEXT,
    "datastore": _TEXT, "shares": _COUNT, "shares_level": _TEXT, "limit_iops": _COUNT, "reservation_iops": _COUNT,
}  # fmt: skip
_DATASTORE = {
    "type": _TEXT, "sioc_enabled": _FLAG, "congestion_threshold_ms": _COUNT, "congestion_threshold_mode": _TEXT,
    "percent_of_peak": _COUNT,
}  # fmt: skip
_LUN = {"lun": _TEXT, "queue_depth": _COUNT, "path_policy": _TEXT, "paths": _COUNT}
_ADAPTER = {"adapter": _TEXT, "model": _TEXT, "driver": _TEXT}
_ESXI_HOST = {"read_at": _TEXT, "error": _TEXT}
_DEVICE = {
    "device": _TEXT, "display_name": _TEXT, "size_mb": _COUNT, "multipath_plugin": _TEXT, "is_local": _FLAG,
    "is_ssd": _FLAG, "device_max_queue_depth": _COUNT, "outstanding_ios_competing_worlds": _COUNT,
    "storage_array_type": _TEXT, "path_policy": _TEXT, "rr_limit_type": _TEXT, "rr_iops_limit": _COUNT,
    "rr_bytes_limit": _COUNT, "working_paths": _COUNT,
}  # fmt: skip
#: the longest text a record may hold (vCenter's names are at most 80 characters; esxcli's a few hundred)
LONGEST_TEXT = 1000


def _fields_problem(where: str, record: dict, fields: dict[str, tuple[type, ...]]) -> str | None:
    """Say which field of a record has the wrong type, or text no tool writes (None when all are right)."""
    for key, types in fields.items():
        value = record.get(key)
        if value is None:
            continue
        if not isinstance(value, types) or (types != _FLAG and isinstance(value, bool)):
            kind = {_TEXT: "text", _COUNT: "a whole number", _FLAG: "true or false"}[types]
            return f"{where}.{key} is not {kind}"
        if isinstance(value, str) and (len(value) > LONGEST_TEXT or any(not c.isprintable() for c in value)):
            return f"{where}.{key} holds control characters or more than {LONGEST_TEXT} characters"
    return None


def facts_problem(data: object) -> str | None:
    """Say what makes a facts file unusable (None when it is as `benchlib vsphere facts` writes it).

    Every field benchlib reads has its type checked, and text must be printable and not too long:
    a hand-edited or hostile file is quarantined with the field named, never crashes a check or
    reaches a terminal.
    """
    if not isinstance(data, dict) or not isinstance(data.get("vms"), list):
        return "no 'vms' list"
    problem = _fields_problem("the file", data, _FACTS_TOP)
    for index, vm in enumerate(data["vms"]):
        if problem:
            return problem
        where = f"vms[{index}]"
        if not isinstance(vm, dict) or not isinstance(vm.get("vm"), str) or not vm["vm"]:
            return f"{where} is not a VM with a name"
        disks, datastores, luns = vm.get("disks", []), vm.get("datastores", {}), vm.get("luns", [])
        if not isinstance(disks, list) or not all(isinstance(d, dict) for d in disks):
            return f"{where} disks is not a list of disks"
        if not isinstance(luns, list) or not all(
            isinstance(lun, dict)
            and isinstance(lun.get("adapters", []), list)
            and all(isinstance(a, dict) for a in lun.get("adapters", []))
            for lun in luns
        ):
            return f"{where} luns is not a list of LUNs with their adapters"
        if not isinstance(datastores, dict) or not all(isinstance(d, dict) for d in datastores.values()):
            return f"{where} datastores is not a table of datastores"
        problem = (
            _fields_problem(where, vm, _VM)
            or next((p for i, d in enumerate(disks) if (p := _fields_problem(f"{where}.disks[{i}]", d, _DISK))), None)
            or next(
                (
                    p
                    for n, d in datastores.items()
                    if (p := _fields_problem(f"{where}.datastores[{n!r}]", d, _DATASTORE))
                ),
                None,
            )
            or next((p for i, lun in enumerate(luns) if (p := _lun_problem(f"{where}.luns[{i}]", lun))), None)
        )
    return problem


def _lun_problem(where: str, lun: dict) -> str | None:
    return _fields_problem(where, lun, _LUN) or next(
        (
            p
            for i, a in enumerate(lun.get("adapters", []))
            if (p := _fields_problem(f"{where}.adapters[{i}]", a, _ADAPTER))
        ),
        None,
    )


def esxi_problem(data: object) -> str | None:
    """Say what makes an esxcli record unusable (None when it is as `benchlib run` writes it)."""
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        return "not an object of ESXi hosts"
    for host, listed in data.items():
        devices = listed.get("devices", [])
        if not isinstance(devices, list) or not all(isinstance(d, dict) for d in devices):
            return f"{host}: devices is not a list of devices"
        problem = _fields_problem(str(host), listed, _ESXI_HOST) or next(
            (p for i, d in enumerate(devices) if (p := _fields_problem(f"{host}.devices[{i}]", d, _DEVICE))), None
        )
        if problem:
            return problem
    return None


def load_record(path: Path, problem: Any) -> tuple[dict | None, str | None]:
    """Read a facts or esxcli record: ``(data, None)``, or ``(None, why not)`` for any file that is not one.

    ``problem`` is :func:`facts_problem` or :func:`esxi_problem`. Nesting too deep for the parser,
    bytes that are not UTF-8, a file that cannot be read: each is a reason, never an exception.
    """
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror})"
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        return None, f"not JSON ({type(exc).__name__}: {str(exc)[:120]})"
    why = problem(data)
    return (None, why) if why else (data, None)


def read_facts_files(folder: Path, rels: list[str]) -> tuple[dict[str, dict], list[str]]:
    """Return the study's facts files by their folder, and a reason for each one that cannot be read."""
    facts, problems = {}, []
    for rel in rels:
        data, why = load_record(folder / rel, facts_problem)
        if data is None:
            problems.append(f"{rel}: not a facts file of `benchlib vsphere facts` ({why})")
            continue
        facts[str(Path(rel).parent)] = data
    return facts, problems
