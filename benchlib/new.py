"""``benchlib new <kind> data/raw/<name>``: a ready study of a kind the field publishes.

Each kind writes a plan ``benchlib run`` executes (its repetitions sized so that every comparison of
its largest factor can reach a verdict: :func:`benchlib.stats.design.runs_to_test`), the study.toml the
run keeps, a claims.toml skeleton of the claims such a post makes, a pipeline that names the study, and
a README saying what to capture on the hosts and what the design can and cannot show.

A factor whose levels are vSphere settings (the controller, SIOC, the Round Robin limit) is set by hand
until benchlib applies it: the plan is run once per level, ``benchlib run plan.toml --levels
controller=pvscsi``, after the setting was changed and checked. The README says so, and what it costs:
levels run one after another, not shuffled together, so drift over time can pass for their effect.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from benchlib.errors import BenchlibError


class NewStudyError(BenchlibError):
    """A study cannot be written there (the folder holds files, the kind is unknown)."""


@dataclass(frozen=True)
class Kind:
    """One kind of study: what it asks, its plan's body, its claims skeleton, and what to capture."""

    title: str
    question: str
    #: the plan below [run] and [target]: [hosts], [options], the matrix and the profiles
    body: str
    #: factors set by hand (vSphere settings), each run with --levels
    by_hand: tuple[str, ...]
    claims: str
    capture: str
    cannot: str
    servers: tuple[str, ...]


