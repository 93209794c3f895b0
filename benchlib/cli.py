"""The ``benchlib`` command: a thin wrapper over the library.

Verbs: ``ingest`` (raw -> processed Parquet, with a summary per study) and
``inspect`` (what a single file is and holds).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import polars as pl
from rich.console import Console
from rich.table import Table

from benchlib.errors import BenchlibError
from benchlib.ingest import IngestReport, ingest_study, scan_table
from benchlib.paths import PROCESSED, RAW
from benchlib.sources import detect_all, read
from benchlib.stats import summarise_runs

_MIB = 1024 * 1024


def _fmt(value: float | None, digits: int = 1) -> str:
    return "" if value is None else f"{value:,.{digits}f}"


def _print_report(console: Console, report: IngestReport) -> None:
    parts = [f"{len(report.ingested)} ingested", f"{len(report.unchanged)} unchanged"]
    if report.removed:
        parts.append(f"{len(report.removed)} removed")
    if report.skipped:
        parts.append(f"{len(report.skipped)} skipped")
    if report.quarantined:
        parts.append(f"[bold red]{len(report.quarantined)} quarantined[/]")
    console.print(f"[bold]{report.study}[/]: {', '.join(parts)} -> {report.processed}")
    if not report.ingested and not report.removed and report.unchanged:
        console.print("  nothing changed since the last ingest; nothing was redone")
    for rel, reason in report.skipped:
        console.print(f"  skipped {rel}: {reason}")
    for rel, reason in report.quarantined:
        console.print(f"  [red]quarantined[/] {rel}: {reason}")


def _summary_table(report: IngestReport) -> Table:
    runs = scan_table(report.processed, "runs").collect()
    summary = summarise_runs(runs, scan_table(report.processed, "results").collect())
    table = Table(title=f"{report.study}: runs", title_justify="left")
    for column in ("source", "format", "fio", "dir", "rows", "IOPS", "MiB/s", "mean lat (us)"):
        table.add_column(column, justify="right" if column in ("rows", "IOPS", "MiB/s", "mean lat (us)") else "left")
    for row in summary.iter_rows(named=True):
        lat = row["lat_mean_ns"]
        table.add_row(
            row["source"], row["format"], row["tool_version"] or "", row["direction"], str(row["rows"]),
            _fmt(row["iops"]), _fmt(row["bandwidth_bytes_per_s"] / _MIB if row["bandwidth_bytes_per_s"] is not None else None),
            _fmt(lat / 1000 if lat is not None else None, 2),
        )
    return table


def _study_dirs(paths: Sequence[str]) -> list[Path]:
    if paths:
        return [Path(p) for p in paths]
    return sorted(p for p in RAW.iterdir() if p.is_dir()) if RAW.exists() else []


def cmd_ingest(args: argparse.Namespace, console: Console) -> int:
    """Ingest each study folder and print its report and summary; 1 if anything was quarantined."""
    studies = _study_dirs(args.studies)
    if not studies:
        console.print(f"no study folders under {RAW}; give one: benchlib ingest data/raw/<study>")
        return 2
    status = 0
    for folder in studies:
        report = ingest_study(folder, Path(args.processed))
        _print_report(console, report)
        if not args.quiet:
            console.print(_summary_table(report))
        if not report.ok:
            console.print(f"  see {report.processed / 'quarantine.csv'}; fix or remove those files and ingest again")
            status = 1
    return status


def cmd_inspect(args: argparse.Namespace, console: Console) -> int:
    """Print a file's detected format(s) and a one-screen summary of what it holds."""
    path = Path(args.file)
    formats = detect_all(path)
    tables = read(path, args.format)
    console.print(f"[bold]{path}[/]")
    console.print(f"  formats found: {', '.join(formats) or 'none'}; read as {tables.runs['format'][0]}")
    for name, frame in tables.items():
        console.print(f"  {name}: {frame.height} rows")
    runs = tables.runs.select("run_id", "host", "tool_version", "start_time", "duration_ns")
    console.print(runs)
    if tables.results.height:
        with pl.Config(tbl_rows=20, tbl_cols=12, fmt_str_lengths=30, tbl_width_chars=158):
            console.print(
                tables.results.select(
                    "client", "job_name", "direction", "rw", "block_size_bytes", "iodepth", "numjobs",
                    "iops", "bandwidth_bytes_per_s", "clat_mean_ns", "is_aggregate",
                )
            )
    if tables.intervals.height:
        console.print(tables.intervals.group_by("metric", "direction").agg(pl.len().alias("rows"), pl.col("value").mean().alias("mean")).sort("metric", "direction"))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``benchlib`` command."""
    parser = argparse.ArgumentParser(prog="benchlib", description="Reproducible storage benchmarking: ingest, inspect.")
    verbs = parser.add_subparsers(dest="verb", required=True)
    ingest = verbs.add_parser("ingest", help="raw tool output -> tidy Parquet under data/processed/")
    ingest.add_argument("studies", nargs="*", help="study folders (default: every folder under data/raw/)")
    ingest.add_argument("--processed", default=str(PROCESSED), help="processed root (default: data/processed)")
    ingest.add_argument("--quiet", action="store_true", help="no summary table")
    ingest.set_defaults(func=cmd_ingest)
    inspect = verbs.add_parser("inspect", help="detected format and a summary of one file")
    inspect.add_argument("file")
    inspect.add_argument("--format", help="read as this format instead of the detected one")
    inspect.set_defaults(func=cmd_inspect)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; user errors print one message and return a non-zero code."""
    args = build_parser().parse_args(argv)
    console = Console(width=160)
    try:
        return args.func(args, console)
    except BenchlibError as exc:
        Console(stderr=True).print(f"[bold red]error:[/] {exc}", highlight=False)
        return 2


if __name__ == "__main__":
    sys.exit(main())
