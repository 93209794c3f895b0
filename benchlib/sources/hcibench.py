"""HCIBench results: the appliance's summary (``<test>-res.txt``) and the check of it against its worker VMs.

An HCIBench test case folder ``<test>/<case>-<epoch>/`` holds one file per
worker VM, named after the VM: ``<vm>.txt`` (vdbench engine: the VM's vdbench
console output) or ``<vm>.json`` (fio engine: fio's JSON with
``--status-interval``, the final document is the result), its parameter
files (``vdbench.cfg`` or ``fio.cfg``, ``hcibench.cfg``) and, beside the
folder, ``<case>-<epoch>-res.txt``: HCIBench's own summary per datastore and
run definition (vdbench) or job (fio). The per-VM files are read by the
vdbench and fio readers (the ingest names each run's host after its VM);
this module reads the summary, kept as ``is_aggregate`` rows, and
:func:`check_summary` compares it with a correct aggregation of the VMs.

How HCIBench summarises (its ``parseVdbResult.rb`` and ``parseFioResult.rb``,
read, as documented in ``../shared/corpus/FORMATS.md``): IOPS and throughput
are sums over VMs (vdbench ``MB/sec`` and fio ``bw`` KiB/s / 1024: MiB/s);
latencies are plain means of the VMs' means, not weighted by their I/Os; the
fio 95th percentile is a mean of the VMs' 95th percentiles; the vdbench
"95%tile_LAT" is not measured at all but ``mean + 1.645 x stddev`` (a normal
approximation) of the VMs' mean latency and mean standard deviation.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from benchlib.errors import FormatError, quoted
from benchlib.schema import Tables
from benchlib.sources._common import read_source, run_id

MIB = 1024 * 1024
_PAIR = re.compile(r"^([A-Za-z0-9%_ ]+?)\s*[=:]\s*(.*)$")
_VALUE = re.compile(r"^(-?[\d.]+)\s*(%|IO/S|IO/s|MB/s|ms)?\s*$", re.IGNORECASE)
P95_ESTIMATE = "mean + 1.645 x stddev (HCIBench's estimate, not a measured percentile)"


def looks_like_hcibench_summary(head: str) -> bool:
    """HCIBench's ``-res.txt``: a ``Datastore = <name>`` line, ``=====`` rules and ``IOPS ... IO/S`` lines."""
    first = next((line for line in head.splitlines() if line.strip()), "")
    return (
        bool(re.match(r"^Datastore\s+=\s*\S", first))
        and "=====" in head
        and bool(re.search(r"^IOPS\s*=.*IO/S", head, re.M | re.I))
    )


def _number(path: Path, number: int, text: str) -> float | None:
    text = text.strip()
    if not text:
        return None
    match = _VALUE.match(text)
    if not match:
        raise FormatError(path, f"line {number}", f"a number with its unit (IO/S, MB/s, ms or %), found {text!r}")
    return float(match.group(1))


def parse_summary(path: Path, text: str) -> list[dict[str, Any]]:
    """One record per datastore and run definition (vdbench) or job (fio), plus the resource usage lines."""
    records: list[dict[str, Any]] = []
    datastore, usage = None, {}
    current: dict[str, Any] | None = None
    in_usage = False
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("====="):
            current = None if line.startswith("=====") and current and ("IOPS" in current) else current
            continue
        if line.startswith("Resource Usage"):
            in_usage = True
            continue
        pair = _PAIR.match(line)
        if pair is None:
            continue  # "Testing is done, 3 out of 4 VMs finished ..." and the file list after it
        key, value = pair.group(1).strip().upper(), pair.group(2).strip()
        if key == "DATASTORE":
            datastore, in_usage = value, False
            continue
        if in_usage:
            usage[key] = value
            continue
        if key in ("VERSION", "RUN DEF", "JOB_NAME") and (current is None or "IOPS" in current):
            current = {"datastore": datastore, "line": number}
            records.append(current)
        if current is None:
            raise FormatError(
                path,
                f"line {number}",
                "'Version:', 'Run Def:' or 'JOB_NAME =' before the figures of a run",
                found=quoted(line),
            )
        current[key] = value if key in ("VERSION", "RUN DEF", "JOB_NAME", "VMS") else _number(path, number, value)
    for record in records:
        record["usage"] = usage
    return records


