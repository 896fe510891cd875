"""Imported bench runs: runs observed elsewhere (`harness-bench import`), stored as a bench run of their own.

The bench run's row (`source = 'imported'`, status `completed`) and every case run's rows go in one transaction: a
file gets the whole import or nothing of it. The case runs are staged first, a batch at a time as the reader gives
them, so that memory holds one batch whatever the import's size. Every text goes through the bench's one redaction
(runners/domain/redaction.py) on its way in: the case runs' cells in the writer, the bench run's model, case ids and
trace file name here — a trace may carry a key anywhere.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import duckdb

from runners.domain.redaction import NO_SECRETS, redact, redact_cells
from runners.store._host import quoted_path
from runners.store.schema import CaseRunRows
from runners.store.writer import MetricsWriter

__all__ = ["EarlierImport", "ImportedBenchRun", "RunSource", "imported_before", "write_imported_bench_run"]


class RunSource(StrEnum):
    """Where a bench run's case runs come from (`bench_runs.source`; NULL: run by the bench)."""

    IMPORTED = "imported"


@dataclass(frozen=True, slots=True)
class ImportedBenchRun:
    """The bench run an import stores."""

    bench_run_id: str
    """Its id."""
    label: str
    """Its label (`--label`)."""
    model: str | None
    """The model every run names (None: they name several)."""
    traces: str
    """The trace file it was read from (kept as its evaluation-set spec: where the runs came from)."""
    case_ids: tuple[str, ...]
    """The case ids of its case runs, in order."""
    epochs: int
    """The highest epoch among them."""
    version: str
    """The harness-bench version that imported it."""
    fingerprint: str | None = None
    """What was imported, hashed (`bench_runs.evalset_hash`): the same runs imported again under one label are
    found by it."""
    agent: str | None = None
    """The loop its runs ran under (`bench_runs.agent`): None, the Harness's; `plain`, another agent's (no Harness
    decided its calls: the comparisons treat it as the plain loop, caps and loop detectors only)."""


Transcript = tuple[list[tuple[Any, ...]], dict[str, str]]
"""A case run's `messages` rows and the prompts they name (`runners.store.transcripts.transcript_rows`)."""


_BATCH = 200
"""Case runs per insert: the rows in memory at once are a batch's, whatever the import's size."""
_STAGED = ("case_runs", "tool_calls", "events", "messages", "prompts")
"""The tables an import's case runs fill (the bench run's own row goes straight in)."""
_MEMORY_LIMIT = "128MB"
"""DuckDB's memory while an import writes (measured: enough for 2·10⁵ spans a transaction)."""


