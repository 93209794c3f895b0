"""The ``benchlib`` command: a thin wrapper over the library.

Verbs: ``ingest`` (raw -> processed Parquet, with a summary per study),
``inspect`` (what a single file is and holds), ``run`` (a fio plan) and
``verify`` (a write-up's claims against its data), ``bundle`` (the
same, packed for a peer) and ``report`` (papermill over a pipeline's matrix).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from benchlib.errors import MACHINE_ERRNOS, BenchlibError, FormatError, StudyError, file_failure
from benchlib.ingest import IngestReport, ingest_study
from benchlib.paths import PROCESSED, RAW, REPORTS
from benchlib.sources import detect_all, read
from benchlib.sources.hcibench import check_hcibench_summary, check_summary
from benchlib.sources.vdbench_folder import output_files
from benchlib.stats import summarise_runs
from benchlib.store import scan_table

if TYPE_CHECKING:
    from benchlib.runner import Plan, RunSummary

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
    console.print(f"[bold]{escape(report.study)}[/]: {', '.join(parts)} -> {escape(str(report.processed))}")
    if not report.ingested and not report.removed and report.unchanged:
        console.print("  nothing changed since the last ingest; nothing was redone")
    for verb, rows in (("skipped", report.skipped), ("[red]quarantined[/]", report.quarantined)):
        _print_grouped(console, verb, rows)  # one line per reason: a folder quarantined whole is one line
    _print_grouped(console, "[yellow]note[/]", report.notes)


def _print_grouped(console: Console, verb: str, rows: list[tuple[str, str]]) -> None:
    """Print ``(file, reason)`` rows one line per reason: the first file, how many more, the reason."""
    by_reason: dict[str, list[str]] = {}
    for rel, reason in rows:
        by_reason.setdefault(reason, []).append(rel)
    for reason, files in by_reason.items():
        more = f" and {len(files) - 1} more" if len(files) > 1 else ""
        console.print(f"  {verb} {escape(files[0])}{more}: {escape(reason)}", highlight=False)


def _summary_table(report: IngestReport) -> Table:
    runs = scan_table(report.processed, "runs").collect()
    summary = summarise_runs(runs, scan_table(report.processed, "results").collect())
    table = Table(title=f"{report.study}: runs", title_justify="left")
    for column in ("source", "format", "version", "phase", "dir", "rows", "IOPS", "MiB/s", "mean lat (us)"):
        table.add_column(column, justify="right" if column in ("rows", "IOPS", "MiB/s", "mean lat (us)") else "left")
    for row in summary.iter_rows(named=True):
        lat = row["lat_mean_ns"]
        table.add_row(
            row["source"],
            row["format"],
            row["tool_version"] or "",
            "" if row["phase"] is None else str(row["phase"]),
            row["direction"],
            str(row["rows"]),
            _fmt(row["iops"]),
            _fmt(row["bandwidth_bytes_per_s"] / _MIB if row["bandwidth_bytes_per_s"] is not None else None),
            _fmt(lat / 1000 if lat is not None else None, 2),
        )
    return table


def _print_hcibench_check(console: Console, report: IngestReport) -> None:
    """HCIBench's own summary against benchlib's aggregation of its worker VMs, where the study has one."""
    runs = scan_table(report.processed, "runs").collect()
    if (runs["format"] == "hcibench-summary").any():
        _print_summary_rows(
            console, report.study, check_summary(runs, scan_table(report.processed, "results").collect())
        )


def _print_summary_rows(console: Console, study: str, check: pl.DataFrame) -> None:
    table = Table(title=f"{study}: HCIBench's summary vs benchlib's aggregation of its VMs", title_justify="left")
    for column in ("run", "metric", "HCIBench", "benchlib", "diff %", "why"):
        table.add_column(column, justify="right" if column in ("HCIBench", "benchlib", "diff %") else "left")
    for row in check.iter_rows(named=True):
        table.add_row(
            row["run"],
            row["metric"],
            _fmt(row["hcibench"], 3),
            _fmt(row["benchlib"], 3),
            _fmt(row["difference_pct"], 1),
            row["note"],
        )
    console.print(table)


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
    status, refused = 0, []
    for folder in studies:
        try:
            report = ingest_study(folder, Path(args.processed))
        except StudyError as exc:  # one study's bad study.toml costs that study, not the others
            if len(studies) == 1:
                raise
            _print_error(str(exc))
            refused.append(folder.name)
            continue
        except OSError as exc:
            if exc.errno not in MACHINE_ERRNOS:
                raise
            raise BenchlibError(
                f"{folder}: {exc.strerror or exc} while writing its processed tables under {args.processed}; "
                "the ingest stopped and removed what it had half written; the raw files are untouched, and readers "
                "refuse this study's tables until an ingest finishes. Make room and run `benchlib ingest "
                f"{folder}` again"
            ) from exc
        _print_report(console, report)
        if not args.quiet:
            console.print(_summary_table(report))
            _print_hcibench_check(console, report)
        if not report.ok:
            console.print(f"  see {report.processed / 'quarantine.csv'}; fix or remove those files and ingest again")
            status = 1
    if refused:
        _print_error(
            f"not ingested: {', '.join(refused)} (see above); the other {len(studies) - len(refused)} studies were"
        )
        return 2
    return status


def cmd_inspect(args: argparse.Namespace, console: Console) -> int:
    """Print a file's detected format(s) and a one-screen summary of what it holds."""
    path = Path(args.file)
    if path.is_dir():  # a vdbench output folder is read as one unit: inspect it through any of its files
        members = output_files(path)
        if not members:
            held = ", ".join(sorted(p.name for p in path.iterdir())[:6]) or "nothing"
            raise FormatError(
                path, "folder", "a vdbench output folder (summary.html, totals.html, flatfile.html)", found=held
            )
        path = members[0]
    formats = detect_all(path)
    try:
        tables = read(path, args.format)
    except Exception as exc:  # a value a reader did not expect is the file's, said as ingest says it
        reason = file_failure(exc)
        if reason is None or isinstance(exc, FormatError):
            raise
        _print_error(f"{path}: {reason}")
        return 2
    console.print(f"[bold]{escape(str(args.file))}[/]")
    console.print(f"  formats found: {', '.join(formats) or 'none'}; read as {tables.runs['format'][0]}")
    for name, frame in tables.items():
        console.print(f"  {name}: {frame.height} rows")
    runs = tables.runs.select("run_id", "host", "tool_version", "start_time", "duration_ns")
    console.print(runs)
    if tables.results.height:
        with pl.Config(tbl_rows=20, tbl_cols=12, fmt_str_lengths=30, tbl_width_chars=158):
            console.print(
                tables.results.select(
                    "client",
                    "job_name",
                    "direction",
                    "rw",
                    "block_size_bytes",
                    "iodepth",
                    "numjobs",
                    "iops",
                    "bandwidth_bytes_per_s",
                    "clat_mean_ns",
                    "is_aggregate",
                )
            )
        from benchlib.stats.plausibility import printed_apart
        from benchlib.words.implausible import printed_apart_words

        runs = tables.runs.select("run_id", "source", "format")
        apart = printed_apart(tables.results.join(runs, on="run_id", how="left"))
        if apart.height:  # the file's own figures against its counts: said, not hidden behind the recomputed ones
            console.print(escape(printed_apart_words(apart).replace("**", "")))
    if tables.intervals.height:
        console.print(
            tables.intervals.group_by("metric", "direction")
            .agg(pl.len().alias("rows"), pl.col("value").mean().alias("mean"))
            .sort("metric", "direction")
        )
    if (tables.runs["format"] == "hcibench-summary").any():
        _inspect_hcibench_summary(console, path)
    return 0


