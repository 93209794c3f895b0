"""Plan files: matrix expansion, held factors, sweeps, option layering, run order, and errors that teach."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from benchlib.runner import PROFILES, PlanError, describe_plan, load_plan, read_plan

PLAN = """
[study]
name = "demo"
[run]
runtime_s = 2
ramp_time_s = 1
repetitions = 3
seed = 42
output = "out"
[target]
file = "/tmp/benchlib-demo/{host}.dat"
size = "64MiB"
[matrix.block_size]
option = "bs"
levels = ["4k", "64k"]
[matrix.rate_cap]
levels = ["off", "on"]
options.on = { rate_iops = 500 }
[matrix.controller]
levels = ["pvscsi", "lsi"]
[[profiles]]
use = "randread-4k"
[[profiles]]
use = "iodepth-sweep"
hold = { block_size = "4k", rate_cap = "off" }
[[profiles]]
name = "oltp"
options = { rw = "randrw", rwmixread = 70, bs = "8k", numjobs = 2 }
hold = { controller = "pvscsi" }
"""


def _plan(tmp_path: Path, text: str = PLAN):
    path = tmp_path / "plan.toml"
    path.write_text(text, encoding="utf-8")
    return load_plan(path)


def test_cells_cross_the_matrix_with_holds_and_sweeps(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    cells = plan.cells()
    per_profile = Counter(c.profile for c in cells)
    # randread: 2 bs x 2 caps x 2 controllers; sweep: 8 depths x 2 controllers; oltp: 2 bs x 2 caps
    assert per_profile == {"randread-4k": 8, "iodepth-sweep": 16, "oltp": 4}
    assert len({c.key for c in cells}) == len(cells)
    sweep = [c for c in cells if c.profile == "iodepth-sweep"]
    assert sorted({int(c.options["iodepth"]) for c in sweep}) == [1, 2, 4, 8, 16, 32, 64, 128]
    assert all(c.levels["queue_depth"] == c.options["iodepth"] for c in sweep)
    assert all(c.levels["block_size"] == "4k" and "rate_iops" not in c.options for c in sweep)


def test_options_layer_defaults_profile_then_matrix(tmp_path: Path) -> None:
    cells = {c.key: c for c in _plan(tmp_path).cells()}
    cell = cells["randread-4k/block_size=64k/rate_cap=on/controller=lsi"]
    assert cell.options["bs"] == "64k"  # the matrix factor overrides the profile's 4k
    assert cell.options["rate_iops"] == "500"
    assert cell.options["rw"] == "randread" and cell.options["direct"] == "1"
    assert "controller" not in cell.options  # a label fio cannot see
    assert cell.levels == {"profile": "randread-4k", "block_size": "64k", "rate_cap": "on", "controller": "lsi"}


def test_order_interleaves_repetitions_and_is_seeded(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    order = plan.order()
    cells = len(plan.cells())
    assert len(order) == 3 * cells
    for repetition in (1, 2, 3):
        block = order[(repetition - 1) * cells : repetition * cells]
        assert {r for r, _ in block} == {repetition}
        assert len({c.key for _, c in block}) == cells  # every cell once per repetition
    keys = [c.key for _, c in order]
    assert keys == [c.key for _, c in _plan(tmp_path).order()]  # same seed, same order
    assert keys[:cells] != [c.key for c in plan.cells()]  # shuffled, not declaration order
    other = _plan(tmp_path, PLAN.replace("seed = 42", "seed = 43"))
    assert [c.key for _, c in other.order()] != keys


def test_study_factors_include_profile_and_sweeps(tmp_path: Path) -> None:
    factors = _plan(tmp_path).study_factors()
    assert factors["profile"] == ["randread-4k", "iodepth-sweep", "oltp"]
    assert factors["queue_depth"] == ["1", "2", "4", "8", "16", "32", "64", "128"]
    assert factors["controller"] == ["pvscsi", "lsi"]


def test_builtin_profiles_are_the_write_up_set() -> None:
    assert PROFILES["randwrite-64k-8jobs"]["options"] == {"rw": "randwrite", "bs": "64k", "iodepth": 8, "numjobs": 8}
    assert PROFILES["rwmix-sweep"]["sweep"]["levels"][0] == 0 and PROFILES["rwmix-sweep"]["sweep"]["levels"][-1] == 100
    assert PROFILES["iodepth-sweep"]["options"]["numjobs"] == 1


@pytest.mark.fio
def test_describe_states_cells_time_and_bytes(tmp_path: Path, fio_binary: str) -> None:
    plan = _plan(tmp_path)
    reading = read_plan(plan, fio_binary)
    assert "randread-4k/block_size=64k/rate_cap=on/controller=lsi" not in reading.writing
    assert "oltp/block_size=4k/rate_cap=off/controller=pvscsi" in reading.writing
    text = "\n".join(describe_plan(plan, reading))
    runs = len(plan.cells()) * 3
    assert f"= {runs} runs; 0 done, {runs} to run" in text
    assert f"{runs} x (1 s ramp + 2 s run + ~1.5 s start) = about 6 min 18 s" in text
    assert "before the first cell: a file benchlib creates is written in full once (64 MiB of random data" in text
    assert "4 writing cells x 3 x 3 s" in text
    # what the design can show: 3 runs a side reach p = 0.1 at best; controller's comparisons are one family
    assert "design: 3 runs per configuration; the smallest p of one comparison is 0.1 (too few for any verdict" in text
    assert "a verdict needs 4 runs a side alone, 6 for" in text
    assert "power: 3 runs a side cannot show any change as an effect, however large" in text
    assert "runtime: 2 s logs about 1 whole second; the steady-state check (SNIA PTS window) needs 5: too short" in text
    assert "the two-level plan needs 10: too short, give runtime_s >= 11" in text
    assert "randread-4k/block_size=64k/rate_cap=on/controller=lsi: bs=64k iodepth=32 rate_iops=500 rw=randread" in text


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (('use = "randread-4k"', 'use = "randread-8k"'), "no built-in profile 'randread-8k'"),
        (
            ('hold = { block_size = "4k", rate_cap = "off" }', 'hold = { blocksize = "4k" }'),
            "holds 'blocksize', which [matrix] does not declare",
        ),
        (
            ('hold = { block_size = "4k", rate_cap = "off" }', 'hold = { block_size = "8k" }'),
            "holds block_size = '8k', not one of ['4k', '64k']",
        ),
        (
            ("options.on = { rate_iops = 500 }", 'options.on = { filename = "/dev/sda" }'),
            "benchlib sets filename itself",
        ),
        (
            ("options.on = { rate_iops = 500 }", "options.maybe = { rate_iops = 500 }"),
            "'maybe' is not one of the levels",
        ),
        (('[target]\nfile = "/tmp/benchlib-demo/{host}.dat"', '[target]\nfile = "relative.dat"'), "must be absolute"),
        (('size = "64MiB"', ""), "needs size ="),
        (("repetitions = 3", "repetitions = 0"), "[run] repetitions must be a whole number >= 1"),
        (("[matrix.controller]", "[matrix.host]"), "'host' is a column benchlib already has"),
        (("[study]", "[stduy]"), "unknown section(s) stduy"),
        (("[run]", "[run\n"), "not valid TOML"),
        (
            ("[study]", '[hosts]\nservers = ["127.0.0.2"]\nfacts_comand = "ssh {host} sh -s"\n\n[study]'),
            "[hosts] has unknown keys ['facts_comand']",
        ),
        (
            ("[study]", '[hosts]\nservers = ["127.0.0.2"]\nfacts_command = "ssh vm1 sh -s"\n\n[study]'),
            "facts_command must be a command with {host} in it",
        ),
        (('output = "out"', 'output = "/run"'), "[run] output = '/run' leads to /run: it is in a system folder"),
        (('output = "out"', 'output = "/var/run/x"'), "leads to /run/x: it is in a system folder"),
        (('output = "out"', 'output = "../../../../../../../etc/b"'), "leads to /etc/b: it is in a system folder"),
        (("runtime_s = 2", "runtime_s = 1000000000000000"), "[run] runtime_s must be at most 86,400"),
        (("ramp_time_s = 1", "ramp_time_s = 100000"), "[run] ramp_time_s must be at most 86,400"),
        (("repetitions = 3", "repetitions = 100000"), "[run] repetitions must be at most 10,000"),
        (('size = "64MiB"', 'size = "1PiB"'), "is over 64 TiB"),
        (("numjobs = 2 }", "numjobs = 100000 }"), "numjobs = '100000' is refused: numjobs is a whole number from 1"),
        (("numjobs = 2 }", 'numjobs = "\u00b2" }'), "numjobs is a whole number from 1"),
        (("numjobs = 2 }", "numjobs = 2, iodepth_batch = 10000000 }"), "iodepth_batch is a whole number from 1"),
        (('output = "out"', 'output = "../../../../../../../../.."'), "leads to /; choose a folder of your own"),
        (("rate_iops = 500 }", "rate_iops = 500, iodepth = 0 }"), "iodepth is a whole number from 1 to 65,536"),
        (
            ("numjobs = 2 }", 'numjobs = 64, iodepth = 1024, bssplit = "4k/90:1m/10" }'),
            "its largest block x iodepth x numjobs is 64 GiB of I/O buffers per host, over 32 GiB",
        ),
    ],
)
def test_bad_plans_say_where_and_what(tmp_path: Path, change: tuple[str, str], message: str) -> None:
    assert change[0] in PLAN
    with pytest.raises(PlanError) as caught:
        _plan(tmp_path, PLAN.replace(*change))
    assert message in str(caught.value)
    assert str(tmp_path / "plan.toml") in str(caught.value)


def test_missing_plan_file(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="no such plan file"):
        load_plan(tmp_path / "nope.toml")


def test_the_writeup_profiles_hold_what_the_writeups_tables_imply() -> None:
    """Little's law on the post's per-VM table for gus_fio_1 (LSI, SIOC off) gives each test's concurrency."""
    import polars as pl

    from benchlib.runner.plan import WRITEUP_PROFILES
    from tests.conftest import ROOT

    table = ROOT.parent / "shared" / "domain" / "published" / "controller_gus_fio_1.csv"
    if not table.exists():
        pytest.skip("no published tables beside the project")
    rows = pl.read_csv(table).filter(pl.col("controller") == "LSI", pl.col("sioc") == "off")
    tests = {
        "4k_randread": "writeup-randread-4k",
        "4k_randwrite": "writeup-randwrite-4k",
        "64k_randwrite_8jobs": "writeup-randwrite-64k-8jobs",
        "seqwrite": "writeup-seqwrite-32k",
    }
    for row in rows.filter(pl.col("test").is_in(list(tests))).iter_rows(named=True):
        options = WRITEUP_PROFILES[tests[row["test"]]]["options"]
        outstanding = row["iops"] * row["lat_avg_ms"] / 1000
        assert outstanding == pytest.approx(options["iodepth"] * options["numjobs"], rel=0.02), row["test"]
        block_kib = row["bw_mib_s"] * 1024 / row["iops"]
        assert block_kib == pytest.approx(int(options["bs"].removesuffix("k")), rel=0.02), row["test"]
