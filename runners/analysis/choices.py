"""The vocabulary of `recommend` and `report`, declared once and light to import (the CLI builds its choices
and defaults from it before any analysis module is loaded)."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["DEFAULT_MARGIN", "Objective", "RecommendInputError", "Rule", "check_margin"]

DEFAULT_MARGIN = 0.02
"""Default non-inferiority margin (`--margin`): 2 points of rate."""


class Objective(StrEnum):
    """What "cheapest" means."""

    TOKENS = "tokens"
    TOOL_INVOCATIONS = "tool_invocations"
    MODEL_CALLS = "model_calls"
    WASTED = "wasted"


class Rule(StrEnum):
    """How the recommendation trades recall against cost."""

    NON_INFERIORITY = "non-inferiority"
    MAX_RECALL = "max-recall"


class RecommendInputError(ValueError):
    """A recommend flag is out of range (exit 2)."""


def check_margin(margin: float) -> float:
    """A rate margin is within [0, 1]; returns it."""
    if not 0.0 <= margin <= 1.0:
        raise RecommendInputError(
            f"--margin {margin:g}: a rate margin must be within [0, 1]"
            f" ({DEFAULT_MARGIN:g} = {DEFAULT_MARGIN * 100:g} points)"
        )
    return margin
