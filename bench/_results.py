"""Print a benchmark's figures and append them to bench/results.md with the date and machine."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results.md"


def record(title: str, rows: list[tuple[str, object]]) -> None:
    """Append a dated table of ``(measure, value)`` rows under ``title``."""
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    lines = [f"\n## {time.strftime('%Y-%m-%d %H:%M')} {title} ({machine})\n", "| measure | value |", "|---|---|"]
    lines += [f"| {name} | {value:,.3f} |" if isinstance(value, float) else f"| {name} | {value} |" for name, value in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    with open(RESULTS, "a") as handle:
        handle.write(text)
