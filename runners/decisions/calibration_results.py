"""What the calibration study measures, as typed results: a rate with its exact interval, the gate part (false
alarms and detection per profile), the power part (predicted MDE and detection against measured, the sequential
mode) and the recommend part (picks per profile and epoch count).

`CalibrationResults` is the study's file (`reports/calibration/calibration.json`): its JSON is the same shape the
study has always written (each gate run at its own key: `gate` at 3 epochs, `gate_<n>_epochs` beside it), so a file
written before reads back and a part re-run replaces only its own key.
"""

from __future__ import annotations

from typing import Any

import scipy.stats
from pydantic import BaseModel, ConfigDict, model_serializer, model_validator

from runners.plan.settings import SettingValue

__all__ = [
    "DROPS",
    "STOCHASTIC",
    "CalibrationResults",
    "DropDetection",
    "FixedEpochs",
    "GateProfile",
    "GateStudy",
    "PowerProfile",
    "PowerStudy",
    "Rate",
    "RecommendPick",
    "RecommendProfile",
    "RecommendStudy",
    "SequentialPlan",
    "SequentialResult",
    "Tolerance",
    "gate_key",
    "rate",
]

STOCHASTIC = ("sloppy", "eager", "fabricator")
"""The noisy profiles of the calibration study: each seed draws its own trajectories."""
DROPS = (2, 5, 10)
"""Injected pass-rate drops (points) the study compares point by point."""


