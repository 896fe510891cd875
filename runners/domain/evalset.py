"""Evaluation sets: YAML files of cases, validated by pydantic.

A file holds `cases: [...]`. Every problem is reported with the file, the case id and the field,
all problems at once, and nothing is half-loaded. Beyond the shapes, a case is checked the way a run
would use it: the context's window is two ISO-8601 instants in order, and every trajectory step's
input validates against its tool's input model (db_query's bound to the case's tables), unless the
step is marked `mistake: invalid_input`.

A file is read one case at a time (`_yaml_stream`): memory holds the current case, never the file's whole
YAML tree; a large file is parsed by a reader process while its cases are validated here. `load_cases`
returns the list (what a run needs); `spool_cases` keeps it in a temporary file (what `cases` lists, for any
number of cases).
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import pickle
import re
import tempfile
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import IO, Annotated, Literal, get_args, overload

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from harness.contracts import EvidenceStatus, FallbackKind, JsonValue, RejectionReason, ReleaseOutcome, Relevance
from harness.scope import normalize_timestamp
from runners.domain._yaml_stream import (
    CasesShapeError,
    count_block_items,
    count_cases,
    iter_raw_cases,
    iter_raw_cases_aside,
)
from runners.domain.scripted import Mistake, RejectionReaction, Trajectory
from runners.domain.tools.db_query import TableFixture, case_input_model
from runners.domain.tools.kb_search import KbDocument, KbSearchInput
from runners.domain.tools.log_search import LogEvent, LogSearchInput

# libyaml parses ~10x faster than pure PyYAML: its events feed the case-at-a-time reader unless this is SafeLoader.
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
        "db_query": case_input_model(db_tables(case.fixtures)),
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
    command draws a progress bar with it); the first call, with 0 done, comes once the file's cases are counted
    (from the YAML events alone, before any is built)."""
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
    read = _FileCases(path)
    cases = list(read)
    problems.extend(read.problems)
    return cases if read.readable else []


def _utf8_problem(path: Path) -> str | None:
    """The file's one read problem (not UTF-8, unreadable), checked a chunk at a time before parsing."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    try:
        with path.open("rb") as f:
            while chunk := f.read(1 << 20):
                try:
                    decoder.decode(chunk)
                except UnicodeDecodeError as exc:
                    return f"{path}: not valid UTF-8 (byte offset {offset + exc.start - len(exc.object) + len(chunk)})"
                offset += len(chunk)
            decoder.decode(b"", final=True)
    except UnicodeDecodeError as exc:
        return f"{path}: not valid UTF-8 (byte offset {offset + exc.start - len(exc.object)})"
    except OSError as exc:
        return f"{path}: cannot read ({exc.strerror})"
    return None


_ASIDE_ABOVE = 4 << 20
"""Files larger than this (about 1,200 cases) are parsed by a reader process while this process validates."""


def _read_aside(f: IO[bytes]) -> bool:
    """Whether `f`'s YAML is parsed in another process: a large file, on a machine with a second core."""
    try:
        size = os.fstat(f.fileno()).st_size
    except OSError:
        return False
    return size > _ASIDE_ABOVE and (os.cpu_count() or 1) > 1


class _FileCases:
    """One file's valid cases, in order, one at a time: only the current case's YAML is in memory.

    After the iteration, `problems` holds the file's problems; when `readable` is false (not UTF-8, not
    YAML, not a mapping with a `cases` list) it is that one problem and the cases yielded do not count.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.problems: list[str] = []
        self.readable = True

    def _fail(self, problem: str) -> None:
        self.problems, self.readable = [problem], False

    def __iter__(self) -> Iterator[EvalCase]:
        path = self.path
        bad = _utf8_problem(path)
        if bad is not None:
            self._fail(bad)
            return
        use_c = _Loader is not yaml.SafeLoader
        report = _progress[-1] if _progress else None
        total = 0
        if report is not None:
            with path.open("rb") as f:
                by_lines = count_block_items(f) if use_c else None  # the bar's length, from the lines
            if by_lines is None:
                with path.open("rb") as f:
                    by_lines = count_cases(f, use_c=use_c)  # or from the events alone
            total = by_lines
            report(path, 0, total)
        i = 0
        try:
            with path.open("rb") as f:
                aside = use_c and _read_aside(f)
                raws = iter_raw_cases_aside(str(path)) if aside else iter_raw_cases(f, use_c=use_c)
                for i, raw in enumerate(raws, start=1):
                    if report is not None and i > 1 and (i - 1) % _PROGRESS_EVERY == 0:
                        report(path, i - 1, max(total, i - 1))
                    case = self._validate(raw, i)
                    del raw
                    if case is not None:
                        yield case
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            self._fail(f"{path}:{where}: invalid YAML: {getattr(exc, 'problem', None) or exc}")
            return
        except CasesShapeError:
            self._fail(f"{path}: top level must be a mapping with a 'cases' list")
            return
        except OSError as exc:
            self._fail(f"{path}: cannot read ({exc.strerror})")
            return
        if report is not None:
            report(path, i, i)

    def _validate(self, raw: object, n: int) -> EvalCase | None:
        """The case, or None with its problems recorded (`n`: its place in the file, from 1)."""
        path = self.path
        case_id = raw.get("id") if isinstance(raw, dict) else None
        label = f"case {case_id!r}" if case_id else f"case #{n}"
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
                self.problems.append(f"{path}: {label}: field {where}: {msg}")
            return None
        step_problems = step_input_problems(case)
        self.problems.extend(f"{path}: {label}: field {where}: {msg}" for where, msg in step_problems)
        return None if step_problems else case


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


def _selections(specs: Sequence[str], problems: list[str]) -> list[tuple[list[Path], str | None]]:
    """(files, family or None for all) per spec: a file, a folder or a family name (default: the built-in set)."""
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
    return selections


def load_cases(specs: Sequence[str] = ()) -> list[EvalCase]:
    """Load cases from files, folders or family names (default: every built-in case).

    Raises EvalSetError listing every problem (file, case id, field) when anything is malformed.
    """
    problems: list[str] = []
    selections = _selections(specs, problems)
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


class SpooledCases(Sequence[EvalCase]):
    """Validated cases kept in a temporary file and read back one at a time (each read builds the case
    anew): the sequence of a 100,000-case file without 100,000 cases in memory. What `cases` lists."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(prefix="harness-bench-cases-")
        self._ends = array("q")
        """Where each stored case's record ends in the file."""
        self._order = array("q")
        """The selection: stored cases by their place in the file, in the order they are listed."""

    def _store(self, case: EvalCase) -> int:
        record = zlib.compress(pickle.dumps(case, protocol=pickle.HIGHEST_PROTOCOL), 1)
        self._file.write(record)
        self._ends.append((self._ends[-1] if self._ends else 0) + len(record))
        return len(self._ends) - 1

    def _load(self, stored: int) -> EvalCase:
        start = self._ends[stored - 1] if stored else 0
        self._file.seek(start)
        case: EvalCase = pickle.loads(zlib.decompress(self._file.read(self._ends[stored] - start)))
        return case

    def __len__(self) -> int:
        return len(self._order)

    @overload
    def __getitem__(self, index: int) -> EvalCase: ...
    @overload
    def __getitem__(self, index: slice) -> list[EvalCase]: ...
    def __getitem__(self, index: int | slice) -> EvalCase | list[EvalCase]:
        if isinstance(index, slice):
            return [self._load(k) for k in self._order[index]]
        return self._load(self._order[index])

    def __iter__(self) -> Iterator[EvalCase]:
        self._file.flush()
        for k in self._order:
            yield self._load(k)

    def close(self) -> None:
        """Delete the temporary file now (it goes anyway when the sequence is collected)."""
        self._file.close()