def _inspect_hcibench_summary(console: Console, path: Path) -> None:
    """Say how an HCIBench summary agrees with its VMs' files beside it (:func:`check_hcibench_summary`)."""
    found = check_hcibench_summary(path)
    if not found.found:
        console.print(
            f"  HCIBench's VMs' folder {found.vms.name} is not beside it: nothing to check its figures against"
        )
        return
    for rel, why in found.quarantined:
        console.print(f"  not read: {escape(rel)}: {escape(why)}", highlight=False)
    if found.check is not None:
        _print_summary_rows(console, "hcibench", found.check)


def _print_stopping(console: Console, plan: Plan, summary: RunSummary) -> None:
    """Say how an adaptive plan's repetitions ended: how many cells met the rule, and which did not."""
    if not summary.stopping or plan.adaptive is None:
        return
    met = sum(state.met for state, _ in summary.stopping.values())
    console.print(
        f"adaptive repetitions ({plan.adaptive.rule.text}): {met} of {len(summary.stopping)} cells met the rule; "
        "every decision is in benchlib-repetitions.json",
        markup=False,
        highlight=False,
    )
    for cell, (state, words) in summary.stopping.items():
        if not state.met:
            console.print(f"  [yellow]{escape(cell)}[/]: {escape(words)}", highlight=False)


