"""The format registry is all ingest knows of a format: a toy format registered here is detected,
ingested and quarantined like the real ones, and ingest imports no reader by name."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchlib.errors import FormatError
from benchlib.ingest import ingest_study
from benchlib.paths import PROJECT_ROOT
from benchlib.schema import Tables
from benchlib.sources import detect, read, register, unregister
from benchlib.sources._common import read_source, run_id
from benchlib.sources.registry import FORMATS, Format
from benchlib.store import open_study

TOY = "toybench-summary"


def looks_like_toy(head: str) -> bool:
    return head.startswith("TOYBENCH 1\n")


def read_toy(path: str | Path) -> Tables:
    """``TOYBENCH 1`` then ``<direction> <iops>`` lines: one run, one result row per line."""
    source = read_source(path)
    rid = run_id(source.sha256, 0, None)
    results = []
    for number, line in enumerate(source.text.splitlines()[1:], 2):
        direction, _, iops = line.partition(" ")
        try:
            value = float(iops)
        except ValueError:
            raise FormatError(source.path, f"line {number}", "'<direction> <iops>', e.g. 'read 1200'") from None
        results.append(
            {
                "run_id": rid,
                "job_name": "toy",
                "job_index": 1,
                "direction": direction,
                "iops": value,
                "is_aggregate": False,
            }
        )
    runs = [
        {
            "run_id": rid,
            "tool": "toybench",
            "tool_version": "1",
            "format": TOY,
            "is_aggregate": False,
            "source": str(source.path),
            "sha256": source.sha256,
            "document_index": 0,
        }
    ]
    return Tables.from_rows({"runs": runs, "results": results})


@pytest.fixture
def toy_format() -> Iterator[None]:
    register(Format(TOY, looks_like_toy, read_toy), before="published-table")
    try:
        yield
    finally:
        unregister(TOY)


def test_a_registered_format_is_detected_ingested_and_quarantined_like_the_others(
    toy_format: None, tmp_path: Path
) -> None:
    study = tmp_path / "raw" / "toys"
    study.mkdir(parents=True)
    (study / "good.txt").write_text("TOYBENCH 1\nread 1200\nwrite 300.5\n")
    (study / "bad.txt").write_text("TOYBENCH 1\nread lots\n")
    (study / "same-as-good.txt").write_text("TOYBENCH 1\nread 1200\nwrite 300.5\n")
    assert detect(study / "good.txt") == TOY and read(study / "good.txt").results.height == 2
    assert list(FORMATS).index(TOY) == list(FORMATS).index("published-table") - 1
    for attempt in ("first", "repeated"):
        report = ingest_study(study, tmp_path / "processed")
        assert report.quarantined == [("bad.txt", "line 2: '<direction> <iops>', e.g. 'read 1200'")], attempt
        assert ("same-as-good.txt", "same content as good.txt") in report.skipped, attempt
    assert report.unchanged == ["good.txt"]
    tables = open_study(study, tmp_path / "processed").tables()
    assert tables.runs["format"].to_list() == [TOY] and tables.runs["study"].to_list() == ["toys"]
    assert sorted(tables.results["iops"].to_list()) == [300.5, 1200.0]
    (study / "good.txt").write_text("TOYBENCH 1\nread 1300\n")
    changed = ingest_study(study, tmp_path / "processed")
    assert changed.ingested == ["good.txt", "same-as-good.txt"]  # no longer a duplicate: read on its own
    assert sorted(open_study(study, tmp_path / "processed").tables().results["iops"].to_list()) == [
        300.5,
        1200.0,
        1300.0,
    ]


def test_a_format_is_registered_once() -> None:
    with pytest.raises(ValueError, match="registered already"):
        register(Format("fio-json", looks_like_toy, read_toy))


def test_ingest_imports_no_reader_by_name() -> None:
    """Everything ingest knows of a format comes from its registry record."""
    allowed = {"benchlib.sources", "benchlib.sources.registry", "benchlib.sources._common"}
    for module in sorted((PROJECT_ROOT / "benchlib" / "ingest").glob("*.py")):
        tree = ast.parse(module.read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        readers = {name for name in imported if name.startswith("benchlib.sources")} - allowed
        assert not readers, f"{module.name} imports {sorted(readers)}"
        text = module.read_text()
        for name in FORMATS:
            assert f'"{name}"' not in text, f"{module.name} names the format {name!r}"