def write_imported_bench_run(
    con: duckdb.DuckDBPyConnection, run: ImportedBenchRun, rows: Iterable[tuple[CaseRunRows, Transcript]],
    *, committing: Callable[[], object] = lambda: None,
) -> int:  # fmt: skip
    """Store the bench run and its case runs' rows (and transcripts), taken from `rows` as they come, in one
    transaction; returns the rows written. `committing` is called just before the COMMIT (from there the import is
    stored whatever happens: the caller holds interrupts back until the file is closed).

    The rows go first, a batch at a time, into a staging database of their own (a temporary file beside the
    database), each batch committed there; then one transaction copies them into the database. DuckDB keeps every
    Python object an open transaction inserted alive until it ends: batches inserted straight into one long
    transaction would hold the whole import in memory. Staged, memory holds one batch."""
    from runners.store.errors import WRITE_FAILURES, MetricsWriteError
    from runners.store.writer import commit

    main = str(con.execute("SELECT current_database()").fetchone()[0])  # type: ignore[index]
    # named after the database it fills: the store attaches every file to one instance per process, where an alias is
    # the whole process's, so two imports at once into two databases must not share one
    staging_alias = f'"{main}_staging"'
    (path,) = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = ?", [main]).fetchone() or (None,)
    with contextlib.ExitStack() as stack:
        # DuckDB keeps the blocks it writes cached up to its memory limit (80% of the machine's memory by default):
        # an import's memory would grow with the file; bounded, it evicts them (and spills to `<db>.tmp` if it must)
        con.execute(f"SET memory_limit = '{_MEMORY_LIMIT}'")
        stack.callback(_quietly, con, "RESET memory_limit")
        if path:
            try:
                folder = stack.enter_context(tempfile.TemporaryDirectory(prefix=".harness-bench-import-",
                                                                         dir=Path(path).parent))  # fmt: skip
            except OSError as exc:  # the folder cannot be written: storage, not the trace
                raise MetricsWriteError(exc) from exc
            staging = str(Path(folder) / "staging.duckdb")
        else:
            staging = ":memory:"
        try:
            con.execute(f"ATTACH {quoted_path(staging)} AS {staging_alias}")
            stack.callback(_quietly, con, f"DETACH {staging_alias}")
            for table in _STAGED:
                con.execute(f'CREATE TABLE {staging_alias}.{table} AS SELECT * FROM "{main}".{table} LIMIT 0')
            con.execute(f"USE {staging_alias}")  # the writer's statements name no database: they fill the staging one
            stack.callback(_quietly, con, f'USE "{main}"')
            writer = MetricsWriter(con, flush_seconds=float("inf"), max_buffer=_BATCH)
            for r, (messages, prompts) in rows:
                writer.add_transcript(messages, prompts)
                writer.add(r)
            writer.flush()
            con.execute(f'USE "{main}"')
        except WRITE_FAILURES as exc:
            raise exc if isinstance(exc, MetricsWriteError) else MetricsWriteError(exc) from exc
        con.execute("BEGIN")
        try:
            con.execute(
                "INSERT INTO bench_runs (bench_run_id, started_at, finished_at, status, model, label, evalset_specs,"
                " evalset_hash, case_ids_json, epochs, planned_case_runs, harness_bench_version, transcripts, source,"
                " agent) VALUES (?, now(), now(), 'completed', ?, ?, ?, ?, ?, ?, ?, ?, true, ?, ?)",
                list(redact_cells((
                    run.bench_run_id, run.model, run.label, json.dumps([redact(run.traces)], ensure_ascii=False),
                    run.fingerprint, json.dumps([redact(c) for c in run.case_ids], ensure_ascii=False), run.epochs,
                    len(run.case_ids), run.version, RunSource.IMPORTED.value, run.agent,
                ), NO_SECRETS)),
            )  # fmt: skip
            for table in _STAGED:
                known = " WHERE prompt_hash NOT IN (SELECT prompt_hash FROM prompts)" if table == "prompts" else ""
                con.execute(f"INSERT INTO {table} SELECT * FROM {staging_alias}.{table}{known}")
        except WRITE_FAILURES as exc:
            _rollback(con)
            raise exc if isinstance(exc, MetricsWriteError) else MetricsWriteError(exc) from exc
        except BaseException:
            _rollback(con)
            raise
        committing()
        commit(con)
    return writer.rows_written + 1


def _quietly(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """A clean-up statement that must not hide the failure it cleans up after."""
    with contextlib.suppress(duckdb.Error):
        con.execute(sql)


def _rollback(con: duckdb.DuckDBPyConnection) -> None:
    try:
        con.execute("ROLLBACK")
    except duckdb.Error:
        pass  # a transaction DuckDB already aborted must not hide the failure that caused it


@dataclass(frozen=True, slots=True)
class EarlierImport:
    """A bench run an earlier import stored from the same runs."""

    bench_run_id: str
    """Its id."""
    traces: str
    """The trace file it was read from."""


def imported_before(con: duckdb.DuckDBPyConnection, label: str, fingerprint: str) -> EarlierImport | None:
    """The imported bench run of `label` holding the runs `fingerprint` names, if one does."""
    row = con.execute(
        "SELECT bench_run_id, evalset_specs FROM bench_runs WHERE source = ? AND label = ? AND evalset_hash = ?"
        " ORDER BY started_at LIMIT 1",
        [RunSource.IMPORTED.value, label, fingerprint],
    ).fetchone()
    if row is None:
        return None
    try:
        specs = json.loads(row[1] or "[]")
    except ValueError:
        specs = []
    return EarlierImport(str(row[0]), str(specs[0]) if specs else "?")
