"""Benchmark: an esxtop batch CSV of 2 GB or more and 7,632 columns to Parquet (time, peak memory), against a floor.

The input replicates the real capture ``../shared/corpus/esxtop/esxtopd__small-esxtop-data.csv``
(its non-zero samples, with time stamps 5 s apart) into ``work/esxtop/big.csv``; ingest streams it.
The floor: hashing the same file (SHA-256, the one pass every ingest makes), in a process of its own. With
``--objects``, the study keeps only the disk and adapter objects (``[esxtop] objects`` in study.toml).
Appends the figures to ``bench/results.md``.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _results import record

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parents[1] / "shared" / "corpus" / "esxtop" / "esxtopd__small-esxtop-data.csv"


def make_input(target: Path, megabytes: int) -> int:
    with open(SOURCE, newline="") as handle:
        rows = list(csv.reader(handle))
    header, data = rows[0], rows[1:]
    start = datetime.datetime(2018, 4, 26, 14, 6, 27)
    target.parent.mkdir(parents=True, exist_ok=True)
    samples = 0
    with open(target, "w") as out:
        out.write(",".join(f'"{c}"' for c in header) + "\n")
        while out.tell() < megabytes * 1024 * 1024:
            row = list(data[1 + samples % (len(data) - 1)])
            row[0] = (start + datetime.timedelta(seconds=5 * samples)).strftime("%m/%d/%Y %H:%M:%S")
            out.write(",".join(f'"{c}"' for c in row) + "\n")
            samples += 1
    return samples


CHILD = """
import json, resource, time
from benchlib.ingest import ingest_study
t = time.perf_counter()
report = ingest_study("{study}", "{processed}")
print(json.dumps({{"seconds": time.perf_counter() - t, "ingested": report.ingested, "quarantined": report.quarantined,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""

FLOOR = """
import hashlib, json, resource, time
t = time.perf_counter()
digest = hashlib.sha256()
with open("{big}", "rb") as handle:
    while data := handle.read(1 << 20):
        digest.update(data)
print(json.dumps({{"seconds": time.perf_counter() - t,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""

OBJECTS = ["Physical Disk", "Physical Disk Adapter", "Physical Disk SCSI Device", "Physical Disk Path"]


def _child(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=HERE.parent)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--megabytes", type=int, default=2100, help="size of the capture (default 2100)")
    parser.add_argument("--objects", action="store_true", help="keep only the disk objects")
    parser.add_argument("--smoke", action="store_true", help="a 2 MB capture in a scratch folder, checks only")
    args = parser.parse_args()
    scratch = tempfile.TemporaryDirectory() if args.smoke else None
    big = (Path(scratch.name) if scratch else HERE / "work" / "esxtop") / "big.csv"
    args.megabytes = 2 if args.smoke else args.megabytes
    samples = make_input(big, args.megabytes)
    with tempfile.TemporaryDirectory(dir=big.parent) as tmp:
        study = Path(tmp) / "raw" / "esxtop"
        study.mkdir(parents=True)
        os.link(big, study / big.name)  # in the study (ingest does not follow a link out of it)
        if args.objects:
            (study / "study.toml").write_text(f'[study]\nname = "esxtop"\n[esxtop]\nobjects = {json.dumps(OBJECTS)}\n')
        result = _child(CHILD.format(study=study, processed=Path(tmp) / "processed"))
        if result["ingested"] != [big.name] or result["quarantined"]:
            raise SystemExit(f"the capture was not ingested whole: {result}; no figure recorded")
        seen = _child(
            "import json, polars as pl; print(json.dumps({'samples': pl.scan_parquet('"
            + str(Path(tmp) / "processed" / "esxtop" / "host_counters" / "*.parquet")
            + "').select(pl.col('time').n_unique()).collect().item()}))"
        )["samples"]
        if seen != samples:  # every sample of the input reached the table
            raise SystemExit(f"{seen:,} samples in the table, {samples:,} in the capture; no figure recorded")
        written = sum(p.stat().st_size for p in (Path(tmp) / "processed").rglob("*.parquet")) / 1e6
    floor = _child(FLOOR.format(big=big))
    size_mb = big.stat().st_size / 1e6
    if scratch is not None:
        print(f"smoke: {samples:,} samples, all in the table, in {result['seconds']:.1f} s")
        scratch.cleanup()
        return
    record("esxtop batch CSV to Parquet" + (" (disk objects only)" if args.objects else ""), [
        ("input", f"{size_mb:,.0f} MB, {samples:,} samples x 7,630 counters"),
        ("seconds", round(result["seconds"], 1)),
        ("MB/s", round(size_mb / result["seconds"], 1)),
        ("peak RSS MB", round(result["peak_rss_mb"])),
        ("Parquet written, MB", round(written, 1)),
        ("samples in the table (checked: every one of the input's)", f"{samples:,}"),
        ("quarantined", len(result["quarantined"])),
        ("floor: SHA-256 of the file, seconds", round(floor["seconds"], 1)),
        ("floor: MB/s", round(size_mb / floor["seconds"], 1)),
        ("floor: peak RSS MB", round(floor["peak_rss_mb"])),
    ])


if __name__ == "__main__":
    main()
