"""What only an ESXi host knows, from the text of its ``esxcli`` commands.

- ``esxcli storage core device list``: per device, ``Device Max Queue Depth`` and ``No of
  outstanding IOs with competing worlds`` (DSNRO; ESXi 8 for NVMe prints ``IOs with competing
  worlds``), its multipath plugin, size, whether it is local or an SSD.
- ``esxcli storage nmp device list``: per device, the storage array type, the path selection
  policy and, for Round Robin, its device config: ``{policy=rr,iops=1000,bytes=10485760,...}``
  is the default limit type (switch paths every 1,000 I/Os), ``policy=iops,iops=1`` the IO
  operation limit the multipath studies vary, ``policy=bytes`` a byte limit,
  ``policy=latency`` latency-based selection; and the working paths.

Both print one block per device: the device's name alone on a line (some builds add a colon),
then indented ``Key: Value`` lines. Text from a shell session (a prompt line, tabs instead of
spaces) reads the same. :func:`parse_device_list` and :func:`parse_nmp_device_list` return one
dict per device; :func:`host_devices` joins the two.
"""

from __future__ import annotations

import re

from benchlib.errors import BenchlibError

_KEY = re.compile(r"^\s+([A-Za-z][^:]*?):\s?(.*)$")
_DEVICE = re.compile(r"^\s*((?:naa|eui|t10|mpx|vml|uuid|sym|nvme|vvol)\.[^\s,;]+?):?\s*$")
_PSP_CONFIG = re.compile(r"(\w+)=([^,;}\s]+)")
#: Round Robin's limit types, by the ``policy=`` word of its device config
_RR_TYPES = {"rr": "default", "iops": "iops", "bytes": "bytes", "latency": "latency"}


class EsxcliError(BenchlibError):
    """Text that is not the output of the esxcli command it was given as."""


def _blocks(text: str, command: str, needs: str) -> dict[str, dict[str, str]]:
    """Return ``device -> {key: value}`` from esxcli's per-device blocks.

    ``needs``: a key every real output of ``command`` has in its blocks; text without it anywhere
    (another command's output, a CSV or unindented text) is refused, not read as devices without facts.
    """
    devices: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in text.lstrip("\ufeff").expandtabs(4).splitlines():
        device = _DEVICE.match(line)
        if device:
            current = devices.setdefault(device[1], {})
            continue
        pair = _KEY.match(line)
        if pair and current is not None:
            current[pair[1].strip()] = re.sub(r"</?strong>", "", pair[2]).strip()
    if not devices:
        raise EsxcliError(
            f"no device blocks in the text given as `{command}` output: a device name (naa., eui., t10., mpx. ...) "
            "alone on a line, then indented 'Key: Value' lines"
        )
    if not any(needs in keys for keys in devices.values()):
        raise EsxcliError(
            f"no '{needs}' line in any device block: this is not the output of `{command}` "
            "(another command's, a different format, or keys that are not indented)"
        )
    return devices


def _integer(value: str | None) -> int | None:
    """Return a whole number esxcli printed (ASCII digits only: "²" is a digit to Python, not a depth)."""
    return int(value) if value is not None and re.fullmatch(r"[0-9]+", value.strip()) else None


def _flag(value: str | None) -> bool | None:
    return {"true": True, "false": False}.get((value or "").strip().lower())


def parse_device_list(text: str) -> list[dict]:
    """Read ``esxcli storage core device list``: one dict per device (queue depths, plugin, size in MB)."""
    out = []
    for device, keys in _blocks(text, "esxcli storage core device list", "Display Name").items():
        competing = keys.get("No of outstanding IOs with competing worlds", keys.get("IOs with competing worlds"))
        out.append(
            {
                "device": device,
                "display_name": keys.get("Display Name"),
                "size_mb": _integer(keys.get("Size")),
                "multipath_plugin": keys.get("Multipath Plugin"),
                "is_local": _flag(keys.get("Is Local")),
                "is_ssd": _flag(keys.get("Is SSD")),
                "device_max_queue_depth": _integer(keys.get("Device Max Queue Depth")),
                "outstanding_ios_competing_worlds": _integer(competing),
            }
        )
    return out


def parse_nmp_device_list(text: str) -> list[dict]:
    """Read ``esxcli storage nmp device list``: one dict per device (policy, Round Robin limit, paths)."""
    out = []
    for device, keys in _blocks(text, "esxcli storage nmp device list", "Path Selection Policy").items():
        psp = keys.get("Path Selection Policy")
        config = dict(_PSP_CONFIG.findall(keys.get("Path Selection Policy Device Config", "")))
        limit_type = _RR_TYPES.get(config.get("policy", "")) if psp == "VMW_PSP_RR" else None
        paths = [p.strip() for p in keys.get("Working Paths", "").split(",") if p.strip()]
        out.append(
            {
                "device": device,
                "storage_array_type": keys.get("Storage Array Type"),
                "path_policy": psp,
                "rr_limit_type": limit_type,
                # the IO operation limit applies to the default and iops types (1,000 unless set)
                "rr_iops_limit": _integer(config.get("iops")) if limit_type in ("default", "iops") else None,
                "rr_bytes_limit": _integer(config.get("bytes")) if limit_type == "bytes" else None,
                "working_paths": len(paths) if "Working Paths" in keys else None,  # cut-off text: unknown, not 0
            }
        )
    return out


def host_devices(device_list: str, nmp_device_list: str) -> list[dict]:
    """Join both commands' devices by name (a device only one of them lists keeps the other's keys empty)."""
    core = {d["device"]: d for d in parse_device_list(device_list)}
    nmp = {d["device"]: d for d in parse_nmp_device_list(nmp_device_list)}
    return [{**core.get(name, {}), **nmp.get(name, {}), "device": name} for name in sorted(core.keys() | nmp.keys())]
