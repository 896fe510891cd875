"""Read back what a recorded sweep did, one typed row per case run and per rejected request, for the summary of a
real model's cassettes (`runners.decisions.real_models`)."""

from __future__ import annotations

from pathlib import Path

import duckdb
from pydantic import BaseModel, ConfigDict

from runners.store.connection import connect
from runners.store.diagnosis_reads import FunnelRow, GainTagRow, funnel_rows, gain_tag_rows

__all__ = ["CaseRunRow", "CassetteMisses", "RecordedRows", "RejectionRow", "cassette_misses", "read_recorded"]


class CaseRunRow(BaseModel):
    """One stored case run, the columns the summary counts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    case_id: str
    """The evaluation case."""
    family: str
    """Its family."""
    no_gain_threshold: int
    """The NO_GAIN threshold the run used."""
    passed: bool | None
    """Whether it met its expectations (every verdict that applies; None: unjudged, the bench's failure)."""
    outcome_passed: bool | None
    """The outcome verdict (None: stored before there were two verdicts)."""
    outcome: str
    """Release outcome (a `ReleaseOutcome` value)."""
    stop_reason: str | None
    """The Harness's stop reason, None when the agent finished on its own."""
    model_calls: int
    """Agent model calls."""
    guard_calls: int
    """SemanticGuard model calls."""
    wall_ms: float
    """The run's wall time (the recording's, or the replay's)."""
    tool_invocations: int
    """Backend invocations (rejected requests excluded)."""
    duplicate_scope_rejections: int
    """Requests stopped before the backend as a repeated scope."""
    protocol_violations: int
    """Progress-protocol violations."""
    stop_required_deliveries: int
    """Times STOP_REQUIRED was delivered."""
    input_tokens: int
    """Prompt tokens over the run."""
    output_tokens: int
    """Generated tokens over the run."""
    draft_valid: bool
    """Whether the final message parsed as a Draft."""
    evidence_check: str | None
    """EvidenceGuard's verdict on its Draft's conclusion (None: no conclusion was checked)."""
    semantic_verdict: str | None
    """SemanticGuard's verdict (None: not asked)."""


class RejectionRow(BaseModel):
    """One request rejected before the backend."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    case_id: str
    """The evaluation case."""
    no_gain_threshold: int
    """The NO_GAIN threshold the run used."""
    rejection: str
    """A `RejectionReason` value."""
    violation: str | None
    """The protocol violation, when the rejection is one."""


class RecordedRows(BaseModel):
    """Everything a label's case runs stored that the summary reads."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    runs: tuple[CaseRunRow, ...]
    """The case runs, by case and threshold."""
    rejections: tuple[RejectionRow, ...]
    """The rejected requests, in order within each run."""
    case_run_ids: tuple[str, ...] = ()
    """The case runs read, in the order of `runs`."""
    funnel: tuple[FunnelRow, ...] = ()
    """What the diagnosis funnel reads of each of those case runs."""
    gain_tags: tuple[GainTagRow, ...] = ()
    """The agent's gain tags against the truth, per case run with a judged tag."""


def read_recorded(db: Path, label: str) -> RecordedRows:
    """The case runs of `label` in `db` (its newest case run per case, threshold and epoch)."""
    con = connect(db, read_only=True)
    try:
        runs = _records(con, """
            WITH newest AS (
                SELECT c.*, row_number() OVER (PARTITION BY case_id, no_gain_threshold, epoch
                                               ORDER BY finished_at DESC, case_run_id DESC) AS k
                FROM case_runs c WHERE label = ?
            ), drafts AS (
                SELECT case_run_id, bool_or(draft_valid) FILTER (WHERE kind = 'DRAFT_RECEIVED') AS draft_valid,
                       max(verdict) FILTER (WHERE kind = 'EVIDENCE_CHECKED') AS evidence_check,
                       max(verdict) FILTER (WHERE kind = 'GUARD_VERDICT' AND guard = 'SEMANTIC') AS semantic_verdict
                FROM events WHERE kind IN ('DRAFT_RECEIVED', 'EVIDENCE_CHECKED', 'GUARD_VERDICT') GROUP BY case_run_id
            )
            SELECT n.case_run_id, n.case_id, n.family, n.no_gain_threshold, n.passed, n.outcome_passed, n.outcome,
                   n.stop_reason,
                   n.model_calls, coalesce(n.guard_calls, 0) AS guard_calls, n.wall_ms,
                   n.tool_invocations, n.duplicate_scope_rejections, n.protocol_violations,
                   coalesce(n.stop_required_deliveries, 0) AS stop_required_deliveries,
                   coalesce(n.input_tokens, 0) AS input_tokens, coalesce(n.output_tokens, 0) AS output_tokens,
                   coalesce(d.draft_valid, false) AS draft_valid, d.evidence_check, d.semantic_verdict
            FROM newest n LEFT JOIN drafts d USING (case_run_id) WHERE n.k = 1
            ORDER BY n.case_id, n.no_gain_threshold, n.epoch
            """, [label])  # fmt: skip
        ids = [str(r.pop("case_run_id")) for r in runs]
        rejections = _records(con, """
            SELECT c.case_id, c.no_gain_threshold, t.rejection_reason AS rejection, t.violation
            FROM tool_calls t JOIN case_runs c USING (case_run_id)
            WHERE t.rejection_reason IS NOT NULL AND list_contains(?, t.case_run_id)
            ORDER BY c.case_id, c.no_gain_threshold, t.seq
            """, [ids])  # fmt: skip
        funnel = funnel_rows(con, case_run_ids=ids)
        gain_tags = gain_tag_rows(con, case_run_ids=ids)
    finally:
        con.close()
    return RecordedRows(
        runs=tuple(CaseRunRow.model_validate(r) for r in runs),
        rejections=tuple(RejectionRow.model_validate(r) for r in rejections),
        case_run_ids=tuple(ids),
        funnel=funnel,
        gain_tags=gain_tags,
    )


def _records(con: duckdb.DuckDBPyConnection, sql: str, params: list[object]) -> list[dict[str, object]]:
    """The rows of `sql` by column name (validated into a row type by the caller, never passed on as tuples)."""
    cur = con.execute(sql, params)
    names = [d[0] for d in cur.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


class CassetteMisses(BaseModel):
    """The case runs of a replay that found no answer in their cassette (`case_runs.error`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    case_runs: int
    """Case runs of the label replayed."""
    errors: tuple[str, ...]
    """The error of each that found no answer (`request not in cassette PATH (record mode …`)."""


_MISS = "request not in cassette %"
"""How a replayed case run's error begins when its cassette held no answer (runners/run/_execute.py)."""


def cassette_misses(db: Path, label: str) -> CassetteMisses:
    """The case runs of `label` in `db` whose cassette held no answer, and how many case runs it has."""
    con = connect(db, read_only=True)
    try:
        row = con.execute(
            "SELECT count(*), coalesce(list(error) FILTER (WHERE error LIKE ?), []) FROM case_runs WHERE label = ?",
            [_MISS, label],
        ).fetchone()
    finally:
        con.close()
    return CassetteMisses(case_runs=int(row[0]) if row else 0, errors=tuple(str(e) for e in (row[1] if row else ())))