KINDS: dict[str, Kind] = {
    "controller": Kind(
        title="Virtual disk controller: LSI Logic SAS, PVSCSI and NVMe at two block sizes and three read shares",
        question="Does the virtual controller change what several VMs get from one datastore?",
        body="""
[options]
direct = 1
ioengine = "libaio"

[matrix.controller]       # set by hand: power the VMs off, move each test disk, power on, start fio --server;
levels = ["lsilogic-sas", "pvscsi", "nvme"]  # or by benchlib: the [vsphere] below, and run --apply-settings

# [vsphere]               # benchlib moves each VM's test disk to the cell's controller (stopping and starting
# server = "https://vc.example"          # the VM; cells grouped by controller in each repetition) and puts
# vms = { "vm1.lab" = "vm1" }            # it back: one entry per fio server
# disk = "Hard disk 2"                   # the disk under test (the VM's only other disk is its OS disk)
# apply = { controller = "controller" }

[matrix.block_size]
option = "bs"
levels = ["4k", "64k"]

[matrix.read_share]
option = "rwmixread"
levels = [100, 70, 0]

[[profiles]]
name = "mixed"
options = { rw = "randrw", iodepth = 32 }

# [[esxtop]]              # each host's view during every cell: adapter and device queues, KAVG and DAVG
# host = "esx01.lab"
# command = "ssh -o BatchMode=yes root@{esxi} esxtop -b -a -d {delay} -n {samples}"
# delay = 2
""",
        by_hand=("controller",),
        claims="""
[[claims]]
id = "1"
section = "Controller"
says = "PVSCSI delivers more IOPS than LSI Logic SAS for 4K random reads (all VMs together)."
stated = ""
metric = "iops"
compute = "ratio"
where = { block_size = "4k", read_share = "100" }
of = { controller = "pvscsi" }
to = { controller = "lsilogic-sas" }
expect = { above = 1.0 }

[[claims]]
id = "2"
section = "Controller"
says = "NVMe and PVSCSI are within 10% of each other at 64K writes."
metric = "bandwidth_mib_s"
compute = "ratio"
where = { block_size = "64k", read_share = "0" }
of = { controller = "nvme" }
to = { controller = "pvscsi" }
expect = { about = 1.0 }
""",
        capture="esxtop on each ESXi host during every cell ([[esxtop]] in the plan): the adapter's and device's "
        "queue use (ACTV, QUED) and KAVG/DAVG tell where latency was spent; the guest's CPU per I/O from fio",
        cannot="it cannot separate the controller from anything else changed with it (a driver update, a VM "
        "restarted with a cold cache); levels run one after another, so drift over hours looks like an effect",
        servers=("vm1.lab", "vm2.lab", "vm3.lab", "vm4.lab"),
    ),
    "fairness": Kind(
        title="Fairness under contention: VMs sharing one datastore, SIOC off and on, two controllers",
        question="Do VMs on one datastore get equal shares, and does SIOC make them?",
        body="""
[options]
direct = 1
ioengine = "libaio"

[matrix.sioc]             # set by hand: the datastore's Storage I/O Control, and each disk's shares
levels = ["off", "on"]

[matrix.controller]       # set by hand, as for a controller study
levels = ["lsilogic-sas", "pvscsi"]

[[profiles]]
use = "randread-4k"

# [[esxtop]]              # each host's view during every cell: per-VM latency against the congestion threshold
# host = "esx01.lab"
# command = "ssh -o BatchMode=yes root@{esxi} esxtop -b -a -d {delay} -n {samples}"
# delay = 2
""",
        by_hand=("sioc", "controller"),
        claims="""
[[claims]]
id = "1"
section = "SIOC"
says = "With SIOC on, the VMs share fairly (Jain's index above 0.95)."
metric = "iops"
compute = "jain"
where = { sioc = "on" }
by = ["controller"]
expect = { above = 0.95 }

[[claims]]
id = "2"
section = "SIOC"
says = "Without SIOC the best VM gets under twice the worst."
metric = "iops"
compute = "max_over_min"
where = { sioc = "off" }
by = ["controller"]
expect = { below = 2.0 }
""",
        capture="esxtop on the hosts (per-VM latency and the datastore's congestion threshold against its "
        "device latency); study.toml [shares] if the VMs' disks have unequal shares (fair is then proportional)",
        cannot="it cannot tell SIOC's effect from congestion that never reached SIOC's threshold: check the "
        "device latency against it; with SIOC off, unequal shares come from placement as much as from the VMs",
        servers=("vm1.lab", "vm2.lab", "vm3.lab", "vm4.lab", "vm5.lab"),
    ),
    "queue-depth": Kind(
        title="Queue depth: one VM's outstanding I/Os against the PVSCSI and device queues",
        question="Where does a VM's queue saturate: the guest, the virtual adapter, or the device (DQLEN, DSNRO)?",
        body="""
[options]
direct = 1
ioengine = "libaio"

[matrix.queues]           # set by hand: PVSCSI ring pages and queue depth in the guest; DQLEN and DSNRO on the host
levels = ["default", "raised"]

[[profiles]]
name = "depth"
options = { rw = "randread", bs = "4k" }
sweep = { factor = "queue_depth", option = "iodepth", levels = [1, 4, 16, 32, 64, 96, 128] }

# [[esxtop]]              # the host's view: ACTV and QUED at the adapter and the device (KAVG/DAVG)
# host = "esx01.lab"
# command = "ssh -o BatchMode=yes root@{esxi} esxtop -b -a -d {delay} -n {samples}"
# delay = 2
""",
        by_hand=("queues",),
        claims="""
[[claims]]
id = "1"
section = "Queues"
says = "With the default queues, IOPS rise with depth, then stop rising."
metric = "iops"
compute = "monotonic"
over = "iodepth"
step = 0.05
where = { queues = "default" }
expect = { equals = "rises, then flat" }

[[claims]]
id = "2"
section = "Queues"
says = "With the queues raised, IOPS keep rising with depth."
metric = "iops"
compute = "monotonic"
over = "iodepth"
where = { queues = "raised" }
expect = { equals = "increasing" }
""",
        capture="esxtop with the adapter and device panels (ACTV, QUED, DQLEN) during every cell: Little's law "
        "at each layer shows which queue is full; the host's DSNRO (esxcli storage core device list)",
        cannot="one VM cannot show what several VMs sharing the device's queue (DSNRO) do; a sweep run once "
        "per depth has no spread to judge its knee by",
        servers=("vm1.lab",),
    ),
    "multipath": Kind(
        title="Multipath Round Robin: the IO operation limit at 1, 20 and 1000",
        question="Does the Round Robin path-switching limit change throughput or latency?",
        body="""
[options]
direct = 1
ioengine = "libaio"

[matrix.rr_limit]         # set by hand on every host, for every device: esxcli storage nmp psp roundrobin
                          # deviceconfig set --type=iops --iops=<level> --device=<naa.id>
levels = ["1", "20", "1000"]

[matrix.block_size]
option = "bs"
levels = ["4k", "64k"]

[[profiles]]
name = "randread"
options = { rw = "randread", iodepth = 32 }

# [esxi]                  # records each device's path policy and IO limit with every cell
# hosts = ["esx01.lab", "esx02.lab"]
# command = "ssh -o BatchMode=yes root@{esxi} {esxcli}"
""",
        by_hand=("rr_limit",),
        claims="""
[[claims]]
id = "1"
section = "Round Robin"
says = "A limit of 1 gives more IOPS than the default 1000 at 4K."
metric = "iops"
compute = "percent_change"
where = { block_size = "4k" }
from = { rr_limit = "1000" }
to = { rr_limit = "1" }
expect = { above = 0 }
""",
        capture="[esxi] in the plan, so every cell records each device's path selection policy and IO limit "
        "from the hosts (the check that the limit really was what the cell says); esxtop's per-path counters",
        cannot="a single array and fabric: the limit's effect depends on the paths' number and queue depths, "
        "so it does not carry to another array; the datastores and hosts are whatever the VMs sit on",
        servers=("vm1.lab", "vm2.lab"),
    ),
    "virtual-to-native": Kind(
        title="Virtual against native: the same fio job on bare metal and in a VM",
        question="What does virtualisation cost this workload, against the device's own bound?",
        body="""
[options]
direct = 1
ioengine = "libaio"

[matrix.platform]         # set by hand: run --levels platform=native with the fio server on the bare host,
levels = ["native", "vm"] # then --levels platform=vm with it in the VM (the same name in [hosts])

[matrix.block_size]
option = "bs"
levels = ["4k", "128k"]

[[profiles]]
name = "randread"
options = { rw = "randread", iodepth = 32 }
""",
        by_hand=("platform",),
        claims="""
[bounds]                  # the device's own ceilings, in the metric's units: its datasheet, or fio at the bare
# device_iops = 450000    # device (not a file on it); uncomment with yours: claim 2 is unsupported until then

[[claims]]
id = "1"
section = "Overhead"
says = "In a VM, 4K random reads reach at least 90% of native IOPS."
metric = "iops"
compute = "ratio"
where = { block_size = "4k" }
of = { platform = "vm" }
to = { platform = "native" }
expect = { above = 0.9 }

[[claims]]
id = "2"
section = "Against the device"
says = "Natively, 4K random reads reach at least 80% of the device's own IOPS."
metric = "iops"
compute = "ratio"
where = { block_size = "4k" }
of = { platform = "native" }
to = "device_iops"
expect = { above = 0.8 }
""",
        capture="the device's own bound, measured on the bare host (its datasheet's IOPS and bandwidth, or fio "
        "at the bare device), declared under [bounds] in claims.toml; the host's CPU during each level",
        cannot="the native and the VM levels run at different times on one machine: anything else that "
        "changed between them (firmware, a cache warmed by the first) is part of the difference",
        servers=("bench.lab",),
    ),
}


