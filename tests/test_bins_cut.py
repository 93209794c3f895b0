"""benchlib._bins (C): json+ bins cut out of fio's text before parsing, checked against the ordinary path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchlib.paths import RAW
from benchlib.sources import fio_json, fio_json_rows
from benchlib.sources._common import read_source
from benchlib.sources.fio_json import read_fio_json

JSONPLUS = sorted(p for p in RAW.rglob("*.json") if '"bins" : {' in p.read_text(encoding="utf-8", errors="replace"))


def test_the_c_part_is_built() -> None:
    """The build marks it optional (no compiler: slower ingest); here, with one, it must exist."""
    from benchlib import _bins

    assert fio_json_rows._cut_bins is _bins.cut_bins


def test_bundled_json_plus_files_take_the_cut_and_equal_the_ordinary_path(monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(JSONPLUS) >= 20  # fio-sample and the loopback study (client/server, several hosts per file)
    fast = [read_fio_json(p) for p in JSONPLUS]
    assert all(fio_json_rows._cut_document(read_source(p)) is not None for p in JSONPLUS)
    monkeypatch.setattr(fio_json_rows, "_cut_bins", None)  # as when benchlib is built without a C compiler
    monkeypatch.setattr(fio_json, "_bucket_index_c", None)
    for path, cut in zip(JSONPLUS, fast, strict=True):
        ordinary = read_fio_json(path)
        for name, frame in cut.items():
            assert frame.equals(getattr(ordinary, name)), (path, name)
        assert cut.latency_bins.height > 0


def _bins_maps(data: object) -> list[dict]:
    """Every ``bins`` map of a parsed document, in document order."""
    found: list[dict] = []
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "bins" and isinstance(value, dict):
                found.append(value)
            else:
                found.extend(_bins_maps(value))
    elif isinstance(data, list):
        for value in data:
            found.extend(_bins_maps(value))
    return found


def _check_against_orjson(text: str) -> None:
    """Whatever the text, cut_bins never fails; what it cuts is exactly what a JSON parser reads."""
    cut = fio_json_rows._cut_bins(text)
    if cut is None:
        return
    stripped, keys, counts, sizes = cut
    keys, counts = np.frombuffer(keys, np.int64), np.frombuffer(counts, np.int64)
    assert keys.size == counts.size == sum(sizes)
    try:
        whole = orjson.loads(text)
    except orjson.JSONDecodeError:
        return  # damaged elsewhere: the caller parses the stripped text, which fails the same way
    maps = _bins_maps(whole)
    assert len(maps) == len(sizes)
    assert orjson.loads(stripped) == _replace_maps(whole, iter(range(len(sizes))))
    ends = np.cumsum(sizes)
    for found, end, size in zip(maps, ends, sizes, strict=True):
        assert {str(k): int(c) for k, c in zip(keys[end - size : end], counts[end - size : end], strict=True)} == found


def _replace_maps(data: object, index: object) -> object:
    if isinstance(data, dict):
        return {
            k: next(index) if k == "bins" and isinstance(v, dict) else _replace_maps(v, index) for k, v in data.items()
        }
    if isinstance(data, list):
        return [_replace_maps(v, index) for v in data]
    return data


def test_cut_matches_a_json_parser_on_real_files() -> None:
    for path in JSONPLUS[:10]:
        _check_against_orjson(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "body",
    [
        '"FIO_IO_U_PLAT_BITS" : 6, "0" : 1',  # fio 2.x: keys are bucket indices beside layout entries
        '"772" : 07',  # a JSON number has no leading zero
        '"772" : 1234567890123456789',  # 19 digits: more than an int64 safely holds
        '"772" 2',  # no colon
        '"772" : 2,',  # a trailing comma
        '"77a" : 2',
        '"772" : -2',
        '"772" : 2.5',
        "772 : 2",
        '"772" : 2',  # truncated: no closing brace
    ],
)
def test_maps_outside_fio_3_layout_are_left_to_the_json_parser(body: str) -> None:
    text = '{"fio version" : "fio-3.33", "jobs" : [{"read" : {"clat_ns" : {"bins" : {' + body
    if body != '"772" : 2':  # that one is cut off there
        text += " }}}]}"
    assert fio_json_rows._cut_bins(text) is None


def test_text_of_wider_characters_and_text_without_bins_are_left_alone() -> None:
    assert fio_json_rows._cut_bins('{"fio version" : "fio-3.33", "jobname" : "\u20ac", "bins" : { "1" : 2 }}') is None
    assert fio_json_rows._cut_bins('{"fio version" : "fio-3.33", "jobs" : []}') is None
    cut = fio_json_rows._cut_bins('{"a" : "caf\u00e9", "bins" : { "1" : 2 }, "b" : {"bins" : {}}}')
    assert cut is not None and cut[0] == '{"a" : "caf\u00e9", "bins" : 0, "b" : {"bins" : 1}}' and cut[3] == [1, 0]
    with pytest.raises(TypeError):
        fio_json_rows._cut_bins(b'{"bins" : {}}')


_SAMPLE = JSONPLUS[0].read_text(encoding="utf-8") if JSONPLUS else ""
_BINS_AT = _SAMPLE.find('"bins" : {')


@settings(max_examples=300, deadline=None)
@given(
    offset=st.integers(min_value=-40, max_value=400),
    edit=st.sampled_from(["delete", "insert", "replace"]),
    char=st.sampled_from(list(' "0123456789:,{}\n-.ae\u00e9')),
)
def test_damaged_bins_never_crash_and_never_cut_wrongly(offset: int, edit: str, char: str) -> None:
    """One character deleted, inserted or replaced in or around a real bins map."""
    at = max(0, _BINS_AT + offset)
    text = {
        "delete": _SAMPLE[:at] + _SAMPLE[at + 1 :],
        "insert": _SAMPLE[:at] + char + _SAMPLE[at:],
        "replace": _SAMPLE[:at] + char + _SAMPLE[at + 1 :],
    }[edit]
    _check_against_orjson(text)


def test_damaged_file_is_quarantined_like_before(tmp_path: Path) -> None:
    """A bins map broken mid-file: the cut declines, the JSON parser names the line."""
    from benchlib.errors import FormatError

    inside = _BINS_AT + len('"bins" : {')
    broken = tmp_path / "broken.json"
    broken.write_text(_SAMPLE[:inside] + _SAMPLE[inside:].replace('" : ', '" :: ', 1), encoding="utf-8")
    line = _SAMPLE[:inside].count("\n") + 2  # the map's first entry
    with pytest.raises(FormatError, match=f"line {line}"):
        read_fio_json(broken)


@pytest.mark.parametrize("bins", ['{"772" : 1.5}', '{"77x" : 2}', '{"772" : -2}', '{"772" : true}', '{"-5" : 2}'])
def test_bins_that_are_not_whole_numbers_quarantine_their_file(bins: str, tmp_path: Path) -> None:
    """Valid JSON the cut declines: the ordinary path refuses it with the file, document, job and map."""
    from benchlib.errors import FormatError

    start = _SAMPLE.find("{", _BINS_AT)
    end = _SAMPLE.find("}", start) + 1
    odd = tmp_path / "odd.json"
    odd.write_text(_SAMPLE[:start] + bins + _SAMPLE[end:], encoding="utf-8")
    with pytest.raises(FormatError, match="bins") as caught:
        read_fio_json(odd)
    assert "odd.json" in str(caught.value) and "whole numbers" in str(caught.value)
