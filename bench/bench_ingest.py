"""Benchmark: fio ingest speed and memory (issue "Foundation", performance targets).

1. json+ files: benchlib's full ingest (every table, latency bins included, Parquet
   written) against fio-plot's parse of the same files (its own import functions:
   list_json_files, which loads and filters every file, then import_json_dataset
   and parse_json_data). Reported as files per second and as a ratio.
2. A per-interval log of at least 1 GB: benchlib's streaming log ingest against
   polars alone reading the same file as CSV; peak memory of the benchlib process.

Run ``python bench/make_inputs.py`` first, then ``python bench/bench_ingest.py``.
Results are appended to ``bench/results.md``.

``python bench/bench_ingest.py --against <folder>`` times instead the json+ ingest of
this checkout against another checkout of benchlib (``git worktree add <folder> <commit>``,
with its compiled ``benchlib/_bins*.so`` copied in), the two alternating in one run, so
that a refactor is measured against the code it replaced on the same machine, minutes apart.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from _results import record

HERE = Path(__file__).resolve().parent
WORK = HERE / "work"


def _child(code: str, cwd: Path = HERE.parent) -> dict:
    """Run ``code`` in a fresh Python process; it prints one JSON line.

    Peak RSS is the larger of the process's and its largest worker's.
    """
    wrapped = code + (
        "\nimport resource, json as _j\n"
        "peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "print(_j.dumps({**RESULT, 'peak_rss_mb': peak / 1024}))\n"
    )
    out = subprocess.run([sys.executable, "-c", wrapped], check=True, capture_output=True, text=True, cwd=cwd)
    return json.loads(out.stdout.strip().splitlines()[-1])


FIO_PLOT = """
import time
from fio_plot.fiolib import jsonimport, jsonparsing
settings = {{"rw": "randread", "iodepth": [1], "numjobs": [1, 2, 4], "input_directory": ["{folder}"],
            "type": [], "include_hosts": None, "exclude_hosts": None}}