def write_study(
    kind: str,
    folder: Path,
    *,
    servers: list[str] | None = None,
    runtime_s: int = 60,
    size: str = "8GiB",
    repetitions: int | None = None,
    target: str = "/mnt/bench/{host}.dat",
    port: int = 8765,
) -> list[Path]:
    """Write a study of ``kind`` into ``folder`` (new, or empty); return the files written.

    ``servers``: the fio servers (one per VM); ``repetitions``: the runs per configuration (default: as
    many as its largest factor's comparisons need for a verdict, :func:`benchlib.stats.design.runs_to_test`).
    """
    from benchlib.paths import PIPELINES, RAW
    from benchlib.runner import load_plan
    from benchlib.runner.describe import comparison_families
    from benchlib.runner.execute import study_toml
    from benchlib.stats.design import runs_to_test

    if kind not in KINDS:
        raise NewStudyError(f"no study kind {kind!r}; the kinds: {', '.join(KINDS)}")
    spec = KINDS[kind]
    folder = Path(folder)
    if folder.exists() and any(folder.iterdir()):
        raise NewStudyError(f"{folder} holds files already; give a new folder (benchlib new never overwrites)")
    name = folder.resolve().name
    hosts = list(servers or spec.servers)
    head = (
        f'[study]\nname = "{name}"\ntitle = "{spec.title}"\n'
        'citation = "Recorded with benchlib run: say where (hosts, storage, versions)"\n\n'
        f"[run]\nruntime_s = {runtime_s}\nramp_time_s = {min(10, runtime_s)}\nrepetitions = @REPETITIONS@\n"
        f'seed = {random.SystemRandom().randrange(1, 2**31)}\noutput = "."\n\n'
        f'[target]\nfile = "{target}"\nsize = "{size}"\nprecondition = "sequential"\n\n'
        f"[hosts]\nservers = [{', '.join(json.dumps(h) for h in hosts)}]\nport = {port}\n"
    )
    folder.mkdir(parents=True, exist_ok=True)
    plan_path = folder / "plan.toml"
    plan_path.write_text(head.replace("@REPETITIONS@", "2") + spec.body, encoding="utf-8")
    families = comparison_families(load_plan(plan_path))
    needed = repetitions or runs_to_test(max(families.values(), default=1))
    plan_path.write_text(
        f"# {spec.question}\n# Written by `benchlib new {kind}`: edit the servers, the target and the levels; "
        "see README.md.\n\n" + head.replace("@REPETITIONS@", str(needed)) + spec.body,
        encoding="utf-8",
    )
    plan = load_plan(plan_path)
    (folder / "study.toml").write_text(study_toml(plan), encoding="utf-8")
    (folder / "claims.toml").write_text(
        "# The claims a post of this kind makes: replace each with your post's words and figures\n"
        "# (benchlib/claims.py lists the computations), then `benchlib verify` checks them.\n\n"
        "[tolerances]\nabout = 0.10\n" + spec.claims,
        encoding="utf-8",
    )
    (folder / "README.md").write_text(_readme(kind, spec, plan_path, needed, families), encoding="utf-8")
    pipeline = PIPELINES / f"{name}.toml"
    written = [plan_path, folder / "study.toml", folder / "claims.toml", folder / "README.md"]
    if folder.resolve().parent == RAW.resolve() and not pipeline.exists():  # a report reads studies of data/raw
        pipeline.write_text(f'[pipeline]\nstudy = "{name}"\n', encoding="utf-8")
        written.append(pipeline)
    return written


