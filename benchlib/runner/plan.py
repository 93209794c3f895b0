"""A run plan: what to run, where, on which target, over which matrix, how often.

A plan is a TOML file (see ``pipelines/`` and ``data/raw/loopback-fio/plan.toml``)::

    [study]
    name = "loopback-fio"
    title = "Four fio servers on one disk"

    [run]
    runtime_s = 3            # per cell, after ramp_time_s
    ramp_time_s = 1
    repetitions = 3          # or adaptive: { min = 3, max = 10, until = "iops median within 5%" }
                             #   or until a factor's comparisons settle: until = "block_size settled"
    seed = 20261122          # order of cells: shuffled per repetition with this seed
    output = "data/raw/loopback-fio"   # relative to the plan file

    [target]
    file = "/var/tmp/benchlib/{host}.dat"   # created by benchlib; {host}: one file per host
    size = "256MiB"
    # device = "/dev/sdb"                    # needs --destroy-data=/dev/sdb for writes
    # precondition = "sequential"            # before the study's first cell: write the region
    # passes = 2                             #   sequentially this many times (SNIA PTS: 2)
    # precondition = "steady"                # SNIA PTS-style: those passes, then before every run
    # steady = "iops:20%"                    #   its own workload until fio's steady-state check holds
    # steady_window_s = 60                   #   over this window, for at most steady_max_s = 1800

    [vsphere]                # optional: read each VM's facts from vCenter with every cell
    server = "https://vc.example"            # credentials: BENCHLIB_VSPHERE_USER / _PASSWORD
    vms = { "127.0.0.2" = "gus_fio_1" }      # fio host (or "local") -> its VM's name in vCenter
    check = { controller = "controller" }    # at ingest, the factor's levels must agree with vCenter
    # insecure = true                        # a lab vCenter's self-signed certificate
    # disk = "Hard disk 2"                   # the disk under test, where a VM has more than one
    # apply = { sioc = "sioc" }              # set the factor's level (on/off) before each cell, and put
    # datastores = ["ds-test"]               #   it back at the end: only on these datastores (the test
                                             #   disks'), only with --apply-settings (benchlib-settings.json)
    # apply = { controller = "controller" }  # move each VM's test disk to the level's controller (the VM
                                             #   stopped and started; cells grouped by it per repetition)
    # apply = { rr_iops = "rr_limit" }       # the Round Robin IO operation limit of device = "naa...",
                                             #   through esxcli on each [esxi] host (whole-number levels)
    # apply = { sioc_threshold = "thr" }     # SIOC's congestion threshold on the datastores: levels
                                             #   of 5 to 100 ms ("30") or 50% to 100% of peak ("90%")
    # shares = { "127.0.0.2" = 2000 }        # each VM's test disk's shares (or "low", "normal", "high")
    # limits = { "127.0.0.2" = 500 }         #   and IOPS limit through the run, put back at the end
                                             #   (--apply-settings; shares name every VM, and go to
                                             #   study.toml's [shares])

    [[esxtop]]               # optional: an esxtop batch capture on an ESXi host during every cell
    host = "esx01.lab"       # names the capture (esxtop-esx01.lab.csv in the cell's folder)
    command = "ssh -o BatchMode=yes root@{esxi} esxtop -b -a -d {delay} -n {samples}"
    delay = 2                # seconds between samples; {samples} covers ramp, runtime and 10 s

    [esxi]                   # optional: esxcli's device lists from each ESXi host with every cell
    hosts = ["esx01.lab"]    # (queue depths, path selection policy, Round Robin IO operation limit)
    command = "ssh -o BatchMode=yes root@{esxi} {esxcli}"

    [hosts]                  # omit to run fio on this machine
    servers = ["127.0.0.2", "127.0.0.3"]
    port = 8765
    # facts_command = "ssh -o BatchMode=yes {host} sh -s -- {target}"   # kernel, CPU, memory of each
                                                                       # server: benchlib's facts script on stdin

    [matrix.block_size]      # a factor fio sees: each level sets one option
    option = "bs"
    levels = ["4k", "64k"]

    [matrix.rate_cap]        # levels set several options, or none
    levels = ["off", "on"]
    options.on = { rate_iops = 400 }

    [matrix.controller]      # a factor fio cannot see: it only labels the runs
    levels = ["pvscsi"]

    [[profiles]]
    use = "randread-4k"      # a built-in profile (see PROFILES)

    [[profiles]]
    use = "iodepth-sweep"
    hold = { block_size = "4k" }   # run this profile at one level of a factor

    [[profiles]]             # a profile of your own
    name = "oltp"
    options = { rw = "randrw", rwmixread = 70, bs = "8k", iodepth = 16 }
    sweep = { factor = "jobs", option = "numjobs", levels = [1, 2, 4] }

    [levels.profile]         # optional: a level in words on every page, as study.toml's [levels]
    randread-4k = "random read 4k"

Options are layered: benchlib's defaults, then the profile's, then the sweep
value, then the matrix levels (a matrix factor that sets ``bs`` overrides the
profile's ``bs``; the dry run shows the final options of every cell).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import random
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchlib.errors import BenchlibError, StudyError
from benchlib.runner.repetitions import MOST_LOOKS, PrecisionRule, SettleRule, parse_rule
from benchlib.runner.vocabulary import file_target_problem, name_problem, option_problem, path_problem, text_problem
from benchlib.schema import RUNS
from benchlib.study import check_level_words
from benchlib.tomlfile import read_toml
from benchlib.units import parse_job_size
from benchlib.vsphere import CHECKS, LUN_CHECKS, SHARES_LEVELS


class PlanError(BenchlibError):
    """A plan file is missing, not TOML, or declares something benchlib cannot run."""


# The PVSCSI-vs-LSI write-up's workloads (BRIEF.md, study 1), as its own tables imply them. The post
# names its tests but not their queue depths or the sequential write's block size; Little's law
# (outstanding I/Os = IOPS x mean latency) on its per-VM table for gus_fio_1 gives them back:
#   4K random read     19,238 IOPS x 6.63 ms  = 127.5  -> 128 outstanding: iodepth 128, 1 job
#   4K random write    17,357 IOPS x 3.67 ms  =  63.7  ->  64: iodepth 64
#   64K write, 8 jobs   5,146 IOPS x 12.37 ms =  63.7  ->  64: 8 jobs x iodepth 8
#   sequential write    8,960 IOPS x 1.76 ms  =  15.8  ->  16: iodepth 16; and 280 MiB/s / 8,960 IOPS
#                                                        = 32 KiB blocks
#   sequential read (128K, per-VM table): bandwidth x latency gives 32 for every VM -> iodepth 32
# The iodepth sweep (4K random read, 1 job) and the mix sweep (4K randrw, 8 jobs, iodepth 8) are as
# the post states them. (1 job where the tables cannot tell jobs from depth: 128 could be 4 x 32.)
WRITEUP_PROFILES: dict[str, dict] = {
    "writeup-seqread-128k": {"options": {"rw": "read", "bs": "128k", "iodepth": 32, "numjobs": 1}},
    "writeup-seqwrite-32k": {"options": {"rw": "write", "bs": "32k", "iodepth": 16, "numjobs": 1}},
    "writeup-randread-4k": {"options": {"rw": "randread", "bs": "4k", "iodepth": 128, "numjobs": 1}},
    "writeup-randwrite-4k": {"options": {"rw": "randwrite", "bs": "4k", "iodepth": 64, "numjobs": 1}},
    "writeup-randwrite-64k-8jobs": {"options": {"rw": "randwrite", "bs": "64k", "iodepth": 8, "numjobs": 8}},
}

# benchlib's own generic set (queue depth 32 throughout: not the write-up's depths), and the sweeps.
PROFILES: dict[str, dict] = {
    "seqread-128k": {"options": {"rw": "read", "bs": "128k", "iodepth": 32}},
    "seqwrite-128k": {"options": {"rw": "write", "bs": "128k", "iodepth": 32}},
    "randread-4k": {"options": {"rw": "randread", "bs": "4k", "iodepth": 32}},
    "randwrite-4k": {"options": {"rw": "randwrite", "bs": "4k", "iodepth": 32}},
    "randwrite-64k-8jobs": {"options": {"rw": "randwrite", "bs": "64k", "iodepth": 8, "numjobs": 8}},
    "iodepth-sweep": {
        "options": {"rw": "randread", "bs": "4k", "numjobs": 1},
        "sweep": {"factor": "queue_depth", "option": "iodepth", "levels": [1, 2, 4, 8, 16, 32, 64, 128]},
    },
    "rwmix-sweep": {
        "options": {"rw": "randrw", "bs": "4k", "numjobs": 8, "iodepth": 8},
        "sweep": {
            "factor": "write_pct",
            "option": "rwmixwrite",
            "levels": [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100],
        },
    },
    **WRITEUP_PROFILES,
}

# Options every cell gets unless the plan overrides them.
BASE_OPTIONS: dict[str, str | int] = {
    "ioengine": "libaio",
    "direct": 1,
    "time_based": 1,
    "group_reporting": 1,
    "randrepeat": 0,
    "log_avg_msec": 1000,
    # each server stamps its logs with its own clock's time: members that did not run at once show
    "log_unix_epoch": 1,
    "write_bw_log": "cell",
    "write_iops_log": "cell",
    "write_lat_log": "cell",
}

_FACTOR_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_NOT_FACTORS = ("profile", "repetition")
_KEYS = {
    "study": {"name", "title", "citation"},
    "run": {"runtime_s", "ramp_time_s", "repetitions", "seed", "output"},
    "target": {"file", "device", "size", "precondition", "passes", "steady", "steady_window_s", "steady_max_s"},
    "hosts": {"servers", "port", "facts_command"},
    "vsphere": {"server", "vms", "check", "insecure", "device", "apply", "datastores", "disk", "shares", "limits"},
    "esxtop": {"host", "command", "delay"},
    "esxi": {"hosts", "command"},
    "matrix": {"levels", "option", "options"},
    "profiles": {"use", "name", "options", "sweep", "hold"},
    "sweep": {"factor", "option", "levels"},
}
_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")


@dataclass(frozen=True)
class Factor:
    """A matrix factor: its levels and, per level, the fio options it sets (none for a label)."""

    name: str
    levels: tuple[str, ...]
    options: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Profile:
    """A workload: fio options, an optional sweep over one option, and factors held at one level."""

    name: str
    options: dict[str, str]
    sweep_factor: str | None = None
    sweep_option: str | None = None
    sweep_levels: tuple[str, ...] = ()
    hold: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Cell:
    """One combination to run: profile, factor levels (sweep included) and final fio options."""

    profile: str
    levels: dict[str, str]
    options: dict[str, str]

    @property
    def key(self) -> str:
        """The cell's folder below the study: ``<profile>/<factor>=<level>/...``."""
        parts = [self.profile] + [f"{k}={_safe(v)}" for k, v in self.levels.items() if k != "profile"]
        return "/".join(parts)


