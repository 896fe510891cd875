"""log_search: time-window search over a case's application logs, backed by the shared DuckDB."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, ClassVar, Literal

import duckdb
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
)

from harness import (
    BusinessTool,
    EvidenceStatus,
    JsonObject,
    JsonValue,
    ToolExecutionError,
    ToolResult,
    normalize_timestamp,
)
from runners.domain.tools import _duck

LIMIT_CEILING = 200
"""The largest `limit` the input schema accepts; each tool instance clamps further to its max_results."""

_TABLE = "logs"
_COLUMNS = ("ts", "tenant", "service", "level", "message", "trace_id")
_SCHEMA = (
    ("seq", "BIGINT"),
    ("ts", "TIMESTAMP"),
    ("ts_text", "VARCHAR"),
    ("tenant", "VARCHAR"),
    ("service", "VARCHAR"),
    ("level", "VARCHAR"),
    ("message", "VARCHAR"),
    ("trace_id", "VARCHAR"),
    ("tenant_key", "VARCHAR"),
    ("service_key", "VARCHAR"),
    ("message_key", "VARCHAR"),
)


def _fold(text: str) -> str:
    """Case- and whitespace-insensitive form used both for filters and for the indexed columns."""
    return " ".join(text.split()).lower()


def keyword_words(keyword: str) -> tuple[str, ...]:
    """The words a folded keyword matches on, each once, sorted: a line matches when its folded message contains
    every one of them. Two keywords with the same words are the same search."""
    return tuple(sorted(set(keyword.split())))


def _folded(value: str) -> str:
    folded = _fold(value)
    if not folded:
        raise ValueError("must contain non-whitespace text")
    return folded


def _upper(value: object) -> object:
    return value.strip().upper() if isinstance(value, str) else value


def _stamp(value: str) -> str:
    stamp = normalize_timestamp(value)
    if stamp is None:
        raise ValueError(f"{value!r} is not an ISO-8601 timestamp (e.g. 2026-07-01T14:00:00Z)")
    return stamp


def _instant(stamp: str) -> datetime:
    """A normalised `...Z` stamp as a naive UTC datetime (the column type)."""
    return datetime.fromisoformat(stamp[:-1])


Level = Annotated[Literal["DEBUG", "INFO", "WARN", "ERROR"], BeforeValidator(_upper)]
_Name = Annotated[str, StringConstraints(min_length=1, max_length=128), AfterValidator(_folded)]


class LogEvent(BaseModel):
    """One log line of the case fixture."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    ts: str
    """When it was logged, ISO-8601 in any common notation; stored normalised to UTC `...Z`."""
    tenant: str
    """Tenant the request belonged to."""
    service: str
    """Emitting service (gateway, order, settlement, risk, notification, ...)."""
    level: Level
    """Severity: DEBUG, INFO, WARN or ERROR."""
    message: str
    """The log message text."""
    trace_id: str | None = None
    """Distributed trace id, when the line carried one."""

    @field_validator("ts")
    @classmethod
    def _normalise_ts(cls, value: str) -> str:
        return _stamp(value)


