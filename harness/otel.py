"""OpenTelemetry GenAI spans of a run, built from its typed trace events (`harness.trace`).

The one mapping from the Harness's audit trace to the OpenTelemetry GenAI conventions, used both live
(`HarnessSession(tracer=...)` hands every event to a `SpanRecorder` as it is emitted) and after the fact
(`harness-bench export --otel` replays stored events through the same recorder), so library spans and
exported spans have the same shape:

- one `invoke_agent` span per run (RUN_STARTED … RELEASED), child of the caller's current span;
- under it, one `chat` span per model call attempt (`harness.model_call.purpose` says DIAGNOSIS or
  SEMANTIC_GUARD; the guard's call also carries `harness.semantic_guard = true`) and one `execute_tool` span
  per backend invocation (TOOL_INVOCATION);
- every other event — TOOL_REQUEST_REJECTED, GAIN_APPLIED, STOP_REQUIRED_DELIVERED, COLLECTION_STOPPED,
  BUDGET_EXHAUSTED, DRAFT_RECEIVED, EVIDENCE_CHECKED, GUARD_VERDICT — as a span event `harness.<kind>` on the
  run's span; RELEASED sets the outcome attributes and ends it.

Attribute names come from `opentelemetry-semantic-conventions` where it has them (`gen_ai.*`, `error.type`);
every other event field is `harness.<field>` (see `attribute_name`): one namespace, documented in docs/traces.md.
Message contents are recorded only when opted in (`capture_content=True`, or the conventions' environment
variable OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true): off by default.

This module imports OpenTelemetry; nothing else in `harness` does, so the library works without it installed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from opentelemetry import trace as otel_trace
from opentelemetry.context import Context
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue

from harness.config import RunLimits
from harness.context import RunContext
from harness.contracts import InvocationStatus, ModelPurpose, ReleaseOutcome
from harness.trace import (
    BudgetExhausted,
    ModelCall,
    Released,
    RunStarted,
    StopRequiredDelivered,
    ToolInvocation,
    TraceEvent,
)
from harness.transcript import EntryKind, TranscriptEntry

__all__ = [
    "AGENT_NAME",
    "CAPTURE_CONTENT_ENV",
    "EVALUATION_EVENT",
    "NAMESPACE",
    "Evaluation",
    "HarnessAttribute",
    "SpanName",
    "SpanRecorder",
    "attribute_name",
    "capture_content_default",
    "event_name",
    "limit_attributes",
    "start_recording",
]

NAMESPACE = "harness"
"""The prefix of every attribute the conventions have no name for: the Harness's decisions."""

AGENT_NAME = "harness-diagnosis"
"""`gen_ai.agent.name` of the run span (an embedder may give its own)."""

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The GenAI conventions' content-capture opt-in (the instrumentations' variable; semconv ships no constant)."""

EVALUATION_EVENT = "gen_ai.evaluation.result"
"""The conventions' evaluation event (its attributes are in `gen_ai_attributes`; its name has no constant)."""


class SpanName(StrEnum):
    """The three GenAI operations a run's spans are (span name: operation, then the model or tool)."""

    INVOKE_AGENT = "invoke_agent"
    CHAT = "chat"
    EXECUTE_TOOL = "execute_tool"


class HarnessAttribute(StrEnum):
    """The `harness.*` attributes that are not one event field (those are `attribute_name(field)`)."""

    SEMANTIC_GUARD = "harness.semantic_guard"
    STOP_REQUIRED_DELIVERED = "harness.stop_required_delivered"
    BUDGET_HIT = "harness.budget_hit"
    NO_GAIN_THRESHOLD = "harness.config.no_gain_threshold"
    PROTOCOL_VIOLATION_THRESHOLD = "harness.config.protocol_violation_threshold"
    MAX_TOOL_INVOCATIONS = "harness.config.max_tool_invocations"
    MAX_MODEL_CALLS = "harness.config.max_model_calls"
    MAX_TOTAL_TOKENS = "harness.config.max_total_tokens"
    SCHEMA_MODE = "harness.config.schema_mode"


