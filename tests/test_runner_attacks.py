"""What was tried against `benchlib run` as an attacker and a careless user would, as regression tests.

Every case runs the real runner (or the real CLI) against loop devices holding an ext4 file
system and against files holding a user's data, all made here; the device or file is
checksummed before and after and must be unchanged. Loop devices and mounts need root; the
tests skip with the reason elsewhere."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchlib.runner import PlanError, load_plan, read_plan, run_plan
from benchlib.runner.execute import RunError, cell_dir
from benchlib.runner.reading import FioRefusedJob
from benchlib.runner.safety import UnsafeTargetError, check_device, check_file, create_file, marker_for
from tests.fio_helpers import fio_server

pytestmark = pytest.mark.fio

PLAN = """
[study]
name = "attack"
[run]
runtime_s = 1
repetitions = 1
output = "study"
[target]
{target}
size = "8MiB"
[options]
ioengine = "psync"
direct = 0
{options}
[[profiles]]
name = "{profile}"
options = {{ {profile_options} }}
"""


def _digest(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _root_with(*tools: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("loop devices and mounts need root (CI runs as root)")
    for tool in tools:
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")


def _attach(device: str, backing: str | Path) -> None:
    """Attach ``backing`` to ``device`` again (a test's own high-numbered device: ``losetup -f`` never reaches it)."""
    subprocess.run(["losetup", device, str(backing)], check=True)


@contextlib.contextmanager
def _loop(backing: str | Path) -> Iterator[str]:
    """A loop device of the test's own, numbered far above those ``losetup --find`` gives other processes.

    Tests that detach and re-attach a device by its number (a swap, a "reboot") would otherwise race any
    process on the machine taking the lowest free loop device in between.
    """
    done = None
    for attempt in range(20):
        number = 300 + (os.getpid() * 7 + attempt * 13) % 600
        if Path(f"/sys/block/loop{number}/loop").is_dir():  # bound already
            continue
        done = subprocess.run(
            ["losetup", f"/dev/loop{number}", str(backing)], capture_output=True, text=True, check=False
        )
        if done.returncode == 0:
            break
    if done is None or done.returncode:
        pytest.skip(f"this machine does not allow loop devices ({done.stderr.strip() if done else 'none free'})")
    device = f"/dev/loop{number}"
    try:
        yield device
    finally:
        subprocess.run(["losetup", "--detach", device], check=False)


@pytest.fixture
def ext4_device(tmp_path: Path) -> Iterator[str]:
    """An unmounted loop device holding an ext4 file system with a file on it: a disk someone cares about."""
    _root_with("losetup", "mkfs.ext4")
    image = tmp_path / "disk.img"
    with open(image, "wb") as handle:
        handle.truncate(32 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-d", str(_tree(tmp_path)), str(image)], check=True, capture_output=True)
    with _loop(image) as device:
        yield device


def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir(exist_ok=True)
    (tree / "thesis.txt").write_text("years of work\n" * 1000)
    return tree


def _write_plan(
    tmp_path: Path, *, target: str, profile: str = "p", profile_options: str = 'rw = "randread"', options: str = ""
) -> Path:
    path = tmp_path / "plan.toml"
    path.write_text(
        PLAN.format(target=target, profile=profile, profile_options=profile_options, options=options), encoding="utf-8"
    )
    return path


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "benchlib.cli", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=300
    )


@pytest.mark.parametrize(
    "profile_options",
    [
        'readwrite = "randwrite"',  # fio's alias of rw
        'rw = "randwrite:4k"',  # the :N suffix
        'rw = "randrw", rwmixread = 100, rwmixwrite = 50',  # the last share set wins: 50% writes
        'rw = "randtrimwrite"',
        'rw = "trim"',
        'rw = "read", overwrite = 1',
        'rw = "read", overwrite = "01"',  # fio reads 01 as true: anything but a clear no counts as writing
    ],
)
def test_writing_spelled_any_way_needs_the_flag(tmp_path: Path, ext4_device: str, profile_options: str) -> None:
    before = _digest(ext4_device)
    plan_path = _write_plan(tmp_path, target=f'device = "{ext4_device}"', profile_options=profile_options)
    done = _cli("run", str(plan_path), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "the plan writes to this device, destroying what it holds (ext2/3/4 file system" in done.stderr
    assert f"--destroy-data={ext4_device}" in done.stderr and "Traceback" not in done.stderr
    assert _digest(ext4_device) == before
    dry = _cli("run", str(plan_path), "--dry-run", cwd=tmp_path)
    assert f"-> WRITES {ext4_device}" in dry.stdout and "1 writing cells" in dry.stdout


def test_a_reading_cell_reads_and_fio_itself_refuses_writes(tmp_path: Path, ext4_device: str) -> None:
    before = _digest(ext4_device)
    plan_path = _write_plan(tmp_path, target=f'device = "{ext4_device}"', profile_options='rw = "randread"')
    done = _cli("run", str(plan_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert _digest(ext4_device) == before
    job = next((tmp_path / "study").rglob("benchlib-run.json")).read_text()
    assert '"--readonly"' in job  # fio was told this cell must not write


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"profile_options": 'rw = "randread", bs = "4k\\nfilename=/dev/loop9"'}, "control character"),
        ({"profile_options": 'rw = "randread", "bs\\nfilename" = "/dev/loop9"'}, "control character"),
        ({"profile": "p]\\nfilename=/dev/loop9\\nrw=write\\n[q"}, "a profile name is letters, digits"),
        ({"profile": "global"}, "section whose name starts with global"),
        ({"profile": "globalx"}, "section whose name starts with global"),
        ({"profile": "../../elsewhere"}, "a profile name is letters, digits"),
        ({"profile": "/tmp/abs"}, "a profile name is letters, digits"),
        ({"profile_options": 'rw = "randread", zonemode = "strided"'}, "zones can reach beyond it"),
        ({"profile_options": 'rw = "randread"', "options": "[matrix.qd]\nlevel = [1]"}, "unknown keys ['level']"),
        ({"profile_options": 'rw = "randread"', "options": '[hosts]\nservers = "localhost"'}, "must be a list"),
        ({"profile_options": 'rw = "randread", exec_prerun = "touch /tmp/pwned"'}, "--allow-option=exec_prerun"),
        ({"profile_options": 'rw = "randread", write_iolog = "/etc/passwd"'}, "writes a file of its own choosing"),
        ({"profile_options": 'rw = "randread", ioengine = "external:/tmp/evil.so"'}, "--allow-option=ioengine"),
        ({"profile_options": 'rw = "randread", iomem = "mmaphuge:/etc/x"'}, "a file fio creates"),
        ({"profile_options": 'rw = "randread", include = "/etc/x"'}, "fio has no such option"),
        ({"profile_options": 'rw = "randread", bs = "${HOME}"'}, "environment variable"),
        ({"profile_options": 'rw = "randread", timeout = 9999'}, "benchlib sets timeout itself"),
        ({"options": 'bs = ["4k", "8k"]'}, "is not a single value"),
        ({"profile_options": 'rw = "write", buffer_pattern = "\'/etc/shadow\'"'}, "names a file"),
        ({"options": "[hosts]\nport = 70000"}, "at most 65,535"),
    ],
)
def test_job_lines_come_from_a_closed_vocabulary(tmp_path: Path, change: dict, message: str) -> None:
    plan_path = _write_plan(tmp_path, target=f'file = "{tmp_path}/t/{{host}}.dat"', **change)
    with pytest.raises(PlanError, match=message.replace("[", r"\[").replace("$", r"\$")):
        load_plan(plan_path)


