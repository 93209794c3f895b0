"""What-if model of the ESXi storage queue stack: where I/Os wait, and what a changed limit does (issue 41).

A closed system (METHODS.md D1, D2): each of ``vms`` alike VMs keeps ``outstanding`` I/Os in flight on one
device (vdbench's threads, fio's iodepth × numjobs), with no think time. Each layer admits at most its limit,
and what it cannot admit waits above it:

- the guest's per-disk queue (PVSCSI 64 in older drivers, LSI Logic SAS 32) and its adapter ring: what
  the guest sends to ESXi; the rest waits in the guest;
- DSNRO (``Disk.SchedNumReqOutstanding``): each VM's share of a device when more than one VM uses it;
- the device queue (DQLEN) and the HBA's queue: what the device holds at once (esxtop's ACTV); the rest
  waits in the ESXi kernel (esxtop's QUED).

The device then holds ``A`` commands at all times, at its latency ``S(A)`` for that many active commands
(:class:`DeviceLatency`: from an iodepth sweep of the device, or one constant service time). Little's law
gives the device's rate ``X = A / S(A)``, the guest's latency ``N / X`` per VM, and each layer's time as the
I/Os waiting there over ``X``. For alike VMs without think time, mean-value analysis comes to the same:
every layer above the binding one is full, and the device is never idle.

Returns findings only (numbers and codes); :mod:`benchlib.words` says them.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

#: the limits of :class:`QueueStack`, top down: which one binds is a prediction's ``limit``
LIMITS = ("outstanding", "guest_disk", "guest_adapter", "dsnro", "device_queue", "hba_queue")


@dataclass(frozen=True)
class QueueStack:
    """The load and the limits of one device's queue stack; None: no such limit (or not known)."""

    outstanding: int  # per VM: the I/Os the guest keeps in flight
    guest_disk: int | None = None  # per-disk queue of the virtual controller (PVSCSI, LSI Logic SAS)
    guest_adapter: int | None = None  # the virtual adapter's ring, shared by its disks (one disk here)
    device_queue: int | None = None  # DQLEN
    dsnro: int | None = None  # applies only when more than one VM uses the device
    hba_queue: int | None = None  # the physical adapter's queue (AQLEN), one device on it here
    vms: int = 1

    def __post_init__(self) -> None:
        """Refuse a load or a limit that is not a whole number from 1."""
        for name in ("outstanding", "vms", *LIMITS[1:]):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a whole number from 1, not {value!r}")


@dataclass(frozen=True)
class DeviceLatency:
    """The device's mean latency (ms) by active commands, linear between measured points.

    One point is a constant service time, used at any depth. Above the points the last two are extended,
    below them the first point's latency holds, and a prediction that needed either says so
    (``extrapolated``).
    """

    points: tuple[tuple[float, float], ...]

    @classmethod
    def measured(cls, points: Mapping[float, float]) -> DeviceLatency:
        """From ``{active commands: mean latency in ms}`` (an iodepth sweep of the device itself)."""
        found = tuple(sorted((float(a), float(ms)) for a, ms in points.items()))
        if not found or any(a <= 0 or ms <= 0 for a, ms in found):
            raise ValueError("a device latency needs points of positive active commands and latency (ms)")
        return cls(found)

    def at(self, active: float) -> tuple[float, bool]:
        """Return the latency (ms) at ``active`` commands, and whether it lies beyond the points."""
        if len(self.points) == 1:
            return self.points[0][1], False
        xs = [a for a, _ in self.points]
        if active < xs[0]:  # fewer commands than measured: no faster than the fewest measured (flagged)
            return self.points[0][1], True
        i = min(max(bisect.bisect_left(xs, active), 1), len(xs) - 1)
        (a0, s0), (a1, s1) = self.points[i - 1], self.points[i]
        latency = s0 + (s1 - s0) * (active - a0) / (a1 - a0)
        return max(latency, self.points[0][1] if s1 >= s0 else latency), active > xs[-1]


@dataclass(frozen=True)
class QueuePrediction:
    """What :func:`predict` finds for one stack.

    ``iops``: all VMs together; ``latency_ms``: what each guest sees per I/O. ``waiting``: mean I/Os per VM
    in each layer (``guest`` waiting to be sent, ``kernel`` queued in ESXi: esxtop's QUED, ``device``
    active: ACTV per VM). ``time_ms``: the mean time an I/O spends in each; GAVG is ``kernel + device``,
    KAVG ``kernel``, DAVG ``device``. ``limit``: the limit that binds (:data:`LIMITS`; ``outstanding``:
    the load itself, no queue is full). ``extrapolated``: the device latency lay beyond the measured points.
    """

    iops: float
    latency_ms: float
    active: float
    waiting: dict[str, float]
    time_ms: dict[str, float]
    limit: str
    extrapolated: bool

    @property
    def gavg_ms(self) -> float:
        """The GAVG esxtop shows: the time in the ESXi kernel and at the device."""
        return self.time_ms["kernel"] + self.time_ms["device"]


def _capped(value: float, *limits: tuple[str, int | None]) -> tuple[float, str | None]:
    """Return ``value`` under the smallest of ``limits``, and which limit cut it (None: none did)."""
    cut = None
    for name, limit in limits:
        if limit is not None and limit < value:
            value, cut = limit, name
    return value, cut


def predict(stack: QueueStack, device: DeviceLatency) -> QueuePrediction:
    """Predict the rate, the latency and where the I/Os wait for ``stack`` on a device of ``device`` latency."""
    sent, guest_cut = _capped(
        stack.outstanding, ("guest_disk", stack.guest_disk), ("guest_adapter", stack.guest_adapter)
    )
    shared = stack.dsnro if stack.vms > 1 else None  # DSNRO holds only where VMs share the device
    admitted, dsnro_cut = _capped(sent, ("dsnro", shared))
    active, device_cut = _capped(
        stack.vms * admitted, ("device_queue", stack.device_queue), ("hba_queue", stack.hba_queue)
    )
    latency, extrapolated = device.at(active)
    per_ms = active / latency  # the device's completions per ms, all VMs
    per_vm = per_ms / stack.vms
    waiting = {"guest": stack.outstanding - sent, "kernel": sent - active / stack.vms, "device": active / stack.vms}
    return QueuePrediction(
        iops=per_ms * 1000,
        latency_ms=stack.outstanding / per_vm,
        active=active,
        waiting=waiting,
        time_ms={layer: count / per_vm for layer, count in waiting.items()},
        limit=device_cut or dsnro_cut or guest_cut or "outstanding",
        extrapolated=extrapolated,
    )


def what_if(stack: QueueStack, device: DeviceLatency, **changes: int | None) -> tuple[QueuePrediction, QueuePrediction]:
    """Return the predictions before and after ``changes`` to the stack (``guest_disk=96, device_queue=96``)."""
    return predict(stack, device), predict(dataclasses.replace(stack, **changes), device)
