"""esxcli's device lists: queue depths, path selection policy, the Round Robin IO operation limit."""

from __future__ import annotations

import pytest

from benchlib.esxcli import EsxcliError, host_devices, parse_device_list, parse_nmp_device_list
from tests.conftest import ROOT

TEXT = ROOT / "tests" / "data" / "esxcli"


def test_device_list_gives_each_devices_queue_depths() -> None:
    devices = {d["device"]: d for d in parse_device_list((TEXT / "core-device-list.txt").read_text())}
    assert list(devices) == [
        "naa.624a9370b1c2d3e4f5a6b7c800011001",
        "t10.NVMe____Example_SSD_2TB_________________________0001A2B3C4D5E6F7",
        "mpx.vmhba0:C0:T0:L0",  # its line ends in a colon; its keys are tab-indented
    ]
    pure = devices["naa.624a9370b1c2d3e4f5a6b7c800011001"]
    assert (pure["device_max_queue_depth"], pure["outstanding_ios_competing_worlds"]) == (64, 32)
    assert (pure["size_mb"], pure["multipath_plugin"], pure["is_local"], pure["is_ssd"]) == (
        2097152,
        "NMP",
        False,
        True,
    )
    nvme = devices["t10.NVMe____Example_SSD_2TB_________________________0001A2B3C4D5E6F7"]
    assert (nvme["device_max_queue_depth"], nvme["outstanding_ios_competing_worlds"]) == (1023, 32)  # ESXi 8 wording
    assert nvme["is_ssd"] is None  # not printed: unknown, not False
    assert devices["mpx.vmhba0:C0:T0:L0"]["device_max_queue_depth"] == 1


def test_nmp_device_list_gives_the_policy_and_the_round_robin_limit() -> None:
    devices = {d["device"]: d for d in parse_nmp_device_list((TEXT / "nmp-device-list.txt").read_text())}
    limits = {
        name[:12]: (d["path_policy"], d["rr_limit_type"], d["rr_iops_limit"], d["rr_bytes_limit"], d["working_paths"])
        for name, d in devices.items()
    }
    assert limits == {
        "naa.624a9370": ("VMW_PSP_RR", "iops", 1, None, 4),  # the IO operation limit set to 1
        "naa.600a0980": ("VMW_PSP_RR", "default", 1000, None, 2),  # Round Robin as installed: 1,000 I/Os
        "naa.60060160": ("VMW_PSP_MRU", None, None, None, 1),
        "naa.60a98000": ("VMW_PSP_RR", "bytes", None, 1048576, 2),
    }


def test_both_lists_join_by_device() -> None:
    joined = host_devices((TEXT / "core-device-list.txt").read_text(), (TEXT / "nmp-device-list.txt").read_text())
    pure = next(d for d in joined if d["device"] == "naa.624a9370b1c2d3e4f5a6b7c800011001")
    assert (pure["device_max_queue_depth"], pure["rr_iops_limit"], pure["working_paths"]) == (64, 1, 4)
    assert len(joined) == 6  # 3 + 4 devices, one in both


@pytest.mark.parametrize("text", ["", "esxcli: command not found\n", "   Path Selection Policy: VMW_PSP_RR\n"])
def test_text_that_is_not_the_command_output_says_what_was_expected(text: str) -> None:
    with pytest.raises(EsxcliError, match="no device blocks"):
        parse_nmp_device_list(text)


def test_another_commands_text_or_format_is_refused_not_read_as_empty_devices() -> None:
    core, nmp = ((TEXT / f).read_text() for f in ("core-device-list.txt", "nmp-device-list.txt"))
    with pytest.raises(EsxcliError, match="no 'Path Selection Policy' line"):
        parse_nmp_device_list(core)  # each command's text given as the other's
    with pytest.raises(EsxcliError, match="no 'Display Name' line"):
        parse_device_list(nmp)
    unindented = "\n".join(line.strip() for line in nmp.splitlines())
    with pytest.raises(EsxcliError, match="keys that are not indented"):
        parse_nmp_device_list(unindented)
    csv = "Device,Storage Array Type,Path Selection Policy\nnaa.1,VMW_SATP_ALUA,VMW_PSP_RR\n"
    with pytest.raises(EsxcliError):
        parse_nmp_device_list(csv)


def test_odd_but_real_text_reads_the_same_or_says_unknown() -> None:
    nmp = (TEXT / "nmp-device-list.txt").read_text()
    plain = parse_nmp_device_list(nmp)
    assert parse_nmp_device_list("\ufeff" + nmp.replace("\n", "\r\n")) == plain  # a BOM and CRLF change nothing
    cut = nmp[: nmp.rindex("Working Paths")]  # a session that ended before the last device's paths
    assert parse_nmp_device_list(cut)[-1]["working_paths"] is None  # unknown, not 0
    core = (
        (TEXT / "core-device-list.txt").read_text().replace("Device Max Queue Depth: 64", "Device Max Queue Depth: ²")
    )
    assert (
        next(d for d in parse_device_list(core) if d["device"].startswith("naa.624a"))["device_max_queue_depth"] is None
    )
