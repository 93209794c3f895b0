"""Target safety: the rules of benchlib.runner.safety on sysfs-like fixture trees, real
file-system images, file targets, and a real loop device where the machine allows it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from benchlib.runner.safety import (
    UnsafeTargetError,
    check_device,
    check_file,
    create_file,
    inspect_device,
    marker_for,
    scan_signatures,
)

DEV = (8, 16)


def _image(tmp_path: Path, name: str = "disk.img", size: int = 8 << 20) -> Path:
    image = tmp_path / name
    with open(image, "wb") as handle:
        handle.truncate(size)
    return image


def _sysfs(tmp_path: Path, partitions: dict[str, str] = {}, holders: dict[str, list[str]] = {}) -> Path:  # noqa: B006
    """A /sys/dev/block/8:16 tree like the kernel's for sdb, with the given partitions and holders."""
    node = tmp_path / "sys" / "devices" / "pci0000:00" / "block" / "sdb"
    (node / "holders").mkdir(parents=True)
    (tmp_path / "sys" / "dev" / "block").mkdir(parents=True)
    (tmp_path / "sys" / "dev" / "block" / f"{DEV[0]}:{DEV[1]}").symlink_to(node)
    (node / "queue").mkdir()
    (node / "dev").write_text(f"{DEV[0]}:{DEV[1]}\n")
    for name, dev in partitions.items():
        (node / name / "holders").mkdir(parents=True)
        (node / name / "partition").write_text("1\n")
        (node / name / "dev").write_text(f"{dev}\n")
    for owner, names in holders.items():
        folder = node / "holders" if owner == "sdb" else node / owner / "holders"
        for holder in names:
            (folder / holder).mkdir()
    return tmp_path / "sys"


def _procfs(tmp_path: Path, mountinfo: str = "", swaps: str = "") -> Path:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "mountinfo").write_text("22 1 0:21 / /proc rw,nosuid - proc proc rw\n" + mountinfo)
    (proc / "swaps").write_text("Filename\tType\tSize\tUsed\tPriority\n" + swaps)
    return proc


def test_blank_unused_device_needs_its_exact_name_to_be_written(tmp_path: Path) -> None:
    image = _image(tmp_path)
    sysfs, procfs = _sysfs(tmp_path), _procfs(tmp_path)
    report = inspect_device(image, sysfs=sysfs, procfs=procfs, dev_id=DEV)
    assert report.in_use == [] and report.contents == []
    with pytest.raises(UnsafeTargetError, match=f"pass --destroy-data={image}") as caught:
        check_device(str(image), writes=True, destroy_data=None, sysfs=sysfs, procfs=procfs, dev_id=DEV)
    assert "cannot tell raw data from none" in str(caught.value)
    with pytest.raises(UnsafeTargetError):  # another device's name is not this one's
        check_device(str(image), writes=True, destroy_data="/dev/sdc", sysfs=sysfs, procfs=procfs, dev_id=DEV)
    check_device(str(image), writes=True, destroy_data=str(image), sysfs=sysfs, procfs=procfs, dev_id=DEV)
    check_device(str(image), writes=False, destroy_data=None, sysfs=sysfs, procfs=procfs, dev_id=DEV)  # reads only
    alias = tmp_path / "alias"
    alias.symlink_to(image)  # a name that is a link: the refusal says which device it would write
    with pytest.raises(UnsafeTargetError, match=f"{alias} \\(the name of {image}\\): the plan writes"):
        check_device(str(alias), writes=True, destroy_data=None, sysfs=sysfs, procfs=procfs, dev_id=DEV)


def test_partitions_are_named_and_need_the_flag(tmp_path: Path) -> None:
    image = _image(tmp_path)
    sysfs = _sysfs(tmp_path, partitions={"sdb1": "8:17", "sdb2": "8:18"})
    with pytest.raises(UnsafeTargetError, match="partition sdb1; partition sdb2"):
        check_device(str(image), writes=True, destroy_data=None, sysfs=sysfs, procfs=_procfs(tmp_path), dev_id=DEV)


@pytest.mark.parametrize(
    ("mountinfo", "swaps", "holders", "reason"),
    [
        ("36 25 8:17 / /data rw,relatime - ext4 /dev/sdb1 rw\n", "", {}, "mounted at /data (sdb1)"),
        ("36 25 8:16 / /mnt/raw rw - xfs /dev/sdb rw\n", "", {}, "mounted at /mnt/raw (sdb)"),
        ("", "/dev/sdb2\tpartition\t1048572\t0\t-2\n", {}, "active swap /dev/sdb2"),
        ("", "", {"sdb": ["dm-0"]}, "held by dm-0 (on sdb)"),
        ("", "", {"sdb1": ["md127"]}, "held by md127 (on sdb1)"),
    ],
)
def test_a_device_in_use_is_refused_even_with_the_flag(
    tmp_path: Path, mountinfo: str, swaps: str, holders: dict, reason: str
) -> None:
    image = _image(tmp_path)
    sysfs = _sysfs(tmp_path, partitions={"sdb1": "8:17", "sdb2": "8:18"}, holders=holders)
    procfs = _procfs(tmp_path, mountinfo, swaps)
    with pytest.raises(UnsafeTargetError, match="benchlib never writes to a device in use") as caught:
        check_device(str(image), writes=True, destroy_data=str(image), sysfs=sysfs, procfs=procfs, dev_id=DEV)
    assert reason in str(caught.value)


