"""fio client/server output from a real run: three fio servers on loopback, one client.

fio attaches a job file to the --client given just before it, so the whole
set of hosts is passed as a host-list file (``--client=hosts.list job.fio``).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from benchlib.sources import read
from tests.fio_helpers import fio_server

pytestmark = pytest.mark.fio
HOSTS = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
PORT = 8865


@pytest.fixture(scope="module")
def servers(fio_binary: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with contextlib.ExitStack() as stack:
        for host in HOSTS:
            stack.enter_context(fio_server(fio_binary, host, PORT))
        yield tmp_path_factory.mktemp("servers")


@pytest.fixture(scope="module")
def client_output(fio_binary: str, servers: Path) -> Path:
    job = servers / "job.fio"
    job.write_text(
        "[global]\nioengine=psync\nrw=randread\nbs=4k\nsize=16M\nruntime=2\ntime_based\n"
        f"[cs]\nfilename={servers}/scratch-$jobnum\n"
    )
    hosts = servers / "hosts.list"
    hosts.write_text("".join(f"{h},{PORT}\n" for h in HOSTS))
    output = servers / "clients.json"
    subprocess.run(
        [fio_binary, f"--client={hosts}", str(job), "--output-format=json+", f"--output={output}"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return output


def test_one_run_per_host_and_the_aggregate(client_output: Path) -> None:
    tables = read(client_output)
    runs = tables.runs
    assert sorted(runs["host"].drop_nulls().to_list()) == HOSTS
    assert runs.filter(pl.col("is_aggregate")).height == 1
    per_host = tables.results.filter(~pl.col("is_aggregate"))
    total = tables.results.filter(pl.col("is_aggregate")).row(0, named=True)
    assert per_host["client"].sort().to_list() == HOSTS
    assert total["iops"] == pytest.approx(per_host["iops"].sum(), rel=0.01)
    assert total["io_count"] == per_host["io_count"].sum()
    assert per_host["block_size_bytes"].unique().to_list() == [4096]
    bins = tables.latency_bins.group_by("client").agg(pl.col("count").sum()).sort("client", nulls_last=True)
    counts = dict(bins.rows())
    for row in per_host.iter_rows(named=True):
        assert counts[row["client"]] == row["io_count"]


def test_global_options_as_an_array_per_server(client_output: Path, tmp_path: Path) -> None:
    """fio 3.39 and later write "global options" as one object per server (with hostname and port).

    The fixture is this real run's JSON, reshaped that way, with one server's
    block size changed so the per-host merge is visible.
    """
    data = json.loads(client_output.read_text())
    common = data["global options"]
    data["global options"] = [
        {**common, **({"bs": "8k"} if host == "127.0.0.3" else {}), "hostname": host, "port": PORT} for host in HOSTS
    ]
    fixture = tmp_path / "fio-3.39-client-server-global-options-array.json"
    fixture.write_text(json.dumps(data, indent=2))
    results = read(fixture).results.filter(~pl.col("is_aggregate"))
    sizes = dict(results.select("client", "block_size_bytes").rows())
    assert sizes == {"127.0.0.2": 4096, "127.0.0.3": 8192, "127.0.0.4": 4096}


def test_normal_and_terse_client_output(fio_binary: str, servers: Path, client_output: Path) -> None:
    """Normal and terse client output carry no host per block: per-client rows plus the flagged sum."""
    from benchlib.sources.fio_normal import read_fio_normal
    from benchlib.sources.fio_terse import read_fio_terse

    job = servers / "job.fio"
    hosts = servers / "hosts.list"
    output = servers / "clients.txt"
    subprocess.run(
        [fio_binary, f"--client={hosts}", str(job), "--output-format=normal,terse", f"--output={output}"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    for reader in (read_fio_normal, read_fio_terse):
        results = reader(output).results
        assert results.filter(~pl.col("is_aggregate")).height == len(HOSTS), (
            reader.__name__,
            output.read_text()[-3000:],
        )
        total = results.filter(pl.col("is_aggregate")).row(0, named=True)
        assert total["job_name"] is None
        assert total["iops"] == pytest.approx(results.filter(~pl.col("is_aggregate"))["iops"].sum(), rel=0.01)
