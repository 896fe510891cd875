"""harness-bench's Harness: a deterministic control layer around one Diagnosis ReAct agent.

Where each decision lives (docs/architecture.md §2, §10.1):
- session.py — HarnessSession, the loop-facing run (budgets, deadline, model calls, stops, Release)
- agent.py — run_diagnosis, the native loop over a session, and AgentLoop, the shape every loop has
- tools/ + observation.py — objective tool facts and the bounded model view
- tracker.py — the information-gain state machine (DiagnosisProgressTracker)
- interceptor.py — the envelope gate in front of every backend call
- scope.py — ToolScopeNormalizer
- evidence_guard.py / semantic_guard.py — citations real / conclusion supported
- release.py — the single published outcome; snapshot.py — the ProgressSnapshot behind a fallback
- trace.py — the typed audit events; event_log.py — them as JSON Lines; otel.py — them as OpenTelemetry spans
- contracts.py — the vocabularies; config.py — thresholds and budgets; context.py — the run's identity, deadline,
  budgets and cancellation; canonical_store.py — the per-run truth of every invocation
- envelope.py — the agent-facing tool envelope; request_checks.py — an embedder's stop rules before the gate
- draft.py — the DiagnosisDraft; prompts.py — the frozen model-facing texts; transcript.py — what the model was
  sent and answered; retry.py — the Harness-owned model retries
- models/ — the chat-model interface and the OpenAI-compatible model; adapters/ — the Harness under pydantic-ai
  and the OpenAI Agents SDK

What an embedder needs is exported here (`__all__`), and what the bench needs is exported here too: the bench
(`runners/`) imports nothing from the library but these names, so everything else is an implementation detail.
A few names are loaded on first use (`_LAZY`): their modules import the `openai` SDK, OpenTelemetry (the `otel`
extra) or an agent framework (the `adapters` extra), which `import harness` never loads; it needs pydantic only.
"""

import importlib
from typing import TYPE_CHECKING, Any

from harness.agent import AgentLoop, run_diagnosis
from harness.canonical_store import CanonicalStore
from harness.config import HarnessConfig, RunLimits
from harness.context import BudgetUsage, CancellationToken, DeadlineClock, RunContext
from harness.contracts import (
    BudgetKind,
    ControlSignal,
    EvidenceCheck,
    EvidenceStatus,
    FallbackKind,
    GainProducer,
    GuardName,
    HarnessControl,
    InformationGain,
    InvocationStatus,
    JsonObject,
    JsonScalar,
    JsonValue,
    ModelErrorKind,
    ModelPurpose,
    RejectionReason,
    ReleaseOutcome,
    Relevance,
    SchemaMode,
    SemanticVerdict,
    StopReason,
    ToolChoiceMode,
    ViolationKind,
)
from harness.draft import DRAFT_JSON_SCHEMA, Citation, Claim, Draft, DraftParse, parse_draft
from harness.evidence_guard import EvidenceVerdict, VerifiedEvidence, check_evidence
from harness.interceptor import ToolAnswer, TurnResult
from harness.models.base import (
    AssistantMessage,
    ChatMessage,
    ChatModel,
    ChatRequest,
    ModelCallError,
    ModelResponse,
    SystemMessage,
    ToolCallFormat,
    ToolCallRequest,
    ToolMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from harness.observation import Observation, project_result
from harness.prompts import AGENT_MARKER, DEFAULT_SYSTEM_PROMPT, DiagnosisTask, TaskContext, render_task, system_prompt
from harness.release import Fallback, ReleaseDecision
from harness.request_checks import RequestCheck, SeenRequest
from harness.retry import DeadlineReached, ModelCallFailed, RetriesCutByBudget, call_model
from harness.scope import normalize_timestamp
from harness.semantic_guard import GUARD_MARKER, SemanticGuardResult, build_guard_request, parse_verdict
from harness.session import HarnessSession, ModelTurn, RunResult, tool_specs
from harness.snapshot import ProgressSnapshot
from harness.tools.base import BusinessTool, ToolExecutionError, ToolInputError, ToolResult
from harness.trace import (
    EVENT_TYPES,
    BudgetExhausted,
    CollectionStopped,
    DraftReceived,
    EventKind,
    EvidenceChecked,
    GainApplied,
    GuardVerdict,
    ModelCall,
    Released,
    RunStarted,
    StopRequiredDelivered,
    ToolInvocation,
    ToolRequestRejected,
    TraceEvent,
)
from harness.tracker import (
    Admission,
    AdmissionKind,
    AppliedGain,
    Completion,
    DiagnosisProgressTracker,
    PreviousObservation,
    Violation,
)
from harness.transcript import EntryKind, TranscriptEntry

__version__ = "0.1.0"
"""The version of the `harness-bench` distribution (the library and the bench): the one place it is written."""

if TYPE_CHECKING:
    from harness.adapters.openai_agents import run_agent as run_openai_agents_agent
    from harness.adapters.pydantic_ai import run_agent as run_pydantic_ai_agent
    from harness.event_log import EventLogError, EventLogLine, event_adapter, event_from_json, event_line
    from harness.models.openai_model import ModelConfigError, OpenAIChatModel, TransportWrapper, read_body
    from harness.otel import NAMESPACE as OTEL_NAMESPACE
    from harness.otel import Evaluation, HarnessAttribute, SpanRecorder
    from harness.otel import attribute_name as otel_attribute_name

_LAZY: dict[str, tuple[str, str, str | None]] = {
    "OpenAIChatModel": ("harness.models.openai_model", "OpenAIChatModel", None),
    "ModelConfigError": ("harness.models.openai_model", "ModelConfigError", None),
    "TransportWrapper": ("harness.models.openai_model", "TransportWrapper", None),
    "read_body": ("harness.models.openai_model", "read_body", None),
    "EventLogError": ("harness.event_log", "EventLogError", None),
    "EventLogLine": ("harness.event_log", "EventLogLine", None),
    "event_adapter": ("harness.event_log", "event_adapter", None),
    "event_from_json": ("harness.event_log", "event_from_json", None),
    "event_line": ("harness.event_log", "event_line", None),
    "SpanRecorder": ("harness.otel", "SpanRecorder", "otel"),
    "Evaluation": ("harness.otel", "Evaluation", "otel"),
    "HarnessAttribute": ("harness.otel", "HarnessAttribute", "otel"),
    "OTEL_NAMESPACE": ("harness.otel", "NAMESPACE", "otel"),
    "otel_attribute_name": ("harness.otel", "attribute_name", "otel"),
    "run_pydantic_ai_agent": ("harness.adapters.pydantic_ai", "run_agent", "adapters"),
    "run_openai_agents_agent": ("harness.adapters.openai_agents", "run_agent", "adapters"),
}
"""Public names loaded on first use: (module, name there, the extra that installs what the module imports). The
`openai` SDK (a dependency) costs about a second of start-up and the event log's validators some milliseconds,
which a scripted run never needs."""


if not TYPE_CHECKING:  # hidden from mypy: a name not declared above stays an error there, not an `Any`

    def __getattr__(name: str) -> Any:
        """A `_LAZY` name, imported on first use (and kept); a missing extra is named in the error."""
        spec = _LAZY.get(name)
        if spec is None:
            raise AttributeError(f"module 'harness' has no attribute {name!r}")
        module_name, attribute, extra = spec
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            if extra is None:
                raise
            raise ImportError(
                f"harness.{name} needs the '{extra}' extra: pip install 'harness-bench[{extra}]' ({exc})"
            ) from exc
        value = getattr(module, attribute)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *_LAZY})