def _settings(path: Path) -> dict[str, str]:
    """Return the top-level ``key: value`` settings of the test's ``hcibench.cfg``.

    It is a YAML copy without user names and passwords.
    """
    if not path.is_file():
        return {}
    found = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        match = re.match(r"^([A-Za-z_]\w*):\s*(.*?)\s*$", line)
        if match and match.group(2) and "pass" not in match.group(1).lower() and "user" not in match.group(1).lower():
            found[match.group(1)] = match.group(2).strip("'\"")
    return found


def _name(record: dict[str, Any]) -> str | None:
    if "JOB_NAME" in record:
        return record["JOB_NAME"]
    found = re.match(r"RD=([^;\s]+)", record.get("RUN DEF", ""))
    return found.group(1) if found else None


def _pct(value: float | None) -> list[dict[str, float]] | None:
    return None if value is None else [{"percentile": 95.0, "value_ns": value * 1e6}]


def _ns(value: float | None) -> float | None:
    return None if value is None else value * 1e6


def read_hcibench_summary(path: str | Path) -> Tables:
    """Read HCIBench's ``-res.txt`` into ``is_aggregate`` runs and results.

    Per run (datastore x run definition or job): a ``total`` row (IOPS,
    bytes/s, vdbench's LATENCY and 95%tile estimate) and ``read``/``write``
    rows with their latencies (fio: with their 95th percentiles). The run's
    labels say the datastore, engine, VM count, run definition, how the 95th
    percentile was made, and the resource usage lines.

    Raises
    ------
    FormatError
        When a figure is not a number or no run is found.

    """
    source = read_source(path)
    records = parse_summary(source.path, source.text)
    settings = _settings(source.path.parent / source.path.name.removesuffix("-res.txt") / "hcibench.cfg")
    runs, results = [], []
    for index, record in enumerate(records):
        rid = run_id(source.sha256, index, None)
        engine = "fio" if "JOB_NAME" in record else "vdbench"
        if "IOPS" not in record:
            held = ", ".join(k for k in record if k not in ("datastore", "line", "usage"))
            raise FormatError(
                source.path, f"line {record['line']}", "an 'IOPS = ... IO/S' line for this run", found=f"only {held}"
            )
        labels = {
            "datastore": record["datastore"],
            "engine": engine,
            "vms": record.get("VMS"),
            "run_definition": record.get("RUN DEF"),
            "p95": P95_ESTIMATE if engine == "vdbench" else "mean of the VMs' 95th percentiles (HCIBench)",
            **{f"usage_{k.lower().replace(' ', '_')}": v for k, v in record["usage"].items()},
            **{f"hcibench_{k}": v for k, v in settings.items()},
        }
        runs.append(
            {
                "run_id": rid,
                "tool": "hcibench",
                "tool_version": record.get("VERSION"),
                "format": "hcibench-summary",
                "is_aggregate": True,
                "source": str(source.path),
                "sha256": source.sha256,
                "document_index": index,
                "labels": [{"name": k, "value": str(v)} for k, v in labels.items() if v is not None],
            }
        )
        base = {"run_id": rid, "job_name": _name(record), "job_index": 1, "is_aggregate": True, "ioengine": engine}
        mib = record.get("THROUGHPUT")
        results.append(
            {
                **base,
                "direction": "total",
                "iops": record.get("IOPS"),
                "bandwidth_bytes_per_s": None if mib is None else mib * MIB,
                "lat_mean_ns": _ns(record.get("LATENCY")),
                "lat_percentiles": _pct(record.get("95%TILE_LAT")),
            }
        )
        for direction, key in (("read", "R"), ("write", "W")):
            if f"{key}_LATENCY" in record:
                results.append(
                    {
                        **base,
                        "direction": direction,
                        "lat_mean_ns": _ns(record[f"{key}_LATENCY"]),
                        "lat_percentiles": _pct(record.get(f"95%TILE_{key}_LAT")),
                    }
                )
    if not runs:
        raise FormatError(
            source.path,
            "file",
            "at least one run (a 'Version:'/'Run Def:' or 'JOB_NAME =' block with IOPS)",
            found=f"{len(records)} blocks, none with IOPS" if records else "no such block",
        )
    return Tables.from_rows({"runs": runs, "results": results})


def _label(labels: list[dict[str, str]], name: str) -> str | None:
    return next((item["value"] for item in labels if item["name"] == name), None)


