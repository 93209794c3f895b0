"""Readers of tool output, one module per format, registered by format name.

``detect(path)`` sniffs a file's content (never its name) and returns the
format whose reader should read it; ``read(path)`` does both. Adding a format
means one module and one :class:`~benchlib.sources.registry.Format` record passed to
``registry.register``: the record is all ingest knows of a format.

This package imports no reader until one of its names is used, so that
ingest's worker processes can import the fio JSON extractor
(``fio_json_rows``) without polars: starting a worker took 0.29 s, most of it
importing polars and every reader.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["FORMATS", "Format", "detect", "detect_all", "detect_head", "detect_text", "read", "register", "unregister"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("benchlib.sources.registry"), name)
    raise AttributeError(f"module 'benchlib.sources' has no attribute {name!r}")
