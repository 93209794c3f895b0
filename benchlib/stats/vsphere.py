"""vSphere storage arithmetic a write-up leans on.

vSphere storage arithmetic a write-up leans on (METHODS.md C2, C3, E): SIOC limits, PARDA's
window control, and how much a Round Robin path carries before the next switch.
"""

from __future__ import annotations

#: Round Robin's defaults (VMW_PSP_RR): switch path after 1000 I/Os, or after 10 MiB with type=bytes.
RR_DEFAULT_IOPS = 1000
RR_DEFAULT_BYTES = 10 * 1024 * 1024


def sioc_limit_iops(limit_mb_per_s: float, io_kib: float) -> float:
    """Return the IOPS a per-disk bandwidth limit allows at one I/O size.

    IOPS that a per-disk bandwidth limit allows at one I/O size (MB as vSphere counts it, 1024 KiB):
    10 MB/s of 64 KB I/Os is 10 x 1024 / 64 = 160 IOPS.
    """
    return limit_mb_per_s * 1024 / io_kib


def parda_fixed_point(beta: float, latency_ms: float, threshold_ms: float) -> float:
    """Return PARDA's steady window.

    PARDA's steady window ``w* = beta * L / (L - threshold)`` (Gulati et al., FAST'09): host windows
    are proportional to beta (their VMs' shares) when every host sees the same latency ``L``.

    Raises
    ------
    ValueError
        When the latency is not above the threshold (no finite fixed point).

    """
    if latency_ms <= threshold_ms:
        raise ValueError(f"latency {latency_ms} ms must exceed the threshold {threshold_ms} ms for a finite window")
    return beta * latency_ms / (latency_ms - threshold_ms)


def parda_step(
    window: float,
    latency_ms: float,
    threshold_ms: float,
    beta: float,
    gamma: float,
    *,
    w_min: float = 1.0,
    w_max: float = float("inf"),
) -> float:
    """One PARDA update: ``w' = (1 - gamma) * w + gamma * (threshold / L * w + beta)``, kept in [w_min, w_max]."""
    updated = (1 - gamma) * window + gamma * (threshold_ms / latency_ms * window + beta)
    return min(max(updated, w_min), w_max)


def rr_path_burst_bytes(io_bytes: float, *, iops_limit: int = RR_DEFAULT_IOPS) -> float:
    """Return the bytes one path carries before Round Robin switches.

    Bytes one path carries before Round Robin (type=iops) switches: ``iops_limit x io size``;
    1000 I/Os of 4 KiB is 3.9 MiB, of 64 KiB 62.5 MiB. The bytes limit only applies with type=bytes.
    """
    return iops_limit * io_bytes