@dataclass(frozen=True)
class Target:
    """Where fio does its I/O on every host: a file benchlib creates, or a named block device.

    A file benchlib creates is written in full when created (on a fio server too), so no cell reads
    space never written. ``passes`` > 0 (``precondition = "sequential"``) writes the whole region
    that many times more before the study's first cell: SNIA PTS's workload-independent
    preconditioning, which a device named for destruction needs to be written at all.
    ``steady`` (``precondition = "steady"``): before every run, the run's own workload runs until fio's
    steady-state criterion (``iops:20%``: every IOPS sample of the last ``steady_window_s`` within 20% of
    their mean) holds, for at most ``steady_max_s``: SNIA PTS's workload-dependent preconditioning.
    """

    file: str | None
    device: str | None
    size_bytes: int
    passes: int = 0
    steady: str | None = None
    steady_window_s: int = 60
    steady_max_s: int = 1800

    def path_for(self, host: str) -> str:
        """Return the target path on ``host`` (``{host}`` in a file path becomes the host name)."""
        path = self.file if self.file is not None else self.device
        assert path is not None
        return path.replace("{host}", _safe(host))


@dataclass(frozen=True)
class Adaptive:
    """Repetitions beyond the fixed ones: each cell once more per round until ``rule`` holds or it has ``maximum``."""

    maximum: int
    rule: PrecisionRule | SettleRule