def check_summary(runs: pl.DataFrame, results: pl.DataFrame) -> pl.DataFrame:
    """HCIBench's summary against benchlib's aggregation of the same worker VMs.

    For every HCIBench summary run, the VMs' runs are those read from the
    folder beside its ``-res.txt`` (vdbench: the run at the same position in
    each VM's output; fio: the job of the same name). benchlib's figures:
    IOPS and bandwidth summed, mean latencies weighted by each VM's I/Os, the
    95th percentile where it can be had (pooled bins; without bins, the VMs'
    range is given, since percentiles cannot be averaged).

    Returns
    -------
    polars.DataFrame
        ``run_id`` (the summary's run), ``source``, ``run``, ``metric``, ``hcibench``, ``benchlib``,
        ``difference_pct``, ``note``, ``vm_run_ids`` (the VMs' runs compared; an empty frame when there is no
        summary).

    """
    rows: list[dict[str, Any]] = []
    summaries = runs.filter(pl.col("format") == "hcibench-summary")
    for summary in summaries.iter_rows(named=True):
        folder = summary["source"].removesuffix("-res.txt") + "/"
        stores = {
            _label(r["labels"], "datastore")
            for r in summaries.filter(pl.col("source") == summary["source"]).iter_rows(named=True)
        }
        if len(stores) > 1:  # VM files are named by datastore id, the summary by datastore name
            rows.append(
                {
                    "run_id": summary["run_id"],
                    "source": summary["source"],
                    "run": f"{_label(summary['labels'], 'datastore')}",
                    "metric": "datastores",
                    "hcibench": float(len(stores)),
                    "benchlib": None,
                    "difference_pct": None,
                    "note": "several datastores: the VM files carry datastore ids, the summary datastore names, "
                    "so the VMs cannot be split per datastore here; not checked",
                    "vm_run_ids": [],
                }
            )
            continue
        vms = runs.filter(pl.col("source").str.starts_with(folder) & ~pl.col("is_aggregate"))
        mine = results.filter(pl.col("run_id") == summary["run_id"])
        engine = _label(summary["labels"], "engine")
        name = mine["job_name"][0]
        if engine == "vdbench":  # the n-th run of the summary is the n-th run of every VM's console
            position = (
                summaries.filter(pl.col("source") == summary["source"])
                .get_column("run_id")
                .to_list()
                .index(summary["run_id"])
            )
            picked = [
                group.sort("document_index")["run_id"][position]
                for _, group in vms.group_by("source", maintain_order=True)
                if group.height > position
            ]
            vm_results = results.filter(pl.col("run_id").is_in(picked))
        else:
            vm_results = results.filter(
                pl.col("run_id").is_in(vms["run_id"].implode()) & (pl.col("job_name") == name) & ~pl.col("is_aggregate")
            )
        compared = _compare(summary, mine, vm_results, engine, vms.height and vm_results["run_id"].n_unique())
        members = sorted(vm_results["run_id"].unique().to_list())
        rows.extend(row | {"vm_run_ids": members} for row in compared)
    schema = {
        "run_id": pl.String,
        "source": pl.String,
        "run": pl.String,
        "metric": pl.String,
        "hcibench": pl.Float64,
        "benchlib": pl.Float64,
        "difference_pct": pl.Float64,
        "note": pl.String,
        "vm_run_ids": pl.List(pl.String),
    }
    return pl.DataFrame(rows, schema=schema)


def _weighted(frame: pl.DataFrame, direction: str | None) -> float | None:
    part = frame if direction is None else frame.filter(pl.col("direction") == direction)
    part = part.filter(pl.col("lat_mean_ns").is_not_null() & pl.col("iops").is_not_null())
    total = part["iops"].sum()
    return None if not total else float((part["lat_mean_ns"] * part["iops"]).sum() / total)


def _p95(frame: pl.DataFrame, direction: str) -> list[float]:
    part = frame.filter(pl.col("direction") == direction)
    values = []
    for column in ("lat_percentiles", "clat_percentiles"):
        for entries in part[column].to_list():
            found = [e["value_ns"] for e in entries or [] if abs(e["percentile"] - 95.0) < 1e-9]
            values.extend(found)
        if values:
            break
    return values


