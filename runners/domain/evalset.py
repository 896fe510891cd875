"""Evaluation sets: YAML files of cases, validated by pydantic.

A file holds `cases: [...]`. Every problem is reported with the file, the case id and the field,
all problems at once, and nothing is half-loaded. Beyond the shapes, a case is checked the way a run
would use it: the context's window is two ISO-8601 instants in order, and every trajectory step's
input validates against its tool's input model (db_query's bound to the case's tables), unless the
step is marked `mistake: invalid_input`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from harness.contracts import FallbackKind, RejectionReason, ReleaseOutcome
from harness.scope import normalize_timestamp
from runners.domain.scripted import Mistake, RejectionReaction, Trajectory
from runners.domain.tools.db_query import TableFixture, case_input_model
from runners.domain.tools.kb_search import KbDocument, KbSearchInput
from runners.domain.tools.log_search import LogEvent, LogSearchInput

# libyaml's C loader parses the built-in set ~10x faster than the pure-Python one.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
BUILTIN_DIR = Path(__file__).resolve().parents[2] / "evalsets"
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


class Expectations(_Strict):
    """What a correct run of this case looks like at the default config."""

    outcome: ReleaseOutcome
    """The expected Release outcome."""
    fallback_kind: FallbackKind | None = None
    """Expected fallback kind (FALLBACK only)."""
    stop_reason: ExpectedStop | None = None
    """Expected stop reason; omit to not check it."""
    root_cause_keywords: list[str] = Field(default_factory=list)
    """Words a SUCCESS conclusion must contain (case-insensitive)."""
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
        if self.outcome is ReleaseOutcome.SUCCESS and not self.root_cause_keywords:
            raise ValueError("expect.root_cause_keywords is required when expect.outcome is SUCCESS")
        return self


class EvalCase(_Strict):
    """One evaluation case."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_\-]{2,80}$")
    """Unique id (also the pytest test id)."""
    family: Family
    """Which family it belongs to."""
    description: str = Field(min_length=10)
    """What the case exercises (and which seed 000 §13 row, where it covers one)."""
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

    @model_validator(mode="after")
    def _tools_exist(self) -> EvalCase:
        for i, step in enumerate(self.trajectory.steps):
            if step.tool not in TOOL_NAMES and step.mistake is not Mistake.UNKNOWN_TOOL:
                raise ValueError(
                    f"trajectory.steps[{i}].tool: {step.tool!r} does not exist; tools are {list(TOOL_NAMES)}"
                )
        return self


def step_input_problems(case: EvalCase) -> list[tuple[str, str]]:
    """(field, message) for every trajectory step whose input its tool would reject.

    The protocol mistakes break the envelope, not the business input, and the corrected retry sends the
    step's input as written, so it must validate; only `mistake: invalid_input` sends it invalid on
    purpose, and then it must really be invalid and cannot be "corrected" (there is no valid input).
    """
    models: dict[str, type[BaseModel]] = {
        "kb_search": KbSearchInput,
        "log_search": LogSearchInput,
        "db_query": case_input_model(tuple((t.name, t.columns) for t in case.fixtures.tables)),
    }
    out: list[tuple[str, str]] = []
    for i, step in enumerate(case.trajectory.steps):
        model = models.get(step.tool)
        if model is None:  # an unknown tool, legal only with mistake: unknown_tool (checked above)
            continue
        where = f"trajectory.steps[{i}]"
        try:
            model.model_validate(step.input)
        except ValidationError as exc:
            if step.mistake is not Mistake.INVALID_INPUT:
                for err in exc.errors():
                    field = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
                    out.append((f"{where}.input{field}", err["msg"].removeprefix("Value error, ")))
        else:
            if step.mistake is Mistake.INVALID_INPUT:
                out.append((f"{where}.mistake", f"invalid_input, but the input is valid for {step.tool}"))
        reaction = step.on_rejection or case.trajectory.on_rejection
        if step.mistake is Mistake.INVALID_INPUT and reaction is RejectionReaction.CORRECT:
            out.append(
                (f"{where}.on_rejection", "a step with mistake invalid_input has no valid input to correct to; "
                 "set on_rejection: skip or repeat")
            )  # fmt: skip
    return out


class EvalSetError(ValueError):
    """One or more evaluation files are malformed; `problems` lists each with its location."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("invalid evaluation set:\n" + "\n".join(f"  - {p}" for p in self.problems))


def _loc(loc: Iterable[int | str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<case>"


_PARSED: dict[tuple[str, int, int], tuple[list[EvalCase], list[str]]] = {}

ProgressCallback = Callable[[Path, int, int], None]
"""Called as (file, cases validated so far, cases in the file) while a file's cases are validated."""
_progress: list[ProgressCallback] = []


@contextmanager
def reporting_progress(callback: ProgressCallback) -> Iterator[None]:
    """Within the block, every file parsed reports its validation progress to `callback` (the `cases`
    command draws a progress bar with it); the first call, with 0 done, comes right after the YAML parse."""
    _progress.append(callback)
    try:
        yield
    finally:
        _progress.remove(callback)


_PROGRESS_EVERY = 500
"""Cases validated between two progress reports."""


def _parse_file(path: Path, problems: list[str]) -> list[EvalCase]:
    """Parse one file, memoised by (path, mtime, size): sweeps load the same set once per grid point."""
    try:
        st = path.stat()
        key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    except OSError:
        return _parse_file_uncached(path, problems)
    cached = _PARSED.get(key)
    if cached is None:
        found: list[str] = []
        cached = _PARSED[key] = (_parse_file_uncached(path, found), found)
    problems.extend(cached[1])
    return list(cached[0])


