#!/usr/bin/env python3
"""Set-up and the two project commands, with nothing but Python 3.11+.

    python3 tasks.py main    # create .venv, install pinned deps, ingest every study under data/raw/
    python3 tasks.py test    # the same set-up plus test deps and fio, then every test

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
    print(f"[tasks] {message}", flush=True)


def run(*command: str | Path, **kwargs: object) -> None:
    subprocess.run([str(c) for c in command], check=True, **kwargs)  # noqa: S603


def ensure_venv(extras: str) -> None:
    """Create .venv and install benchlib with pinned dependencies, once per pyproject change."""
    if sys.version_info < (3, 11):
        sys.exit(f"benchlib needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    if not PYTHON.exists():
        say(f"creating {VENV}")
        run(sys.executable, "-m", "venv", VENV)
    stamp = VENV / f".installed-{extras or 'base'}"
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == wanted:
        return
    say(f"installing benchlib{f'[{extras}]' if extras else ''} with pinned dependencies")
    run(PYTHON, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-e", f".[{extras}]" if extras else ".", cwd=ROOT)
    run(PYTHON, "-m", "ipykernel", "install", "--sys-prefix", "--name", "benchlib", "--display-name", "benchlib (.venv)")
    stamp.write_text(wanted)


def ensure_fio() -> None:
    """Install fio with apt-get where it is missing and we may; otherwise say what to install."""
    if shutil.which("fio"):
        return
    apt = shutil.which("apt-get")
    if apt and hasattr(os, "geteuid") and os.geteuid() == 0:
        say("fio is missing: installing it with apt-get")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        run(apt, "update", "-qq", env=env)
        run(apt, "install", "-y", "-qq", "fio", env=env, stdout=subprocess.DEVNULL)
        return
    sys.exit(
        "fio is not installed and this script cannot install it (needs root and apt-get).\n"
        "Install fio 3.x, then run this again:\n"
        "  Debian/Ubuntu: sudo apt-get install fio\n"
        "  Fedora/RHEL:   sudo dnf install fio\n"
        "  macOS:         brew install fio\n"
        "  conda:         conda install -c conda-forge fio"
    )


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("main", "test"):
        print(__doc__)
        return 2
    if argv[0] == "main":
        ensure_venv("")
        return subprocess.call([str(BIN / "benchlib"), "ingest", *argv[1:]], cwd=ROOT)
    ensure_venv("test")
    ensure_fio()
    return subprocess.call([str(PYTHON), "-m", "pytest", *argv[1:]], cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
