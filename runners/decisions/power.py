"""What a gate comparison could have caught: minimum detectable effects and group-sequential looks.

**Minimum detectable effect (MDE), by simulation of the gate's own test** (docs/gate.md, "Power: the
minimum detectable effect"):

1. *Null data with this comparison's noise.* A replicate swaps each case's baseline and candidate
   runs with probability ½ — under "the candidate behaves like the baseline" the two are
   exchangeable, so this is exactly the null the sign-flip test assumes, with the observed per-case
   noise, cases and epochs.
2. *The alternative a drop means.* A drop of Δ points flips round(Δ × case runs) of the replicate's
   passing candidate runs to failing, chosen at random (what the calibration study injects); a cost
   increase of x multiplies every candidate case's cost by 1 + x.
3. *The same decision.* Each replicate's smallest effect that the test rejects — one-sided sign-flip
   p ≤ its level **and** beyond the margin — is found by bisection. Its level is the test's first
   Holm step, α × its weight (the overall pass rate 80% of α): the share it is sure to get.
4. The MDE at power π is the π-quantile of those smallest effects over `MDE_REPLICATES` seeded
   replicates; `None` either when the test can never be significant (`MdeStatus.UNREACHABLE`: 2
   cases, whose smallest p is ¼) or when it can but even flipping every passing run (or a 100-fold
   cost) is significant in fewer than π of the replicates (`MdeStatus.UNDETECTABLE`).

The p of the sign-flip test is computed exactly (convolution of the per-case sign distributions)
up to `EXACT_MAX_CASES` differing cases, and by its normal approximation with a continuity
correction beyond (the sum of ≥ 20 bounded independent signs; its error is below the Monte Carlo
error of the gate's own 9,999 resamples). Costs use the normal approximation throughout.

**Group-sequential looks** (`sequential_levels`): Lan–DeMets α spending with the O'Brien–Fleming
shape, α(t) = 2 − 2Φ(z₁₋α/₂ / √t), t = epochs / budget. The boundary of each look is set so the
probability of a first crossing at that look, under the Brownian-motion law of the cumulative
statistic (independent epochs: independent increments), is the α spent there; it is returned as the
nominal α the whole gate (Holm over all its tests) is held to at that look.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

import numpy as np
import scipy.special
import scipy.stats

from runners.decisions.gate_thresholds import MAX_LOOKS

__all__ = [
    "EXACT_MAX_CASES",
    "MDE_REPLICATES",
    "MDE_SEED",
    "POWERS",
    "Mde",
    "MdeStatus",
    "cases_for",
    "cost_mde",
    "epochs_for",
    "min_cases",
    "obf_spent",
    "pass_rate_mde",
    "pass_rate_thresholds",
    "sequential_levels",
    "sign_flip_rejects",
]

POWERS = (0.8, 0.9)
"""The detection probabilities an MDE is reported at."""
MDE_REPLICATES = 400
"""Null replicates per MDE (the quantile's standard error is ≈ 0.3 points at 81 cases × 3 epochs)."""
MDE_SEED = 20_261_201
EXACT_MAX_CASES = 20
"""Up to this many differing cases the sign-flip p is exact; beyond, its normal approximation."""
_SEQ_PATHS = 400_000
_SEQ_SEED = 20_261_202
_SEQ_BLOCK = 20_000
"""Paths drawn at a time by `_look_statistics` (20,000 × 25 looks: 4 MB)."""
_SEQ_GROUP = 5
"""Looks whose statistics `sequential_levels` keeps at a time (5 × 3.2 MB); the paths are drawn once a group."""


class MdeStatus(StrEnum):
    """What an MDE at one power is: a size, or which of the two reasons there is none."""

    FOUND = "found"
    """A change of the MDE's size is detected with that probability."""
    UNREACHABLE = "unreachable"
    """The test can never be significant: with these cases its smallest p is above its level."""
    UNDETECTABLE = "undetectable"
    """The test can be significant, but not even the largest change simulated (every passing candidate run lost;
    a 100-fold cost) is detected with that probability."""


@dataclass(frozen=True)
class Mde:
    """The smallest change a test detects with 80% and 90% probability."""

    level: float
    """One-sided level the test is held to: α × its Holm weight."""
    at_80: float | None
    """Pass-rate drop (fraction) or relative cost increase detected with 80% probability; None: unreachable."""
    at_90: float | None
    """The same at 90%."""
    min_p: float
    """Smallest p the test can reach with these cases (½ per case)."""

    @property
    def reachable(self) -> bool:
        """The test can be significant at all."""
        return self.min_p <= self.level

    def at(self, power: float) -> float | None:
        """The MDE at `power` (one of `POWERS`); None: see `status`."""
        return self.at_80 if power == POWERS[0] else self.at_90

    def status(self, power: float) -> MdeStatus:
        """Whether there is an MDE at `power`, and if not, why."""
        if not self.reachable:
            return MdeStatus.UNREACHABLE
        return MdeStatus.UNDETECTABLE if self.at(power) is None else MdeStatus.FOUND


def min_cases(level: float) -> int:
    """Fewest cases whose smallest sign-flip p (½ⁿ) is ≤ `level`."""
    return max(1, math.ceil(math.log2(1 / level) - 1e-12))


def sign_flip_rejects(diffs: np.ndarray, level: float) -> bool:
    """One-sided ("less") sign-flip test on integer per-case differences: p ≤ level?"""
    d = diffs[diffs != 0]
    if d.size == 0:
        return False
    s = int(d.sum())
    if s >= 0:
        return False
    a = np.abs(d)
    if d.size <= EXACT_MAX_CASES:
        return _exact_p(tuple(sorted(int(x) for x in a)), s) <= level
    step = int(np.gcd.reduce(a))
    z = (s + step) / math.sqrt(float(np.sum(a.astype(np.float64) ** 2)))
    # scipy.special.ndtr is what scipy.stats.norm.cdf computes, without its per-call argument handling (≈ 60 µs,
    # most of a replicate's time here: this runs a few hundred thousand times per MDE)
    return float(scipy.special.ndtr(z)) <= level


@lru_cache(maxsize=65_536)
def _exact_p(magnitudes: tuple[int, ...], s: int) -> float:
    # The signed sum is 2T - total, T the sum of the magnitudes given a + sign: P(sum <= s) = P(T <= (s + total) / 2),
    # counted over the 2^n sign choices (whole numbers below 2^53: exact, as the halved probabilities were).
    total = sum(magnitudes)
    ways = np.zeros(total + 1)
    ways[0] = 1.0
    for a in magnitudes:
        ways[a:] += ways[: total + 1 - a]  # overlapping operands: NumPy reads the old values, as a copy would
    return float(ways[: (s + total) // 2 + 1].sum()) / 2.0 ** len(magnitudes)


def pass_rate_thresholds(
    epochs: Sequence[int],
    base_passes: Sequence[int],
    cand_passes: Sequence[int],
    *,
    level: float,
    margin: float = 0.0,
    replicates: int = MDE_REPLICATES,
    seed: int = MDE_SEED,
) -> np.ndarray:
    """Per null replicate, the smallest injected drop (fraction of case runs) the test rejects; inf if none."""
    e = np.asarray(epochs, dtype=np.int64)
    b0 = np.asarray(base_passes, dtype=np.int64)
    c0 = np.asarray(cand_passes, dtype=np.int64)
    runs = int(e.sum())
    scale = math.lcm(*(int(x) for x in e))
    unit = scale // e
    rng = np.random.default_rng(seed)
    out = np.full(replicates, np.inf)
    for r in range(replicates):
        swap = rng.random(e.size) < 0.5
        b = np.where(swap, c0, b0)
        c = np.where(swap, b0, c0)
        order = rng.permutation(np.repeat(np.arange(e.size), c))  # the passing candidate runs, in flip order

        def rejects(f: int, b: np.ndarray = b, c: np.ndarray = c, order: np.ndarray = order) -> bool:
            cc = c - np.bincount(order[:f], minlength=e.size)
            change = float(np.mean((cc - b) / e))
            return -change > margin and sign_flip_rejects((cc - b) * unit, level)

        hi = int(order.size)
        if not rejects(hi):
            continue
        lo = 0
        if rejects(0):
            out[r] = 0.0
            continue
        while hi - lo > 1:  # invariant: lo does not reject, hi does
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if rejects(mid) else (mid, hi)
        out[r] = hi / runs
    return out


def _quantile(thresholds: np.ndarray, power: float) -> float | None:
    v = float(np.sort(thresholds)[max(0, math.ceil(power * thresholds.size) - 1)])
    return None if math.isinf(v) else v


def pass_rate_mde(
    epochs: Sequence[int],
    base_passes: Sequence[int],
    cand_passes: Sequence[int],
    *,
    level: float,
    margin: float = 0.0,
    replicates: int = MDE_REPLICATES,
    seed: int = MDE_SEED,
) -> Mde:
    """The MDE of a pass-rate test (overall or one family) over these cases."""
    min_p = 0.5 ** len(epochs)
    if min_p > level:
        return Mde(level, None, None, min_p)
    thr = pass_rate_thresholds(
        epochs, base_passes, cand_passes, level=level, margin=margin, replicates=replicates, seed=seed
    )
    return Mde(level, _quantile(thr, POWERS[0]), _quantile(thr, POWERS[1]), min_p)


def cost_mde(
    base: Sequence[float],
    cand: Sequence[float],
    *,
    level: float,
    margin: float,
    replicates: int = MDE_REPLICATES,
    seed: int = MDE_SEED,
    max_increase: float = 100.0,
) -> Mde:
    """The MDE of a cost test: the relative increase of every candidate case's mean cost it detects."""
    b0 = np.asarray(base, dtype=np.float64)
    c0 = np.asarray(cand, dtype=np.float64)
    min_p = 0.5 ** int(np.count_nonzero((b0 != 0) | (c0 != 0)))
    if min_p > level or b0.sum() == 0:
        return Mde(level, None, None, min_p)
    rng = np.random.default_rng(seed)
    swap = rng.random((replicates, b0.size)) < 0.5
    b = np.where(swap, c0, b0)
    c = np.where(swap, b0, c0)
    z_crit = float(scipy.stats.norm.ppf(level))

    def rejects(x: np.ndarray) -> np.ndarray:
        d = c * (1 + x[:, None]) - b
        ss = np.sqrt(np.sum(d * d, axis=1))
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(ss > 0, -d.sum(axis=1) / ss, 0.0)  # "greater" is "less" of the negated differences
            rel = (c.sum(axis=1) * (1 + x) - b.sum(axis=1)) / b.sum(axis=1)
        out: np.ndarray = (z <= z_crit) & (rel > margin)
        return out

    hi = np.full(replicates, max_increase)
    ok = rejects(hi)
    lo = np.zeros(replicates)
    at_zero = rejects(lo)
    for _ in range(40):
        mid = (lo + hi) / 2
        r = rejects(mid)
        hi = np.where(r, mid, hi)
        lo = np.where(r, lo, mid)
    thr = np.where(ok, np.where(at_zero, 0.0, hi), np.inf)
    return Mde(level, _quantile(thr, POWERS[0]), _quantile(thr, POWERS[1]), min_p)


def epochs_for(mde: float, epochs: int, target: float) -> int:
    """Epochs that bring an MDE measured at `epochs` down to `target`: the noise falls with 1/√epochs."""
    return max(epochs, math.ceil(epochs * (mde / target) ** 2 - 1e-9))


def cases_for(mde: float, cases: int, target: float) -> int:
    """Cases that bring the MDE down to `target` at the same epochs (noise of a mean falls with 1/√cases)."""
    return max(cases, math.ceil(cases * (mde / target) ** 2 - 1e-9))


def obf_spent(t: float, alpha: float) -> float:
    """α spent by information fraction t (Lan–DeMets, O'Brien–Fleming shape); α at t = 1."""
    if t <= 0:
        return 0.0
    t = min(t, 1.0)
    return float(2 - 2 * scipy.stats.norm.cdf(scipy.stats.norm.ppf(1 - alpha / 2) / math.sqrt(t)))


@lru_cache(maxsize=256)
def sequential_levels(fractions: tuple[float, ...], alpha: float) -> tuple[float, ...]:
    """Nominal one-sided α of each look at information fractions `fractions` (increasing, last ≤ 1)."""
    if any(b <= a for a, b in itertools.pairwise(fractions)) or not 0 < fractions[0]:
        raise ValueError(f"information fractions must increase from above 0: {fractions}")
    if len(fractions) > MAX_LOOKS:
        raise ValueError(f"{len(fractions)} looks: at most {MAX_LOOKS}")
    alive = np.ones(_SEQ_PATHS, dtype=bool)
    levels = []
    spent_before = 0.0
    z = np.empty((0, 0))
    for k, t in enumerate(fractions):
        if k % _SEQ_GROUP == 0:
            z = _look_statistics(fractions, range(k, min(k + _SEQ_GROUP, len(fractions))))
        spend = obf_spent(t, alpha) - spent_before
        spent_before += spend
        n_cross = round(spend * _SEQ_PATHS)
        column = z[:, k % _SEQ_GROUP]
        zs = np.sort(column[alive])
        if n_cross <= 0:
            crit = float(zs[0]) - 1.0 if zs.size else -10.0
        else:
            crit = float(zs[min(n_cross, zs.size) - 1])
        alive &= column > crit
        levels.append(float(scipy.stats.norm.cdf(crit)))
    return tuple(levels)


def _look_statistics(fractions: tuple[float, ...], looks: range) -> np.ndarray:
    """The standardized statistic at each of `looks` of every simulated path (paths × looks): those columns of the
    paths × looks matrix of Brownian increments drawn from `_SEQ_SEED`, summed and divided by √t.

    The matrix is drawn again in blocks of paths for each group of `_SEQ_GROUP` looks (the same stream, so the same
    numbers as drawing it whole) and only the group's columns are kept: memory is a group and a block whatever the
    looks (the whole matrix was 3.2 MB a look: 298 GiB at 100,000 looks), for a time that grows with the square of
    the looks (MAX_LOOKS bounds them)."""
    rng = np.random.default_rng(_SEQ_SEED)
    scale = np.sqrt(np.diff((0.0, *fractions)))
    root_t = np.sqrt(np.asarray(fractions))[looks.start : looks.stop]
    columns = np.empty((_SEQ_PATHS, len(looks)))
    for start in range(0, _SEQ_PATHS, _SEQ_BLOCK):
        block = rng.standard_normal((min(_SEQ_BLOCK, _SEQ_PATHS - start), len(fractions)))
        block *= scale
        np.cumsum(block, axis=1, out=block)
        columns[start : start + block.shape[0]] = block[:, looks.start : looks.stop] / root_t
    return columns
