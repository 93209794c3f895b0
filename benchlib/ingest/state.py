"""The one state of an ingest, handed from stage to stage, and the report it ends with."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from benchlib.errors import FormatError
from benchlib.study import Study

#: A raw file on its way: ``(path, path relative to the study, sha256)``; sha256 is None until hashed.
Item = tuple[Path, str, str | None]


@dataclass
class IngestReport:
    """What one ingest of a study did."""

    study: str
    processed: Path
    ingested: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    quarantined: list[tuple[str, str]] = field(default_factory=list)
    #: files read with something left out, and what (a last line cut off mid-way)
    notes: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no file was quarantined."""
        return not self.quarantined

    def quarantine(self, rel: str, error: FormatError | str) -> None:
        """Record a file that could not be read, with where and what was expected."""
        self.quarantined.append((rel, error if isinstance(error, str) else f"{error.where}: {error.expected}"))


@dataclass
class IngestState:
    """Everything one ingest knows, from triage (:mod:`.triage`) to the manifest (:mod:`.parts`)."""

    study: Study
    processed: Path
    #: manifest entries of the last ingest, by path in the study (empty on a first ingest)
    previous: dict[str, dict]
    report: IngestReport
    #: Parquet parts written by this ingest are salted with this: a new part never meets an old one
    salt: str = ""
    #: ``path in the study -> [size, mtime_ns]`` of every file ingest reads, taken as the study is listed
    raw_files: dict[str, list[int]] = field(default_factory=dict)
    #: ``path in the study -> sha256`` of every file hashed (by triage or a worker)
    hashes: dict[str, str] = field(default_factory=dict)
    #: manifest entries of this ingest, by path in the study
    current: dict[str, dict] = field(default_factory=dict)
    #: sha256 -> the files that have it, in the order they were met
    seen: dict[str, list[str]] = field(default_factory=dict)
    #: files that changed or are new (their old rows are dropped before the new ones are written)
    todo: list[Item] = field(default_factory=list)
    #: files that may belong to a folder read as one unit, and their formats (or why none) as files of their own
    held: list[Item] = field(default_factory=list)
    held_formats: dict[str, str | FormatError] = field(default_factory=dict)
    #: files whose bytes equal another recorded run's file, read under a key salted with their path
    copies: list[Item] = field(default_factory=list)
    #: files read one by one by their format's reader: ``(path, rel, sha256, format)``
    others: list[tuple[Path, str, str, str]] = field(default_factory=list)
    #: files of the row-extracted format that a worker could not tell from their first bytes (UTF-16, say)
    late_rows: list[Item] = field(default_factory=list)