__all__ = [
    "AGENT_MARKER",
    "DEFAULT_SYSTEM_PROMPT",
    "DRAFT_JSON_SCHEMA",
    "EVENT_TYPES",
    "GUARD_MARKER",
    "OTEL_NAMESPACE",
    "Admission",
    "AdmissionKind",
    "AgentLoop",
    "AppliedGain",
    "AssistantMessage",
    "BudgetExhausted",
    "BudgetKind",
    "BudgetUsage",
    "BusinessTool",
    "CancellationToken",
    "CanonicalStore",
    "ChatMessage",
    "ChatModel",
    "ChatRequest",
    "Citation",
    "Claim",
    "CollectionStopped",
    "Completion",
    "ControlSignal",
    "DeadlineClock",
    "DeadlineReached",
    "DiagnosisProgressTracker",
    "DiagnosisTask",
    "Draft",
    "DraftParse",
    "DraftReceived",
    "EntryKind",
    "Evaluation",
    "EventKind",
    "EventLogError",
    "EventLogLine",
    "EvidenceCheck",
    "EvidenceChecked",
    "EvidenceStatus",
    "EvidenceVerdict",
    "Fallback",
    "FallbackKind",
    "GainApplied",
    "GainProducer",
    "GuardName",
    "GuardVerdict",
    "HarnessAttribute",
    "HarnessConfig",
    "HarnessControl",
    "HarnessSession",
    "InformationGain",
    "InvocationStatus",
    "JsonObject",
    "JsonScalar",
    "JsonValue",
    "ModelCall",
    "ModelCallError",
    "ModelCallFailed",
    "ModelConfigError",
    "ModelErrorKind",
    "ModelPurpose",
    "ModelResponse",
    "ModelTurn",
    "Observation",
    "OpenAIChatModel",
    "PreviousObservation",
    "ProgressSnapshot",
    "RejectionReason",
    "ReleaseDecision",
    "ReleaseOutcome",
    "Released",
    "Relevance",
    "RequestCheck",
    "RetriesCutByBudget",
    "RunContext",
    "RunLimits",
    "RunResult",
    "RunStarted",
    "SchemaMode",
    "SeenRequest",
    "SemanticGuardResult",
    "SemanticVerdict",
    "SpanRecorder",
    "StopReason",
    "StopRequiredDelivered",
    "SystemMessage",
    "TaskContext",
    "ToolAnswer",
    "ToolCallFormat",
    "ToolCallRequest",
    "ToolChoiceMode",
    "ToolExecutionError",
    "ToolInputError",
    "ToolInvocation",
    "ToolMessage",
    "ToolRequestRejected",
    "ToolResult",
    "ToolSpec",
    "TraceEvent",
    "TranscriptEntry",
    "TransportWrapper",
    "TurnResult",
    "Usage",
    "UserMessage",
    "VerifiedEvidence",
    "Violation",
    "ViolationKind",
    "build_guard_request",
    "call_model",
    "check_evidence",
    "event_adapter",
    "event_from_json",
    "event_line",
    "normalize_timestamp",
    "otel_attribute_name",
    "parse_draft",
    "parse_verdict",
    "project_result",
    "read_body",
    "render_task",
    "run_diagnosis",
    "run_openai_agents_agent",
    "run_pydantic_ai_agent",
    "system_prompt",
    "tool_specs",
    "__version__",
]