@pytest.mark.parametrize(
    ("tool", "args", "found"),
    [
        ("mkfs.ext4", ["-q", "-F"], "ext2/3/4 file system"),
        ("mkswap", [], "swap space"),
    ],
)
def test_real_signatures_are_found(tmp_path: Path, tool: str, args: list[str], found: str) -> None:
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed")
    image = _image(tmp_path)
    subprocess.run([tool, *args, str(image)], check=True, capture_output=True)
    assert found in scan_signatures(image)
    with pytest.raises(UnsafeTargetError, match=found.replace("/", ".")):
        check_device(
            str(image), writes=True, destroy_data=None, sysfs=_sysfs(tmp_path), procfs=_procfs(tmp_path), dev_id=DEV
        )


@pytest.mark.parametrize(
    ("offset", "magic", "found"),
    [
        (0, b"XFSB", "xfs file system"),
        (512, b"LABELONE", "LVM physical volume"),
        (4096, b"\xfc\x4e\x2b\xa9", "Linux RAID"),
        (512, b"EFI PART", "GPT partition table"),
        (65600, b"_BHRfS_M", "btrfs"),
        (100_000, b"hello", "non-zero data"),
    ],
)
def test_signature_offsets(tmp_path: Path, offset: int, magic: bytes, found: str) -> None:
    image = _image(tmp_path)
    with open(image, "r+b") as handle:
        handle.seek(offset)
        handle.write(magic)
    assert any(found in s for s in scan_signatures(image))


def test_not_a_block_device(tmp_path: Path) -> None:
    with pytest.raises(UnsafeTargetError, match="not a block device"):
        inspect_device(_image(tmp_path))


def test_file_targets_only_when_benchlib_created_them(tmp_path: Path) -> None:
    target = tmp_path / "targets" / "vm1.dat"
    assert check_file(target, None, 3 << 20) is False  # does not exist yet: benchlib may create it
    claim = create_file(target, 3 << 20)
    assert marker_for(target).exists() and target.stat().st_size == (3 << 20) + 4096
    assert target.stat().st_blocks * 512 >= 3 << 20  # written, not sparse
    assert target.read_bytes()[3 << 20 :] == bytes.fromhex(claim.token) * 256  # the token after the region
    assert check_file(target, claim, 3 << 20) is True
    with pytest.raises(UnsafeTargetError, match="did not create it"):  # without the study's record it is not ours
        check_file(target, None, 3 << 20)
    with pytest.raises(UnsafeTargetError, match="plan now asks for"):  # fio would re-create a file grown in the plan
        check_file(target, claim, 4 << 20)
    with pytest.raises(UnsafeTargetError, match="appeared while"):
        create_file(target, 1 << 20)

    foreign = tmp_path / "precious.db"
    foreign.write_bytes(b"someone's data")
    with pytest.raises(UnsafeTargetError, match="benchlib did not create it"):
        check_file(foreign, None, 1 << 20)
    forged = json.loads(marker_for(target).read_text()) | {"inode": foreign.stat().st_ino, "xattr": False}
    marker_for(foreign).write_text(json.dumps(forged))  # a marker anyone could write proves nothing
    with pytest.raises(UnsafeTargetError, match="benchlib did not create it"):
        check_file(foreign, None, 1 << 20)
    assert foreign.read_bytes() == b"someone's data"

    replacement = tmp_path / "targets" / "new.dat"  # replaced by another file of the same name
    replacement.write_bytes(b"new data")
    replacement.rename(target)
    with pytest.raises(UnsafeTargetError, match="was replaced since benchlib created it"):
        check_file(target, claim, 3 << 20)

    link = tmp_path / "link.dat"
    link.symlink_to(foreign)
    with pytest.raises(UnsafeTargetError, match="not a regular file"):
        check_file(link, claim, 3 << 20)
    with pytest.raises(UnsafeTargetError, match="not a regular file"):
        check_file(tmp_path, claim, 3 << 20)

    squatted = tmp_path / "targets" / "vm2.dat"
    marker_for(squatted).write_text("a user's notes")  # a file where benchlib would put its marker
    with pytest.raises(UnsafeTargetError, match="is someone's file"):
        create_file(squatted, 1 << 20)
    assert marker_for(squatted).read_text() == "a user's notes" and not squatted.exists()


def _loop_device(image: Path) -> str:
    if os.geteuid() != 0 or shutil.which("losetup") is None:
        pytest.skip("loop devices need root and losetup")
    done = subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True, text=True, check=False)
    if done.returncode:
        pytest.skip(f"this machine does not allow loop devices ({done.stderr.strip()})")
    return done.stdout.strip()


def test_real_loop_device(tmp_path: Path) -> None:
    image = _image(tmp_path)
    device = _loop_device(image)
    try:
        with pytest.raises(UnsafeTargetError, match=f"pass --destroy-data={device}"):
            check_device(device, writes=True, destroy_data=None)
        report = check_device(device, writes=True, destroy_data=device)
        assert report.in_use == [] and report.contents == [f"the loop device's backing file {image}"]
        subprocess.run(["mkfs.ext4", "-q", "-F", device], check=True, capture_output=True)
        with pytest.raises(UnsafeTargetError, match="ext2/3/4 file system"):
            check_device(device, writes=True, destroy_data=None)
    finally:
        subprocess.run(["losetup", "--detach", device], check=False)
