#!/usr/bin/env python3
"""Set-up and the two project commands, with nothing but Python 3.11+.

    python3 tasks.py main    # create .venv, install pinned deps, ingest every study, build every report
    python3 tasks.py test    # the same set-up plus test deps, fio, Chromium and Go, then every test, nbval and ruff
    python3 tasks.py lab     # the set-up of main, then JupyterLab on work/, your own notebooks (as root too)

Extra arguments after ``test`` go to pytest (``python3 tasks.py test -k terse``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / "python"


def say(message: str) -> None:
    """Print a line of this script's progress."""
    print(f"[tasks] {message}", flush=True)


def run(*command: str | Path, **kwargs: object) -> None:
    """Run a command; a failure stops the script."""
    subprocess.run([str(c) for c in command], check=True, **kwargs)  # noqa: S603


def ensure_venv(extras: str) -> None:
    """Create .venv and install benchlib with pinned dependencies, once per pyproject change."""
    if sys.version_info < (3, 11):  # noqa: UP036 (this script must run on an older Python to say so)
        sys.exit(f"benchlib needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    if not PYTHON.exists():
        say(f"creating {VENV}")
        run(sys.executable, "-m", "venv", VENV)
    stamp = VENV / f".installed-{extras or 'base'}"
    # the C part is compiled at install: a change to it needs a reinstall too
    wanted = hashlib.sha256(
        b"".join((ROOT / f).read_bytes() for f in ("pyproject.toml", "benchlib/_bins.c"))
    ).hexdigest()
    if stamp.exists() and stamp.read_text() == wanted:
        return
    say(f"installing benchlib{f'[{extras}]' if extras else ''} with pinned dependencies")
    run(
        PYTHON,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "-e",
        f".[{extras}]" if extras else ".",
        cwd=ROOT,
    )
    run(
        PYTHON, "-m", "ipykernel", "install", "--sys-prefix", "--name", "benchlib", "--display-name", "benchlib (.venv)"
    )
    stamp.write_text(wanted)


HOW_TO_INSTALL = {
    "fio": (
        "fio 3.x",
        "sudo apt-get install fio",
        "sudo dnf install fio",
        "brew install fio",
        "conda install -c conda-forge fio",
    ),
    "chromium": (
        "Chromium (the HTML report test opens the report in it)",
        "sudo apt-get install chromium",
        "sudo dnf install chromium",
        "brew install --cask chromium",
        "(not on conda-forge)",
    ),
    "golang-go": (
        "Go (the vSphere tests build VMware's vCenter API simulator, govmomi's, from source)",
        "sudo apt-get install golang-go",
        "sudo dnf install golang",
        "brew install go",
        "conda install -c conda-forge go",
    ),
    "golang-github-vmware-govmomi-dev": (
        "govmomi's Go source (the vCenter API simulator the vSphere tests build)",
        "sudo apt-get install golang-github-vmware-govmomi-dev",
        "(not packaged: the tests expect it in /usr/share/gocode)",
        "(not packaged: the tests expect it in /usr/share/gocode)",
        "(not on conda-forge)",
    ),
    "fdisk": (
        "sfdisk (the runner's safety tests partition a loop device with it)",
        "sudo apt-get install fdisk",
        "sudo dnf install util-linux",
        "(Linux only)",
        "(not on conda-forge)",
    ),
}


def ensure_system_tool(package: str, binaries: tuple[str, ...], files: tuple[str, ...] = ()) -> None:
    """Install a system tool with apt-get where it is missing and we may; otherwise say what to install.

    It is there when one of ``binaries`` is on the PATH, or (a source package) one of ``files`` exists.
    """
    if any(shutil.which(b) for b in binaries) or any(Path(f).exists() for f in files):
        return
    apt = shutil.which("apt-get")
    if apt and hasattr(os, "geteuid") and os.geteuid() == 0:
        say(f"{package} is missing: installing it with apt-get")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        run(apt, "update", "-qq", env=env)
        run(apt, "install", "-y", "-qq", package, env=env, stdout=subprocess.DEVNULL)
        return
    what, debian, fedora, mac, conda = HOW_TO_INSTALL[package]
    sys.exit(
        f"{package} is not installed and this script cannot install it (needs root and apt-get).\n"
        f"Install {what}, then run this again:\n"
        f"  Debian/Ubuntu: {debian}\n"
        f"  Fedora/RHEL:   {fedora}\n"
        f"  macOS:         {mac}\n"
        f"  conda:         {conda}"
    )


#: the author's own notebooks: JupyterLab opens here, never on the canonical notebooks/ that nbval checks
WORK = ROOT / "work"


def lab_command(extra: list[str]) -> list[str]:
    """Return JupyterLab on work/ with a workspace of its own (nothing restored from another session)."""
    WORK.mkdir(exist_ok=True)
    as_root = ["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    return [
        str(BIN / "jupyter"),
        "lab",
        *as_root,
        f"--ServerApp.root_dir={WORK}",
        f"--LabApp.workspaces_dir={WORK / '.workspaces'}",
        *extra,
    ]


def main(argv: list[str]) -> int:
    """Run ``main`` or ``test`` (see the module docstring); return the exit status."""
    if not argv or argv[0] not in ("main", "test", "lab"):
        print(__doc__)
        return 2
    if argv[0] == "lab":
        ensure_venv("")
        return subprocess.call(lab_command(argv[1:]), cwd=WORK)
    if argv[0] == "main":
        ensure_venv("")
        status = subprocess.call([str(BIN / "benchlib"), "ingest", "--quiet", *argv[1:]], cwd=ROOT)
        if status > 2:  # the machine failed (disk, memory): nothing to build from
            return status
        # a refused study or quarantined file costs its own study: the other reports are still built
        return max(status, subprocess.call([str(BIN / "benchlib"), "report"], cwd=ROOT))
    ensure_venv("test")
    ensure_system_tool("fio", ("fio",))
    ensure_system_tool("chromium", ("chromium", "chromium-browser", "google-chrome"))
    ensure_system_tool("fdisk", ("sfdisk",))
    ensure_system_tool("golang-go", ("go",))
    ensure_system_tool("golang-github-vmware-govmomi-dev", (), ("/usr/share/gocode/src/github.com/vmware/govmomi",))
    # notebooks only read processed data (nbval executes them): ingest the bundled studies first
    status = subprocess.call([str(BIN / "benchlib"), "ingest", "--quiet"], cwd=ROOT, stdout=subprocess.DEVNULL)
    if status:
        return status
    tests = subprocess.call([str(PYTHON), "-m", "pytest", *argv[1:]], cwd=ROOT)
    linted = lint()
    return tests or linted


LINTED = ("benchlib", "tests", "tasks.py")


def lint() -> int:
    """Run the project's ruff configuration (pyproject.toml) and its formatter check; 0 when both pass."""
    say("ruff: lint and format check of " + ", ".join(LINTED))
    checked = subprocess.call([str(BIN / "ruff"), "check", *LINTED], cwd=ROOT)
    formatted = subprocess.call([str(BIN / "ruff"), "format", "--check", *LINTED], cwd=ROOT)
    return checked or formatted


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
