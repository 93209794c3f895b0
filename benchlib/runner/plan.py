"""A run plan: what to run, where, on which target, over which matrix, how often.

A plan is a TOML file (see ``pipelines/`` and ``data/raw/loopback-fio/plan.toml``)::

    [study]
    name = "loopback-fio"
    title = "Four fio servers on one disk"

    [run]
    runtime_s = 3            # per cell, after ramp_time_s
    ramp_time_s = 1
    repetitions = 3
    seed = 20261122          # order of cells: shuffled per repetition with this seed
    output = "data/raw/loopback-fio"   # relative to the plan file

    [target]
    file = "/var/tmp/benchlib/{host}.dat"   # created by benchlib; {host}: one file per host
    size = "256MiB"
    # device = "/dev/sdb"                    # needs --destroy-data=/dev/sdb for writes

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

Options are layered: benchlib's defaults, then the profile's, then the sweep
value, then the matrix levels (a matrix factor that sets ``bs`` overrides the
profile's ``bs``; the dry run shows the final options of every cell).
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from pathlib import Path

from benchlib.errors import BenchlibError
from benchlib.schema import RUNS
from benchlib.tomlfile import read_toml
from benchlib.units import parse_job_size


class PlanError(BenchlibError):
    """A plan file is missing, not TOML, or declares something benchlib cannot run."""


# The write-up's profile set (BRIEF.md, study 1). Where the write-up does not say
# (queue depth of the fixed profiles, the write-mix step) these are benchlib's choices.
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
        "sweep": {"factor": "write_pct", "option": "rwmixwrite", "levels": [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100]},
    },
}

# Options every cell gets unless the plan overrides them.
BASE_OPTIONS: dict[str, str | int] = {
    "ioengine": "libaio",
    "direct": 1,
    "time_based": 1,
    "group_reporting": 1,
    "randrepeat": 0,
    "log_avg_msec": 1000,
    "write_bw_log": "cell",
    "write_iops_log": "cell",
    "write_lat_log": "cell",
}

# Options a plan may not set: benchlib owns where data goes and how long cells run.
_RESERVED = {"filename", "directory", "size", "runtime", "ramp_time", "write_bw_log", "write_iops_log",
             "write_lat_log", "output", "output-format", "filename_format", "opendir"}
_WRITES = ("write", "randwrite", "trim", "randtrim", "trimwrite")
_MIXED = ("rw", "readwrite", "randrw")


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

    @property
    def writes(self) -> bool:
        """Whether fio writes to the target in this cell."""
        rw = self.options.get("rw", "read")
        if rw in _MIXED:
            return self.options.get("rwmixwrite") != "0" and self.options.get("rwmixread") != "100"
        return rw in _WRITES


@dataclass(frozen=True)
class Target:
    """Where fio does its I/O on every host: a file benchlib creates, or a named block device."""

    file: str | None
    device: str | None
    size_bytes: int

    def path_for(self, host: str) -> str:
        """The target path on ``host`` (``{host}`` in a file path becomes the host name)."""
        path = self.file if self.file is not None else self.device
        assert path is not None
        return path.replace("{host}", _safe(host))


@dataclass(frozen=True)
class Plan:
    """A parsed plan file."""

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

    def order(self) -> list[tuple[int, Cell]]:
        """``(repetition, cell)`` in run order: every cell once per repetition, shuffled per repetition."""
        rng = random.Random(self.seed)
        cells = self.cells()
        ordered = []
        for repetition in range(1, self.repetitions + 1):
            shuffled = list(cells)
            rng.shuffle(shuffled)
            ordered.extend((repetition, c) for c in shuffled)
        return ordered

    def study_factors(self) -> dict[str, list[str]]:
        """The factors the recorded study declares: profile, sweep factors, then matrix factors."""
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


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _options(path: Path, where: str, table: object) -> dict[str, str]:
    if not isinstance(table, dict):
        raise PlanError(f"{path}: {where} must be a table of fio options such as {{ rw = \"randread\", bs = \"4k\" }}")
    reserved = sorted(set(table) & _RESERVED)
    if reserved:
        raise PlanError(f"{path}: {where} sets {', '.join(reserved)}; benchlib sets these itself "
                        "(use [target] for where, [run] for how long)")
    return {str(k): _text(v) for k, v in table.items()}


def _factor(path: Path, name: str, table: object) -> Factor:
    if name in RUNS or name in ("profile", "repetition"):
        raise PlanError(f"{path}: [matrix.{name}]: {name!r} is a column benchlib already has; rename the factor")
    if not isinstance(table, dict) or not table.get("levels"):
        raise PlanError(f"{path}: [matrix.{name}] needs levels = [...]")
    levels = tuple(_text(v) for v in table["levels"])
    if len(set(levels)) != len(levels):
        raise PlanError(f"{path}: [matrix.{name}] lists a level twice: {list(levels)}")
    options: dict[str, dict[str, str]] = {}
    if "option" in table:
        option = str(table["option"])
        _options(path, f"[matrix.{name}] option", {option: ""})
        options = {level: {option: level} for level in levels}
    for level, opts in table.get("options", {}).items():
        if str(level) not in levels:
            raise PlanError(f"{path}: [matrix.{name}] options.{level}: {level!r} is not one of the levels {list(levels)}")
        options.setdefault(str(level), {}).update(_options(path, f"[matrix.{name}] options.{level}", opts))
    return Factor(name, levels, options)


def _profile(path: Path, index: int, entry: object, factors: dict[str, Factor]) -> Profile:
    where = f"[[profiles]] entry {index + 1}"
    if not isinstance(entry, dict):
        raise PlanError(f"{path}: {where} must be a table")
    if "use" in entry:
        base = PROFILES.get(str(entry["use"]))
        if base is None:
            raise PlanError(f"{path}: {where}: no built-in profile {entry['use']!r}; built-ins: {', '.join(PROFILES)}")
        name = str(entry.get("name", entry["use"]))
        options = _options(path, where, base["options"] | entry.get("options", {}))
        sweep = dict(base.get("sweep", {})) | entry.get("sweep", {})
    elif "name" in entry and "options" in entry:
        name = str(entry["name"])
        options = _options(path, f"{where} ({name}) options", entry["options"])
        sweep = entry.get("sweep", {})
    else:
        raise PlanError(f"{path}: {where} needs use = \"<built-in>\" or name = ... with options = {{...}}")
    if sweep and not {"factor", "option", "levels"} <= set(sweep):
        raise PlanError(f"{path}: {where} ({name}) sweep needs factor, option and levels")
    hold = {str(k): _text(v) for k, v in entry.get("hold", {}).items()}
    for factor, level in hold.items():
        if factor not in factors:
            raise PlanError(f"{path}: {where} ({name}) holds {factor!r}, which [matrix] does not declare "
                            f"(declared: {', '.join(factors) or 'none'})")
        if level not in factors[factor].levels:
            raise PlanError(f"{path}: {where} ({name}) holds {factor} = {level!r}, not one of {list(factors[factor].levels)}")
    if sweep and (sweep["factor"] in factors or sweep["factor"] in RUNS):
        raise PlanError(f"{path}: {where} ({name}) sweep factor {sweep['factor']!r} clashes with a matrix factor or column")
    return Profile(
        name=name,
        options=options,
        sweep_factor=str(sweep["factor"]) if sweep else None,
        sweep_option=str(sweep["option"]) if sweep else None,
        sweep_levels=tuple(_text(v) for v in sweep.get("levels", ())) if sweep else (),
        hold=hold,
    )


def _positive_int(path: Path, table: dict, key: str, default: int, minimum: int = 1, section: str = "run") -> int:
    value = table.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise PlanError(f"{path}: [{section}] {key} must be a whole number >= {minimum}, not {value!r}")
    return value


def _target(path: Path, table: dict) -> Target:
    file, device = table.get("file"), table.get("device")
    if (file is None) == (device is None):
        raise PlanError(f"{path}: [target] needs exactly one of file = \"/path/{{host}}.dat\" or device = \"/dev/...\"")
    size = parse_job_size(str(table.get("size", ""))) if "size" in table else None
    if not size:
        raise PlanError(f"{path}: [target] needs size = \"256MiB\" (the region fio works in)")
    for value in (file, device):
        if value is not None and not str(value).startswith("/"):
            raise PlanError(f"{path}: [target] path {value!r} must be absolute (it is a path on every host)")
    return Target(file=str(file) if file is not None else None, device=str(device) if device else None, size_bytes=size)


def _facts_command(path: Path, hosts: dict) -> str | None:
    unknown = sorted(set(hosts) - {"servers", "port", "facts_command"})
    if unknown:
        raise PlanError(f"{path}: [hosts] has unknown keys {unknown} (allowed: servers, port, facts_command)")
    command = hosts.get("facts_command")
    if command is None:
        return None
    if not isinstance(command, str) or "{host}" not in command:
        raise PlanError(f"{path}: [hosts] facts_command must be a command with {{host}} in it, "
                        "e.g. \"ssh -o BatchMode=yes {host} sh -s -- {target}\"")
    return command


def load_plan(path: str | Path) -> Plan:
    """Read and check a plan file.

    Raises
    ------
    PlanError
        When the file is missing, not TOML, or inconsistent; the message says where and what to do.
    """
    path = Path(path)
    if not path.is_file():
        raise PlanError(f"{path}: no such plan file; give a plan such as data/raw/loopback-fio/plan.toml")
    data = read_toml(path, PlanError)
    unknown = sorted(set(data) - {"study", "run", "target", "hosts", "matrix", "profiles", "options"})
    if unknown:
        raise PlanError(f"{path}: unknown section(s) {', '.join(unknown)}; "
                        "a plan has study, run, target, hosts, matrix, profiles and options")
    study, run = data.get("study", {}), data.get("run", {})
    if "target" not in data:
        raise PlanError(f"{path}: no [target]; say where fio may do its I/O (file = ... or device = ...)")
    factors = {name: _factor(path, name, table) for name, table in data.get("matrix", {}).items()}
    if not data.get("profiles"):
        raise PlanError(f"{path}: no [[profiles]]; add at least one, e.g. [[profiles]] use = \"randread-4k\"")
    profiles = tuple(_profile(path, i, e, factors) for i, e in enumerate(data["profiles"]))
    names = [p.name for p in profiles]
    if len(set(names)) != len(names):
        raise PlanError(f"{path}: two profiles share a name ({names}); give one of them name = \"...\"")
    hosts = data.get("hosts", {})
    servers = tuple(str(s) for s in hosts.get("servers", ()))
    if len(set(servers)) != len(servers):
        raise PlanError(f"{path}: [hosts] servers lists a host twice: {list(servers)}")
    output = path.parent / str(run.get("output", "."))
    return Plan(
        path=path,
        name=str(study.get("name", output.resolve().name)),
        title=str(study.get("title", "")),
        citation=str(study.get("citation", "")),
        output=output,
        runtime_s=_positive_int(path, run, "runtime_s", 60),
        ramp_time_s=_positive_int(path, run, "ramp_time_s", 0, minimum=0),
        repetitions=_positive_int(path, run, "repetitions", 3),
        seed=_positive_int(path, run, "seed", 0, minimum=0),
        target=_target(path, data["target"]),
        servers=servers,
        port=_positive_int(path, hosts, "port", 8765, section="hosts"),
        facts_command=_facts_command(path, hosts),
        factors=tuple(factors.values()),
        profiles=profiles,
        base_options={k: _text(v) for k, v in BASE_OPTIONS.items()} | _options(path, "[options]", data.get("options", {})),
    )
