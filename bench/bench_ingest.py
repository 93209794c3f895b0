"""Benchmark: fio ingest speed and memory (issue "Foundation", performance targets).

1. json+ files: benchlib's full ingest (every table, latency bins included, Parquet
   written) against fio-plot's parse of the same files (its own import functions:
   list_json_files, which loads and filters every file, then import_json_dataset
   and parse_json_data). Reported as files per second and as a ratio.
2. A per-interval log of at least 1 GB: benchlib's streaming log ingest against
   polars alone reading the same file as CSV; peak memory of the benchlib process.

Run ``python bench/make_inputs.py`` first, then ``python bench/bench_ingest.py``.
Results are appended to ``bench/results.md``. The study is made as a user's study holds its files: copies
inside the study folder (ingest does not read links that lead out of a study, and a bench of links would
time the skipping). Before a figure is kept, every ingest is checked for what it did: the first ingest read
every file it was given and quarantined none, the unchanged re-ingest found every one unchanged, the log's
rows in the tables equal the rows polars read; a shortfall stops the bench with the counts.

``--smoke`` makes tiny inputs (20 json+ files, a 5 MB log) in a scratch folder, runs one round with every
check, and records nothing: the test suite runs it, so a bench that measures nothing fails CI.

``python bench/bench_ingest.py --against <folder>`` times instead the json+ ingest of
this checkout against another checkout of benchlib (``git worktree add <folder> <commit>``,
with its compiled ``benchlib/_bins*.so`` copied in), the two alternating in one run, so
that a refactor is measured against the code it replaced on the same machine, minutes apart.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _results import record
from make_inputs import RW

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
t = time.perf_counter()
matched = 0
for rw in {rw}:  # fio-plot reads one rw from one folder: each rw's folder once, so it parses every file once
    settings = {{"rw": rw, "iodepth": [1], "numjobs": [1, 2, 4], "input_directory": ["{folder}/" + rw],
                "type": [], "include_hosts": None, "exclude_hosts": None, "filter": ["read", "write"]}}
    dataset = jsonimport.list_json_files(settings, fail=False)
    dataset = jsonimport.import_json_dataset(settings, dataset)
    jsonparsing.parse_json_data(settings, dataset)
    matched += sum(len(d["files"]) for d in dataset)
RESULT = {{"seconds": time.perf_counter() - t, "files_matched": matched}}
"""

BENCHLIB_JSON = """
import time
from benchlib.ingest import ingest_study
t = time.perf_counter()
report = ingest_study("{study}", "{processed}")
RESULT = {{"seconds": time.perf_counter() - t, "ingested": len(report.ingested), "quarantined": len(report.quarantined),
           "skipped": len(report.skipped)}}
t = time.perf_counter()
again = ingest_study("{study}", "{processed}")
RESULT["unchanged_seconds"] = time.perf_counter() - t
RESULT["unchanged"] = len(again.unchanged)
RESULT["ingested_again"] = len(again.ingested)
"""

POLARS_CSV = """
import time, polars as pl
t = time.perf_counter()
frame = pl.read_csv("{log}", has_header=False, new_columns=["t", "v", "d", "b", "p"])
RESULT = {{"seconds": time.perf_counter() - t, "rows": frame.height}}
"""

BENCHLIB_LOG = """
import time
import polars as pl
from benchlib.ingest import ingest_study
t = time.perf_counter()
report = ingest_study("{study}", "{processed}")
RESULT = {{"seconds": time.perf_counter() - t, "ingested": len(report.ingested), "quarantined": len(report.quarantined)}}
RESULT["rows"] = pl.scan_parquet("{processed}/biglog/intervals/*.parquet").select(pl.len()).collect().item()
"""


#: fio-plot and benchlib run alternately this many times; this VM's speed drifts by up to 30% within minutes.
ROUNDS = 5


class ShortfallError(SystemExit):
    """A bench that processed less than it made: no figure is recorded."""


def check(what: str, got: int, wanted: int) -> None:
    """Stop the bench with the counts when ``got`` is not ``wanted``."""
    if got != wanted:
        raise ShortfallError(f"{what}: {got}, expected {wanted}; no figure recorded")


def copy_into_study(files: list[Path], study: Path, source: Path | None = None) -> None:
    """Make ``study`` hold copies of ``files``, as a user's study holds its outputs (links out are not read).

    ``source``: the folder ``files`` are in, whose subfolders the study keeps.
    """
    study.mkdir(parents=True)
    for f in files:
        copy = study / (f.relative_to(source) if source else f.name)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, copy)


