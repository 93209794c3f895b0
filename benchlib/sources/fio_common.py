"""fio facts shared by the fio readers: job options and the latency bucket layout."""

from __future__ import annotations

import re
from typing import Any

from benchlib.units import block_size_of, parse_duration_ns, parse_job_size

#: fio's latency histogram layout (stat.h): 64 buckets per power-of-two group.
PLAT_BITS = 6
PLAT_VAL = 1 << PLAT_BITS
#: Number of groups: 29 since fio 3.0 (ns histograms, 1856 bins), 19 before (usec, 1216 bins).
PLAT_GROUPS_V3 = 29
PLAT_GROUPS_V2 = 19

_ALIASES = {
    "blocksize": "bs",
    "readwrite": "rw",
    "timeout": "runtime",
    "io_size": "io_limit",
}
_MIXED = {"rw", "readwrite", "randrw", "trimwrite", "randtrimwrite"}
_FALSE = {"0", "false", "no", "off"}


def read_share(rw_mode: str | None) -> int | None:
    """Return the percentage of reads a job of one direction issues (100 or 0); None for a mix or an unknown mode.

    What fio's ``rwmixread`` means for a job that does not mix: its own output never says it, so each reader
    says it from ``rw`` alike (a study of json+ and normal output of one job is one configuration, not two).
    """
    if rw_mode in {"read", "randread"}:
        return 100
    return 0 if rw_mode in {"write", "randwrite", "trim", "randtrim"} else None


def plat_idx_to_val(index: int) -> float:
    """Value of latency bucket ``index`` as fio reports it (the bucket's midpoint).

    Buckets below ``2 * PLAT_VAL`` are exact; above, group ``g`` covers
    ``[2**(g+5), 2**(g+6))`` in ``PLAT_VAL`` equal steps, and fio reports the
    middle of each step (json+ ``bins`` keys are these values).
    """
    if index < (PLAT_VAL << 1):
        return float(index)
    error_bits = (index >> PLAT_BITS) - 1
    base = 1 << (error_bits + PLAT_BITS)
    k = index % PLAT_VAL
    return base + (k + 0.5) * (1 << error_bits)


def plat_val_to_idx(value: float) -> int:
    """Return the bucket index whose range holds ``value`` (inverse of :func:`plat_idx_to_val`)."""
    value = int(value)
    if value < (PLAT_VAL << 1):
        return value
    msb = value.bit_length() - 1
    error_bits = msb - PLAT_BITS
    base = (error_bits + 1) << PLAT_BITS
    offset = (value >> error_bits) & (PLAT_VAL - 1)
    return base + offset


def normalise_options(options: dict[str, Any]) -> dict[str, str]:
    """Lower-case option names, resolve fio's aliases, and stringify values."""
    out: dict[str, str] = {}
    for key, value in options.items():
        name = _ALIASES.get(key.lower(), key.lower())
        out[name] = "" if value is None else str(value)
    return out


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(float(text.strip()))
    except ValueError:
        return None


def _flag(options: dict[str, str], name: str) -> bool | None:
    if name not in options:
        return None
    return options[name].strip().lower() not in _FALSE


def job_columns(options: dict[str, str], *, apply_defaults: bool) -> dict[str, Any]:
    """Return the job-parameter columns of ``results`` from fio job options.

    Parameters
    ----------
    options
        Global options merged with the job's own (job options win), normalised.
    apply_defaults
        Fill fio's documented defaults (rw=read, bs=4k, iodepth=1, numjobs=1,
        direct=0, rwmixread=50) for options not given. True when the file
        states the job's options; False when it cannot tell (fio 2.1 JSON).

    """
    rw = options.get("rw", "read" if apply_defaults else None)
    rw_mode = rw.split(":")[0] if rw else None
    mix_read = _int(options.get("rwmixread"))
    if mix_read is None and "rwmixwrite" in options and _int(options["rwmixwrite"]) is not None:
        mix_read = 100 - int(_int(options["rwmixwrite"]) or 0)
    if mix_read is None and rw_mode in _MIXED and apply_defaults:
        mix_read = 50
    if rw_mode is not None and rw_mode not in _MIXED:
        mix_read = read_share(rw_mode)
    direct = _flag(options, "direct")
    if direct is None and "buffered" in options:
        buffered = _flag(options, "buffered")
        direct = None if buffered is None else not buffered
    default = (lambda v: v) if apply_defaults else (lambda v: None)  # noqa: E731
    block = options.get("bs")
    return {
        "rw": rw_mode,
        "rwmixread_pct": None if mix_read is None else float(mix_read),
        "block_size_bytes": block_size_of(block) if block is not None else default(4096),
        "iodepth": _int(options.get("iodepth")) if "iodepth" in options else default(1),
        "numjobs": _int(options.get("numjobs")) if "numjobs" in options else default(1),
        "ioengine": options.get("ioengine"),
        "direct": direct if direct is not None else default(False),
        "runtime_setting_ns": parse_duration_ns(options["runtime"]) if options.get("runtime") else None,
        "ramp_time_ns": parse_duration_ns(options["ramp_time"]) if options.get("ramp_time") else None,
        "time_based": _flag(options, "time_based") if "time_based" in options else default(False),
        "rate_limited": rate_limited(options) if any(k in options for k in _RATES) else default(False),
    }


#: fio options that cap a job's rate (``rate_min`` and ``rate_iops_min`` are floors, not caps).
_RATES = ("rate", "rate_iops")


def rate_limited(options: dict[str, str]) -> bool:
    """Tell whether ``rate`` or ``rate_iops`` caps the job (any direction's value above 0, e.g. ``500,0``)."""
    for key in _RATES:
        for part in str(options.get(key, "")).split(","):
            size = parse_job_size(part) if part.strip() else None
            if size:
                return True
    return False


def group_reporting(options: dict[str, str]) -> bool:
    """Whether ``group_reporting`` is on (fio treats a bare ``group_reporting`` as on)."""
    return bool(_flag(options, "group_reporting"))


#: lines fio writes when a run fails: its own error lines ("fio: pid=0, err=13/...", "fio: job 'x' dropped"),
#: option errors ("fio: unrecognized option '--x'", "Bad option <x>") and job file errors
_FIO_ERROR = re.compile(
    r"^(?:\S*fio:\s.*(?:err=|error|unrecognized|invalid|dropped|failed|bad|not|no such).*"
    r"|Bad option\b.*|.*\bjob dropped\b.*|error:\s.*)$",
    re.IGNORECASE | re.MULTILINE,
)


def fio_error_lines(text: str, limit: int = 3) -> list[str]:
    """Return the first lines of ``text`` that are fio's own error messages (a failed run), as written."""
    return list(dict.fromkeys(m.group(0).strip()[:300] for m in _FIO_ERROR.finditer(text)))[:limit]
