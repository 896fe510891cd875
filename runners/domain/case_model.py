"""An evaluation case as frozen pydantic models: its family, the operator's context, the tools' fixtures, the
expectations at the default config and the trajectory the scripted model plays; `TOOL_NAMES`, the bench's tools.

A model checks what its case says of itself: the context's window is two ISO-8601 instants in order, the
expectations fit the outcome, every trajectory step names a tool that exists. Reading files of cases and the checks
a run would make of them are `evalset`'s (which re-exports these names).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)

from harness import (
    EvidenceStatus,
    FallbackKind,
    JsonValue,
    RejectionReason,
    ReleaseOutcome,
    Relevance,
    normalize_timestamp,
)
from runners.domain.root_cause import RootCause
from runners.domain.scripted import Mistake, Trajectory
from runners.domain.suite import BuiltinTool, SuiteSpec
from runners.domain.tool_fixtures import ToolFixture
from runners.domain.tools.db_query import TableFixture
from runners.domain.tools.kb_search import KbDocument
from runners.domain.tools.log_search import LogEvent

__all__ = [
    "TOOL_NAMES",
    "CaseContext",
    "EvalCase",
    "EvidenceMark",
    "ExactCounts",
    "Expectations",
    "ExpectedStop",
    "Family",
    "FaultKind",
    "Fixtures",
    "OutcomeExpectation",
    "RecordedResult",
    "TableName",
    "ToolFault",
    "ToolName",
    "db_tables",
]

ToolName = Literal["kb_search", "log_search", "db_query"]
"""The bench's tools, named once."""
TOOL_NAMES: tuple[str, ...] = get_args(ToolName)


class Family(StrEnum):
    """The ten evaluation families."""

    EMPTY_LOGS = "empty_logs"
    GENERIC_KB = "generic_kb"
    DUPLICATE_SCOPES = "duplicate_scopes"
    PROTOCOL_VIOLATIONS = "protocol_violations"
    MISSING_CONTEXT = "missing_context"
    DIAGNOSABLE = "diagnosable"
    FABRICATED_CITATIONS = "fabricated_citations"
    UNSUPPORTED_CONCLUSIONS = "unsupported_conclusions"
    BUDGET_EXHAUSTION = "budget_exhaustion"
    TOOL_FAILURES = "tool_failures"
    MULTI_CALL_TURNS = "multi_call_turns"


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CaseContext(_Strict):
    """What the operator told the agent; any part may be missing."""

    tenant: str | None = None
    """Tenant id."""
    service: str | None = None
    """Service name."""
    time_start: str | None = None
    """Window start (ISO 8601)."""
    time_end: str | None = None
    """Window end (ISO 8601), not before the start."""

    @field_validator("time_start", "time_end")
    @classmethod
    def _timestamp(cls, value: str | None) -> str | None:
        # Checked, not rewritten: the operator's notation is what the agent is shown.
        if value is not None and normalize_timestamp(value) is None:
            raise ValueError(f"{value!r} is not an ISO-8601 timestamp (e.g. 2026-07-01T14:00:00Z)")
        return value

    @model_validator(mode="after")
    def _window_in_order(self) -> CaseContext:
        start, end = _instant(self.time_start), _instant(self.time_end)
        if start is not None and end is not None and end < start:
            raise ValueError(f"time_end: {self.time_end} is before time_start {self.time_start}")
        return self


def _instant(text: str | None) -> datetime | None:
    stamp = normalize_timestamp(text) if text is not None else None
    return datetime.fromisoformat(stamp.removesuffix("Z") + "+00:00") if stamp is not None else None


class FaultKind(StrEnum):
    """How a faulty backend misbehaves."""

    ERROR = "error"
    TIMEOUT = "timeout"


class ToolFault(_Strict):
    """Make one tool's backend fail (tool_failures family)."""

    tool: ToolName
    """Which tool."""
    kind: FaultKind = FaultKind.ERROR
    """Error or timeout."""
    after_calls: int = Field(default=0, ge=0)
    """Succeed this many times first."""
    message: str = "backend unavailable"
    """The failure message."""