def bench_json(tmp: Path, work: Path = WORK, rounds: int = ROUNDS, fio_plot: bool = True) -> dict:
    source = work / "jsonplus"
    files = sorted(source.rglob("*.json"))
    study = tmp / "raw" / "jsonplus"
    copy_into_study(files, study, source)
    n = len(files)
    results = []
    for i in range(rounds):
        theirs = _child(FIO_PLOT.format(folder=source, rw=list(RW))) if fio_plot else None
        ours = _child(BENCHLIB_JSON.format(study=study, processed=tmp / f"processed-{i}"))
        check("json+ files ingested", ours["ingested"], n)
        check("json+ files quarantined", ours["quarantined"], 0)
        check("json+ files skipped", ours["skipped"], 0)
        check("json+ files unchanged on the re-ingest", ours["unchanged"], n)
        check("json+ files read again on the re-ingest", ours["ingested_again"], 0)
        if theirs is not None:
            check("json+ files fio-plot parsed", theirs["files_matched"], n)
        results.append((theirs, ours))
    out = {
        "files": n,
        "files ingested, each round (checked)": n,
        "mean_kib": sum(f.stat().st_size for f in files) / n / 1024,
        "rounds (alternating)": rounds,
        "benchlib_unchanged_rerun_s (median round)": sorted(o["unchanged_seconds"] for _, o in results)[rounds // 2],
        "benchlib_peak_rss_mb": max(o["peak_rss_mb"] for _, o in results),
    }
    ours_median = sorted(o["seconds"] for _, o in results)[rounds // 2]
    out["benchlib_files_per_s (median round)"] = n / ours_median
    if fio_plot:
        ratios = sorted(t["seconds"] / o["seconds"] for t, o in results)
        theirs = sorted(t["seconds"] for t, _ in results)[rounds // 2]
        out |= {
            "fio_plot_files_per_s (median round)": n / theirs,
            "ratio_benchlib_over_fio_plot (median)": ratios[rounds // 2],
            "ratio min": ratios[0],
            "ratio max": ratios[-1],
        }
    return out


def bench_log(tmp: Path, work: Path = WORK) -> dict:
    log = work / "logs" / "big_bw.1.log"
    study = tmp / "raw" / "biglog"
    copy_into_study([log], study)
    polars_alone = _child(POLARS_CSV.format(log=log))
    ours = _child(BENCHLIB_LOG.format(study=study, processed=tmp / "processed"))
    check("logs ingested", ours["ingested"], 1)
    check("logs quarantined", ours["quarantined"], 0)
    check("log rows in the intervals table", ours["rows"], polars_alone["rows"])
    size = log.stat().st_size
    return {
        "log_gib": size / 1024**3,
        "rows (polars read; benchlib wrote, checked)": polars_alone["rows"],
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
    copy_into_study(sorted(source.rglob("*.json")), study, source)
    import benchlib

    assert Path(benchlib.__file__).parent.parent == HERE.parent, "run this with the checkout's own Python path"
    times: dict[str, list[dict]] = {"this": [], "other": []}
    for i in range(rounds):
        for name, root in (
            (("other", other), ("this", HERE.parent)) if i % 2 else (("this", HERE.parent), ("other", other))
        ):
            code = BENCHLIB_JSON.format(study=study, processed=tmp / f"processed-{name}-{i}")
            times[name].append(_child(code, cwd=root))
    out = {"files": len(list(study.rglob("*.json"))), "rounds (alternating, order swapped each round)": rounds}
    for name in ("other", "this"):
        first = sorted(r["seconds"] for r in times[name])
        again = sorted(r["unchanged_seconds"] for r in times[name])
        out[f"{name}: first ingest s (min / median / max)"] = (
            f"{first[0]:.3f} / {first[rounds // 2]:.3f} / {first[-1]:.3f}"
        )
        out[f"{name}: unchanged re-ingest s (min / median / max)"] = (
            f"{again[0]:.3f} / {again[rounds // 2]:.3f} / {again[-1]:.3f}"
        )
        out[f"{name}: quarantined"] = times[name][-1]["quarantined"]
    median = {n: sorted(r["seconds"] for r in times[n])[rounds // 2] for n in times}
    out["this / other, first ingest medians"] = median["this"] / median["other"]
    return out


def smoke() -> None:
    """Tiny inputs made here, one round, every check; nothing recorded."""
    import importlib.util

    from make_inputs import make_json, make_log

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "work"
        make_json(20, Path(tmp), work)
        make_log(0.005, Path(tmp), work)
        has_fio_plot = importlib.util.find_spec("fio_plot") is not None
        json_result = bench_json(Path(tmp) / "json", work, rounds=1, fio_plot=has_fio_plot)
        log_result = bench_log(Path(tmp) / "log", work)
    print(json.dumps({**json_result, **log_result}, indent=1))


def main() -> None:
    if sys.argv[1:] == ["--smoke"]:
        smoke()
        return
    if len(sys.argv) == 3 and sys.argv[1] == "--against":
        other = Path(sys.argv[2]).resolve()
        with tempfile.TemporaryDirectory() as tmp:
            result = bench_against(Path(tmp), other)
        record(f"json+ ingest against {other.name}", list(result.items()))
        return
    with tempfile.TemporaryDirectory() as tmp:
        json_result = bench_json(Path(tmp) / "json")
        log_result = bench_log(Path(tmp) / "log")
    rows = [(f"json+: {k}", v) for k, v in json_result.items()] + [(f"log: {k}", v) for k, v in log_result.items()]
    record("fio ingest (inputs copied into the study; counts checked)", rows)


if __name__ == "__main__":
    main()
