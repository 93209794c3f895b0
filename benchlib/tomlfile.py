"""Read a TOML file a user wrote (study, plan, claims, pipeline), with one clear error."""

from __future__ import annotations

import tomllib
from pathlib import Path

from benchlib.errors import BenchlibError


def read_toml(path: Path, error: type[BenchlibError]) -> dict:
    """Return the parsed file; ``error`` names the file and what is wrong when it is not valid TOML."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise error(f"{path}: not valid TOML ({exc}); fix the file") from None
