"""Imported bench runs: runs observed elsewhere (`harness-bench import`), stored as a bench run of their own.

The bench run's row (`source = 'imported'`, status `completed`) and every case run's rows go in one transaction
(the writer's): a file gets the whole import or nothing of it. Every text goes through the bench's one redaction
(runners/domain/redaction.py) on its way in: the case runs' cells in the writer, the bench run's model, case ids and
trace file name here — a trace may carry a key anywhere.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import duckdb

from runners.domain.redaction import NO_SECRETS, redact, redact_cells
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


Transcript = tuple[list[tuple[Any, ...]], dict[str, str]]
"""A case run's `messages` rows and the prompts they name (`runners.store.transcripts.transcript_rows`)."""


def write_imported_bench_run(
    con: duckdb.DuckDBPyConnection, run: ImportedBenchRun, rows: Sequence[tuple[CaseRunRows, Transcript]]
) -> int:
    """Store the bench run and its case runs' rows (and transcripts) in one transaction; returns the rows written."""
    writer = MetricsWriter(con, flush_seconds=float("inf"), max_buffer=len(rows) + 1)
    for r, (messages, prompts) in rows:
        writer.add_transcript(messages, prompts)
        writer.add(r)

    def bench_row(c: duckdb.DuckDBPyConnection) -> None:
        c.execute(
            "INSERT INTO bench_runs (bench_run_id, started_at, finished_at, status, model, label, evalset_specs,"
            " evalset_hash, case_ids_json, epochs, planned_case_runs, harness_bench_version, transcripts, source)"
            " VALUES (?, now(), now(), 'completed', ?, ?, ?, ?, ?, ?, ?, ?, true, ?)",
            list(redact_cells((
                run.bench_run_id, run.model, run.label, json.dumps([redact(run.traces)], ensure_ascii=False),
                run.fingerprint, json.dumps([redact(c) for c in run.case_ids], ensure_ascii=False), run.epochs,
                len(rows), run.version, RunSource.IMPORTED.value,
            ), NO_SECRETS)),
        )  # fmt: skip

    writer.flush(also=bench_row)
    return writer.rows_written + 1


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