def test_matrix_levels_and_hosts_are_checked_too(tmp_path: Path) -> None:
    plan_path = _write_plan(
        tmp_path,
        target=f'file = "{tmp_path}/t/{{host}}.dat"',
        options='[matrix.block_size]\noption = "bs"\nlevels = ["4k", "4k\\nfilename=/dev/loop9"]',
    )
    with pytest.raises(PlanError, match="control character"):
        load_plan(plan_path)
    plan_path.write_text(
        plan_path.read_text().replace('levels = ["4k", "4k\\nfilename=/dev/loop9"]', 'levels = ["4k"]')
        + '[hosts]\nservers = ["../../etc/x"]\n'
    )
    with pytest.raises(PlanError, match="a fio server is a host name"):
        load_plan(plan_path)


@pytest.mark.parametrize(
    "path",
    [
        "{tmp}/x/bench:1.dat",
        "{tmp}/x/x.dat:/dev/loop9",
        "{tmp}/x/user.dat\\n",
        " {tmp}/x/user.dat",
        "x/relative.dat",
        "{tmp}/x/user.dat#.bench",  # fio's job reader ends the name at '#' or ';': it would open user.dat
        "{tmp}/x/user.dat;.bench",
        "{tmp}/x/$ncpus.dat",
    ],
)
def test_target_paths_fio_would_read_otherwise_are_refused(tmp_path: Path, path: str) -> None:
    user = tmp_path / "x" / "bench"
    user.parent.mkdir()
    user.write_text("someone's data")
    (tmp_path / "x" / "user.dat").write_text("someone's data")
    plan_path = _write_plan(
        tmp_path, target=f'file = "{path.format(tmp=tmp_path)}"', profile_options='rw = "randwrite"'
    )
    with pytest.raises(PlanError, match=r"\[target\] file"):
        load_plan(plan_path)
    assert user.read_text() == "someone's data" and (tmp_path / "x" / "user.dat").read_text() == "someone's data"


def test_fio_says_which_files_a_job_opens(tmp_path: Path, fio_binary: str) -> None:
    plan = load_plan(_write_plan(tmp_path, target=f'file = "{tmp_path}/t/{{host}}.dat"'))
    reading = read_plan(plan, fio_binary)
    assert reading.files == {("p", "local"): (f"{tmp_path}/t/local.dat",)} and not reading.writing
    allowed = load_plan(
        _write_plan(
            tmp_path, target=f'file = "{tmp_path}/t/{{host}}.dat"', profile_options='rw = "randread", bs = "banana"'
        )
    )
    with pytest.raises(FioRefusedJob, match="fio does not accept job p on local"):
        read_plan(allowed, fio_binary)


