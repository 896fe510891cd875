"""The one process-wide in-memory DuckDB behind log_search and db_query.

`duckdb.connect()` costs milliseconds while `cursor()` on an open connection costs microseconds,
so every fixture set is loaded once, into its own schema named after its content hash, and each
tool instance only opens a cursor. Loaded schemas are immutable derived data, never run state.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from harness import ToolExecutionError
from runners.domain.object_columns import object_columns
from runners.domain.tools._remembered import Remembered

# Locked down once at connect time: no files, no extensions, no runaway queries. The settings
# cannot be changed afterwards (`lock_configuration`), so SQL that slipped past validation still
# could not re-enable any of it.
_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    # Fixtures are tiny: one thread avoids scheduling overhead, and concurrent cursors still run in parallel.
    "threads": 1,
    # Below the 2 s after which DuckDB would start printing a progress bar (not settable globally).
    "max_execution_time": 1500,
    "memory_limit": "1GB",
    "temp_directory": "",  # never spill to disk
    # Late materialisation turns `ORDER BY .. LIMIT` into a self-join; on small tables it doubles latency.
    "disabled_optimizers": "late_materialization",
    # "Did you mean .." hints would otherwise scan (and name) other cases' schemas.
    "catalog_error_max_schemas": 0,
}

_TYPE = re.compile(r"^[A-Za-z][A-Za-z0-9_ ]*(\(\s*\d+\s*(,\s*\d+\s*)?\))?(\[\])*$")

_lock = threading.Lock()
_connection: duckdb.DuckDBPyConnection | None = None
_loaded: set[str] = set()


@dataclass(frozen=True, slots=True)
class TableData:
    """One table to load: column names, row values and optional DuckDB column types."""

    name: str
    """Table name inside the fixture schema."""
    columns: tuple[str, ...]
    """Column names, in order."""
    rows: Sequence[Sequence[Any]]
    """Row values, one sequence per row, aligned with `columns`."""
    types: tuple[str, ...] | None = None
    """DuckDB type per column (e.g. `TIMESTAMP`, `DECIMAL(12,2)`); inferred from the values when None."""


def is_valid_type(text: str) -> bool:
    """Whether `text` looks like a DuckDB type name (it is spliced into a CAST, so it is checked)."""
    return bool(_TYPE.match(text.strip()))


def quote_ident(name: str) -> str:
    """A DuckDB identifier in double quotes."""
    return '"' + name.replace('"', '""') + '"'


def content_hash(payload: object) -> str:
    """A short, stable hash of fixture content made of nested tuples/lists of str, int, float, bool and None.

    `repr` of such values is deterministic and several times faster than `json.dumps`; it also keeps
    1, 1.0 and True apart, which DuckDB's type inference does too.
    """
    return hashlib.sha256(repr(payload).encode("utf-8")).hexdigest()[:24]


def error_text(exc: BaseException, limit: int = 500) -> str:
    """A DuckDB error on one line: the message and its hints ("Candidate bindings"), without the caret excerpt."""
    text = " ".join(str(exc).split("\nLINE ", 1)[0].split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _shared() -> duckdb.DuckDBPyConnection:
    global _connection
    if _connection is None:
        conn = duckdb.connect(":memory:", config=_CONFIG)
        conn.execute("SET lock_configuration = true")
        _connection = conn
    return _connection


def ensure_schema(key: str, tables: Callable[[], Sequence[TableData]]) -> str:
    """Load the tables built by `tables()` into schema `fx_<key>` unless already loaded; returns the schema name.

    `tables` is only called on a miss, so a repeated construction never rebuilds the rows.
    """
    schema = f"fx_{key}"
    if key in _loaded:  # set membership is atomic; the lock only guards loading
        return schema
    with _lock:
        if key in _loaded:
            return schema
        conn = _shared()
        try:
            conn.execute(f"CREATE SCHEMA {quote_ident(schema)}")
            for table in tables():
                _load_table(conn, schema, table)
        except Exception as exc:
            # Leave nothing half-loaded behind, so a corrected retry can load the same key.
            conn.execute(f"DROP SCHEMA IF EXISTS {quote_ident(schema)} CASCADE")
            if isinstance(exc, duckdb.Error):
                raise ToolExecutionError(f"could not load fixture tables into DuckDB: {error_text(exc)}") from exc
            raise
        _loaded.add(key)
    return schema


def _load_table(conn: duckdb.DuckDBPyConnection, schema: str, table: TableData) -> None:
    selects = []
    for i, column in enumerate(table.columns):
        col = quote_ident(column)
        if table.types is not None:
            selects.append(f"CAST({col} AS {table.types[i]}) AS {col}")
        elif all(row[i] is None for row in table.rows):
            selects.append(f"CAST({col} AS VARCHAR) AS {col}")  # an all-NULL column would get type "NULL"
        else:
            selects.append(col)
    target = f"{quote_ident(schema)}.{quote_ident(table.name)}"
    names = ", ".join(quote_ident(c) for c in table.columns)
    if table.rows and len(table.rows) * len(table.columns) <= 20_000:
        # Fixture tables are small: one parameterised VALUES statement is ~2.4x faster than a DataFrame
        # scan (measured 1.5 ms vs 3.6 ms per table), and a case run may load several tables cold.
        row_sql = "(" + ", ".join("?" for _ in table.columns) + ")"
        values = ", ".join(row_sql for _ in table.rows)
        params = [value for row in table.rows for value in row]
        try:
            conn.execute(
                f"CREATE TABLE {target} AS SELECT {', '.join(selects)} FROM (VALUES {values}) AS v({names})", params
            )
            return
        except duckdb.Error:
            conn.execute(f"DROP TABLE IF EXISTS {target}")  # mixed types per column: let the column scan unify them
    # numpy, which the scan needs, is already loaded where case runs start on threads (`kb_search.load_backend`)
    frame = object_columns(table.rows, table.columns)
    view = "_fixture_frame"
    conn.register(view, frame)
    try:
        conn.execute(f"CREATE TABLE {target} AS SELECT {', '.join(selects)} FROM {view}")
    finally:
        conn.unregister(view)


_results: Remembered[tuple[str, tuple[object, ...]], tuple[tuple[Any, ...], ...]] = Remembered(4096)
"""The rows `rows_of` remembers, by statement and parameters: 4,096 statements, a few megabytes."""


def rows_of(
    cur: duckdb.DuckDBPyConnection, lock: threading.Lock, sql: str, params: Sequence[object]
) -> tuple[Any, ...]:
    """Every row of a statement that names its fixture schema and reads nothing else, run on `cur` under `lock`.

    The schemas never change and such a statement is a function of its text and parameters, so its rows are
    remembered: a sweep asks the same searches of the same cases at every setting and epoch (a sixth of a scripted
    case run's CPU time was DuckDB answering them again). A failed statement is not remembered."""

    def run() -> tuple[Any, ...]:
        with lock:
            return tuple(cur.execute(sql, list(params)).fetchall())

    return _results.get((sql, tuple(params)), run)


@dataclass(frozen=True, slots=True)
class FirstRows:
    """What a statement answered, up to a row limit."""

    columns: tuple[str, ...]
    """The result's column names, as DuckDB described them."""
    rows: tuple[tuple[Any, ...], ...]
    """Its first rows (at most the limit asked for)."""


_first: Remembered[tuple[str, str, int], FirstRows] = Remembered(4096)
"""The answers `first_rows_of` remembers, by schema, statement and row limit."""


def first_rows_of(cur: duckdb.DuckDBPyConnection, lock: threading.Lock, schema: str, sql: str, limit: int) -> FirstRows:
    """The column names and at most `limit` rows of a statement run on `cur` (whose search path is fixture schema
    `schema`, so bare table names mean that schema's tables) under `lock`.

    A statement the model may send reads nothing but the schema's tables and calls nothing whose answer is not a
    function of them (no clock, no randomness, no session state: the SQL validator refuses those), and a schema never
    changes, so the answer is remembered like `rows_of`'s: a sweep sends the same queries to the same cases at every
    setting and epoch. A failed statement (a timeout included) is not remembered."""

    def run() -> FirstRows:
        with lock:
            found = cur.execute(sql)
            rows = found.fetchmany(limit)
            columns = tuple(d[0] for d in found.description or ())
        return FirstRows(columns, tuple(rows))

    return _first.get((schema, sql, limit), run)


def forget_answers() -> None:
    """Forget every answer `first_rows_of` and `rows_of` remember (for a test that counts what reaches DuckDB)."""
    _first.clear()
    _results.clear()


def cursor() -> duckdb.DuckDBPyConnection:
    """A new cursor on the shared database (one per tool instance; cursors are cheap)."""
    with _lock:
        return _shared().cursor()


def schema_count() -> int:
    """How many fixture schemas the shared database holds (for tests and diagnostics)."""
    with _lock:
        row = _shared().execute("SELECT count(*) FROM duckdb_schemas() WHERE schema_name LIKE 'fx\\_%' ESCAPE '\\'")
        result = row.fetchone()
    return int(result[0]) if result else 0
