"""The declared development split of the evaluation cases, so that model-facing text and tool behaviour are tuned on
some cases and real-model figures are reported on the others.

The rule is mechanical and stated once: within each family, the cases are ordered by the SHA-256 of their id and the
first third (rounded) is the development split; the rest is held out. Nobody picks the cases, a new case lands in one
split by its id alone, and every family is in both.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable
from enum import StrEnum

from runners.domain.case_model import EvalCase

__all__ = ["DEV_SHARE", "Split", "split_of_cases"]

DEV_SHARE = 1 / 3
"""The share of each family's cases in the development split."""


class Split(StrEnum):
    """Where a case sits for measuring real models."""

    DEV = "dev"
    """Model-facing text and tool behaviour may be developed on it."""
    HELD_OUT = "held-out"
    """Reported on, never tuned on."""


def _rank(case_id: str) -> str:
    return hashlib.sha256(case_id.encode("utf-8")).hexdigest()


def split_of_cases(cases: Iterable[EvalCase]) -> dict[str, Split]:
    """Each case's split, by the rule in the module docstring (a family is split among the cases given)."""
    by_family: dict[str, list[str]] = defaultdict(list)
    for case in cases:
        by_family[case.family].append(case.id)
    out: dict[str, Split] = {}
    for ids in by_family.values():
        ranked = sorted(ids, key=_rank)
        dev = round(len(ranked) * DEV_SHARE)
        out.update({case_id: Split.DEV if i < dev else Split.HELD_OUT for i, case_id in enumerate(ranked)})
    return out
