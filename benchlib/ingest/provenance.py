"""Provenance: which study, source, factor levels, repetition and host each raw file's runs belong to.

Levels come from ``study.toml`` (its ``[[files]]`` globs), from the ``benchlib-run.json``
that ``benchlib run`` writes beside each run's output (levels, repetition, and which host
wrote which file), and from HCIBench's case folders (a worker VM's file is named after it).
"""

from __future__ import annotations

import functools
import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from benchlib.errors import StudyError
from benchlib.study import RUN_MANIFEST, STUDY_FILE, Study
from benchlib.vsphere import ESXI_FILE, FACTS_FILE, disk_under_test, esxi_problem, facts_problem, find_vm, load_record


def clear_caches() -> None:
    """Forget what was read of the study's folders (at the start of every ingest)."""
    _run_manifest.cache_clear()
    _hcibench_case.cache_clear()
    _folder_facts.cache_clear()
    _nearest_record.cache_clear()


@functools.lru_cache(maxsize=4096)
def _run_manifest(folder: Path, study_folder: Path) -> tuple[Path, dict] | None:
    """Return the ``benchlib-run.json`` written by ``benchlib run`` in ``folder`` or the nearest folder above it."""
    while True:
        path = folder / RUN_MANIFEST
        if path.is_file():
            try:
                return folder, json.loads(path.read_text(encoding="utf-8"))
            except (ValueError, RecursionError) as exc:  # nesting too deep for the parser: not benchlib's
                raise StudyError(
                    f"{path}: not valid JSON ({exc}); it was written by benchlib run, restore it"
                ) from None
        if folder == study_folder or folder.parent == folder:
            return None
        folder = folder.parent


@functools.lru_cache(maxsize=4096)
def _hcibench_case(folder: Path) -> bool:
    """Whether ``folder`` is an HCIBench test case folder: ``<case>-res.txt`` beside it, or its ``hcibench.cfg``."""
    return (folder.parent / f"{folder.name}-res.txt").is_file() or (folder / "hcibench.cfg").is_file()


def _run_levels(study: Study, rel: str) -> dict:
    """Factor levels, repetition and host that ``benchlib run`` recorded for a raw file (empty if none).

    A worker VM's file in an HCIBench test case folder is named after the VM:
    that name is its runs' host.
    """
    folder_rel, _, name = rel.rpartition("/")
    hcibench, found, prefix = _folder_facts(study.folder, folder_rel)
    if hcibench and name.endswith((".txt", ".json")):  # a worker VM's file: the case folder is the run
        return {"run_host": name.rsplit(".", 1)[0], "path_run_group": _group_key(folder_rel)}
    if found is None:
        return {}
    folder, manifest = found
    levels = {k: str(v) for k, v in manifest.get("levels", {}).items()}
    for factor, level in levels.items():
        if factor not in study.factors or level not in study.factors[factor]:
            raise StudyError(
                f"{folder / RUN_MANIFEST}: level {factor} = {level!r} is not declared in "
                f"{study.folder / STUDY_FILE}; run `benchlib run` on the plan again to rewrite study.toml"
            )
    entry = manifest.get("files", {}).get(rel[len(prefix) :], {})
    return {
        **levels,
        "repetition": manifest.get("repetition"),
        "run_host": entry.get("host"),
        "run_span_ns": _span_ns(manifest),
        "run_start": _start(manifest),
    }


def _start(manifest: dict) -> datetime | None:
    """When ``benchlib run`` started the fio invocation, by its clock (fio's own stamp is whole seconds)."""
    try:
        start = datetime.fromisoformat(str(manifest["start_time"]))
    except (KeyError, ValueError):
        return None
    return start.astimezone(UTC) if start.tzinfo else None


def _span_ns(manifest: dict) -> int | None:
    """How long the fio invocation took, from the start and end times ``benchlib run`` recorded."""
    try:
        start = datetime.fromisoformat(str(manifest["start_time"]))
        end = datetime.fromisoformat(str(manifest["end_time"]))
    except (KeyError, ValueError):
        return None
    span = int((end - start).total_seconds() * 1e9)
    return span if span > 0 else None