@dataclass(frozen=True)
class EsxtopCapture:
    """One ``[[esxtop]]`` of a plan: a batch capture on an ESXi host for the length of every cell."""

    host: str
    command: str
    delay_s: int = 2

    def line(self, seconds: float) -> str:
        """Return the shell command for a cell of ``seconds``: enough samples to cover it and 10 s more."""
        samples = int((seconds + 10) // self.delay_s) + 2
        return (
            self.command.replace("{esxi}", shlex.quote(self.host))
            .replace("{delay}", str(self.delay_s))
            .replace("{samples}", str(samples))
        )


@dataclass(frozen=True)
class EsxiShell:
    """A plan's ``[esxi]``: ESXi hosts and the command that runs an esxcli command line on one."""

    hosts: tuple[str, ...]
    command: str

    def line(self, host: str, esxcli: str) -> str:
        """Return the shell command running ``esxcli`` (benchlib's own, fixed text) on ``host``."""
        return self.command.replace("{esxi}", shlex.quote(host)).replace("{esxcli}", esxcli)


@dataclass(frozen=True)
class VSpherePlan:
    """A plan's ``[vsphere]``: where vCenter is, which VM each fio host is, which factors its facts check."""

    server: str
    vms: dict[str, str]
    check: dict[str, str]
    insecure: bool = False
    #: the LUN under test (``naa....``), whose path policy and Round Robin limit esxcli reports
    device: str | None = None
    #: the settings benchlib sets to each cell's level (``{"sioc": factor}``), with ``--apply-settings`` only
    apply: dict[str, str] = field(default_factory=dict)
    #: the datastores ``apply`` may change: the plan names every object it changes
    datastores: tuple[str, ...] = ()
    #: the label of each VM's disk under test (``Hard disk 2``), where a VM has more than one
    disk: str | None = None
    #: each VM's (by name) test disk's shares through the run: a number, or ``low``/``normal``/``high``
    shares: dict[str, int | str] = field(default_factory=dict)
    #: each VM's (by name) test disk's IOPS limit through the run (-1: unlimited)
    limits: dict[str, int] = field(default_factory=dict)

    @property
    def applies(self) -> bool:
        """Whether benchlib sets anything (``apply``, ``shares``, ``limits``): only with ``--apply-settings``."""
        return bool(self.apply or self.shares or self.limits)


@dataclass(frozen=True)
class Plan:
    """A parsed plan file. ``repetitions``: every cell's fixed runs (an adaptive plan's ``min``)."""

    path: Path
    name: str
    title: str
    citation: str
    output: Path
    runtime_s: int
    ramp_time_s: int
    repetitions: int
    seed: int
    target: Target
    servers: tuple[str, ...]
    port: int
    factors: tuple[Factor, ...]
    profiles: tuple[Profile, ...]
    base_options: dict[str, str]
    facts_command: str | None = None
    adaptive: Adaptive | None = None
    vsphere: VSpherePlan | None = None
    esxtop: tuple[EsxtopCapture, ...] = ()
    esxi: EsxiShell | None = None
    #: ``[levels]``: a factor's level in words, written to the study's study.toml (as study.toml's ``[levels]``)
    level_words: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def max_repetitions(self) -> int:
        """The most repetitions a cell can get."""
        return self.adaptive.maximum if self.adaptive else self.repetitions

    @property
    def hosts(self) -> tuple[str, ...]:
        """The hosts of every cell: the fio servers, or ``("local",)`` for a run on this machine."""
        return self.servers or ("local",)

    def cells(self) -> list[Cell]:
        """Every cell of one repetition, in declaration order."""
        cells = []
        for profile in self.profiles:
            varied = [f for f in self.factors if f.name not in profile.hold]
            sweep = profile.sweep_levels or (None,)
            for combo in itertools.product(*(f.levels for f in varied)):
                chosen = dict(zip((f.name for f in varied), combo, strict=True)) | profile.hold
                for value in sweep:
                    options = dict(self.base_options) | profile.options
                    levels = {"profile": profile.name}
                    if value is not None:
                        options[profile.sweep_option] = value  # type: ignore[index]
                        levels[profile.sweep_factor] = value  # type: ignore[index]
                    for factor in self.factors:
                        level = chosen[factor.name]
                        levels[factor.name] = level
                        options |= factor.options.get(level, {})
                    cells.append(Cell(profile.name, levels, options))
        return cells

    @property
    def grouped_by(self) -> str | None:
        """The factor whose level is hard to change (a controller: each change stops the VMs), or None.

        Within each repetition (and each adaptive round) the cells are grouped by its level: the groups in a
        random order, the cells within each too (restricted randomisation, a split-plot design). Each
        repetition applies each level once, afresh: its runs are that application's.
        """
        return self.vsphere.apply.get("controller") if self.vsphere else None

    def _grouped(self, shuffled: list[Cell], rng: random.Random, after: str | None) -> list[Cell]:
        """Return ``shuffled`` grouped by :attr:`grouped_by`'s level, groups in random order, never first ``after``.

        A group that began with the level the last one ended on would be one application, not two.
        """
        factor = self.grouped_by
        if factor is None:
            return shuffled
        levels = list(dict.fromkeys(c.levels[factor] for c in shuffled))
        rng.shuffle(levels)
        if len(levels) > 1 and levels[0] == after:
            levels.append(levels.pop(0))
        return [c for level in levels for c in shuffled if c.levels[factor] == level]

    def order(self) -> list[tuple[int, Cell]]:
        """``(repetition, cell)`` in run order: every cell once per repetition, shuffled per repetition.

        Grouped by a hard-to-change factor's level within each repetition, where the plan sets one
        (:attr:`grouped_by`).
        """
        rng = random.Random(self.seed)
        cells = self.cells()
        ordered: list[tuple[int, Cell]] = []
        for repetition in range(1, self.repetitions + 1):
            shuffled = list(cells)
            rng.shuffle(shuffled)
            after = ordered[-1][1].levels.get(self.grouped_by or "") if ordered else None
            ordered.extend((repetition, c) for c in self._grouped(shuffled, rng, after))
        return ordered

    def round_order(self, repetition: int, cells: list[Cell], after: Cell | None = None) -> list[Cell]:
        """Return the cells of one adaptive round (``repetition`` > ``repetitions``), shuffled with the plan's seed.

        ``after``: the cell the run ran last (its hard-to-change level does not open this round).
        """
        shuffled = sorted(cells, key=lambda c: c.key)
        rng = random.Random(f"{self.seed}:{repetition}")
        rng.shuffle(shuffled)
        return self._grouped(shuffled, rng, after.levels.get(self.grouped_by or "") if after else None)

    def study_factors(self) -> dict[str, list[str]]:
        """Return the factors the recorded study declares: profile, sweep factors, then matrix factors."""
        factors: dict[str, list[str]] = {"profile": [p.name for p in self.profiles]}
        for profile in self.profiles:
            if profile.sweep_factor:
                levels = factors.setdefault(profile.sweep_factor, [])
                levels.extend(v for v in profile.sweep_levels if v not in levels)
        for factor in self.factors:
            factors[factor.name] = list(factor.levels)
        return factors


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-._" else "_" for c in str(text))


def level_in_folder(value: object) -> str:
    """Return a level as a cell's folder spells it (:attr:`Cell.key`)."""
    return _safe(str(value))


def key_levels(key: str) -> dict[str, str]:
    """Read a cell's folder (:attr:`Cell.key`) back into its levels: ``profile`` and each ``factor=level``."""
    profile, *rest = key.split("/")
    return {"profile": profile, **dict(part.partition("=")[::2] for part in rest)}


def _text(value: object, path: Path | None = None, where: str = "") -> str:
    """Return a plan value as text: a string, a whole or decimal number, or a boolean (1/0); nothing else."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if not isinstance(value, str | int | float):
        raise PlanError(f"{path}: {where}: {value!r} is not a single value (a string, a number or true/false)")
    return str(value)


def _table(path: Path, where: str, value: object, keys: set[str] | None = None) -> dict:
    """Return a TOML table, with only ``keys`` when given (a misspelled key is an error, not silently ignored)."""
    if not isinstance(value, dict):
        raise PlanError(f"{path}: {where} must be a table, not {value!r}")
    unknown = sorted(set(value) - keys) if keys is not None else []
    if unknown:
        raise PlanError(f"{path}: {where} has unknown keys {unknown} (allowed: {', '.join(sorted(keys or ()))})")
    return value


def _list(path: Path, where: str, value: object) -> list:
    if not isinstance(value, list):
        raise PlanError(f'{path}: {where} must be a list such as ["a", "b"], not {value!r}')
    return value


def _checked(path: Path, where: str, text: str, problem: str | None) -> str:
    if problem:
        raise PlanError(f"{path}: {where}: {text!r} is refused: {problem}")
    return text


def _option(path: Path, where: str, key: object, value: object, allowed: frozenset[str]) -> tuple[str, str]:
    key, value = str(key), _text(value, path, f"{where} {key}")
    problem = option_problem(key, value, allowed)
    if problem:
        raise PlanError(f"{path}: {where}: {key} = {value!r} is refused: {problem}")
    return key, value


def _options(path: Path, where: str, table: object, allowed: frozenset[str]) -> dict[str, str]:
    if not isinstance(table, dict):
        raise PlanError(f'{path}: {where} must be a table of fio options such as {{ rw = "randread", bs = "4k" }}')
    return dict(_option(path, where, k, v, allowed) for k, v in table.items())


def _profile_name(path: Path, where: str, name: str) -> str:
    """Return a profile name: a folder name of the study and fio's job section name."""
    if not _PROFILE_NAME.fullmatch(name):
        raise PlanError(
            f"{path}: {where}: profile name {name!r} is refused: a profile name is letters, digits, "
            "'.', '_' and '-' (it names the cell's folder and fio's job section)"
        )
    return _checked(path, where, name, name_problem(name))


def _level(path: Path, where: str, value: object) -> str:
    text = _text(value, path, where)
    markup = next((c for c in "*`[]" if c in text), None)  # a level is said on every page: never its markup
    problem = f"a level may not hold {markup!r} (pages would read it as markup)" if markup else None
    return _checked(path, where, text, text_problem(text) or problem or ("it is empty" if not text else None))


def _factor(path: Path, name: str, table: object, allowed: frozenset[str]) -> Factor:
    if not _FACTOR_NAME.fullmatch(name):
        raise PlanError(
            f"{path}: [matrix.{name!r}]: a factor name is a letter, then letters, digits or _ "
            "(it becomes a column and a folder name)"
        )
    if name in RUNS or name in _NOT_FACTORS:
        raise PlanError(f"{path}: [matrix.{name}]: {name!r} is a column benchlib already has; rename the factor")
    table = _table(path, f"[matrix.{name}]", table, _KEYS["matrix"])
    if not table.get("levels"):
        raise PlanError(f"{path}: [matrix.{name}] needs levels = [...]")
    levels = tuple(
        _level(path, f"[matrix.{name}] levels", v) for v in _list(path, f"[matrix.{name}] levels", table["levels"])
    )
    if len(set(levels)) != len(levels):
        raise PlanError(f"{path}: [matrix.{name}] lists a level twice: {list(levels)}")
    options: dict[str, dict[str, str]] = {}
    if "option" in table:
        option = str(table["option"])
        options = dict(
            (level, dict([_option(path, f"[matrix.{name}] option", option, level, allowed)])) for level in levels
        )
    for level, opts in _table(path, f"[matrix.{name}] options", table.get("options", {})).items():
        if str(level) not in levels:
            raise PlanError(
                f"{path}: [matrix.{name}] options.{level}: {level!r} is not one of the levels {list(levels)}"
            )
        options.setdefault(str(level), {}).update(_options(path, f"[matrix.{name}] options.{level}", opts, allowed))
    return Factor(name, levels, options)


def _profile(path: Path, index: int, entry: object, factors: dict[str, Factor], allowed: frozenset[str]) -> Profile:
    where = f"[[profiles]] entry {index + 1}"
    entry = _table(path, where, entry, _KEYS["profiles"])
    if "use" in entry:
        base = PROFILES.get(str(entry["use"]))
        if base is None:
            raise PlanError(f"{path}: {where}: no built-in profile {entry['use']!r}; built-ins: {', '.join(PROFILES)}")
        name = str(entry.get("name", entry["use"]))
        options = _options(
            path, where, base["options"] | _table(path, f"{where} options", entry.get("options", {})), allowed
        )
        sweep = dict(base.get("sweep", {})) | _table(path, f"{where} sweep", entry.get("sweep", {}), _KEYS["sweep"])
    elif "name" in entry and "options" in entry:
        name = str(entry["name"])
        options = _options(path, f"{where} ({name!r}) options", entry["options"], allowed)
        sweep = _table(path, f"{where} sweep", entry.get("sweep", {}), _KEYS["sweep"])
    else:
        raise PlanError(f'{path}: {where} needs use = "<built-in>" or name = ... with options = {{...}}')
    _profile_name(path, f"{where} name", name)
    if sweep and not {"factor", "option", "levels"} <= set(sweep):
        raise PlanError(f"{path}: {where} ({name}) sweep needs factor, option and levels")
    if sweep and not _FACTOR_NAME.fullmatch(str(sweep["factor"])):
        raise PlanError(
            f"{path}: {where} ({name}) sweep factor {sweep['factor']!r}: a factor name is a letter, "
            "then letters, digits or _"
        )
    levels = (
        tuple(
            _option(path, f"{where} ({name}) sweep", sweep["option"], v, allowed)[1]
            for v in _list(path, f"{where} ({name}) sweep levels", sweep["levels"])
        )
        if sweep
        else ()
    )
    hold = {
        str(k): _text(v, path, f"{where} hold") for k, v in _table(path, f"{where} hold", entry.get("hold", {})).items()
    }
    for factor, level in hold.items():
        if factor not in factors:
            raise PlanError(
                f"{path}: {where} ({name}) holds {factor!r}, which [matrix] does not declare "
                f"(declared: {', '.join(factors) or 'none'})"
            )
        if level not in factors[factor].levels:
            raise PlanError(
                f"{path}: {where} ({name}) holds {factor} = {level!r}, not one of {list(factors[factor].levels)}"
            )
    if sweep and (sweep["factor"] in factors or sweep["factor"] in RUNS or sweep["factor"] in _NOT_FACTORS):
        raise PlanError(
            f"{path}: {where} ({name}) sweep factor {sweep['factor']!r} clashes with a matrix factor or column"
        )
    return Profile(
        name=name,
        options=options,
        sweep_factor=str(sweep["factor"]) if sweep else None,
        sweep_option=str(sweep["option"]) if sweep else None,
        sweep_levels=levels,
        hold=hold,
    )


def _positive_int(path: Path, table: dict, key: str, default: int, minimum: int = 1, section: str = "run") -> int:
    value = table.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise PlanError(f"{path}: [{section}] {key} must be a whole number >= {minimum}, not {value!r}")
    return value


#: the longest a cell's runtime or ramp may be (a day): a longer one is a typo, and would hold every host
MAX_SECONDS = 86_400
#: fio's steady-state criteria benchlib passes on: a figure (IOPS or bandwidth, or their slope) and a share
STEADY_CRITERION = re.compile(r"(iops|bw)(_slope)?:(100|[1-9]?[0-9])(\.[0-9]{1,3})?%")
#: the most I/O buffer memory one cell may ask of a host (largest block x iodepth x numjobs: fio allocates it)
MAX_BUFFERS = 32 << 30
#: the options whose values hold a cell's block sizes (``4k``, ``4k,64k``, ``4k-64k``, ``4k/50:64k/50``)
_BLOCK_OPTIONS = ("bs", "blocksize", "bsrange", "blocksize_range", "bssplit")
_A_SIZE = re.compile(r"(?<![/\d.])(\d+(?:\.\d+)?)\s*([kmgtp]?)(?:i?b)?", re.IGNORECASE)
#: the largest region a plan may name (64 TiB)
MAX_SIZE = 64 << 40


def io_buffer_bytes(options: dict[str, str]) -> int:
    """Return the I/O buffers fio allocates for one host's job: its largest block x iodepth x numjobs.

    A block size given as a list, range or split counts its largest (a percentage in a split is not a size).
    """
    largest = 4096  # fio's default bs
    for key in _BLOCK_OPTIONS:
        for number, prefix in _A_SIZE.findall(str(options.get(key, ""))):
            largest = max(largest, int(float(number) * 1024 ** " kmgtp".index(prefix.lower() or " ")))
    depth, jobs = (
        int(options.get(k, "1")) if str(options.get(k, "1")).isdigit() else 1 for k in ("iodepth", "numjobs")
    )
    return largest * depth * jobs


def _bounded(
    path: Path, table: dict, key: str, default: int, maximum: int, section: str = "run", minimum: int = 1
) -> int:
    value = _positive_int(path, table, key, default, minimum=minimum, section=section)
    if value > maximum:
        raise PlanError(f"{path}: [{section}] {key} must be at most {maximum:,}, not {value!r}")
    return value


def _repetitions(path: Path, run: dict) -> tuple[int, Adaptive | None]:
    value = run.get("repetitions", 3)
    if not isinstance(value, dict):
        return _bounded(path, run, "repetitions", 3, 10_000), None
    where = "[run] repetitions"
    table = _table(path, where, value, {"min", "max", "until"})
    missing = [k for k in ("min", "max", "until") if k not in table]
    if missing:
        raise PlanError(
            f"{path}: {where} needs min, max and until (missing {', '.join(missing)}), e.g. "
            '{ min = 3, max = 10, until = "iops within 5%" }'
        )
    minimum = _bounded(path, table, "min", 3, 10_000, section="run.repetitions")
    maximum = _bounded(path, table, "max", 10, 10_000, section="run.repetitions")
    if minimum < 2 or maximum <= minimum:
        raise PlanError(
            f"{path}: {where}: min must be at least 2 (an interval needs two runs) and max above min, "
            f'not min = {minimum}, max = {maximum}; e.g. {{ min = 3, max = 10, until = "iops within 5%" }}'
        )
    rule = parse_rule(str(table["until"]))
    if isinstance(rule, str):
        raise PlanError(f"{path}: {where} until: {rule}")
    return minimum, Adaptive(maximum, rule)


def _target(path: Path, table: object) -> Target:
    table = _table(path, "[target]", table, _KEYS["target"])
    file, device = table.get("file"), table.get("device")
    if (file is None) == (device is None):
        raise PlanError(f'{path}: [target] needs exactly one of file = "/path/{{host}}.dat" or device = "/dev/..."')
    size = parse_job_size(str(table.get("size", ""))) if "size" in table else None
    if not size:
        raise PlanError(f'{path}: [target] needs size = "256MiB" (the region fio works in)')
    if file is not None:
        _checked(path, "[target] file", str(file), file_target_problem(str(file)))
    if device is not None:
        _checked(path, "[target] device", str(device), path_problem(str(device)))
    if device is not None and "{" in str(device):
        raise PlanError(
            f"{path}: [target] device {device!r}: a device is named exactly, as --destroy-data must name "
            "it ({{host}} is for file targets)"
        )
    if size > MAX_SIZE:
        raise PlanError(f"{path}: [target] size {table.get('size')!r} is over 64 TiB; give the region fio works in")
    if size < 1 << 20:
        raise PlanError(
            f"{path}: [target] size {table.get('size')!r} is under 1 MiB; give the region fio works in, "
            'e.g. size = "256MiB"'
        )
    passes, steady, window, longest = _precondition(path, table)
    return Target(
        file=str(file) if file is not None else None,
        device=str(device) if device else None,
        size_bytes=size,
        passes=passes,
        steady=steady,
        steady_window_s=window,
        steady_max_s=longest,
    )


def _precondition(path: Path, table: dict) -> tuple[int, str | None, int, int]:
    """Return a ``[target]``'s preconditioning: passes, and the steady-state criterion, window and longest time."""
    precondition = table.get("precondition", "none")
    if precondition not in ("none", "sequential", "steady"):
        raise PlanError(
            f'{path}: [target] precondition = {precondition!r}: say "sequential" (write the whole region '
            "before the study's first cell, passes times), \"steady\" (those passes, then each run's own workload "
            'until it is steady) or "none"'
        )
    if "passes" in table and precondition == "none":
        raise PlanError(f'{path}: [target] passes needs precondition = "sequential" or "steady"')
    steady_keys = sorted({"steady", "steady_window_s", "steady_max_s"} & set(table))
    if steady_keys and precondition != "steady":
        raise PlanError(f'{path}: [target] {", ".join(steady_keys)} needs precondition = "steady"')
    default_passes = 2 if precondition == "steady" else 1
    passes = _bounded(path, table, "passes", default_passes, 16, section="target") if precondition != "none" else 0
    if precondition != "steady":
        return passes, None, 60, 1800
    return passes, *_steady(path, table)


def _steady(path: Path, table: dict) -> tuple[str, int, int]:
    """Return a ``[target]``'s steady-state criterion, window and longest time (``precondition = "steady"``)."""
    steady = table.get("steady", "iops:20%")
    if not isinstance(steady, str) or not STEADY_CRITERION.fullmatch(steady):
        raise PlanError(
            f"{path}: [target] steady = {steady!r}: give fio's steady-state criterion, a figure and how "
            'close: "iops:20%" (every IOPS sample of the window within 20% of their mean), "bw:20%", '
            '"iops_slope:10%" or "bw_slope:10%"'
        )
    window = _bounded(path, table, "steady_window_s", 60, 3_600, section="target", minimum=2)
    longest = _bounded(path, table, "steady_max_s", 1_800, MAX_SECONDS, section="target", minimum=window)
    return steady, window, longest


def _facts_command(path: Path, hosts: dict, allowed: bool) -> str | None:
    command = hosts.get("facts_command")
    if command is None:
        return None
    if not isinstance(command, str) or "{host}" not in command:
        raise PlanError(
            f"{path}: [hosts] facts_command must be a command with {{host}} in it, "
            'e.g. "ssh -o BatchMode=yes {host} sh -s -- {target}"'
        )
    return _allowed_command(path, "[hosts] facts_command", command, allowed)


def _allowed_command(path: Path, where: str, command: str, allowed: bool) -> str:
    """Return a plan's shell command when the user allowed the plan's commands (--allow-facts-command)."""
    if not allowed:
        raise PlanError(
            f"{path}: {where} is a shell command benchlib would run on this machine ({command!r}); "
            "if you mean it, run with --allow-facts-command"
        )
    return command


def _esxi(path: Path, table: object, allowed: bool) -> EsxiShell | None:
    """Check ``[esxi]``: host names, and a shell command with ``{esxi}`` and ``{esxcli}``."""
    if table is None:
        return None
    entry = _table(path, "[esxi]", table, _KEYS["esxi"])
    hosts = tuple(str(h) for h in _list(path, "[esxi] hosts", entry.get("hosts", [])))
    for host in hosts:
        _checked(path, "[esxi] hosts", host, None if _HOST.fullmatch(host) else "an ESXi host's name or address")
    command = entry.get("command")
    if not hosts or not isinstance(command, str) or "{esxi}" not in command or "{esxcli}" not in command:
        raise PlanError(
            f'{path}: [esxi] needs hosts = ["esx01.lab"] and a command with {{esxi}} and {{esxcli}}, '
            'e.g. "ssh -o BatchMode=yes root@{esxi} {esxcli}"'
        )
    return EsxiShell(hosts, _allowed_command(path, "[esxi] command", command, allowed))


def _esxtop(path: Path, index: int, table: object, allowed: bool) -> EsxtopCapture:
    """Check one ``[[esxtop]]``: an ESXi host's name, a shell command with ``{esxi}``, the delay in seconds."""
    where = f"[[esxtop]] #{index + 1}"
    entry = _table(path, where, table, _KEYS["esxtop"])
    host, command = str(entry.get("host", "")), entry.get("command")
    problem = None if _HOST.fullmatch(host) else "host is the ESXi host's name or address (letters, digits, .:-_)"
    _checked(path, f"{where} host", host, problem)
    if not isinstance(command, str) or "{esxi}" not in command:
        raise PlanError(
            f"{path}: {where} command must be a command with {{esxi}} in it, "
            'e.g. "ssh -o BatchMode=yes root@{esxi} esxtop -b -a -d {delay} -n {samples}"'
        )
    command = _allowed_command(path, f"{where} command", command, allowed)
    return EsxtopCapture(host, command, _bounded(path, entry, "delay", 2, 3600, section="esxtop"))


def _vsphere(path: Path, table: object, hosts: tuple[str, ...], factors: dict) -> VSpherePlan | None:
    """Check a plan's ``[vsphere]``: a vCenter address, a VM for fio hosts of the plan, checks of its factors."""
    if table is None:
        return None
    from benchlib.vsphere import Server, VSphereError

    section = _table(path, "[vsphere]", table, _KEYS["vsphere"])
    try:
        Server.parse(str(section.get("server", "")))
    except VSphereError as exc:
        raise PlanError(f"{path}: [vsphere] server: {exc}") from None
    vms = _table(path, "[vsphere] vms", section.get("vms", {}))
    if not vms or not all(isinstance(v, str) and v.strip() for v in vms.values()):
        raise PlanError(f'{path}: [vsphere] vms maps each fio host to its VM\'s name, e.g. {{ "{hosts[0]}" = "vm1" }}')
    strangers = sorted(set(vms) - set(hosts))
    if strangers:
        raise PlanError(
            f"{path}: [vsphere] vms names {', '.join(strangers)}, not a host of this plan ({', '.join(hosts)})"
        )
    check = _table(path, "[vsphere] check", section.get("check", {}))
    for fact, factor in check.items():
        if fact not in CHECKS or factor not in factors:
            raise PlanError(
                f"{path}: [vsphere] check = {{ {fact} = {factor!r} }}: checks are controller, sioc, path_policy or "
                "rr_iops, each naming a "
                f"[matrix] factor ({', '.join(factors) or 'none'})"
            )
    device = section.get("device")
    if (set(LUN_CHECKS) & set(check)) and not (isinstance(device, str) and device.strip()):
        raise PlanError(
            f'{path}: [vsphere] checks path_policy or rr_iops of one LUN: name it, device = "naa.6..." '
            "(as esxcli storage nmp device list prints it), and list its ESXi hosts in [esxi]"
        )
    insecure = section.get("insecure", False)
    if not isinstance(insecure, bool):  # "false" in quotes is text, and text is true: never guess about TLS
        raise PlanError(f"{path}: [vsphere] insecure must be true or false without quotes, not {insecure!r}")
    apply, datastores = _applied(path, section, factors)
    check = {**check, **{setting: factor for setting, factor in apply.items() if setting not in check}}
    disk = section.get("disk")
    if disk is not None and not (isinstance(disk, str) and disk.strip() and len(disk) <= 80):
        raise PlanError(f'{path}: [vsphere] disk is the label of the disk under test, e.g. "Hard disk 2"')
    shares, limits = _disk_io(path, section, vms, hosts)
    return VSpherePlan(
        str(section["server"]), dict(vms), dict(check), insecure, device or None, apply, datastores, disk,
        shares=shares, limits=limits,
    )  # fmt: skip


#: the most shares or IOPS a plan may give a disk (vCenter takes 32-bit numbers)
MOST_DISK_IO = 1_000_000_000


def _disk_io(path: Path, section: dict, vms: dict, hosts: Sequence[str]) -> tuple[dict[str, int | str], dict[str, int]]:
    """Check ``[vsphere] shares`` and ``limits`` (fio host -> value); return them by VM name.

    Shares name every fio host (what is fair is judged against all of them); a limit may name some.
    """
    found: list[dict] = []
    for key, example, named in (("shares", "2000", set(SHARES_LEVELS)), ("limits", "500", {"unlimited"})):
        table = _table(path, f"[vsphere] {key}", section.get(key, {}))
        strangers = sorted(set(table) - set(vms))
        if strangers:
            raise PlanError(
                f"{path}: [vsphere] {key} names {', '.join(map(repr, strangers))}, not a fio host of [vsphere] vms "
                f"({', '.join(map(repr, vms))})"
            )
        for host, value in table.items():
            whole = isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MOST_DISK_IO
            if not (whole or (isinstance(value, str) and value in named)):
                raise PlanError(
                    f'{path}: [vsphere] {key} {{ "{host}" = {value!r} }}: give a whole number from 1 to '
                    f"{MOST_DISK_IO:,} (e.g. {example}) or {' or '.join(map(repr, sorted(named)))}"
                )
        found.append({vms[host]: (-1 if value == "unlimited" else value) for host, value in table.items()})
    shares, limits = found
    missing = [h for h in hosts if h not in vms or vms[h] not in shares]
    if shares and missing:
        raise PlanError(
            f"{path}: [vsphere] shares names {len(shares)} of the plan's {len(hosts)} fio hosts: name each "
            f"({', '.join(missing)} missing, each with its VM in vms), since how fairly they shared is judged "
            "against all their shares"
        )
    if len(set(vms.values())) != len(vms) and (shares or limits):
        raise PlanError(f"{path}: [vsphere] vms maps two fio hosts to one VM: its test disk's shares would be two")
    return shares, limits


#: the vSphere settings a plan may have benchlib set (``[vsphere] apply``); the others are checked only
APPLIED = ("sioc", "controller", "rr_iops", "sioc_threshold")


def _applied(path: Path, section: dict, factors: dict) -> tuple[dict[str, str], tuple[str, ...]]:
    """Check ``[vsphere] apply`` (setting -> factor) and the ``datastores`` it may change."""
    apply = _table(path, "[vsphere] apply", section.get("apply", {}))
    for setting, factor in apply.items():
        if not isinstance(factor, str):
            raise PlanError(f'{path}: [vsphere] apply = {{ {setting} = "<factor>" }} names one factor, not {factor!r}')
        if setting not in APPLIED:
            raise PlanError(
                f"{path}: [vsphere] apply = {{ {setting} = {factor!r} }}: benchlib sets only "
                f"{', '.join(APPLIED)} (Storage I/O Control; the controller of the disk under test; the Round Robin "
                "IO operation limit; SIOC's congestion threshold) so far; change "
                f"{setting} by hand between runs (--levels) and let [vsphere] check = {{ {setting} = {factor!r} }} "
                "confirm it"
            )
        if factor not in factors:
            raise PlanError(
                f"{path}: [vsphere] apply = {{ {setting} = {factor!r} }} names no [matrix] factor "
                f"({', '.join(factors) or 'none'})"
            )
        _applied_levels(path, setting, factor, factors[factor].levels, section)
    checked = _table(path, "[vsphere] check", section.get("check", {}))
    for setting, factor in apply.items():
        if checked.get(setting, factor) != factor:
            raise PlanError(
                f"{path}: [vsphere] apply sets {setting} from factor {factor!r} and check checks it against "
                f"{checked[setting]!r}: one factor says what {setting} is"
            )
    return dict(apply), _datastores(path, section.get("datastores", []), bool({"sioc", "sioc_threshold"} & set(apply)))


def _whole(level: str) -> int | None:
    """Return a Round Robin limit level as the number it is (``1``, `` 20 ``), None where it is none."""
    return int(level) if re.fullmatch(r"\s*[1-9][0-9]{0,5}\s*", level) else None


def _applied_levels(path: Path, setting: str, factor: str, levels: Sequence[str], section: dict) -> None:
    """Check that each level of a factor ``[vsphere] apply`` sets says what to set (on/off; one controller)."""
    from benchlib.vsphere import MOVABLE, controller_level, sioc_level, threshold_level

    named = {"sioc": sioc_level, "controller": controller_level, "rr_iops": _whole, "sioc_threshold": threshold_level}[
        setting
    ]
    said = [named(level) for level in levels]
    what, rule, verb = {
        "sioc": ("SIOC", "must say on or off (on, off, enabled, disabled, true, false)", "does not"),
        "controller": (
            "the test disk's controller",
            f"must each name one controller ({', '.join(MOVABLE)})",
            "does not",
        ),
        "rr_iops": ("the Round Robin IO operation limit", "must be whole numbers of I/Os from 1 to 999999", "is not"),
        "sioc_threshold": (
            "the SIOC congestion threshold",
            "must each be 5 to 100 ms (30) or 50% to 100% of peak throughput (90%)",
            "is not",
        ),
    }[setting]
    unsaid = [level for level, value in zip(levels, said, strict=True) if value is None]
    if unsaid:
        raise PlanError(
            f"{path}: [vsphere] apply sets {what} from factor {factor!r}, whose levels {rule}; "
            f"{', '.join(map(repr, unsaid))} {verb}"
        )
    twice = [level for level, value in zip(levels, said, strict=True) if said.count(value) > 1]
    if twice:
        raise PlanError(
            f"{path}: [vsphere] apply sets {what} from factor {factor!r}, whose levels "
            f"{', '.join(map(repr, twice))} name one setting: they would compare a setting with itself"
        )
    if setting != "controller":
        return
    if "local" in section.get("vms", {}):
        raise PlanError(
            f"{path}: [vsphere] apply sets the controller, which stops and starts each VM, and vms names this "
            "machine (local): run fio on the VMs as servers ([hosts] servers) and benchlib from another machine"
        )


def _datastores(path: Path, datastores: object, applied: bool) -> tuple[str, ...]:
    """Check ``[vsphere] datastores``: each datastore ``apply`` may change, named once."""
    if applied and (
        not isinstance(datastores, list)
        or not datastores
        or not all(isinstance(d, str) and d.strip() and len(d) <= 80 for d in datastores)
    ):
        raise PlanError(
            f"{path}: [vsphere] apply sets SIOC or its threshold on datastores: name each it may change, "
            'datastores = ["ds-test"] (the datastores of the VMs\' test disks; a VM whose test disk is elsewhere '
            "stops the run)"
        )
    if datastores and not applied:
        raise PlanError(
            f"{path}: [vsphere] datastores names where apply may set SIOC or its threshold; this plan sets neither"
        )
    named = tuple(datastores) if isinstance(datastores, list) else ()
    if len(set(named)) != len(named):
        raise PlanError(f"{path}: [vsphere] datastores names a datastore twice: {list(named)}")
    return named


def _output(path: Path, run: dict) -> Path:
    """Return the plan's ``[run] output`` folder; refused where it leads to / or into a system folder."""
    output = path.parent / str(run.get("output", "."))
    where = os.path.realpath(output)  # a link may lead into a system folder
    if where == "/":  # its cell folders would be top-level folders (a profile named etc: /etc/...)
        raise PlanError(f"{path}: [run] output = {run.get('output')!r} leads to /; choose a folder of your own")
    if (problem := file_target_problem(where)) is not None:
        raise PlanError(
            f"{path}: [run] output = {run.get('output')!r} leads to {where}: {problem}; choose a folder of your own"
        )
    return output


def vcenter_problem(plan: Plan, vcenter: str | None, insecure: bool = False) -> str | None:
    """Say why the plan's ``[vsphere] server`` may not be sent the user's credentials, or None when it may.

    A plan travels inside studies and bundles, so the server it names is its author's choice: benchlib
    logs in (with ``BENCHLIB_VSPHERE_USER`` and ``_PASSWORD``) only to the vCenter the user names on the
    command line, ``--vcenter``, and only when it is the plan's. Likewise a plan's ``insecure = true`` (no
    certificate check, so whoever answers for that name gets the password) needs ``--vcenter-insecure``.
    """
    if plan.vsphere is None:
        return None
    from benchlib.vsphere import Server, VSphereError

    named = plan.vsphere.server
    if vcenter is None:
        return (
            f"{plan.path}: [vsphere] server = {named!r}: benchlib sends your vCenter credentials only to a "
            f"server you name yourself (a plan may come from anyone); if it is yours, pass --vcenter {named}"
        )
    try:
        mine, theirs = Server.parse(vcenter), Server.parse(named)
    except VSphereError as exc:
        return f"--vcenter: {exc}"
    if mine != theirs:
        return (
            f"{plan.path}: [vsphere] server is {theirs.protocol}://{theirs.address}, and --vcenter names "
            f"{mine.protocol}://{mine.address}; nothing was sent to either. Correct the plan or the flag"
        )
    if plan.vsphere.insecure and not insecure:
        return (
            f"{plan.path}: [vsphere] insecure = true turns off the check of {theirs.host}'s certificate, so "
            "whoever answers for that name would get your password; a plan alone may not. If the vCenter's "
            "certificate is self-signed and you trust the network, pass --vcenter-insecure as well"
        )
    return None


#: the sections a plan may have
_SECTIONS = frozenset(
    ("study", "run", "target", "hosts", "matrix", "profiles", "options", "vsphere", "esxtop", "esxi", "levels")
)


def load_plan(path: str | Path, *, allow_options: Iterable[str] = (), allow_facts_command: bool = False) -> Plan:
    """Read and check a plan file.

    ``allow_options``: fio options the user allows although they run commands, write files of
    their own choosing or use another engine (``benchlib run --allow-option``; see
    :mod:`benchlib.runner.vocabulary`). ``allow_facts_command``: the user allows the plan's
    ``[hosts] facts_command``, a shell command (``benchlib run --allow-facts-command``).

    Raises
    ------
    PlanError
        When the file is missing, not TOML, or inconsistent; the message says where and what to do.

    """
    path = Path(path)
    if not path.is_file():
        raise PlanError(f"{path}: no such plan file; give a plan such as data/raw/loopback-fio/plan.toml")
    data = read_toml(path, PlanError)
    unknown = sorted(set(data) - _SECTIONS)
    if unknown:
        raise PlanError(
            f"{path}: unknown section(s) {', '.join(unknown)}; "
            "a plan has study, run, target, hosts, vsphere, esxtop, esxi, matrix, profiles, options and levels"
        )
    study = _table(path, "[study]", data.get("study", {}), _KEYS["study"])
    run = _table(path, "[run]", data.get("run", {}), _KEYS["run"])
    if "target" not in data:
        raise PlanError(f"{path}: no [target]; say where fio may do its I/O (file = ... or device = ...)")
    allowed = frozenset(allow_options)
    factors = {
        name: _factor(path, name, table, allowed)
        for name, table in _table(path, "[matrix]", data.get("matrix", {})).items()
    }
    if not data.get("profiles"):
        raise PlanError(f'{path}: no [[profiles]]; add at least one, e.g. [[profiles]] use = "randread-4k"')
    profiles = tuple(
        _profile(path, i, e, factors, allowed) for i, e in enumerate(_list(path, "[[profiles]]", data["profiles"]))
    )
    names = [p.name for p in profiles]
    if len(set(names)) != len(names):
        raise PlanError(f'{path}: two profiles share a name ({names}); give one of them name = "..."')
    hosts = _table(path, "[hosts]", data.get("hosts", {}), _KEYS["hosts"])
    servers = tuple(
        _checked(
            path,
            "[hosts] servers",
            str(s),
            None
            if _HOST.fullmatch(str(s))
            else "a fio server is a host name or address (letters, digits, '.', ':', '-', '_')",
        )
        for s in _list(path, "[hosts] servers", hosts.get("servers", []))
    )
    if len(set(servers)) != len(servers):
        raise PlanError(f"{path}: [hosts] servers lists a host twice: {list(servers)}")
    output = _output(path, run)
    repetitions, adaptive = _repetitions(path, run)
    plan = Plan(
        path=path,
        name=str(study.get("name", output.resolve().name)),
        title=str(study.get("title", "")),
        citation=str(study.get("citation", "")),
        output=output,
        runtime_s=_bounded(path, run, "runtime_s", 60, MAX_SECONDS),
        ramp_time_s=_bounded(path, run, "ramp_time_s", 0, MAX_SECONDS, minimum=0),
        repetitions=repetitions,
        adaptive=adaptive,
        seed=_positive_int(path, run, "seed", 0, minimum=0),
        target=_target(path, data["target"]),
        servers=servers,
        port=_bounded(path, hosts, "port", 8765, 65_535, section="hosts"),
        facts_command=_facts_command(path, hosts, allow_facts_command),
        factors=tuple(factors.values()),
        profiles=profiles,
        base_options={k: _text(v) for k, v in BASE_OPTIONS.items()}
        | _options(path, "[options]", data.get("options", {}), allowed),
        vsphere=_vsphere(path, data.get("vsphere"), servers or ("local",), factors),
        esxi=_esxi(path, data.get("esxi"), allow_facts_command),
        esxtop=tuple(
            _esxtop(path, i, e, allow_facts_command)
            for i, e in enumerate(_list(path, "[[esxtop]]", data.get("esxtop", [])))
        ),
    )
    try:  # the levels in words, checked as study.toml's are: against the factors the study will declare
        plan = dataclasses.replace(
            plan, level_words=check_level_words(path, data.get("levels", {}), plan.study_factors())
        )
    except StudyError as exc:
        raise PlanError(str(exc)) from None
    _check_cells(path, plan.cells())
    _round_robin_needs(plan)
    return _settled_against(plan)


#: a LUN as esxcli names it (naa., eui., t10., mpx.): it goes into the esxcli command line that sets it
DEVICE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")


def _round_robin_needs(plan: Plan) -> None:
    """Check that a plan setting the Round Robin limit names its LUN exactly and the ESXi hosts that see it."""
    if plan.vsphere is None or "rr_iops" not in plan.vsphere.apply:
        return
    device = plan.vsphere.device
    if not isinstance(device, str) or not DEVICE_NAME.fullmatch(device):
        raise PlanError(
            f'{plan.path}: [vsphere] apply sets the Round Robin limit of the LUN device = "naa..." names, as esxcli '
            f"storage nmp device list prints it (letters, digits, . _ : -), not {device!r}"
        )
    if plan.esxi is None:
        raise PlanError(
            f"{plan.path}: [vsphere] apply sets the Round Robin limit through esxcli on each ESXi host that sees "
            "the LUN: list them in [esxi] hosts, with the command that runs esxcli on one"
        )


def _settled_against(plan: Plan) -> Plan:
    """Check a ``settled`` rule's factor and baseline against the matrix; name the baseline where it was left out."""
    rule = plan.adaptive.rule if plan.adaptive else None
    if not isinstance(rule, SettleRule):
        return plan
    where = f"{plan.path}: [run] repetitions until {rule.text!r}"
    levels = {f.name: [str(level) for level in f.levels] for f in plan.factors if len(f.levels) > 1}
    if rule.factor not in levels:
        raise PlanError(
            f"{where}: {rule.factor!r} is not a matrix factor with two levels or more "
            f"(the plan's: {', '.join(levels) or 'none'})"
        )
    if rule.baseline is not None and rule.baseline not in levels[rule.factor]:
        raise PlanError(f"{where}: {rule.factor} has no level {rule.baseline!r} (its levels: {levels[rule.factor]})")
    named = dataclasses.replace(rule, baseline=rule.baseline or levels[rule.factor][0])
    if plan.adaptive.maximum - plan.repetitions + 1 > MOST_LOOKS:
        raise PlanError(
            f"{where}: a settled rule looks after every round, at most {MOST_LOOKS} rounds: max - min is "
            f"{plan.adaptive.maximum - plan.repetitions}; lower max, or repeat a fixed number of times"
        )
    if not settled_cells(plan.cells(), named):
        raise PlanError(
            f"{where}: no two cells differ only in {rule.factor}, one of them at {named.baseline}: every profile "
            f"holds {rule.factor} at one level (hold = ...), so there is no comparison to settle"
        )
    return dataclasses.replace(plan, adaptive=dataclasses.replace(plan.adaptive, rule=named))


def settled_cells(cells: list[Cell], rule: SettleRule) -> set[str]:
    """Return the keys of the cells a settled rule compares: each with a cell alike but for the factor's level.

    A cell at the baseline is in one when some other level's cell is alike in all else; another level's when
    the baseline's is. A profile that holds the factor at one level puts its cells in none.
    """
    groups: dict[tuple, dict[str, str]] = {}
    for cell in cells:
        if rule.factor in cell.levels:
            rest = tuple(sorted((k, v) for k, v in cell.levels.items() if k != rule.factor))
            groups.setdefault((cell.profile, rest), {})[cell.levels[rule.factor]] = cell.key
    return {key for found in groups.values() if rule.baseline in found and len(found) > 1 for key in found.values()}


def chosen_levels(plan: Plan, given: list[str]) -> dict[str, list[str]]:
    """Parse ``--levels factor=level[,level]`` (repeatable) against the plan's factors and levels.

    Raises
    ------
    PlanError
        A factor the plan does not have, or a level it does not list: the message names what it has.
    """
    factors = {f.name: [str(level) for level in f.levels] for f in plan.factors}
    chosen: dict[str, list[str]] = {}
    for text in given:
        name, _, levels = text.partition("=")
        if name not in factors or not levels:
            raise PlanError(
                f"--levels {text!r}: give factor=level (the plan's factors: {', '.join(factors) or 'none'})"
            )
        wanted = levels.split(",")
        unknown = [lvl for lvl in wanted if lvl not in factors[name]]
        if unknown:
            raise PlanError(f"--levels {text!r}: {name} has no level {unknown[0]!r} (its levels: {factors[name]})")
        chosen[name] = [*chosen.get(name, []), *wanted]
    return chosen


def _check_cells(path: Path, cells: list[Cell]) -> None:
    """Refuse cells that ask a host for more I/O buffers than :data:`MAX_BUFFERS`, or that share a folder."""
    for cell in cells:
        if (buffers := io_buffer_bytes(cell.options)) > MAX_BUFFERS:
            raise PlanError(
                f"{path}: cell {cell.key}: its largest block x iodepth x numjobs is {buffers / (1 << 30):,.0f} GiB "
                f"of I/O buffers per host, over {MAX_BUFFERS >> 30} GiB (fio allocates them before the first I/O); "
                "lower iodepth, numjobs or the block size"
            )
    keys = [cell.key for cell in cells]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise PlanError(
            f"{path}: two cells would share the folder {twice[0]!r} (levels that differ only in "
            "characters a folder name cannot hold, or a name used twice); rename a level or profile"
        )


def unset_by_hand(plan: Plan, levels: dict[str, list[str]]) -> list[str]:
    """Return the factors no fio option sets (a setting changed by hand) whose levels ``levels`` leaves open.

    A factor benchlib sets through vCenter (``[vsphere] apply``) is not one.
    """
    applied = set(plan.vsphere.apply.values()) if plan.vsphere else set()
    return [
        f.name
        for f in plan.factors
        if not f.options and len(f.levels) > 1 and f.name not in levels and f.name not in applied
    ]
