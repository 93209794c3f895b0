"""Benchmark: a vdbench output folder with 100 run definitions x 300 intervals, 4 hosts: ingest time.

The folder is made from the real vdbench50407 output ``../shared/corpus/vdbench/vdb__output``:
its banner, header lines and interval lines (values cycled, times advanced one second per
interval) written as summary.html, totals.html, flatfile.html, logfile.html, parmfile.html,
histogram.html and four host reports n1..n4.html, into ``work/vdbench/`` (git-ignored).
Appends the figures to ``bench/results.md``.
"""

from __future__ import annotations

import datetime
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from _results import record

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parents[1] / "shared" / "corpus" / "vdbench" / "vdb__output"
RDS, INTERVALS, HOSTS = 100, 300, ("n1", "n2", "n3", "n4")
START = datetime.datetime(2019, 3, 8, 18, 11, 38)


def _source_lines(name: str) -> list[str]:
    return (SOURCE / name).read_text().splitlines()


def _report(title: str, first_line: str, values: list[list[str]], header: list[str]) -> str:
    """A text report (summary/totals/host) of RDS runs; ``values`` are the corpus interval lines' numbers."""
    out = [f"<title>Vdbench output/{title}</title><pre>", first_line, ""]
    now = START
    for rd in range(RDS):
        out += [f'<a name="_{rd}"></a><i><b>{now:%H:%M:%S}.001 Starting RD=rd{rd}; I/O rate: Uncontrolled MAX; '
                f"elapsed={INTERVALS}; For loops: threads=8</b></i>", "", "", *header]
        for step in range(1, INTERVALS + 1):
            now += datetime.timedelta(seconds=1)
            if title != "totals.html":
                out.append(f"{now:%H:%M:%S}.020 {step:>11} " + " ".join(values[(rd + step) % len(values)]))
        out.append(f"{now:%H:%M:%S}.030 {'avg_2-' + str(INTERVALS):>11} " + " ".join(values[rd % len(values)]))
        now += datetime.timedelta(seconds=2)
    return "\n".join(out) + "\n"


def _flatfile(rows: list[list[str]], header: str) -> str:
    out = ["<title>Vdbench output/flatfile.html</title><pre>", "*", "* 'flatfile.html' contains Vdbench generated information", header]
    now = START
    for rd in range(RDS):
        for step in [*range(1, INTERVALS + 1), None]:
            if step is not None:
                now += datetime.timedelta(seconds=1)
            fields = list(rows[(rd + (step or 0)) % len(rows)])
            fields[0], fields[1] = f"{now:%H:%M:%S}.020", f"{now:%m/%d/%Y-%H:%M:%S}-ICT"
            fields[2], fields[3] = f"rd{rd}", str(step) if step is not None else f"avg_2-{INTERVALS}"
            out.append(" ".join(fields))
        now += datetime.timedelta(seconds=2)
    return "\n".join(out) + "\n"


def make_input(folder: Path) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    summary = _source_lines("summary.html")
    header = [line for line in summary if "interval" in line and "MB/sec" in line][:1]
    header.append(summary[summary.index(header[0]) + 1])
    values = [line.split()[2:] for line in summary if re.match(r"^\d\d:\d\d:\d\d\.\d{3}\s+\d+\s", line)]
    flat = [line for line in _source_lines("flatfile.html") if line.strip() and not line.startswith(("*", "<"))]
    flat_rows = [line.split() for line in flat[1:] if line.split()[3].isdigit()]
    banner = "Vdbench summary report, created 18:11:35 Mar 08 2019 ICT (11:11:35 Mar 08 2019 UTC)"
    (folder / "summary.html").write_text(_report("summary.html", banner, values, header))
    (folder / "totals.html").write_text(_report("totals.html", "Run totals", values, header))
    (folder / "flatfile.html").write_text(_flatfile(flat_rows, flat[0]))
    for host in HOSTS:
        (folder / f"{host}.html").write_text(_report(f"{host}.html", f"Host summary report(s) for host={host}", values, header))
    (folder / "logfile.html").write_text("<title>Vdbench output/logfile.html</title><pre>\nCopyright (c) 2000, 2018, Oracle and/or its affiliates. All rights reserved.\nVdbench distribution: vdbench50407\n")
    parm = ["<title>Vdbench output/parmfile.html</title><pre>", *[f"hd={h},system=10.0.0.{i}" for i, h in enumerate(HOSTS, 1)],
            "sd=sd1,host=*,lun=/dev/sdb", "wd=wd1,sd=sd*,rdpct=0,seekpct=100,xfersize=8k",
            *[f"rd=rd{rd},wd=wd*,iorate=max,elapsed={INTERVALS},interval=1,forthreads=(8)" for rd in range(RDS)]]
    (folder / "parmfile.html").write_text("\n".join(parm) + "\n")
    hist = _source_lines("histogram.html")
    start = next(i for i, line in enumerate(hist) if "Starting RD=" in line)
    body = hist[start + 1:]
    (folder / "histogram.html").write_text("\n".join(
        [hist[0], "Total response time histogram.", ""]
        + [line for rd in range(RDS) for line in (f"<i><b>18:11:38.001 Starting RD=rd{rd}; For loops: threads=8</b></i>", *body)]) + "\n")
    return sum(p.stat().st_size for p in folder.iterdir())


