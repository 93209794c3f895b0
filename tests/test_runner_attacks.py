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
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchlib.runner import PlanError, load_plan, read_plan, run_plan
from benchlib.runner.reading import FioRefusedJob
from benchlib.runner.safety import UnsafeTargetError, check_device, check_file, create_file, marker_for

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


@contextlib.contextmanager
def _loop(backing: str | Path) -> Iterator[str]:
    done = subprocess.run(["losetup", "--find", "--show", str(backing)], capture_output=True, text=True, check=False)
    if done.returncode:
        pytest.skip(f"this machine does not allow loop devices ({done.stderr.strip()})")
    device = done.stdout.strip()
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


def _write_plan(tmp_path: Path, *, target: str, profile: str = "p", profile_options: str = 'rw = "randread"',
                options: str = "") -> Path:
    path = tmp_path / "plan.toml"
    path.write_text(PLAN.format(target=target, profile=profile, profile_options=profile_options, options=options),
                    encoding="utf-8")
    return path


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchlib.cli", *args], cwd=cwd, capture_output=True, text=True,
                          check=False, timeout=300)


@pytest.mark.parametrize(
    "profile_options",
    [
        'readwrite = "randwrite"',  # fio's alias of rw
        'rw = "randwrite:4k"',  # the :N suffix
        'rw = "randrw", rwmixread = 100, rwmixwrite = 50',  # the last share set wins: 50% writes
        'rw = "randtrimwrite"',
        'rw = "trim"',
        'rw = "read", overwrite = 1',
    ],
)
def test_writing_spelled_any_way_needs_the_flag(tmp_path: Path, ext4_device: str, profile_options: str) -> None:
    before = _digest(ext4_device)
    plan_path = _write_plan(tmp_path, target=f'device = "{ext4_device}"', profile_options=profile_options)
    done = _cli("run", str(plan_path), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"the plan writes to this device, destroying what it holds (ext2/3/4 file system" in done.stderr
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
        ({"profile": "p]\\nfilename=/dev/loop9\\nrw=write\\n[q"}, "contains [ or ]"),
        ({"profile": "global"}, "section named global"),
        ({"profile_options": 'rw = "randread", exec_prerun = "touch /tmp/pwned"'}, "--allow-option=exec_prerun"),
        ({"profile_options": 'rw = "randread", write_iolog = "/etc/passwd"'}, "writes a file of its own choosing"),
        ({"profile_options": 'rw = "randread", ioengine = "external:/tmp/evil.so"'}, "--allow-option=ioengine"),
        ({"profile_options": 'rw = "randread", iomem = "mmaphuge:/etc/x"'}, "a file fio creates"),
        ({"profile_options": 'rw = "randread", include = "/etc/x"'}, "fio has no such option"),
        ({"profile_options": 'rw = "randread", bs = "${HOME}"'}, "environment variable"),
        ({"profile_options": 'rw = "randread", timeout = 9999'}, "benchlib sets timeout itself"),
        ({"options": 'bs = ["4k", "8k"]'}, "is not a single value"),
    ],
)
def test_job_lines_come_from_a_closed_vocabulary(tmp_path: Path, change: dict, message: str) -> None:
    plan_path = _write_plan(tmp_path, target=f'file = "{tmp_path}/t/{{host}}.dat"', **change)
    with pytest.raises(PlanError, match=message.replace("[", r"\[").replace("$", r"\$")):
        load_plan(plan_path)


def test_matrix_levels_and_hosts_are_checked_too(tmp_path: Path) -> None:
    plan_path = _write_plan(tmp_path, target=f'file = "{tmp_path}/t/{{host}}.dat"',
                            options='[matrix.block_size]\noption = "bs"\nlevels = ["4k", "4k\\nfilename=/dev/loop9"]')
    with pytest.raises(PlanError, match="control character"):
        load_plan(plan_path)
    plan_path.write_text(plan_path.read_text().replace('levels = ["4k", "4k\\nfilename=/dev/loop9"]', 'levels = ["4k"]')
                         + '[hosts]\nservers = ["../../etc/x"]\n')
    with pytest.raises(PlanError, match="a fio server is a host name"):
        load_plan(plan_path)


@pytest.mark.parametrize(
    "path",
    ["{tmp}/x/bench:1.dat", "{tmp}/x/x.dat:/dev/loop9", "{tmp}/x/user.dat\\n", " {tmp}/x/user.dat", "x/relative.dat"],
)
def test_target_paths_fio_would_read_otherwise_are_refused(tmp_path: Path, path: str) -> None:
    user = tmp_path / "x" / "bench"
    user.parent.mkdir()
    user.write_text("someone's data")
    (tmp_path / "x" / "user.dat").write_text("someone's data")
    plan_path = _write_plan(tmp_path, target=f'file = "{path.format(tmp=tmp_path)}"',
                            profile_options='rw = "randwrite"')
    with pytest.raises(PlanError, match=r"\[target\] file"):
        load_plan(plan_path)
    assert user.read_text() == "someone's data" and (tmp_path / "x" / "user.dat").read_text() == "someone's data"


