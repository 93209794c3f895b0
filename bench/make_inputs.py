"""Generate realistic benchmark inputs by replicating real fio runs made here.

- ``work/jsonplus/<rw>/``: N json+ files (default 5,000), copies of five real fio runs
  (different workloads), each copy with its own time stamp so no two files are equal; a folder per
  rw, as fio-plot reads them (one rw from one folder).
- ``work/logs/big_bw.1.log``: a per-interval log of at least 1 GB, a real fio
  bandwidth log repeated with increasing time stamps.

Usage: ``python bench/make_inputs.py [--files 5000] [--log-gb 1.0]``
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

WORK = Path(__file__).resolve().parent / "work"
#: every run states rw, iodepth and numjobs: fio-plot selects files by them (a file without them it loads and skips)
WORKLOADS = {
    "randread-4k": ["--rw=randread", "--bs=4k", "--iodepth=1", "--numjobs=1"],
    "randwrite-4k": ["--rw=randwrite", "--bs=4k", "--iodepth=1", "--numjobs=1"],
    "randrw-4k-2jobs": ["--rw=randrw", "--rwmixread=70", "--bs=4k", "--iodepth=1", "--numjobs=2"],
    "read-128k": ["--rw=read", "--bs=128k", "--iodepth=1", "--numjobs=1"],
    "randread-4k-4jobs-grouped": ["--rw=randread", "--bs=4k", "--iodepth=1", "--numjobs=4", "--group_reporting"],
}
#: the rw values of WORKLOADS, one fio-plot selection each
RW = ("randread", "randwrite", "randrw", "read")


def record_runs(scratch: Path) -> dict[str, str]:
    outputs = {}
    for name, options in WORKLOADS.items():
        out = scratch / f"{name}.json"
        subprocess.run(
            [
                "fio",
                f"--name={name}",
                f"--filename={scratch / 'target'}",
                "--size=64M",
                "--ioengine=psync",
                "--runtime=2",
                "--time_based",
                *options,
                "--output-format=json+",
                f"--output={out}",
            ],
            check=True,
            capture_output=True,
        )
        outputs[name] = out.read_text()
    return outputs


def make_json(n_files: int, scratch: Path, work: Path = WORK) -> None:
    target = work / "jsonplus"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    runs = record_runs(scratch)
    names = sorted(runs)
    for i in range(n_files):
        name = names[i % len(names)]
        stamp = re.search(r'"timestamp" : (\d+)', runs[name])
        text = runs[name].replace(stamp.group(0), f'"timestamp" : {int(stamp.group(1)) + i}', 1)
        rw = next(o.split("=", 1)[1] for o in WORKLOADS[name] if o.startswith("--rw="))
        (target / rw).mkdir(exist_ok=True)  # a folder per rw: fio-plot reads one rw from one folder
        (target / rw / f"{name}-{i:05d}.json").write_text(text)
    sizes = [p.stat().st_size for p in target.rglob("*.json")]
    print(f"{n_files} json+ files, mean {sum(sizes) / len(sizes) / 1024:.1f} KiB, in {target}")


def make_log(gigabytes: float, scratch: Path, work: Path = WORK) -> None:
    target = work / "logs"
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            "fio",
            "--name=logsrc",
            f"--filename={scratch / 'target'}",
            "--size=64M",
            "--ioengine=psync",
            "--rw=randrw",
            "--bs=4k",
            "--runtime=3",
            "--time_based",
            f"--write_bw_log={scratch / 'src'}",
            "--output-format=json",
            f"--output={scratch / 'src.json'}",
        ],
        check=True,
        capture_output=True,
    )
    rows = [line.split(", ") for line in (scratch / "src_bw.1.log").read_text().splitlines()]
    span = int(rows[-1][0]) + 1
    out = target / "big_bw.1.log"
    limit = int(gigabytes * 1024**3)
    written = 0
    block = 0
    with open(out, "w") as handle:
        while written < limit:
            chunk = "".join(f"{int(r[0]) + block * span}, {', '.join(r[1:])}\n" for r in rows)
            handle.write(chunk)
            written += len(chunk)
            block += 1
    print(f"{out}: {written / 1024**3:.2f} GiB, {block * len(rows):,} rows")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--log-gb", type=float, default=1.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        make_json(args.files, Path(scratch))
        make_log(args.log_gb, Path(scratch))


if __name__ == "__main__":
    main()