CHILD = """
import json, resource, time
from benchlib.ingest import ingest_study
t = time.perf_counter()
report = ingest_study("{study}", "{processed}")
first = time.perf_counter() - t
t = time.perf_counter()
again = ingest_study("{study}", "{processed}")
print(json.dumps({{"seconds": first, "again": time.perf_counter() - t, "ingested": len(report.ingested),
                  "quarantined": report.quarantined, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def check(what: str, got: int, least: int) -> None:
    """Stop the bench when the tables hold less than the input: a figure of less work is no figure."""
    if got < least:
        raise SystemExit(f"{what}: {got:,}, the input holds {least:,}; no figure recorded")


def main() -> None:
    global RDS, INTERVALS  # noqa: PLW0603 -- the smoke run makes a smaller folder of the same layout
    smoke = sys.argv[1:] == ["--smoke"]
    if smoke:
        RDS, INTERVALS = 3, 10
    with tempfile.TemporaryDirectory() as tmp:
        study = Path(tmp) / "raw" / "vdbench"
        folder = study / "output"  # inside the study, as a user's study holds it (a link out of it is not read)
        size = make_input(folder)
        out = subprocess.run([sys.executable, "-c", CHILD.format(study=study, processed=Path(tmp) / "processed")],
                             check=True, capture_output=True, text=True, cwd=HERE.parent)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        counted = (
            "import polars as pl; p = '{tmp}/processed/vdbench'; "
            "print(pl.scan_parquet(p + '/runs/*.parquet').select(pl.len()).collect().item(), "
            "pl.scan_parquet(p + '/intervals/*.parquet').select(pl.len()).collect().item())"
        ).format(tmp=tmp)
        runs = subprocess.run([sys.executable, "-c", counted], check=True, capture_output=True, text=True,
                              cwd=HERE.parent).stdout.split()
        files = len(list(folder.iterdir()))
    check("run definitions in the runs table", int(runs[0]), RDS)
    check("interval rows in the intervals table", int(runs[1]), RDS * INTERVALS)
    if result["quarantined"]:
        raise SystemExit(f"quarantined: {result['quarantined']}; no figure recorded")
    rows = [
        ("input", f"{RDS} run definitions x {INTERVALS} intervals, {len(HOSTS)} hosts, {size / 1e6:,.1f} MB in {files} files"),
        ("runs / interval rows written (checked: at least the input's)", f"{int(runs[0]):,} / {int(runs[1]):,}"),
        ("seconds", round(result["seconds"], 2)),
        ("unchanged re-ingest seconds", round(result["again"], 2)),
        ("peak RSS MB", round(result["peak_rss_mb"])),
        ("quarantined", len(result["quarantined"])),
    ]
    if smoke:
        print("\n".join(f"{k}: {v}" for k, v in rows))
        return
    record("vdbench output folder to Parquet (the folder in the study; rows checked)", rows)


if __name__ == "__main__":
    main()
