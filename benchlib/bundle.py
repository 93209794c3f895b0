"""A verification bundle: everything a peer needs to recompute a study's verdicts.

``benchlib bundle data/raw/<study>`` writes ``<study>-bundle.tar.gz``: the
project's code and set-up (``benchlib/``, ``tasks.py``, ``pyproject.toml``,
``environment.yml``, ``README.md``, ``notebooks/``, ``pipelines/``), the study's
raw files with its ``study.toml`` and ``claims.toml``, ``SHA256SUMS`` over every
file, ``verdicts.json`` (the verdicts at bundling time) and ``VERIFY.md`` saying
what to run. The archive is reproducible: sorted members, fixed owner and
modification time, so the same inputs give the same bytes.

The study's files are the ones ingest reads (:func:`benchlib.study.study_files`):
a link inside the study is packed as the file it names; a link that leaves the
study (or leads nowhere) is packed as a link, never as the content it points to,
and ``VERIFY.md`` and the command say which. A peer's ingest then skips it as the
author's did, so both compute the same verdicts.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

from benchlib.claims import load_claims, verify
from benchlib.errors import BenchlibError
from benchlib.ingest import ingest_study
from benchlib.paths import PROCESSED, PROJECT_ROOT
from benchlib.store import load_study_tables
from benchlib.study import load_study, study_files
from benchlib.tomlfile import read_toml

_CODE = ("benchlib", "notebooks", "pipelines")
_FILES = ("tasks.py", "pyproject.toml", "environment.yml", "README.md")
_EPOCH = 1_700_000_000  # fixed member time: the bundle's bytes depend on content only


class BundleError(BenchlibError):
    """The bundle cannot be written (target exists, study not under the project)."""


def _belongs(path: Path, study_folder: Path) -> bool:
    """Everything but the pipelines of other studies (their data is not in the bundle)."""
    if path.parent.name != "pipelines" or path.suffix != ".toml":
        return True
    return read_toml(path, BundleError).get("pipeline", {}).get("study") == study_folder.name


def _built(path: Path) -> bool:
    """Whether ``path`` is a build product or an editor's state, never packed: a peer builds and edits their own."""
    return (
        bool({"__pycache__", ".ipynb_checkpoints", ".workspaces"} & set(path.parts))
        or path.suffix in (".pyc", ".so", ".pyd", ".o")
        or any(part.endswith(".egg-info") for part in path.parts)
    )


def _members(study_folder: Path) -> tuple[list[tuple[str, Path]], list[tuple[str, str, str]]]:
    """Return the files to pack and the study's links packed as links.

    Files are ``(name in the bundle, path)``; links ``(name, target, why)``.
    """
    found, links = [], []
    for top in _CODE:
        for path in sorted((PROJECT_ROOT / top).rglob("*")):
            if path.is_file() and not _built(path) and _belongs(path, study_folder):
                found.append((path.relative_to(PROJECT_ROOT).as_posix(), path))
    found += [(name, PROJECT_ROOT / name) for name in _FILES if (PROJECT_ROOT / name).exists()]
    for path, rel, left_out in study_files(study_folder):
        name = f"data/raw/{study_folder.name}/{rel}"
        if left_out is None:
            found.append((name, path))
        elif path.is_symlink():
            links.append((name, os.readlink(path), left_out))
    return sorted(found), sorted(links)


def _add(archive: tarfile.TarFile, name: str, data: bytes, link: str | None = None) -> None:
    info = tarfile.TarInfo(name)
    info.mtime = _EPOCH
    info.mode = 0o755 if name.endswith(".sh") else 0o644
    info.uname = info.gname = "benchlib"
    if link is not None:
        info.type, info.linkname = tarfile.SYMTYPE, link
        archive.addfile(info)
        return
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))


def write_bundle(
    study_folder: str | Path, output_dir: str | Path, processed_root: str | Path = PROCESSED
) -> tuple[Path, list[tuple[str, str, str]]]:
    """Write ``<output_dir>/<study>-bundle.tar.gz``; return its path and the links packed as links.

    The links are ``(name in the bundle, where the link points, why its content is not packed)``.
    The archive is never written over an existing file.
    """
    folder = Path(study_folder).resolve()
    study = load_study(folder)
    claims, tolerances = load_claims(folder)
    target = Path(output_dir) / f"{folder.name}-bundle.tar.gz"
    if target.exists():
        raise BundleError(
            f"{target} exists; benchlib never overwrites a bundle: move it away or pass --output <folder>"
        )
    report = ingest_study(folder, Path(processed_root))
    verdicts = verify(load_study_tables(report.processed), claims, tolerances)
    record = [{"id": v.claim.id, "recomputed": v.recomputed, "verdict": v.verdict} for v in verdicts]
    members, links = _members(folder)
    contents = {name: path.read_bytes() for name, path in members}
    contents["verdicts.json"] = (json.dumps(record, indent=1) + "\n").encode()
    contents["VERIFY.md"] = (
        f"# Verifying {study.name}\n\n{study.citation}\n\n"
        "With Python 3.11 or newer, in this folder:\n\n"
        "```\npython3 tasks.py main\n"
        f".venv/bin/benchlib verify data/raw/{folder.name}\n```\n\n"
        "The second command recomputes every claim of `claims.toml` from the raw files and prints\n"
        "PASS / FAIL / UNSUPPORTED; `verdicts.json` holds the verdicts when the bundle was made.\n"
        "`sha256sum -c SHA256SUMS` checks that no file changed.\n"
        + "".join(f"\nPacked as a link, not as content ({why}): `{name}` -> `{to}`\n" for name, to, why in links)
    ).encode()
    sums = "".join(f"{hashlib.sha256(data).hexdigest()}  {name}\n" for name, data in sorted(contents.items()))
    contents["SHA256SUMS"] = sums.encode()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    with open(partial, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=_EPOCH, filename="") as zipped:
        with tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as archive:
            for name, data in sorted(contents.items()):
                _add(archive, f"{folder.name}-bundle/{name}", data)
            for name, to, _ in links:
                _add(archive, f"{folder.name}-bundle/{name}", b"", link=to)
    os.replace(partial, target)
    return target, links