def _parse_file_uncached(path: Path, problems: list[str]) -> list[EvalCase]:
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.append(f"{path}: not valid UTF-8 (byte offset {exc.start})")
        return []
    except OSError as exc:
        problems.append(f"{path}: cannot read ({exc.strerror})")
        return []
    try:
        doc = yaml.load(text, Loader=_Loader)
        del text  # the parsed tree is what is needed now; the text of a large file is not kept beside it
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problems.append(f"{path}:{where}: invalid YAML: {getattr(exc, 'problem', None) or exc}")
        return []
    if not isinstance(doc, dict) or not isinstance(doc.get("cases"), list):
        problems.append(f"{path}: top level must be a mapping with a 'cases' list")
        return []
    cases: list[EvalCase] = []
    raws: list[object] = doc["cases"]
    del doc
    report = _progress[-1] if _progress else None
    total = len(raws)
    if report is not None:
        report(path, 0, total)
    for i in range(total):
        # each raw case is released once validated: peak memory is the parsed tree, not tree + cases
        raw, raws[i] = raws[i], None
        if report is not None and i and i % _PROGRESS_EVERY == 0:
            report(path, i, total)
        case_id = raw.get("id") if isinstance(raw, dict) else None
        label = f"case {case_id!r}" if case_id else f"case #{i + 1}"
        try:
            case = EvalCase.model_validate(raw)
        except ValidationError as exc:
            for err in exc.errors():
                msg = err["msg"].removeprefix("Value error, ")
                where = _loc(err["loc"])
                named = re.match(r"^([\w.\[\]]+): (.*)$", msg, re.DOTALL)
                if named and (where == "<case>" or err["loc"] == ("context",)):
                    # a model-level check that names its own field, relative to the model it checks
                    where = named.group(1) if where == "<case>" else f"{where}.{named.group(1)}"
                    msg = named.group(2)
                problems.append(f"{path}: {label}: field {where}: {msg}")
            continue
        step_problems = step_input_problems(case)
        problems.extend(f"{path}: {label}: field {where}: {msg}" for where, msg in step_problems)
        if not step_problems:
            cases.append(case)
    if report is not None:
        report(path, total, total)
    return cases


_FAMILIES = frozenset(f.value for f in Family)


def _yaml_files(folder: Path, problems: list[str] | None = None) -> list[Path]:
    """The evaluation files under `folder`; a YAML name that is not a readable regular file (a FIFO, a
    socket, a dangling link or a symlink loop) is a problem, never skipped in silence (nor opened: a FIFO
    would block)."""
    found: list[Path] = []
    for p in sorted(folder.rglob("*")):
        if p.suffix not in (".yaml", ".yml"):
            continue
        if p.is_file():
            found.append(p)
        elif problems is not None and not p.is_dir():
            try:
                p.stat()
                what = "not a regular file (a FIFO, socket or device)"
            except OSError as exc:
                what = f"unreadable ({exc.strerror or exc}: a dangling link or a symlink loop?)"
            problems.append(f"{p}: {what}; remove it from {folder} or move it out")
    return found


def load_cases(specs: Sequence[str] = ()) -> list[EvalCase]:
    """Load cases from files, folders or family names (default: every built-in case).

    Raises EvalSetError listing every problem (file, case id, field) when anything is malformed.
    """
    problems: list[str] = []
    selections: list[tuple[list[Path], str | None]] = []
    for spec in list(specs) or [str(BUILTIN_DIR)]:
        path = Path(spec)
        if path.is_dir():
            selections.append((_yaml_files(path, problems), None))
        elif path.is_file():
            selections.append(([path], None))
        elif spec in _FAMILIES:
            selections.append((_yaml_files(BUILTIN_DIR), spec))
        else:
            problems.append(f"{spec}: no such file, folder or family (families: {', '.join(sorted(_FAMILIES))})")
    parsed: dict[Path, list[EvalCase]] = {}
    seen: dict[str, tuple[Path, int]] = {}
    for files, _ in selections:
        for f in files:
            key = f.resolve()
            if key in parsed:
                continue
            parsed[key] = []
            for n, case in enumerate(_parse_file(f, problems), start=1):
                if case.id in seen:  # in another file or the same one: both places named, none kept
                    where, m = seen[case.id]
                    problems.append(
                        f"{f}: case {case.id!r}: field id: duplicate of a case in {where} (its #{m}; here #{n})"
                    )
                    continue
                seen[case.id] = (f, n)
                parsed[key].append(case)
    if problems:
        raise EvalSetError(problems)
    out: dict[str, EvalCase] = {}
    for files, family in selections:
        for f in files:
            for case in parsed[f.resolve()]:
                if family is None or case.family.value == family:
                    out.setdefault(case.id, case)
    return list(out.values())


def content_hash(cases: Sequence[EvalCase]) -> str:
    """A stable hash of the cases' content (recorded with every bench run)."""
    h = hashlib.sha256()
    for case in sorted(cases, key=lambda c: c.id):
        h.update(json.dumps(case.model_dump(mode="json"), sort_keys=True, ensure_ascii=False).encode())
    return h.hexdigest()[:16]


def json_schema() -> str:
    """The JSON Schema of an evaluation file, for editors."""
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "harness-bench evaluation set",
        "type": "object",
        "properties": {"cases": {"type": "array", "items": {"$ref": "#/$defs/EvalCase"}}},
        "required": ["cases"],
        "$defs": {},
    }
    case_schema = EvalCase.model_json_schema(ref_template="#/$defs/{model}")
    defs = case_schema.pop("$defs", {})
    schema["$defs"] = {**defs, "EvalCase": case_schema}
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
