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
- trace.py — the typed audit events

What an embedder needs is exported here; everything else is an implementation detail.
"""

from harness.agent import AgentLoop, run_diagnosis
from harness.config import HarnessConfig, RunLimits
from harness.context import BudgetUsage, CancellationToken, RunContext
from harness.contracts import (
    BudgetKind,
    EvidenceCheck,
    EvidenceStatus,
    FallbackKind,
    GainProducer,
    GuardName,
    InformationGain,
    InvocationStatus,
    ModelErrorKind,
    ModelPurpose,
    RejectionReason,
    ReleaseOutcome,
    SchemaMode,
    SemanticVerdict,
    StopReason,
    ToolChoiceMode,
    ViolationKind,
)
from harness.draft import Citation, Claim, Draft, DraftParse, parse_draft
from harness.interceptor import ToolAnswer, TurnResult
from harness.models.base import (
    AssistantMessage,
    ChatMessage,
    ChatModel,
    ChatRequest,
    ModelCallError,
    ModelResponse,
    SystemMessage,
    ToolCallRequest,
    ToolMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from harness.prompts import DEFAULT_SYSTEM_PROMPT, DiagnosisTask, TaskContext, system_prompt
from harness.release import Fallback, ReleaseDecision
from harness.session import HarnessSession, ModelTurn, RunResult, tool_specs
from harness.snapshot import ProgressSnapshot
from harness.tools.base import BusinessTool, ToolExecutionError, ToolInputError, ToolResult
from harness.trace import (
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
from harness.transcript import EntryKind, TranscriptEntry

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "AgentLoop",
    "AssistantMessage",
    "BudgetExhausted",
    "BudgetKind",
    "BudgetUsage",
    "BusinessTool",
    "CancellationToken",
    "ChatMessage",
    "ChatModel",
    "ChatRequest",
    "Citation",
    "Claim",
    "CollectionStopped",
    "DiagnosisTask",
    "Draft",
    "DraftParse",
    "DraftReceived",
    "EntryKind",
    "EventKind",
    "EvidenceCheck",
    "EvidenceChecked",
    "EvidenceStatus",
    "Fallback",
    "FallbackKind",
    "GainApplied",
    "GainProducer",
    "GuardName",
    "GuardVerdict",
    "HarnessConfig",
    "HarnessSession",
    "InformationGain",
    "InvocationStatus",
    "ModelCall",
    "ModelCallError",
    "ModelErrorKind",
    "ModelPurpose",
    "ModelResponse",
    "ModelTurn",
    "ProgressSnapshot",
    "RejectionReason",
    "ReleaseDecision",
    "ReleaseOutcome",
    "Released",
    "RunContext",
    "RunLimits",
    "RunResult",
    "RunStarted",
    "SchemaMode",
    "SemanticVerdict",
    "StopReason",
    "StopRequiredDelivered",
    "SystemMessage",
    "TaskContext",
    "ToolAnswer",
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
    "TurnResult",
    "Usage",
    "UserMessage",
    "ViolationKind",
    "__version__",
    "parse_draft",
    "run_diagnosis",
    "system_prompt",
    "tool_specs",
]
