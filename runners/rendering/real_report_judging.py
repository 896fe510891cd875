"""What the real-models report says of who judged: the outcome judge and its measured error rates on the committed
labelled answers (every recall figure is the rule judge's; `runners/pipelines/real_models.py` measures them), where
each FALLBACK came from, whether each SemanticGuard verdict was the agent's model judging its own conclusion, and which
case runs the bench failed (left out of every figure, never counted as the model's)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from runners.decisions.judge_rates import JudgeRates
from runners.decisions.real_models import RecordedSummary
from runners.domain.fallback_source import FallbackSource
from runners.domain.labelled_answers import Label
from runners.rendering.judge_rates import cell

__all__ = [
    "FALLBACK_HEADER",
    "JUDGE_HEADER",
    "JudgeOnSet",
    "bench_failure_text",
    "fallback_rows",
    "guard_text",
    "judge_rows",
    "judge_text",
]


class JudgeOnSet(BaseModel):
    """The default judge on one committed labelled set."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    labelled_set: str
    """`held-out` or `dev`."""
    rates: JudgeRates
    """Its error rates there."""


def judge_text() -> str:
    """The paragraph above the judge's rates."""
    return (
        "Whether a SUCCESS conclusion states the case's root cause is decided by the rule judge (runners/run/"
        "rule_judge.py): every fact of the case's declared root cause asserted (entity and mechanism in one sentence), "
        "none denied, no distractor asserted. Every recall and SUCCESS figure in this report is that judge's; its "
        "error rates on the committed labelled answers (harness-bench judge-check; the held-out set was written "
        "before the judge and never developed against) are:"
    )


JUDGE_HEADER = ["labelled set", "judge", "wrong passed", "vague passed", "correct failed"]


def judge_rows(measured: Sequence[JudgeOnSet]) -> list[list[str]]:
    """One row per labelled set."""
    return [[m.labelled_set, m.rates.judge, cell(m.rates.by_label[Label.WRONG]), cell(m.rates.by_label[Label.VAGUE]),
             cell(m.rates.by_label[Label.CORRECT])] for m in measured]  # fmt: skip


FALLBACK_HEADER = ["NO_GAIN", "FALLBACK", "the model declined", "a guard blocked", "the Harness relabelled"]


def fallback_rows(summary: RecordedSummary) -> list[list[str]]:
    """Per threshold: the FALLBACK releases by where they came from."""
    rows = []
    for t in summary.thresholds:
        src = t.fallback_sources
        rows.append([str(t.no_gain_threshold), str(t.outcomes.get("FALLBACK", 0)),
                     *(str(src.get(s.value, 0)) for s in FallbackSource)])  # fmt: skip
    return rows


def guard_text(summary: RecordedSummary) -> str:
    """Who gave the SemanticGuard's verdicts of a recording: the agent's own model, or another."""
    args = list(summary.sweep_args)
    guard = args[args.index("--guard-model") + 1] if "--guard-model" in args[:-1] else None
    verdicts = sum(sum(t.semantic_verdicts.values()) for t in summary.thresholds)
    if verdicts == 0:
        return "SemanticGuard: no verdicts (no conclusion reached it, or the loop has none)."
    if guard is None:
        return (f"SemanticGuard: {verdicts} verdict(s) over the thresholds, every one self-judged — the guard was the "
                f"agent's own model ({summary.model}) judging its own conclusion (no --guard-model).")  # fmt: skip
    return (f"SemanticGuard: {verdicts} verdict(s) over the thresholds, none self-judged — the guard was {guard} "
            f"(--guard-model), the agent {summary.model}.")  # fmt: skip


def bench_failure_text(summary: RecordedSummary) -> str | None:
    """The case runs that ended on the bench's failure, not the model's, per threshold (None: there were none)."""
    failed = [(t.no_gain_threshold, t.bench_failures) for t in summary.thresholds if t.bench_failures]
    if not failed:
        return None
    where = ", ".join(f"{n} at NO_GAIN {t}" for t, n in failed)
    return (
        f"Left out: {where} case run(s) ended on the bench's failure, not the model's — a model call timed out on "
        "a loaded machine, was refused or failed on the endpoint after the Harness's retries; unjudged, they are "
        "in no figure above or below (`case_runs.failures` says which call)."
    )
