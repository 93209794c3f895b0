"""The words a plan may put into a fio job file (DESIGN.md contract 9).

A job file is code for fio: one line per option, ``[name]`` starting a job,
``include`` pulling in another file, options that run shell commands or write
files wherever they say. So a plan's option names come from a closed list
(``fio_options.txt``: every option and alias of fio 3.19 to 3.42, pinned and
tested against the installed fio); text that fio would read as more than one
value (control characters such as a newline, ``${...}`` environment
expansion, ``:`` in a path, which fio splits into several files) is refused;
and options that let a job choose what it runs or where it writes are refused
unless the user allows them by name (``benchlib run --allow-option=NAME``).

This module only says what is wrong (``*_problem`` functions return the
reason or None); the plan reader names the file and key around it. Whether a
job writes, and which files it opens, is not decided here but by fio itself:
see :mod:`benchlib.runner.reading`.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

#: Options benchlib sets itself: where the I/O goes, how long it runs, where its logs go.
RESERVED: dict[str, str] = {
    **dict.fromkeys(
        (
            "filename",
            "directory",
            "opendir",
            "filename_format",
            "unique_filename",
            "nrfiles",
            "nr_files",
            "unlink",
            "unlink_each_loop",
            "allow_file_create",
            "file_append",
        ),
        "benchlib chooses the files fio uses ([target] in the plan)",
    ),
    **dict.fromkeys(
        (
            "size",
            "filesize",
            "fill_device",
            "fill_fs",
            "offset",
            "fileoffset",
            "offset_increment",
            "zonemode",
            "zonerange",
            "zonesize",
            "zoneskip",
            "zonecapacity",
        ),
        "benchlib sets the region fio works in ([target] size); zones can reach beyond it",
    ),
    **dict.fromkeys(
        ("runtime", "timeout", "ramp_time"), "benchlib sets how long a cell runs ([run] runtime_s, ramp_time_s)"
    ),
    **dict.fromkeys(
        ("write_bw_log", "write_iops_log", "write_lat_log", "write_hist_log", "per_job_logs", "name"),
        "benchlib names the job and its logs (ingest reads them by those names)",
    ),
}

#: Options that run commands, write files of their own choosing, change the host or switch off fio's own guard.
UNSAFE: dict[str, str] = {
    **dict.fromkeys(("exec_prerun", "exec_postrun"), "it runs a shell command on the host"),
    **dict.fromkeys(("write_iolog", "verify_dump", "verify_state_save"), "it writes a file of its own choosing"),
    **dict.fromkeys(
        ("read_iolog", "read_iolog_chunked", "replay_redirect", "merge_blktrace_file", "verify_state_load"),
        "it makes fio read a file and do I/O to the devices or files that file names",
    ),
    **dict.fromkeys(("cgroup", "cgroup_weight", "cgroup_nodelete"), "it creates and writes control groups on the host"),
    "ioscheduler": "it changes the I/O scheduler of the host's device and leaves it changed",
    "profile": "fio's built-in profiles define their own jobs and devices",
    "allow_mounted_write": "it switches off fio's own refusal to write to a mounted device",
}

#: I/O engines that only read and write the job's file: the ones storage studies use.
ENGINES = frozenset({"libaio", "io_uring", "psync", "sync", "pvsync", "pvsync2", "vsync", "posixaio", "mmap", "null"})

#: options whose number sets how many processes or I/Os fio starts: the most a plan may ask for (a typo
#: of a few zeros would fork a machine to a halt or pin its memory before the first I/O)
BOUNDS = {
    "numjobs": 1024,
    **dict.fromkeys(
        (
            "iodepth",
            "iodepth_batch",
            "iodepth_batch_submit",
            "iodepth_batch_complete",
            "iodepth_batch_complete_min",
            "iodepth_batch_complete_max",
            "iodepth_low",
        ),
        65_536,
    ),
}

#: ``mem``/``iomem`` kinds without a file of their own (``mmaphuge:/path`` would create one).
MEMORY = frozenset({"malloc", "shm", "shmhuge", "mmap", "mmaphuge", "mmapshared"})

#: Options that make a job write although fio's ``--readonly`` check would pass it, unless their
#: value is one of these (``overwrite`` lays files out by writing): anything else counts as writing.
WRITES_UNLESS: dict[str, frozenset[str]] = {"overwrite": frozenset({"0", "false", "no", "off"})}

_OPTIONS_FILE = Path(__file__).with_name("fio_options.txt")


@cache
def fio_options() -> frozenset[str]:
    """Every fio job option name and alias benchlib knows (fio 3.19 to 3.42), from ``fio_options.txt``."""
    lines = _OPTIONS_FILE.read_text(encoding="utf-8").splitlines()
    return frozenset(line.strip() for line in lines if line.strip() and not line.startswith("#"))


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot stand in a job file as one value or name, or None."""
    bad = sorted({c for c in text if ord(c) < 32 or ord(c) == 127})
    if bad:
        return f"it contains a control character ({', '.join(repr(c) for c in bad)}), which would start a new fio line"
    if "${" in text:
        return "it contains ${...}, which fio replaces with an environment variable"
    if text != text.strip():
        return "it starts or ends with a space, which fio drops (what benchlib checked would not be what fio uses)"
    return None


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a job section name (a profile), or None."""
    if not name:
        return "it is empty"
    if any(c in name for c in "[]"):
        return "it contains [ or ], which fio reads as the end or start of a job section"
    if name.lower().startswith("global"):
        return "fio reads a section whose name starts with global as options for every job, not as a job"
    return text_problem(name)


def path_problem(path: str) -> str | None:
    """Why ``path`` cannot be a target path fio uses as one file, or None."""
    problem = text_problem(path)
    if problem:
        return problem
    if ":" in path:
        return (
            "it contains ':', which fio reads as a separator between several files (for a device, "
            "name it /dev/sdX, /dev/loopN or /dev/disk/by-id/..., not /dev/block/MAJ:MIN)"
        )
    if "#" in path or ";" in path:
        return "it contains '#' or ';', where fio's job file reader starts a comment (fio would open another name)"
    if "$" in path:
        return "it contains '$', which fio expands in a job file ($ncpus, $pagesize...)"
    if not path.startswith("/"):
        return "it must be absolute (it is a path on every host)"
    return None


#: System folders where a new file can change how the host behaves (``/etc/nologin``, ``sudoers.d``...).
SYSTEM_FOLDERS = (
    "/etc",
    "/boot",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/usr",
    "/proc",
    "/sys",
    "/dev",
    "/run",
    "/var/lib",
    "/var/spool",
    "/root/.ssh",
)


def file_target_problem(path: str) -> str | None:
    """Why ``path`` cannot be a file target benchlib creates, or None."""
    problem = path_problem(path)
    if problem:
        return problem
    normal = "/" + "/".join(part for part in path.split("/") if part not in ("", "."))
    if ".." in normal.split("/") or any(normal == f or normal.startswith(f + "/") for f in SYSTEM_FOLDERS):
        return "it is in a system folder (or climbs with ..), where a new file can change how the host behaves"
    return None


def option_problem(key: str, value: str, allowed: frozenset[str] = frozenset()) -> str | None:
    """Why ``key = value`` cannot go into a job file, or None.

    ``allowed``: option names the user allowed explicitly (``--allow-option``), which lifts the
    refusal of an :data:`UNSAFE` option and of an engine or memory kind outside the short lists.
    """
    problem = text_problem(key)
    if problem:
        return f"the option name: {problem}"
    if key in RESERVED:
        return f"benchlib sets {key} itself: {RESERVED[key]}"
    if key not in fio_options():
        return "fio has no such option (benchlib knows every option of fio 3.19 to 3.42; check the spelling)"
    if key in UNSAFE and key not in allowed:
        return f"{key} is refused: {UNSAFE[key]}. If you mean it, run with --allow-option={key}"
    problem = text_problem(value)
    if problem:
        return f"the value: {problem}"
    return _value_problem(key, value, allowed)


def _value_problem(key: str, value: str, allowed: frozenset[str]) -> str | None:
    """Why an option's value cannot go into a job file (engine, memory kind, pattern file, bounds), or None."""
    if key == "ioengine" and value not in ENGINES and key not in allowed:
        return (
            f"ioengine {value!r} is not one of {', '.join(sorted(ENGINES))} (engines that only do I/O to the "
            "target); if you mean it, run with --allow-option=ioengine"
        )
    if key in BOUNDS and (not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= BOUNDS[key]):
        return f"{key} is a whole number from 1 to {BOUNDS[key]:,} here"
    if key.endswith("_pattern") and "/" in value and key not in allowed:
        return f"{key} {value!r} names a file, which fio would open and read; give the pattern itself (0x..., 'text')"
    if key in ("mem", "iomem") and value not in MEMORY and key not in allowed:
        return (
            f"{key} {value!r} is not one of {', '.join(sorted(MEMORY))} (a path after ':' would be a file fio creates)"
        )
    return None