class _Result(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Rate(_Result):
    """A share with its exact (Clopper–Pearson) 95% interval."""

    hits: int
    """How many of the `n` trials hit."""
    n: int
    """Trials."""
    rate: float
    """hits / n."""
    low: float
    """The interval's lower bound."""
    high: float
    """The interval's upper bound."""


def rate(hits: int, n: int) -> Rate:
    """`hits` of `n` with its exact 95% interval."""
    ci = scipy.stats.binomtest(hits, n).proportion_ci(method="exact")
    return Rate(hits=hits, n=n, rate=hits / n, low=float(ci.low), high=float(ci.high))


class DropDetection(Rate):
    """How often the gate failed a pair with an injected drop, and how many case runs were flipped for it."""

    flips: list[int]
    """The distinct numbers of candidate case runs flipped to failing (one per pair size)."""


class GateProfile(_Result):
    """The gate part for one profile: same-profile seed pairs."""

    cases: int
    """Cases in each pair."""
    case_runs: int
    """Paired case runs in each pair (cases × epochs)."""
    baseline_pass_rate_first_pair: float
    """The baseline's pass rate in the first pair."""
    false_alarms: Rate | None
    """Pairs the gate failed with no drop injected (None: the noise-free reference, a copy of itself)."""
    null_sd_points: float
    """The sign-flip null's standard deviation of the mean per-case difference, in points: the noise a drop beats."""
    false_alarm_tests: list[str]
    """The gate's tests that raised the false alarms."""
    detection: dict[str, DropDetection]
    """Per injected drop (points, as text): the pairs the gate failed."""


class GateStudy(_Result):
    """False alarms and detection of the gate at one epoch count."""

    pairs_per_profile: int
    """Seed pairs per stochastic profile."""
    epochs: int
    """Epochs of every bench run."""
    profiles: dict[str, GateProfile]
    """Per profile."""
    false_alarms_all: Rate
    """False alarms over every stochastic profile."""
    seconds: float
    """Wall time of the part."""


class FixedEpochs(_Result):
    """The fixed-epoch gate at one epoch count: its predicted MDE and detection against the measured ones."""

    predicted_mde_80: float
    """The MDE at 80% power the gate prints, in points (mean over pairs)."""
    predicted_mde_90: float
    """At 90% power."""
    predicted_mde_80_range: list[float]
    """The smallest and largest 80% MDE over the pairs."""
    measured_drop_at_80: float | None
    """The injected drop the gate fails 80% of the pairs at (interpolated; None: not reached on the grid)."""
    measured_drop_at_90: float | None
    """At 90%."""
    detection: dict[str, Rate]
    """Per injected drop (points, as text): the pairs the gate failed."""
    predicted_detection: dict[str, float]
    """Per compared drop: the detection rate the gate's power analysis predicts."""
    false_alarms: Rate | None
    """Pairs failed with no drop (None: the noise-free reference)."""


class SequentialResult(_Result):
    """The sequential gate over the same pairs."""

    false_alarms: Rate
    """Pairs failed with no drop."""
    detection: Rate
    """Pairs failed with the sequential drop injected."""
    mean_epochs_spent: float
    """Epochs run before the gate stopped, on average."""
    mean_epochs_to_detect: float | None
    """Epochs run before a detected drop was failed, on average (None: nothing detected)."""
    stops_by_look: dict[str, int]
    """How many pairs stopped at each look (epochs, as text)."""


class PowerProfile(_Result):
    """The power part for one profile."""

    cases: int
    """Cases."""
    distinct_case_runs: int
    """Case runs actually executed (distinct (case, trajectory)); the others were reused."""
    fixed: dict[str, FixedEpochs]
    """Per epoch count (as text)."""
    sequential: SequentialResult | None = None
    """The sequential mode (stochastic profiles only)."""


class SequentialPlan(_Result):
    """The sequential mode the power part runs."""

    budget: int
    """Epochs at most."""
    stage: int
    """A look every this many epochs."""
    drop: int
    """The injected drop (points)."""


class Tolerance(_Result):
    """What the power part accepts."""

    mde_points: float
    """The predicted 80% MDE within this many points of the measured one."""
    rate: str
    """How a predicted detection rate is compared with the measured one."""


class PowerStudy(_Result):
    """Predicted against measured detection; the sequential mode's false alarms and epochs."""

    pairs_per_profile: int
    """Seed pairs per profile."""
    epochs: list[int]
    """The fixed epoch counts measured."""
    drops: list[int]
    """The injected drops of the measured detection curve (points)."""
    sequential: SequentialPlan
    """The sequential mode."""
    tolerance: Tolerance
    """The acceptance."""
    profiles: dict[str, PowerProfile]
    """Per profile."""
    seconds: float
    """Wall time of the part."""


class RecommendPick(_Result):
    """What `recommend` picked from one sweep."""

    config: dict[str, SettingValue]
    """The chosen configuration's swept settings."""
    recall: float
    """Its diagnosis recall."""
    honest_fallback: float
    """Its honest-fallback rate."""
    best_recall: float
    """The sweep's best recall."""


class RecommendProfile(_Result):
    """`recommend`'s picks for a profile with a known optimum."""

    known_optimum: int
    """The no_gain_threshold the profile is built to need."""
    picks: dict[str, RecommendPick]
    """Per epoch count (as text)."""
    identical_across_epochs: bool
    """Whether every epoch count picked the same configuration."""
    optimum_found: bool
    """Whether every pick's threshold is the known optimum."""


class RecommendStudy(_Result):
    """`recommend`'s pick per profile with a known optimum, at several epoch counts."""

    families: list[str]
    """The families swept."""
    thresholds: list[int]
    """The no_gain_threshold axis."""
    budgets: list[int]
    """The max_tool_invocations axis."""
    profiles: dict[str, RecommendProfile]
    """Per profile."""
    seconds: float
    """Wall time of the part."""


def gate_key(epochs: int) -> str:
    """Where a gate part of `epochs` epochs is kept: `gate` for the acceptance setting (3), else beside it."""
    return "gate" if epochs == 3 else f"gate_{epochs}_epochs"


class CalibrationResults(BaseModel):
    """The study's file: every part run so far."""

    model_config = ConfigDict(extra="forbid")

    recommend: RecommendStudy | None = None
    """The recommend part."""
    gates: dict[str, GateStudy] = {}
    """The gate parts, by `gate_key` (each its own key of the file)."""
    power: PowerStudy | None = None
    """The power part."""

    @model_validator(mode="before")
    @classmethod
    def _gather_gates(cls, data: Any) -> Any:
        """The file keeps each gate part at its own top-level key; here they are one mapping."""
        if not isinstance(data, dict) or "gates" in data:
            return data
        gates = {k: v for k, v in data.items() if k == "gate" or k.startswith("gate_")}
        return {**{k: v for k, v in data.items() if k not in gates}, "gates": gates}

    @model_serializer(mode="wrap")
    def _spread_gates(self, handler: Any) -> dict[str, Any]:
        """Written as the study always wrote it: the parts run, each gate part at its own key."""
        data: dict[str, Any] = handler(self)
        gates = data.pop("gates", {})
        out = {k: v for k, v in data.items() if v is not None}
        return {**out, **gates}
