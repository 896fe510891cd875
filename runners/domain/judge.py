"""The judge: whether a published conclusion states the case's root cause, behind one interface so that the rule
judge (`runners/run/rule_judge.py`, the default, offline) and a model judge (`runners/live/model_judge.py`, any
OpenAI-compatible endpoint, replayed from cassettes) can be swapped and measured on the same labelled answers
(`harness-bench judge-check`)."""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from runners.domain.root_cause import RootCause

__all__ = ["Judge", "JudgeName", "JudgeVerdict"]


class JudgeName(StrEnum):
    """The judges `judge-check` can measure."""

    RULES = "rules"
    """The rule judge (runners/run/rule_judge.py), the default: deterministic, offline."""
    MODEL = "model"
    """A model judge (runners/live/model_judge.py) over --judge-model at --judge-base-url, under cassettes."""


class JudgeVerdict(BaseModel):
    """A judge's decision on one conclusion."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    states_root_cause: bool
    """The conclusion states the root cause."""
    reason: str
    """Why, in a line (what is missing, denied or wrong)."""


@runtime_checkable
class Judge(Protocol):
    """Decides whether a conclusion states a root cause."""

    @property
    def name(self) -> str:
        """The judge's name, as reports and `judge-check --judge` give it."""
        ...

    def judge(self, root_cause: RootCause, conclusion: str, *, question: str) -> JudgeVerdict:
        """Whether `conclusion` (an answer to `question`) states `root_cause`."""
        ...
