"""Run the real fio binary for tests: short jobs on a scratch file the test created."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def run_fio(
    fio: str, workdir: Path, name: str, *options: str, formats: str = "json+,normal,terse", logs: bool = True
) -> Path:
    """Run fio in ``workdir`` on a scratch file it creates there; return the output file."""
    workdir.mkdir(parents=True, exist_ok=True)
    output = workdir / f"{name}.out"
    log_options = (
        [
            f"--write_bw_log={name}",
            f"--write_iops_log={name}",
            f"--write_lat_log={name}",
            "--log_avg_msec=250",
            f"--write_hist_log={name}",
            "--log_hist_msec=250",
        ]
        if logs
        else []
    )
    command = [
        fio,
        f"--name={name}",
        f"--filename={workdir / 'scratch.dat'}",
        "--size=32M",
        "--ioengine=psync",
        "--runtime=3",
        "--time_based",
        *options,
        *log_options,
        f"--output-format={formats}",
        f"--output={output}",
    ]
    subprocess.run(command, cwd=workdir, check=True, capture_output=True, timeout=120)
    return output


def run_job_file(fio: str, folder: Path, name: str, job: str) -> Path:
    """Write ``job`` (a fio job file whose ``{target}`` is a scratch file in ``folder``), run it, return the json+."""
    job_file = folder / f"{name}.fio"
    job_file.write_text(job.format(target=folder / "target.dat"), encoding="utf-8")
    output = folder / f"{name}.json"
    subprocess.run(
        [fio, "--output-format=json+", f"--output={output}", str(job_file)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return output


@contextlib.contextmanager
def fio_server(fio: str, address: str, port: int, *wrapper: str) -> Iterator[subprocess.Popen]:
    """Run ``fio --server`` on ``address:port`` (behind ``wrapper``, e.g. a namespace tool) until the block ends.

    Gives the server's process (a test that pauses it signals its process group).
    """
    server = subprocess.Popen(
        [*wrapper, fio, f"--server={address},{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection((address, port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"no fio server came up on {address}:{port}")
                time.sleep(0.1)
        yield server
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
