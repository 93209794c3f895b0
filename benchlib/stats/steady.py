"""Steady state and autocorrelation of interval series (METHODS.md B1, B2, G4)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from benchlib.stats.design import PTS_ROUNDS

#: SNIA PTS: range within 20% of the window mean, fitted-line excursion within 10%.
PTS_RANGE = 0.20
PTS_EXCURSION = 0.10


@dataclass(frozen=True)
class WindowTest:
    """Result of the SNIA PTS steady-state window test on the last ``len(values)`` rounds."""

    mean: float
    range_fraction: float
    slope: float
    excursion_fraction: float
    steady: bool


def pts_window(values: np.ndarray | list[float]) -> WindowTest:
    """SNIA PTS 2.0.2 §2.1.24 on a measurement window (normally 5 rounds).

    Range = max − min must be ≤ 20% of the mean, and the least-squares line's
    excursion over the window, |slope|·(W − 1), ≤ 10% of the mean.
    """
    y = np.asarray(values, dtype=float)
    if len(y) < PTS_ROUNDS:
        raise ValueError(f"the PTS window is {PTS_ROUNDS} rounds; {len(y)} cannot show a steady state")
    x = np.arange(len(y), dtype=float)
    mean = float(y.mean())
    slope = float(np.polyfit(x, y, 1)[0])
    range_fraction = float((y.max() - y.min()) / mean)
    excursion = abs(slope) * (len(y) - 1) / mean
    steady = range_fraction <= PTS_RANGE + 1e-12 and excursion <= PTS_EXCURSION + 1e-12
    return WindowTest(mean, range_fraction, slope, excursion, steady)


def steady_windows(values: np.ndarray | list[float], window: int = PTS_ROUNDS) -> int | None:
    """Index of the first round that ends a steady PTS window, or None ("steady state was not reached")."""
    if window < PTS_ROUNDS:
        raise ValueError(f"the PTS window is at least {PTS_ROUNDS} rounds, not {window}")
    y = np.asarray(values, dtype=float)
    for end in range(window, len(y) + 1):
        if pts_window(y[end - window : end]).steady:
            return end - 1
    return None


def fio_ss(values: np.ndarray | list[float], *, metric: str, limit: float, percent: bool) -> tuple[float, bool]:
    """Fio's ``ss=`` criterion on a window: ``(criterion value, attained)``.

    ``metric`` is ``"deviation"`` (max |y − mean|) or ``"slope"`` (least-squares
    slope per sample); with ``percent`` both are relative to the mean, in percent.
    fio stops when the criterion is strictly below the limit.
    """
    y = np.asarray(values, dtype=float)
    mean = y.mean()
    if metric == "deviation":
        value = float(np.abs(y - mean).max())
    elif metric == "slope":
        value = float(np.polyfit(np.arange(len(y), dtype=float), y, 1)[0])
    else:
        raise ValueError(f"metric must be 'deviation' or 'slope', not {metric!r}")
    if percent:
        value = 100 * value / mean
    return value, abs(value) < limit


def lag1_autocorrelation(values: np.ndarray | list[float]) -> tuple[float, float]:
    """Lag-1 autocorrelation r₁ and the ±1.96/√n bound inside which it is not significant."""
    y = np.asarray(values, dtype=float) - np.mean(values)
    r1 = float((y[:-1] * y[1:]).sum() / (y * y).sum())
    return r1, 1.96 / np.sqrt(len(y))


def effective_sample_size(values: np.ndarray | list[float]) -> float:
    """n·(1 − ρ)/(1 + ρ) with ρ the lag-1 autocorrelation (AR(1) approximation), never more than n.

    A negative ρ would promise more information than n samples hold; it counts as 0.
    """
    rho, _ = lag1_autocorrelation(values)
    rho = max(rho, 0.0)
    return len(values) * (1 - rho) / (1 + rho)


@dataclass(frozen=True)
class RunSteadiness:
    """Whether one run's per-interval series reached a steady state (SNIA PTS window on its rounds)."""

    state: str  # "steady", "not steady" or "too short to assess"
    rounds: int
    steady_from: int | None  # the round that ends the first steady window
    window: int = PTS_ROUNDS
    #: the last window's range and excursion, as fractions of its mean, where no window was steady
    last_range: float | None = None
    last_excursion: float | None = None


def run_steadiness(values: np.ndarray | list[float], *, window: int = PTS_ROUNDS) -> RunSteadiness:
    """Judge one run's series (per-interval IOPS or bandwidth, in time order) with the PTS window.

    Each interval is a round. Fewer than ``window`` rounds: "too short to assess" (never "steady").
    :func:`benchlib.words.steady.steadiness_note` says the finding.
    """
    y = np.asarray(values, dtype=float)
    y = y[np.isfinite(y)]
    if len(y) < window:
        return RunSteadiness("too short to assess", len(y), None, window)
    end = steady_windows(y, window)
    if end is None:
        last = pts_window(y[-window:])
        return RunSteadiness("not steady", len(y), None, window, last.range_fraction, last.excursion_fraction)
    return RunSteadiness("steady", len(y), end, window)


def batch_means_ci(
    values: np.ndarray | list[float], *, batches: int = 10, confidence: float = 0.95
) -> tuple[float, float, float]:
    """Mean of an autocorrelated series with a batch-means interval: ``(mean, low, high)``."""
    y = np.asarray(values, dtype=float)
    size = len(y) // batches
    means = y[: size * batches].reshape(batches, size).mean(axis=1)
    half = stats.t.ppf(1 - (1 - confidence) / 2, batches - 1) * means.std(ddof=1) / np.sqrt(batches)
    centre = float(means.mean())
    return centre, centre - half, centre + half


def block_bootstrap_mean_ci(
    values: np.ndarray | list[float],
    *,
    block: int,
    rng: np.random.Generator,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """Circular block bootstrap interval for the mean of a per-second series: ``(mean, low, high)``.

    Blocks of ``block`` consecutive samples wrap around the end (circular), so
    the ends are not under-sampled. All resamples at once, no Python loop.
    """
    y = np.asarray(values, dtype=float)
    n = len(y)
    count = int(np.ceil(n / block))
    starts = rng.integers(0, n, size=(n_resamples, count))
    index = (starts[:, :, None] + np.arange(block)[None, None, :]) % n
    means = y[index.reshape(n_resamples, -1)[:, :n]].mean(axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(y.mean()), float(low), float(high)
