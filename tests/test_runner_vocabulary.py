"""The closed vocabulary of job files, against the installed fio and random hostile plans.

Properties: a plan built from random fio option names and hostile strings is either refused
with a PlanError, or every job file benchlib would write holds exactly the lines it meant
(one per option); and for random direction options, every cell in which the real fio wrote
or trimmed is one that fio's reading said writes."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchlib.runner import PlanError, load_plan, read_plan
from benchlib.runner.execute import job_text
from benchlib.runner.vocabulary import RESERVED, UNSAFE, fio_options

pytestmark = pytest.mark.fio

HOSTILE = [
    "\n",
    "\r",
    "\x00",
    "]",
    "[",
    "=",
    ":",
    ";",
    "#",
    "${HOME}",
    "\\",
    " ",
    "\t",
    "'",
    '"',
    "include /etc/x",
    "filename=/dev/sda",
    "\u2028",
    "\x1b[2J",
]


def test_pinned_options_cover_the_installed_fio(fio_binary: str) -> None:
    shown = subprocess.run([fio_binary, "--cmdhelp=all"], capture_output=True, text=True, check=True).stdout
    installed = {re.sub(r"\s*:.*", "", line).strip() for line in shown.splitlines() if ":" in line}
    installed.discard("")
    assert len(installed) > 150
    assert installed <= fio_options(), sorted(installed - fio_options())  # every option of this fio is known
    assert set(RESERVED) <= fio_options() and set(UNSAFE) <= fio_options()  # the refusals name real options


def test_aliases_are_pinned_too(fio_binary: str) -> None:
    for option, alias in [("rw", "readwrite"), ("bs", "blocksize"), ("runtime", "timeout"), ("fill_device", "fill_fs")]:
        shown = subprocess.run([fio_binary, f"--cmdhelp={option}"], capture_output=True, text=True, check=True).stdout
        assert f"alias: {alias}" in shown and alias in fio_options()


PLAN = """
[study]
name = "random"
[run]
runtime_s = 1
repetitions = 1
output = "study"
[target]
file = "{tmp}/t/{{host}}.dat"
size = "4MiB"
[[profiles]]
name = {profile}
options = {options}
"""


def _toml(value: str) -> str:
    return json.dumps(value)  # a JSON string is a TOML basic string


words = st.one_of(
    st.sampled_from(sorted(fio_options())),
    st.sampled_from(HOSTILE),
    st.builds(lambda a, b: a + b, st.sampled_from(sorted(fio_options())), st.sampled_from(HOSTILE)),
)
values = st.one_of(
    st.sampled_from(["4k", "randread", "randwrite", "1", "0", "libaio", "psync", "100", "/dev/sda"]),
    st.sampled_from(HOSTILE),
    st.text(max_size=12),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(options=st.dictionaries(words, values, max_size=5), profile=st.one_of(st.just("p"), st.text(max_size=8), values))
def test_random_plans_are_refused_or_exactly_what_they_say(tmp_path: Path, options: dict, profile: str) -> None:
    inline = "{ " + ", ".join(f"{_toml(k)} = {_toml(v)}" for k, v in options.items()) + " }"
    path = tmp_path / "plan.toml"
    path.write_text(PLAN.format(tmp=tmp_path, profile=_toml(profile), options=inline), encoding="utf-8")
    try:
        plan = load_plan(path)
    except PlanError as exc:
        assert str(path) in str(exc)  # the refusal names the plan file
        return
    (cell,) = plan.cells()
    target = plan.target.path_for("local")
    lines = job_text(plan, cell, target).split("\n")  # fio reads a job file line by line, split at \n only
    meant = [
        f"filename={target}",
        f"size={plan.target.size_bytes}",
        "runtime=1",
        *(f"{k}={v}" for k, v in sorted(cell.options.items())),
    ]
    assert lines == ["[global]", *meant, "", f"[{profile}]", ""]
    for line in meant:  # each line is one option, read by fio as exactly what benchlib meant
        key, _, value = line.partition("=")
        assert key in fio_options() and key == key.strip() and value == value.strip()
        assert not any(ord(c) < 32 or ord(c) == 127 for c in line) and "${" not in line
    assert all(k in fio_options() and k not in RESERVED and k not in UNSAFE for k in options)


directions = st.fixed_dictionaries(
    {
        "rw": st.sampled_from(
            [
                "read",
                "write",
                "randread",
                "randwrite",
                "rw",
                "readwrite",
                "randrw",
                "trim",
                "randtrim",
                "trimwrite",
                "randtrimwrite",
                "randread:4k",
                "randwrite:8k",
                "read:2",
                "rw:4k",
            ]
        )
    },
    optional={"rwmixread": st.sampled_from([0, 1, 50, 99, 100]), "rwmixwrite": st.sampled_from([0, 1, 50, 99, 100])},
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(options=directions, alias=st.booleans())
def test_every_cell_in_which_fio_wrote_is_reported_as_writing(
    tmp_path: Path, fio_binary: str, options: dict, alias: bool
) -> None:
    if alias:
        options = {("readwrite" if k == "rw" else k): v for k, v in options.items()}
    inline = "{ " + ", ".join(f"{k} = {_toml(str(v))}" for k, v in options.items()) + ', ioengine = "psync" }'
    path = tmp_path / "plan.toml"
    path.write_text(PLAN.format(tmp=tmp_path, profile='"p"', options=inline), encoding="utf-8")
    plan = load_plan(path)
    reading = read_plan(plan, fio_binary)
    (cell,) = plan.cells()
    scratch = tmp_path / "scratch.dat"
    scratch.write_bytes(b"\0" * (4 << 20))
    job = tmp_path / "job.fio"
    job.write_text(
        job_text(plan, cell, str(scratch))
        .replace("runtime=1", "runtime=1\nio_size=256k")
        .replace("time_based=1", "time_based=0"),
        encoding="utf-8",
    )
    done = subprocess.run(
        [fio_binary, "--output-format=json", str(job)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        timeout=60,
    )
    jobs = json.loads(done.stdout[done.stdout.index("{") :])["jobs"]
    wrote = any(j[d]["io_bytes"] > 0 for j in jobs for d in ("write", "trim"))
    if wrote:
        assert cell.key in reading.writing, (options, jobs[0]["job options"])