def test_fio_says_which_files_a_job_opens(tmp_path: Path, fio_binary: str) -> None:
    plan = load_plan(_write_plan(tmp_path, target=f'file = "{tmp_path}/t/{{host}}.dat"'))
    reading = read_plan(plan, fio_binary)
    assert reading.files == {("p", "local"): (f"{tmp_path}/t/local.dat",)} and not reading.writing
    allowed = load_plan(_write_plan(tmp_path, target=f'file = "{tmp_path}/t/{{host}}.dat"',
                                    profile_options='rw = "randread", bs = "banana"'))
    with pytest.raises(FioRefusedJob, match="fio does not accept job p on local"):
        read_plan(allowed, fio_binary)


def test_a_device_mounted_in_another_mount_namespace_is_in_use(tmp_path: Path, ext4_device: str) -> None:
    _root_with("unshare", "mount")
    point = tmp_path / "mnt"
    point.mkdir()
    holder = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                               f"mount {ext4_device} {point} && echo mounted && sleep 120"], stdout=subprocess.PIPE, text=True)
    try:
        if holder.stdout.readline().strip() != "mounted":  # type: ignore[union-attr]
            pytest.skip("cannot mount in a new mount namespace here")
        assert str(point) not in Path("/proc/self/mountinfo").read_text()  # invisible from here
        plan_path = _write_plan(tmp_path, target=f'device = "{ext4_device}"', profile_options='rw = "randwrite"')
        done = _cli("run", str(plan_path), f"--destroy-data={ext4_device}", cwd=tmp_path)
        assert done.returncode == 2 and "is in use (opened exclusively by someone else (mounted" in done.stderr
        assert not list((tmp_path / "study").rglob("*.fio"))  # refused before any job was written
    finally:
        holder.kill()
        holder.wait()
    # the mounted file system itself writes to its device, so no checksum here: it must be intact
    time.sleep(0.5)
    check = subprocess.run(["e2fsck", "-fn", ext4_device], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr


def test_the_backing_device_of_a_mounted_loop_device_is_in_use(tmp_path: Path) -> None:
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
            (point / "data.txt").write_text("live data")
            before = _digest(lower)
            with pytest.raises(UnsafeTargetError, match=f"backing device of {upper}"):
                check_device(lower, writes=True, destroy_data=lower)
            with pytest.raises(UnsafeTargetError, match=f"its backing device {lower} is backing device of {upper}"):
                check_device(upper, writes=True, destroy_data=upper)  # and the mounted one is in use anyway
            assert _digest(lower) == before
        finally:
            subprocess.run(["umount", str(point)], check=False)


def _two_cell_plan(tmp_path: Path) -> Path:
    return _write_plan(tmp_path, target=f'file = "{tmp_path}/t/{{host}}.dat"', profile_options='rw = "randwrite"',
                       options='[matrix.block_size]\noption = "bs"\nlevels = ["4k", "8k"]')


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
    create_file(target, 1 << 20)
    marker = marker_for(target).read_text()
    target.unlink()
    target.write_bytes(b"user data")  # ext4 hands out the freed inode number again more often than not
    reused = os.stat(target).st_ino
    marker_for(target).write_text(marker.replace(str(__import__("json").loads(marker)["inode"]), str(reused)))
    with pytest.raises(UnsafeTargetError, match="does not carry the token"):
        check_file(target)
    assert target.read_bytes() == b"user data"


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
    server = subprocess.Popen([fio_binary, f"--server=127.0.0.1,{port}"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        plan_path = _write_plan(tmp_path, target=f'file = "{tmp_path}/t/{{host}}.dat"', profile_options='rw = "randwrite"')
        plan_path.write_text(plan_path.read_text() + f'[hosts]\nservers = ["127.0.0.1"]\nport = {port}\n')
        plan = load_plan(plan_path)
        target = Path(plan.target.path_for("127.0.0.1"))
        target.parent.mkdir()
        target.write_bytes(os.urandom(1 << 20))
        marker_for(target).write_bytes(os.urandom(4096))
        before = _digest(target)
        with pytest.raises(UnsafeTargetError, match="is not a marker this study wrote"):
            Targets(plan, fio_binary, None, remote=lambda h: True).prepare(["127.0.0.1"], writes=True)
        assert _digest(target) == before
    finally:
        server.terminate()
        server.wait()