TableName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=63, to_lower=True)]
"""A table name as db_query's fixtures spell it (lower-cased)."""


class RecordedResult(_Strict):
    """What one call of a captured run returned, served again for the same scope (`harness-bench capture`):
    a knowledge-base score or a SQL aggregate cannot be re-derived from the records it produced."""

    tool: ToolName
    """Which tool."""
    input: dict[str, JsonValue]
    """The business input as called; a later call with the same scope gets this result."""
    error: str | None = None
    """The backend failed with this message (`Type: text`, as the observation showed it); the fields below
    are then unused."""
    evidence_status: EvidenceStatus = EvidenceStatus.NO_EVIDENCE
    """EVIDENCE or NO_EVIDENCE, as the run saw it."""
    count: int = Field(default=0, ge=0)
    """How many records the backend returned."""
    scope: dict[str, JsonValue] = Field(default_factory=dict)
    """The scope the backend reported it applied."""
    truncated: bool = False
    """The backend capped the result."""
    records: list[dict[str, JsonValue]] = Field(default_factory=list)
    """The records the run was shown."""
    relevance: list[Relevance] = Field(default_factory=list)
    """kb_search: each record's relevance."""
    count_without_text_filter: int | None = None
    """An empty keyword search's count of the lines its scope holds without the keyword, as the run was shown it."""


class Fixtures(_Strict):
    """The data the case's tools run on."""

    kb: list[KbDocument] = Field(default_factory=list)
    """Knowledge-base Markdown documents."""
    logs: list[LogEvent] = Field(default_factory=list)
    """Log events."""
    tables: list[TableFixture] = Field(default_factory=list)
    """Business database tables."""
    faults: list[ToolFault] = Field(default_factory=list)
    """Injected backend failures."""
    recorded: list[RecordedResult] = Field(default_factory=list)
    """Results of a captured run's calls, returned again for the same tool and scope (before the fixtures)."""
    named_tables: list[TableName] = Field(default_factory=list)
    """Tables a captured run's SQL read that have no rows here (db_query accepts them; their results are recorded)."""
    results: list[ToolFixture] = Field(default_factory=list)
    """A suite's declared tools' results, matched on the call's arguments (the first that matches answers)."""


def db_tables(fixtures: Fixtures) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The tables db_query may read: the fixture's, then the `named_tables` it has no rows of."""
    known = {t.name for t in fixtures.tables}
    named = tuple((name, ()) for name in dict.fromkeys(fixtures.named_tables) if name not in known)
    return (*((t.name, t.columns) for t in fixtures.tables), *named)


class ExpectedStop(StrEnum):
    """Expected stop reason; NONE means the agent must finish on its own."""

    NONE = "NONE"
    INFORMATION_SATURATED = "INFORMATION_SATURATED"
    BUDGET_LIMIT_REACHED = "BUDGET_LIMIT_REACHED"
    PROGRESS_PROTOCOL_VIOLATED = "PROGRESS_PROTOCOL_VIOLATED"


class ExactCounts(_Strict):
    """Exact counts a run must produce: the stop contract made checkable (omitted = not checked)."""

    backend_calls: int | None = Field(default=None, ge=0)
    """Tool invocations that reached a backend (completed or failed)."""
    model_calls: int | None = Field(default=None, ge=0)
    """Diagnosis model call attempts (SemanticGuard excluded)."""
    stop_required_deliveries: int | None = Field(default=None, ge=0, le=1)
    """STOP_REQUIRED observations handed to the model (the contract allows at most one)."""
    rejections: dict[RejectionReason, int] | None = None
    """Rejections before the backend, by reason; every reason not listed must be 0."""
    no_gain: int | None = Field(default=None, ge=0)
    """NO_GAIN applications (Harness and Agent)."""
    gained: int | None = Field(default=None, ge=0)
    """GAINED evaluations by the Agent."""