class LogSearchInput(BaseModel):
    """Business input of log_search."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    start: str
    """Window start (inclusive), ISO-8601, e.g. 2026-07-01T14:00:00Z; without an offset it is UTC."""
    end: str
    """Window end (exclusive), ISO-8601; must be after start."""
    tenant: _Name | None = None
    """Only this tenant (case-insensitive exact match)."""
    service: _Name | None = None
    """Only this service (case-insensitive exact match), e.g. gateway, order, settlement, risk, notification."""
    level: Level | None = None
    """Only this severity: DEBUG, INFO, WARN or ERROR (case-insensitive)."""
    keyword: Annotated[str, StringConstraints(min_length=1, max_length=200), AfterValidator(_folded)] | None = None
    """Only messages containing every word of this text, in any order (each word case-insensitive, anywhere in the
    message: `payment fail` matches `Payments failed`)."""
    limit: int = Field(default=20, ge=1, le=LIMIT_CEILING)
    """Maximum number of lines to return (the tool may clamp it further)."""

    @field_validator("start")
    @classmethod
    def _normalise_start(cls, value: str) -> str:
        return _stamp(value)

    @field_validator("end")
    @classmethod
    def _normalise_end(cls, value: str, info: ValidationInfo) -> str:
        stamp = _stamp(value)
        start = info.data.get("start")  # absent when start itself was invalid
        if isinstance(start, str) and _instant(stamp) <= _instant(start):
            raise ValueError(f"end ({stamp}) must be after start ({start})")
        return stamp


class LogSearch(BusinessTool[LogSearchInput]):
    """Filters the case's log events by time window, tenant, service, level and keyword."""

    name: ClassVar[str] = "log_search"
    description: str = (
        "Search the application logs of the payment platform (services such as gateway, order, settlement, "
        "risk, notification) inside a time window [start, end). start and end are ISO-8601 timestamps; "
        "optional filters: tenant and service (exact name, case-insensitive), level (DEBUG/INFO/WARN/ERROR) and "
        "keyword (a line matches when its message contains every word of the keyword, in any order, "
        "case-insensitive; a word also matches inside a longer one, so 'fail' matches 'failed'). Lines come back "
        "oldest first, capped at `limit` (the tool may clamp it; the applied limit is in the scope). "
        "truncated=true means more lines matched: narrow the window or add filters instead of repeating the "
        "query. When a keyword search finds nothing, count_without_text_filter says how many lines the same "
        "window and other filters hold without the keyword."
    )
    input_model = LogSearchInput
    runs_inline: ClassVar[bool] = True  # DuckDB with its own max_execution_time

    def __init__(self, events: Sequence[LogEvent], *, max_results: int = 50) -> None:
        if not 1 <= max_results <= LIMIT_CEILING:
            raise ValueError(f"max_results must be within 1..{LIMIT_CEILING}, got {max_results}")
        self._max_results = max_results
        rows = [(e.ts, e.tenant, e.service, e.level, e.message, e.trace_id) for e in events]
        key = _duck.content_hash(("log_search/v1", rows))
        schema = _duck.ensure_schema(key, lambda: [_table(events)])
        self._relation = f"{_duck.quote_ident(schema)}.{_TABLE}"
        self._cursor = _duck.cursor()
        self._lock = threading.Lock()  # a DuckDB cursor must not run two statements from two threads at once

    def actual_scope(self, parsed: LogSearchInput) -> JsonObject:
        """The applied scope: normalised window and filters, and the clamped limit."""
        scope: JsonObject = {"start": parsed.start, "end": parsed.end, "limit": min(parsed.limit, self._max_results)}
        for key in ("tenant", "service", "level", "keyword"):
            value = getattr(parsed, key)
            if value is not None:
                scope[key] = value
        return scope

    def normalize_scope(self, parsed: LogSearchInput) -> str:
        # The fields are already canonical (UTC stamps, folded text); a keyword is its set of words, since word
        # order and repeats do not change what matches. ToolScopeNormalizer is not used on purpose: it would
        # rewrite a timestamp-looking keyword, merging two different searches.
        scope = self.actual_scope(parsed)
        if parsed.keyword is not None:
            scope["keyword"] = " ".join(keyword_words(parsed.keyword))
        return json.dumps(scope, sort_keys=True, ensure_ascii=False, separators=(",", ":"))

    def run(self, parsed: LogSearchInput) -> ToolResult:
        scope = self.actual_scope(parsed)
        limit = min(parsed.limit, self._max_results)
        where = ["ts >= ?", "ts < ?"]
        params: list[object] = [_instant(parsed.start), _instant(parsed.end)]
        for column, value in (
            ("tenant_key", parsed.tenant),
            ("service_key", parsed.service),
            ("level", parsed.level),
        ):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        filters = (" AND ".join(where), list(params))
        if parsed.keyword is not None:
            for word in keyword_words(parsed.keyword):
                where.append("contains(message_key, ?)")
                params.append(word)
        # The table is stored in (ts, fixture position) order and DuckDB guarantees that a single-table
        # FROM with WHERE and LIMIT keeps row order (docs: SQL dialect / order preservation); an explicit
        # ORDER BY would add a sort to every call. One extra row tells us whether the limit cut anything.
        sql = (
            f"SELECT ts_text, tenant, service, level, message, trace_id FROM {self._relation} "
            f"WHERE {' AND '.join(where)} LIMIT {limit + 1:d}"
        )
        try:
            rows = _duck.rows_of(self._cursor, self._lock, sql, params)
        except duckdb.Error as exc:
            raise ToolExecutionError(f"log_search query failed: {_duck.error_text(exc)}") from exc
        truncated = len(rows) > limit
        records = tuple(_record(row) for row in rows[:limit])
        # As log backends show hit counts: an empty keyword search says what the scope holds without it.
        unfiltered = self._count(*filters) if not records and parsed.keyword is not None else None
        return ToolResult(
            evidence_status=EvidenceStatus.EVIDENCE if records else EvidenceStatus.NO_EVIDENCE,
            count=len(records),
            actual_scope=scope,
            records=records,
            truncated=truncated,
            count_without_text_filter=unfiltered,
        )

    def _count(self, where: str, params: list[object]) -> int:
        """How many lines match `where` (the window and every filter but the keyword)."""
        try:
            found = _duck.rows_of(
                self._cursor, self._lock, f"SELECT count(*) FROM {self._relation} WHERE {where}", params
            )
        except duckdb.Error as exc:
            raise ToolExecutionError(f"log_search query failed: {_duck.error_text(exc)}") from exc
        return int(found[0][0]) if found else 0


def _record(row: tuple[JsonValue, ...]) -> JsonObject:
    return dict(zip(_COLUMNS, row, strict=True))


def _keys(event: LogEvent) -> tuple[str, str, str]:
    return _fold(event.tenant), _fold(event.service), _fold(event.message)


def _table(events: Sequence[LogEvent]) -> _duck.TableData:
    # Rows are loaded in (ts, original position) order, which queries rely on (see run); seq records that
    # order explicitly. The folded key columns turn the case-insensitive filters into plain equality.
    ordered = sorted(events, key=lambda e: _instant(e.ts))  # stable sort keeps fixture order for equal ts
    rows = [
        (seq, _instant(e.ts), e.ts, e.tenant, e.service, e.level, e.message, e.trace_id, *_keys(e))
        for seq, e in enumerate(ordered)
    ]
    return _duck.TableData(
        name=_TABLE,
        columns=tuple(name for name, _ in _SCHEMA),
        rows=rows,
        types=tuple(kind for _, kind in _SCHEMA),
    )
