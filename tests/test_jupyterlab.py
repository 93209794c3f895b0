"""Committed notebooks show their charts in JupyterLab as pinned, opened for the first time (untrusted):
a real JupyterLab server, a real headless Chromium, the rendered page's DOM."""

from __future__ import annotations

import json
import os
import re
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
            f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}",  # no tab restored from another session
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
            tabs = re.findall(r'<li[^>]*title="Name: ([^\n"]+)[^>]*class="lm-TabBar-tab([^"]*)"', dom)
            opened = [classes for tab, classes in tabs if tab == name]
            assert opened and not any("jp-mod-dirty" in c for c in opened), f"{name} was modified on open"
    finally:
        lab.terminate()
        lab.wait(timeout=30)
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", PORT)) != 0  # the server is gone


def test_every_notebook_names_the_kernel_jupyterlab_starts() -> None:
    """A kernelspec JupyterLab would rewrite on open ("Python 3" for the installed "Python 3 (ipykernel)")
    marks the notebook modified the moment it is opened: every notebook names the installed kernel as it does."""
    from jupyter_client.kernelspec import KernelSpecManager

    installed = KernelSpecManager().get_kernel_spec("python3")
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        spec = json.loads(notebook.read_text())["metadata"]["kernelspec"]
        assert spec == {"display_name": installed.display_name, "language": installed.language, "name": "python3"}, (
            notebook.name
        )


def test_an_author_works_on_a_copy_in_work_never_on_the_canonical_notebooks(tmp_path: Path) -> None:
    """`benchlib notebook` copies a canonical notebook for a study (outputs cleared, parameters injected);
    the copy runs; JupyterLab opens on work/ with a workspace of its own; nothing of it is ever bundled."""
    from benchlib.bundle import _built
    from benchlib.pipeline import PipelineError, copy_notebook

    copy = copy_notebook("comparison", {"study": "fio-sample"}, tmp_path)
    assert copy.name == "fio-sample-comparison.ipynb"
    cells = json.loads(copy.read_text())["cells"]
    assert not any(c.get("outputs") for c in cells)  # the canonical outputs were another study's
    assert 'study = "fio-sample"' in "".join(cells[2]["source"])  # injected after the parameters cell
    done = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "--inplace", str(copy)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]  # every other parameter comes from the study
    with pytest.raises(PipelineError, match="never overwrites"):
        copy_notebook("comparison", {"study": "fio-sample"}, tmp_path)
    sys.path.insert(0, str(ROOT))
    try:
        import tasks
    finally:
        sys.path.remove(str(ROOT))
    command = tasks.lab_command([])
    assert f"--ServerApp.root_dir={ROOT / 'work'}" in command and any("workspaces_dir" in c for c in command)
    assert "work/" in (ROOT / ".gitignore").read_text() and ".ipynb_checkpoints/" in (ROOT / ".gitignore").read_text()
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False).stdout
    assert ".ipynb_checkpoints" not in tracked and ".so\n" not in tracked
    assert _built(ROOT / "notebooks" / ".ipynb_checkpoints" / "x-checkpoint.ipynb")
    assert _built(ROOT / "benchlib" / "_bins.cpython-311-x86_64-linux-gnu.so") and not _built(
        ROOT / "benchlib" / "_bins.c"
    )
