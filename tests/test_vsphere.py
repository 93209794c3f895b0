"""vSphere facts against VMware's own vCenter API simulator (govmomi's ``simulator.VPX``), built from source.

The simulator is a few lines of Go (``tests/vcsim/main.go``) around govmomi, which Debian packages
(``golang-github-vmware-govmomi-dev``, with ``golang-go``); ``python3 tasks.py test`` installs both.
The tests reconfigure VMs through the API (an LSI Logic SAS disk with custom shares and a limit, an
NVMe disk) and check that ``benchlib vsphere facts`` reports what was set, and what the simulator
models of the hosts' LUNs (path selection policy, paths, queue depth).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from benchlib.vsphere import Server, VSphereError, credentials
from tests import esxi_standins
from tests.conftest import ROOT

GOVMOMI = Path("/usr/share/gocode/src/github.com/vmware/govmomi")
#: the simulator accepts any user and password; benchlib takes them from the environment only
LOGIN = {"BENCHLIB_VSPHERE_USER": "user", "BENCHLIB_VSPHERE_PASSWORD": "pass"}


@pytest.fixture(scope="module")
def vcsim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The simulator's binary, built from tests/vcsim/main.go and govmomi's source."""
    go = shutil.which("go")
    if go is None or not GOVMOMI.is_dir():
        pytest.fail("Go and govmomi's source are not installed; `python3 tasks.py test` installs them (apt)")
    work = tmp_path_factory.mktemp("vcsim")
    (work / "src" / "vcsim").mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "vcsim" / "main.go", work / "src" / "vcsim" / "main.go")
    env = {
        **os.environ,
        "GO111MODULE": "off",  # GOPATH mode: govmomi and what it imports come from Debian's /usr/share/gocode
        "GOPATH": f"{work}:/usr/share/gocode",
        "GOCACHE": str(work / "cache"),
        "GOFLAGS": "",
    }
    subprocess.run([go, "build", "-o", str(work / "vcsim"), "vcsim"], cwd=work, env=env, check=True, timeout=600)
    return work / "vcsim"


