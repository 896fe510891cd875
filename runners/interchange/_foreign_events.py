"""Another agent's run as the Harness's typed events: what an import can know of a run no Harness drove.

The run's model calls and tool calls, in order, become MODEL_CALL and TOOL_INVOCATION events (every call ran: no
Harness refused any). What the Harness would have decided of each result is inferred by the rules it applies
(`harness.tracker`), and said so in the run's RELEASED detail:

- an empty result (nothing, or an empty JSON array, object or string) is NO_EVIDENCE, and the Harness's NO_GAIN;
- a result repeating a call (the same tool and arguments) that completed before is the Harness's NO_GAIN (live, the
  Harness would have refused it without running it); a call whose arguments were not recorded is never a repeat;
- a failed call gets no gain (the Harness applies none to a failure);
- a result the source did not record has no evidence status and no gain: not known.

Never guessed: the model's own gain tags (GAINED or NO_GAIN on a result with evidence: the agent gave none), the
retries behind a model call, a result's record count where the result is not a JSON array. The run's outcome is
SUCCESS when its last model call answered (the agent ended the run itself; whether it was right is its verdict's,
from `--outcomes` or the source's reward), FAILED when that call failed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from harness import (
    EvidenceStatus,
    GainApplied,
    GainProducer,
    InformationGain,
    InvocationStatus,
    ModelCall,
    ModelErrorKind,
    ModelPurpose,
    Released,
    ReleaseOutcome,
    RunStarted,
    ToolInvocation,
    TraceEvent,
)

__all__ = ["INFERRED", "ForeignModelCall", "ForeignToolCall", "foreign_events", "scope_of"]

INFERRED = (
    "imported from another agent: every call ran as it asked; the Harness's NO_GAIN inferred by its rules (an"
    " empty result, a repeated call); the model's gain tags unknown"
)
"""What the RELEASED detail of every such run says of what was inferred."""


@dataclass(frozen=True, slots=True)
class ForeignModelCall:
    """One model call of another agent."""

    t_ms: float
    """When it ended, in milliseconds since the run began."""
    latency_ms: float = 0.0
    """How long it took (0: not recorded)."""
    input_tokens: int | None = None
    """Prompt tokens, when recorded."""
    output_tokens: int | None = None
    """Completion tokens, when recorded."""
    error: str | None = None
    """What failed, when it failed (None: answered)."""
    error_kind: ModelErrorKind = ModelErrorKind.SERVER_ERROR
    """The failure's kind, when the source names one the Harness knows."""


@dataclass(frozen=True, slots=True)
class ForeignToolCall:
    """One tool call of another agent, and its result."""

    tool_call_id: str
    """The call's id."""
    tool: str
    """The tool's name."""
    arguments: str | None
    """Its arguments as sent (JSON text, as a rule; None: not recorded)."""
    result: str | None
    """Its result as the model got it (None: not recorded)."""
    failed: bool
    """The tool failed."""
    t_ms: float
    """When it ended."""
    latency_ms: float = 0.0
    """How long it took (0: not recorded)."""
    detail: str | None = None
    """The failure's message."""


def scope_of(arguments: str | None) -> str:
    """A call's identity beside its tool (what a repeat is): its arguments as canonical JSON (keys sorted, no
    spaces), the text as sent when it is not JSON, empty when none were recorded (not known: never a repeat, as a
    request without a scope is not to the loop detectors)."""
    if arguments is None:
        return ""
    try:
        parsed = json.loads(arguments)
    except (ValueError, RecursionError):
        return arguments
    return json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _empty(result: str) -> bool:
    """Nothing came back: blank, or JSON null, an empty array, object or string."""
    text = result.strip()
    if not text:
        return True
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return parsed is None or parsed in ([], {}, "")


def _count(result: str) -> int | None:
    """Records in a result: the length of a JSON array (0 when empty); else not known."""
    try:
        parsed = json.loads(result)
    except (ValueError, RecursionError):
        return 0 if _empty(result) else None
    if isinstance(parsed, list):
        return len(parsed)
    return 0 if _empty(result) else None


def foreign_events(
    model: str, steps: Sequence[ForeignModelCall | ForeignToolCall], *, end_ms: float
) -> tuple[TraceEvent, ...]:
    """The run's events: RUN_STARTED, its calls in order with the gains the Harness's rules infer, RELEASED."""
    events: list[TraceEvent] = [RunStarted(seq=0, t_ms=0.0, model=model)]
    completed: set[tuple[str, str]] = set()
    last_call: ForeignModelCall | None = None

    def add(event: TraceEvent) -> None:
        events.append(event)

    for step in steps:
        n = len(events)
        if isinstance(step, ForeignModelCall):
            last_call = step
            failed = step.error is not None
            add(ModelCall(seq=n, t_ms=step.t_ms, purpose=ModelPurpose.DIAGNOSIS, attempt=1,
                          latency_ms=step.latency_ms, input_tokens=None if failed else step.input_tokens,
                          output_tokens=None if failed else step.output_tokens,
                          error_kind=step.error_kind if failed else None, detail=step.error))  # fmt: skip
            continue
        scope = scope_of(step.arguments)
        size = len(step.result.encode()) if step.result is not None else 0
        if step.failed:
            add(ToolInvocation(seq=n, t_ms=step.t_ms, tool_call_id=step.tool_call_id, tool=step.tool, scope=scope,
                               invocation_status=InvocationStatus.FAILED, observation_bytes=size,
                               latency_ms=step.latency_ms, detail=step.detail or step.result or "failed"))  # fmt: skip
            continue
        evidence: EvidenceStatus | None = None
        if step.result is not None:
            evidence = EvidenceStatus.NO_EVIDENCE if _empty(step.result) else EvidenceStatus.EVIDENCE
        add(ToolInvocation(seq=n, t_ms=step.t_ms, tool_call_id=step.tool_call_id, tool=step.tool, scope=scope,
                           invocation_status=InvocationStatus.COMPLETED, observation_bytes=size,
                           latency_ms=step.latency_ms, evidence_status=evidence,
                           count=None if step.result is None else _count(step.result),
                           truncated=None))  # fmt: skip
        if evidence is None:
            continue  # not recorded: no gain known
        repeated = bool(scope) and (step.tool, scope) in completed
        completed.add((step.tool, scope))
        if evidence is EvidenceStatus.NO_EVIDENCE or repeated:
            add(GainApplied(seq=len(events), t_ms=step.t_ms, tool_call_id=step.tool_call_id,
                            gain=InformationGain.NO_GAIN, producer=GainProducer.HARNESS))  # fmt: skip
    answered = last_call is not None and last_call.error is None
    end = max(end_ms, events[-1].t_ms)
    add(Released(seq=len(events), t_ms=end, outcome=ReleaseOutcome.SUCCESS if answered else ReleaseOutcome.FAILED,
                 stop_reason=None, detail=INFERRED))  # fmt: skip
    return tuple(events)
