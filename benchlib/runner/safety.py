"""Writing is dangerous: decide whether fio may touch a target.

Rules (DESIGN.md contract 9):

* A **file** target is used only if benchlib created it. benchlib creates it
  (never over an existing file) and leaves a marker beside it,
  ``<file>.benchlib-target``; a file that exists without the marker, or that was
  replaced since (other inode), is refused.
* A **block device** is never written unless the user named that exact device
  with ``--destroy-data=<device>``. Even then a device that is in use (mounted,
  active swap, or held by LVM, RAID, dm-crypt... in ``holders/``) is refused:
  writing under a live file system corrupts it. What the device holds
  (partitions, file-system, LVM, RAID or swap signatures, or any non-zero
  bytes at its start) is named in the message, so the user knows what would go.

Device facts come from sysfs and procfs, whose roots are parameters so the
logic is tested on fixture trees.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from benchlib.errors import BenchlibError

MARKER_SUFFIX = ".benchlib-target"
_HEAD_BYTES = 1 << 20

# (byte offset, magic, what it means): the signatures blkid/wipefs report most often.
SIGNATURES: tuple[tuple[int, bytes, str], ...] = (
    (0, b"XFSB", "xfs file system"),
    (0, b"LUKS\xba\xbe", "LUKS encrypted volume"),
    (3, b"NTFS    ", "NTFS file system"),
    (510, b"\x55\xaa", "DOS/MBR partition table or boot sector"),
    (512, b"EFI PART", "GPT partition table"),
    (512, b"LABELONE", "LVM physical volume"),
    (1024, b"LABELONE", "LVM physical volume"),
    (1080, b"\x53\xef", "ext2/3/4 file system"),
    (4096, b"\xfc\x4e\x2b\xa9", "Linux RAID (md 1.2) member"),
    (0, b"\xfc\x4e\x2b\xa9", "Linux RAID (md 1.1) member"),
    (4086, b"SWAPSPACE2", "swap space"),
    (4086, b"SWAP-SPACE", "swap space"),
    (32769, b"CD001", "ISO 9660 image"),
    (65600, b"_BHRfS_M", "btrfs file system"),
    (131072, b"\x0c\xb1\xba\x00", "ZFS pool member"),
)


class UnsafeTargetError(BenchlibError):
    """A target fio would write to might hold data, and the user did not say it may be destroyed."""


@dataclass
class DeviceReport:
    """What a block device holds and who uses it."""

    device: str
    partitions: list[str] = field(default_factory=list)
    holders: list[str] = field(default_factory=list)
    mounts: list[str] = field(default_factory=list)
    swaps: list[str] = field(default_factory=list)
    signatures: list[str] = field(default_factory=list)

    @property
    def in_use(self) -> list[str]:
        """Reasons the device is in use right now (mounted, swap, holders)."""
        return ([f"mounted at {m}" for m in self.mounts] + [f"active swap {s}" for s in self.swaps]
                + [f"held by {h}" for h in self.holders])

    @property
    def contents(self) -> list[str]:
        """What the device appears to hold."""
        return [f"partition {p}" for p in self.partitions] + self.signatures


def scan_signatures(path: str | Path) -> list[str]:
    """Known signatures in the first MiB of a device or image (read-only), or "non-zero data" when unknown."""
    with open(path, "rb") as handle:
        head = handle.read(_HEAD_BYTES)
    found = []
    for offset, magic, name in SIGNATURES:
        if head[offset:offset + len(magic)] == magic and name not in found:
            found.append(name)
    if not found and head.strip(b"\0"):
        found.append("non-zero data in its first MiB (no signature benchlib knows)")
    return found


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""


def _partitions_and_holders(node: Path, report: DeviceReport, ids: dict[str, str]) -> None:
    for child in sorted(node.iterdir()):
        if (child / "partition").exists():
            report.partitions.append(child.name)
            ids[_read(child / "dev")] = child.name
    for folder in [node] + [node / p for p in report.partitions]:
        holders = folder / "holders"
        if holders.is_dir():
            report.holders.extend(f"{h.name} (on {folder.name})" for h in sorted(holders.iterdir()))


def inspect_device(
    device: str | Path,
    *,
    sysfs: Path = Path("/sys"),
    procfs: Path = Path("/proc"),
    dev_id: tuple[int, int] | None = None,
) -> DeviceReport:
    """Partitions, holders, mounts, swap and signatures of a block device.

    ``dev_id`` (major, minor) stands in for the device's own number when
    ``device`` is an image file (tests); otherwise ``device`` must be a block device.
    """
    device = Path(device)
    if dev_id is None:
        st = os.stat(device)
        if not stat.S_ISBLK(st.st_mode):
            raise UnsafeTargetError(f"{device} is not a block device; use file = ... in [target] for a file")
        dev_id = (os.major(st.st_rdev), os.minor(st.st_rdev))
    report = DeviceReport(device=str(device))
    node = (sysfs / "dev" / "block" / f"{dev_id[0]}:{dev_id[1]}").resolve()  # a link to .../block/<name>
    ids = {f"{dev_id[0]}:{dev_id[1]}": node.name if node.is_dir() else device.name}
    if node.is_dir():
        _partitions_and_holders(node, report, ids)
    for line in _read(procfs / "self" / "mountinfo").splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[2] in ids:
            report.mounts.append(f"{fields[4]} ({ids[fields[2]]})")
    names = set(ids.values())
    for line in _read(procfs / "swaps").splitlines()[1:]:
        swap = (line.split() or [""])[0]
        if Path(swap).name in names or os.path.realpath(swap) == os.path.realpath(device):
            report.swaps.append(swap)
    report.signatures = scan_signatures(device)
    return report


def check_device(
    device: str,
    *,
    writes: bool,
    destroy_data: str | None,
    sysfs: Path = Path("/sys"),
    procfs: Path = Path("/proc"),
    dev_id: tuple[int, int] | None = None,
) -> DeviceReport:
    """Refuse a device fio must not touch; return what it holds when it may.

    Raises
    ------
    UnsafeTargetError
        When the device is in use, or the plan writes to it and ``destroy_data`` is not exactly ``device``.
    """
    report = inspect_device(device, sysfs=sysfs, procfs=procfs, dev_id=dev_id)
    if report.in_use:
        raise UnsafeTargetError(
            f"{device} is in use ({'; '.join(report.in_use)}); benchlib never writes to a device in use. "
            "Unmount it, swapoff it or remove what holds it first, or choose another device"
        )
    if writes and destroy_data != device:
        held = "; ".join(report.contents) or "no signature benchlib recognises, but it cannot tell raw data from none"
        raise UnsafeTargetError(
            f"{device}: the plan writes to this device, destroying what it holds ({held}). "
            f"If that may be destroyed, pass --destroy-data={device}"
        )
    return report


def marker_for(path: str | Path) -> Path:
    """The marker benchlib leaves beside a file target it created."""
    path = Path(path)
    return path.with_name(path.name + MARKER_SUFFIX)


def check_file(path: str | Path) -> bool:
    """Whether a local file target is usable: True if benchlib created it, False if it does not exist yet.

    Raises
    ------
    UnsafeTargetError
        When the path exists and benchlib did not create it (or it was replaced since).
    """
    path = Path(path)
    marker = marker_for(path)
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise UnsafeTargetError(f"{path} exists and is not a regular file; benchlib only uses files it creates "
                                "(for a block device write device = ... in [target])")
    if not path.exists():
        return False
    if not marker.exists():
        raise UnsafeTargetError(f"{path} exists and benchlib did not create it (no {marker.name} beside it); "
                                "benchlib only writes to files it created. Choose a new path in [target]")
    try:
        created = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        created = {}
    st = path.stat()
    if created.get("inode") != st.st_ino or created.get("device") != st.st_dev:
        raise UnsafeTargetError(f"{path} was replaced since benchlib created it ({marker.name} names another file); "
                                "choose a new path in [target]")
    return True


def create_file(path: str | Path, size: int = 0) -> None:
    """Create a file target of ``size`` bytes (never over an existing one) and its marker.

    The file is written in full here: fio re-creates (unlinks, then creates) a
    file smaller than the job's size, which would give it a new inode and make
    the marker name another file; a sparse file would make reads free.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        raise UnsafeTargetError(f"{path} appeared while benchlib was creating it; choose a new path") from None
    try:
        chunk = os.urandom(1 << 20)
        written = 0
        while written < size:
            written += os.write(fd, chunk[: min(len(chunk), size - written)])
        os.fsync(fd)
        st = os.fstat(fd)
    finally:
        os.close(fd)
    marker_for(path).write_text(json.dumps({"created_by": "benchlib", "inode": st.st_ino, "device": st.st_dev}) + "\n",
                                encoding="utf-8")