def _levels_line(plan: Plan, levels: dict[str, list[str]]) -> str:
    """Say what ``--levels`` runs, and what running levels one after another costs."""
    from benchlib.runner.execute import at_levels, pending

    chosen = [step for step in pending(plan) if at_levels(step[2], levels)]
    said = "; ".join(f"{f} {', '.join(v)}" for f, v in levels.items())
    if not chosen:
        return f"--levels: every cell at {said} is done already; nothing to run"
    return (
        f"--levels: only the {len(chosen)} cells still to do at {said}; the others wait for their own run "
        "(levels run one after another, not shuffled together: drift between them can pass for their effect)"
    )


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    """Print the plan; unless --dry-run, run what is not done yet with a progress bar."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from benchlib.runner import RunInterrupted, describe_plan, load_plan, read_plan, run_plan
    from benchlib.runner.execute import fio_binary
    from benchlib.runner.plan import PlanError, chosen_levels, unset_by_hand, vcenter_problem

    plan = load_plan(args.plan, allow_options=args.allow_option, allow_facts_command=args.allow_facts_command)
    levels = chosen_levels(plan, args.levels)
    reading = read_plan(plan, fio_binary())
    for line in describe_plan(plan, reading, cells=args.dry_run, levels=levels):
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    if levels:
        console.print(_levels_line(plan, levels), highlight=False, markup=False, soft_wrap=True)
    unset = unset_by_hand(plan, levels)
    if unset:  # levels no fio option sets: a setting changed by hand, one level at a time
        named = ", ".join(unset)
        said = (
            f"{args.plan}: {named} {'has' if len(unset) == 1 else 'have'} no fio option, so benchlib does not set "
            f"{'its levels' if len(unset) == 1 else 'their levels'}: run the cells of one level at a time, after "
            f"setting it: benchlib run {args.plan} " + " ".join(f"--levels {f}=<level>" for f in unset)
        )
        if not args.dry_run:
            raise PlanError(said + " (every level shuffled together would label runs with settings nobody set)")
        console.print(f"note: {said}", highlight=False, markup=False, soft_wrap=True)
    if (problem := vcenter_problem(plan, args.vcenter, args.vcenter_insecure)) is not None:
        if args.dry_run:
            console.print(f"vCenter: {problem}", highlight=False, markup=False, soft_wrap=True)
        else:
            raise PlanError(problem)
    if args.dry_run:
        return 0
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task("starting", total=None)

        def advance(done: float, total: float, label: str) -> None:
            bar.update(task, completed=done, total=total, description=label)

        try:
            summary = run_plan(
                plan,
                destroy_data=args.destroy_data,
                progress=advance,
                reading=reading,
                vcenter=args.vcenter,
                vcenter_insecure=args.vcenter_insecure,
                levels=levels,
                apply_settings=args.apply_settings,
            )
        except RunInterrupted as exc:
            bar.stop()
            Console(stderr=True, soft_wrap=True).print(f"[bold yellow]stopped:[/] {escape(str(exc))}", highlight=False)
            return 130
    return _print_summary(console, plan, summary)


def _print_summary(console: Console, plan: Plan, summary: RunSummary) -> int:
    """Say what a run did and what is missing; 1 when a host's runs are missing, else 0."""
    console.print(
        f"{summary.done} host runs done now, {summary.already} were done before -> {plan.output}", markup=False
    )
    _print_stopping(console, plan, summary)
    for host, reason in sorted(summary.down.items()):
        console.print(f"  [red]host {escape(host)}[/]: {escape(reason)}", highlight=False)
    for missing in summary.missing:
        console.print(
            f"  [red]missing[/] {escape(missing.cell)} r{missing.repetition} on {escape(missing.host)}: "
            f"{escape(missing.reason)}",
            highlight=False,
        )
    if summary.missing:
        console.print(
            "the other hosts' results are kept; fix the hosts and run the same command again "
            "to fill in only what is missing"
        )
        return 1
    return 0


