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
import socket
import ssl
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

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
VCENTER_CHECKS, LUN_CHECKS = ("controller", "sioc"), ("path_policy", "rr_iops")
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
        """Read a server address; plain HTTP only to a loopback address (a simulator), never over a network."""
        parts = urlsplit(text if "://" in text else f"https://{text}")
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise VSphereError(f"{text!r}: a vCenter address is https://host[:port] (or http://127.0.0.1:port)")
        if parts.username or parts.password:
            raise VSphereError(f"{parts.hostname}: credentials never go in the address; set {USER} and {PASSWORD}")
        if parts.scheme == "http" and not _loopback(parts.hostname):
            raise VSphereError(
                f"{parts.hostname}: plain http would send the password in clear; use https:// "
                "(--insecure for a lab's self-signed certificate)"
            )
        return cls(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80), parts.scheme)

    @property
    def address(self) -> str:
        """``host:port``, as a facts file records the server it was read from (never with credentials)."""
        return f"{self.host}:{self.port}"


def _loopback(host: str) -> bool:
    try:
        return all(ipaddress.ip_address(a[4][0]).is_loopback for a in socket.getaddrinfo(host, None))
    except (OSError, ValueError):
        return False


def credentials() -> tuple[str, str]:
    """Return ``(user, password)`` from the environment, or the TOML file it names."""
    user, password = os.environ.get(USER), os.environ.get(PASSWORD)
    file = os.environ.get(CREDENTIALS)
    if file and not (user and password):
        if not Path(file).is_file():
            raise VSphereError(f"{file}: no such credentials file ({CREDENTIALS} names it)")
        data = read_toml(Path(file), VSphereError)
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
        )
    except vim.fault.InvalidLogin:
        raise VSphereError(f"{server.host}: vCenter refused the user {user!r} and its password") from None
    except (OSError, vim.fault.HostConnectFault) as exc:
        hint = (
            " (a lab's own CA: trust it with SSL_CERT_FILE=<its PEM file>; a self-signed certificate: --insecure)"
            if "CERTIFICATE" in str(exc).upper()
            else ""
        )
        raise VSphereError(f"{server.host}:{server.port}: cannot reach vCenter: {exc}{hint}") from None


def read_facts(service: Any, vms: list[str]) -> dict[str, Any]:
    """Return the facts of the VMs named (every VM when the list is empty), with the time they were read.

    Raises
    ------
    VSphereError
        When a VM named is not in the inventory (the message lists the ones that are).

    """
    from pyVmomi import vim

    content = service.RetrieveContent()
    view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
    try:
        found = {vm.name: vm for vm in view.view}
    finally:
        view.Destroy()
    missing = [name for name in vms if name not in found]
    if missing:
        known = ", ".join(sorted(found)[:20]) or "none"
        raise VSphereError(f"VMs not in vCenter's inventory: {', '.join(missing)} (VMs there: {known})")
    return {
        "read_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "vms": [_vm_facts(found[name]) for name in (vms or sorted(found))],
    }


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
    try:
        iorm = datastore.iormConfiguration
    except Exception:  # noqa: BLE001 -- a server that does not implement it (the simulator) says nothing about SIOC
        iorm = None
    if iorm is not None:
        facts["sioc_enabled"] = bool(iorm.enabled)
        facts["congestion_threshold_ms"] = iorm.congestionThreshold
    vmfs = getattr(getattr(datastore, "info", None), "vmfs", None)
    facts["extents"] = [e.diskName for e in vmfs.extent] if vmfs is not None else []
    return facts


def _lun_facts(host: Any) -> list[dict[str, Any]]:
    """Return the host's SCSI LUNs: canonical name, queue depth, path selection policy, paths and states."""
    storage = host.configManager.storageSystem
    info = storage.storageDeviceInfo if storage is not None else None
    if info is None:
        return []
    paths = {lun.lun: lun for lun in (info.multipathInfo.lun if info.multipathInfo else [])}
    out = []
    for lun in info.scsiLun:
        multipath = paths.get(lun.key)
        out.append(
            {
                "lun": lun.canonicalName,
                "queue_depth": getattr(lun, "queueDepth", None),
                "path_policy": multipath.policy.policy if multipath is not None and multipath.policy else None,
                "paths": len(multipath.path) if multipath is not None else None,
                "path_states": sorted({p.state for p in multipath.path}) if multipath is not None else [],
            }
        )
    return out


# ---------------------------------------------------------------- a study's levels against the facts

#: the file ``benchlib vsphere facts --output`` writes into a study (or ``benchlib run`` beside a cell)
FACTS_FILE = "benchlib-vsphere.json"
_ON, _OFF = {"on", "enabled", "true", "yes", "1"}, {"off", "disabled", "false", "no", "0"}


def _plain(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower()).replace("paravirtual", "pvscsi")


def controller_matches(level: str, fact: str) -> bool:
    """Tell whether a study's controller level names the controller vCenter reports.

    ``PVSCSI`` (or ``ParaVirtual``) for PVSCSI; a level names a type by its start: ``LSI`` is either
    LSI Logic, ``LSI Logic SAS`` only that one; case, spaces and hyphens do not matter.
    """
    return bool(_plain(level)) and _plain(fact).startswith(_plain(level))


def sioc_level(level: str) -> bool | None:
    """Return what a study's SIOC level says (True on, False off), or None when it says neither."""
    word = level.strip().lower()
    return True if word in _ON else False if word in _OFF else None