def _compare(
    summary: dict, mine: pl.DataFrame, vms: pl.DataFrame, engine: str | None, vm_count: int
) -> list[dict[str, Any]]:
    label = mine["job_name"][0] or ""
    loops = (_label(summary["labels"], "run_definition") or "").partition("For loops:")[2].strip()
    run = f"{_label(summary['labels'], 'datastore')} / {label}" + (f" ({loops})" if loops and loops != "None" else "")
    total = mine.filter(pl.col("direction") == "total").row(0, named=True)
    out = []

    def add(metric: str, theirs: float | None, ours: float | None, note: str) -> None:
        diff = None if theirs is None or ours in (None, 0) else 100 * (theirs - ours) / ours
        out.append(
            {
                "run_id": summary["run_id"],
                "source": summary["source"],
                "run": run,
                "metric": metric,
                "hcibench": theirs,
                "benchlib": ours,
                "difference_pct": diff,
                "note": note,
            }
        )

    add(
        "vms",
        _number_or_none(_label(summary["labels"], "vms")),
        float(vm_count),
        "worker VMs with a result for this run",
    )
    summed = (
        "sum over VMs (both)"
        if engine == "vdbench"
        else (
            "sum over VMs (both); HCIBench takes each VM's first JSON document with eta 0, which can be the last "
            "--status-interval snapshot rather than fio's final report that benchlib reads"
        )
    )
    add("iops", total["iops"], float(vms["iops"].sum()) if vms.height else None, summed)
    bw = vms["bandwidth_bytes_per_s"].sum() if vms.height else None
    add(
        "bandwidth_mib_s",
        None if total["bandwidth_bytes_per_s"] is None else total["bandwidth_bytes_per_s"] / MIB,
        None if bw is None else float(bw) / MIB,
        summed,
    )
    mean_note = "HCIBench: plain mean of the VMs' means; benchlib: weighted by each VM's I/Os"
    if total["lat_mean_ns"] is not None:
        add("lat_mean_ms", total["lat_mean_ns"] / 1e6, _ms(_weighted(vms, None)), mean_note)
    for direction in ("read", "write"):
        theirs = mine.filter(pl.col("direction") == direction)
        if theirs.height:
            add(f"{direction}_lat_mean_ms", _ms(theirs["lat_mean_ns"][0]), _ms(_weighted(vms, direction)), mean_note)
    if engine == "vdbench" and total["lat_percentiles"]:
        add(
            "lat_p95_ms",
            total["lat_percentiles"][0]["value_ns"] / 1e6,
            None,
            "HCIBench's vdbench 95th percentile is mean + 1.645 x stddev, an estimate assuming normal latencies; "
            "vdbench's console output has no percentile to check it against (its histogram.html does)",
        )
    for direction in ("read", "write"):
        theirs = mine.filter(pl.col("direction") == direction)
        reported = theirs["lat_percentiles"].to_list()[0] if theirs.height else None
        if engine == "fio" and reported:
            values = _p95(vms, direction)
            span = (
                f"the VMs' own 95th percentiles span {min(values) / 1e6:.3f}-{max(values) / 1e6:.3f} ms"
                if values
                else "no VM reports one"
            )
            add(
                f"{direction}_lat_p95_ms",
                reported[0]["value_ns"] / 1e6,
                None,
                "HCIBench averages the VMs' 95th percentiles, which is not the 95th percentile of all I/Os; "
                f"it needs the VMs' latency histograms (fio json+) to pool; {span}",
            )
    return out


def _ms(value: float | None) -> float | None:
    return None if value is None else value / 1e6


def _number_or_none(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


@dataclass(frozen=True)
class SummaryCheck:
    """An HCIBench summary (``<test>-res.txt``) against its VMs' files (:func:`check_hcibench_summary`).

    ``vms``: the VMs' folder beside it (``found``: whether it is there). ``quarantined``: the files of the two
    ingest could not read, and why. ``check``: :func:`check_summary`'s rows (None
    where nothing was read as a summary).
    """

    vms: Path
    found: bool
    quarantined: list[tuple[str, str]]
    check: pl.DataFrame | None


def check_hcibench_summary(path: Path) -> SummaryCheck:
    """Check an HCIBench summary against its VMs' files in the folder beside it, as ingest does in a study.

    The VMs' files of one test become one run only in a study: the summary and that folder are copied into
    a scratch study, ingested there, and compared; nothing is written beside the files.
    """
    from benchlib.ingest import ingest_study
    from benchlib.store import scan_table

    folder = path.with_name(path.name.removesuffix("-res.txt"))
    if not folder.is_dir():
        return SummaryCheck(folder, False, [], None)
    with tempfile.TemporaryDirectory(prefix="benchlib-inspect-") as scratch:
        study = Path(scratch) / "raw" / "hcibench"
        study.mkdir(parents=True)
        shutil.copy2(path, study / path.name)
        shutil.copytree(folder, study / folder.name, symlinks=True)
        report = ingest_study(study, Path(scratch) / "processed")
        runs = scan_table(report.processed, "runs").collect()
        check = None
        if (runs["format"] == "hcibench-summary").any():
            check = check_summary(runs, scan_table(report.processed, "results").collect())
        return SummaryCheck(folder, True, list(report.quarantined), check)
