"""The vSphere settings a plan has benchlib set to each cell's level (``[vsphere] apply``), recorded and put back.

Storage I/O Control is set on the datastores the plan names, through vCenter's
``ConfigureDatastoreIORM_Task`` (:func:`benchlib.vsphere.set_sioc`), before each cell whose level differs
from what vCenter reports; each change waits for its task and is read back, and a cell never starts on a
setting that differs from its level. Only with ``benchlib run --apply-settings``: a plan travels inside
studies and bundles, and the datastores it names are shared with every VM on them.

The record, ``benchlib-settings.json`` in the plan's output folder, is written before the first change: for
each run of the plan, what every datastore had, then each change with its time and cell, and when they were
put back. The originals
are put back when the run ends, is interrupted (Ctrl-C, SIGTERM) or fails; a run killed before it could
(kill -9, a power cut) leaves its record unrestored, and the next start puts them back first.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from typing import Any

from benchlib.errors import BenchlibError
from benchlib.runner.plan import Cell, Plan

#: the record of what was changed, in the plan's output folder
SETTINGS_FILE = "benchlib-settings.json"


class SettingsError(BenchlibError):
    """A setting could not be brought to a cell's level, or put back; the run stops before the cell."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _said(on: bool) -> str:
    return "on" if on else "off"