#: esxcli's device lists of a cell (``[esxi]`` of a run plan), by ESXi host
ESXI_FILE = "benchlib-esxi.json"


def policy_matches(level: str, policy: str | None) -> bool:
    """Tell whether a study's multipath level names the path selection policy esxcli reports.

    ``RR``, ``round robin`` or ``VMW_PSP_RR`` for Round Robin; ``Fixed``, ``MRU`` likewise.
    """
    plain = _plain(level).replace("roundrobin", "rr").replace("mostrecentlyused", "mru")
    return bool(plain) and policy is not None and _plain(policy).endswith(plain)


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
            for fact, factor in checks.items():
                level = run.get(factor)
                if level is None:
                    continue
                said = lun.get("path_policy") if fact == "path_policy" else lun.get("rr_iops_limit")
                agrees = policy_matches(level, said) if fact == "path_policy" else str(said) == str(level).strip()
                if not agrees:
                    found[f"{host}/{factor}/{level}"] = (
                        f"{host}: study.toml gives {factor} = {level!r} (run {run['source']}), esxcli says "
                        f"{'path policy' if fact == 'path_policy' else 'Round Robin IO operation limit'} "
                        f"{_said(said)} for {device} ({where})"
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
        for fact, factor in checks.items():
            level = run.get(factor)
            if level is None:
                continue
            if disk is None:
                found[f"{vm}/{factor}"] = f"{name}: {why} ({facts_file})"
                continue
            said = disk.get("controller") if fact == "controller" else _sioc_fact(vm_facts, disk)
            if said is None:
                continue  # not reported: nothing to check against
            agrees = controller_matches(level, said) if fact == "controller" else _sioc_agrees(level, said)
            if agrees is False:
                found[f"{vm}/{factor}/{level}"] = (
                    f"{name}: study.toml gives {factor} = {level!r} (run {run['source']}), vCenter says "
                    f"{fact} {_said(said)} for {disk.get('label')} ({facts_file}, "
                    f"read {vm_facts_read(facts, facts_file)})"
                )
    return sorted(found.values())


def _vm_near(facts: dict[str, dict], rel: str, vm: str | None) -> tuple[dict | None, str]:
    """Return the facts of the run's VM (by name or fio host) from the nearest file up that lists it, and that file."""
    folder = Path(rel).parent
    for near in (folder, *folder.parents) if vm is not None else ():
        listed = facts.get(str(near), {}).get("vms", [])
        found = next((v for v in listed if vm in (v.get("vm"), v.get("fio_host"))), None)
        if found is not None:
            return found, str(near / FACTS_FILE) if str(near) != "." else FACTS_FILE
    return None, ""


def vm_facts_read(facts: dict[str, dict], facts_file: str) -> str:
    """Return when a facts file was read from vCenter."""
    folder = str(Path(facts_file).parent)
    return str(facts.get(folder, {}).get("read_at", "at an unknown time"))


def _said(value: object) -> str:
    if isinstance(value, str | int) and not isinstance(value, bool):
        return repr(value)
    return {True: "on", False: "off"}.get(value, "not reported")  # type: ignore[call-overload]


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


def _sioc_fact(vm: dict, disk: dict) -> bool | None:
    return vm.get("datastores", {}).get(disk.get("datastore"), {}).get("sioc_enabled")


def _sioc_agrees(level: str, fact: bool | None) -> bool | None:
    said = sioc_level(level)
    return None if said is None or fact is None else said == fact


def facts_problem(data: object) -> str | None:
    """Say what makes a facts file unusable (None when it is as `benchlib vsphere facts` writes it)."""
    if not isinstance(data, dict) or not isinstance(data.get("vms"), list):
        return "no 'vms' list"
    for index, vm in enumerate(data["vms"]):
        where = f"vms[{index}]"
        if not isinstance(vm, dict) or not isinstance(vm.get("vm"), str):
            return f"{where} is not a VM with a name"
        if not isinstance(vm.get("disks", []), list) or not all(isinstance(d, dict) for d in vm.get("disks", [])):
            return f"{where} disks is not a list of disks"
        if not isinstance(vm.get("datastores", {}), dict) or not all(
            isinstance(d, dict) for d in vm.get("datastores", {}).values()
        ):
            return f"{where} datastores is not a table of datastores"
        for disk in vm.get("disks", []):
            if any(not isinstance(disk.get(k), str | None) for k in ("controller", "label", "datastore")):
                return f"{where} has a disk whose controller, label or datastore is not text"
    return None


def esxi_problem(data: object) -> str | None:
    """Say what makes an esxcli record unusable (None when it is as `benchlib run` writes it)."""
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        return "not an object of ESXi hosts"
    for host, listed in data.items():
        devices = listed.get("devices", [])
        if not isinstance(devices, list) or not all(isinstance(d, dict) for d in devices):
            return f"{host}: devices is not a list of devices"
    return None


def read_facts_files(folder: Path, rels: list[str]) -> tuple[dict[str, dict], list[str]]:
    """Return the study's facts files by their folder, and a reason for each one that cannot be read."""
    import json

    facts, problems = {}, []
    for rel in rels:
        try:
            data = json.loads((folder / rel).read_text(encoding="utf-8"))
            problem = facts_problem(data)
            if problem:
                raise ValueError(problem)
        except (OSError, ValueError) as exc:
            problems.append(f"{rel}: not a facts file of `benchlib vsphere facts` ({exc})")
            continue
        facts[str(Path(rel).parent)] = data
    return facts, problems
