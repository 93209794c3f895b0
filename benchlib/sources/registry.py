"""The registry of readers: format name -> reader, and detection by content (see ``benchlib.sources``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from benchlib.errors import FormatError
from benchlib.schema import Tables
from benchlib.sources._common import SNIFF_BYTES, decode
from benchlib.sources.esxtop import looks_like_esxtop, read_esxtop
from benchlib.sources.fio_json import read_fio_json
from benchlib.sources.fio_json_rows import looks_like_fio_json
from benchlib.sources.fio_log import looks_like_fio_log, read_fio_log
from benchlib.sources.fio_normal import looks_like_fio_normal, read_fio_normal
from benchlib.sources.fio_terse import looks_like_fio_terse, read_fio_terse
from benchlib.sources.hcibench import looks_like_hcibench_summary, read_hcibench_summary
from benchlib.sources.published import looks_like_published, read_published
from benchlib.sources.vdbench import (
    looks_like_vdbench_console,
    looks_like_vdbench_flatfile,
    looks_like_vdbench_report,
    read_vdbench_console,
    read_vdbench_flatfile,
)
from benchlib.sources.vdbench_folder import read_vdbench_output, read_vdbench_parmfile
from benchlib.sources.vdbench_parm import looks_like_parmfile

Reader = Callable[[Path], Tables]

#: Format name -> reader. The order is the preference when a file holds several
#: forms of the same run (``--output-format=json+,normal,terse``): the richest wins.
READERS: dict[str, Reader] = {
    "fio-json": read_fio_json,
    "fio-normal": read_fio_normal,
    "fio-terse": read_fio_terse,
    "fio-log": read_fio_log,
    "esxtop": read_esxtop,
    "vdbench-flatfile": read_vdbench_flatfile,
    "vdbench-output": read_vdbench_output,
    "vdbench-console": read_vdbench_console,
    "vdbench-parmfile": read_vdbench_parmfile,
    "hcibench-summary": read_hcibench_summary,
    "published-table": read_published,
}

_SNIFFERS: dict[str, Callable[[str], bool]] = {
    "fio-json": looks_like_fio_json,
    "fio-normal": looks_like_fio_normal,
    "fio-terse": looks_like_fio_terse,
    "fio-log": looks_like_fio_log,
    "esxtop": looks_like_esxtop,
    "vdbench-flatfile": looks_like_vdbench_flatfile,
    "vdbench-output": looks_like_vdbench_report,
    "vdbench-console": looks_like_vdbench_console,
    "vdbench-parmfile": looks_like_parmfile,
    "hcibench-summary": looks_like_hcibench_summary,
    "published-table": looks_like_published,
}


def _head(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            data = handle.read(SNIFF_BYTES)
    except OSError as exc:
        raise FormatError(path, "file", f"a readable file ({exc.strerror})") from None
    return _decoded_head(path, data, partial=len(data) == SNIFF_BYTES)


def _decoded_head(path: Path, data: bytes, partial: bool) -> str:
    if not data.strip():
        raise FormatError(path, "byte 0", "output of a benchmark tool, but the file is empty")
    return decode(path, data, partial=partial)


def detect_head(path: str | Path, head: bytes, partial: bool) -> str:
    """Return the format of a file whose first ``SNIFF_BYTES`` are ``head``, read already.

    ``partial``: the file goes on.
    """
    return detect_text(path, _decoded_head(Path(path), head, partial))


def detect_all(path: str | Path) -> list[str]:
    """Every format whose signature appears in the first 64 KiB of ``path``, richest first."""
    head = _head(Path(path))
    return [name for name, sniff in _SNIFFERS.items() if sniff(head)]


def detect(path: str | Path) -> str:
    """Return the format to read ``path`` with, from its content.

    Raises
    ------
    FormatError
        When no known format's signature is found.

    """
    return detect_text(path, _head(Path(path)))


def detect_text(path: str | Path, head: str) -> str:
    """Return the format of a file whose first 64 KiB (decoded) are ``head`` (see :func:`detect`)."""
    if not head or head.isspace():
        raise FormatError(path, "byte 0", "output of a benchmark tool, but the file is empty")
    found = next((name for name, sniff in _SNIFFERS.items() if sniff(head)), None)
    if found is None:
        raise FormatError(
            path,
            "first 64 KiB",
            "output of a supported tool (fio JSON/json+, normal, terse, a fio log, esxtop batch CSV, a vdbench output "
            "folder's files or vdbench console text, HCIBench's -res.txt); "
            f"supported formats: {', '.join(READERS)}",
        )
    return found


def read(path: str | Path, format: str | None = None) -> Tables:
    """Read ``path`` with the reader of ``format`` (detected from content when not given)."""
    path = Path(path)
    name = format or detect(path)
    if name not in READERS:
        raise FormatError(path, "format", f"one of {', '.join(READERS)}, not {name!r}")
    return READERS[name](path)


__all__ = ["READERS", "detect", "detect_all", "detect_head", "detect_text", "read"]