class OutcomeExpectation(_Strict):
    """What any agent's run of the case should publish: the outcome, its fallback kind, the root cause."""

    outcome: ReleaseOutcome
    """The expected Release outcome."""
    fallback_kind: FallbackKind | None = None
    """Expected fallback kind (FALLBACK only)."""
    root_cause: RootCause | None = None
    """What a SUCCESS conclusion must state (required with SUCCESS), as the judge reads it."""
    root_cause_statement: str | None = Field(default=None, min_length=3, max_length=8_000)
    """The root cause as a plain statement only, for a judge to compare a conclusion with (an imported suite's case,
    whose source gives no facts to check): a SUCCESS expectation gives it or `root_cause`."""

    @model_validator(mode="after")
    def _coherent(self) -> OutcomeExpectation:
        if self.outcome is ReleaseOutcome.FALLBACK and self.fallback_kind is None:
            raise ValueError("fallback_kind is required when outcome is FALLBACK")
        if self.outcome is not ReleaseOutcome.FALLBACK and self.fallback_kind is not None:
            raise ValueError("fallback_kind is only allowed when outcome is FALLBACK")
        if self.outcome is ReleaseOutcome.SUCCESS and self.root_cause is None and self.root_cause_statement is None:
            raise ValueError("root_cause is required when outcome is SUCCESS")
        return self


class EvidenceMark(_Strict):
    """Which of a tool's records carry evidence: the root cause's, or one that excludes a hypothesis. A record
    matches when the text of its values contains `contains`, case-insensitively."""

    tool: ToolName
    """The tool whose records it marks."""
    contains: str = Field(min_length=4, max_length=500)
    """Text a record carrying the evidence contains (an excerpt of a log message, a row value, a passage)."""


class Expectations(_Strict):
    """What a correct run of this case looks like. Outcome expectations (`outcome`, `fallback_kind`,
    `root_cause`, `without_mistake`, `after_a_call`) hold for any agent; the others are trajectory expectations: they
    describe the scripted reference trajectory at the default config and judge scripted runs at those settings."""

    outcome: ReleaseOutcome
    """The expected Release outcome."""
    fallback_kind: FallbackKind | None = None
    """Expected fallback kind (FALLBACK only)."""
    stop_reason: ExpectedStop | None = None
    """Expected stop reason (a trajectory expectation); omit to not check it."""
    root_cause: RootCause | None = None
    """What a SUCCESS conclusion must state (required with SUCCESS), as the judge reads it."""
    root_cause_statement: str | None = Field(default=None, min_length=3, max_length=8_000)
    """The root cause as a plain statement only, for a judge to compare a conclusion with (an imported suite's case,
    whose source gives no facts to check): a SUCCESS expectation gives it or `root_cause`."""
    without_mistake: OutcomeExpectation | None = None
    """For a case whose point is a model's mistake (a protocol violation, a fabricated citation, an unsupported
    conclusion): what a model that does not make it should publish. The outcome verdict accepts either."""
    after_a_call: OutcomeExpectation | None = None
    """What a run that completed a backend call should publish, where the expected outcome needs none to have
    completed (MISSING_REQUIRED_CONTEXT: a model forced to call first, or one that looks before it asks, cannot reach
    it). The outcome verdict accepts either."""
    evidence: list[EvidenceMark] = Field(default_factory=list)
    """Fixture records that carry evidence beyond the ones the reference Draft cites (those count by themselves):
    the truth an agent's GAINED / NO_GAIN is scored against."""
    max_tool_invocations: int | None = Field(default=None, ge=0)
    """Upper bound on backend invocations."""
    max_model_calls: int | None = Field(default=None, ge=1)
    """Upper bound on diagnosis model calls."""
    backend_calls_equal_distinct_scopes: bool = False
    """Every backend call had a distinct tool+scope (duplicates never ran)."""
    min_duplicate_rejections: int | None = Field(default=None, ge=0)
    """At least this many duplicate-scope rejections."""
    min_protocol_violations: int | None = Field(default=None, ge=0)
    """At least this many protocol-violation rejections."""
    stop_required_delivered: bool | None = None
    """Whether STOP_REQUIRED must (true) or must not (false) be delivered."""
    exact: ExactCounts | None = None
    """Exact counts (backend calls, rejections by reason, STOP_REQUIRED deliveries, gains)."""

    @model_validator(mode="after")
    def _coherent(self) -> Expectations:
        if self.outcome is ReleaseOutcome.FALLBACK and self.fallback_kind is None:
            raise ValueError("expect.fallback_kind is required when expect.outcome is FALLBACK")
        if self.outcome is not ReleaseOutcome.FALLBACK and self.fallback_kind is not None:
            raise ValueError("expect.fallback_kind is only allowed when expect.outcome is FALLBACK")
        if self.outcome is ReleaseOutcome.SUCCESS and self.root_cause is None and self.root_cause_statement is None:
            raise ValueError("expect.root_cause is required when expect.outcome is SUCCESS")
        return self