#: what ``benchlib verify --json`` writes: its layout's name and version (bumped when a key changes meaning)
def cmd_verify(args: argparse.Namespace, console: Console) -> int:
    """Ingest the study, recompute every claim of its claims.toml, print the verdicts; 1 on any FAIL."""
    from benchlib.claims import FAIL, load_claims, verification_record, verify
    from benchlib.store import load_study_tables

    claims, tolerances = load_claims(args.study)
    report = ingest_study(args.study, Path(args.processed))
    if not report.ok:
        _print_report(console, report)
    verdicts = verify(load_study_tables(report.processed), claims, tolerances)
    colours = {"PASS": "green", "FAIL": "bold red", "UNSUPPORTED": "yellow"}
    counts = {k: sum(v.verdict == k for v in verdicts) for k in colours}
    if args.json:
        record = verification_record(Path(args.study), report.processed, report.study, verdicts)
        text = json.dumps(record, indent=1, ensure_ascii=False) + "\n"
        if args.json == "-":
            sys.stdout.write(text)
        else:
            Path(args.json).write_text(text, encoding="utf-8")
            console.print(f"wrote {args.json}", highlight=False, markup=False)
        return 1 if counts[FAIL] else 0
    table = Table(title=f"{escape(report.study)}: {len(verdicts)} claims", title_justify="left", show_lines=False)
    for column in ("claim", "section", "says", "stated", "recomputed", "tolerance", "verdict", "runs"):
        table.add_column(column, overflow="fold")
    for v in verdicts:
        texts = (v.claim.id, v.claim.section, v.claim.says, v.claim.stated, v.recomputed, v.tolerance)
        runs = f"{v.runs}: {v.note}" if v.note else str(v.runs)
        table.add_row(*(escape(str(t)) for t in texts), f"[{colours[v.verdict]}]{v.verdict}[/]", escape(runs))
    console.print(table)
    console.print(", ".join(f"{n} {k}" for k, n in counts.items()))
    if verdicts and all(v.runs_per_configuration == 1 for v in verdicts if v.runs):
        console.print(
            "Every configuration these claims read was run once: PASS and FAIL judge the arithmetic of the "
            "write-up's numbers, not whether a setting had an effect.",
            highlight=False,
            markup=False,
        )
    return 1 if counts[FAIL] else 0


def cmd_bundle(args: argparse.Namespace, console: Console) -> int:
    """Write a verification bundle of a study (code, raw files, claims, checksums, verdicts)."""
    from benchlib.bundle import write_bundle

    path, links = write_bundle(args.study, Path(args.output), Path(args.processed))
    console.print(f"wrote {path}; a peer unpacks it and follows its VERIFY.md", highlight=False, markup=False)
    for name, to, why in links:
        console.print(f"  packed as a link, not its content: {name} -> {to} ({why})", highlight=False, markup=False)
    return 0


def _advance(bar, task, name: str, done: int, total: int, label: str) -> None:  # noqa: ANN001
    bar.update(task, completed=done, total=total, description=f"{name}: {label}")


def cmd_vsphere_facts(args: argparse.Namespace, console: Console) -> int:
    """Read the VMs' facts from vCenter and write them as JSON (standard output, or --output)."""
    from pyVim.connect import Disconnect

    from benchlib.vsphere import Server, connect, facts_document

    server = Server.parse(args.server)
    service = connect(server, insecure=args.insecure)
    try:
        facts = facts_document(service, server, args.vm)
    finally:
        Disconnect(service)
    text = json.dumps(facts, indent=1, ensure_ascii=False) + "\n"
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        console.print(f"wrote {args.output}: {len(facts['vms'])} VMs", highlight=False, markup=False)
    else:
        sys.stdout.write(text)
    return 0


