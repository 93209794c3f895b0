"""Helpers the readers share: reading text safely, finding JSON documents, run ids."""

from __future__ import annotations

import codecs
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import orjson

from benchlib.errors import FormatError, quoted

#: Bytes of a file that detection looks at.
SNIFF_BYTES = 64 * 1024


@dataclass(frozen=True)
class SourceText:
    """A file's text with its identity."""

    path: Path
    text: str
    sha256: str


def decode(path: Path, data: bytes, *, partial: bool = False) -> str:
    """Decode fio/vdbench output bytes to text.

    UTF-8 (with or without BOM) is the norm; UTF-16 with a BOM is what a
    Windows PowerShell redirect writes. Anything else is refused with the
    byte offset of the first undecodable byte. ``partial``: ``data`` is the
    start of a file, so a character cut at its end is dropped.
    """
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16")
    nul = data.find(b"\x00", 0, SNIFF_BYTES)
    if nul >= 0:
        raise FormatError(path, f"byte {nul}", "text output, but found a NUL byte: this is a binary file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if partial and exc.start >= len(data) - 3:  # the first bytes of a file: a character cut at the end
            return data[: exc.start].decode("utf-8-sig")
        at = exc.start + (len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0)  # counted after a BOM
        line = data[:at].count(b"\n") + 1
        raise FormatError(
            path,
            f"line {line}, byte {at}",
            "text that is not UTF-8; re-save the file as UTF-8 (fio writes UTF-8)",
            found=f"bytes {data[at : at + 4]!r}",
        ) from None


def read_source(path: str | Path) -> SourceText:
    """Read a whole text file once, returning its text and SHA-256."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise FormatError(path, "file", f"a readable file ({exc.strerror})") from None
    if not data.strip():
        raise FormatError(path, "byte 0", "output of a benchmark tool, but the file is empty")
    return SourceText(path=path, text=decode(path, data), sha256=hashlib.sha256(data).hexdigest())


def may_be_member(head: bytes) -> bool:
    """Whether a file whose first 16 bytes are ``head`` may belong to a vdbench HTML output folder."""
    return head.lstrip().startswith((b"<title>Vdbench", b"<pre>", b":date "))


def sha256_of(path: str | Path) -> str:
    """SHA-256 of a file, streamed."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


@dataclass(frozen=True)
class JsonDocument:
    """A JSON object found in a text file, with the text that came before it."""

    data: dict
    start_line: int
    preamble: str


def find_json_documents(source: SourceText) -> list[JsonDocument]:
    """Every top-level JSON object in ``source`` that starts at the beginning of a line.

    Text before and between documents (warnings, shell prompts, other output
    formats) is kept as each document's ``preamble``. A ``{`` that does not
    begin a complete JSON object raises ``FormatError`` with its line, since a
    truncated fio JSON file is the usual cause.
    """
    text = source.text
    whole = single_document(source)
    if whole is not None:
        return [whole]
    decoder = json.JSONDecoder()
    documents: list[JsonDocument] = []
    position = 0
    start = 0 if text.startswith("{") else _next_object(text, 0)
    line, counted = 1, 0  # lines counted up to ``counted`` once, not again from the top for each document
    while start >= 0:
        line += text.count("\n", counted, start)
        counted = start
        try:
            data, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            err_line = text.count("\n", 0, exc.pos) + 1
            raise FormatError(
                source.path,
                f"line {err_line}",
                f"a complete JSON document starting at line {line} ({exc.msg}); "
                "the file is probably truncated: re-run fio or restore the whole file",
            ) from None
        if isinstance(data, dict):
            documents.append(JsonDocument(data=data, start_line=line, preamble=text[position:start]))
        position = end
        start = _next_object(text, end)
    return documents


def single_document(source: SourceText, text: str | None = None) -> JsonDocument | None:
    """Fast path: a file that is one JSON object (optionally after text) parses with orjson at once.

    Like Python's json, orjson keeps the last of duplicate keys (fio 2.17
    percentiles, fio 3.7 client/server global options). Anything else (several
    documents, text after the JSON, a truncated file) returns None and takes
    the careful path. ``text``: the file's text as rewritten by a caller
    (json+ bins cut out), parsed in place of ``source.text``.
    """
    text = source.text if text is None else text
    start = 0 if text.startswith("{") else _next_object(text, 0)
    if start < 0:
        return None
    try:
        data = orjson.loads(text[start:])
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    return JsonDocument(data=data, start_line=text.count("\n", 0, start) + 1, preamble=text[:start])


def _next_object(text: str, position: int) -> int:
    """Offset of the next ``{`` that begins a line at or after ``position``, or -1."""
    found = text.find("\n{", position)
    return found + 1 if found >= 0 else -1


_HOST_PREFIX = re.compile(r"^([A-Za-z0-9][\w.\-]*): ")


def strip_host_prefix(source: SourceText) -> tuple[str | None, SourceText]:
    """Undo the ``host: `` prefix that pdsh, clush or ansible put before every line of remote output.

    When at least 90% of the non-empty lines start with the same ``name: ``,
    returns that name and the text without it; otherwise ``(None, source)``.
    """
    lines = [line for line in source.text.splitlines() if line.strip()]
    first = _HOST_PREFIX.match(lines[0]) if lines else None
    if first is None:
        return None, source
    prefix = first.group(0)
    if sum(line.startswith(prefix) for line in lines) < 0.9 * len(lines):
        return None, source
    text = "\n".join(line[len(prefix) :] if line.startswith(prefix) else line for line in source.text.splitlines())
    return first.group(1), SourceText(path=source.path, text=text, sha256=source.sha256)


def run_id(sha256: str, document_index: int, client: str | None) -> str:
    """Return the run key: source hash, document number in the file, client (``*`` for aggregates)."""
    return f"{sha256[:16]}-{document_index}-{client if client is not None else '*'}"


def complete_lines(path: Path) -> int | None:
    """Return how many whole lines a text file holds when its last line was cut off, else None.

    A line-oriented tool (fio's logs, esxtop) ends every line with a newline: a file that does not
    end with one was cut off (a copy or a capture stopped mid-line), and its last line is not a value.
    """
    with open(path, "rb") as handle:
        handle.seek(0, 2)
        if handle.tell() == 0:
            return None
        handle.seek(-1, 2)
        if handle.read(1) == b"\n":
            return None
        handle.seek(0)
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))


def ragged_rows(path: Path, what: str, exc: Exception) -> FormatError:
    """Return the refusal of a CSV file whose rows do not all have its first row's number of values.

    Called where polars failed to read the file (``exc``): the first row with another count is found and
    quoted (a pass over the file, on this error path only); without one, polars' own first line is said.
    """
    import csv

    with path.open(encoding="utf-8", errors="replace", newline="") as handle:
        rows = csv.reader(handle)
        first = next(rows, [])
        for line, row in enumerate(rows, start=2):
            if row and len(row) != len(first):
                return FormatError(
                    path,
                    f"line {line}",
                    f"{what}, each with the {len(first)} values of line 1",
                    found=f"{len(row)}: {quoted(','.join(row))}",
                )
    return FormatError(path, "rows", f"{what} ({str(exc).splitlines()[0][:200]})")