def _readme(kind: str, spec: Kind, plan: Path, repetitions: int, families: dict[str, int]) -> str:
    """Say what the study asks, how to run it, what to capture, and what its design can and cannot show."""
    together = " ".join(f"--levels {factor}=<level>" for factor in spec.by_hand)
    each = f"    benchlib run plan.toml {together}"
    if len(spec.by_hand) > 1:
        each += f"   # once per combination of {' and '.join(spec.by_hand)}: set them all first"
    from benchlib.stats.design import runs_to_test

    settings = (
        f"The factors {', '.join(f'`{f}`' for f in spec.by_hand)} are set by hand:"
        if len(spec.by_hand) > 1
        else f"The factor `{spec.by_hand[0]}` is set by hand:"
    )
    largest = max(families.items(), key=lambda kv: kv[1]) if families else None
    needed = runs_to_test(largest[1]) if largest else 0
    if largest and repetitions >= needed:
        tested = (
            f"{repetitions} runs per configuration: each of {largest[0]}'s {largest[1]} comparisons against its "
            "first level can reach a verdict at α = 0.05 with Holm's correction (fewer runs, and the comparison "
            "page can only describe)"
        )
    elif largest:
        tested = (
            f"{repetitions} runs per configuration: too few for any of {largest[0]}'s {largest[1]} comparisons "
            f"against its first level to reach a verdict at α = 0.05 with Holm's correction ({needed} runs each "
            "are needed): the comparison page can only describe"
        )
    else:
        tested = f"{repetitions} runs per configuration"
    return f"""# {spec.title}

{spec.question}

Written by `benchlib new {kind}`. Edit `plan.toml` first: the fio servers (one per VM, each running
`fio --server`), the target file on each VM's test disk and its size, the levels.

## Running it

{settings} benchlib does not change it yet. Set the level on every VM, host or datastore,
check it, then run the cells of that level, every factor set by hand named (no cell runs under a
setting other than its own):

{each}

Every run lands in this folder; `benchlib run` keeps what is done and runs only what is not.
`benchlib run plan.toml --dry-run` says what is written before the first cell, how long it takes and what
the design can show. Then `benchlib report {plan.parent.name}` builds the report (its pipeline,
`pipelines/{plan.parent.name}.toml`, names only the study; `benchlib new` writes it for a study under
data/raw) and
`benchlib verify {plan.parent}` checks `claims.toml` (replace its skeleton with your post's claims).

## What to capture on the hosts

{spec.capture}.

## What this design can show

{tested}. The order of cells is shuffled within each level's run.

## What this data is not

Levels set by hand run one after another, not shuffled together: drift between them (a cache, a
neighbour, a firmware change) passes for their effect. Also, {spec.cannot}.
"""