@contextlib.contextmanager
def _serving(binary: Path, *args: str) -> Iterator[tuple[str, str]]:
    """Run the simulator; yield its address without credentials and what it printed after the URL."""
    server = subprocess.Popen(
        [str(binary), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        url = server.stdout.readline().strip()  # http://user:pass@127.0.0.1:PORT/sdk
        assert url.startswith(("http://", "https://")), url
        rest = ""
        if "-tls" in args:  # the certificate, PEM
            while not rest.rstrip().endswith("-----END CERTIFICATE-----"):
                rest += server.stdout.readline()
        scheme, where = url.split("://", 1)[0], url.split("@", 1)[1].removesuffix("/sdk")
        yield f"{scheme}://{where}", rest
    finally:
        server.stdin.close()  # it serves until its standard input closes
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()


@pytest.fixture(scope="module")
def vcenter(vcsim: Path) -> Iterator[str]:
    """A running simulator's address (``http://127.0.0.1:PORT``)."""
    with _serving(vcsim) as (address, _):
        yield address


def _facts(vcenter: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "benchlib.cli", "vsphere", "facts", "--server", vcenter, *args],
        env={**os.environ, **LOGIN, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _add_disk(vm: object, controller: type, bus: int, shares: int, limit: int, label: str | None = None) -> None:
    """Give a VM a new controller with a disk on it (labelled ``label``), through the API (ReconfigVM_Task)."""
    from pyVmomi import vim

    device = controller(key=-101, busNumber=bus)
    if hasattr(device, "sharedBus"):
        device.sharedBus = "noSharing"
    disk = vim.vm.device.VirtualDisk(
        key=-102,
        controllerKey=-101,
        unitNumber=0,
        capacityInKB=1024 * 1024,
        backing=vim.vm.device.VirtualDisk.FlatVer2BackingInfo(diskMode="persistent", fileName=""),
        storageIOAllocation=vim.StorageResourceManager.IOAllocationInfo(
            limit=limit, shares=vim.SharesInfo(level="custom", shares=shares)
        ),
        deviceInfo=vim.Description(label=label, summary="") if label else None,
    )
    spec = vim.vm.ConfigSpec(
        deviceChange=[
            vim.vm.device.VirtualDeviceSpec(operation="add", device=device),
            vim.vm.device.VirtualDeviceSpec(operation="add", fileOperation="create", device=disk),
        ]
    )
    task = vm.ReconfigVM_Task(spec)
    deadline = time.monotonic() + 30
    while task.info.state not in ("success", "error") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert task.info.state == "success", task.info.error


def test_facts_report_the_controllers_shares_and_luns_that_vcenter_has(vcenter: str) -> None:
    from pyVim.connect import Disconnect, SmartConnect
    from pyVmomi import vim

    server = Server.parse(vcenter)
    service = SmartConnect(host=server.host, port=server.port, user="user", pwd="pass", protocol="http")
    try:
        content = service.RetrieveContent()
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
        vms = {vm.name: vm for vm in view.view}
        _add_disk(vms["DC0_C0_RP0_VM1"], vim.vm.device.VirtualLsiLogicSASController, 1, 2000, 500)
        _add_disk(vms["DC0_C0_RP0_VM2"], vim.vm.device.VirtualNVMEController, 0, 1000, -1)
        hosts = {vm.name: vm.runtime.host.name for vm in vms.values()}
    finally:
        Disconnect(service)
    done = _facts(vcenter, "--vm", "DC0_C0_RP0_VM1", "--vm", "DC0_C0_RP0_VM2", "--vm", "DC0_C0_RP0_VM0")
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)
    assert "pass" not in done.stdout and "user" not in json.dumps(facts)  # credentials are never written
    by_vm = {vm["vm"]: vm for vm in facts["vms"]}
    assert list(by_vm) == ["DC0_C0_RP0_VM1", "DC0_C0_RP0_VM2", "DC0_C0_RP0_VM0"]  # as asked
    disks = {
        name: [(d["controller"], d["bus"], d["unit"], d["shares"], d["limit_iops"]) for d in vm["disks"]]
        for name, vm in by_vm.items()
    }
    assert disks == {
        "DC0_C0_RP0_VM0": [("PVSCSI", 0, 0, None, None)],
        "DC0_C0_RP0_VM1": [("PVSCSI", 0, 0, None, None), ("LSI Logic SAS", 1, 0, 2000, 500)],
        "DC0_C0_RP0_VM2": [("PVSCSI", 0, 0, None, None), ("NVMe", 0, 0, 1000, None)],  # -1: no limit
    }
    vm1 = by_vm["DC0_C0_RP0_VM1"]
    assert vm1["host"] == hosts["DC0_C0_RP0_VM1"] and vm1["vcpus"] >= 1 and vm1["memory_mb"] > 0
    assert {d["datastore"] for d in vm1["disks"]} == set(vm1["datastores"]) == {"LocalDS_0"}
    datastore = vm1["datastores"]["LocalDS_0"]  # SIOC as tests/vcsim/main.go sets it, read through the API
    assert (datastore["sioc_enabled"], datastore["congestion_threshold_ms"]) == (True, 30)
    luns = {lun["lun"]: lun for lun in vm1["luns"]}
    assert luns and all(lun["path_policy"] == "VMW_PSP_FIXED" and lun["paths"] >= 1 for lun in luns.values())
    assert any(lun["queue_depth"] for lun in luns.values())
    # the adapters each LUN's paths run through, as the host lists them (the simulator's local disk on vmhba0)
    adapters = {a["adapter"]: a for lun in luns.values() for a in lun["adapters"]}
    assert adapters["vmhba0"] == {"adapter": "vmhba0", "model": "PVSCSI SCSI Controller", "driver": "pvscsi"}
    assert all(lun["adapters"] for lun in luns.values())
    assert facts["read_at"].endswith("+00:00")


def test_a_vm_not_in_vcenter_is_named_with_the_ones_that_are(vcenter: str) -> None:
    done = _facts(vcenter, "--vm", "gus_fio_1")
    assert done.returncode == 2
    assert "gus_fio_1" in done.stderr and "DC0_C0_RP0_VM0" in done.stderr and "Traceback" not in done.stderr


def test_credentials_come_only_from_the_environment_or_a_file_outside_the_study(
    vcenter: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    none = {"BENCHLIB_VSPHERE_USER": "", "BENCHLIB_VSPHERE_PASSWORD": ""}
    done = _facts(vcenter, env=none)
    assert done.returncode == 2 and "BENCHLIB_VSPHERE_USER" in done.stderr
    secrets = tmp_path / "vcenter.toml"
    secrets.write_text('user = "user"\npassword = "pass"\n')
    assert _facts(vcenter, env={**none, "BENCHLIB_VSPHERE_CREDENTIALS": str(secrets)}).returncode == 0
    monkeypatch.delenv("BENCHLIB_VSPHERE_USER", raising=False)
    monkeypatch.delenv("BENCHLIB_VSPHERE_PASSWORD", raising=False)
    monkeypatch.setenv("BENCHLIB_VSPHERE_CREDENTIALS", str(tmp_path / "missing.toml"))
    with pytest.raises(VSphereError, match="no such credentials file"):
        credentials()
    study = tmp_path / "study"  # a file inside a study would be bundled with it, password and all
    (study / "cells").mkdir(parents=True)
    (study / "study.toml").write_text('[study]\nname = "s"\n')
    (study / "cells" / "vcenter.toml").write_text('user = "user"\npassword = "pass"\n')
    monkeypatch.setenv("BENCHLIB_VSPHERE_CREDENTIALS", str(study / "cells" / "vcenter.toml"))
    with pytest.raises(VSphereError, match="inside the study or plan folder") as refused:
        credentials()
    assert "pass" not in str(refused.value).replace("password", "")
    secrets.chmod(0)
    monkeypatch.setenv("BENCHLIB_VSPHERE_CREDENTIALS", str(secrets))
    if os.geteuid() != 0:  # root reads any file: the message is checked where a refusal can happen
        with pytest.raises(VSphereError, match="cannot read the credentials file"):
            credentials()


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("http://vc.example.com", "plain http would send the password in clear"),
        ("https://root:secret@vc.example.com", "credentials never go in the"),
        ("ftp://vc.example.com", "a vCenter address is"),
        ("ftp://administrator:Hunter2!@vc.example", "credentials never go in the"),
        ("htps://root:secret@vc", "credentials never go in the"),
        ("https://admin:secret@:443", "credentials never go in the"),
        ("http://localhost.evil.com:8989", "plain http"),
        ("http://127.0.0.1.nip.io", "plain http"),
        ("http://0x7f000001", "plain http"),  # names resolve again at connect: only literal loopback
        ("https://vc.example:99999", "port is not a number"),
        ("https://vc:abc", "port is not a number"),
        ("https://vc example", "a vCenter address is"),
        ("http://127.0.0.1:0", "a vCenter address is"),
        ("https://vc.example/some/where", "no path beyond /sdk"),
    ],
)
def test_addresses_that_would_leak_the_password_are_refused(address: str, why: str) -> None:
    with pytest.raises(VSphereError, match=why) as refused:
        Server.parse(address)
    assert "secret" not in str(refused.value) and "Hunter2" not in str(refused.value)


def test_loopback_addresses_as_written_are_plain_http_and_spaces_around_do_not_matter() -> None:
    assert Server.parse(" http://127.0.0.1:8989 ") == Server("127.0.0.1", 8989, "http")
    assert Server.parse("http://[::1]:8989/sdk").host == "::1" and Server.parse("http://localhost:1").port == 1


def test_tls_is_verified_unless_the_user_says_otherwise(vcsim: Path, tmp_path: Path) -> None:
    """HTTPS to a server whose certificate nobody trusts is refused with what to do, even on loopback.

    pyVmomi on its own skips the check for 127.0.0.1; benchlib does not. The lab's CA trusted through
    SSL_CERT_FILE is accepted, the certificate's name is checked, and --insecure accepts anything.
    """
    with _serving(vcsim, "-tls") as (address, certificate):
        assert address.startswith("https://127.0.0.1:")
        refused = _facts(address, "--vm", "DC0_C0_RP0_VM0")
        assert refused.returncode != 0 and "CERTIFICATE_VERIFY_FAILED" in refused.stderr
        assert "SSL_CERT_FILE" in refused.stderr and "--insecure" in refused.stderr and refused.stdout == ""
        ca = tmp_path / "lab-ca.pem"
        ca.write_text(certificate)
        trusted = _facts(address, "--vm", "DC0_C0_RP0_VM0", env={"SSL_CERT_FILE": str(ca)})
        assert trusted.returncode == 0, trusted.stderr
        assert json.loads(trusted.stdout)["vms"][0]["vm"] == "DC0_C0_RP0_VM0"
        other_name = _facts(address.replace("127.0.0.1", "localhost"), "--vm", "x", env={"SSL_CERT_FILE": str(ca)})
        assert other_name.returncode != 0 and "not valid for 'localhost'" in other_name.stderr
        insecure = _facts(address, "--vm", "DC0_C0_RP0_VM0", "--insecure")
        assert insecure.returncode == 0 and json.loads(insecure.stdout)["server"] == address.removeprefix("https://")


def test_an_address_without_a_scheme_is_https_on_port_443() -> None:
    assert Server.parse("vc.example.com") == Server("vc.example.com", 443, "https")
    assert Server.parse("http://127.0.0.1:8989") == Server("127.0.0.1", 8989, "http")


def test_a_study_whose_levels_contradict_vcenter_is_refused_naming_the_vm(vcenter: str, tmp_path: Path) -> None:
    """study.toml maps a VM's files to controller LSI; vCenter says its disk hangs on PVSCSI: ingest refuses."""
    from benchlib.errors import StudyError
    from benchlib.ingest import ingest_study
    from benchlib.store import StaleStudyError, open_study
    from tests.conftest import corpus_dir

    study = tmp_path / "raw" / "controllers"
    outputs = sorted(corpus_dir("fio-json").glob("*.json"))[:2]
    (study / "PVSCSI" / "DC0_C0_RP0_VM0").mkdir(parents=True)
    shutil.copy(outputs[0], study / "PVSCSI" / "DC0_C0_RP0_VM0" / "run1.json")
    declared = (
        '[factors]\ncontroller = ["PVSCSI", "LSI"]\nsioc = ["on", "off"]\n'
        '[[files]]\nglob = "{controller}/{vm}/*.json"\nlevels = { sioc = "on" }\n'
        '[vsphere]\ncontroller = "controller"\nsioc = "sioc"\n'
    )
    (study / "study.toml").write_text(declared)
    done = _facts(vcenter, "--vm", "DC0_C0_RP0_VM0", "--output", str(study / "benchlib-vsphere.json"))
    assert done.returncode == 0, done.stderr
    report = ingest_study(study, tmp_path / "processed")  # PVSCSI as vCenter says; SIOC not reported: unchecked
    assert report.ingested == ["PVSCSI/DC0_C0_RP0_VM0/run1.json"] and report.quarantined == []
    (study / "LSI" / "DC0_C0_RP0_VM0").mkdir(parents=True)
    shutil.copy(outputs[1], study / "LSI" / "DC0_C0_RP0_VM0" / "run2.json")  # the same VM, said to be LSI
    with pytest.raises(StudyError) as refused:
        ingest_study(study, tmp_path / "processed")
    message = str(refused.value)
    assert (
        "DC0_C0_RP0_VM0: study.toml gives controller = 'LSI'" in message
        and "vCenter says controller 'PVSCSI'" in message
    )
    assert "run1.json" not in message  # the run that agrees is not named
    with pytest.raises(StaleStudyError):  # nothing half-checked is served
        open_study(study, tmp_path / "processed")
    (study / "study.toml").write_text(declared + 'disk = "Hard disk 9"\n')
    with pytest.raises(StudyError, match=r"has no disk labelled 'Hard disk 9'.*disk-"):
        ingest_study(study, tmp_path / "processed")


VSPHERE_PLAN = """
[study]
name = "controllers"
[run]
runtime_s = 1
repetitions = 1
output = "study"
[target]
file = "{targets}/{{host}}.dat"
size = "8MiB"
[options]
ioengine = "psync"
direct = 0
[vsphere]
server = "{server}"
vms = {{ local = "DC0_C0_RP0_VM0" }}
check = {{ controller = "controller" }}
[matrix.controller]
levels = ["{level}"]
[[profiles]]
use = "randread-4k"
"""


def test_a_run_records_vcenters_facts_with_every_cell_and_ingest_checks_the_levels(
    vcenter: str, fio_binary: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan with [vsphere]: each cell's folder holds the VM's facts; a level vCenter contradicts is refused."""
    from benchlib.errors import StudyError
    from benchlib.ingest import ingest_study
    from benchlib.runner import load_plan, run_plan
    from benchlib.store import load_study_tables

    for key, value in LOGIN.items():
        monkeypatch.setenv(key, value)
    results = {}
    for level in ("PVSCSI", "LSI"):
        work = tmp_path / level
        work.mkdir()
        plan = work / "plan.toml"
        plan.write_text(VSPHERE_PLAN.format(targets=work / "targets", server=vcenter, level=level))
        summary = run_plan(load_plan(plan), vcenter=vcenter)
        assert summary.done == 1, summary
        for written in (work / "study").rglob("*"):  # the password is in no file of the study
            assert not written.is_file() or LOGIN["BENCHLIB_VSPHERE_PASSWORD"].encode() not in written.read_bytes()
        (facts_file,) = (work / "study").rglob("benchlib-vsphere.json")
        facts = json.loads(facts_file.read_text())
        (vm,) = facts["vms"]
        assert vm["vm"] == "DC0_C0_RP0_VM0" and [d["controller"] for d in vm["disks"]] == ["PVSCSI"]
        assert "[vsphere]" in (work / "study" / "study.toml").read_text()
        try:
            results[level] = ingest_study(work / "study", work / "processed")
        except StudyError as exc:
            results[level] = str(exc)
    assert results["PVSCSI"].quarantined == [] and results["PVSCSI"].ingested
    runs = load_study_tables(results["PVSCSI"].processed).runs
    (host,) = set(runs["host"])  # the name this machine's runs carry, recorded beside the VM's
    assert (
        json.loads(next((tmp_path / "PVSCSI" / "study").rglob("benchlib-vsphere.json")).read_text())["vms"][0][
            "fio_host"
        ]
        == host
    )
    assert f"DC0_C0_RP0_VM0 (fio host {host}): study.toml gives controller = 'LSI'" in results["LSI"]
    labels = dict(runs.filter(pl.col("tool") == "fio")["labels"][0].struct.unnest().iter_rows())  # joined to the run
    assert labels["vcenter.vm"] == "DC0_C0_RP0_VM0" and labels["vcenter.controller"] == "PVSCSI"
    assert labels["vcenter.sioc"] == "on"  # the datastore's Storage I/O Control, as vCenter reports it
    assert "vCenter says controller 'PVSCSI'" in results["LSI"]


def test_a_plan_with_a_vsphere_section_names_its_mistakes(tmp_path: Path) -> None:
    from benchlib.runner import PlanError, load_plan

    for bad, why in (
        ('server = "http://vc.example.com"', "plain http"),
        ('server = "https://vc.example.com"\nvms = { "10.0.0.9" = "vm1" }', "not a host of this plan"),
        ('server = "https://vc.example.com"\nvms = { local = "vm1" }\ncheck = { controller = "ctrl" }', "naming a"),
    ):
        plan = tmp_path / "plan.toml"
        text = VSPHERE_PLAN.format(targets=tmp_path, server="https://x", level="LSI")
        text = text.replace(
            'server = "https://x"\nvms = { local = "DC0_C0_RP0_VM0" }\ncheck = { controller = "controller" }', bad
        )
        plan.write_text(text)
        with pytest.raises(PlanError, match=why):
            load_plan(plan)


LUN_PLAN = """
[study]
name = "round-robin"
[run]
runtime_s = 2
repetitions = 1
output = "study"
[target]
file = "{targets}/{{host}}.dat"
size = "8MiB"
[options]
ioengine = "psync"
direct = 0
[vsphere]
server = "{server}"
vms = {{ local = "DC0_C0_RP0_VM0" }}
check = {{ controller = "controller", sioc = "sioc", path_policy = "multipath", rr_iops = "rr_limit" }}
device = "naa.624a9370b1c2d3e4f5a6b7c800011001"
[esxi]
hosts = ["esx01.lab"]
command = "{python} {esxcli} {data} {{esxi}} {{esxcli}}"
[[esxtop]]
host = "esx01.lab"
command = "{python} {esxtop} {{esxi}} {{delay}} {{samples}} {capture}"
delay = 1
[matrix.controller]
levels = ["PVSCSI"]
[matrix.sioc]
levels = ["{sioc}"]
[matrix.multipath]
levels = ["RR"]
[matrix.rr_limit]
levels = ["{limit}"]
[[profiles]]
use = "randread-4k"
"""


def test_a_plan_with_vsphere_esxi_and_esxtop_captures_checks_and_aligns_every_cell(
    vcenter: str, fio_binary: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole host side of a cell: vCenter's facts, the host's esxcli lists and an esxtop capture.

    Controller and SIOC come from vCenter (the simulator reports SIOC on, 30 ms), path policy and
    the Round Robin limit from esxcli; all are checked against the levels at ingest, and the esxtop
    samples taken while fio ran are attributed to its run.
    """
    from benchlib.errors import StudyError
    from benchlib.ingest import ingest_study
    from benchlib.runner import load_plan, run_plan
    from benchlib.stats.hostside import counters_during_runs
    from benchlib.store import load_study_tables, scan_table
    from tests.conftest import corpus_dir

    for key, value in LOGIN.items():
        monkeypatch.setenv(key, value)
    shells = {
        "esxcli": esxi_standins.write(tmp_path, "esxcli-shell.py", esxi_standins.ESXCLI),
        "esxtop": esxi_standins.write(tmp_path, "esxtop-shell.py", esxi_standins.ESXTOP),
    }
    outcome = {}
    # as declared: PVSCSI, SIOC on, RR switching paths after every I/O (iops=1); then SIOC off and limit 1000
    for sioc, limit in (("on", "1"), ("off", "1000")):
        work = tmp_path / limit
        work.mkdir()
        plan = work / "plan.toml"
        plan.write_text(
            LUN_PLAN.format(
                targets=work / "targets",
                server=vcenter,
                python=sys.executable,
                data=ROOT / "tests" / "data" / "esxcli",
                capture=corpus_dir("esxtop") / "esxtopd__small-esxtop-data.csv",
                sioc=sioc,
                limit=limit,
                **shells,
            )
        )
        assert run_plan(load_plan(plan, allow_facts_command=True), vcenter=vcenter).done == 1
        (listed,) = (work / "study").rglob("benchlib-esxi.json")
        lun = next(
            d for d in json.loads(listed.read_text())["esx01.lab"]["devices"] if d["device"].startswith("naa.624a")
        )
        assert (lun["path_policy"], lun["rr_iops_limit"], lun["device_max_queue_depth"]) == ("VMW_PSP_RR", 1, 64)
        (facts,) = (work / "study").rglob("benchlib-vsphere.json")
        (datastore,) = json.loads(facts.read_text())["vms"][0]["datastores"].values()
        assert (datastore["sioc_enabled"], datastore["congestion_threshold_ms"]) == (True, 30)
        assert len(list((work / "study").rglob("esxtop-esx01.lab.csv"))) == 1
        try:
            outcome[limit] = ingest_study(work / "study", work / "processed")
        except StudyError as exc:
            outcome[limit] = str(exc)
    assert outcome["1"].quarantined == []
    runs = load_study_tables(outcome["1"].processed).runs
    fio_runs = runs.filter(pl.col("tool") == "fio", ~pl.col("is_aggregate"))
    labels = dict(fio_runs["labels"][0].struct.unnest().iter_rows())
    assert (labels["vcenter.controller"], labels["vcenter.sioc"]) == ("PVSCSI", "on")
    assert (labels["esxi.path_policy"], labels["esxi.rr_iops_limit"], labels["esxi.device_queue_depth"]) == (
        "VMW_PSP_RR",
        "1",
        "64",
    )
    placed = counters_during_runs(fio_runs, scan_table(outcome["1"].processed, "host_counters").collect())
    (run,) = fio_runs.filter(pl.col("format").str.starts_with("fio-json"))["run_id"]
    assert placed.filter(pl.col("benchmark_run_id") == run)["sample"].n_unique() >= 1  # samples taken while fio ran
    refused = outcome["1000"]
    assert "DC0_C0_RP0_VM0 (fio host" in refused and "study.toml gives sioc = 'off'" in refused
    assert "esx01.lab: study.toml gives rr_limit = '1000'" in refused
    assert "esxcli says Round Robin IO operation limit 1 for naa.624a9370b1c2d3e4f5a6b7c800011001" in refused


@pytest.mark.parametrize(
    ("level", "fact", "agrees"),
    [
        ("LSI", "LSI Logic SAS", True),
        ("LSI", "LSI Logic Parallel", True),  # "LSI" alone: either LSI Logic controller
        ("lsi logic sas", "LSI Logic SAS", True),
        ("LSI Logic SAS", "LSI Logic Parallel", False),
        ("lsisas1068", "LSI Logic SAS", True),  # the .vmx file's name
        ("LSI SAS", "LSI Logic SAS", True),
        ("lsilogic-parallel", "LSI Logic SAS", False),
        ("PVSCSI", "LSI Logic SAS", False),
        ("ParaVirtual", "PVSCSI", True),
        ("VMware Paravirtual", "PVSCSI", True),  # the vSphere Client's name
        ("Paravirtual SCSI", "PVSCSI", True),
        ("AHCI", "SATA", True),
        ("NVMe controller", "NVMe", True),
        ("P", "PVSCSI", False),  # a letter names nothing
        ("", "PVSCSI", False),
    ],
)
def test_a_controller_level_names_a_controller_by_any_of_its_names(level: str, fact: str, agrees: bool) -> None:
    from benchlib.vsphere import controller_matches

    assert controller_matches(level, fact) is agrees


@pytest.mark.parametrize(
    ("fact", "level", "problem"),
    [
        ("controller", "P", "names no controller"),
        ("controller", "PVSCSI", None),
        ("sioc", "SIOC on", None),
        ("sioc", "sioc-enabled", None),
        ("sioc", "maybe", "neither on nor off"),
        ("path_policy", "R", "names no path selection policy"),
        ("path_policy", "VMW_PSP_RR", None),
        ("rr_iops", "1000", None),
        ("rr_iops", "none", None),
        ("rr_iops", "1e3", "not a Round Robin IO operation limit"),
    ],
)
def test_a_level_that_names_nothing_is_refused_not_passed(fact: str, level: str, problem: str | None) -> None:
    from benchlib.vsphere import level_problem, sioc_level

    said = level_problem(fact, level)
    assert said is None if problem is None else problem in said
    assert sioc_level("SIOC on") is True and sioc_level("sioc-disabled") is False and sioc_level("n") is False


@pytest.mark.parametrize(
    ("level", "policy", "agrees"),
    [
        ("RR", "VMW_PSP_RR", True),
        ("round robin", "VMW_PSP_RR", True),
        ("Fixed", "VMW_PSP_RR", False),
        ("MRU", "VMW_PSP_MRU", True),
        ("RR", None, False),
        ("R", "VMW_PSP_RR", False),
        ("most recently used", "VMW_PSP_MRU", True),
    ],
)
def test_a_multipath_level_names_the_path_selection_policy(level: str, policy: str | None, agrees: bool) -> None:
    from benchlib.vsphere import policy_matches

    assert policy_matches(level, policy) is agrees


def _one_run_study(tmp_path: Path, factor: str, level: str, vsphere: str) -> Path:
    """A study of one fio run of one VM (VM0) at one level, with the ``[vsphere]`` text given."""
    from tests.conftest import corpus_dir

    study = tmp_path / "raw" / "s"
    (study / level / "VM0").mkdir(parents=True, exist_ok=True)
    shutil.copy(sorted(corpus_dir("fio-json").glob("*.json"))[0], study / level / "VM0" / "run.json")
    (study / "study.toml").write_text(
        f'[factors]\n{factor} = ["{level}"]\n[[files]]\nglob = "{{{factor}}}/{{vm}}/*.json"\n{vsphere}'
    )
    return study


@pytest.mark.parametrize(
    ("record", "why"),
    [
        ("{{{", "Expecting property name"),
        ("[1, 2]", "no 'vms' list"),
        ('{"vms": ["x", 3]}', "vms[0] is not a VM with a name"),
        ('{"vms": [{"vm": "VM0", "disks": "x"}]}', "vms[0] disks is not a list of disks"),
        ('{"vms": [{"vm": "VM0", "disks": [{"controller": 7}]}]}', "vms[0].disks[0].controller is not text"),
        ('{"vms": [{"vm": "VM0", "disks": [], "datastores": ["x"]}]}', "datastores is not a table"),
        ("[" * 100_000 + "]" * 100_000, "RecursionError"),  # deeper than the parser goes
        ('{"vms": [{"vm": "VM0", "datastores": {"ds": {"sioc_enabled": [true]}}}]}', "sioc_enabled is not true or"),
        ('{"vms": [{"vm": "VM0", "disks": [{"label": "d\\u001b]0;PWNED\\u0007"}]}]}', "control characters"),
        ('{"vms": [{"vm": "VM0", "vcpus": true}]}', "vms[0].vcpus is not a whole number"),
        ('{"vms": [{"vm": "' + "x" * 5000 + '"}]}', "more than 1000 characters"),
        ('{"vms": [{"vm": "VM0", "luns": [{"lun": "naa.1", "adapters": "vmhba0"}]}]}', "luns is not a list of LUNs"),
        ('{"vms": [{"vm": "VM0", "luns": [{"lun": "naa.1", "adapters": [{"driver": 5}]}]}]}', "adapters[0].driver is"),
        ("\udcff", "not JSON"),
    ],
)
def test_a_malformed_facts_file_is_quarantined_and_costs_no_run(tmp_path: Path, record: str, why: str) -> None:
    from benchlib.ingest import ingest_study
    from benchlib.store import load_study_tables

    study = _one_run_study(tmp_path, "controller", "PVSCSI", '[vsphere]\ncontroller = "controller"\n')
    if record == "\udcff":
        (study / "benchlib-vsphere.json").write_bytes(b"\xff\xfe{")  # not UTF-8
    else:
        (study / "benchlib-vsphere.json").write_text(record)
    report = ingest_study(study, tmp_path / "processed")
    assert report.ingested == ["PVSCSI/VM0/run.json"]
    ((rel, reason),) = report.quarantined
    assert rel == "benchlib-vsphere.json" and why in reason
    _one_run_study(tmp_path, "controller", "PVSCSI", "")  # without [vsphere] too: its facts would be the runs' labels
    again = ingest_study(study, tmp_path / "processed")
    assert [r for r, _ in again.quarantined] == ["benchlib-vsphere.json"]
    assert load_study_tables(again.processed).runs.height > 0


@pytest.mark.parametrize(
    ("record", "why"),
    [
        ('{"esx01": {"devices": [{"device": "naa.1", "path_policy": 5}]}}', "esx01.devices[0].path_policy is not text"),
        ('{"esx01": {"devices": [{"device": "naa.1", "rr_iops_limit": {"n": 1}}]}}', "rr_iops_limit is not a whole"),
        ('{"esx01": {"devices": [{"device": "naa.1", "rr_iops_limit": 1.0}]}}', "rr_iops_limit is not a whole"),
        ('{"esx01": {"devices": [{"device": "naa.1", "rr_iops_limit": true}]}}', "rr_iops_limit is not a whole"),
        ("[" * 100_000 + "]" * 100_000, "RecursionError"),
    ],
)
def test_a_malformed_esxcli_record_is_quarantined_with_the_field_named(tmp_path: Path, record: str, why: str) -> None:
    from benchlib.ingest import ingest_study

    study = _one_run_study(tmp_path, "multipath", "RR", '[vsphere]\npath_policy = "multipath"\ndevice = "naa.1"\n')
    (study / "benchlib-esxi.json").write_text(record)
    report = ingest_study(study, tmp_path / "processed")
    assert report.ingested == ["RR/VM0/run.json"]
    ((rel, reason),) = report.quarantined
    assert rel == "benchlib-esxi.json" and why in reason


def test_the_hosts_commands_get_no_credentials_and_odd_bytes_cost_only_their_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan's esxcli command runs without vCenter's password in its environment; bytes that are not
    UTF-8 in its output are read as text, and text no reader foresaw is that host's error, not the run's."""
    from types import SimpleNamespace

    from benchlib.runner.execute import esxi_devices

    monkeypatch.setenv("BENCHLIB_VSPHERE_PASSWORD", "Zq9-odd-pw")
    nmp = (ROOT / "tests" / "data" / "esxcli" / "nmp-device-list.txt").read_bytes()
    core = (ROOT / "tests" / "data" / "esxcli" / "core-device-list.txt").read_bytes()
    (tmp_path / "nmp.txt").write_bytes(nmp)
    (tmp_path / "core.txt").write_bytes(core.replace(b"Display Name: ", b"Display Name: Disque \xe9 ", 1))
    shell = tmp_path / "esxcli.sh"
    shell.write_text(
        f'env > {tmp_path}/env.txt\ncase "$*" in *nmp*) cat {tmp_path}/nmp.txt;; *) cat {tmp_path}/core.txt;; esac\n'
    )
    plan = SimpleNamespace(esxi=SimpleNamespace(line=lambda host, esxcli: f"sh {shell} {host} {esxcli}"))
    listed = esxi_devices(plan, "esx01.lab")
    assert "error" not in listed and any("Disque \ufffd" in (d.get("display_name") or "") for d in listed["devices"])
    assert "Zq9-odd-pw" not in (tmp_path / "env.txt").read_text()
    (tmp_path / "nmp.txt").write_text("esxcli: unknown command\n")
    assert "no device blocks" in esxi_devices(plan, "esx01.lab")["error"]


def test_a_vm_is_found_by_name_whatever_its_case_or_domain_and_a_run_without_one_is_said(tmp_path: Path) -> None:
    from benchlib.errors import StudyError
    from benchlib.ingest import ingest_study
    from tests.conftest import corpus_dir

    study = tmp_path / "raw" / "s"
    run = sorted(corpus_dir("fio-json").glob("*.json"))[0]
    for vm in ("vm0", "other"):
        (study / "LSI" / vm).mkdir(parents=True)
        (study / "LSI" / vm / "run.json").write_text(run.read_text() + "\n" * len(vm))  # two files, one content
    (study / "study.toml").write_text(
        '[factors]\ncontroller = ["LSI"]\n[[files]]\nglob = "{controller}/{vm}/*.json"\n'
        '[vsphere]\ncontroller = "controller"\n'
    )
    facts = {"vms": [{"vm": "VM0.lab.local", "disks": [{"label": "Hard disk 1", "controller": "PVSCSI"}]}]}
    (study / "benchlib-vsphere.json").write_text(json.dumps(facts))
    with pytest.raises(StudyError, match=r"VM0\.lab\.local \(fio host vm0\): study.toml gives controller = 'LSI'"):
        ingest_study(study, tmp_path / "processed")  # vm0 is VM0.lab.local: the contradiction is found
    facts["vms"][0]["disks"][0]["controller"] = "LSI Logic SAS"
    (study / "benchlib-vsphere.json").write_text(json.dumps(facts))
    report = ingest_study(study, tmp_path / "processed")
    notes = [note for _, note in report.notes]
    assert any("host 'other' is no VM of benchlib-vsphere.json" in n and "not checked" in n for n in notes), notes


@contextlib.contextmanager
def _listener(answer: bytes | None) -> Iterator[tuple[int, list[bytes]]]:
    """A TCP listener on 127.0.0.1 that records what it receives; it answers ``answer`` (None: closes at once)."""
    import socket
    import threading

    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    received: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                with contextlib.suppress(OSError):
                    received.append(conn.recv(65536))
                    if answer is not None:
                        conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], received
    finally:
        stop.set()
        thread.join(5)
        server.close()


def test_a_plans_vcenter_gets_no_credentials_unless_the_user_names_it(
    fio_binary: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A received plan may name any server: without --vcenter naming that very server, nothing is sent to it,
    not even a connection; a named server that is not vCenter is one message, not a traceback."""
    from benchlib.runner import PlanError, load_plan, run_plan

    for key, value in LOGIN.items():
        monkeypatch.setenv(key, value)
    with _listener(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nnot vc :)") as (port, received):
        server = f"http://127.0.0.1:{port}"
        plan = tmp_path / "plan.toml"
        plan.write_text(VSPHERE_PLAN.format(targets=tmp_path / "targets", server=server, level="PVSCSI"))
        with pytest.raises(PlanError, match=f"only to a server you name yourself.*--vcenter {server}"):
            run_plan(load_plan(plan))
        with pytest.raises(PlanError, match="--vcenter names http://127.0.0.1:1; nothing was sent"):
            run_plan(load_plan(plan), vcenter="http://127.0.0.1:1")
        done = subprocess.run(
            [sys.executable, "-m", "benchlib.cli", "run", str(plan)], capture_output=True, text=True, check=False
        )
        assert done.returncode != 0 and f"--vcenter {server}" in done.stderr and "Traceback" not in done.stderr
        dry = subprocess.run(
            [sys.executable, "-m", "benchlib.cli", "run", "--dry-run", str(plan)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert dry.returncode == 0 and "vCenter: " in dry.stdout
        assert received == []  # not one connection
        assert not (tmp_path / "targets").exists()  # and nothing written
        with pytest.raises(VSphereError, match=f"127.0.0.1:{port}: no vCenter answered there"):
            run_plan(load_plan(plan), vcenter=server)
        assert received and not any(LOGIN["BENCHLIB_VSPHERE_PASSWORD"].encode() in r for r in received)
        assert not (tmp_path / "targets").exists()  # it stopped before any target was made
        seen = len(received)
        plan.write_text(plan.read_text().replace("[vsphere]\n", "[vsphere]\ninsecure = true\n"))
        with pytest.raises(PlanError, match="insecure = true turns off the check.*--vcenter-insecure"):
            run_plan(load_plan(plan), vcenter=server)  # a plan alone may not turn certificate checks off
        assert len(received) == seen
    from benchlib.vsphere import Server

    with pytest.raises(VSphereError, match="letters other than ASCII"):
        Server.parse("https://vc.ex\u0430mple.com")  # a Cyrillic a: another server's name that looks alike


SIOC_PLAN = """
[study]
name = "sioc"
[run]
runtime_s = 1
repetitions = 2
output = "study"
[target]
file = "{targets}/{{host}}.dat"
size = "8MiB"
[options]
ioengine = "psync"
direct = 0
[vsphere]
server = "{server}"
vms = {{ local = "DC0_C0_RP0_VM0" }}
apply = {{ sioc = "sioc" }}
datastores = ["{datastore}"]
[matrix.sioc]
levels = ["off", "on"]
[[profiles]]
use = "randread-4k"
"""


@pytest.fixture(autouse=True)
def _own_journals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test keeps benchlib's locks and journals of datastores it sets in a folder of its own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _sioc(vcenter: str) -> bool:
    from benchlib.vsphere import connect, datastore_sioc

    return datastore_sioc(connect(Server.parse(vcenter)), ["LocalDS_0"])["LocalDS_0"]


def test_a_plan_sets_sioc_to_each_cells_level_records_every_change_and_puts_it_back(
    vcenter: str, fio_binary: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 42: SIOC on and off as a factor benchlib sets through vCenter (ConfigureDatastoreIORM_Task), only
    with --apply-settings. Each cell's facts, read by the API after the change, say its level; every change is
    in benchlib-settings.json with its cell; the datastore is as it was at the end; ingest checks the levels."""
    from benchlib.ingest import ingest_study
    from benchlib.runner import PlanError, load_plan, read_plan, run_plan
    from benchlib.runner.describe import describe_plan
    from benchlib.runner.execute import fio_binary as find_fio
    from benchlib.runner.settings import SettingsError

    for key, value in LOGIN.items():
        monkeypatch.setenv(key, value)
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(SIOC_PLAN.format(targets=tmp_path / "targets", server=vcenter, datastore="LocalDS_0"))
    plan = load_plan(plan_file)
    said = "\n".join(describe_plan(plan, read_plan(plan, find_fio())))
    assert "SIOC on LocalDS_0 set, before each cell" in said and "then put back as vCenter had" in said
    with pytest.raises(PlanError, match="--apply-settings"):
        run_plan(plan, vcenter=vcenter)
    assert not (tmp_path / "targets").exists() and _sioc(vcenter)  # nothing run, nothing changed
    summary = run_plan(plan, vcenter=vcenter, apply_settings=True)
    assert summary.done == 4
    for facts_file in (tmp_path / "study").rglob("benchlib-vsphere.json"):
        level = next(p.split("=", 1)[1] for p in facts_file.relative_to(tmp_path / "study").parts if "=" in p)
        (vm,) = json.loads(facts_file.read_text())["vms"]
        assert vm["datastores"]["LocalDS_0"]["sioc_enabled"] == (level == "on"), facts_file
    record = json.loads((tmp_path / "study" / "benchlib-settings.json").read_text())
    (run,) = record["runs"]
    assert run["original"] == {"LocalDS_0": {"sioc": True}} and run["restored"]
    changes = run["changes"]
    assert changes and all(c["datastore"] == "LocalDS_0" and c["from"] != c["to"] for c in changes)
    assert all("sioc=off" in c["cell"] for c in changes if c["cell"] and not c["to"])
    assert _sioc(vcenter)  # put back
    report = ingest_study(tmp_path / "study", tmp_path / "processed")  # the levels agree with vCenter's facts
    assert report.quarantined == [] and len(report.ingested) >= 4

    # a planted record (a study from elsewhere) says the datastore had SIOC off: it is a record, never followed
    planted = {"runs": [{**run, "original": {"LocalDS_0": {"sioc": False}}, "restored": None}]}
    (tmp_path / "study" / "benchlib-settings.json").write_text(json.dumps(planted))
    assert run_plan(plan, vcenter=vcenter, apply_settings=True).done == 0 and _sioc(vcenter)
    (tmp_path / "study" / "benchlib-settings.json").write_text("[" * 10000)  # not as benchlib writes it
    with pytest.raises(SettingsError, match="cannot be read; move it away"):
        run_plan(plan, vcenter=vcenter, apply_settings=True)


#: a run of the plan that kills itself (SIGKILL: no clean-up at all) during its first cell at SIOC off
KILLED_RUN = """
import os, signal, sys
from benchlib.runner import load_plan, run_plan
from benchlib.vsphere import Server, connect, datastore_sioc
service = connect(Server.parse(sys.argv[2]))
def kill(done, total, label):
    if done > 0 and not datastore_sioc(service, ["LocalDS_0"])["LocalDS_0"]:
        os.kill(os.getpid(), signal.SIGKILL)
run_plan(load_plan(sys.argv[1]), vcenter=sys.argv[2], apply_settings=True, progress=kill)
"""


def test_a_run_killed_at_sioc_off_is_put_back_by_the_next_run_on_this_machine(
    vcenter: str, fio_binary: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kill -9 in the cell at SIOC off leaves it off, and this machine's journal says so: the next run puts it
    back before anything (recorded as a change of no cell), unless someone set it since; a plan that no
    longer applies SIOC is refused while the journal is there."""
    from benchlib.runner import PlanError, load_plan, run_plan
    from benchlib.runner.settings import SettingsError, state_folder
    from benchlib.vsphere import connect, set_sioc

    for key, value in LOGIN.items():
        monkeypatch.setenv(key, value)
    plan_file = tmp_path / "plan.toml"
    text = SIOC_PLAN.format(targets=tmp_path / "targets", server=vcenter, datastore="LocalDS_0")
    plan_file.write_text(text.replace("repetitions = 2", "repetitions = 1"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    killed = subprocess.run([sys.executable, "-c", KILLED_RUN, str(plan_file), vcenter], env=env, timeout=300)
    assert killed.returncode == -9 and not _sioc(vcenter)  # killed, SIOC left off
    (journal,) = state_folder().glob("*.json")
    assert json.loads(journal.read_text())["original"] is True
    without = plan_file.read_text().replace('apply = { sioc = "sioc" }\ndatastores = ["LocalDS_0"]\n', "")
    (tmp_path / "without.toml").write_text(without)
    with pytest.raises(PlanError, match="did not put them back .*LocalDS_0 SIOC on.*no longer sets them"):
        run_plan(load_plan(tmp_path / "without.toml"), vcenter=vcenter)
    (tmp_path / "other").mkdir()  # another plan, on the same VM, that sets nothing: its cells would run at off
    (tmp_path / "other" / "plan.toml").write_text(without.replace(str(tmp_path / "targets"), str(tmp_path / "t2")))
    with pytest.raises(SettingsError, match="left a setting changed on datastore LocalDS_0 of this plan's VMs"):
        run_plan(load_plan(tmp_path / "other" / "plan.toml"), vcenter=vcenter, levels={"sioc": ["on"]})
    assert set_sioc(connect(Server.parse(vcenter)), "LocalDS_0", True) is True  # someone sets it by hand
    with pytest.raises(SettingsError, match="left SIOC off on LocalDS_0, and vCenter has it on: someone set it"):
        run_plan(load_plan(plan_file), vcenter=vcenter, apply_settings=True)
    assert set_sioc(connect(Server.parse(vcenter)), "LocalDS_0", False) is False  # as the killed run left it
    assert run_plan(load_plan(plan_file), vcenter=vcenter, apply_settings=True).done == 2
    assert _sioc(vcenter) and not list(state_folder().glob("*.json"))
    runs = json.loads((tmp_path / "study" / "benchlib-settings.json").read_text())["runs"]
    assert runs[0]["restored"] is None and runs[-1]["restored"]  # the killed run's record stays as it left it
    assert runs[-1]["changes"][0] == {**runs[-1]["changes"][0], "cell": None, "from": False, "to": True}


def test_an_interrupted_run_puts_sioc_back(
    vcenter: str, fio_binary: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C during the cell at SIOC off: the datastore's SIOC is put back before the run stops."""
    from benchlib.runner import RunInterrupted, load_plan, run_plan

    for key, value in LOGIN.items():
        monkeypatch.setenv(key, value)
    plan_file = tmp_path / "plan.toml"
    text = SIOC_PLAN.format(targets=tmp_path / "targets", server=vcenter, datastore="LocalDS_0")
    plan_file.write_text(text.replace('levels = ["off", "on"]', 'levels = ["off"]'))

    def stop(done: float, total: float, label: str) -> None:
        if done > 0 and not _sioc(vcenter):  # the off cell running, SIOC off
            raise KeyboardInterrupt

    with pytest.raises(RunInterrupted, match="interrupted during randread-4k/sioc=off"):
        run_plan(load_plan(plan_file), vcenter=vcenter, apply_settings=True, progress=stop)
    assert _sioc(vcenter)
    assert json.loads((tmp_path / "study" / "benchlib-settings.json").read_text())["runs"][-1]["restored"]


def test_a_plan_that_applies_settings_names_its_mistakes(
    vcenter: str, fio_binary: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only SIOC, only from a factor whose levels say on or off, only on datastores the plan names, and a VM
    whose disk is elsewhere stops the run before anything changed."""
    from benchlib.runner import PlanError, load_plan, run_plan
    from benchlib.runner.settings import SettingsError

    for key, value in LOGIN.items():
        monkeypatch.setenv(key, value)
    good = SIOC_PLAN.format(targets=tmp_path / "targets", server=vcenter, datastore="LocalDS_0")
    plan_file = tmp_path / "plan.toml"
    for bad, why in (
        (
            good.replace('apply = { sioc = "sioc" }', 'apply = { path_policy = "sioc" }'),
            "sets only sioc, controller, rr",
        ),
        (good.replace('apply = { sioc = "sioc" }', 'apply = { controller = "sioc" }'), "'off', 'on' does not"),
        (good.replace('apply = { sioc = "sioc" }', 'apply = { sioc = "nope" }'), "names no \\[matrix\\] factor"),
        (good.replace('["off", "on"]', '["off", "maybe"]'), "'maybe' does not"),
        (good.replace('datastores = ["LocalDS_0"]\n', ""), "name each it may change"),
        (good.replace('apply = { sioc = "sioc" }', 'apply = { sioc = ["sioc"] }'), "names one factor"),
        (good.replace('["LocalDS_0"]', '["LocalDS_0", "LocalDS_0"]'), "names a datastore twice"),
        (
            good.replace("[vsphere]\n", '[vsphere]\ncheck = { sioc = "other" }\n')
            + '[matrix.other]\nlevels = ["on"]\n',
            "one factor says what sioc is",
        ),
    ):
        plan_file.write_text(bad)
        with pytest.raises(PlanError, match=why):
            load_plan(plan_file)
    plan_file.write_text(good)
    done = subprocess.run(
        [sys.executable, "-m", "benchlib.cli", "run", str(plan_file), "--vcenter", vcenter],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0 and "run with --apply-settings" in done.stderr and "Traceback" not in done.stderr
    for datastores, why in (
        ('["other"]', "DC0_C0_RP0_VM0's disk under test \\(.*\\) is on LocalDS_0, not on the datastores"),
        ('["LocalDS_0", "other"]', "names other, which holds no VM's disk under test"),
    ):
        plan_file.write_text(good.replace('datastores = ["LocalDS_0"]', f"datastores = {datastores}"))
        with pytest.raises(SettingsError, match=why):
            run_plan(load_plan(plan_file), vcenter=vcenter, apply_settings=True)
        assert not (tmp_path / "study" / "benchlib-settings.json").exists() and _sioc(vcenter)


def _threshold(vcenter: str) -> dict:
    from benchlib.vsphere import _datastores, connect, threshold_of

    return threshold_of(_datastores(connect(Server.parse(vcenter)), ["LocalDS_0"])["LocalDS_0"])


def test_a_plan_sets_siocs_congestion_threshold_to_each_cells_level_and_ingest_checks_it(
    vcenter: str, fio_binary: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 42: SIOC's congestion threshold as a factor benchlib sets (ConfigureDatastoreIORM_Task): 15 ms
    (manual) and 90% of peak throughput (automatic), read back, in each cell's facts, put back at the end; a
    level vCenter would refuse is refused in the plan; a facts file that contradicts a level is refused by
    ingest."""
    from benchlib.errors import StudyError
    from benchlib.ingest import ingest_study
    from benchlib.runner import PlanError, load_plan, read_plan, run_plan
    from benchlib.runner.describe import describe_plan
    from benchlib.runner.execute import fio_binary as find_fio

    for key, value in LOGIN.items():
        monkeypatch.setenv(key, value)
    before = _threshold(vcenter)
    plan_file = tmp_path / "plan.toml"
    good = (
        SIOC_PLAN.format(targets=tmp_path / "targets", server=vcenter, datastore="LocalDS_0")
        .replace('apply = { sioc = "sioc" }', 'apply = { sioc_threshold = "threshold" }')
        .replace('[matrix.sioc]\nlevels = ["off", "on"]', '[matrix.threshold]\nlevels = ["15", "90%"]')
        .replace("repetitions = 2", "repetitions = 1")
    )
    plan_file.write_text(good)
    plan = load_plan(plan_file)
    said = "\n".join(describe_plan(plan, read_plan(plan, find_fio())))
    assert "SIOC's congestion threshold on LocalDS_0 set, before each cell" in said
    assert "SIOC congestion threshold 15 ms" in said and "90% of peak throughput (automatic)" in said
    with pytest.raises(PlanError, match="--apply-settings"):
        run_plan(plan, vcenter=vcenter)
    assert _threshold(vcenter) == before
    assert run_plan(plan, vcenter=vcenter, apply_settings=True).done == 2
    seen = {}
    for facts_file in (tmp_path / "study").rglob("benchlib-vsphere.json"):
        level = next(p.split("=", 1)[1] for p in facts_file.relative_to(tmp_path / "study").parts if "=" in p)
        (vm,) = json.loads(facts_file.read_text())["vms"]
        store = vm["datastores"]["LocalDS_0"]
        seen[level] = (store["congestion_threshold_mode"], store["congestion_threshold_ms"], store["percent_of_peak"])
    (peak,) = [key for key in seen if key != "15"]  # the level as its folder names it
    assert seen["15"][:2] == ("manual", 15) and (seen[peak][0], seen[peak][2]) == ("automatic", 90)
    assert _threshold(vcenter) == before == {"mode": "manual", "ms": 30}  # put back
    (run,) = json.loads((tmp_path / "study" / "benchlib-settings.json").read_text())["runs"]
    assert run["original"] == {"LocalDS_0": {"sioc_threshold": before}} and run["restored"]
    report = ingest_study(tmp_path / "study", tmp_path / "processed")  # the levels agree with the facts
    assert report.quarantined == [] and len(report.ingested) >= 2
    facts_file = next(f for f in (tmp_path / "study").rglob("benchlib-vsphere.json") if "threshold=15" in str(f))
    facts = json.loads(facts_file.read_text())
    facts["vms"][0]["datastores"]["LocalDS_0"]["congestion_threshold_ms"] = 50  # vCenter said another threshold
    facts_file.write_text(json.dumps(facts))
    with pytest.raises(StudyError, match="gives threshold = '15' .* vCenter says sioc_threshold '50 ms'"):
        ingest_study(tmp_path / "study", tmp_path / "processed")

    for level, why in (("3", "'3' is not"), ("101", "'101' is not"), ("40%", "'40%' is not"), ("fast", "'fast' is")):
        plan_file.write_text(good.replace('"90%"]', f'"{level}"]'))
        with pytest.raises(PlanError, match=f"5 to 100 ms .*{why}"):
            load_plan(plan_file)
    plan_file.write_text(good.replace('["15", "90%"]', '["30", "30ms"]'))
    with pytest.raises(PlanError, match="name one setting"):
        load_plan(plan_file)


SHARES_PLAN = """
[study]
name = "shares"
[run]
runtime_s = 1
repetitions = 1
output = "study"
[target]
file = "{targets}/{{host}}.dat"
size = "8MiB"
[options]
ioengine = "psync"
direct = 0
[vsphere]
server = "{server}"
vms = {{ local = "DC0_C0_RP0_VM2" }}
disk = "disk-202-0"
shares = {{ local = 1500 }}
limits = {{ local = 300 }}
[matrix.block_size]
option = "bs"
levels = ["4k", "8k"]
[[profiles]]
use = "randread-4k"
"""


def _disk_io(vcenter: str, vm: str = "DC0_C0_RP0_VM2") -> dict:
    from benchlib.vsphere import connect, disk_io_of, disks_under_test, vms_named

    service = connect(Server.parse(vcenter))
    label, _ = disks_under_test(service, [vm], "disk-202-0")[vm]
    return disk_io_of(vms_named(service, [vm])[vm], label)


def test_a_plan_holds_each_test_disks_shares_and_limit_through_the_run_and_puts_them_back(
    vcenter: str, fio_binary: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 42: each VM's test disk's shares and IOPS limit (storageIOAllocation) set by the plan through the
    run, only with --apply-settings: every cell's facts (read through the API after) show them, the study's
    [shares] is what the run held (the fairness page judges by it), every change is recorded, and the disk has
    what it had at the end. A killed run's are put back by the next; the plan's mistakes are named."""
    from benchlib.ingest import ingest_study
    from benchlib.runner import PlanError, load_plan, read_plan, run_plan
    from benchlib.runner.describe import describe_plan
    from benchlib.runner.execute import fio_binary as find_fio
    from benchlib.runner.settings import SettingsError
    from benchlib.store import open_study
    from benchlib.study import load_study
    from benchlib.views import fairness

    for key, value in LOGIN.items():
        monkeypatch.setenv(key, value)
    before = _disk_io(vcenter)
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(SHARES_PLAN.format(targets=tmp_path / "targets", server=vcenter))
    plan = load_plan(plan_file)
    said = "\n".join(describe_plan(plan, read_plan(plan, find_fio())))
    assert "the test disk of DC0_C0_RP0_VM2 with 1500 shares and a limit of 300 IOPS: set before the first" in said
    with pytest.raises(PlanError, match="shares and IOPS limit of the test disk of DC0_C0_RP0_VM2.*--apply-settings"):
        run_plan(plan, vcenter=vcenter)
    assert _disk_io(vcenter) == before and not (tmp_path / "targets").exists()
    assert run_plan(plan, vcenter=vcenter, apply_settings=True).done == 2
    for facts_file in (tmp_path / "study").rglob("benchlib-vsphere.json"):
        (vm,) = json.loads(facts_file.read_text())["vms"]
        (disk,) = [d for d in vm["disks"] if d["label"] == "disk-202-0"]
        assert (disk["shares"], disk["shares_level"], disk["limit_iops"]) == (1500, "custom", 300), facts_file
    assert load_study(tmp_path / "study").shares == {socket.gethostname(): 1500.0}  # as the runs name it
    (run,) = json.loads((tmp_path / "study" / "benchlib-settings.json").read_text())["runs"]
    assert run["original"] == {"DC0_C0_RP0_VM2": {"disk_io": before}} and run["restored"]
    first, back = run["changes"]
    assert first["to"] == {"level": "custom", "shares": 1500, "limit": 300} and first["cell"]
    assert back["to"] == before and back["cell"] is None
    assert _disk_io(vcenter) == before  # put back

    plan_file.write_text(plan_file.read_text().replace("repetitions = 1", "repetitions = 2"))  # more to run
    killed = KILLED_DISK_IO.replace("{vcenter}", vcenter)
    done = subprocess.run([sys.executable, "-c", killed, str(plan_file)], capture_output=True, text=True, check=False)
    assert done.returncode == -9, done.stderr
    assert _disk_io(vcenter)["shares"] == 1500  # left set; this machine's journal says so
    (tmp_path / "other").mkdir()  # another plan on the VM, setting SIOC only: its cells would run at 1500 shares
    sioc_only = SIOC_PLAN.format(targets=tmp_path / "t2", server=vcenter, datastore="LocalDS_0")
    (tmp_path / "other" / "plan.toml").write_text(
        sioc_only.replace('"DC0_C0_RP0_VM0" }', '"DC0_C0_RP0_VM2" }\ndisk = "disk-202-0"')
    )
    with pytest.raises(SettingsError, match="left a setting changed on VM DC0_C0_RP0_VM2's test disk"):
        run_plan(load_plan(tmp_path / "other" / "plan.toml"), vcenter=vcenter, apply_settings=True)
    assert _disk_io(vcenter)["shares"] == 1500
    assert run_plan(load_plan(plan_file), vcenter=vcenter, apply_settings=True).done == 2  # killed in its first
    assert _disk_io(vcenter) == before
    (_, _, last) = json.loads((tmp_path / "study" / "benchlib-settings.json").read_text())["runs"]
    assert last["changes"][0]["cell"] is None and last["changes"][0]["to"] == before  # the killed run's put back
    ingest_study(tmp_path / "study", tmp_path / "processed")  # [shares] names the member as its runs do
    assert not fairness(open_study(tmp_path / "study", tmp_path / "processed"), "iops", by=["block_size"]).is_empty()
    plan_file.write_text(plan_file.read_text().replace("local = 1500", "local = 1600"))  # other shares, same study
    with pytest.raises(SettingsError, match="runs were made with other test disk shares or limits"):
        run_plan(load_plan(plan_file), vcenter=vcenter, apply_settings=True)
    assert _disk_io(vcenter) == before
    plan_file.write_text(plan_file.read_text().replace("local = 1600", "local = 1500"))

    good = plan_file.read_text()
    for bad, why in (
        (good.replace("shares = { local = 1500 }", "shares = { other = 1500 }"), "'other', not a fio host"),
        (good.replace("shares = { local = 1500 }", "shares = { local = 0 }"), "a whole number from 1"),
        (good.replace("shares = { local = 1500 }", 'shares = { local = "medium" }'), "'high' or 'low' or 'normal'"),
        (good.replace("limits = { local = 300 }", "limits = { local = true }"), "or 'unlimited'"),
        (
            good.replace("[target]", '[hosts]\nservers = ["127.0.0.2", "127.0.0.3"]\n[target]')
            .replace('vms = { local = "DC0_C0_RP0_VM2" }', 'vms = { "127.0.0.2" = "a", "127.0.0.3" = "b" }')
            .replace("{ local = 1500 }", '{ "127.0.0.2" = 1500 }')
            .replace("{ local = 300 }", "{}"),
            "names 1 of the plan's 2 fio hosts: name each \\(127.0.0.3 missing",
        ),
        (good.replace("shares = { local = 1500 }", "shares = { local = [1500] }"), "a whole number from 1"),
        (good.replace("limits = { local = 300 }", "limits = { local = { a = 1 } }"), "a whole number from 1"),
        (
            good.replace("[target]", '[hosts]\nservers = ["127.0.0.2", "127.0.0.3"]\n[target]')
            .replace('vms = { local = "DC0_C0_RP0_VM2" }', 'vms = { "127.0.0.2" = "a", "127.0.0.3" = "a" }')
            .replace("{ local = 1500 }", '{ "127.0.0.2" = 1500, "127.0.0.3" = 1000 }')
            .replace("{ local = 300 }", "{}"),
            "maps two fio hosts to one VM",
        ),
    ):
        plan_file.write_text(bad)
        with pytest.raises(PlanError, match=why):
            load_plan(plan_file)


#: a run of the shares plan that kills itself (SIGKILL: no clean-up) in its first cell
KILLED_DISK_IO = """
import os, signal, sys
from benchlib.runner import load_plan, run_plan
def kill(done, total, label):
    if done > 0:
        os.kill(os.getpid(), signal.SIGKILL)
run_plan(load_plan(sys.argv[1]), vcenter="{vcenter}", apply_settings=True, progress=kill)
"""


def test_a_vm_with_a_disk_besides_the_one_under_test_needs_it_named(
    vcsim: Path, fio_binary: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A VM with its OS disk and a test disk: apply stops until the plan names the disk under test, and the
    study.toml the run writes names it too, so ingest checks SIOC against that disk's datastore."""
    from pyVmomi import vim

    from benchlib.ingest import ingest_study
    from benchlib.runner import load_plan, run_plan
    from benchlib.runner.settings import SettingsError
    from benchlib.vsphere import connect

    for key, value in LOGIN.items():
        monkeypatch.setenv(key, value)
    with _serving(vcsim) as (vcenter, _):  # a simulator of its own: this test adds a disk
        service = connect(Server.parse(vcenter))
        content = service.RetrieveContent()
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
        vm = next(v for v in view.view if v.name == "DC0_C0_RP0_VM0")
        _add_disk(vm, vim.vm.device.VirtualLsiLogicSASController, 1, 1000, -1)
        labels = [d.deviceInfo.label for d in vm.config.hardware.device if isinstance(d, vim.vm.device.VirtualDisk)]
        plan_file = tmp_path / "plan.toml"
        text = SIOC_PLAN.format(targets=tmp_path / "targets", server=vcenter, datastore="LocalDS_0")
        plan_file.write_text(text.replace("repetitions = 2", "repetitions = 1"))
        with pytest.raises(SettingsError, match="has 2 disks.*with \\[vsphere\\] disk = .* in the plan"):
            run_plan(load_plan(plan_file), vcenter=vcenter, apply_settings=True)
        plan_file.write_text(plan_file.read_text().replace("[vsphere]\n", f'[vsphere]\ndisk = "{labels[-1]}"\n'))
        assert run_plan(load_plan(plan_file), vcenter=vcenter, apply_settings=True).done == 2
        assert f'disk = "{labels[-1]}"' in (tmp_path / "study" / "study.toml").read_text()
        report = ingest_study(tmp_path / "study", tmp_path / "processed")
        assert report.quarantined == [] and len(report.ingested) >= 2


def test_the_same_datastore_name_in_two_datacenters_is_refused_not_half_set(
    vcsim: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two VMs, one per datacenter, each with its test disk on that datacenter's LocalDS_0: the plan's one name
    would set one of them; the run stops before anything changes."""
    from benchlib.runner import load_plan
    from benchlib.runner.settings import AppliedSettings, SettingsError
    from benchlib.vsphere import connect

    for key, value in LOGIN.items():
        monkeypatch.setenv(key, value)
    with _serving(vcsim, "-datacenters", "2") as (vcenter, _):
        text = SIOC_PLAN.format(targets=tmp_path / "targets", server=vcenter, datastore="LocalDS_0")
        text = text.replace(
            'vms = { local = "DC0_C0_RP0_VM0" }',
            'vms = { "127.0.0.2" = "DC0_C0_RP0_VM0", "127.0.0.3" = "DC1_C0_RP0_VM0" }',
        )
        plan_file = tmp_path / "plan.toml"
        plan_file.write_text(text + '[hosts]\nservers = ["127.0.0.2", "127.0.0.3"]\n')
        service = connect(Server.parse(vcenter))
        settings = AppliedSettings(load_plan(plan_file), service)
        with pytest.raises(SettingsError, match="on two datastores named LocalDS_0"):
            settings.start()
        settings.close()
        from pyVmomi import vim

        content = service.RetrieveContent()
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.Datastore], True)
        assert [ds.iormConfiguration.enabled for ds in view.view] == [True, True]  # neither changed
        assert not (tmp_path / "study" / "benchlib-settings.json").exists()


#: two VMs whose guests are fio servers on loopback; the plan moves each VM's test disk between controllers
CONTROLLER_PLAN = """
[study]
name = "controllers"
[run]
runtime_s = 1
repetitions = 2
output = "{output}"
[target]
file = "{targets}/{{host}}.dat"
size = "8MiB"
[options]
ioengine = "psync"
direct = 0
[hosts]
servers = ["127.0.0.21", "127.0.0.22"]
port = {port}
[vsphere]
server = "{server}"
vms = {{ "127.0.0.21" = "DC0_C0_RP0_VM0", "127.0.0.22" = "DC0_C0_RP0_VM1" }}
disk = "Hard disk 2"
apply = {{ controller = "controller", sioc = "sioc" }}
datastores = ["LocalDS_0"]
[matrix.controller]
levels = ["lsilogic-sas", "pvscsi", "nvme"]
[matrix.sioc]
levels = ["off", "on"]
[[profiles]]
use = "randread-4k"
"""
CONTROLLER_PORT = 8881
LUN = "naa.624a9370b1c2d3e4f5a6b7c800011001"  # on Round Robin, limit 1, in tests/data/esxcli
ESXCLI_DATA = ROOT / "tests" / "data" / "esxcli"


def _vms(service: object) -> dict:
    from pyVmomi import vim

    content = service.RetrieveContent()
    view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
    return {vm.name: vm for vm in view.view}


def _hardware(vm: object) -> tuple:
    """A VM's controllers and disks as (type, key, bus or the disk's controller and unit), and its power state."""
    from pyVmomi import vim

    devices = sorted(
        (type(d).__name__, d.key, getattr(d, "busNumber", None), getattr(d, "controllerKey", None), d.unitNumber)
        for d in vm.config.hardware.device
        if isinstance(d, vim.vm.device.VirtualController | vim.vm.device.VirtualDisk)
    )
    return tuple(devices), vm.runtime.powerState


@contextlib.contextmanager
def _controller_study(vcsim: Path, fio: str, tmp_path: Path) -> Iterator[tuple[str, Path, dict]]:
    """A simulator whose two VMs have a test disk on an LSI Logic SAS controller; their fio servers on loopback.

    Yields vCenter's address, the plan file and each VM's hardware before anything ran.
    """
    from pyVmomi import vim

    from benchlib.vsphere import connect
    from tests.fio_helpers import fio_server

    with (
        _serving(vcsim) as (vcenter, _),
        fio_server(fio, "127.0.0.21", CONTROLLER_PORT),
        fio_server(fio, "127.0.0.22", CONTROLLER_PORT),
    ):
        vms = _vms(connect(Server.parse(vcenter)))
        for name in ("DC0_C0_RP0_VM0", "DC0_C0_RP0_VM1"):
            _add_disk(vms[name], vim.vm.device.VirtualLsiLogicSASController, 1, 1000, -1, "Hard disk 2")
        plan_file = tmp_path / "plan.toml"
        output = tmp_path / "data" / "raw" / "controllers"
        plan_file.write_text(
            CONTROLLER_PLAN.format(output=output, targets=tmp_path / "t", port=CONTROLLER_PORT, server=vcenter)
        )
        yield vcenter, plan_file, {name: _hardware(vm) for name, vm in vms.items()}


def test_a_plan_moves_each_vms_test_disk_to_each_cells_controller_grouped_and_puts_it_back(
    vcsim: Path, fio_binary: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 42: controller x SIOC x Round Robin limit x block size, the first two set through vCenter, the
    limit through esxcli on two ESXi hosts. Before each controller group the VMs are stopped, their test disks
    moved (ReconfigVM_Task) and the VMs started; each cell's facts show its levels; the cells of a repetition
    run grouped by controller, each group once; at the end every VM has the hardware it had (no controller
    benchlib added is left) and is on, and each host's LUN its limit; the report's design statement says the
    order."""
    from benchlib.ingest import ingest_study
    from benchlib.runner import load_plan, read_plan, run_plan
    from benchlib.runner.describe import describe_plan
    from benchlib.runner.execute import fio_binary as find_fio
    from benchlib.vsphere import connect
    from tests.conftest import build_study_report

    for key, value in LOGIN.items():
        monkeypatch.setenv(key, value)
    shell = esxi_standins.write(tmp_path, "esxcli-rr.py", esxi_standins.ESXCLI_RR)  # keeps rr-<host>.json beside
    with _controller_study(vcsim, fio_binary, tmp_path) as (vcenter, plan_file, before):
        text = plan_file.read_text().replace(
            'sioc = "sioc" }', f'sioc = "sioc", rr_iops = "rr_limit" }}\ndevice = "{LUN}"'
        )
        plan_file.write_text(
            text.replace('"lsilogic-sas", "pvscsi", "nvme"', '"lsilogic-sas", "nvme"')
            + '[matrix.rr_limit]\nlevels = ["1", "1000"]\n[matrix.block_size]\noption = "bs"\nlevels = ["4k", "64k"]\n'
            + f'[esxi]\nhosts = ["esx01.lab", "esx02.lab"]\ncommand = "{sys.executable} {shell} {ESXCLI_DATA} '
            + '{esxi} {esxcli}"\n'
        )
        plan = load_plan(plan_file, allow_facts_command=True)
        said = "\n".join(describe_plan(plan, read_plan(plan, find_fio())))
        assert "4 power cycles of each VM at most" in said and "grouped by controller" in said
        assert f"the Round Robin limit of {LUN} on esx01.lab, esx02.lab (esxcli)" in said
        summary = run_plan(plan, vcenter=vcenter, apply_settings=True)
        assert summary.done == 64
        for host in ("esx01.lab", "esx02.lab"):  # put back as each had it: iops=1 (tests/data/esxcli)
            assert json.loads((tmp_path / f"rr-{host}.json").read_text())[LUN].startswith("policy=iops,iops=1,")
        vms = _vms(connect(Server.parse(vcenter)))
        assert {name: _hardware(vm) for name, vm in vms.items()} == before  # as it was, and on
        output = tmp_path / "data" / "raw" / "controllers"
        named = {"LSI Logic SAS": "lsilogic-sas", "PVSCSI": "pvscsi", "NVMe": "nvme"}
        for facts_file in output.rglob("benchlib-vsphere.json"):
            levels = dict(p.split("=", 1) for p in facts_file.relative_to(output).parts if "=" in p)
            for vm in json.loads(facts_file.read_text())["vms"]:
                (disk,) = [d for d in vm["disks"] if d["label"] == "Hard disk 2"]
                assert named[disk["controller"]] == levels["controller"], facts_file
                assert vm["datastores"]["LocalDS_0"]["sioc_enabled"] == (levels["sioc"] == "on"), facts_file
            for host, listed in json.loads((facts_file.parent / "benchlib-esxi.json").read_text()).items():
                (lun,) = [d for d in listed["devices"] if d["device"] == LUN]
                assert lun["rr_iops_limit"] == int(levels["rr_limit"]), (facts_file, host)
        order = json.loads((output / "benchlib-plan.json").read_text())
        assert order["grouped_by"] == "controller"
        runs = [(step["repetition"], step["cell"].split("controller=")[1].split("/")[0]) for step in order["order"]]
        groups = [key for i, key in enumerate(runs) if i == 0 or key != runs[i - 1]]
        assert len(groups) == 4 and len(set(groups)) == 4  # each level once per repetition, as one group
        (run,) = json.loads((output / "benchlib-settings.json").read_text())["runs"]
        moves = [c for c in run["changes"] if c["setting"] == "controller"]
        levels = ["lsilogic-sas"] + [level for _, level in groups] + ["lsilogic-sas"]  # as found, then put back
        cycles = sum(a != b for a, b in itertools.pairwise(levels))  # one per group whose level the last lacked
        assert len(moves) == 2 * cycles and all("started again" in c["how"] for c in moves)
        assert [c["cell"] is None for c in moves[-2:]] == [groups[-1][1] != "lsilogic-sas"] * 2  # put back last
        assert run["restored"]
        report = ingest_study(output, tmp_path / "processed")
        assert report.quarantined == [] and len(report.ingested) >= 64  # the levels agree with vCenter's, esxcli's
    index = build_study_report(tmp_path / "data", "controllers", tmp_path / "reports") / "index.html"
    assert "Order: grouped by controller." in index.read_text()


#: a run of the controller plan that kills itself (SIGKILL) after its first cell on NVMe, between cells (fio's
#: servers are not asked here how they fare when their client dies in a job)
KILLED_ON_NVME = """
import os, signal, sys
from pathlib import Path
from benchlib.runner import load_plan, run_plan
def fio_running():
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():
            return True
    return False
def kill(done, total, label):
    if "controller=nvme" in label and not fio_running():
        os.kill(os.getpid(), signal.SIGKILL)
run_plan(load_plan(sys.argv[1]), vcenter=sys.argv[2], apply_settings=True, progress=kill)
"""


def test_a_run_killed_with_a_disk_moved_is_put_back_by_the_next_run_and_refusals_change_nothing(
    vcsim: Path, fio_binary: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kill -9 with the disks on NVMe: the next run moves them back first (the controller it added removed);
    a VM with its OS disk only, or a third disk, or this machine's, and a level naming no one controller,
    are refused before anything changes."""
    from pyVmomi import vim

    from benchlib.runner import PlanError, load_plan, run_plan
    from benchlib.runner.settings import SettingsError, state_folder
    from benchlib.vsphere import connect

    for key, value in LOGIN.items():
        monkeypatch.setenv(key, value)
    with _controller_study(vcsim, fio_binary, tmp_path) as (vcenter, plan_file, before):
        good = plan_file.read_text()
        for bad, why in (
            (good.replace('"pvscsi", "nvme"', '"lsi", "nvme"'), "must each name one controller.*'lsi'"),
            (good.replace('"pvscsi", "nvme"', '"ide", "nvme"'), "'ide' does not"),
            (good.replace('"pvscsi", "nvme"', '"nvme", "vnvme"'), "'nvme', 'vnvme' name one setting"),
            (good.replace('"127.0.0.21" = ', '"local" = '), "(not a host of this plan|names this machine)"),
        ):
            plan_file.write_text(bad)
            with pytest.raises(PlanError, match=why):
                load_plan(plan_file)
        plan_file.write_text(good.replace("repetitions = 2", "repetitions = 1"))
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        killed = subprocess.run([sys.executable, "-c", KILLED_ON_NVME, str(plan_file), vcenter], env=env, timeout=300)
        assert killed.returncode == -9
        service = connect(Server.parse(vcenter))
        vms = _vms(service)
        moved = {name: _hardware(vm) for name, vm in vms.items()}
        assert moved != before and "VirtualNVMEController" in str(moved["DC0_C0_RP0_VM0"])
        assert len(list(state_folder().glob("*.json"))) >= 2  # each VM's journal (and the datastore's, if set)
        assert run_plan(load_plan(plan_file), vcenter=vcenter, apply_settings=True).done >= 2
        assert {name: _hardware(vm) for name, vm in vms.items()} == before
        assert not list(state_folder().glob("*.json"))
        changes = json.loads((plan_file.parent / "data/raw/controllers/benchlib-settings.json").read_text())["runs"]
        assert changes[0]["restored"] is None and changes[-1]["changes"][0]["cell"] is None  # put back first

        _add_disk(vms["DC0_C0_RP0_VM1"], vim.vm.device.ParaVirtualSCSIController, 2, 1000, -1, "Hard disk 3")
        with pytest.raises(SettingsError, match="VM DC0_C0_RP0_VM1 has 3 disks: benchlib stops and starts only"):
            run_plan(load_plan(plan_file), vcenter=vcenter, apply_settings=True)
        after = {name: _hardware(vm) for name, vm in vms.items()}
        plan_file.write_text(plan_file.read_text().replace(', "127.0.0.22" = "DC0_C0_RP0_VM1"', ""))
        os_disk = next(
            d for d in vms["DC0_C0_RP0_VM0"].config.hardware.device if isinstance(d, vim.vm.device.VirtualDisk)
        )
        plan_file.write_text(plan_file.read_text().replace("Hard disk 2", os_disk.deviceInfo.label))
        with pytest.raises(SettingsError, match="is a disk it boots from .*benchlib moves only a disk"):
            run_plan(load_plan(plan_file), vcenter=vcenter, apply_settings=True)  # no boot order: the one at 0:0
        boot = vim.vm.BootOptions(bootOrder=[vim.vm.BootOptions.BootableDiskDevice(deviceKey=os_disk.key)])
        task = vms["DC0_C0_RP0_VM0"].ReconfigVM_Task(vim.vm.ConfigSpec(bootOptions=boot))
        while task.info.state not in ("success", "error"):
            time.sleep(0.05)
        with pytest.raises(SettingsError, match="is a disk it boots from .*benchlib moves only a disk"):
            run_plan(load_plan(plan_file), vcenter=vcenter, apply_settings=True)  # in its boot order
        assert {name: _hardware(vm) for name, vm in vms.items()} == after  # nothing changed by a refused run


def test_a_vm_whose_fio_server_does_not_come_back_stops_the_run_with_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a VM is started on its new controller, the run waits for the fio server that answered before it
    stopped; one that does not answer (a guest without the controller's driver) stops the run, saying so."""
    from benchlib.runner import load_plan
    from benchlib.runner.settings import AppliedSettings, SettingsError

    monkeypatch.setattr("benchlib.runner.settings.BOOT_S", 1)
    plan_file = tmp_path / "plan.toml"
    text = CONTROLLER_PLAN.format(output=tmp_path / "out", targets=tmp_path / "t", port=CONTROLLER_PORT, server="x")
    plan_file.write_text(text.replace('server = "x"', 'server = "https://vc.example"'))
    (controller, _sioc) = AppliedSettings(load_plan(plan_file), None).kinds
    controller.ready("DC0_C0_RP0_VM0")  # it did not answer before its change: the run has it down already
    controller.answering.add("DC0_C0_RP0_VM0")  # it answered before: nothing listens on 127.0.0.21 now
    with pytest.raises(SettingsError, match="DC0_C0_RP0_VM0 was started on its new controller and its fio server"):
        controller.ready("DC0_C0_RP0_VM0")


def test_a_plan_setting_the_round_robin_limit_names_its_mistakes(
    vcenter: str, fio_binary: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whole-number levels, an exact LUN name (it goes into esxcli's command line), the ESXi hosts that see it,
    and a LUN on Round Robin: the path policy is never changed, so a LUN on MRU stops the run, unchanged."""
    from benchlib.runner import PlanError, load_plan, run_plan
    from benchlib.runner.settings import SettingsError

    for key, value in LOGIN.items():
        monkeypatch.setenv(key, value)
    shell = esxi_standins.write(tmp_path, "esxcli-rr.py", esxi_standins.ESXCLI_RR)
    good = SIOC_PLAN.format(targets=tmp_path / "targets", server=vcenter, datastore="LocalDS_0").replace(
        'apply = { sioc = "sioc" }\ndatastores = ["LocalDS_0"]', f'apply = {{ rr_iops = "sioc" }}\ndevice = "{LUN}"'
    )
    good = good.replace('levels = ["off", "on"]', 'levels = ["1", "1000"]') + (
        f'[esxi]\nhosts = ["esx01.lab"]\ncommand = "{sys.executable} {shell} {ESXCLI_DATA} {{esxi}} {{esxcli}}"\n'
    )
    plan_file = tmp_path / "plan.toml"
    for bad, why in (
        (good.replace('["1", "1000"]', '["1", "often"]'), "whole numbers of I/Os from 1 to 999999; 'often' is not"),
        (good.replace('["1", "1000"]', '["0", "1"]'), "'0' is not"),
        (good.replace(LUN, f"{LUN}; reboot"), "letters, digits"),
        (good.replace(f'device = "{LUN}"', "device = 5"), "letters, digits"),
        (good.replace('["1", "1000"]', '["1", "01"]'), "'01' is not"),
        (good.split("[esxi]")[0], "list them in \\[esxi\\] hosts"),
    ):
        plan_file.write_text(bad)
        with pytest.raises(PlanError, match=why):
            load_plan(plan_file, allow_facts_command=True)
    mru = "naa.6006016012345678abcdef0123456789"
    plan_file.write_text(good.replace(LUN, mru))
    with pytest.raises(SettingsError, match=f"{mru} is on VMW_PSP_MRU on ESXi host esx01.lab, not Round Robin"):
        run_plan(load_plan(plan_file, allow_facts_command=True), vcenter=vcenter, apply_settings=True)
    assert not (tmp_path / "rr-esx01.lab.json").exists() and not (tmp_path / "targets").exists()  # nothing set, run


@pytest.mark.parametrize("seed", range(40))
def test_each_repetition_applies_each_controller_level_once_and_afresh(tmp_path: Path, seed: int) -> None:
    """The cells of a repetition (and of an adaptive round) run as one group per controller level, in an order
    the seed shuffles; no group opens on the level the one before it ended on, which would make two
    repetitions one application. A plan that sets no controller keeps its order as before."""
    from benchlib.runner import load_plan

    plan_file = tmp_path / "plan.toml"
    text = CONTROLLER_PLAN.format(output=tmp_path / "o", targets=tmp_path / "t", port=CONTROLLER_PORT, server="x")
    text = text.replace('server = "x"', 'server = "https://vc.example"').replace("repetitions = 2", "repetitions = 4")
    plan_file.write_text(text.replace("[run]\n", f"[run]\nseed = {seed}\n"))
    plan = load_plan(plan_file)
    order = plan.order()
    runs = [(r, c.levels["controller"]) for r, c in order]
    groups = [key for i, key in enumerate(runs) if i == 0 or key != runs[i - 1]]
    assert len(groups) == len(set(groups)) == 4 * 3  # one group per level and repetition
    assert all(a[1] != b[1] for a, b in itertools.pairwise(groups))  # a new application every group
    cells = plan.cells()
    after = order[-1][1]
    levels = {c.levels["controller"] for c in cells[:4]}
    round_cells = plan.round_order(5, cells[:4], after)  # an adaptive round of some cells
    assert len(levels) == 1 or round_cells[0].levels["controller"] != after.levels["controller"]
    plain = text.replace('apply = { controller = "controller", sioc = "sioc" }', 'apply = { sioc = "sioc" }')
    plan_file.write_text(plain.replace("[run]\n", f"[run]\nseed = {seed}\n"))
    plain_plan = load_plan(plan_file)
    rng, expected = random.Random(seed), []  # as every plan ordered its cells before: shuffled per repetition
    for repetition in range(1, 5):
        shuffled = plain_plan.cells()
        rng.shuffle(shuffled)
        expected += [(repetition, c.key) for c in shuffled]
    assert [(r, c.key) for r, c in plain_plan.order()] == expected


def test_a_move_that_fails_leaves_the_vm_started_and_as_it_was(
    vcsim: Path, fio_binary: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A VM whose four SCSI buses are taken cannot get a PVSCSI controller of its own: the move fails after
    the VM was stopped. The VM is started again, the run stops saying why, and every VM is as it was."""
    from pyVmomi import vim

    from benchlib.runner import load_plan, run_plan
    from benchlib.runner.settings import SettingsError
    from benchlib.vsphere import connect

    for key, value in LOGIN.items():
        monkeypatch.setenv(key, value)
    with _controller_study(vcsim, fio_binary, tmp_path) as (vcenter, plan_file, _):
        vms = _vms(connect(Server.parse(vcenter)))
        for bus in (2, 3):  # empty LSI Logic Parallel controllers on the last two SCSI buses
            device = vim.vm.device.VirtualLsiLogicController(key=-200 - bus, busNumber=bus, sharedBus="noSharing")
            task = vms["DC0_C0_RP0_VM0"].ReconfigVM_Task(
                vim.vm.ConfigSpec(deviceChange=[vim.vm.device.VirtualDeviceSpec(operation="add", device=device)])
            )
            while task.info.state not in ("success", "error"):
                time.sleep(0.05)
        before = {name: _hardware(vm) for name, vm in vms.items()}
        plan_file.write_text(plan_file.read_text().replace('"lsilogic-sas", "pvscsi", "nvme"', '"pvscsi"'))
        with pytest.raises(SettingsError, match="four controllers of PVSCSI's kind already"):
            run_plan(load_plan(plan_file), vcenter=vcenter, apply_settings=True)
        assert {name: _hardware(vm) for name, vm in vms.items()} == before  # VM0 on again, nothing moved
