"""fio JSON files in batches, as ingest's worker processes read them: text to packed rows, without polars.

The fio JSON record of the format registry (:mod:`benchlib.sources.registry`)
names :func:`extract_json_batch` as the work its worker processes do. A worker
imports only this module and what it needs (orjson, benchlib's C part, the fio
JSON extractor), which takes a few hundredths of a second: when workers
imported polars and every reader, starting one took 0.29 s of the 0.7 s it took
to ingest 5,000 json+ files on two cores. On a first ingest the workers also
hash the files, so the main process only lists them and builds the frames from
the packed rows (:func:`benchlib.sources.fio_json.frames_of`).
"""

from __future__ import annotations

import gc
import hashlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson

from benchlib.errors import FormatError, file_failure
from benchlib.sources._common import SNIFF_BYTES, SourceText, decode, may_be_member
from benchlib.sources.fio_json_rows import RowPacker, extract_fio_json, looks_like_fio_json_bytes

#: Per file: ``(sha256, kind, error or None, tool version or None)``; see :func:`extract_json_batch`.
Outcome = tuple[str, str, str | None, str | None]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cycle collector while a batch's parsed JSON lives.

    Parsed JSON makes millions of small acyclic objects; the cycle collector's passes
    over them tripled a batch's time without freeing anything.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


#: A file the main process did not hash is held whole up to this size; a larger one is hashed in chunks
#: and read whole only if it is fio JSON (a 1 GB log must not sit in memory to be hashed).
WHOLE_BYTES = 32 * 1024 * 1024


def _read(path: Path, known: str | None) -> tuple[bytes, str, bool]:
    """Return a file's bytes and SHA-256 (``known``, or taken here).

    Also whether the bytes are only its first ``SNIFF_BYTES``. os calls: half the cost of ``open()`` for a small file.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            if size <= WHOLE_BYTES:
                data = os.read(fd, size + 1)  # a file that grew meanwhile fails to parse, so it is quarantined
                return data, known or hashlib.sha256(data).hexdigest(), False
            if known is not None:  # fio JSON, as the main process found: read it whole from here
                return b"".join(iter(lambda: os.read(fd, 1 << 20), b"")), known, False
            digest, head = hashlib.sha256(), b""
            while chunk := os.read(fd, 1 << 20):
                head = head or chunk[:SNIFF_BYTES]
                digest.update(chunk)
            return head, digest.hexdigest(), True
        finally:
            os.close(fd)
    except OSError as exc:
        raise FormatError(path, "file", f"a readable file ({exc.strerror})") from None


def extract_json_batch(
    files: list[tuple[Path, str, str | None]], spool: Path | None = None
) -> tuple[dict[str, bytes], list[Outcome]] | str:
    """Extract many fio JSON files ``(path, path in the study, sha256)``: their rows packed, and per file what happened.

    A file given without its SHA-256 was only listed by the main process: it
    is hashed here, and only what is plainly fio JSON (by its first bytes, as
    detection would find it) is extracted. Kinds: ``"json"`` (extracted),
    ``"error"`` (unreadable or broken: the message), ``"empty"`` (no bytes),
    ``"other"`` (another format: the main process detects it), ``"held"``
    (perhaps a file of a vdbench output folder, read folder by folder),
    ``"same"`` (the same bytes as an earlier file of the batch: not extracted).

    With ``spool`` (a folder), the result is written to a file there and its
    name returned (:func:`read_spooled` reads it): a worker that handed
    megabytes back through its pipe waited, idle, until the main process,
    busy, took them.
    """
    packer = RowPacker()
    seen: set[str] = set()
    with gc_paused():
        outcomes = [_extract_one(packer, seen, path, sha) for path, _, sha in files]
        packed = packer.packed()
    if spool is None:
        return packed, outcomes
    header = orjson.dumps({"outcomes": outcomes, "sizes": [[name, len(data)] for name, data in packed.items()]})
    fd, name = tempfile.mkstemp(dir=spool, suffix=".batch")
    with os.fdopen(fd, "wb") as handle:
        handle.write(header + b"\n")
        for data in packed.values():
            handle.write(data)
    return name


def read_spooled(name: str) -> tuple[dict[str, bytes], list[Outcome]]:
    """Return a result :func:`extract_json_batch` wrote to a file (which is removed)."""
    with open(name, "rb") as handle:
        header = orjson.loads(handle.readline())
        packed = {key: handle.read(size) for key, size in header["sizes"]}
    os.unlink(name)
    return packed, [tuple(outcome) for outcome in header["outcomes"]]  # type: ignore[misc]


def _extract_one(packer: RowPacker, seen: set[str], path: Path, known: str | None) -> Outcome:
    sha = known or ""  # "": not read, so not hashed
    try:
        data, sha, head_only = _read(path, known)
        if known is None:
            if not data:
                return sha, "empty", None, None
            if sha in seen:
                return sha, "same", None, None
            seen.add(sha)
            if may_be_member(data[:16]):
                return sha, "held", None, None
            if not looks_like_fio_json_bytes(data):
                return sha, "other", None, None
            if head_only:
                data = path.read_bytes()
        # it holds '"fio version"' (as detection found, here or in the main process): not empty
        rows = extract_fio_json(path, source=SourceText(path=path, text=decode(path, data), sha256=sha))
        packer.add(path, rows)
    except Exception as exc:  # the file's failure is its quarantine row; the machine's stops the ingest
        reason = file_failure(exc)
        if reason is None:
            raise
        return sha, "error", reason, None
    return sha, "json", None, rows["runs"][0]["tool_version"]  # type: ignore[index]
