"""The README's "Your own study" walk-through, run line by line as written, on a fresh study."""

from __future__ import annotations

import contextlib
import html
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.fio_helpers import fio_server

pytestmark = pytest.mark.fio


def _walkthrough() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Your own study") :]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.S)
    assert block, "the walk-through's commands are in one bash block"
    return [line.split("  #")[0].strip() for line in block[1].splitlines() if line.strip()]


def test_the_readme_walkthrough_runs_as_written(fio_binary: str, tmp_path: Path) -> None:
    lines = _walkthrough()
    env = {
        **os.environ,
        "BENCHLIB_DATA": str(tmp_path / "data"),
        "BENCHLIB_PIPELINES": str(tmp_path / "pipelines"),
        "BENCHLIB_REPORTS": str(tmp_path / "reports"),
    }
    (tmp_path / "pipelines").mkdir()
    said = {}
    targets = Path("/tmp/my-shares")
    shutil.rmtree(targets, ignore_errors=True)
    with contextlib.ExitStack() as servers:
        for line in lines:
            words = shlex.split(line.rstrip("&").strip())
            if words[0] == "fio":  # a fio server, as the README starts it
                address, port = words[1].removeprefix("--server=").split(",")
                servers.enter_context(fio_server(fio_binary, address, int(port)))
                continue
            assert words[0] == "benchlib", line
            # the paths are the README's, relative to a fresh folder whose data/ is the study's home
            folder = tmp_path
            (folder / "data").mkdir(exist_ok=True)
            done = subprocess.run(
                [sys.executable, "-m", "benchlib.cli", *words[1:]],
                capture_output=True,
                text=True,
                cwd=folder,
                env=env,
                timeout=900,
                check=False,
            )
            said[line] = done.stdout + done.stderr
            ok = (0, 1) if words[1] == "verify" else (0,)  # verify exits 1 when a claim fails
            assert done.returncode in ok, f"{line}\n{said[line][-3000:]}"
    shutil.rmtree(targets, ignore_errors=True)
    verified = said[next(line for line in lines if line.startswith("benchlib verify"))]
    assert re.search(r"\d+ PASS, \d+ FAIL, 0 UNSUPPORTED", verified), verified
    index = html.unescape((tmp_path / "reports" / "my-shares" / "index.html").read_text())
    assert "Fairness under contention" in index
    for page in ("fairness", "comparison", "claims", "interaction"):
        assert (tmp_path / "reports" / "my-shares" / f"{page}.html").is_file(), page