@contextlib.contextmanager
def _mounted_elsewhere(device: str, tmp_path: Path) -> Iterator[Path]:
    """The device mounted in a mount namespace of its own (invisible in this one's mount table)."""
    _root_with("unshare", "mount")
    point = tmp_path / "mnt"
    point.mkdir()
    holder = subprocess.Popen(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            f"mount {device} {point} && echo mounted && sleep 120",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        if holder.stdout.readline().strip() != "mounted":  # type: ignore[union-attr]
            pytest.skip("cannot mount in a new mount namespace here")
        yield point
    finally:
        holder.kill()
        holder.wait()


def test_a_device_mounted_in_another_mount_namespace_is_in_use(tmp_path: Path, ext4_device: str) -> None:
    with _mounted_elsewhere(ext4_device, tmp_path) as point:
        assert str(point) not in Path("/proc/self/mountinfo").read_text()  # invisible from here
        plan_path = _write_plan(tmp_path, target=f'device = "{ext4_device}"', profile_options='rw = "randwrite"')
        done = _cli("run", str(plan_path), f"--destroy-data={ext4_device}", cwd=tmp_path)
        assert done.returncode == 2 and "is in use (opened exclusively by someone else (mounted" in done.stderr
        assert not list((tmp_path / "study").rglob("*.fio"))  # refused before any job was written
    # the mounted file system itself writes to its device, so no checksum here: it must be intact
    time.sleep(0.5)
    check = subprocess.run(["e2fsck", "-fn", ext4_device], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr


@contextlib.contextmanager
def _mounted_loop_over_loop(tmp_path: Path) -> Iterator[tuple[str, str, Path]]:
    """``(lower, upper, mount point)``: a loop device over a loop device, its ext4 mounted."""
    _root_with("losetup", "mkfs.ext4", "mount")
    image = tmp_path / "raw.img"
    with open(image, "wb") as handle:
        handle.truncate(32 << 20)
    with _loop(image) as lower, _loop(lower) as upper:
        subprocess.run(["mkfs.ext4", "-q", "-F", upper], check=True, capture_output=True)
        point = tmp_path / "mnt"
        point.mkdir()
        subprocess.run(["mount", upper, str(point)], check=True)
        try:
            yield lower, upper, point
        finally:
            subprocess.run(["umount", str(point)], check=False)


def test_the_backing_device_of_a_mounted_loop_device_is_in_use(tmp_path: Path) -> None:
    with _mounted_loop_over_loop(tmp_path) as (lower, upper, point):
        (point / "data.txt").write_text("live data")
        before = _digest(lower)
        with pytest.raises(UnsafeTargetError, match=f"the loop device {upper} sits on its storage"):
            check_device(lower, writes=True, destroy_data=lower)
        with pytest.raises(UnsafeTargetError, match="is in use"):
            check_device(upper, writes=True, destroy_data=upper)  # and the mounted one is in use anyway
        assert _digest(lower) == before


def _two_cell_plan(tmp_path: Path) -> Path:
    return _write_plan(
        tmp_path,
        target=f'file = "{tmp_path}/t/{{host}}.dat"',
        profile_options='rw = "randwrite"',
        options='[matrix.block_size]\noption = "bs"\nlevels = ["4k", "8k"]',
    )


def _two_cell_device_plan(tmp_path: Path, device: object) -> Path:
    """A plan writing to ``device`` in two cells (4k, then 8k blocks): a swap between them meets a re-check."""
    return _write_plan(
        tmp_path,
        target=f'device = "{device}"',
        profile_options='rw = "randwrite"',
        options='[matrix.block_size]\noption = "bs"\nlevels = ["4k", "8k"]',
    )


def _fill(*images: Path) -> None:
    """8 MiB images holding a recognisable pattern: a write anywhere changes their digest."""
    for image in images:
        image.write_bytes(b"PRECIOUS-" * ((8 << 20) // 9))


def _swap_after_first_cell(swap: object) -> object:
    def progress(done: float, total: float, label: str) -> None:
        if label.startswith("1/") and done >= total / 2 and not getattr(progress, "swapped", False):
            progress.swapped = True  # type: ignore[attr-defined]
            swap()  # type: ignore[operator]

    return progress


@pytest.mark.parametrize("how", ["symlink", "hardlink", "recreated"])
def test_a_target_swapped_mid_plan_is_refused_before_the_next_cell(tmp_path: Path, how: str) -> None:
    plan = load_plan(_two_cell_plan(tmp_path))
    target = Path(plan.target.path_for("local"))
    user = tmp_path / "precious.db"
    user.write_bytes(os.urandom(1 << 20))
    before = _digest(user)

    def swap() -> None:
        target.unlink()
        if how == "symlink":
            target.symlink_to(user)
        elif how == "hardlink":
            os.link(user, target)
        else:  # the user's own file under the same name (and possibly the same inode number)
            shutil.copyfile(user, target)

    with pytest.raises(UnsafeTargetError, match="nothing was written in this cell|only writes to files it created"):
        run_plan(plan, progress=_swap_after_first_cell(swap))  # type: ignore[arg-type]
    assert _digest(user) == before
    assert len(list(plan.output.rglob("benchlib-run.json"))) == 1  # the first cell ran, the second did not


def test_a_recreated_file_with_the_old_inode_number_is_not_ours(tmp_path: Path) -> None:
    target = tmp_path / "t" / "local.dat"
    claim = create_file(target, 1 << 20)
    target.unlink()
    target.write_bytes(b"user data" * 200_000)  # ext4 hands out the freed inode number again more often than not
    st = os.stat(target)
    reused = type(claim)(token=claim.token, size=claim.size, inode=st.st_ino, device=st.st_dev)
    with pytest.raises(UnsafeTargetError, match="does not hold the token"):
        check_file(target, reused, 1 << 20)
    assert target.read_bytes() == b"user data" * 200_000


def test_a_target_larger_than_the_free_space_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    free = shutil.disk_usage(tmp_path).free
    plan_path = _write_plan(tmp_path, target=f'file = "{tmp_path}/t/{{host}}.dat"', profile_options='rw = "randwrite"')
    plan_path.write_text(plan_path.read_text().replace('size = "8MiB"', f'size = "{free + (1 << 30)}"'))
    done = _cli("run", str(plan_path), cwd=tmp_path)
    assert done.returncode == 2 and "free" in done.stderr and "choose a smaller size" in done.stderr
    assert not (tmp_path / "t" / "local.dat").exists() and not marker_for(tmp_path / "t" / "local.dat").exists()


def test_a_file_of_4_kib_beside_a_remote_target_is_not_a_marker(tmp_path: Path, fio_binary: str) -> None:
    from benchlib.runner.targets import Targets

    port = 8791
    server = subprocess.Popen(
        [fio_binary, f"--server=127.0.0.1,{port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        time.sleep(0.5)
        plan_path = _write_plan(
            tmp_path, target=f'file = "{tmp_path}/t/{{host}}.dat"', profile_options='rw = "randwrite"'
        )
        plan_path.write_text(plan_path.read_text() + f'[hosts]\nservers = ["127.0.0.1"]\nport = {port}\n')
        plan = load_plan(plan_path)
        target = Path(plan.target.path_for("127.0.0.1"))
        target.parent.mkdir()
        target.write_bytes(os.urandom(1 << 20))
        marker_for(target).write_bytes(os.urandom(4096))
        before = _digest(target)
        with pytest.raises(UnsafeTargetError, match="exists and benchlib did not create it"):
            Targets(plan, fio_binary, None).prepare(["127.0.0.1"], writes=True)
        assert _digest(target) == before
        target.unlink()  # no target, but someone's file where the marker would go
        with pytest.raises(UnsafeTargetError, match="is not benchlib's marker"):
            Targets(plan, fio_binary, None).prepare(["127.0.0.1"], writes=True)
        assert not target.exists() and marker_for(target).stat().st_size == 4096
    finally:
        server.terminate()
        server.wait()


def test_a_device_link_pointed_elsewhere_mid_plan_is_refused(tmp_path: Path, ext4_device: str) -> None:
    blank = tmp_path / "blank.img"
    with open(blank, "wb") as handle:
        handle.truncate(32 << 20)
    with _loop(blank) as scratch:
        link = tmp_path / "by-id" / "bench-disk"
        link.parent.mkdir()
        link.symlink_to(scratch)
        plan_path = _two_cell_device_plan(tmp_path, link)
        before = _digest(ext4_device)

        def swap() -> None:
            link.unlink()
            link.symlink_to(ext4_device)

        plan = load_plan(plan_path)
        with pytest.raises(UnsafeTargetError, match="now names another device|ext2/3/4"):
            run_plan(plan, destroy_data=str(link), progress=_swap_after_first_cell(swap))  # type: ignore[arg-type]
        assert _digest(ext4_device) == before
        assert len(list(plan.output.rglob("benchlib-run.json"))) == 1


@pytest.mark.parametrize(
    "options",
    [
        '[matrix.qd]\noption = "iodepth"\nlevels = ["1"]\n[[profiles]]\nname = "q"\noptions = { bs = "4k" }\n'
        'sweep = { factor = "profile", option = "rw", levels = ["write", "read"] }',
        '[matrix.tag]\nlevels = ["w!", "w?"]',
    ],
)
def test_two_cells_never_share_a_folder(tmp_path: Path, options: str) -> None:
    plan_path = _write_plan(tmp_path, target=f'file = "{tmp_path}/t/{{host}}.dat"', options=options)
    with pytest.raises(PlanError, match="clashes with a matrix factor or column|two cells would share the folder"):
        load_plan(plan_path)


def test_markup_in_a_refusal_is_printed_as_text(tmp_path: Path) -> None:
    plan_path = _write_plan(tmp_path, target='file = "/tmp/[/x]/a:b.dat"')
    done = _cli("run", str(plan_path), "--dry-run", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "[target] file: '/tmp/[/x]/a:b.dat' is refused" in done.stderr


def _run_fio_on(fio: str, tmp_path: Path, target: str, fd: int) -> None:
    job = tmp_path / "swap.fio"
    job.write_text(f"[w]\nfilename=/dev/fd/{fd}\nrw=write\nbs=64k\nsize=4m\nioengine=psync\n")
    subprocess.run([fio, str(job)], capture_output=True, check=True, pass_fds=(fd,), timeout=60)


def test_a_name_swapped_after_the_check_does_not_redirect_fio(
    tmp_path: Path, fio_binary: str, ext4_device: str
) -> None:
    from benchlib.runner.targets import Targets

    plan = load_plan(
        _write_plan(tmp_path, target=f'file = "{tmp_path}/dir/{{host}}.dat"', profile_options='rw = "write"')
    )
    guard = Targets(plan, fio_binary, None)
    guard.prepare(["local"], writes=True)
    victims = tmp_path / "victims"
    victims.mkdir()
    (victims / "local.dat").write_bytes(os.urandom(8 << 20))
    before = _digest(victims / "local.dat")
    with guard.opened(["local"]) as fds:
        (tmp_path / "dir").rename(tmp_path / "dir.real")  # the folder swapped between check and fio's open
        (tmp_path / "dir").symlink_to(victims)
        _run_fio_on(fio_binary, tmp_path, "local", fds["local"])
    assert _digest(victims / "local.dat") == before
    with pytest.raises(UnsafeTargetError):  # and the next cell's check sees the swap
        guard.recheck(["local"], writes=True)

    blank = tmp_path / "blank.img"
    with open(blank, "wb") as handle:
        handle.truncate(16 << 20)
    with _loop(blank) as scratch:
        link = tmp_path / "disk"
        link.symlink_to(scratch)
        plan = load_plan(_write_plan(tmp_path, target=f'device = "{link}"', profile_options='rw = "write"'))
        guard = Targets(plan, fio_binary, str(link))
        guard.prepare(["local"], writes=True)
        victim = _digest(ext4_device)
        with guard.opened(["local"]) as fds:
            link.unlink()
            link.symlink_to(ext4_device)  # the device link swapped between check and fio's open
            _run_fio_on(fio_binary, tmp_path, "local", fds["local"])
        assert _digest(ext4_device) == victim


def test_a_loop_device_sharing_a_backing_file_with_a_mounted_one_is_in_use(tmp_path: Path, ext4_device: str) -> None:
    _root_with("mount")
    backing = subprocess.run(
        ["losetup", "--noheadings", "-O", "BACK-FILE", ext4_device], capture_output=True, text=True, check=True
    ).stdout.strip()
    point = tmp_path / "mnt"
    point.mkdir()
    subprocess.run(["mount", ext4_device, str(point)], check=True)
    try:
        with _loop(backing) as twin:
            with pytest.raises(UnsafeTargetError, match=f"the loop device {ext4_device} sits on its storage"):
                check_device(twin, writes=True, destroy_data=twin)
    finally:
        subprocess.run(["umount", str(point)], check=False)


def _partition_nodes(disk: str, tmp_path: Path) -> list[str]:
    """The partitions' device nodes: /dev's where udev made them, else made here from sysfs (containers)."""
    name = Path(disk).name
    if not (Path("/sys/block") / name / f"{name}p1").exists() and shutil.which("partx"):
        subprocess.run(["partx", "--add", disk], capture_output=True, check=False)  # where the kernel did not scan
    if not (Path("/sys/block") / name / f"{name}p1").exists():
        pytest.skip("this kernel gives loop devices no partitions")
    nodes = []
    for number in (1, 2):
        node = Path(f"{disk}p{number}")
        for _ in range(30):
            if node.exists() or (Path("/sys/block") / name / f"{name}p{number}" / "dev").exists():
                break
            time.sleep(0.1)
        if not node.exists():
            numbers = (Path("/sys/block") / name / f"{name}p{number}" / "dev").read_text().strip().split(":")
            node = tmp_path / f"{name}p{number}"
            os.mknod(node, 0o600 | stat.S_IFBLK, os.makedev(int(numbers[0]), int(numbers[1])))
        nodes.append(str(node))
    return nodes


def test_a_partition_and_its_disk_share_storage(tmp_path: Path) -> None:
    _root_with("losetup", "sfdisk", "mkfs.ext4", "mount")
    image = tmp_path / "parted.img"
    with open(image, "wb") as handle:
        handle.truncate(64 << 20)
    subprocess.run(
        ["sfdisk", "--quiet", str(image)], input="label: dos\n,30M\n,\n", text=True, check=True, capture_output=True
    )
    done = subprocess.run(["losetup", "--find", "--show", "--partscan", str(image)], capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"no partitioned loop devices here ({done.stderr.strip()})")
    disk = done.stdout.strip()
    try:
        parts = _partition_nodes(disk, tmp_path)
        with _loop(disk) as upper:  # a loop device over the whole disk, its file system mounted
            subprocess.run(["mkfs.ext4", "-q", "-F", upper], check=True, capture_output=True)
            point = tmp_path / "mnt"
            point.mkdir()
            subprocess.run(["mount", upper, str(point)], check=True)
            try:
                with pytest.raises(UnsafeTargetError, match=f"the loop device {upper} sits on its storage"):
                    check_device(parts[0], writes=True, destroy_data=parts[0])
            finally:
                subprocess.run(["umount", str(point)], check=False)
        with _loop(parts[1]) as upper:  # a loop device over a partition: the whole disk is under it too
            with pytest.raises(UnsafeTargetError, match=f"the loop device {upper} sits on its storage"):
                check_device(disk, writes=True, destroy_data=disk)
    finally:
        subprocess.run(["losetup", "--detach", disk], check=False)


def test_output_folder_keeps_what_is_not_benchlibs(tmp_path: Path) -> None:
    plan_path = _write_plan(tmp_path, target=f'file = "{tmp_path}/t/{{host}}.dat"')
    plan_path.write_text(plan_path.read_text().replace('output = "study"\n', ""))  # the plan's own folder
    mine = tmp_path / "projects" / ".partial-results"
    mine.mkdir(parents=True)
    (mine / "chapter3.tex").write_text("draft")
    run_plan(load_plan(plan_path))
    assert (mine / "chapter3.tex").read_text() == "draft"


def test_a_server_target_swapped_mid_plan_is_refused(tmp_path: Path, fio_binary: str) -> None:
    port = 8792
    with fio_server(fio_binary, "127.0.0.1", port):
        plan_path = _two_cell_plan(tmp_path)
        plan_path.write_text(plan_path.read_text() + f'[hosts]\nservers = ["127.0.0.1"]\nport = {port}\n')
        plan = load_plan(plan_path)
        target = Path(plan.target.path_for("127.0.0.1"))
        user = tmp_path / "victim.db"
        user.write_bytes(os.urandom(16 << 20))
        before = _digest(user)

        def swap() -> None:
            target.unlink()
            target.symlink_to(user)

        with pytest.raises(UnsafeTargetError, match="no longer holds the token"):
            run_plan(plan, progress=_swap_after_first_cell(swap))  # type: ignore[arg-type]
        assert _digest(user) == before


def test_a_loopback_server_in_another_mount_namespace_is_not_this_machine(tmp_path: Path, fio_binary: str) -> None:
    _root_with("unshare", "mount")
    targets, victims = tmp_path / "t", tmp_path / "victims"
    targets.mkdir()
    victims.mkdir()
    (victims / "127.0.0.1.dat").write_bytes(os.urandom(1 << 20))
    before = _digest(victims / "127.0.0.1.dat")
    port = 8793
    inside = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        f'mount --bind {victims} {targets} && exec "$0" "$@"',
    ]
    with fio_server(fio_binary, "127.0.0.1", port, *inside):
        from benchlib.runner.targets import servers_sharing_files

        assert (
            servers_sharing_files(["127.0.0.1"], port, fio_binary) == {}
        )  # its files are not benchlib's: asked through fio
        plan_path = _write_plan(tmp_path, target=f'file = "{targets}/{{host}}.dat"', profile_options='rw = "randwrite"')
        plan_path.write_text(plan_path.read_text() + f'[hosts]\nservers = ["127.0.0.1"]\nport = {port}\n')
        with pytest.raises(UnsafeTargetError, match="exists and benchlib did not create it"):
            run_plan(load_plan(plan_path))
    assert _digest(victims / "127.0.0.1.dat") == before


def test_a_server_at_this_machines_own_address_gets_the_local_device_checks(tmp_path: Path, fio_binary: str) -> None:
    from benchlib.runner.targets import _own_addresses

    addresses = sorted(a for a in _own_addresses() if not a.startswith("127.") and ":" not in a)
    if not addresses:
        pytest.skip("this machine has no non-loopback IPv4 address")
    with _mounted_loop_over_loop(tmp_path) as (lower, upper, _), fio_server(fio_binary, addresses[0], 8794):
        plan_path = _write_plan(tmp_path, target=f'device = "{lower}"', profile_options='rw = "randwrite"')
        plan_path.write_text(plan_path.read_text() + f'[hosts]\nservers = ["{addresses[0]}"]\nport = 8794\n')
        with pytest.raises(UnsafeTargetError, match=f"the loop device {upper} sits on its storage"):
            run_plan(load_plan(plan_path), destroy_data=lower)


def test_a_record_in_a_study_folder_proves_nothing(tmp_path: Path) -> None:
    """A study copied from elsewhere may carry any file; benchlib's record of its targets lives in its own state."""
    victim = tmp_path / "vm.img"
    victim.write_bytes(os.urandom(8 << 20) + bytes(8 << 20))
    st = os.stat(victim)
    study = tmp_path / "study"
    study.mkdir()
    forged = {"token": "0" * 32, "size": 8 << 20, "inode": st.st_ino, "device": st.st_dev}
    (study / ".benchlib-targets.json").write_text(__import__("json").dumps({f"local {victim}": forged}))
    before = _digest(victim)
    plan_path = _write_plan(tmp_path, target=f'file = "{victim}"', profile_options='rw = "randwrite"')
    with pytest.raises(UnsafeTargetError, match="benchlib did not create it"):
        run_plan(load_plan(plan_path))
    assert _digest(victim) == before


@pytest.mark.parametrize("name", ["benchlib-plan.json", "study.toml", ".benchlib-run.lock"])
def test_links_in_the_output_folder_are_never_followed(tmp_path: Path, name: str) -> None:
    victims = tmp_path / "victims"
    victims.mkdir()
    (victims / "thesis.txt").write_text("years of work")
    study = tmp_path / "study"
    study.mkdir()
    (study / name).symlink_to(victims / "thesis.txt")
    (study / "dangling.toml").symlink_to(victims / "profile.sh")
    plan_path = _write_plan(tmp_path, target=f'file = "{tmp_path}/t/{{host}}.dat"')
    with pytest.raises(Exception, match="was not written by `benchlib run`|cannot lock"):
        run_plan(load_plan(plan_path))
    assert (victims / "thesis.txt").read_text() == "years of work" and not (victims / "profile.sh").exists()


def test_a_link_among_the_cell_folders_is_refused(tmp_path: Path) -> None:
    photos = tmp_path / "photos"
    (photos / ".partial-attempt-1").mkdir(parents=True)
    (photos / ".partial-attempt-1" / "img001.jpg").write_bytes(b"jpeg")
    plan = load_plan(_write_plan(tmp_path, target=f'file = "{tmp_path}/t/{{host}}.dat"'))
    (plan.output / "p").mkdir(parents=True)
    (plan.output / "p" / "r1").symlink_to(photos)
    with pytest.raises(Exception, match="reached through a link"):
        run_plan(plan)
    assert (photos / ".partial-attempt-1" / "img001.jpg").read_bytes() == b"jpeg"


def test_another_plan_cannot_take_over_a_studys_folder(tmp_path: Path) -> None:
    run_plan(load_plan(_write_plan(tmp_path, target=f'file = "{tmp_path}/t/{{host}}.dat"')))
    moved = _write_plan(tmp_path, target=f'file = "{tmp_path}/t2/{{host}}.dat"')
    with pytest.raises(Exception, match="holds runs made on"):
        run_plan(load_plan(moved))
    other = _write_plan(tmp_path, target=f'file = "{tmp_path}/t/{{host}}.dat"')
    other.write_text(other.read_text().replace('name = "attack"', 'name = "another"\ntitle = "DEL \\u007F"'))
    with pytest.raises(Exception, match="holds the runs of study 'attack'"):
        run_plan(load_plan(other))


def test_device_named_with_a_template_is_refused(tmp_path: Path) -> None:
    plan_path = _write_plan(tmp_path, target='device = "/dev/loop{host}"')
    with pytest.raises(PlanError, match="a device is named exactly"):
        load_plan(plan_path)


def test_a_device_a_process_holds_open_is_in_use(tmp_path: Path, ext4_device: str) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import os, time; fd = os.open({ext4_device!r}, os.O_RDWR); print('open', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "open"  # type: ignore[union-attr]
        with pytest.raises(UnsafeTargetError, match=f"open in process {holder.pid}"):
            check_device(ext4_device, writes=True, destroy_data=ext4_device)
    finally:
        holder.kill()
        holder.wait()


def test_a_server_at_an_unspecified_address_is_this_machine(tmp_path: Path, fio_binary: str, ext4_device: str) -> None:
    with _mounted_elsewhere(ext4_device, tmp_path), fio_server(fio_binary, "127.0.0.1", 8795):
        plan_path = _write_plan(tmp_path, target=f'device = "{ext4_device}"', profile_options='rw = "randwrite"')
        plan_path.write_text(plan_path.read_text() + '[hosts]\nservers = ["0.0.0.0"]\nport = 8795\n')
        with pytest.raises(UnsafeTargetError, match="is in use"):
            run_plan(load_plan(plan_path), destroy_data=ext4_device)


def test_loop_devices_on_a_deleted_backing_file_share_storage(tmp_path: Path) -> None:
    _root_with("losetup", "mkfs.ext4", "mount")
    image = tmp_path / "gone.img"
    with open(image, "wb") as handle:
        handle.truncate(32 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, capture_output=True)
    with _loop(image) as first, _loop(image) as second:
        image.unlink()  # the sysfs path now leads nowhere; the loop driver still knows the file
        point = tmp_path / "mnt"
        point.mkdir()
        subprocess.run(["mount", first, str(point)], check=True)
        try:
            with pytest.raises(UnsafeTargetError, match=f"the loop device {first} sits on its storage"):
                check_device(second, writes=True, destroy_data=second)
        finally:
            subprocess.run(["umount", str(point)], check=False)


def test_a_device_link_changed_after_the_check_is_not_opened(tmp_path: Path, ext4_device: str) -> None:
    from benchlib.runner.safety import held_exclusively

    blank = tmp_path / "blank.img"
    with open(blank, "wb") as handle:
        handle.truncate(8 << 20)
    with _loop(blank) as scratch:
        link = tmp_path / "disk"
        link.symlink_to(ext4_device)  # pointed elsewhere between the check of `scratch` and the open
        with pytest.raises(UnsafeTargetError, match="now names another device"):
            with held_exclusively(str(link), os.stat(scratch).st_rdev):
                pass


def test_the_recorded_study_toml_is_valid_whatever_the_title(tmp_path: Path) -> None:
    import tomllib

    from benchlib.runner.execute import study_toml

    plan_path = _write_plan(tmp_path, target=f'file = "{tmp_path}/t/{{host}}.dat"')
    plan_path.write_text(
        plan_path.read_text().replace('name = "attack"', 'name = "attack"\ntitle = "DEL \\u007F $(id) \\" x"')
    )
    written = tomllib.loads(study_toml(load_plan(plan_path)))
    assert written["study"]["title"] == 'DEL \x7f $(id) " x'


def test_a_plans_levels_in_words_reach_the_study_and_are_checked(tmp_path: Path) -> None:
    """[levels] in a plan is study.toml's: written there for every page, refused as study.toml refuses it."""
    from benchlib.runner.execute import study_toml
    from benchlib.study import load_study

    plan_path = _write_plan(tmp_path, target=f'file = "{tmp_path}/t/{{host}}.dat"', profile="iodepth-sweep")
    plan_path.write_text(plan_path.read_text() + '\n[levels.profile]\n"iodepth-sweep" = "queue depth sweep"\n')
    (tmp_path / "study.toml").write_text(study_toml(load_plan(plan_path)), encoding="utf-8")
    assert load_study(tmp_path).level_words == {"profile": {"iodepth-sweep": "queue depth sweep"}}
    for words, said in (
        ('"iodepth-sweep" = "<script>"', "give the level in words"),
        ('"deep" = "deep queue"', "which is not one of its levels"),
    ):
        plan_path.write_text(plan_path.read_text().rsplit("[levels.profile]", 1)[0] + f"[levels.profile]\n{words}\n")
        with pytest.raises(PlanError, match=said):
            load_plan(plan_path)


def test_a_rerun_stops_when_the_device_path_names_another_device(tmp_path: Path, ext4_device: str) -> None:
    blank = tmp_path / "blank.img"
    with open(blank, "wb") as handle:
        handle.truncate(16 << 20)
    plan_path = _write_plan(
        tmp_path,
        target=f'device = "{ext4_device}"',
        profile_options='rw = "randwrite"',
        options='[matrix.block_size]\noption = "bs"\nlevels = ["4k", "8k"]',
    )
    backing = subprocess.run(
        ["losetup", "--noheadings", "-O", "BACK-FILE", ext4_device], capture_output=True, text=True, check=True
    ).stdout.strip()
    subprocess.run(["losetup", "--detach", ext4_device], check=True)
    _attach(ext4_device, blank)  # the study starts on a scratch image
    run_plan(load_plan(plan_path), destroy_data=ext4_device)
    plan_path.write_text(plan_path.read_text().replace('levels = ["4k", "8k"]', 'levels = ["4k", "8k", "16k"]'))
    plan = load_plan(plan_path)  # one more level: the same command again runs only the new cells
    subprocess.run(["losetup", "--detach", ext4_device], check=True)
    _attach(ext4_device, backing)  # after a "reboot" the name is another disk's
    before = _digest(ext4_device)
    with pytest.raises(UnsafeTargetError, match="is not the device this study ran on before"):
        run_plan(plan, destroy_data=ext4_device)
    assert _digest(ext4_device) == before


def test_a_loop_device_given_another_file_mid_plan_is_refused_before_the_next_cell(tmp_path: Path) -> None:
    """The same /dev/loopN (same device number) re-attached to a file someone cares about between cells: the
    next cell is refused (its backing file changed), and that file is not written."""
    _root_with("losetup")
    scratch, precious = tmp_path / "scratch.img", tmp_path / "precious.img"
    _fill(scratch, precious)
    before = _digest(precious)
    with _loop(scratch) as device:
        plan_path = _two_cell_device_plan(tmp_path, device)

        def swap() -> None:
            subprocess.run(["losetup", "--detach", device], check=True)
            _attach(device, precious)

        plan = load_plan(plan_path)
        with pytest.raises(UnsafeTargetError, match="not the device checked when the run started.*backing"):
            run_plan(plan, destroy_data=device, progress=_swap_after_first_cell(swap))  # type: ignore[arg-type]
    assert _digest(precious) == before
    assert len(list(plan.output.rglob("benchlib-run.json"))) == 1


def test_a_server_of_this_machine_is_given_the_devices_own_name_not_the_link(tmp_path: Path, fio_binary: str) -> None:
    """A fio server opens its target by name: a link flipped after the check must not redirect it. The job
    file names the device the link pointed to when checked, and the flipped link stops the next cell."""
    _root_with("losetup")
    scratch, precious = tmp_path / "scratch.img", tmp_path / "precious.img"
    _fill(scratch, precious)
    before = _digest(precious)
    with _loop(scratch) as device, _loop(precious) as other, fio_server(fio_binary, "127.0.0.1", 8796):
        link = tmp_path / "disk-link"
        link.symlink_to(device)
        plan_path = _two_cell_device_plan(tmp_path, link)
        plan_path.write_text(plan_path.read_text() + '[hosts]\nservers = ["127.0.0.1"]\nport = 8796\n')

        def swap() -> None:
            link.unlink()
            link.symlink_to(other)

        plan = load_plan(plan_path)
        with pytest.raises(UnsafeTargetError, match="now names"):
            run_plan(plan, destroy_data=str(link), progress=_swap_after_first_cell(swap))  # type: ignore[arg-type]
        jobs = [p.read_text() for p in plan.output.rglob("job-*.fio")]
        assert jobs and all(f"filename={device}\n" in job for job in jobs)  # never the link
    assert _digest(precious) == before


def test_a_file_target_through_a_link_into_a_system_folder_is_refused(tmp_path: Path) -> None:
    """/var/run is a link to /run: the system folder check reads where a path leads, not its text."""
    etc = tmp_path / "etc-link"
    etc.symlink_to("/etc")
    with pytest.raises(UnsafeTargetError, match=r"leads to /etc/benchlib-attack\.dat: it is in a system folder"):
        create_file(etc / "benchlib-attack.dat", 1 << 20)
    assert not Path("/etc/benchlib-attack.dat").exists()


def test_a_file_target_that_backs_a_loop_device_is_refused(tmp_path: Path) -> None:
    """Someone made a loop device (and maybe a file system) on benchlib's own target: it is no scratch file now."""
    _root_with("losetup")
    target = tmp_path / "t.dat"
    claim = create_file(target, 8 << 20)
    assert check_file(target, claim, 8 << 20)
    with _loop(target) as device:
        with pytest.raises(UnsafeTargetError, match=f"it is the file behind {device}"):
            check_file(target, claim, 8 << 20)


def test_a_cell_folder_swapped_for_a_link_during_the_run_is_never_written_or_emptied(tmp_path: Path) -> None:
    plan = load_plan(_two_cell_plan(tmp_path))
    victim = tmp_path / "victim"
    (victim / ".partial-attempt-1").mkdir(parents=True)
    (victim / ".partial-attempt-1" / "notes.txt").write_text("keep me")

    def swap() -> None:  # every cell folder not run yet becomes a link to the victim's folder
        for cell in plan.cells():
            folder = cell_dir(plan, 1, cell)
            if not any(folder.glob("attempt-*")):
                shutil.rmtree(folder, ignore_errors=True)
                folder.parent.mkdir(parents=True, exist_ok=True)
                folder.symlink_to(victim)

    with pytest.raises(RunError, match="reached through a link"):
        run_plan(plan, progress=_swap_after_first_cell(swap))  # type: ignore[arg-type]
    assert (victim / ".partial-attempt-1" / "notes.txt").read_text() == "keep me"
    assert sorted(p.name for p in victim.iterdir()) == [".partial-attempt-1"]
