"""Local stand-ins for an ESXi host's shell (``ssh root@<esxi> ...``), shared by the runner's tests.

Each is a small Python script the tests write to a file and name in a plan's command; it prints what
the real command prints, from real captured text, so the runner and the readers see real output.
"""

from __future__ import annotations

from pathlib import Path

#: ``esxtop -b -d <delay> -n <samples>``: a real capture's header, renamed to the host, one sample per delay, now
ESXTOP = r"""
import csv, sys, time
from datetime import datetime, timezone
_, esxi, delay, samples, source = sys.argv
rows = list(csv.reader(open(source, newline="")))
header, sample = rows[0], rows[2]
writer = csv.writer(sys.stdout, quoting=csv.QUOTE_ALL, lineterminator="\n")
names = [("\\\\" + esxi + "\\" + c.lstrip("\\").split("\\", 1)[1]) if c else c for c in header[1:]]
writer.writerow([header[0], *names])  # the capture's counters, as this ESXi host's
for _ in range(int(samples)):
    writer.writerow([datetime.now(timezone.utc).strftime("%m/%d/%Y %H:%M:%S")] + sample[1:])
    sys.stdout.flush()
    time.sleep(float(delay))
"""

#: ``esxcli storage core device list`` / ``esxcli storage nmp device list``: the lists of tests/data/esxcli
ESXCLI = r"""
import sys
from pathlib import Path
here = Path(sys.argv[1])
print((here / ("nmp-device-list.txt" if "nmp" in sys.argv else "core-device-list.txt")).read_text())
"""


#: esxcli on one ESXi host that keeps each LUN's Round Robin limit (a JSON file per host beside it): the lists
#: of tests/data/esxcli with the limit it was set to, and ``esxcli storage nmp psp roundrobin deviceconfig set``
ESXCLI_RR = r"""
import json, sys
from pathlib import Path
data, esxi, words = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
state = Path(__file__).with_name(f"rr-{esxi}.json")
limits = json.loads(state.read_text()) if state.exists() else {}
options = dict(w[2:].split("=", 1) for w in words if w.startswith("--") and "=" in w)
if words[:6] == ["esxcli", "storage", "nmp", "psp", "roundrobin", "deviceconfig"] and words[6] == "set":
    kind = options["type"]
    config = {
        "iops": f"policy=iops,iops={options.get('iops')},bytes=10485760",
        "default": "policy=rr,iops=1000,bytes=10485760",
        "bytes": f"policy=bytes,iops=1000,bytes={options.get('bytes')}",
        "latency": "policy=latency",
    }[kind]
    limits[options["device"]] = config
    state.write_text(json.dumps(limits))
    sys.exit(0)
text = (data / ("nmp-device-list.txt" if "nmp" in words else "core-device-list.txt")).read_text()
lines, device = text.splitlines(), None
for i, line in enumerate(lines):  # each device's block: its name alone, then its indented keys
    if line and not line[0].isspace():
        device = line.strip().rstrip(":")
    elif device in limits and "Path Selection Policy Device Config: {" in line:
        head, rest = line.split("{", 1)
        lines[i] = head + "{" + limits[device] + rest[rest.index(";"):]
text = "\n".join(lines)
print(text)
"""


def write(folder: Path, name: str, script: str) -> Path:
    """Write a stand-in into ``folder`` and return its path (a plan runs it with this Python)."""
    path = folder / name
    path.write_text(script)
    return path


def capture_with_adapter_queue_depth(
    source: Path, path: Path, depth: int, times: list | None = None, commands: float | None = None
) -> Path:
    """Write the real capture ``source`` with the adapter queue depth added as ``esxtop -b -a`` writes it.

    The corpus captures were taken without ``-a`` and have no adapter queue depth. A capture of every counter
    has it as ``\\\\<host>\\Physical Disk(<adapter>)\\Adapter Q Depth``, on the adapter's own instance (the
    counter map of VMware's EsxtopDrill, ``c_map.csv``: group "Physical Disk", counter "Adapter Q Depth").
    The column goes before each adapter's own counters; sample 0 is all zero, as esxtop writes it.
    ``times``: a datetime per sample, to place the capture in runs of a test's own (esxtop writes whole
    seconds, UTC). ``commands``: the commands/s of the capture's first disk device in every sample after
    the first (the others' set to 0), to stand for a device that carried a run's I/O.
    """
    import csv

    rows = list(csv.reader(source.open(newline="")))
    header = rows[0]
    places = [i for i, c in enumerate(header) if c.endswith("\\Commands/sec") and "\\Physical Disk Adapter(" in c]
    for place in reversed(places):
        name = header[place].replace("\\Physical Disk Adapter(", "\\Physical Disk(").rsplit("\\", 1)[0]
        header.insert(place, name + "\\Adapter Q Depth")
        for number, row in enumerate(rows[1:]):
            row.insert(place, "0" if number == 0 else str(depth))
    if commands is not None:
        devices = [
            i for i, c in enumerate(header) if "\\Physical Disk SCSI Device(" in c and c.endswith("\\Commands/sec")
        ]
        for row in rows[2:]:
            for i in devices:
                row[i] = f"{commands if i == devices[0] else 0.0:.2f}"
    for row, when in zip(rows[1:], times or [], strict=False):
        row[0] = f"{when:%m/%d/%Y %H:%M:%S}"
    with path.open("w", newline="") as handle:
        csv.writer(handle, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    return path
