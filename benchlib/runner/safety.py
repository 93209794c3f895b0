"""Writing is dangerous: decide whether fio may touch a target.

Rules (DESIGN.md contract 9):

* A **file** target is used only if benchlib created it. benchlib creates it
  (never over an existing file, never larger than the free space): the region
  fio works in, then 4 KiB holding a random token (:class:`FileClaim`), recorded
  in benchlib's state folder on this machine, never in a study. A path that is
  a link, a file with a second hard link, another inode, or a file without the
  token (a user's file re-created under a reused inode number) is refused; the
  marker ``<file>.benchlib-target`` beside it is for people and proves nothing.
* A **block device** is never written unless the user named that exact device
  with ``--destroy-data=<device>``. Even then a device that is in use (mounted,
  in this or any other mount namespace, active swap, held by LVM, RAID,
  dm-crypt... in ``holders/``, opened exclusively by anyone, or under a loop
  device: backed by it, its disk, its partitions or its own backing file) is refused: writing under a live file system
  corrupts it. What the device holds (partitions, file-system, LVM, RAID or swap
  signatures, any non-zero bytes at its start, the file behind a loop device)
  is named in the message, so the user knows what would go.
* Both are checked again immediately before every cell (:mod:`benchlib.runner.targets`), and
  a local target is handed to fio as a descriptor benchlib opened (``/dev/fd/N``),
  a device held with ``O_EXCL`` so that nothing can mount it while fio runs.

Device facts come from sysfs and procfs, whose roots are parameters so the
logic is tested on fixture trees.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import secrets
import shutil
import stat
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from benchlib.errors import BenchlibError
from benchlib.runner.vocabulary import file_target_problem

MARKER_SUFFIX = ".benchlib-target"
TAIL_BYTES = 4096  # after the region fio works in: the claim's token
_HEAD_BYTES = 1 << 20
_SPARE_BYTES = 64 << 20  # free space a file target must leave on its file system

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
    busy: list[str] = field(default_factory=list)
    loops: list[str] = field(default_factory=list)
    backing: str | None = None
    rdev: int | None = None

    @property
    def in_use(self) -> list[str]:
        """Reasons the device is in use right now (mounted, swap, holders, exclusive users, loop devices on it)."""
        return (
            [f"mounted at {m}" for m in self.mounts]
            + [f"active swap {s}" for s in self.swaps]
            + [f"held by {h}" for h in self.holders]
            + self.busy
            + [f"the loop device {lo} sits on its storage" for lo in self.loops]
        )

    @property
    def contents(self) -> list[str]:
        """What the device appears to hold."""
        behind = [f"the loop device's backing file {self.backing}"] if self.backing else []
        return [f"partition {p}" for p in self.partitions] + self.signatures + behind


def scan_signatures(path: str | Path) -> list[str]:
    """Known signatures in the first MiB of a device or image (read-only), or "non-zero data" when unknown."""
    with open(path, "rb") as handle:
        head = handle.read(_HEAD_BYTES)
    found = []
    for offset, magic, name in SIGNATURES:
        if head[offset : offset + len(magic)] == magic and name not in found:
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
    whole = [node.parent] if (node / "partition").exists() else []  # a partition's disk held whole (dm, RAID)
    for folder in [node] + [node / p for p in report.partitions] + whole:
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
    fixture = dev_id is not None
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
    if not fixture:
        report.rdev = os.stat(device).st_rdev
        report.busy = _exclusive_users(device) + _open_by_processes(report.rdev)
    report.loops, report.backing = _loop_relations(node, sysfs)
    return report


def _open_by_processes(rdev: int, procfs: Path = Path("/proc")) -> list[str]:
    """Process holding the device open (a VM's disk, an NBD or iSCSI target): what ``fuser`` reports."""
    users = []
    me = os.getpid()
    for proc in procfs.iterdir():
        if not proc.name.isdigit() or int(proc.name) == me:
            continue
        try:
            for fd in os.scandir(proc / "fd"):
                target = os.readlink(fd.path)
                if target.startswith("/dev/") and os.stat(fd.path).st_rdev == rdev:
                    name = (proc / "comm").read_text().strip()
                    users.append(f"open in process {proc.name} ({name})")
                    break
        except OSError:
            continue
    return users


def _exclusive_users(device: Path) -> list[str]:
    """Tell whether the kernel lets benchlib claim the device.

    Whether the kernel lets benchlib claim the device: it refuses when the device is mounted (in any mount
    namespace), a swap area, or held by device mapper, RAID or another exclusive opener.
    """
    try:
        os.close(os.open(device, os.O_RDONLY | os.O_EXCL))
    except OSError as exc:
        if exc.errno == errno.EBUSY:
            return [
                "opened exclusively by someone else (mounted, perhaps in another mount namespace or container, "
                "or claimed by swap, device mapper or RAID)"
            ]
        raise UnsafeTargetError(f"{device}: cannot open it to check whether it is in use ({exc.strerror})") from None
    return []


def _dev_id(text: str) -> tuple[int, int] | None:
    major, _, minor = text.partition(":")
    return (int(major), int(minor)) if major.isdigit() and minor.isdigit() else None


def _storage_of(node: Path) -> set[tuple[int, int]]:
    """Return the device itself, its parent disk (for a partition) and its partitions.

    Writing the device writes their storage.
    """
    nodes = [node] + [c for c in node.iterdir() if (c / "partition").exists()]
    if (node / "partition").exists():
        nodes.append(node.parent)
    return {d for n in nodes if (d := _dev_id(_read(n / "dev")))}


_LOOP_GET_STATUS64 = 0x4C05


def _backing_of(loop: Path) -> tuple[str, tuple] | None:
    """Return what a loop device sits on: ``("dev", (major, minor))`` or ``("file", (st_dev, st_ino))``.

    Asked of the loop driver itself (``LOOP_GET_STATUS64``), so a backing file that was deleted or
    is visible only in another mount namespace is still known; the path in sysfs is the fallback.
    """
    if not _read(loop / "loop" / "backing_file"):
        return None
    numbers = _dev_id(_read(loop / "dev"))
    try:
        fd = os.open(f"/dev/{loop.name}", os.O_RDONLY)
        try:
            if numbers and os.fstat(fd).st_rdev != os.makedev(*numbers):
                raise OSError("another device")
            info = fcntl.ioctl(fd, _LOOP_GET_STATUS64, bytes(232))
        finally:
            os.close(fd)
        device, inode, rdevice = struct.unpack_from("=QQQ", info)
    except OSError:
        try:
            st = os.stat(_read(loop / "loop" / "backing_file").removesuffix(" (deleted)"))
        except OSError:
            return "unknown", (loop.name,)
        device, inode, rdevice = st.st_dev, st.st_ino, st.st_rdev if stat.S_ISBLK(st.st_mode) else 0
    if rdevice:
        return "dev", (os.major(rdevice), os.minor(rdevice))
    return "file", (device, inode)


def _loop_backed_by(st: os.stat_result, sysfs: Path = Path("/sys/block")) -> str | None:
    """Return the loop device a file backs (``/dev/loop3``), or None: a file system may live in it."""
    for node in sorted(sysfs.glob("loop*")):
        backing = _backing_of(node) if (node / "loop").is_dir() else None
        if backing and backing[0] == "file" and backing[1] == (st.st_dev, st.st_ino):
            return f"/dev/{node.name}"
    return None


def _loop_relations(node: Path, sysfs: Path) -> tuple[list[str], str | None]:
    """Loop devices on the same storage as this device, and this loop device's own backing file.

    A loop device counts when its backing is this device, its parent disk or one of its
    partitions, or (for a loop device) the same backing file: writing here writes under it.
    """
    if not node.is_dir():
        return [], None
    storage = {("dev", d) for d in _storage_of(node)}
    own = _backing_of(node)
    if own and own[0] == "file":
        storage.add(own)
    users = []
    for loop in sorted((sysfs / "block").glob("loop*")):
        if loop.resolve() != node and _backing_of(loop) in storage:
            users.append(f"/dev/{loop.name}")
    backing = _read(node / "loop" / "backing_file")
    return users, backing or None


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
        When the device is in use (or, for a loop device, the block device behind it is), or the
        plan writes to it and ``destroy_data`` is not exactly ``device``.

    """
    report = inspect_device(device, sysfs=sysfs, procfs=procfs, dev_id=dev_id)
    in_use = list(report.in_use)
    if report.backing and dev_id is None and _is_block(report.backing):
        behind = inspect_device(report.backing, sysfs=sysfs, procfs=procfs)
        in_use += [
            f"its backing device {report.backing} is {reason}"
            for reason in behind.in_use
            if reason != f"the loop device /dev/{Path(os.path.realpath(device)).name} sits on its storage"
        ]
    if in_use:
        raise UnsafeTargetError(
            f"{device} is in use ({'; '.join(in_use)}); benchlib never writes to a device in use. "
            "Unmount it, swapoff it or remove what holds it first, or choose another device"
        )
    if writes and destroy_data != device:
        held = "; ".join(report.contents) or "no signature benchlib recognises, but it cannot tell raw data from none"
        real = os.path.realpath(device)
        named = f" (the name of {real})" if real != device else ""  # a link: say which device it writes
        raise UnsafeTargetError(
            f"{device}{named}: the plan writes to this device, destroying what it holds ({held}). "
            f"If that may be destroyed, pass --destroy-data={device}"
        )
    return report


def device_identity(device: str | Path) -> dict:
    """Return what identifies a block device across reboots.

    Return what identifies a block device across reboots and re-attachments: its number and size, its serial
    or WWID where the disk reports one, and for a loop device the file behind it.
    """
    st = os.stat(device)
    node = Path(f"/sys/dev/block/{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}").resolve()
    identity: dict = {"dev": f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}", "sectors": _read(node / "size")}
    for name in ("wwid", "serial"):
        if value := _read(node / "device" / name) or _read(node / name):
            identity[name] = value
    backing = _backing_of(node) if (node / "loop").is_dir() else None
    if backing:
        identity["backing"] = f"{backing[0]} {backing[1]}"
    return identity


def _is_block(path: str) -> bool:
    try:
        return stat.S_ISBLK(os.stat(path).st_mode)
    except OSError:
        return False


@contextlib.contextmanager
def held_exclusively(device: str, rdev: int | None = None) -> Iterator[int]:
    """Hold a local device open with ``O_EXCL`` while fio runs, and give the descriptor (for ``/dev/fd/N``).

    The kernel then refuses to mount the device, swap on it or hand it to device mapper or
    RAID; fio's own opens (without ``O_EXCL``) still work.
    """
    try:
        fd = os.open(device, os.O_RDONLY | os.O_EXCL)
    except OSError as exc:
        raise UnsafeTargetError(
            f"{device} became busy ({exc.strerror}): something mounted or claimed it; nothing was written in this cell"
        ) from None
    if rdev is not None and os.fstat(fd).st_rdev != rdev:
        os.close(fd)
        raise UnsafeTargetError(
            f"{device} now names another device than the one benchlib checked (a link "
            "changed); nothing was written in this cell"
        )
    try:
        yield fd
    finally:
        os.close(fd)


def marker_for(path: str | Path) -> Path:
    """Return the marker benchlib leaves beside a file target it created.

    It is for people; the proof is the study's record.
    """
    path = Path(path)
    return path.with_name(path.name + MARKER_SUFFIX)


@dataclass(frozen=True)
class FileClaim:
    """What benchlib recorded when it created a file target.

    The file holds ``size`` bytes for fio (the region every job works in) and then
    :data:`TAIL_BYTES` filled with ``token`` repeated: fio never reaches them, so a file
    that still holds the token there is the file benchlib created, whatever its name
    or inode number has been since. ``inode`` and ``device`` are known for local files.
    ``written`` is when the whole region was last written (ISO 8601, UTC), None while it has not
    been: reading a region never written reads unwritten extents, which cost the disk nothing.
    """

    token: str
    size: int
    inode: int | None = None
    device: int | None = None
    written: str | None = None

    def tail(self) -> bytes:
        """Return the bytes after the region: the token repeated."""
        return bytes.fromhex(self.token) * (TAIL_BYTES // 16)

    def as_record(self) -> dict:
        """Return the claim as benchlib records it (:func:`benchlib.runner.targets.read_record`)."""
        return {k: v for k, v in vars(self).items() if v is not None}

    @classmethod
    def from_record(cls, record: object) -> FileClaim | None:
        """Return a recorded claim, or None when the record is not one."""
        if not isinstance(record, dict) or not isinstance(record.get("token"), str) or len(record["token"]) != 32:
            return None
        try:
            bytes.fromhex(record["token"])
            written = record.get("written")
            if written is None and record.get("inode") is not None:
                written = "at creation"  # create_file has always written a local region in full
            return cls(
                token=record["token"],
                size=int(record["size"]),
                inode=record.get("inode"),
                device=record.get("device"),
                written=str(written) if written is not None else None,
            )
        except (KeyError, TypeError, ValueError):
            return None


def now() -> str:
    """Return the time now as the record keeps it (ISO 8601, UTC, to the second)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_claim(size: int) -> FileClaim:
    """Return a claim with a fresh random token, for a file not created yet."""
    return FileClaim(token=secrets.token_hex(16), size=size)


def _refuse_file(path: Path, why: str) -> UnsafeTargetError:
    return UnsafeTargetError(
        f"{path}: {why}; benchlib only writes to files it created itself. Choose a new path in [target]"
    )


def _marker_is_ours(path: Path) -> bool:
    """Whether a marker file is missing or one benchlib wrote (so it may be written again)."""
    marker = marker_for(path)
    if not marker.exists() and not marker.is_symlink():
        return True
    try:
        return (
            not marker.is_symlink() and json.loads(marker.read_text(encoding="utf-8")).get("created_by") == "benchlib"
        )
    except (OSError, ValueError, AttributeError):
        return False


def _tail_of(path: Path, size: int) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        return os.pread(fd, TAIL_BYTES, size)
    finally:
        os.close(fd)


def check_file(path: str | Path, claim: FileClaim | None, size: int) -> bool:
    """Whether a local file target is usable: True if benchlib created it, False if it does not exist yet.

    Parameters
    ----------
    path
        The target.
    claim
        What benchlib recorded when it created the file (None: it did not).
    size
        The region the plan asks for now.

    Raises
    ------
    UnsafeTargetError
        When the path exists and benchlib did not create it, or it was replaced, linked or resized since.

    """
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not _marker_is_ours(path):
            raise _refuse_file(
                path,
                f"it does not exist, but {marker_for(path).name} beside it is someone's file, "
                "which benchlib would write over",
            ) from None
        return False
    if not stat.S_ISREG(st.st_mode):
        raise _refuse_file(
            path,
            "it exists and is not a regular file (a link, a folder or a device: for a block "
            "device write device = ... in [target])",
        )
    if st.st_nlink != 1:
        raise _refuse_file(path, f"it has {st.st_nlink} hard links, so writing it writes another name's file too")
    if loop := _loop_backed_by(st):
        raise _refuse_file(path, f"it is the file behind {loop}, so writing it writes whatever that device holds")
    if claim is None:
        raise _refuse_file(
            path, "it exists and benchlib did not create it (benchlib's record of its targets does not name it)"
        )
    if (claim.inode, claim.device) != (st.st_ino, st.st_dev):
        raise _refuse_file(path, "it was replaced since benchlib created it (another file now has its name)")
    if claim.size != size:
        raise _refuse_file(
            path,
            f"benchlib created it for a region of {claim.size:,} bytes and the plan now asks "
            f"for {size:,}; fio would re-create it",
        )
    if _tail_of(path, claim.size) != claim.tail():
        raise _refuse_file(
            path,
            "it does not hold the token benchlib wrote after its region (a file re-created "
            "under the same inode number, or changed by something else)",
        )
    return True


def create_file(path: str | Path, size: int) -> FileClaim:
    """Create a local file target: ``size`` bytes of random data, then the claim's token; return the claim.

    Never over an existing file, never when its file system lacks the space; if writing fails
    (out of space, an I/O error) the file and its marker are removed. The file is written in
    full: fio re-creates (unlinks, then creates) a file smaller than the job's size, and a
    sparse file would make reads free.
    """
    path = Path(path)
    real = os.path.realpath(path)
    if (problem := file_target_problem(real)) is not None:  # a link may lead into a system folder
        raise _refuse_file(path, f"it leads to {real}: {problem}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(path.parent).free
    except OSError as exc:
        raise UnsafeTargetError(
            f"{path}: cannot create the target's folder ({exc.strerror}); choose another place"
        ) from None
    if size + TAIL_BYTES + _SPARE_BYTES > free:
        raise UnsafeTargetError(
            f"{path}: the target needs {size:,} bytes and its file system has {free:,} free "
            f"(benchlib leaves {_SPARE_BYTES >> 20} MiB spare); choose a smaller size or another place"
        )
    if not _marker_is_ours(path):
        raise _refuse_file(
            path, f"{marker_for(path).name} beside it is someone's file, which benchlib would write over"
        )
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        raise UnsafeTargetError(f"{path} appeared while benchlib was creating it; choose a new path") from None
    except OSError as exc:
        raise UnsafeTargetError(f"{path}: cannot create the target ({exc.strerror}); choose another place") from None
    try:
        st = os.fstat(fd)
        claim = FileClaim(token=secrets.token_hex(16), size=size, inode=st.st_ino, device=st.st_dev, written=now())
        chunk = os.urandom(1 << 20)
        written = 0
        while written < size:
            written += os.write(fd, chunk[: min(len(chunk), size - written)])
        os.write(fd, claim.tail())
        os.fsync(fd)
        marker = {"created_by": "benchlib", "inode": st.st_ino, "device": st.st_dev, "size": size}
        replace_file(marker_for(path), json.dumps(marker) + "\n")
    except OSError as exc:
        os.close(fd)
        path.unlink(missing_ok=True)
        marker_for(path).unlink(missing_ok=True)
        raise UnsafeTargetError(
            f"{path}: creating the target failed ({exc.strerror}); nothing is left behind"
        ) from None
    os.close(fd)
    return claim


def open_claimed(path: str | Path, claim: FileClaim) -> int:
    """Open a claimed local file for fio to use through ``/dev/fd/N``.

    The descriptor stays on this file whatever happens to its name or folders while fio runs.

    Raises
    ------
    UnsafeTargetError
        When the path no longer leads to the claimed file.

    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise UnsafeTargetError(
            f"{path}: cannot open the target ({exc.strerror}); nothing was written in this cell"
        ) from None
    st = os.fstat(fd)
    if (st.st_ino, st.st_dev) != (claim.inode, claim.device) or os.pread(fd, TAIL_BYTES, claim.size) != claim.tail():
        os.close(fd)
        raise _refuse_file(Path(path), "it changed between benchlib's check and the cell's start")
    return fd


def replace_file(path: Path, text: str) -> None:
    """Write a file of benchlib's own, never through a link.

    Write a file of benchlib's own through a new temporary file renamed over it: a link left at ``path`` is
    replaced, never followed.
    """
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    with open(temporary, "x", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temporary, path)


def recheck_device(device: str, first: DeviceReport, *, writes: bool, destroy_data: str | None) -> None:
    """Before a cell: the device is the same one (same device number) and still passes :func:`check_device`.

    Raises
    ------
    UnsafeTargetError
        When the path now names another device, or the device is in use, or the cell writes without the flag.

    """
    now = check_device(device, writes=writes, destroy_data=destroy_data)
    if now.rdev != first.rdev:
        raise UnsafeTargetError(
            f"{device} now names another device than when the run started (a link changed); "
            "nothing was written in this cell"
        )
