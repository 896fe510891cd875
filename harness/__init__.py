"""harness-bench's Harness: a deterministic control layer around one Diagnosis ReAct agent.

Where each decision lives (BRIEF §2):
- tools/ + observation.py — objective tool facts and the bounded model view
- progress.py — the information-gain state machine (DiagnosisProgressTracker)
- interceptor.py — the envelope gate in front of every backend call
- scope.py — ToolScopeNormalizer
- evidence_guard.py / semantic_guard.py — citations real / conclusion supported
- release.py — the single published outcome
"""

from harness.agent import RunResult, run_diagnosis, tool_specs
from harness.canonical_store import CanonicalRecord, CanonicalStore
from harness.config import HarnessConfig
from harness.context import BudgetUsage, CancellationToken, RunContext
from harness.contracts import (
    BudgetKind,
    CollectionState,
    EvidenceStatus,
    FallbackKind,
    GainProducer,
    InformationGain,
    InvocationStatus,
    RejectionReason,
    ReleaseOutcome,
    Relevance,
    SemanticVerdict,
    StopReason,
    ViolationKind,
)
from harness.draft import Citation, Claim, Draft, parse_draft
from harness.evidence_guard import EvidenceVerdict, check_evidence
from harness.interceptor import BudgetLimitReached, DiagnosisCollectionStopped, HarnessToolInterceptor
from harness.progress import DiagnosisProgressTracker, PreviousObservation
from harness.projector import ProgressSnapshot, project_snapshot
from harness.prompts import DiagnosisTask, TaskContext
from harness.release import ReleaseDecision, release
from harness.scope import ToolScopeNormalizer
from harness.semantic_guard import SemanticGuardResult, parse_verdict
from harness.trace import EventKind, Trace, TraceEvent
from harness.transcript import EntryKind, Transcript, TranscriptEntry

__version__ = "0.1.0"

__all__ = [
    "BudgetKind",
    "BudgetLimitReached",
    "BudgetUsage",
    "CancellationToken",
    "CanonicalRecord",
    "CanonicalStore",
    "Citation",
    "Claim",
    "CollectionState",
    "DiagnosisCollectionStopped",
    "DiagnosisProgressTracker",
    "DiagnosisTask",
    "Draft",
    "EntryKind",
    "EventKind",
    "EvidenceStatus",
    "EvidenceVerdict",
    "FallbackKind",
    "GainProducer",
    "HarnessConfig",
    "HarnessToolInterceptor",
    "InformationGain",
    "InvocationStatus",
    "PreviousObservation",
    "ProgressSnapshot",
    "RejectionReason",
    "ReleaseDecision",
    "ReleaseOutcome",
    "Relevance",
    "RunContext",
    "RunResult",
    "SemanticGuardResult",
    "SemanticVerdict",
    "StopReason",
    "TaskContext",
    "ToolScopeNormalizer",
    "Trace",
    "TraceEvent",
    "Transcript",
    "TranscriptEntry",
    "ViolationKind",
    "__version__",
    "check_evidence",
    "parse_draft",
    "parse_verdict",
    "project_snapshot",
    "release",
    "run_diagnosis",
    "tool_specs",
]
