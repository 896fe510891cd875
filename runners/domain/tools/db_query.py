"""db_query: one read-only SELECT over the case's tables, validated by sqlglot before DuckDB sees it.

The statement DuckDB executes is the sqlglot-regenerated form of the validated syntax tree, never
the model's raw text, so a parser disagreement between sqlglot and DuckDB (comments, quoting) cannot
smuggle anything past validation; the same text is the call's scope.

Functions are allow-listed (`ALLOWED_FUNCTIONS`): what a diagnosis query needs — aggregates, window
functions, string, math, date/time and conditional functions, casts. Everything else is rejected
before DuckDB, whether sqlglot knows it (`version()` is `exp.CurrentVersion`, `random()` is
`exp.Rand`) or not (`current_setting(..)`, `getenv(..)` are `exp.Anonymous`).
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import math
import re
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, ClassVar

import duckdb
import sqlglot
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ErrorLevel, ParseError, SqlglotError
from sqlglot.optimizer.scope import Scope, traverse_scope

from harness import BusinessTool, EvidenceStatus, JsonScalar, JsonValue, ToolExecutionError, ToolInputError, ToolResult
from runners.domain.tools import _duck

MAX_ROWS_CEILING = 1000
"""The largest max_rows a DatabaseQuery accepts."""

_DUCKDB = Dialect.get_or_raise("duckdb")

_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
_PLAIN_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")

# Anything that writes, configures, attaches, loads or is not a plain query. `getattr` keeps this
# working if a sqlglot release drops one of the names.
_FORBIDDEN: tuple[type[exp.Expr], ...] = tuple(
    getattr(exp, name)
    for name in (
        "Insert", "Update", "Delete", "Merge", "Create", "Drop", "Alter", "TruncateTable", "Copy", "Command",
        "Pragma", "Set", "Attach", "Detach", "Use", "Transaction", "Commit", "Rollback", "Describe", "Install",
        "Summarize", "Show", "Export", "LoadData", "Analyze", "Refresh", "Cache", "Uncache", "Grant", "Revoke",
        "Kill", "Declare", "Execute", "Into", "Placeholder", "Parameter",
    )
    if hasattr(exp, name)
)  # fmt: skip


class _DropCommandFallbackWarning(logging.Filter):
    """sqlglot warns on stderr whenever it parses a statement as a generic Command; we reject those anyway."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Falling back to parsing as a 'Command'" not in record.getMessage()


logging.getLogger("sqlglot").addFilter(_DropCommandFallbackWarning())


