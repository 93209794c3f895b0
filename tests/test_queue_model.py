"""The queue what-if model (benchlib.stats.queuemodel) against the ESXi queuing post (BRIEF study 3).

The post: one VM, vdbench with 96 outstanding 4K reads, the PVSCSI per-disk queue at 64 and the device
queue (DQLEN) at 32: about 65,000 IOPS at 1.4 ms in the guest; esxtop showed ACTV 32, QUED 29 to 32 and
GAVG 0.93 ms. Raising only the PVSCSI queue to 96 changed nothing; raising both to 96 gave about 125,000
IOPS at about 0.7 ms, with QUED back to 0. The device's latency at 32 and at 96 active commands is what the
post's own figures give by Little's law (32 / 65,000 and 96 / 125,000 per second): the model is given those
two points and nothing else.
"""

from __future__ import annotations

import pytest

from benchlib.stats.queuemodel import DeviceLatency, QueueStack, predict, what_if

#: the device's latency (ms) at 32 and 96 active commands, from the post's figures by Little's law
ARRAY = DeviceLatency.measured({32: 32 / 65_000 * 1000, 96: 96 / 125_000 * 1000})
POST = QueueStack(outstanding=96, guest_disk=64, device_queue=32)


def _near(value: float, published: float, within: float = 0.10) -> bool:
    return abs(value - published) <= within * published


def test_the_model_reproduces_the_queuing_post_within_ten_percent() -> None:
    found = predict(POST, ARRAY)
    assert _near(found.iops, 65_000) and _near(found.latency_ms, 1.4)  # 65,000 IOPS at 1.48 ms
    assert found.limit == "device_queue" and found.active == 32
    assert found.waiting == {"guest": 32, "kernel": 32, "device": 32}  # QUED 32: the post saw 29 to 32
    assert _near(found.gavg_ms, 0.93)  # 0.985 ms: not an input, esxtop's own figure
    assert not found.extrapolated

    before, after = what_if(POST, ARRAY, guest_disk=96)  # only the PVSCSI queue raised: the wait moves down
    assert after.iops == pytest.approx(before.iops) and after.latency_ms == pytest.approx(before.latency_ms)
    assert (after.waiting["guest"], after.waiting["kernel"]) == (0, 64) and after.limit == "device_queue"

    _, both = what_if(POST, ARRAY, guest_disk=96, device_queue=96)
    assert _near(both.iops, 125_000) and _near(both.latency_ms, 0.7)  # 124,999 IOPS at 0.768 ms
    assert both.waiting["kernel"] == 0 and both.waiting["guest"] == 0 and both.limit == "outstanding"


def test_dsnro_holds_only_where_vms_share_the_device() -> None:
    """Four VMs of 64 outstanding on one device: DSNRO 32 admits 32 each, the device queue of 64 binds;
    DSNRO 8 admits 32 in all, and binds. One VM alone is never held by DSNRO."""
    flat = DeviceLatency.measured({1: 0.5})  # one constant service time: any depth
    shared = predict(QueueStack(outstanding=64, guest_disk=64, device_queue=64, dsnro=32, vms=4), flat)
    assert shared.limit == "device_queue" and shared.active == 64 and shared.waiting["kernel"] == 48
    assert shared.iops == pytest.approx(64 / 0.5 * 1000)
    tight = predict(QueueStack(outstanding=64, guest_disk=64, device_queue=64, dsnro=8, vms=4), flat)
    assert tight.limit == "dsnro" and tight.active == 32 and tight.waiting["kernel"] == 56
    alone = predict(QueueStack(outstanding=64, guest_disk=64, device_queue=64, dsnro=8), flat)
    assert alone.limit == "outstanding" and alone.active == 64


def test_a_depth_beyond_the_measured_points_is_flagged_and_bad_limits_refused() -> None:
    found = predict(QueueStack(outstanding=256, guest_disk=254, device_queue=128), ARRAY)
    assert found.extrapolated and found.active == 128
    for bad in ({"outstanding": 0}, {"outstanding": 8, "device_queue": -1}, {"outstanding": 8, "vms": 1.5}):
        with pytest.raises(ValueError, match="whole number from 1"):
            QueueStack(**bad)
    with pytest.raises(ValueError, match="positive"):
        DeviceLatency.measured({})