@functools.lru_cache(maxsize=4096)
def _folder_facts(study_folder: Path, folder_rel: str) -> tuple[bool, tuple[Path, dict] | None, str]:
    """Per folder of a study: HCIBench test case or not, its run manifest, and that manifest's folder as a prefix."""
    folder = study_folder / folder_rel if folder_rel else study_folder
    found = _run_manifest(folder, study_folder)
    prefix = "" if found is None or found[0] == study_folder else found[0].relative_to(study_folder).as_posix() + "/"
    return _hcibench_case(folder), found, prefix


def _recorded(study: Study, rel: str) -> dict:
    """Return what a raw file's runs are beyond its factor levels: :func:`_run_levels`, and its path's member.

    The host ``benchlib run`` recorded (or an HCIBench worker's file name) wins over a ``{vm}`` read
    from the path; a file that names its own hosts (client/server output) wins over both.
    """
    recorded = _run_levels(study, rel)
    if recorded.get("run_host") is None:
        recorded["run_host"] = study.member_for(rel)
        span = study.member_span(rel)
        if span is not None:  # the VMs' files of one run differ only where the path names the VM
            recorded["path_run_group"] = _group_key(rel[: span[0]] + "\0" + rel[span[1] :])
    return recorded


def _group_key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=4096)
def _nearest_record(folder: Path, study_folder: Path, name: str) -> tuple[str, dict] | None:
    """Return the JSON record called ``name`` nearest up from ``folder`` in the study (its path there), or None."""
    here = folder
    while here == study_folder or study_folder in here.parents:
        path = here / name
        if path.is_file():  # a bad one: no labels (ingest quarantines it and says why)
            data, _ = load_record(path, facts_problem if name == FACTS_FILE else esxi_problem)
            return None if data is None else (path.relative_to(study_folder).as_posix(), data)
        here = here.parent
    return None


def vsphere_labels(study: Study, rel: str, host: str | None) -> list[dict[str, str]]:
    """Return what vCenter and esxcli said of a run's VM and LUN, as run labels (``vcenter.controller`` ...).

    From the ``benchlib-vsphere.json`` and ``benchlib-esxi.json`` nearest up the run's file (``benchlib run``
    with ``[vsphere]`` and ``[esxi]`` writes them per cell): the VM whose name or fio host is the run's host,
    the controller and SIOC state of its disk under test, its host and vCPUs; the LUN ``[vsphere] device``
    names: path policy, Round Robin IO operation limit, queue depth. Facts the API did not report are left out.
    """
    folder = (study.folder / rel).parent
    labels: dict[str, object] = {}
    facts = _nearest_record(folder, study.folder, FACTS_FILE)
    vm = find_vm(facts[1].get("vms") or [], host) if facts else None
    if vm is not None:
        labels |= {"vcenter.vm": vm.get("vm"), "vcenter.host": vm.get("host"), "vcenter.vcpus": vm.get("vcpus")}
        disk, _ = disk_under_test(vm, study.vsphere.get("disk"))
        if disk is not None:
            sioc = (vm.get("datastores") or {}).get(disk.get("datastore"), {}).get("sioc_enabled")
            labels |= {
                "vcenter.controller": disk.get("controller"),
                "vcenter.disk": disk.get("label"),
                "vcenter.datastore": disk.get("datastore"),
                "vcenter.sioc": None if sioc is None else ("on" if sioc else "off"),
            }
    esxi = _nearest_record(folder, study.folder, ESXI_FILE)
    device = study.vsphere.get("device")
    if esxi and device:
        lun = next(
            (
                d
                for h in esxi[1].values()
                if isinstance(h, dict)
                for d in h.get("devices", [])
                if d.get("device") == device
            ),
            None,
        )
        if lun is not None:
            labels |= {
                "esxi.device": device,
                "esxi.path_policy": lun.get("path_policy"),
                "esxi.rr_iops_limit": lun.get("rr_iops_limit"),
                "esxi.device_queue_depth": lun.get("device_max_queue_depth"),
                "esxi.competing_worlds": lun.get("outstanding_ios_competing_worlds"),
            }
    return [{"name": k, "value": str(v)} for k, v in labels.items() if v is not None]


