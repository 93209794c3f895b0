"""vdbench parameter files: ``hd=``, ``sd=``, ``wd=``, ``rd=``, ``fsd=``, ``fwd=`` definitions.

A parameter file is the user's own text (``parmfile.html`` in an output
folder holds a copy of it; HCIBench keeps it as ``vdbench.cfg``). Each
definition is ``kind=name`` followed by ``keyword=value`` pairs separated by
commas; values may be lists in parentheses. ``kind=default`` sets defaults for
the definitions of that kind that follow. A line starting with a comma
continues the previous one. ``*`` and ``#`` start comments.

The run definitions' ``for...`` keywords (``forxfersize=(4k,8k)``,
``forthreads=(1-64,d)``, or a list given to ``threads=``/``xfersize=``...)
expand into several runs; :func:`expand_run` lists their values.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path

from benchlib.errors import FormatError, quoted
from benchlib.units import parse_job_size

KINDS = ("hd", "sd", "wd", "rd", "fsd", "fwd")
#: vdbench's abbreviations of keywords (the user's guide accepts these forms).
ALIASES = {
    "xf": "xfersize",
    "el": "elapsed",
    "in": "interval",
    "io": "iorate",
    "th": "threads",
    "seek": "seekpct",
    "forxf": "forxfersize",
    "forth": "forthreads",
    "forseek": "forseekpct",
    "wu": "warmup",
}
#: Run-definition keywords that make one run per value (``for<name>=`` or a list given to ``<name>=``).
FOR_KEYWORDS = ("xfersize", "threads", "rdpct", "seekpct", "rhpct", "whpct", "hitarea", "compratio", "hpct")
_TAG = re.compile(r"<[^>]+>")
_LINE = re.compile(r"^\s*(hd|sd|wd|rd|fsd|fwd)\s*=", re.IGNORECASE)


@dataclass
class ParmFile:
    """The definitions of a vdbench parameter file, by kind, defaults applied, in file order."""

    definitions: dict[str, list[dict[str, str]]] = field(default_factory=lambda: {k: [] for k in KINDS})
    general: dict[str, str] = field(default_factory=dict)

    def named(self, kind: str, name: str) -> dict[str, str] | None:
        """Return the definition ``kind=name`` (None when absent)."""
        return next((d for d in self.definitions[kind] if d[kind] == name), None)

    def hosts(self) -> dict[str, str]:
        """Host definition name -> its ``system=`` address (the name itself when none)."""
        return {d["hd"]: d.get("system", d["hd"]) for d in self.definitions["hd"]}


def looks_like_parmfile(head: str) -> bool:
    """Tell whether ``head`` is a bare parameter file.

    Its first definition lines are vdbench's ``sd=``/``wd=``/``rd=``... and there is an ``rd=``.
    """
    lines = [
        line for line in _TAG.sub("", head).splitlines() if line.strip() and not line.lstrip().startswith(("*", "#"))
    ]
    if not lines or not _LINE.match(lines[0]):
        return False
    return (
        any(re.match(r"^\s*rd\s*=", line, re.IGNORECASE) for line in lines)
        and sum(bool(_LINE.match(x)) for x in lines[:20]) >= 2
    )


def _split(text: str) -> list[str]:
    """Split ``a=1,b=(2,3),c=x`` at the commas outside parentheses."""
    parts, depth, current = [], 0, []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(depth - 1, 0)
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def _statements(path: Path, text: str) -> list[tuple[int, str]]:
    """(line number, statement) with continuation lines joined and comments dropped."""
    statements: list[tuple[int, str]] = []
    text = re.sub(r"<title>.*?</title>", "", text, count=1)
    for number, raw in enumerate(_TAG.sub("", text).splitlines(), start=1):
        line = raw.split("#", 1)[0].strip() if not raw.lstrip().startswith("*") else ""
        if not line:
            continue
        if line.startswith(","):
            if not statements:
                raise FormatError(
                    path,
                    f"line {number}",
                    "a definition before a continuation line starting with ','",
                    found=quoted(line),
                )
            statements[-1] = (statements[-1][0], statements[-1][1] + line)
        else:
            statements.append((number, line))
    return statements


def parse_parmfile(path: str | Path, text: str) -> ParmFile:
    """Parse a vdbench parameter file's text.

    Raises
    ------
    FormatError
        When a statement is not ``keyword=value`` pairs.

    """
    path = Path(path)
    parm = ParmFile()
    defaults: dict[str, dict[str, str]] = {k: {} for k in KINDS}
    for number, statement in _statements(path, text):
        pairs = []
        for item in _split(statement):
            key, sep, value = item.partition("=")
            if not sep:
                raise FormatError(path, f"line {number}", f"keyword=value pairs separated by commas, found {item!r}")
            key = key.strip().lower()
            pairs.append((ALIASES.get(key, key), value.strip()))
        kind, name = pairs[0]
        if kind not in KINDS:
            parm.general.update(dict(pairs))
            continue
        values = dict(pairs[1:])
        if name == "default":
            defaults[kind].update(values)
            continue
        parm.definitions[kind].append({**defaults[kind], **values, kind: name})
    return parm


def values_of(text: str) -> list[str]:
    """Return the values of a keyword.

    ``4k`` -> [4k]; ``(4k,8k)`` -> both; ``(1-64,d)`` doubles; ``(10-50,10)`` steps.
    """
    inner = text.strip()
    if not (inner.startswith("(") and inner.endswith(")")):
        return [inner]
    items = [x.strip() for x in inner[1:-1].split(",") if x.strip()]
    ranged = re.fullmatch(r"(\d+)-(\d+)", items[0]) if len(items) == 2 else None
    if ranged:
        low, high = int(ranged.group(1)), int(ranged.group(2))
        step = items[1].lower()
        out, value = [], low
        while value <= high and len(out) < 10_000:
            out.append(str(value))
            value = value * 2 if step == "d" else value + int(step)
        return out
    return items


def expand_run(rd: dict[str, str]) -> list[dict[str, str]]:
    """Return the for-loop values of each run one run definition makes (``[{}]`` when it has none).

    ``for<kw>=`` and a parenthesised list given to ``<kw>=`` both loop. The
    product is listed with the first keyword outermost; vdbench prints the
    values each run actually used on its ``Starting RD=`` line, which
    readers prefer.
    """
    loops = []
    for key, value in rd.items():
        name = key[3:] if key.startswith("for") and key[3:] in FOR_KEYWORDS else key
        if name in FOR_KEYWORDS and (key != name or value.startswith("(")):
            loops.append((name, values_of(value)))
    if not loops:
        return [{}]
    return [dict(zip([n for n, _ in loops], combo, strict=True)) for combo in itertools.product(*[v for _, v in loops])]


def size_bytes(text: str | None) -> int | None:
    """``4k`` -> 4096 (vdbench sizes are powers of 1024); None when not one plain size."""
    if text is None or text.startswith("("):
        return None
    return parse_job_size(text)