class AppliedSettings:
    """The settings of one run of a plan: brought to each cell's levels, every change recorded, put back.

    The record holds every run of the plan (``runs``), each with what the datastores had when it started, its
    changes and when it put them back: a run that continues the plan adds to it, never over it.
    """

    def __init__(self, plan: Plan, service: Any) -> None:
        assert plan.vsphere is not None and plan.vsphere.apply  # noqa: S101 -- only for a plan that applies
        self.plan, self.service = plan, service
        self.server = plan.vsphere.server
        self.factor = plan.vsphere.apply["sioc"]
        self.datastores = list(plan.vsphere.datastores)
        self.path = plan.output / SETTINGS_FILE
        self.record: dict = {"server": self.server, "factor": self.factor, "runs": []}
        self.run: dict | None = None

    def start(self) -> None:
        """Put back what a killed run left changed, check the VMs' disks, and record the originals."""
        from benchlib.vsphere import datastore_sioc

        self._read()
        if self.record["runs"] and self.record["runs"][-1]["restored"] is None:  # a run killed before it could
            self.run = self.record["runs"][-1]
            self.restore()
        self._check_disks()
        original = datastore_sioc(self.service, self.datastores)
        self.run = {
            "started": _now(),
            "original": {name: {"sioc": on} for name, on in original.items()},
            "changes": [],
            "restored": None,
        }
        self.record["runs"].append(self.run)
        self._write()

    def bring(self, cell: Cell) -> None:
        """Set every named datastore's SIOC to ``cell``'s level where it differs; raise where it did not take."""
        from benchlib.vsphere import VSphereError, datastore_sioc, set_sioc, sioc_level

        want = sioc_level(cell.levels[self.factor])
        assert want is not None  # noqa: S101 -- the plan's levels were checked (plan._applied)
        for name, on in datastore_sioc(self.service, self.datastores).items():
            if on == want:
                continue
            try:
                got = set_sioc(self.service, name, want)
            except VSphereError as exc:
                raise SettingsError(f"before {cell.key}: {exc}; the cell was not run") from None
            self._log(cell.key, name, on, got)
            if got != want:
                raise SettingsError(
                    f"before {cell.key}: vCenter reports SIOC {_said(got)} on {name} after setting it "
                    f"{_said(want)}; the cell was not run"
                )

    def restore(self) -> None:
        """Put every datastore back as this run found it (nothing where nothing was recorded or changed)."""
        from benchlib.vsphere import VSphereError, datastore_sioc, set_sioc

        if self.run is None or self.run["restored"] is not None:
            return
        original = {name: bool(state["sioc"]) for name, state in self.run["original"].items()}
        unnamed = sorted(set(original) - set(self.datastores))
        if unnamed:  # the plan names every object benchlib changes, also when it puts one back
            raise SettingsError(
                f"{self.path} says a run changed SIOC on {', '.join(unnamed)}, which this plan's [vsphere] "
                "datastores does not name: put it back by hand (the file says what it was), then move the file away"
            )
        try:
            for name, on in datastore_sioc(self.service, list(original)).items():
                if on != original[name]:
                    self._log(None, name, on, set_sioc(self.service, name, original[name]))
        except VSphereError as exc:
            raise SettingsError(
                f"could not put SIOC back as it was ({exc}); {self.path} says what each datastore had"
            ) from None
        self.run["restored"] = _now()
        self._write()

    def _read(self) -> None:
        """Read the record earlier runs of the plan left, if any; refuse one that cannot be trusted."""
        if not self.path.is_file():
            return
        try:
            record = json.loads(self.path.read_text(encoding="utf-8"))
            runs = record["runs"]
            assert isinstance(runs, list) and all(  # noqa: S101 -- caught below: a record not as written
                isinstance(r["original"], dict) and isinstance(r["changes"], list) for r in runs
            )
        except (OSError, ValueError, KeyError, TypeError, AssertionError) as exc:
            raise SettingsError(
                f"{self.path}: the record of settings earlier runs changed cannot be read ({type(exc).__name__}); "
                "make sure each datastore's SIOC is as it should be, then move the file away"
            ) from None
        if runs and runs[-1]["restored"] is None and record.get("server") != self.server:
            raise SettingsError(
                f"{self.path}: an earlier run changed SIOC through {record.get('server')!r} and did not put it "
                "back; this plan's vCenter is another: put it back by hand (the file says what each datastore "
                "had), then move the file away"
            )
        self.record = {**record, "server": self.server}

    def _check_disks(self) -> None:
        """Refuse a VM of the plan with no disk on the datastores apply changes: its runs would not be at the level."""
        from benchlib.vsphere import read_facts

        vms = list(self.plan.vsphere.vms.values())  # type: ignore[union-attr]
        for vm in read_facts(self.service, vms)["vms"]:
            on = {d.get("datastore") for d in vm["disks"]}
            if not on & set(self.datastores):
                raise SettingsError(
                    f"VM {vm['vm']} has no disk on the datastores [vsphere] apply changes "
                    f"({', '.join(self.datastores)}); its disks are on {', '.join(sorted(map(str, on))) or 'none'}: "
                    "name its test disk's datastore in [vsphere] datastores"
                )

    def _log(self, cell: str | None, name: str, before: bool, after: bool) -> None:
        assert self.run is not None  # noqa: S101 -- started
        change = {"time": _now(), "cell": cell, "datastore": name, "setting": "sioc", "from": before, "to": after}
        self.run["changes"].append(change)
        self._write()

    def _write(self) -> None:
        """Write the record whole (a temporary file renamed over it: a kill never leaves half a record)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f".{SETTINGS_FILE}.{os.getpid()}")
        temporary.write_text(json.dumps(self.record, indent=2) + "\n", encoding="utf-8")
        os.replace(temporary, self.path)


def planned_changes(plan: Plan, order: list[tuple[int, Cell]]) -> list[str]:
    """Return the dry run's lines: each cell before which SIOC is set, in the order the cells run."""
    if plan.vsphere is None or not plan.vsphere.apply:
        return []
    from benchlib.vsphere import sioc_level

    factor = plan.vsphere.apply["sioc"]
    lines, before = [], None
    for repetition, cell in order:
        want = sioc_level(cell.levels[factor])
        if want != before:
            lines.append(f"before {cell.key} r{repetition}: SIOC {_said(bool(want))}")
            before = want
    where = ", ".join(plan.vsphere.datastores)
    head = f"SIOC set on {where} through vCenter ({len(lines)} changes at most; none where vCenter already agrees)"
    return [head, *lines, f"then put back on {where} as vCenter had it, also after an interrupt"]