_SEMCONV_NAMES: dict[str, str] = {
    "model": gen_ai.GEN_AI_REQUEST_MODEL,
    "tool": gen_ai.GEN_AI_TOOL_NAME,
    "tool_call_id": gen_ai.GEN_AI_TOOL_CALL_ID,
    "input_tokens": gen_ai.GEN_AI_USAGE_INPUT_TOKENS,
    "output_tokens": gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS,
    "error_kind": ERROR_TYPE,
}
"""Event fields the conventions name."""

_RENAMED: dict[str, str] = {
    "purpose": "model_call.purpose",
    "attempt": "model_call.attempt",
    "producer": "gain.producer",
    "rejection": "rejection.reason",
}
"""Event fields whose `harness.*` name says what they belong to."""

_NOT_ATTRIBUTES = frozenset({"t_ms", "latency_ms"})
"""Event fields that are the span's or span event's timing, not attributes."""


def attribute_name(field: str) -> str:
    """The attribute an event field becomes: the conventions' name where they have one, else `harness.<field>`."""
    return _SEMCONV_NAMES.get(field) or f"{NAMESPACE}.{_RENAMED.get(field, field)}"


def event_name(event: TraceEvent) -> str:
    """The span event an event becomes on the run's span: `harness.<kind, lower case>`."""
    return f"{NAMESPACE}.{event.kind.value.lower()}"


def capture_content_default() -> bool:
    """Whether the conventions' environment opt-in asks for message contents (`true`, any case)."""
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() == "true"


def limit_attributes(limits: RunLimits) -> dict[str, AttributeValue]:
    """A run's limits as its span's attributes (`harness.config.*`)."""
    return {
        HarnessAttribute.NO_GAIN_THRESHOLD.value: limits.no_gain_threshold,
        HarnessAttribute.PROTOCOL_VIOLATION_THRESHOLD.value: limits.protocol_violation_threshold,
        HarnessAttribute.MAX_TOOL_INVOCATIONS.value: limits.max_tool_invocations,
        HarnessAttribute.MAX_MODEL_CALLS.value: limits.max_model_calls,
        HarnessAttribute.MAX_TOTAL_TOKENS.value: limits.max_total_tokens,
        **({HarnessAttribute.SCHEMA_MODE.value: limits.schema_mode} if limits.schema_mode is not None else {}),
    }


@dataclass(frozen=True, slots=True)
class Evaluation:
    """One `gen_ai.evaluation.result` event on the run's span (the bench's verdict on a stored run)."""

    name: str
    """`gen_ai.evaluation.name`: what was evaluated (e.g. `outcome`, `passed`)."""
    label: str
    """`gen_ai.evaluation.score.label`: the verdict."""
    value: float | None = None
    """`gen_ai.evaluation.score.value`, where the verdict is a number (1.0 / 0.0 for passed)."""
    explanation: str | None = None
    """`gen_ai.evaluation.explanation`: why (the expectation, the failures)."""

    def attributes(self) -> dict[str, AttributeValue]:
        """As event attributes."""
        out: dict[str, AttributeValue] = {
            gen_ai.GEN_AI_EVALUATION_NAME: self.name,
            gen_ai.GEN_AI_EVALUATION_SCORE_LABEL: self.label,
        }
        if self.value is not None:
            out[gen_ai.GEN_AI_EVALUATION_SCORE_VALUE] = self.value
        if self.explanation is not None:
            out[gen_ai.GEN_AI_EVALUATION_EXPLANATION] = self.explanation
        return out


ContentSource = Callable[[int], Sequence[TranscriptEntry]]
"""The transcript entries of the run's n-th model call attempt (from 1): what it was sent and answered."""


_PLAIN: frozenset[type] = frozenset({str, int, float, bool})
"""Value types that are attribute values as they are (exactly these: a StrEnum is a `str` subclass)."""


