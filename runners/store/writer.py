"""The batched writer of case runs, and the storage-failure rules every write follows.

A case run's rows (case_runs + tool_calls + events) always land in the same transaction; the
writer groups several finished case runs per transaction (measured: an insert scanned from Python
objects costs ~4 ms of fixed overhead per statement on this machine, so one transaction per case run
would eat a third of a 50-runs/s budget). The rows reach DuckDB as one NumPy object array per column
(`runners.domain.object_columns`), which DuckDB scans as it scans a DataFrame — without pandas, half a second to import.
Buffered runs are flushed at least every `flush_seconds`, at the end, and on interruption; a SIGKILL
loses at most that window, which `--resume` re-runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence

import duckdb

from runners.domain.object_columns import object_columns
from runners.domain.redaction import NO_SECRETS, Secrets, redact, redact_cells
from runners.store.errors import STORAGE_ERRORS, WRITE_FAILURES, MetricsWriteError
from runners.store.schema import EVENT_COLUMNS, TOOL_CALL_COLUMNS, CaseRunRows

__all__ = ["MetricsWriter", "commit", "write_statement"]


def _keys(rows: Iterable[Mapping[str, object]]) -> list[str]:
    """Every key of `rows`, in the order first seen."""
    return list(dict.fromkeys(key for row in rows for key in row))


_STATEMENT_FAILURES: tuple[type[Exception], ...] = (*STORAGE_ERRORS, duckdb.TransactionException)


def _rollback(con: duckdb.DuckDBPyConnection) -> None:
    """Roll back after a failed write; a transaction DuckDB already aborted (or an invalidated database)
    must not hide the failure that caused it."""
    try:
        con.execute("ROLLBACK")
    except duckdb.Error:
        pass


def commit(con: duckdb.DuckDBPyConnection) -> None:
    """COMMIT the open transaction. This process is the file's only writer (it holds the exclusive lock), so
    a failed COMMIT is the storage failing (full disk, I/O error): rolled back, raised as MetricsWriteError."""
    try:
        con.execute("COMMIT")
    except duckdb.Error as exc:
        _rollback(con)
        raise MetricsWriteError(exc) from exc


def write_statement(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[object] = ()) -> None:
    """One auto-committed write; its failure is the storage failing (see `commit`)."""
    try:
        con.execute(sql, list(params))
    except _STATEMENT_FAILURES as exc:
        raise MetricsWriteError(exc) from exc


class MetricsWriter:
    """Buffers finished case runs and writes them in transactions (all rows of a case run together)."""

    def __init__(
        self, con: duckdb.DuckDBPyConnection, *, flush_seconds: float = 1.0, max_buffer: int = 200,
        secrets: Secrets = NO_SECRETS,
    ) -> None:  # fmt: skip
        self._con = con
        self._secrets = secrets  # every text cell is redacted here, on its way into the database
        self._flush_seconds = flush_seconds
        self._max_buffer = max_buffer
        self._cases: list[Mapping[str, object]] = []
        self._tools: list[tuple[object, ...]] = []
        self._events: list[tuple[object, ...]] = []
        self._messages: list[tuple[object, ...]] = []
        self._prompts: dict[str, str] = {}
        self._prompts_written: set[str] = set()
        self._last_flush = time.monotonic()
        self.rows_written = 0
        self.write_seconds = 0.0
        self.lost = 0
        """Case runs of transactions that failed on a storage error (not stored)."""
        self.cases_written = 0
        """Case runs stored by this writer."""

    def add_transcript(self, messages: Sequence[tuple[object, ...]], prompts: Mapping[str, str]) -> None:
        """Buffer the transcript rows of the case run `add` is called with next (same transaction)."""
        from runners.store.transcripts import MESSAGE_COLUMNS, prompt_hash

        # A prompt is stored under the hash of its redacted text (the key names what is stored).
        texts = {key: redact(text, self._secrets) for key, text in prompts.items()}
        rekeyed = {key: prompt_hash(text) for key, text in texts.items() if text != prompts[key]}
        at = MESSAGE_COLUMNS.index("prompt_hash")
        for row in messages:
            row = redact_cells(row, self._secrets)
            cell = row[at]
            if isinstance(cell, str) and cell in rekeyed:
                row = (*row[:at], rekeyed[cell], *row[at + 1 :])
            self._messages.append(row)
        for key, text in texts.items():
            key = rekeyed.get(key, key)
            if key not in self._prompts_written:
                self._prompts[key] = text

    def add(self, rows: CaseRunRows) -> None:
        """Buffer one case run; flush when the buffer is full or old."""
        secrets = self._secrets
        self._cases.append(redact_cells(dict(rows.case_run), secrets))
        self._tools.extend(redact_cells(r.cells(), secrets) for r in rows.tool_calls)
        self._events.extend(redact_cells(r, secrets) for r in rows.events)
        if len(self._cases) >= self._max_buffer or time.monotonic() - self._last_flush >= self._flush_seconds:
            self.flush()

    def flush(self, also: Callable[[duckdb.DuckDBPyConnection], None] | None = None) -> int:
        """Write everything buffered in one transaction; returns the number of case runs written. `also`: more
        statements that belong in the same transaction (an imported bench run's own row), run first."""
        if not self._cases:
            return 0
        t0 = time.perf_counter()
        case_columns = _keys(self._cases)
        cases = object_columns([[row.get(c) for c in case_columns] for row in self._cases], case_columns)
        tools = object_columns(self._tools, TOOL_CALL_COLUMNS)
        events = object_columns(self._events, ["bench_run_id", "case_run_id", *EVENT_COLUMNS])
        con = self._con
        con.execute("BEGIN")
        try:
            if also is not None:
                also(con)
            con.register("_hb_cases", cases)
            con.register("_hb_tools", tools)
            con.register("_hb_events", events)
            columns = ", ".join(f'"{c}"' for c in case_columns)
            con.execute(f"INSERT INTO case_runs ({columns}) SELECT * FROM _hb_cases")
            if self._tools:
                con.execute(f"INSERT INTO tool_calls ({', '.join(TOOL_CALL_COLUMNS)}) SELECT * FROM _hb_tools")
            if self._events:
                cols = ", ".join(["bench_run_id", "case_run_id", *EVENT_COLUMNS])
                con.execute(f"INSERT INTO events ({cols}) SELECT * FROM _hb_events")
            if self._messages:
                _write_transcripts(con, self._messages, self._prompts)
            commit(con)
        except WRITE_FAILURES as exc:
            _rollback(con)
            self.lost += len(self._cases)
            self._cases, self._tools, self._events = [], [], []  # not stored: --resume runs them again
            self._messages, self._prompts = [], {}
            raise exc if isinstance(exc, MetricsWriteError) else MetricsWriteError(exc) from exc
        except BaseException:
            _rollback(con)
            raise
        finally:
            for name in ("_hb_cases", "_hb_tools", "_hb_events"):
                try:
                    con.unregister(name)
                except duckdb.Error:
                    pass
        n = len(self._cases)
        self.cases_written += n
        self.rows_written += n + len(self._tools) + len(self._events)
        self._cases, self._tools, self._events = [], [], []
        self.rows_written += len(self._messages)
        self._prompts_written.update(self._prompts)
        self._messages, self._prompts = [], {}
        self._last_flush = time.monotonic()
        self.write_seconds += time.perf_counter() - t0
        return n


def _write_transcripts(
    con: duckdb.DuckDBPyConnection, messages: list[tuple[object, ...]], prompts: dict[str, str]
) -> None:
    """Insert buffered transcript rows, and the prompts not stored yet (inside the writer's transaction)."""
    from runners.store.transcripts import MESSAGE_COLUMNS

    con.register("_hb_messages", object_columns(messages, MESSAGE_COLUMNS))
    # Scanned as text and cast by the INSERT to the table's types: skips DuckDB's per-column sampling of
    # Python objects (measured: half the cost of this insert).
    con.execute("SET pandas_analyze_sample = 0")
    try:
        con.execute(f"INSERT INTO messages ({', '.join(MESSAGE_COLUMNS)}) SELECT * FROM _hb_messages")
    finally:
        con.execute("RESET pandas_analyze_sample")
        con.unregister("_hb_messages")
    if prompts:  # one statement (executemany costs ~1 ms a row); prompts already stored are skipped
        con.register("_hb_prompts", object_columns(list(prompts.items()), ["prompt_hash", "content"]))
        try:
            con.execute(
                "INSERT INTO prompts SELECT * FROM _hb_prompts"
                " WHERE prompt_hash NOT IN (SELECT prompt_hash FROM prompts)"
            )
        finally:
            con.unregister("_hb_prompts")
