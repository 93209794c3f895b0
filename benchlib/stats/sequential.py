"""Looking at a comparison after every round and stopping once it is settled, without spending more than α.

A plan whose repetitions stop when a comparison is settled (``until = "controller settled"``) looks at each
comparison after every round: n = ``min`` … ``max`` runs a side. Reading each look at level α would call a
change that is not there far more often than α, since every look is one more chance. Instead each look
spends part of α, as a group-sequential trial does: O'Brien–Fleming-type α-spending (Lan & DeMets 1983),
each side spending α/2, so that the looks together have spent ``α(t) = 4 − 4Φ(z(1 − α/4)/√t)`` by the
information fraction ``t = n / max`` (gsDesign's ``sfLDOF`` for a symmetric two-sided test: five equally
spaced looks at α = 0.05 have the boundaries 4.877, 3.357, 2.680, 2.290, 2.031). Early looks spend almost
nothing (only a change far past the band settles there), and the look at ``max`` keeps most of α, so a
comparison that needs every run loses little against a fixed design.

Each look's boundary ``c_k`` is the z a look may pass, found by integrating the sequence of statistics
over the looks before it (Armitage, McPherson & Rowe 1969; Jennison & Turnbull 2000, ch. 19): the
boundaries are those of a standardised statistic with independent increments, which the rank statistics of
:mod:`benchlib.stats.compare` are asymptotically. ``α_k = 2 − 2Φ(c_k)`` is the look's nominal level: the
comparison's interval at confidence ``1 − α_k`` is its *repeated confidence interval*, and all of them cover
the true change together with probability at least ``1 − α`` (Jennison & Turnbull 1989). A verdict read off
one of them (improved, regressed or equivalent against the band) is therefore wrong at most α of the time
whichever look it is read at: the look the runner stopped at, or the report's later one. A family of m
comparisons spends α/m each (Bonferroni). The calibration suite checks this with the rank intervals, not
only with the normal theory.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

#: The largest boundary: a look whose share of α is below what this z leaves (2e-15) cannot settle anything.
MOST_Z = 8.0
#: Points of the grid each look's density is carried on (the boundaries to about 1e-6 in z).
_GRID = 801


def spent(fraction: np.ndarray | float, alpha: float) -> np.ndarray:
    """Return the two-sided α O'Brien–Fleming-type spending has used by information ``fraction`` (0 < t ≤ 1)."""
    t = np.asarray(fraction, dtype=float)
    return 4 * stats.norm.sf(stats.norm.isf(alpha / 4) / np.sqrt(t))


@functools.lru_cache(maxsize=64)
def boundaries(looks: tuple[int, ...], alpha: float) -> tuple[float, ...]:
    """Return the two-sided boundary on |z| of each look at ``looks`` runs a side (increasing), spending ``alpha``.

    The first look passes its boundary with probability α(t₁) under no change; look k, having not passed
    before, with the increment α(t_k) − α(t_{k−1}). The statistic's partial sum S at fraction t is carried
    on a grid inside the earlier boundaries; each increment of information is a normal step.
    """
    if not looks or any(b <= a for a, b in zip(looks, looks[1:], strict=False)) or looks[0] < 1:
        raise ValueError(f"looks must be increasing run counts from 1, not {looks}")
    if not 0 < alpha <= 0.5:
        raise ValueError(f"alpha must be above 0 and at most 0.5, not {alpha!r}")
    t = np.asarray(looks, dtype=float) / looks[-1]
    increments = np.diff(spent(t, alpha), prepend=0.0)
    c = [min(MOST_Z, float(stats.norm.isf(increments[0] / 2)))]
    grid = np.linspace(-c[0], c[0], _GRID) * math.sqrt(t[0])
    density = stats.norm.pdf(grid, scale=math.sqrt(t[0]))
    for k in range(1, len(t)):
        step = math.sqrt(t[k] - t[k - 1])
        mass = density * _weights(grid)
        passing = functools.partial(_passing, grid=grid, mass=mass, scale=math.sqrt(t[k]), step=step)
        if passing(MOST_Z) >= increments[k]:
            z = MOST_Z
        else:
            z = float(optimize.brentq(lambda x, f=passing, want=increments[k]: f(x) - want, 0.0, MOST_Z, xtol=1e-9))
        c.append(z)
        new = np.linspace(-z, z, _GRID) * math.sqrt(t[k])
        density = stats.norm.pdf((new[:, None] - grid[None, :]) / step) @ mass / step
        grid = new
    return tuple(c)


def _passing(z: float, *, grid: np.ndarray, mass: np.ndarray, scale: float, step: float) -> float:
    """Return the chance a look passes |z| from the sums still inside (``grid``, ``mass``), one ``step`` on."""
    edge = z * scale
    return float(mass @ (stats.norm.cdf((-edge - grid) / step) + stats.norm.sf((edge - grid) / step)))


#: the practical band a comparison judges by where neither the page nor a settled rule gives one
DEFAULT_BAND = 0.02


def band_of(looks: Looks | None, given: float | None = None) -> float:
    """Return the band a comparison judges by: ``given``, else the settled rule's (``looks.band``), else 2%."""
    if given is not None:
        return given
    return looks.band if looks is not None and looks.band is not None else DEFAULT_BAND


def _weights(grid: np.ndarray) -> np.ndarray:
    """Trapezoid weights of an evenly spaced grid."""
    w = np.full(len(grid), grid[1] - grid[0])
    w[[0, -1]] /= 2
    return w


@dataclass(frozen=True)
class Looks:
    """A comparison looked at after every round from ``first`` to ``last`` runs a side, spending ``alpha``.

    ``level(n_base, n_new, family)`` is the nominal two-sided level of one comparison's interval at its
    look: the look at the fewer of its two sides' runs, each comparison of a family of ``family`` spending
    ``alpha / family``; a count outside ``first``..``last`` (a row that pools cells) gets the first look's,
    the strictest. Any band may be judged on these
    intervals; ``band`` is the one the runs stopped by.
    """

    first: int
    last: int
    alpha: float = 0.05
    #: the practical band the looks judged by while the runs came in (a fraction), where one is known
    band: float | None = None

    def level(self, n_base: int, n_new: int, family: int = 1) -> float:
        """Return the nominal two-sided level of a comparison with these runs a side, in a family of ``family``."""
        looks = tuple(range(self.first, self.last + 1))
        z = boundaries(looks, self.alpha / max(1, family))
        n = min(n_base, n_new)
        # outside the looks (a row pooling several cells, or runs added after the plan's): the strictest level
        return float(2 * stats.norm.sf(z[n - self.first if self.first <= n <= self.last else 0]))