def _value(v: object) -> AttributeValue:
    if isinstance(v, StrEnum):
        return v.value
    if isinstance(v, bool | int | float | str):
        return v
    return str(v)


_NAMES: dict[type[TraceEvent], tuple[tuple[str, str], ...]] = {}
"""Per event class: (field, attribute) of each field that is an attribute, computed once (spans are per event)."""


def _fields(event: TraceEvent, out: dict[str, AttributeValue] | None = None) -> dict[str, AttributeValue]:
    """Every set field of `event` as an attribute (its position as `harness.seq`), added to `out` (default: a new
    dict). Called once per event on a live run's path, so the plain values skip `_value`'s checks."""
    names = _NAMES.get(type(event))
    if names is None:
        names = tuple(
            (f.name, attribute_name(f.name)) for f in dataclasses.fields(event) if f.name not in _NOT_ATTRIBUTES
        )
        _NAMES[type(event)] = names
    if out is None:
        out = {}
    plain = _PLAIN
    for field, attribute in names:
        v = getattr(event, field)
        if v is not None:
            out[attribute] = v if type(v) in plain else _value(v)
    return out


_OPERATION = gen_ai.GEN_AI_OPERATION_NAME
_REQUEST_MODEL = gen_ai.GEN_AI_REQUEST_MODEL
_SEMANTIC_GUARD = HarnessAttribute.SEMANTIC_GUARD.value
_CHAT = SpanName.CHAT.value
_EXECUTE_TOOL = SpanName.EXECUTE_TOOL.value
_EXECUTE_TOOL_ = f"{_EXECUTE_TOOL} "
"""Names and values a live run's spans use on every model call and invocation, looked up once."""

_EVENT_NAMES: dict[type[TraceEvent], str] = {}


def _event_name(cls: type[TraceEvent], event: TraceEvent) -> str:
    """`event_name(event)`, once per event class (an event class has one kind)."""
    name = _EVENT_NAMES.get(cls)
    if name is None:
        name = _EVENT_NAMES[cls] = event_name(event)
    return name


_ROLES = {EntryKind.SYSTEM: "system", EntryKind.USER: "user", EntryKind.OBSERVATION: "tool"}


def _messages(entries: Sequence[TranscriptEntry], *, output: bool) -> str:
    """The conventions' message JSON (`role` + `parts`) of a call's new input messages or of its answer."""
    out: list[dict[str, object]] = []
    for e in entries:
        if output and e.kind is EntryKind.ASSISTANT:
            parts: list[dict[str, object]] = [{"type": "text", "content": e.content or ""}]
            out.append({"role": "assistant", "parts": parts, "finish_reason": e.finish_reason or "stop"})
        elif output and e.kind is EntryKind.TOOL_CALL and out:
            call: dict[str, object] = {
                "type": "tool_call",
                "id": e.tool_call_id,
                "name": e.tool,
                "arguments": e.arguments,
            }
            last = out[-1]["parts"]
            assert isinstance(last, list)  # with `output`, every entry of `out` is an assistant message's
            last.append(call)
        elif not output and e.kind in _ROLES:
            part: dict[str, object] = {"type": "text", "content": e.content or ""}
            if e.kind is EntryKind.OBSERVATION:
                part = {"type": "tool_call_response", "id": e.tool_call_id, "response": e.content or ""}
            out.append({"role": _ROLES[e.kind], "parts": [part]})
    return json.dumps(out, ensure_ascii=False)


def _tool_definitions(entries: Sequence[TranscriptEntry]) -> str | None:
    """The conventions' `gen_ai.tool.definitions` of the tools a call offered, when its entries say (TOOLS)."""
    offered = next((e.content for e in entries if e.kind is EntryKind.TOOLS and e.content), None)
    if offered is None:
        return None
    try:
        tools = json.loads(offered)
    except (ValueError, RecursionError):  # a transcript stored by hand, not the Harness's list: nothing to say
        return None
    if not isinstance(tools, list):
        return None
    return json.dumps([{"type": "function", **t} for t in tools if isinstance(t, dict)], ensure_ascii=False)


