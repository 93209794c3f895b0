"""Committed notebooks show their charts in JupyterLab as pinned, opened for the first time (untrusted):
a real JupyterLab server, a real headless Chromium, the rendered page's DOM."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from benchlib.figures import VEGALITE_MIME
from tests.conftest import ROOT

PORT = 8961  # outside the fio servers' 8765-8899
NOTEBOOKS = ("sweeps.ipynb",)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    pytest.fail("Chromium is not installed; `python3 tasks.py test` installs it")


def _figures(notebook: Path) -> int:
    cells = json.loads(notebook.read_text())["cells"]
    return sum(VEGALITE_MIME in o.get("data", {}) for c in cells for o in c.get("outputs", []))


def test_committed_notebooks_show_their_charts_in_jupyterlab(tmp_path: Path) -> None:
    for name in NOTEBOOKS:  # a copy: JupyterLab writes checkpoints beside what it opens
        shutil.copy(ROOT / "notebooks" / name, tmp_path / name)
    root = ["--allow-root"] if os.geteuid() == 0 else []
    lab = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            *root,
            "--no-browser",
            f"--port={PORT}",
            "--ServerApp.token=",
            "--ServerApp.password=",
            f"--ServerApp.root_dir={tmp_path}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/lab", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline and lab.poll() is None, "JupyterLab did not start"
            time.sleep(0.5)
        for name in NOTEBOOKS:
            dom = subprocess.run(
                [
                    _chromium(),
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--virtual-time-budget=40000",
                    "--dump-dom",
                    f"http://127.0.0.1:{PORT}/lab/tree/{name}",
                ],
                capture_output=True,
                text=True,
                timeout=120,
                check=True,
            ).stdout
            drawn = dom.count('data-mime-type="image/png"><img src="data:image/png;base64,')
            expected = _figures(tmp_path / name)
            assert expected and drawn == expected, f"{name}: {drawn} of {expected} charts drawn"
            assert "&lt;figure:" not in dom, f"{name}: JupyterLab showed the text placeholder"
    finally:
        lab.terminate()
        lab.wait(timeout=30)
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", PORT)) != 0  # the server is gone
