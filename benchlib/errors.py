"""Exceptions that end in one clear message for the user."""

from __future__ import annotations

import errno
from pathlib import Path


class BenchlibError(Exception):
    """Base class of every error benchlib reports to a user without a traceback."""


class FormatError(BenchlibError):
    """A file is not in the format a reader expects, or is broken.

    Parameters
    ----------
    path
        The file that could not be read.
    where
        The place in the file: ``"line 12"``, ``"key jobs[0].read"``, ``"byte 0"``.
    expected
        What the reader expected to find there, and what to do about it.
    found
        What it found instead, quoted (:func:`quoted`): the reason then names its evidence. Kept in
        ``expected`` (``...; found 'x'``), which is what ingest and ``inspect`` print.

    """

    def __init__(self, path: str | Path, where: str, expected: str, *, found: str | None = None) -> None:
        self.path = str(path)
        self.where = where
        self.expected = expected if found is None else f"{expected}; found {found}"
        super().__init__(f"{self.path}: {where}: {self.expected}")


def quoted(text: object, limit: int = 60) -> str:
    """Return ``text`` as a refusal quotes it: its first ``limit`` characters in quotes, '...' where cut."""
    text = str(text)
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


class ImpossibleValue(BenchlibError):
    """A file's figures break a rule no real measurement can: a percentile below a lower one, a mean past its max.

    The file is quarantined with the rule, the place and the values (:mod:`benchlib.schema`).
    """

    def __init__(self, where: str, found: str) -> None:
        self.where, self.found = where, found
        super().__init__(f"{where}: {found}")


class StudyError(BenchlibError):
    """A study folder or its ``study.toml`` is missing or inconsistent."""


#: errno values that are the machine's, not a file's: an ingest stops with one message instead.
MACHINE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.ENOMEM, errno.EMFILE, errno.ENFILE})


def file_failure(exc: BaseException) -> str | None:
    """Return why one file could not be read, for its quarantine row; None when the failure is not the file's.

    A :class:`FormatError` says where and what was expected. Any other exception a reader raises on a
    file (a value it did not expect, nesting too deep, a schema check) is that file's problem too:
    the study goes on without it. Out of space, memory or file handles, and interrupts, are not a
    file's: the caller stops.
    """
    if isinstance(exc, FormatError):
        return f"{exc.where}: {exc.expected}"
    if isinstance(exc, ImpossibleValue):
        return (
            f"{exc.where}: {exc.found}: no real measurement gives that, so the file is not read (check it, or "
            "the tool that wrote it)"
        )
    if isinstance(exc, OSError):
        if exc.errno in MACHINE_ERRNOS:
            return None
        return f"file: a readable file ({exc.strerror or exc})"
    if isinstance(exc, (MemoryError, KeyboardInterrupt, SystemExit)) or not isinstance(exc, Exception):
        return None
    detail = str(exc).splitlines()[0][:200] if str(exc) else ""
    return (
        f"file: content benchlib can read, found what its reader could not take ({type(exc).__name__}"
        f"{': ' + detail if detail else ''}). If the file is a real tool output, please report it with the file"
    )
