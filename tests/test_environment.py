"""The set-up files agree with each other and with the README."""

from __future__ import annotations

import re
import tomllib

from tests.conftest import ROOT


def _pins(lines: list[str]) -> dict[str, str]:
    pins = {}
    for line in lines:
        match = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)==([^\s;]+)\s*", line)
        assert match, f"not an exact pin: {line!r}"
        pins[match.group(1).lower()] = match.group(2)
    return pins


def test_environment_yml_pins_what_pyproject_pins() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = _pins(project["dependencies"]) | _pins(project["optional-dependencies"]["test"])
    yml = (ROOT / "environment.yml").read_text().splitlines()
    start = next(i for i, line in enumerate(yml) if line.strip() == "- pip:")
    pip_lines = [line.strip()[2:] for line in yml[start + 1 :] if line.strip().startswith("- ")]
    assert _pins(pip_lines) == wanted


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    command = "python3 tasks.py test"
    assert f"\n{command}\n" in readme and command in ci
    assert "\npython3 tasks.py main\n" in readme
