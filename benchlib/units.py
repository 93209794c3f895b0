"""Parse the unit-bearing strings fio prints, once, at the edge.

Every function returns a value in base units: bytes, bytes per second,
nanoseconds, or a plain count.
"""

from __future__ import annotations

import re

_IEC = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4, "p": 1024**5}
_SI = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4, "p": 1000**5}

_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgtp]?)(i?)(b?)\s*$", re.IGNORECASE)
_TIME_FACTORS_NS = {
    "ns": 1,
    "nsec": 1,
    "us": 1_000,
    "usec": 1_000,
    "ms": 1_000_000,
    "msec": 1_000_000,
    "s": 1_000_000_000,
    "sec": 1_000_000_000,
    "m": 60_000_000_000,
    "min": 60_000_000_000,
    "h": 3_600_000_000_000,
}


def parse_job_size(text: str) -> int | None:
    """Parse a size as written in a fio job option (``bs=4k``) into bytes.

    fio's job options use powers of 1024 for ``k``/``m``/``g`` unless
    ``kb_base=1000`` is set, and accept ``KiB`` as well; a bare number is bytes.
    A block-size range or split (``4k-64k``, ``4k/50:64k/50``) or an empty
    string gives ``None``: such a job has no single block size.
    """
    text = text.strip()
    if "," in text:  # separate read,write,trim sizes: report the read one
        text = text.split(",")[0]
    match = _SIZE_RE.match(text)
    if not match:
        return None
    number, prefix, _, _ = match.groups()
    return int(round(float(number) * _IEC[prefix.lower()]))


def block_size_of(text: str) -> int | None:
    """Return a job's block size in bytes (:func:`parse_job_size`), None for a range or split of sizes.

    Raises ``ValueError`` naming the text when it is neither a size nor a range (``4k-64k``) or split
    (``4k/50:64k/50``) of sizes: no fio accepts it, so the file was changed after fio wrote it.
    """
    size = parse_job_size(text)
    if size is not None:
        return size
    parts = [p for p in re.split(r"[-:/,]", text.strip()) if p.strip()]
    if parts and all(parse_job_size(p) is not None or p.strip().isdigit() for p in parts) and len(parts) > 1:
        return None
    raise ValueError(f"bs={text!r} is not a size, a range or a split of sizes fio accepts (4k, 4k-64k, 4k/50:64k/50)")


def parse_binary_size(text: str) -> float:
    """Parse a size printed by fio's normal output (``183MiB``, ``29854MB``, ``1473.8KB``).

    fio's normal report always means powers of 1024 by ``KiB``/``MiB`` (3.x)
    and by ``KB``/``MB`` (2.x before 2.17, whose ``KB`` is a KiB).
    Returns bytes. Raises ``ValueError`` when the text is not a size.
    """
    match = _SIZE_RE.match(text.replace("B/s", "B").replace("/s", ""))
    if not match:
        raise ValueError(f"not a size: {text!r}")
    number, prefix, _, _ = match.groups()
    return float(number) * _IEC[prefix.lower()]


def parse_decimal_count(text: str) -> float:
    """Parse a count fio prints with an SI suffix (``IOPS=23.3k``, ``max=23184k``).

    fio's ``num2str`` uses powers of 1000 for plain counts and for the
    values on latency lines; ``K`` and ``k`` mean the same.
    """
    match = _SIZE_RE.match(text)
    if not match or match.group(3) or match.group(4):
        raise ValueError(f"not a count: {text!r}")
    number, prefix, _, _ = match.groups()
    return float(number) * _SI[prefix.lower()]


def parse_duration_ns(text: str, default_unit: str = "s") -> int | None:
    """Parse a fio duration (``runtime=300``, ``ramp_time=5s``, ``1m``) into nanoseconds.

    A bare number is in ``default_unit`` (fio's default for ``runtime`` is seconds).
    Returns ``None`` for an empty or unparseable value.
    """
    match = re.match(r"^\s*([0-9]*\.?[0-9]+)\s*([a-z]*)\s*$", text.strip().lower())
    if not match:
        return None
    number, unit = match.groups()
    factor = _TIME_FACTORS_NS.get(unit or default_unit)
    if factor is None:
        return None
    return int(round(float(number) * factor))


def latency_factor_ns(unit: str) -> int:
    """Nanoseconds per unit for fio's latency unit words (``nsec``, ``usec``, ``msec``)."""
    try:
        return _TIME_FACTORS_NS[unit.strip().lower()]
    except KeyError:
        raise ValueError(f"not a latency unit: {unit!r}") from None