def _explain(name: str, console: Console) -> int:
    """Print one canonical notebook's parameters: name, default, what it is (None: from the study)."""
    from benchlib.paths import NOTEBOOKS
    from benchlib.pipeline import notebook_parameters

    notebook = NOTEBOOKS / f"{Path(name).stem}.ipynb"
    if not notebook.is_file():
        known = ", ".join(sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")))
        raise BenchlibError(f"no notebook {name!r} (the notebooks: {known})")
    console.print(
        f"[bold]{notebook.name}[/]: " + escape("a pipeline's [parameters] or a summary entry's parameters set these")
    )
    for parameter, default, what in notebook_parameters(notebook):
        console.print(f"  {parameter} = {default}" + (f"  # {what}" if what else ""), highlight=False, markup=False)
    console.print("None means: chosen from the study's runs (benchlib.fit); a page they cannot support is left out.")
    return 0


def cmd_new(args: argparse.Namespace, console: Console) -> int:
    """Write a study of a kind (plan, study.toml, claims skeleton, README, pipeline) and say what next."""
    from benchlib.new import write_study

    written = write_study(
        args.kind,
        Path(args.folder),
        servers=[s.strip() for s in args.servers.split(",") if s.strip()] if args.servers else None,
        runtime_s=args.runtime,
        size=args.size,
        repetitions=args.repetitions,
        target=args.target,
        port=args.port,
    )
    for path in written:
        console.print(f"wrote {path}", highlight=False, markup=False)
    console.print(
        f"next: read {Path(args.folder) / 'README.md'}, edit plan.toml, then "
        f"benchlib run {Path(args.folder) / 'plan.toml'} --dry-run",
        highlight=False,
        markup=False,
    )
    return 0


def cmd_notebook(args: argparse.Namespace, console: Console) -> int:
    """Write work/<study>-<notebook>.ipynb: the canonical notebook, outputs cleared, its parameters injected."""
    import ast

    from benchlib.paths import WORK
    from benchlib.pipeline import copy_notebook

    parameters: dict[str, object] = {"study": args.study}
    for text in args.set:
        name, _, value = text.partition("=")
        try:
            parameters[name] = ast.literal_eval(value)
        except (SyntaxError, ValueError):
            parameters[name] = value  # a bare word is a string: --set factor=controller
    written = copy_notebook(args.notebook, parameters, WORK)
    console.print(f"wrote {written}: open it with `python3 tasks.py lab`", highlight=False, markup=False)
    return 0


def cmd_report(args: argparse.Namespace, console: Console) -> int:
    """Build reports/<pipeline>/ for each pipeline (default: every file under pipelines/)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from benchlib.paths import PIPELINES
    from benchlib.pipeline import build_report

    if args.explain:
        return _explain(args.explain, console)
    paths = [Path(p) for p in args.pipelines] or sorted(PIPELINES.glob("*.toml"))
    failed = []
    for path in paths:
        try:
            with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), console=console) as bar:
                task = bar.add_task(path.stem, total=None)
                advance = functools.partial(_advance, bar, task, path.stem)
                result = build_report(path, reports=Path(args.reports), workers=args.workers, progress=advance)
        except BenchlibError as exc:  # one pipeline's bad study or notebook costs that report, not the others
            if len(paths) == 1:
                raise
            _print_error(str(exc))
            failed.append(path.stem)
            continue
        ran = [e for e in result.executions if not e.skipped]
        console.print(
            f"[bold]{escape(path.stem)}[/]: {len(result.executions)} notebooks ({len(ran)} run, "
            f"{len(result.executions) - len(ran)} unchanged) -> {escape(str(result.folder / 'index.html'))}",
            highlight=False,
        )
        for cell in result.missing_cells:
            console.print(
                f"  no data for cell {', '.join(f'{k}={v}' for k, v in cell.items())}", highlight=False, markup=False
            )
    if failed:
        _print_error(f"not built: {', '.join(failed)} (see above); the other {len(paths) - len(failed)} reports were")
        return 2
    return 0


#: the --processed option's help: the root it will use, and what moves it
PROCESSED_HELP = "processed root (default: %(default)s; BENCHLIB_DATA or BENCHLIB_PROCESSED move it)"


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``benchlib`` command."""
    parser = argparse.ArgumentParser(
        prog="benchlib", description="Reproducible storage benchmarking: ingest, inspect, run, verify."
    )
    verbs = parser.add_subparsers(dest="verb", required=True)
    ingest = verbs.add_parser("ingest", help="raw tool output -> tidy Parquet under data/processed/")
    ingest.add_argument("studies", nargs="*", help="study folders (default: every folder under data/raw/)")
    ingest.add_argument("--processed", default=str(PROCESSED), help=PROCESSED_HELP)
    ingest.add_argument("--quiet", action="store_true", help="no summary table")
    ingest.set_defaults(func=cmd_ingest)
    inspect = verbs.add_parser("inspect", help="detected format and a summary of one file")
    inspect.add_argument("file")
    inspect.add_argument("--format", help="read as this format instead of the detected one")
    inspect.set_defaults(func=cmd_inspect)
    run = verbs.add_parser("run", help="run a fio plan (matrix x profiles x repetitions, one or many hosts)")
    run.add_argument("plan", help="plan file, e.g. data/raw/loopback-fio/plan.toml")
    run.add_argument("--dry-run", action="store_true", help="print cells, time and bytes written; run nothing")
    run.add_argument("--destroy-data", metavar="DEVICE", help="the exact block device the plan may overwrite")
    run.add_argument(
        "--allow-option",
        metavar="NAME",
        action="append",
        default=[],
        help="let the plan use this fio option although it runs commands, writes files of its own "
        "choosing or changes the host (exec_prerun, write_iolog, ioengine=<other>...); repeatable",
    )
    run.add_argument(
        "--allow-facts-command",
        action="store_true",
        help="let the plan's shell commands run on this machine: [hosts] facts_command, [[esxtop]] command, "
        "[esxi] command",
    )
    run.add_argument(
        "--vcenter",
        metavar="URL",
        help="the vCenter the plan's [vsphere] may read, with your BENCHLIB_VSPHERE_USER/_PASSWORD; "
        "it must be the plan's server (a plan alone never chooses where credentials go)",
    )
    run.add_argument(
        "--vcenter-insecure",
        action="store_true",
        help="let the plan's [vsphere] insecure = true skip vCenter's certificate check (a lab's self-signed one)",
    )
    run.add_argument(
        "--apply-settings",
        action="store_true",
        help="let the plan's [vsphere] apply set Storage I/O Control or its congestion threshold on the datastores "
        "it names, move its VMs' test disks to each cell's controller (stopping and starting the VMs) and set the "
        "LUN's Round Robin limit on its ESXi hosts, before each cell, and its shares and limits hold each test "
        "disk's shares and IOPS limit through the run (put back at the end; every change in benchlib-settings.json)",
    )
    run.add_argument(
        "--levels",
        metavar="FACTOR=LEVEL",
        action="append",
        default=[],
        help="run only the cells at these levels (a setting changed by hand: controller=pvscsi); repeatable",
    )
    run.set_defaults(func=cmd_run)
    new = verbs.add_parser("new", help="write a ready study of a kind the field publishes into data/raw/<name>")
    new.add_argument("kind", help="controller, fairness, queue-depth, multipath or virtual-to-native")
    new.add_argument("folder", help="the new study's folder, e.g. data/raw/my-controller-study")
    new.add_argument("--servers", help="the fio servers, one per VM, comma-separated (default: placeholders)")
    new.add_argument("--runtime", type=int, default=60, help="seconds per run (default 60)")
    new.add_argument("--size", default="8GiB", help="the region fio works in on each VM (default 8GiB)")
    new.add_argument("--repetitions", type=int, help="runs per configuration (default: what a verdict needs)")
    new.add_argument("--target", default="/mnt/bench/{host}.dat", help="the file on each VM's test disk")
    new.add_argument("--port", type=int, default=8765, help="the fio servers' port (default 8765)")
    new.set_defaults(func=cmd_new)
    copy = verbs.add_parser("notebook", help="copy a canonical notebook into work/, parameterised for a study")
    copy.add_argument("notebook", help="cell, comparison, sweeps, fairness, ... (benchlib report --explain <it>)")
    copy.add_argument("--study", required=True, help="the study's folder name under data/raw")
    copy.add_argument(
        "--set", metavar="NAME=VALUE", action="append", default=[], help="a parameter, its value a Python literal"
    )
    copy.set_defaults(func=cmd_notebook)
    check = verbs.add_parser("verify", help="recompute every claim of a study's claims.toml: PASS / FAIL / UNSUPPORTED")
    check.add_argument("study", help="study folder with claims.toml, e.g. data/raw/pvscsi-vs-lsi")
    check.add_argument("--processed", default=str(PROCESSED), help=PROCESSED_HELP)
    check.add_argument("--json", metavar="FILE", help="write the verdicts as JSON to FILE ('-': standard output)")
    check.set_defaults(func=cmd_verify)
    bundle = verbs.add_parser("bundle", help="a verification bundle of a study for a peer")
    bundle.add_argument("study", help="study folder with claims.toml")
    bundle.add_argument(
        "--output", default=str(REPORTS / "bundles"), help="folder for <study>-bundle.tar.gz (default: reports/bundles)"
    )
    bundle.add_argument("--processed", default=str(PROCESSED), help=PROCESSED_HELP)
    bundle.set_defaults(func=cmd_bundle)
    vsphere = verbs.add_parser("vsphere", help="what vCenter says about the VMs: controllers, disks, SIOC, LUNs")
    vsphere_verbs = vsphere.add_subparsers(dest="vsphere_verb", required=True)
    facts = vsphere_verbs.add_parser(
        "facts",
        help="each VM's disks and their controllers, shares and datastores, its host's LUNs and path policies (JSON)",
        description="Credentials: BENCHLIB_VSPHERE_USER and BENCHLIB_VSPHERE_PASSWORD, or BENCHLIB_VSPHERE_CREDENTIALS "
        "naming a TOML file with user and password.",
    )
    facts.add_argument("--server", required=True, help="vCenter: https://vc.example[:port] (http only to 127.0.0.1)")
    facts.add_argument("--vm", action="append", default=[], help="a VM's name (repeat; default: every VM)")
    facts.add_argument("--insecure", action="store_true", help="accept a self-signed certificate (lab vCenters)")
    facts.add_argument("--output", help="write the JSON here instead of standard output")
    facts.set_defaults(func=cmd_vsphere_facts)
    report = verbs.add_parser(
        "report", help="papermill over a pipeline's matrix -> reports/<pipeline>/ (HTML, figures)"
    )
    report.add_argument("pipelines", nargs="*", help="pipeline files (default: every pipelines/*.toml)")
    report.add_argument("--reports", default=str(REPORTS), help="output root (default: reports/, or $BENCHLIB_REPORTS)")
    report.add_argument("--workers", type=int, default=2, help="notebooks executed at once (default 2)")
    report.add_argument(
        "--explain", metavar="NOTEBOOK", help="print a notebook's parameters (cell, comparison, ...) and exit"
    )
    report.set_defaults(func=cmd_report)
    return parser


def _print_error(message: str) -> None:
    """Print one user error on stderr, as :func:`main` does."""
    Console(stderr=True, soft_wrap=True).print(f"[bold red]error:[/] {escape(message)}", highlight=False)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; user errors print one message and return a non-zero code."""
    args = build_parser().parse_args(argv)
    console = Console(width=160)
    try:
        return args.func(args, console)
    except BenchlibError as exc:
        _print_error(str(exc))
        return 2
    except PermissionError as exc:
        _print_error(
            f"{exc.filename or 'a file'}: {exc.strerror or 'permission denied'}; benchlib may not write or read there "
            "(ingest writes the processed folder: --processed, or BENCHLIB_DATA). Change its permissions, or choose "
            "a folder of your own, and run the same command again"
        )
        return 2
    except OSError as exc:
        if exc.errno not in MACHINE_ERRNOS:
            raise
        where = f" ({exc.filename})" if exc.filename else ""
        Console(stderr=True, soft_wrap=True).print(
            f"[bold red]error:[/] {escape(exc.strerror or str(exc))}{escape(where)}: make room (disk, memory or "
            "file handles) and run the same command again; it redoes only what was not finished",
            highlight=False,
        )
        return 3


if __name__ == "__main__":
    sys.exit(main())