class EvalCase(_Strict):
    """One evaluation case."""

    suite: SuiteSpec | None = None
    """The suite it belongs to, with its declared tools (set from the folder's `suite.yaml` when the case is read,
    never written in a case file; none: the built-in tools and families). First: the family is checked against it."""
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_\-]{2,80}$")
    """Unique id (also the pytest test id)."""
    family: str = Field(min_length=1, max_length=64)
    """Which family it belongs to: one of the built-in families (held as its `Family` member), or of its suite's."""
    description: str = Field(min_length=10)
    """What the case exercises (and which docs/architecture.md §13 row, where it covers one)."""
    question: str = Field(min_length=3)
    """The operator's question, as written (some in Chinese)."""
    context: CaseContext = CaseContext()
    """Known context."""
    fixtures: Fixtures = Fixtures()
    """Tool data."""
    expect: Expectations
    """Expectations at the default config."""
    trajectory: Trajectory
    """The reference trajectory the scripted model plays."""
    tools: list[str] | None = None
    """Which of its suite's tools the agent is offered (none: all of them)."""

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The tools the agent is offered, in order."""
        if self.suite is None:
            return TOOL_NAMES
        names = [t.name for t in self.suite.tools]
        return tuple(n for n in names if self.tools is None or n in self.tools)

    @field_validator("family")
    @classmethod
    def _known_family(cls, value: str, info: ValidationInfo) -> str:
        suite = info.data.get("suite")
        families = [f.name for f in suite.families] if isinstance(suite, SuiteSpec) else [f.value for f in Family]
        if value not in families:
            listed = ", ".join(repr(f) for f in families[:-1]) + " or " if len(families) > 1 else ""
            raise ValueError(f"Input should be {listed}{families[-1]!r}")
        return value if isinstance(suite, SuiteSpec) else Family(value)  # a built-in family: its enum member

    @model_validator(mode="after")
    def _tools_exist(self) -> EvalCase:
        if self.suite is None and self.tools is not None:
            raise ValueError("tools: only a suite's case chooses among its tools")
        if self.suite is not None:
            declared = [t.name for t in self.suite.tools]
            unknown = [t for t in self.tools or () if t not in declared]
            if unknown:
                raise ValueError(f"tools: {', '.join(unknown)} not declared by suite {self.suite.suite!r}")
        names = self.tool_names
        for i, step in enumerate(self.trajectory.steps):
            if step.tool not in names and step.mistake is not Mistake.UNKNOWN_TOOL:
                raise ValueError(f"trajectory.steps[{i}].tool: {step.tool!r} does not exist; tools are {list(names)}")
        for i, fixture in enumerate(self.fixtures.results):
            spec = self.suite.tool(fixture.tool) if self.suite is not None else None
            if spec is None or isinstance(spec, BuiltinTool):
                raise ValueError(f"fixtures.results[{i}].tool: {fixture.tool!r} is not a declared tool of the suite")
        return self