class SpanRecorder:
    """Turns one run's trace events, in order, into its spans (call it with each event: `Trace.listen(rec)`).

    Timestamps are the run's start (`start_ns`, epoch nanoseconds; live: the time RUN_STARTED is received)
    plus each event's `t_ms`; a model call's or tool invocation's span starts `latency_ms` before its event.
    A run whose span does not record (its sampler dropped it, a no-op tracer) gets nothing more: no child span,
    span event or attribute is built for it (the SDK's default parent-based sampler drops such children anyway)."""

    __slots__ = ("_base_ns", "_budget_hit", "_calls", "_chat_name", "_content", "_evaluations", "_limits", "_model",
                 "_name", "_parent", "_recording", "_run", "_run_id", "_stop_required", "_tokens_in", "_tokens_out",
                 "_tracer")  # fmt: skip

    def __init__(
        self,
        tracer: Tracer,
        *,
        run_id: str,
        agent_name: str = AGENT_NAME,
        limits: RunLimits | None = None,
        content: ContentSource | None = None,
        evaluations: Sequence[Evaluation] = (),
        start_ns: int | None = None,
    ) -> None:
        """`content`: where message contents come from, given only when they are to be recorded;
        `evaluations`: added to the run's span before it ends; `start_ns`: the run's start (default: now)."""
        self._tracer = tracer
        self._run_id = run_id
        self._name = agent_name
        self._limits = limits
        self._content = content
        self._evaluations = tuple(evaluations)
        self._base_ns = start_ns
        self._run: Span | None = None
        self._parent: Context | None = None
        """The context the run's children start in: the run's span (set once, at RUN_STARTED)."""
        self._recording = True
        """False once the run's span is known not to record (sampled out, a no-op tracer): nothing more is built."""
        self._model = ""
        self._chat_name = f"{SpanName.CHAT} "
        self._calls = 0
        self._tokens_in = 0
        self._tokens_out = 0
        self._stop_required = False
        self._budget_hit: str | None = None

    def _ts(self, event: TraceEvent, back_ms: float = 0.0) -> int:
        if self._base_ns is None:  # live: the first event arrives as it happens
            self._base_ns = time.time_ns() - int(event.t_ms * 1e6)
        return self._base_ns + int((event.t_ms - back_ms) * 1e6)

    def __call__(self, event: TraceEvent) -> None:
        """Record one event (in trace order)."""
        if not self._recording:  # a run whose span records nothing: no child span, no attribute is built
            if isinstance(event, Released) and self._run is not None:
                self._run.end()
                self._run = None
            return
        match event:
            case RunStarted():
                self._start(event)
            case ModelCall():
                self._chat(event)
            case ToolInvocation():
                self._tool(event)
            case Released():
                self._release(event)
            case _:
                if isinstance(event, StopRequiredDelivered):
                    self._stop_required = True
                if isinstance(event, BudgetExhausted) and self._budget_hit is None:
                    self._budget_hit = event.budget.value
                if self._run is not None:
                    self._run.add_event(_event_name(type(event), event), _fields(event), self._ts(event))

    def _start(self, event: RunStarted) -> None:
        self._model = event.model
        attrs: dict[str, AttributeValue] = {
            gen_ai.GEN_AI_OPERATION_NAME: SpanName.INVOKE_AGENT.value,
            gen_ai.GEN_AI_AGENT_NAME: self._name,
            gen_ai.GEN_AI_CONVERSATION_ID: self._run_id,
            **_fields(event),
        }
        attrs.pop(attribute_name("seq"))  # the run's span is the whole trace, not one event of it
        if self._limits is not None:
            attrs.update(limit_attributes(self._limits))
        self._run = run = self._tracer.start_span(
            f"{SpanName.INVOKE_AGENT} {self._name}", kind=SpanKind.INTERNAL, attributes=attrs,
            start_time=self._ts(event),
        )  # fmt: skip
        self._recording = run.is_recording()
        self._parent = otel_trace.set_span_in_context(run)
        self._chat_name = f"{SpanName.CHAT} {self._model}"

    def _child(self, name: str, kind: SpanKind, event: TraceEvent, latency_ms: float,
               attrs: dict[str, AttributeValue]) -> Span:  # fmt: skip
        return self._tracer.start_span(
            name, context=self._parent, kind=kind, attributes=attrs, start_time=self._ts(event, latency_ms)
        )

    def _chat(self, event: ModelCall) -> None:
        self._calls += 1
        self._tokens_in += event.input_tokens or 0
        self._tokens_out += event.output_tokens or 0
        attrs: dict[str, AttributeValue] = {
            _OPERATION: _CHAT,
            _REQUEST_MODEL: self._model,
            _SEMANTIC_GUARD: event.purpose is ModelPurpose.SEMANTIC_GUARD,
        }
        _fields(event, attrs)
        if self._content is not None:
            entries = self._content(self._calls)
            attrs[gen_ai.GEN_AI_INPUT_MESSAGES] = _messages(entries, output=False)
            attrs[gen_ai.GEN_AI_OUTPUT_MESSAGES] = _messages(entries, output=True)
            definitions = _tool_definitions(entries)
            if definitions is not None:
                attrs[gen_ai.GEN_AI_TOOL_DEFINITIONS] = definitions
        span = self._child(self._chat_name, SpanKind.CLIENT, event, event.latency_ms, attrs)
        if event.error_kind is not None:
            span.set_status(Status(StatusCode.ERROR, event.detail))
        span.end(self._ts(event))

    def _tool(self, event: ToolInvocation) -> None:
        attrs = _fields(event, {_OPERATION: _EXECUTE_TOOL})
        span = self._child(_EXECUTE_TOOL_ + event.tool, SpanKind.INTERNAL, event, event.latency_ms, attrs)
        if event.invocation_status is InvocationStatus.FAILED:
            span.set_status(Status(StatusCode.ERROR, event.detail))
        span.end(self._ts(event))

    def _release(self, event: Released) -> None:
        run = self._run
        if run is None:
            return
        attrs = _fields(event)
        attrs.pop(attribute_name("seq"))
        attrs[HarnessAttribute.STOP_REQUIRED_DELIVERED.value] = self._stop_required
        if self._budget_hit is not None:
            attrs[HarnessAttribute.BUDGET_HIT.value] = self._budget_hit
        attrs[gen_ai.GEN_AI_USAGE_INPUT_TOKENS] = self._tokens_in
        attrs[gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS] = self._tokens_out
        run.set_attributes(attrs)
        for evaluation in self._evaluations:
            run.add_event(EVALUATION_EVENT, evaluation.attributes(), self._ts(event))
        if event.outcome is ReleaseOutcome.FAILED:
            run.set_status(Status(StatusCode.ERROR, event.detail))
        run.end(self._ts(event))
        self._run = None


def start_recording(
    ctx: RunContext, tracer: Tracer, *, agent_name: str = AGENT_NAME, capture_content: bool | None = None
) -> SpanRecorder:
    """Record the run of `ctx` as spans on `tracer` from its next event on (`HarnessSession(tracer=...)` calls it
    before RUN_STARTED). `capture_content`: record message contents (default: the conventions' env opt-in)."""
    capture = capture_content_default() if capture_content is None else capture_content
    transcript = ctx.transcript

    def content(call: int) -> list[TranscriptEntry]:
        return [e for e in transcript.entries if e.model_call == call]

    recorder = SpanRecorder(tracer, run_id=ctx.run_id, agent_name=agent_name, limits=RunLimits.of(ctx.config),
                            content=content if capture else None)  # fmt: skip
    ctx.trace.listen(recorder)
    return recorder