def target_labels(study: Study, rel: str, host: str | None) -> list[dict[str, str]]:
    """Return what ``benchlib run`` did to a run's target before it, as run labels.

    ``target.written``: when the target's region was last written in full before the run, or ``not by
    benchlib`` (a device benchlib was not allowed to write: what it held is unknown);
    ``target.preconditioned``: the passes and when, where a plan asked; ``target.steady`` (``yes``, ``no`` or
    ``unknown``) and ``target.steady_s``: whether the run's own workload was steady before it was measured,
    and after how many seconds, where a plan asked for ``precondition = "steady"``. Nothing where the run's manifest
    does not say (recorded before benchlib kept it, or not by ``benchlib run``): unknown, never "written".
    """
    found = _run_manifest((study.folder / rel).parent, study.folder)
    states = found[1].get("target_state") if found else None
    if not isinstance(states, dict) or not states:
        return []
    state = states.get(host) if host in states else next(iter(states.values())) if len(states) == 1 else None
    if not isinstance(state, dict):
        return []
    labels = {"target.written": state.get("written") or "not by benchlib"}
    done = state.get("preconditioned")
    if isinstance(done, dict) and done.get("passes"):
        labels["target.preconditioned"] = f"{done.get('passes')} sequential passes, {done.get('at')}"
    steady = state.get("steady")
    if isinstance(steady, dict) and "attained" in steady:
        labels["target.steady"] = "yes" if steady["attained"] else "no"
        labels["target.steady_s"] = steady.get("seconds")
    elif steady is not None:  # asked for, but fio said nothing of this host
        labels["target.steady"] = "unknown"
    return [{"name": k, "value": str(v)} for k, v in labels.items()]


def _records_digest(study: Study, rel: str) -> str | None:
    """Return a digest of the vCenter and esxcli records nearest a file (they label its runs), or None."""
    folder = (study.folder / rel).parent
    found = [_nearest_record(folder, study.folder, n) for n in (FACTS_FILE, ESXI_FILE)]
    if not any(found):
        return None
    return hashlib.sha256(json.dumps(found, sort_keys=True, default=str).encode()).hexdigest()[:16]


def digest(study: Study, rel: str) -> str:
    """Return a short digest of what provenance gives a raw file's runs (levels, repetition, host).

    Kept in the file's manifest entry: when a ``benchlib-run.json`` or an HCIBench case
    folder changes what a file's runs are, the file is read again although its bytes are not.
    """
    facts = {**study.levels_for(rel), **_recorded(study, rel), "vsphere": _records_digest(study, rel)}
    return hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def study_frame(study: Study, members: list[tuple[str, str]]) -> pl.DataFrame:
    """``sha256 -> source, factor levels, repetition, host`` for the raw files of one part."""
    rows = [
        {"sha256": sha, "source": f"{study.folder.name}/{rel}", **study.levels_for(rel), **_recorded(study, rel)}
        for rel, sha in members
    ]
    schema = {
        "sha256": pl.String,
        "source": pl.String,
        "repetition": pl.Int32,
        "run_host": pl.String,
        "run_span_ns": pl.Int64,
        "run_start": pl.Datetime("ms", "UTC"),
        "path_run_group": pl.String,
        **{f: pl.String for f in study.factors},
    }
    return pl.from_dicts(rows, schema=schema)


def check_levels(study: Study, runs: pl.DataFrame) -> None:
    """Refuse a run whose factor level ``study.toml`` does not declare."""
    for factor, levels in study.factors.items():
        unknown = runs.filter(pl.col(factor).is_not_null() & ~pl.col(factor).is_in(levels))
        if unknown.height:
            raise StudyError(
                f"{study.folder / STUDY_FILE}: {unknown['source'][0]} has {factor} = {unknown[factor][0]!r}, "
                f"not one of the declared levels {levels}; add it to [factors]"
            )


def recorded_by_run(study: Study, rel: str) -> bool:
    """Tell whether ``benchlib run`` lists this file among a run's outputs.

    If it does, equal bytes elsewhere are another run's data.
    """
    found = _run_manifest((study.folder / rel).parent, study.folder)
    return found is not None and (study.folder / rel).relative_to(found[0]).as_posix() in found[1].get("files", {})