t = time.perf_counter()
dataset = jsonimport.list_json_files(settings, fail=False)
dataset = jsonimport.import_json_dataset(settings, dataset)
jsonparsing.parse_json_data(settings, dataset)
RESULT = {{"seconds": time.perf_counter() - t, "files_matched": sum(len(d["files"]) for d in dataset)}}
"""

BENCHLIB_JSON = """
import time
from benchlib.ingest import ingest_study
t = time.perf_counter()
report = ingest_study("{study}", "{processed}")
RESULT = {{"seconds": time.perf_counter() - t, "ingested": len(report.ingested), "quarantined": len(report.quarantined)}}
t = time.perf_counter()
again = ingest_study("{study}", "{processed}")
RESULT["unchanged_seconds"] = time.perf_counter() - t
"""

POLARS_CSV = """
import time, polars as pl
t = time.perf_counter()
frame = pl.read_csv("{log}", has_header=False, new_columns=["t", "v", "d", "b", "p"])
RESULT = {{"seconds": time.perf_counter() - t, "rows": frame.height}}
"""

BENCHLIB_LOG = """
import time
from benchlib.ingest import ingest_study
t = time.perf_counter()
report = ingest_study("{study}", "{processed}")
RESULT = {{"seconds": time.perf_counter() - t, "ingested": len(report.ingested)}}
"""


#: fio-plot and benchlib run alternately this many times; this VM's speed drifts by up to 30% within minutes.
ROUNDS = 5


def bench_json(tmp: Path) -> dict:
    source = WORK / "jsonplus"
    files = sorted(source.glob("*.json"))
    study = tmp / "raw" / "jsonplus"
    study.mkdir(parents=True)
    for f in files:
        (study / f.name).symlink_to(f)
    rounds = []
    for i in range(ROUNDS):
        fio_plot = _child(FIO_PLOT.format(folder=source))
        ours = _child(BENCHLIB_JSON.format(study=study, processed=tmp / f"processed-{i}"))
        rounds.append((fio_plot, ours))
    ratios = sorted(f["seconds"] / o["seconds"] for f, o in rounds)
    fio_plot, ours = sorted(rounds, key=lambda r: r[0]["seconds"] / r[1]["seconds"])[ROUNDS // 2]
    n = len(files)
    return {
        "files": n,
        "mean_kib": sum(f.stat().st_size for f in files) / n / 1024,
        "rounds (alternating)": ROUNDS,
        "fio_plot_files_per_s (median round)": n / fio_plot["seconds"],
        "benchlib_files_per_s (median round)": n / ours["seconds"],
        "ratio_benchlib_over_fio_plot (median)": ratios[ROUNDS // 2],
        "ratio min": ratios[0],
        "ratio max": ratios[-1],
        "benchlib_unchanged_rerun_s": ours["unchanged_seconds"],
        "benchlib_peak_rss_mb": max(o["peak_rss_mb"] for _, o in rounds),
        "quarantined": ours["quarantined"],
    }


def bench_log(tmp: Path) -> dict:
    log = WORK / "logs" / "big_bw.1.log"
    study = tmp / "raw" / "biglog"
    study.mkdir(parents=True)
    (study / log.name).symlink_to(log)
    polars_alone = _child(POLARS_CSV.format(log=log))
    ours = _child(BENCHLIB_LOG.format(study=study, processed=tmp / "processed"))
    size = log.stat().st_size
    return {
        "log_gib": size / 1024**3,
        "rows": polars_alone["rows"],
        "polars_csv_mb_per_s": size / 1e6 / polars_alone["seconds"],
        "benchlib_mb_per_s": size / 1e6 / ours["seconds"],
        "speed_ratio_benchlib_over_polars": polars_alone["seconds"] / ours["seconds"],
        "benchlib_peak_rss_mb": ours["peak_rss_mb"],
        "polars_csv_peak_rss_mb": polars_alone["peak_rss_mb"],
    }


def bench_against(tmp: Path, other: Path, rounds: int = 7) -> dict:
    """json+ ingest of this checkout and of ``other``, alternating; first ingests and unchanged re-ingests."""
    source = WORK / "jsonplus"
    study = tmp / "raw" / "jsonplus"
    study.mkdir(parents=True)
    for f in sorted(source.glob("*.json")):
        (study / f.name).symlink_to(f)
    import benchlib

    assert Path(benchlib.__file__).parent.parent == HERE.parent, "run this with the checkout's own Python path"
    times: dict[str, list[dict]] = {"this": [], "other": []}
    for i in range(rounds):
        for name, root in (("other", other), ("this", HERE.parent)) if i % 2 else (("this", HERE.parent), ("other", other)):
            code = BENCHLIB_JSON.format(study=study, processed=tmp / f"processed-{name}-{i}")
            times[name].append(_child(code, cwd=root))
    out = {"files": len(list(study.iterdir())), "rounds (alternating, order swapped each round)": rounds}
    for name in ("other", "this"):
        first = sorted(r["seconds"] for r in times[name])
        again = sorted(r["unchanged_seconds"] for r in times[name])
        out[f"{name}: first ingest s (min / median / max)"] = f"{first[0]:.3f} / {first[rounds // 2]:.3f} / {first[-1]:.3f}"
        out[f"{name}: unchanged re-ingest s (min / median / max)"] = f"{again[0]:.3f} / {again[rounds // 2]:.3f} / {again[-1]:.3f}"
        out[f"{name}: quarantined"] = times[name][-1]["quarantined"]
    median = {n: sorted(r["seconds"] for r in times[n])[rounds // 2] for n in times}
    out["this / other, first ingest medians"] = median["this"] / median["other"]
    return out


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--against":
        other = Path(sys.argv[2]).resolve()
        with tempfile.TemporaryDirectory() as tmp:
            result = bench_against(Path(tmp), other)
        record(f"json+ ingest against {other.name}", list(result.items()))
        return
    with tempfile.TemporaryDirectory() as tmp:
        json_result = bench_json(Path(tmp) / "json")
        log_result = bench_log(Path(tmp) / "log")
    record("fio ingest", [(f"json+: {k}", v) for k, v in json_result.items()] + [(f"log: {k}", v) for k, v in log_result.items()])


if __name__ == "__main__":
    main()
