"""Benchmark: an esxtop batch CSV of at least 500 MB and 7,632 columns to Parquet (time, peak memory).

The input replicates the real capture ``../shared/corpus/esxtop/esxtopd__small-esxtop-data.csv``
(its non-zero samples, with time stamps 5 s apart) into ``work/esxtop/big.csv``; ingest streams it.
Appends the figures to ``bench/results.md``.
"""

from __future__ import annotations

import csv
import datetime
import json
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


def main() -> None:
    big = HERE / "work" / "esxtop" / "big.csv"
    samples = make_input(big, 520)
    with tempfile.TemporaryDirectory() as tmp:
        study = Path(tmp) / "raw" / "esxtop"
        study.mkdir(parents=True)
        (study / big.name).symlink_to(big)
        out = subprocess.run([sys.executable, "-c", CHILD.format(study=study, processed=Path(tmp) / "processed")],
                             check=True, capture_output=True, text=True, cwd=HERE.parent)
        result = json.loads(out.stdout.strip().splitlines()[-1])
    size_mb = big.stat().st_size / 1e6
    record("esxtop batch CSV to Parquet", [
        ("input", f"{size_mb:,.0f} MB, {samples:,} samples x 7,630 counters"),
        ("seconds", round(result["seconds"], 1)),
        ("MB/s", round(size_mb / result["seconds"], 1)),
        ("peak RSS MB", round(result["peak_rss_mb"])),
        ("quarantined", len(result["quarantined"])),
    ])


if __name__ == "__main__":
    main()
