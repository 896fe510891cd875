"""The gate's thresholds, declared once (`GateThresholds`): each is one field whose default, bounds and refusal the
library's keyword defaults (`DEFAULTS`, runners/decisions/gate/), its checks (`validate_flags`, `sequential_looks`)
and the command's flags (shown as runners/commands/gate.py says) all read; each range derived from what it
sizes. Light: the parser imports it."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from runners.plan.flags import Bounded, Flag, FlagModel
from runners.plan.options import MAX_EPOCHS

__all__ = ["DEFAULTS", "MAX_COST_INCREASE", "MAX_LOOKS", "GateThresholds"]

MAX_COST_INCREASE = 100.0
"""Largest `--max-cost-increase`: the 100-fold cost up to which `power.cost_mde` searches an increase."""
MAX_LOOKS = 25
"""Most looks of a sequential gate: `power.sequential_levels` draws its 400,000 simulated paths again for every 5
looks, so its time grows with the square of the looks (25: about 1.5 s on one core; the designs it serves have
2 to 10). Its memory stays flat whatever the looks (a few columns of paths)."""
_DROP = "a pass-rate drop must be within (0, 1] (e.g. 0.10 for 10 points)"


class GateThresholds(FlagModel):
    """What the gate tolerates and how much power a pass needs: the library's keyword arguments (the command's flags
    show them: runners/commands/gate.py)."""

    k: Annotated[int, Flag(reason=f"must be >= 1 and <= {MAX_EPOCHS}")] = Field(default=3, ge=1, le=MAX_EPOCHS)
    """k of pass^k: at most the epochs per case, which --epochs bounds."""
    max_recall_drop: Annotated[float, Flag(reason="a pass-rate drop must be within [0, 1]")] = Field(
        default=0.0, ge=0.0, le=1.0
    )
    """The pass-rate drop tolerated even when significant (none by default)."""
    max_cost_increase: Annotated[
        float, Flag(reason=f"a relative increase must be >= 0 and <= {MAX_COST_INCREASE:g}")
    ] = Field(default=0.25, ge=0.0, le=MAX_COST_INCREASE)
    """The relative increase of tool calls, model calls or tokens per case run tolerated (a quarter more)."""
    alpha: Annotated[float, Flag(reason="must be within (0, 1)")] = Field(default=0.05, gt=0.0, lt=1.0)
    """The false-alarm rate of the whole gate."""
    max_mde: Annotated[float, Flag(reason=_DROP)] = Field(default=0.10, gt=0.0, le=1.0)
    """The pass-rate drop a pass must be able to see with 80% probability (10 points)."""
    target_mde: Annotated[float | None, Flag(reason="a pass-rate drop must be within (0, 1] (e.g. 0.05)")] = Field(
        default=None, gt=0.0, le=1.0
    )
    """The MDE to plan for (--plan) or to stop a sequential gate at (None: --max-mde's)."""
    budget: int = Field(default=20, ge=1, le=MAX_EPOCHS)
    """The most epochs of a sequential gate (epochs, which --epochs bounds)."""
    stage: int = Field(default=4, ge=1, le=MAX_EPOCHS)
    """The epochs between the looks of a sequential gate."""

    @classmethod
    def bounds(cls, name: str) -> Bounded:
        """The range of threshold `name`, as its flag checks it."""
        bounds = cls.field(name).bounds
        assert bounds is not None, f"{name} is a number"
        return bounds


DEFAULTS = GateThresholds()
"""The gate's defaults: the command's flags and the library's keyword arguments both read them."""
