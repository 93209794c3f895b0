"""What fio itself makes of the job files benchlib would write (DESIGN.md contract 9).

benchlib does not guess whether a job writes from ``rw`` (fio has aliases,
``:N`` suffixes, mixes whose last-set share wins, trim-and-write modes); it asks
fio, with the exact option lines of every job:

* ``fio --parse-only --debug=parse,file``: fio must accept every line (its own
  error is quoted otherwise), and the files it adds for a job are the files that
  job opens; benchlib compares them with the target.
* ``fio --parse-only --readonly``: fio refuses a job "with write or trim bit set"
  in read-only mode, so a job fio accepts there reads only. fio stops at the first
  job it refuses, so the jobs are checked in one file, a refused one is set aside
  as writing and the rest checked again: one fio start per writing job, plus one.

A few options make a job write although its direction does not say so
(:data:`benchlib.runner.vocabulary.WRITES_UNLESS`); those jobs count as writing too.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from benchlib.errors import BenchlibError
from benchlib.runner.vocabulary import WRITES_UNLESS

_SECTION = "benchlib-check-{}"
_NEW_JOB = re.compile(r"^parse\s+\d+\s+handle_option=filename, ptr=", re.M)
_ADD_FILE = re.compile(r"^file\s+\d+\s+add file (.*)$", re.M)
_DROPPED = re.compile(r"job <?benchlib-check-(\d+)>? (?:has write or trim bit set|dropped)")


class FioRefusedJob(BenchlibError):
    """fio itself does not accept a job file benchlib would write."""


def _fio(fio: str, folder: Path, sections: Sequence[tuple[int, Sequence[str]]], *flags: str) -> tuple[int, str]:
    text = "".join(f"[{_SECTION.format(i)}]\n" + "".join(f"{line}\n" for line in lines) for i, lines in sections)
    job = folder / "check.fio"
    job.write_text(text, encoding="utf-8")
    try:
        done = subprocess.run(
            [fio, "--parse-only", *flags, job.name],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise FioRefusedJob(
            "fio did not finish parsing the plan's jobs in 120 s (an option opens something that "
            "does not answer, such as a FIFO); check the options"
        ) from None
    return done.returncode, done.stdout + done.stderr


def _files_per_job(output: str, count: int) -> list[tuple[str, ...]]:
    """Split fio's ``add file`` debug lines by job: each job's first line is its ``filename``."""
    starts = [m.start() for m in _NEW_JOB.finditer(output)] + [len(output)]
    if len(starts) != count + 1:
        raise FioRefusedJob(
            f"fio's parse debug output did not show {count} jobs (it showed {len(starts) - 1}); "
            "benchlib cannot tell which files the jobs open"
        )
    return [tuple(_ADD_FILE.findall(output, starts[i], starts[i + 1])) for i in range(count)]


def _refusal(output: str, names: Sequence[str]) -> str:
    output = re.sub(r"benchlib-check-(\d+)", lambda m: names[int(m[1])], output)
    lines = [
        line.strip()
        for line in output.splitlines()
        if line.strip() and not line.startswith(("parse ", "file ", "fio: set debug"))
    ]
    useful = [line for line in lines if "Bad option" in line or "failed" in line or "fio:" in line or "Did you" in line]
    return "; ".join((useful or lines)[-3:]) or "no message"


def files_of(fio: str, jobs: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, ...]]:
    """Return the files fio would open for each job, given as the option lines (``key=value``, ``filename`` first).

    Raises
    ------
    FioRefusedJob
        When fio does not accept a job; the message names the job and quotes fio.

    """
    names = list(jobs)
    with tempfile.TemporaryDirectory(prefix="benchlib-parse-") as scratch:
        code, output = _fio(fio, Path(scratch), list(enumerate(jobs.values())), "--debug=parse,file")
    if code != 0:
        failed = _DROPPED.search(output)
        where = f"job {names[int(failed[1])]}" if failed else "a job"
        raise FioRefusedJob(f"fio does not accept {where}: {_refusal(output, names)}")
    return dict(zip(names, _files_per_job(output, len(names)), strict=True))


def writing_jobs(fio: str, jobs: Mapping[str, Sequence[str]]) -> set[str]:
    """Return the jobs that write or trim, by fio's own read-only check (and :data:`WRITES_UNLESS`).

    Raises
    ------
    FioRefusedJob
        When fio refuses a job in read-only mode for another reason.

    """
    names = list(jobs)
    left = list(enumerate(jobs.values()))
    writes = {names[i] for i, lines in left if _writes_anyway(lines)}
    with tempfile.TemporaryDirectory(prefix="benchlib-parse-") as scratch:
        while left:
            code, output = _fio(fio, Path(scratch), left, "--readonly")
            if code == 0:
                break
            refused = _DROPPED.search(output)
            if refused is None or "write or trim bit" not in output:
                raise FioRefusedJob(
                    f"fio refused a job in read-only mode without saying it writes: {_refusal(output, names)}"
                )
            writes.add(names[int(refused[1])])
            left = [s for s in left if s[0] != int(refused[1])]
    return writes


def _writes_anyway(lines: Sequence[str]) -> bool:
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() in WRITES_UNLESS and value.strip().lower() not in WRITES_UNLESS[key.strip()]:
            return True
    return False
