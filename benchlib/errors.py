"""Exceptions that end in one clear message for the user."""

from __future__ import annotations

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

    """

    def __init__(self, path: str | Path, where: str, expected: str) -> None:
        self.path = str(path)
        self.where = where
        self.expected = expected
        super().__init__(f"{self.path}: {where}: {expected}")


class StudyError(BenchlibError):
    """A study folder or its ``study.toml`` is missing or inconsistent."""