def _no_room(exc: OSError) -> EvalSetError:
    return EvalSetError(
        [f"cannot write the case list to a temporary file in {tempfile.gettempdir()} ({exc.strerror or exc}); "
         "free some space there or point TMPDIR at a folder with room"]
    )  # fmt: skip


def _open_spool() -> SpooledCases:
    try:
        return SpooledCases()
    except OSError as exc:
        raise _no_room(exc) from exc


def _store_or_say(spool: SpooledCases, case: EvalCase) -> int:
    try:
        return spool._store(case)
    except OSError as exc:
        spool.close()
        raise _no_room(exc) from exc


def spool_cases(specs: Sequence[str] = (), case_ids: Sequence[str] = ()) -> SpooledCases:
    """`load_cases(specs)` restricted to `case_ids` (when given), the same checks and problems, but each case is
    validated, stored in a temporary file and dropped: memory holds one case and every id's place (duplicate
    ids are still refused across all the files), not the cases. Raises EvalSetError (also for an unknown id
    in `case_ids`, or when nothing is selected)."""
    problems: list[str] = []
    selections = _selections(specs, problems)
    spool = _open_spool()
    files: dict[Path, tuple[Path, int, int]] = {}  # resolved path -> (path, first stored, stored count)
    seen: dict[str, int] = {}  # id -> its stored place; the file and its number there follow from `files`

    def where(stored: int) -> tuple[Path, int]:
        for f, first, count in files.values():
            if first <= stored < first + count:
                return f, stored - first + 1
        raise LookupError(stored)

    for file_list, _ in selections:
        for f in file_list:
            key = f.resolve()
            if key in files:
                continue
            read, first = _FileCases(f), len(spool._ends)
            mine: dict[str, int] = {}
            duplicates: list[str] = []
            for n, case in enumerate(read, start=1):
                stored = _store_or_say(spool, case)
                if case.id in mine or case.id in seen:  # in the same file or another one: both places named
                    other, m = (f, mine[case.id] - first + 1) if case.id in mine else where(seen[case.id])
                    duplicates.append(
                        f"{f}: case {case.id!r}: field id: duplicate of a case in {other} (its #{m}; here #{n})"
                    )
                else:
                    mine[case.id] = stored
            problems.extend(read.problems)
            files[key] = (f, first, len(spool._ends) - first if read.readable else 0)
            if read.readable:
                problems.extend(duplicates)
                seen.update(mine)
    if problems:
        spool.close()
        raise EvalSetError(problems)
    wanted = set(case_ids)
    unknown = [c for c in case_ids if c not in seen]
    if unknown:
        spool.close()
        raise EvalSetError([f"unknown case id(s): {', '.join(unknown)}"])
    taken = bytearray(len(spool._ends))
    for file_list, family in selections:
        for f in file_list:
            _, first, count = files[f.resolve()]
            for stored in range(first, first + count):
                if taken[stored]:
                    continue
                if family is not None or wanted:
                    case = spool._load(stored)
                    if (family is not None and case.family.value != family) or (wanted and case.id not in wanted):
                        continue
                taken[stored] = 1
                spool._order.append(stored)
    if not spool._order:
        spool.close()
        raise EvalSetError(["no cases selected"])
    return spool


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
