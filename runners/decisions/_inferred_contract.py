"""The information-gain contract on another agent's run (imported from its trace), as far as the Harness's own
decisions can be inferred: what `compare-stops --policy no-gain:T` replays on such a run.

The run's events hold the Harness's NO_GAIN inferred by its rules (`runners.interchange._foreign_events`: an empty
result, a repeated call); the model's own gain tags were never given. Walking the run's tool calls in order, T
consecutive NO_GAIN deliver STOP_REQUIRED: a result with evidence is counted as GAINED (the model's tag is not
known: had it said NO_GAIN the contract would stop earlier, so the cut found is the latest the contract makes), a
failed call changes nothing (the Harness applies no gain to a failure). A repeated call is refused live without
running: when it is not the one that saturates the run, the model would have seen the refusal instead of the
result, and what it did next was never recorded — the run diverges there (censored from that call on).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness import (
    EvidenceStatus,
    GainApplied,
    GainProducer,
    InformationGain,
    InvocationStatus,
    Released,
    ToolInvocation,
    TraceEvent,
)
from runners.interchange._foreign_events import INFERRED

__all__ = ["InferredContract", "inferred", "inferred_contract"]


@dataclass(frozen=True, slots=True)
class InferredContract:
    """Where the contract stops another agent's run, or where the run stops being the one the Harness would run."""

    cut_seq: int | None
    """The request event at which STOP_REQUIRED is delivered (None: the contract does not stop the run)."""
    tool_call_id: str | None
    """That request's call."""
    executed: bool
    """The request ran (its empty result saturated the run), or was refused (a repeat)."""
    diverges_at: int | None
    """The request event before which a refused repeat makes the run another one (None: it does not)."""


def inferred(events: Sequence[TraceEvent]) -> bool:
    """Whether the run is another agent's, its Harness decisions inferred (its RELEASED says so)."""
    return bool(events) and isinstance(events[-1], Released) and events[-1].detail == INFERRED


def inferred_contract(events: Sequence[TraceEvent], threshold: int) -> InferredContract:
    """The contract at `threshold` on the run (see the module docstring)."""
    no_gain = {e.tool_call_id for e in events if isinstance(e, GainApplied) and e.producer is GainProducer.HARNESS
               and e.gain is InformationGain.NO_GAIN}  # fmt: skip
    completed: set[tuple[str, str]] = set()
    consecutive = 0
    for e in events:
        if not isinstance(e, ToolInvocation):
            continue
        done = e.invocation_status is InvocationStatus.COMPLETED and e.evidence_status is not None
        repeat = done and bool(e.scope) and (e.tool, e.scope) in completed  # arguments not recorded: never a repeat
        if done:
            completed.add((e.tool, e.scope))
        if e.tool_call_id in no_gain:
            consecutive += 1
        elif done and e.evidence_status is EvidenceStatus.EVIDENCE:
            consecutive = 0
        if consecutive >= threshold:
            return InferredContract(e.seq if repeat else e.seq + 1, e.tool_call_id, not repeat, None)
        if repeat:
            return InferredContract(None, None, False, e.seq)
    return InferredContract(None, None, False, None)