class TableFixture(BaseModel):
    """One table of the case fixture."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    name: Annotated[str, StringConstraints(pattern=_NAME, max_length=63, to_lower=True)]
    """Table name (letters, digits, underscore); DuckDB names are case-insensitive, so it is lower-cased."""
    columns: tuple[Annotated[str, StringConstraints(min_length=1, max_length=128)], ...] = Field(min_length=1)
    """Column names, in order."""
    rows: tuple[tuple[JsonScalar, ...], ...] = ()
    """Row values, each aligned with `columns`."""
    types: tuple[str, ...] | None = None
    """Optional DuckDB type per column (e.g. VARCHAR, BIGINT, DECIMAL(12,2), TIMESTAMP); inferred when absent."""

    @model_validator(mode="after")
    def _consistent(self) -> TableFixture:
        lowered = [c.lower() for c in self.columns]
        if len(set(lowered)) != len(lowered):
            raise ValueError(f"table {self.name!r}: duplicate column names (case-insensitive)")
        for i, row in enumerate(self.rows):
            if len(row) != len(self.columns):
                raise ValueError(f"table {self.name!r}: row {i} has {len(row)} values for {len(self.columns)} columns")
        if self.types is not None:
            if len(self.types) != len(self.columns):
                raise ValueError(f"table {self.name!r}: {len(self.types)} types for {len(self.columns)} columns")
            bad = [t for t in self.types if not _duck.is_valid_type(t)]
            if bad:
                raise ValueError(f"table {self.name!r}: not DuckDB type names: {bad}")
        return self


@dataclass(frozen=True, slots=True)
class SqlAnalysis:
    """A statement that passed the shape checks."""

    sql: str
    """The normalised SQL: what executes and what identifies the scope."""
    tables: frozenset[str]
    """Lower-cased names of the real tables it reads (CTE names excluded)."""


# The allow-list, by category: the name a model writes -> the sqlglot class it parses to, or None when
# sqlglot has no class for it (an `exp.Anonymous`, checked by name). A node passes when its exact class
# is listed (so any spelling sqlglot maps to that class passes too: `len` is `exp.Length`), or when it
# is an Anonymous call with a listed name. A sqlglot upgrade that gives a listed anonymous name its own
# class makes that function fail closed until it is listed here (tests/runners/domain/tools/test_db_query.py says so).
# Left out on purpose: anything reading the session, settings, catalog, environment or files
# (current_setting, current_schemas, version, getenv, duckdb_*, pragma_*, read_*), anything that
# changes session state (setseed, nextval), and anything whose answer is not a function of the case's
# data — the clock (now, current_date, age) and randomness (random, uuid): a scope must mean the same
# rows every time it runs, or duplicate-scope rejection and replay would lie. Hashes (md5, sha256)
# and list/struct/JSON helpers are harmless but no diagnosis needs them; listing one is a one-line change.
ALLOWED_FUNCTIONS: dict[str, dict[str, type[exp.Func] | None]] = {
    "aggregate": {
        "count": exp.Count, "count_if": exp.CountIf, "sum": exp.Sum, "avg": exp.Avg, "min": exp.Min,
        "max": exp.Max, "any_value": exp.AnyValue, "arg_min": exp.ArgMin, "arg_max": exp.ArgMax,
        "first": exp.First, "last": exp.Last, "list": exp.ArrayAgg, "array_agg": exp.ArrayAgg,
        "string_agg": exp.GroupConcat, "bool_and": exp.LogicalAnd, "bool_or": exp.LogicalOr,
        "median": exp.Median, "quantile_cont": exp.PercentileCont, "quantile_disc": exp.PercentileDisc,
        "mode": exp.Mode, "stddev": exp.Stddev, "stddev_samp": exp.StddevSamp, "stddev_pop": exp.StddevPop,
        "variance": exp.Variance, "var_pop": exp.VariancePop, "grouping": exp.Grouping,
    },
    "window (with OVER)": {
        "row_number": exp.RowNumber, "rank": exp.Rank, "dense_rank": exp.DenseRank,
        "percent_rank": exp.PercentRank, "cume_dist": exp.CumeDist, "ntile": exp.Ntile, "lag": exp.Lag,
        "lead": exp.Lead, "first_value": exp.FirstValue, "last_value": exp.LastValue, "nth_value": exp.NthValue,
    },
    "string": {
        "lower": exp.Lower, "upper": exp.Upper, "length": exp.Length, "trim": exp.Trim, "ltrim": exp.Trim,
        "rtrim": exp.Trim, "substr": exp.Substring, "substring": exp.Substring, "left": exp.Left,
        "right": exp.Right, "concat": exp.Concat, "concat_ws": exp.ConcatWs, "replace": exp.Replace,
        "split_part": exp.SplitPart, "strpos": exp.StrPosition, "position": exp.StrPosition,
        "starts_with": exp.StartsWith, "ends_with": exp.EndsWith, "contains": exp.Contains,
        "regexp_matches": exp.RegexpLike, "regexp_extract": exp.RegexpExtract, "regexp_replace": exp.RegexpReplace,
    },
    "math": {
        "abs": exp.Abs, "round": exp.Round, "ceil": exp.Ceil, "floor": exp.Floor, "trunc": exp.Trunc,
        "greatest": exp.Greatest, "least": exp.Least, "sqrt": exp.Sqrt, "power": exp.Pow, "ln": exp.Ln,
        "log": exp.Log, "exp": exp.Exp, "sign": exp.Sign,
    },
    "date/time": {
        "date_trunc": exp.TimestampTrunc, "date_part": None, "datepart": None, "extract": exp.Extract,
        "date_diff": exp.DateDiff, "datediff": exp.DateDiff, "date_add": exp.DateAdd, "strftime": exp.TimeToStr,
        "strptime": exp.StrToTime, "epoch": exp.TimeToUnix, "epoch_ms": exp.UnixToTime,
        "to_timestamp": exp.UnixToTime, "time_bucket": exp.DateBin, "year": exp.Year, "quarter": exp.Quarter,
        "month": exp.Month, "week": exp.Week, "day": exp.Day, "dayofmonth": exp.DayOfMonth,
        "dayofweek": exp.DayOfWeek, "isodow": exp.DayOfWeekIso, "dayofyear": exp.DayOfYear, "hour": exp.Hour,
        "minute": exp.Minute, "second": exp.Second, "dayname": exp.Dayname, "monthname": exp.Monthname,
        "make_date": exp.DateFromParts, "make_timestamp": exp.TimestampFromParts,
    },
    "conditional": {
        "case": exp.Case, "if": exp.If, "coalesce": exp.Coalesce, "ifnull": exp.Coalesce, "nullif": exp.Nullif,
    },
    "cast": {"cast": exp.Cast, "try_cast": exp.TryCast},
}  # fmt: skip

# Function nodes that are syntax rather than a call: AND / OR, EXISTS (subquery), and date_trunc over an
# explicit DATE cast, which sqlglot types as exp.DateTrunc. (INTERVAL, IN, BETWEEN, LIKE, IS and
# arithmetic are not Func nodes; the WHEN branches of CASE are exp.If, listed above.)
_SYNTAX_NODES: frozenset[type[exp.Func]] = frozenset({exp.And, exp.Or, exp.Exists, exp.DateTrunc})

_ALLOWED_CLASSES: frozenset[type[exp.Func]] = _SYNTAX_NODES | frozenset(
    cls for group in ALLOWED_FUNCTIONS.values() for cls in group.values() if cls is not None
)
_ALLOWED_ANONYMOUS: frozenset[str] = frozenset(
    name for group in ALLOWED_FUNCTIONS.values() for name, cls in group.items() if cls is None
)
_ALLOWED_NAMES: frozenset[str] = frozenset(name for group in ALLOWED_FUNCTIONS.values() for name in group)
_ALLOWED_TEXT = (
    "allowed functions: "
    + "; ".join(f"{category}: {', '.join(names)}" for category, names in ALLOWED_FUNCTIONS.items())
    + "; also :: casts, INTERVAL literals, IN, BETWEEN, LIKE/ILIKE, EXISTS"
)

# Names DuckDB's binder turns into a call of a session or clock function when no column of that name is
# in scope (GetSQLValueFunctionName), quoted or not, bare or qualified by the literal word `alias`.
# sqlglot parses `user`, `current_role` and `current_schema` as plain columns, so they are checked here.
_VALUE_KEYWORDS = frozenset({
    "current_catalog", "current_date", "current_role", "current_schema", "current_time", "current_timestamp",
    "current_user", "localtime", "localtimestamp", "session_user", "user",
})  # fmt: skip


def validate_sql(sql: str, allowed_tables: frozenset[str] | None) -> SqlAnalysis:
    """Check `sql` is one read-only SELECT over `allowed_tables` (None: skip the table check); ValueError if not."""
    analysis = analyse_sql(sql)
    if allowed_tables is not None:
        unknown = sorted(analysis.tables - allowed_tables)
        if unknown:
            raise ValueError(
                f"unknown table(s) {', '.join(unknown)}; available tables: {', '.join(sorted(allowed_tables))}"
            )
    return analysis


@functools.lru_cache(maxsize=4096)
def analyse_sql(sql: str) -> SqlAnalysis:
    """Parse, shape-check and normalise one statement (cached: parsing dominates a call's cost)."""
    try:
        return _analyse(sql)
    except RecursionError:
        # sqlglot recurses per nesting level; a few hundred parentheses exhaust the Python stack.
        raise ValueError("the query is nested too deeply") from None


def _analyse(sql: str) -> SqlAnalysis:
    try:
        statements = [s for s in sqlglot.parse(sql, read=_DUCKDB) if s is not None]
    except ParseError as exc:
        raise ValueError(f"could not parse SQL: {_parse_problem(exc)}") from None
    except SqlglotError as exc:
        raise ValueError(f"could not parse SQL: {_first_line(exc)}") from None
    if len(statements) != 1:
        raise ValueError(f"exactly one statement is allowed, got {len(statements)}")
    root = statements[0]
    if not isinstance(root, exp.Query):
        # Name the statement as written: sqlglot parses e.g. CHECKPOINT as a bare column.
        word = sql.split(None, 1)[0].upper() if sql.split() else ""
        raise ValueError(f"only a SELECT query is allowed, got {word if word.isalpha() else _kind(root)}")
    for node in root.walk():
        if isinstance(node, _FORBIDDEN):
            raise ValueError(f"only a read-only SELECT is allowed; found {_kind(node)}")
        if isinstance(node, exp.Table):
            _check_table(node)
        elif isinstance(node, (exp.From, exp.Join)):
            _check_source(node.this)
        elif isinstance(node, exp.Func):
            _check_function(node)
        elif isinstance(node, exp.Column):
            _check_column(node)
        elif isinstance(node, exp.TableSample):
            raise ValueError(
                "sampling (USING SAMPLE, TABLESAMPLE) is not allowed: it picks random rows, so the same query "
                "would return different evidence; filter or aggregate instead"
            )
    tables = _real_tables(root)
    return SqlAnalysis(sql=_normalise(root), tables=tables)


def _check_table(table: exp.Table) -> None:
    # sqlglot represents `FROM read_csv(..)` as a Table wrapping the function call.
    if not isinstance(table.this, exp.Identifier):
        raise ValueError(f"table functions are not allowed in FROM: {_kind(table.this)}")
    if table.args.get("db") or table.args.get("catalog"):
        raise ValueError(f"qualified table names are not allowed, use the bare table name: {table.sql()}")


def _check_function(node: exp.Func) -> None:
    name = _function_name(node)
    if isinstance(node.parent, exp.Dot):
        # `x.lower()`, `main.lower(x)`: DuckDB's method and qualified forms (sqlglot leaves them Anonymous).
        if name in _ALLOWED_NAMES:
            raise ValueError(f"call functions by their bare name: {name}(x), not x.{name}() or schema.{name}(x)")
    elif type(node) in _ALLOWED_CLASSES or (isinstance(node, exp.Anonymous) and name in _ALLOWED_ANONYMOUS):
        return
    raise ValueError(f"function {name} is not allowed; {_ALLOWED_TEXT}")


def _check_column(column: exp.Column) -> None:
    name = column.name.lower()
    if name in _VALUE_KEYWORDS and column.table.lower() in ("", "alias"):
        raise ValueError(
            f"{name} without a table is DuckDB's built-in {name} (session or clock), which is not allowed; "
            f"to read a column named {name}, qualify it with its table (t.{name})"
        )


def _function_name(node: exp.Func) -> str:
    """The function as the model would write it: `current_setting`, `version`, `random`, `collate`."""
    if isinstance(node, exp.Anonymous):
        return node.name.lower()
    if not isinstance(node, exp.Binary):  # operator forms (COLLATE, ->) would start with their left operand
        try:
            text = node.sql(dialect=_DUCKDB, unsupported_level=ErrorLevel.IGNORE)
        except SqlglotError:
            text = ""
        leading = re.match(r"[A-Za-z_][A-Za-z0-9_]*", text)
        if leading:
            return leading.group(0).lower()
    return node.sql_name().lower()


def _check_source(source: exp.Expr) -> None:
    """FROM / JOIN sources other than tables: only subqueries and VALUES (so no UNNEST or other functions)."""
    if isinstance(source, exp.Lateral):
        source = source.this
    if not isinstance(source, (exp.Table, exp.Subquery, exp.Values)):
        raise ValueError(f"only tables and subqueries are allowed in FROM, got {_kind(source)}")


def _real_tables(root: exp.Query) -> frozenset[str]:
    """Names of tables that are not references to a CTE visible in their scope."""
    try:
        scopes = traverse_scope(root)
    except SqlglotError as exc:
        raise ValueError(f"could not resolve the query's tables: {_first_line(exc)}") from None
    cte_refs: set[int] = set()
    for scope in scopes:
        for table in scope.tables:
            if table.name in scope.cte_sources and isinstance(scope.sources.get(table.alias_or_name), Scope):
                cte_refs.add(id(table))
    # Every other Table node, wherever it sits, must be a case table.
    return frozenset(t.name.lower() for t in root.find_all(exp.Table) if id(t) not in cte_refs)


def _normalise(root: exp.Query) -> str:
    # DuckDB identifiers are case-insensitive even when quoted, so lower-casing never changes meaning;
    # plain names lose their quotes (the generator re-quotes reserved words).
    for ident in root.find_all(exp.Identifier):
        name = ident.this.lower()
        ident.set("this", name)
        if _PLAIN_IDENTIFIER.match(name):
            ident.set("quoted", False)
    return root.sql(dialect=_DUCKDB, comments=False, pretty=False)


def _kind(node: exp.Expr) -> str:
    if isinstance(node, exp.Command):
        return str(node.this).upper()
    if isinstance(node, exp.Anonymous):
        return node.name.upper()
    if isinstance(node, exp.Func):
        return node.sql_name()
    return node.key.upper()


def _parse_problem(exc: ParseError) -> str:
    if not exc.errors:
        return _first_line(exc)
    err = exc.errors[0]
    what = str(err.get("description", "syntax error")).split(" <Token", 1)[0]  # drop the token's repr
    near = str(err.get("highlight") or "")
    return f"{what}: {near!r} (line {err.get('line')}, col {err.get('col')})" if near else what


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


class DbQueryInput(BaseModel):
    """Business input of db_query."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    case_tables: ClassVar[frozenset[str] | None] = None
    """The tables the SQL may read; None on this generic model, where only the statement shape is checked."""

    sql: str = Field(min_length=1, max_length=4000)
    """Exactly one read-only SELECT (CTEs, joins, UNION allowed) over the case's tables, DuckDB dialect."""

    @field_validator("sql")
    @classmethod
    def _read_only_select(cls, value: str) -> str:
        validate_sql(value, cls.case_tables)
        return value


_LISTING = "Tables (columns): "
_LISTED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\(([^()]*)\)")


def tables_sentence(tables: Sequence[tuple[str, Sequence[str]]]) -> str:
    """The tables a case's SQL may read, with their columns, as one sentence for the model."""
    if not tables:
        return "There are no tables to query."
    return _LISTING + "; ".join(f"{name}({', '.join(columns)})" for name, columns in tables) + "."


def tables_in_description(description: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The tables and columns a description made by `tables_sentence` lists (what a captured run was shown)."""
    _, found, listing = description.rpartition(_LISTING)
    if not found:
        return ()
    return tuple((name, tuple(c.strip() for c in columns.split(",") if c.strip()))
                 for name, columns in _LISTED.findall(listing))  # fmt: skip


@functools.lru_cache(maxsize=256)
def case_input_model(tables: tuple[tuple[str, tuple[str, ...]], ...]) -> type[DbQueryInput]:
    """DbQueryInput bound to one case's tables: it enforces the allow-list and lists tables and columns.

    Binding the tables into the model (rather than into the tool) keeps validation inside pydantic, so
    anything that validates with the tool's `input_model` (wrappers included) gets the allow-list.
    """
    described = f"{DbQueryInput.model_fields['sql'].description} {tables_sentence(tables)}"

    class CaseDbQueryInput(DbQueryInput):
        """Business input of db_query."""

        model_config = ConfigDict(title="DbQueryInput")

        case_tables: ClassVar[frozenset[str] | None] = frozenset(name for name, _ in tables)
        sql: str = Field(min_length=1, max_length=4000, description=described)

    return CaseDbQueryInput


class DatabaseQuery(BusinessTool[DbQueryInput]):
    """Runs one validated, read-only SELECT over the case's tables."""

    name: ClassVar[str] = "db_query"
    description: str = (
        "Run one read-only SQL SELECT (DuckDB dialect) over the payment platform's business tables (e.g. "
        "payments, orders, settlements, refunds). CTEs, joins, aggregates, window functions and UNION "
        "are allowed, with aggregate, window, string, math, date/time, conditional and cast functions; any "
        "other function, and anything that writes, changes settings, reads files or calls table functions, is "
        "rejected, as are tables not listed (use bare table names). String comparisons are exact (use ILIKE "
        "'%word%' to match part of a text case-insensitively). Results are capped at the tool's row limit; "
        "truncated=true means more rows matched, so aggregate or filter instead of paging."
    )
    input_model = DbQueryInput
    runs_inline: ClassVar[bool] = True  # DuckDB with its own max_execution_time

    def __init__(self, tables: Sequence[TableFixture], *, max_rows: int = 50) -> None:
        if not 1 <= max_rows <= MAX_ROWS_CEILING:
            raise ValueError(f"max_rows must be within 1..{MAX_ROWS_CEILING}, got {max_rows}")
        names = [t.name for t in tables]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate table names in fixture: {sorted(names)}")
        self._max_rows = max_rows
        self._fixtures = tuple(tables)
        self._tables = frozenset(names)
        # The instance's input model knows the case's tables (see case_input_model), and so does its description.
        listing = tuple((t.name, t.columns) for t in tables)
        self.input_model = case_input_model(listing)
        self.description = f"{DatabaseQuery.description} {tables_sentence(listing)}"
        key = _duck.content_hash(("db_query/v1", tuple((t.name, t.columns, t.rows, t.types) for t in tables)))
        schema = _duck.ensure_schema(key, self._table_data)
        self._schema = schema
        self._cursor = _duck.cursor()
        # Bare table names in the model's SQL resolve to this case's schema only.
        self._cursor.execute(f"SET search_path = '{schema}'")
        self._lock = threading.Lock()  # a DuckDB cursor must not run two statements from two threads at once

    def normalize_scope(self, parsed: DbQueryInput) -> str:
        return analyse_sql(parsed.sql).sql

    def run(self, parsed: DbQueryInput) -> ToolResult:
        try:
            # Cached, so free on the normal path; it only bites if the input was validated by another model.
            analysis = validate_sql(parsed.sql, self._tables)
        except ValueError as exc:
            raise ToolInputError(f"invalid input for tool {self.name!r}: sql: {exc}") from None
        try:
            # one extra row tells us whether the cap bit
            answer = _duck.first_rows_of(self._cursor, self._lock, self._schema, analysis.sql, self._max_rows + 1)
        except duckdb.Error as exc:
            raise ToolExecutionError(f"db_query failed: {_duck.error_text(exc)}") from exc
        rows, columns = answer.rows, _unique(list(answer.columns))
        truncated = len(rows) > self._max_rows
        records = tuple({c: _json_safe(v) for c, v in zip(columns, row, strict=True)} for row in rows[: self._max_rows])
        return ToolResult(
            evidence_status=EvidenceStatus.EVIDENCE if records else EvidenceStatus.NO_EVIDENCE,
            count=len(records),
            actual_scope={"sql": analysis.sql, "max_rows": self._max_rows},
            records=records,
            truncated=truncated,
        )

    def _table_data(self) -> list[_duck.TableData]:
        return [_duck.TableData(t.name, t.columns, t.rows, t.types) for t in self._fixtures]


def _unique(names: list[str]) -> list[str]:
    """Column names as record keys: `SELECT a.id, b.id` must not collapse into one key."""
    seen: set[str] = set()
    out = []
    for name in names:
        key, n = name, 1
        while key in seen:
            n += 1
            key = f"{name}_{n}"
        seen.add(key)
        out.append(key)
    return out


def _json_safe(value: object) -> JsonValue:
    """A DuckDB value as JSON: decimals to float, temporal values to ISO strings (UTC `Z` when zoned)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            return value.astimezone(dt.UTC).replace(tzinfo=None).isoformat() + "Z"
        return value.isoformat()
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (dt.timedelta, uuid.UUID)):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return str(value)
