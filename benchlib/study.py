"""A study is data: ``data/raw/<study>/study.toml``.

Example::

    [study]
    name = "loopback-fio"
    title = "Four fio servers on one disk"
    citation = "Recorded with benchlib on ..."
    runtime_s = 300                # optional: the runs' length where the data do not record it
    members = "host"               # optional: what its members are: "VM" (on vSphere), or "host", "job"...

    [factors]                      # factor -> its levels, in display order
    block_size = ["4k", "64k"]
    rate_cap = ["off", "on"]

    [[files]]                      # raw files (globs, relative to the study) -> levels
    glob = "bs-4k/**"
    levels = { block_size = "4k" }

    [[files]]                      # or levels read from the path: {factor} is one path part;
    glob = "{rate_cap}/{vm}/*.json"  # {vm} (or {host}) names the VM or host that wrote the file

    [fio]
    log_latency_unit = "ns"        # "us" for logs written by fio 2.x

    [esxtop]                       # optional: keep only these objects of esxtop captures (a capture
    objects = ["Physical Disk", "Physical Disk Adapter"]  # with every counter runs to gigabytes)

    [vsphere]                      # optional: check these factors' levels against vCenter's facts
    controller = "controller"      # (benchlib-vsphere.json files, from `benchlib vsphere facts`)
    sioc = "sioc"                  # also: sioc_threshold (30 ms, 90%), path_policy, rr_iops (device)
    disk = "Hard disk 2"           # the disk under test, when a VM has more than one

    [shares]                       # optional: each member's (VM's) disk shares, e.g. SIOC shares;
    gus_fio_1 = 2000               # fairness is then judged on throughput per share
    gus_fio_2 = 1000

    [levels.test]                  # optional: a level in words, where the data's name is not words;
    iodepth_sweep = "queue depth sweep"  # titles, tables and charts say these words

A key benchlib does not know (a misspelling) is an error that names it, never ignored.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from benchlib.errors import StudyError
from benchlib.schema import RUNS
from benchlib.tomlfile import read_toml
from benchlib.vsphere import CHECKS

STUDY_FILE = "study.toml"
RUN_MANIFEST = "benchlib-run.json"  # written by `benchlib run` beside each run's output


#: a placeholder in a glob that names the file's member (the VM or host that wrote it), not a factor
MEMBER_NAMES = ("vm", "host")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class FileMapping:
    """Files matching ``glob`` (relative to the study folder) belong to these factor levels.

    A glob may read levels from the path: ``{factor}`` matches one path part (no ``/``) and gives
    that factor its level; ``{vm}`` or ``{host}`` gives the file's member.
    """

    glob: str
    levels: dict[str, str]
    pattern: re.Pattern[str] | None = None

    def match(self, relative_path: str) -> dict[str, str] | None:
        """Return the levels (the member under its placeholder's name) a path gets, or None if it does not match."""
        if self.pattern is None:
            return dict(self.levels) if fnmatch.fnmatch(relative_path, self.glob) else None
        found = self.pattern.fullmatch(relative_path)
        return None if found is None else {**self.levels, **found.groupdict()}


def _glob_pattern(glob: str) -> re.Pattern[str] | None:
    """Return a regular expression for a glob with placeholders (``*``, ``?`` as fnmatch reads them), else None."""
    if not _PLACEHOLDER.search(glob):
        return None
    parts, end = [], 0
    for found in _PLACEHOLDER.finditer(glob):
        parts.append(fnmatch.translate(glob[end : found.start()]).removeprefix("(?s:").removesuffix(")\\Z"))
        parts.append(f"(?P<{found[1]}>[^/]+)")
        end = found.end()
    parts.append(fnmatch.translate(glob[end:]).removeprefix("(?s:").removesuffix(")\\Z"))
    return re.compile("(?s:" + "".join(parts) + ")")


@dataclass(frozen=True)
class Study:
    """A study's declaration: name, citation, factors with levels, and file mappings."""

    name: str
    folder: Path
    title: str = ""
    citation: str = ""
    factors: dict[str, list[str]] = field(default_factory=dict)
    files: tuple[FileMapping, ...] = ()
    log_latency_unit: str | None = None
    #: esxtop objects to keep (``Physical Disk``, ``Group Cpu`` ...); empty: every object
    esxtop_objects: tuple[str, ...] = ()
    #: ``[vsphere]``: which factor holds the controller (``controller``) and SIOC (``sioc``) levels that
    #: vCenter's facts check, and the label of the disk under test (``disk``) when a VM has several
    vsphere: dict[str, str] = field(default_factory=dict)
    #: member (VM or host) -> its shares; empty when the study declares none (every member equal)
    shares: dict[str, float] = field(default_factory=dict)
    #: ``[levels]``: factor -> level -> the level in words, where the study gives them
    level_words: dict[str, dict[str, str]] = field(default_factory=dict)
    #: ``runtime_s``: each run's length in seconds as the source states it, for data that do not record it
    #: (a published table); None when not stated
    stated_runtime_s: float | None = None
    #: ``members``: what the study's members are, one word ("VM": VMs on vSphere; "host", "job" ...);
    #: "" when not said (benchlib tells from the data, :func:`benchlib.views.on_vsphere`)
    members: str = ""
    #: ``fastest_direct_us``: the quickest median completion (µs) the study's storage gives with direct I/O,
    #: where it is memory-fast (persistent memory, a RAM disk, null_blk); None: a disk or SSD's (5 µs)
    fastest_direct_us: float | None = None

    def levels_for(self, relative_path: str) -> dict[str, str | None]:
        """Factor levels of a raw file (later mappings override earlier ones); unmapped factors are None."""
        levels: dict[str, str | None] = dict.fromkeys(self.factors)
        for mapping in self.files:
            found = mapping.match(relative_path)
            if found is not None:
                levels.update({k: v for k, v in found.items() if k not in MEMBER_NAMES})
        return levels

    def member_span(self, relative_path: str) -> tuple[int, int] | None:
        """Return where in the path its member (``{vm}``/``{host}``) was read, or None (the last mapping wins)."""
        span = None
        for mapping in self.files:
            found = mapping.pattern.fullmatch(relative_path) if mapping.pattern else None
            name = next((n for n in MEMBER_NAMES if found and found.groupdict().get(n)), None)
            span = found.span(name) if found and name else span
        return span

    def member_for(self, relative_path: str) -> str | None:
        """Return the VM or host a raw file's path names (a ``{vm}`` or ``{host}`` placeholder), or None."""
        member = None
        for mapping in self.files:
            found = mapping.match(relative_path) or {}
            member = next((found[name] for name in MEMBER_NAMES if found.get(name)), member)
        return member


#: the keys study.toml may hold, per table ("" is the top level)
KNOWN_KEYS = {
    "": {"study", "factors", "files", "fio", "esxtop", "vsphere", "shares", "levels"},
    "study": {"name", "title", "citation", "runtime_s", "members", "fastest_direct_us"},
    "fio": {"log_latency_unit"},
    "esxtop": {"objects"},
    "vsphere": {*CHECKS, "disk", "device"},
    "files": {"glob", "levels"},
}


#: names a factor cannot take: the run's own columns and the columns benchlib's views derive
RESERVED = frozenset(RUNS.names()) | {"vm", "run", "phase", "run_unit", "origin", "shares"}


def _check_factor_names(path: Path, factors: dict[str, list[str]]) -> None:
    clash = sorted(set(factors) & RESERVED)
    if clash:
        raise StudyError(
            f"{path}: [factors] {', '.join(repr(c) for c in clash)} is a name benchlib uses for a run's own "
            f"column ({', '.join(sorted(RESERVED))}); name the factor otherwise, e.g. {clash[0]}_level"
        )


def _check_keys(path: Path, table: str, found: object) -> None:
    if not isinstance(found, dict):
        raise StudyError(f"{path}: [{table}] must be a table of keys")
    unknown = sorted(set(found) - KNOWN_KEYS[table])
    if unknown:
        where = f"[{table}]" if table else "the top level"
        raise StudyError(
            f"{path}: {where} has {', '.join(repr(k) for k in unknown)}, which benchlib does not know "
            f"(it knows {', '.join(sorted(KNOWN_KEYS[table]))}); fix the spelling or remove it"
        )


def _check_shares(path: Path, found: object) -> dict[str, float]:
    if not isinstance(found, dict):
        raise StudyError(f"{path}: [shares] must be a table of member = shares, e.g. gus_fio_1 = 2000")
    shares = {}
    for member, value in found.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
            raise StudyError(
                f"{path}: [shares] {member} = {value!r}; shares are positive numbers (e.g. {member} = 1000)"
            )
        shares[str(member)] = float(value)
    return shares


def _check_mapping(path: Path, index: int, entry: object, factors: dict[str, list[str]]) -> FileMapping:
    if not isinstance(entry, dict) or "glob" not in entry:
        raise StudyError(f"{path}: [[files]] entry {index + 1} needs a 'glob' and a 'levels' table")
    _check_keys(path, "files", entry)
    levels = entry.get("levels", {})
    glob = str(entry["glob"])
    for name in _PLACEHOLDER.findall(glob):
        if name not in factors and name not in MEMBER_NAMES:
            raise StudyError(
                f"{path}: [[files]] entry {index + 1} (glob {glob!r}) reads {{{name}}} from the path, but "
                f"[factors] declares no {name!r} (declared: {', '.join(factors) or 'none'}; "
                f"{{vm}} or {{host}} names the member)"
            )
    for factor, level in levels.items():
        if factor not in factors:
            raise StudyError(
                f"{path}: [[files]] entry {index + 1} (glob {entry['glob']!r}) names factor {factor!r}, "
                f"which [factors] does not declare (declared: {', '.join(factors) or 'none'})"
            )
        if str(level) not in factors[factor]:
            raise StudyError(
                f"{path}: [[files]] entry {index + 1} gives {factor} = {level!r}, not one of its levels "
                f"{factors[factor]}; add it to [factors] or fix the mapping"
            )
    return FileMapping(glob=glob, levels={k: str(v) for k, v in levels.items()}, pattern=_glob_pattern(glob))


def load_study(folder: str | Path) -> Study:
    """Read ``study.toml`` of a study folder; a folder without one is a study named after the folder.

    Raises
    ------
    StudyError
        When the file is not valid TOML or names undeclared factors or levels.

    """
    folder = Path(folder)
    if not folder.is_dir():
        raise StudyError(f"{folder}: not a folder; give a study folder such as data/raw/<study>")
    path = folder / STUDY_FILE
    if not path.exists():
        return Study(name=folder.name, folder=folder)
    data = read_toml(path, StudyError)
    _check_keys(path, "", data)
    for table in ("study", "fio", "esxtop", "vsphere"):
        _check_keys(path, table, data.get(table, {}))
    meta = data.get("study", {})
    factors = {str(k): [str(level) for level in v] for k, v in data.get("factors", {}).items()}
    _check_factor_names(path, factors)
    files = tuple(_check_mapping(path, i, e, factors) for i, e in enumerate(data.get("files", [])))
    unit = data.get("fio", {}).get("log_latency_unit")
    if unit not in (None, "ns", "us"):
        raise StudyError(f'{path}: [fio] log_latency_unit must be "ns" or "us", not {unit!r}')
    return Study(
        name=str(meta.get("name", folder.name)),
        folder=folder,
        title=str(meta.get("title", "")),
        citation=str(meta.get("citation", "")),
        factors=factors,
        files=files,
        log_latency_unit=unit,
        esxtop_objects=_check_objects(path, data.get("esxtop", {}).get("objects", [])),
        vsphere=_check_vsphere(path, data.get("vsphere", {}), factors),
        shares=_check_shares(path, data.get("shares", {})),
        level_words=check_level_words(path, data.get("levels", {}), factors),
        stated_runtime_s=_check_runtime(path, meta.get("runtime_s")),
        members=_check_members(path, meta.get("members")),
        fastest_direct_us=_check_fastest(path, meta.get("fastest_direct_us")),
    )


def _check_fastest(path: Path, found: object) -> float | None:
    """Return ``[study] fastest_direct_us``: a positive number of microseconds, or None where not said."""
    if found is None:
        return None
    if isinstance(found, bool) or not isinstance(found, int | float) or not 0 < found < 1e6:
        raise StudyError(
            f"{path}: [study] fastest_direct_us = {found!r}; it is the quickest median completion in µs the "
            "study's storage gives with direct I/O (e.g. fastest_direct_us = 1 for persistent memory)"
        )
    return float(found)


def _check_members(path: Path, found: object) -> str:
    """Return ``[study] members``: one word of letters (a page says "VMs", "hosts", "jobs"); "VM" as written."""
    if found is None:
        return ""
    if not isinstance(found, str) or not re.fullmatch(r"[^\W\d_]{1,24}", found):
        raise StudyError(
            f"{path}: [study] members = {found!r}; it is what the study's members are, one word of letters "
            '(members = "VM" for VMs on vSphere, or "host", "job" for fio servers or jobs on one machine)'
        )
    return "VM" if found.lower() == "vm" else found


def _check_runtime(path: Path, found: object) -> float | None:
    if found is None:
        return None
    if isinstance(found, bool) or not isinstance(found, int | float) or not 0 < found < float("inf"):
        raise StudyError(
            f"{path}: [study] runtime_s = {found!r}; it is each run's length in seconds as the source states "
            "it, a positive number (e.g. runtime_s = 300)"
        )
    return float(found)


#: what a level's words may hold: letters, digits, spaces and a little punctuation; never markup (``*``, ``_``,
#: ``<``, ``[``, backticks) nor the separators pages list levels with (``,``, ``;``)
_WORDS = re.compile(r"(?:[^\W_]|[ .()/+%:'-])*[^\W_](?:[^\W_]|[ .()/+%:'-])*")


#: the label a published table's rows carry its name in (``table,controller,...``); ``[levels.table]`` words it
TABLE_LABEL = "table"


def check_level_words(path: Path, found: object, factors: dict[str, list[str]]) -> dict[str, dict[str, str]]:
    """Return ``[levels]``: each names a declared factor and level, and gives it in words (one line of text)."""
    example = 'e.g. [levels.test] then iodepth_sweep = "queue depth sweep"'
    if not isinstance(found, dict):
        raise StudyError(f"{path}: [levels] must hold a table per factor, {example}")
    words: dict[str, dict[str, str]] = {}
    for factor, levels in found.items():
        if factor not in factors and factor != TABLE_LABEL:
            raise StudyError(
                f"{path}: [levels.{factor}] names a factor [factors] does not declare "
                f"(declared: {', '.join(factors) or 'none'}; [levels.{TABLE_LABEL}] words published tables' names)"
            )
        if not isinstance(levels, dict):
            raise StudyError(f"{path}: [levels.{factor}] must be a table of level = words, {example}")
        for level, text in levels.items():
            if factor in factors and str(level) not in factors[factor]:
                raise StudyError(
                    f"{path}: [levels.{factor}] gives words for {level!r}, which is not one of its levels "
                    f"{factors[factor]}; fix the spelling or remove it"
                )
            if not isinstance(text, str) or len(text) > 80 or not _WORDS.fullmatch(text) or " / " in text:
                raise StudyError(
                    f"{path}: [levels.{factor}] {level} = {text!r}; give the level in words: letters, digits, "
                    "spaces and . ( ) / + % : ' - only, at most 80 characters, no ' / ' (pages join levels with "
                    'it, and with , and ;), e.g. "random write 64k with 8 jobs"'
                )
        words[str(factor)] = {str(level): text.strip() for level, text in levels.items()}
    for factor, levels in words.items():
        names = list(levels.values())
        clash = next(
            (
                text
                for lv, text in levels.items()
                if names.count(text) > 1 or text in set(factors.get(factor, [])) - {lv}
            ),
            None,
        )
        if clash is not None:
            raise StudyError(
                f"{path}: [levels.{factor}] {clash!r} would name two of its levels; each needs words of its own"
            )
    return words


def _check_vsphere(path: Path, found: dict, factors: dict[str, list[str]]) -> dict[str, str]:
    """Return ``[vsphere]``: its checks name declared factors; ``disk`` is a disk's label, ``device`` a LUN's name."""
    for key, value in found.items():
        if not isinstance(value, str) or not value.strip():
            raise StudyError(f"{path}: [vsphere] {key} must be a name in quotes, not {value!r}")
        if key in CHECKS and value not in factors:
            raise StudyError(
                f"{path}: [vsphere] {key} = {value!r} names no factor; it names the factor whose levels vCenter's "
                f"facts check (factors: {', '.join(factors) or 'none declared'})"
            )
    return dict(found)


def _check_objects(path: Path, objects: object) -> tuple[str, ...]:
    """Return ``[esxtop] objects``: a list of object names as esxtop writes them (``Physical Disk``)."""
    if not isinstance(objects, list) or not all(isinstance(o, str) and o.strip() for o in objects):
        raise StudyError(
            f'{path}: [esxtop] objects must be a list of esxtop object names, e.g. ["Physical Disk", '
            f'"Physical Disk Adapter"], not {objects!r}'
        )
    return tuple(objects)


def _kind(mode: int) -> str:
    kinds = (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a folder"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def _left_out(path: Path, root: Path) -> str | None:
    """Why a file of the study is not one to read, or None (it is a regular file inside the study).

    ``path`` is in a folder inside the study (:func:`study_files` follows no link out of it), so
    only a link can lead elsewhere: only links are resolved.
    """
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return "a file that went away while the study was listed; not read"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISLNK(mode):
        try:
            real = path.resolve(strict=True)
        except (OSError, RuntimeError):
            return "a link that leads nowhere (dangling, or a loop of links); not read"
        if not real.is_relative_to(root):
            return f"a link to {real}, outside the study; not read (copy the file into the study to use it)"
        mode = os.stat(real).st_mode
    if not stat.S_ISREG(mode):
        return f"{_kind(mode)}, not a file; never opened"
    return None


def study_files(folder: str | Path) -> Iterator[tuple[Path, str, str | None]]:
    """Every file of a study folder, as ``(path, path relative to the study, why it is left out or None)``.

    The one walk of a study that ingest and the verification bundle share, so both see the same
    study: hidden files and folders are not listed; links are followed only while they stay inside
    the study (a link out of it, a dangling link or a loop is listed with the reason); FIFOs,
    sockets and devices are listed as left out and never opened.
    """
    folder = Path(folder)
    root = folder.resolve()
    unreadable: list[OSError] = []
    for here, subfolders, names in os.walk(folder, followlinks=True, onerror=unreadable.append):
        yield from _unreadable_folders(unreadable, folder)
        real_here = Path(here).resolve()
        kept = []
        for name in sorted(subfolders):
            sub = Path(here, name)
            if name.startswith("."):
                continue
            if sub.is_symlink():
                real = sub.resolve()
                if not real.is_relative_to(root):
                    yield (
                        sub,
                        sub.relative_to(folder).as_posix(),
                        (f"a link to the folder {real}, outside the study; not read"),
                    )
                    continue
                if real == real_here or real in real_here.parents:
                    yield sub, sub.relative_to(folder).as_posix(), "a link to a folder that holds it (a loop); not read"
                    continue
            kept.append(name)
        subfolders[:] = kept
        for name in sorted(names):
            if not name.startswith("."):
                path = Path(here, name)
                yield path, path.relative_to(folder).as_posix(), _left_out(path, root)
    yield from _unreadable_folders(unreadable, folder)


def _unreadable_folders(errors: list[OSError], folder: Path) -> Iterator[tuple[Path, str, str | None]]:
    """Yield the folders the walk could not list, each with the reason (then forgotten: each is said once)."""
    while errors:
        error = errors.pop(0)
        path = Path(str(error.filename))
        rel = path.relative_to(folder).as_posix() if path.is_relative_to(folder) else str(path)
        yield (
            path,
            rel,
            f"a folder that cannot be listed ({error.strerror}); nothing in it was read (check its permissions)",
        )
