"""The reads behind the diagnosis funnel and the gain-tag confusion, as named queries returning typed rows: per case
run what its funnel needs (expected and published outcome, whether a Draft arrived and was valid, the guards'
verdicts, whether any call retrieved the case's evidence and how the agent tagged it), and per case run the agent's
gain tags against the truth of the observations they judged. Parameters, never SQL text, cross this boundary."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import duckdb

from runners.domain.fallback_source import FallbackSource, fallback_source
from runners.plan.settings import SettingValue, swept_names

__all__ = ["FunnelRow", "GainTagRow", "SweepPoint", "funnel_rows", "gain_tag_rows", "sweep_points"]


@dataclass(frozen=True, slots=True)
class FunnelRow:
    """One case run, as its diagnosis funnel reads it."""

    case_run_id: str
    """The case run."""
    bench_run_id: str
    """Its bench run."""
    case_id: str
    """The case."""
    family: str
    """The case's family (`observed` for an imported run)."""
    label: str | None
    """The bench run's label."""
    no_gain_threshold: int | None
    """The NO_GAIN threshold it ran at."""
    expected_outcome: str | None
    """The case's expected outcome (None: an imported run, held to no expectation)."""
    outcome: str
    """The published outcome."""
    outcome_passed: bool | None
    """The outcome verdict."""
    stop_reason: str | None
    """The Harness's stop reason, if it stopped the loop."""
    budget_hit: str | None
    """The hard budget that stopped it, if one did."""
    error_kind: str | None
    """A model-call failure that ended it, if one did."""
    draft_received: bool
    """The model wrote a final message."""
    draft_valid: bool
    """That message was a valid Draft."""
    evidence_check: str | None
    """EvidenceGuard's verdict on a Draft with a conclusion (None: no conclusion was checked)."""
    evidence_detail: str | None
    """Why EvidenceGuard rejected it."""
    semantic_verdict: str | None
    """SemanticGuard's verdict (None: not asked)."""
    evidence_calls: int | None
    """Completed calls whose records carry the case's evidence (None: the truth is not known)."""
    evidence_gained: int
    """Of those, the ones the agent tagged GAINED."""
    evidence_no_gain: int
    """Of those, the ones the agent tagged NO_GAIN."""
    failures: str | None
    """The verdicts' failures, as stored (JSON)."""
    bench_failure: bool = False
    """It ended on the bench's failure, not the model's (unjudged: runners/run/verdict.py `bench_failure`)."""

    @property
    def fallback_source(self) -> FallbackSource | None:
        """Where its FALLBACK came from (None for another outcome)."""
        return fallback_source(self.outcome, draft_valid=self.draft_valid, evidence_check=self.evidence_check,
                               semantic_verdict=self.semantic_verdict)  # fmt: skip


def _case_runs(con: duckdb.DuckDBPyConnection, bench_run_ids: Sequence[str], case_run_ids: Sequence[str] | None
               ) -> list[str]:  # fmt: skip
    """The case runs selected: `case_run_ids` when given, else every case run of `bench_run_ids`."""
    if case_run_ids is not None:
        return list(case_run_ids)
    if not bench_run_ids:
        return []
    rows = con.execute("SELECT case_run_id FROM case_runs WHERE list_contains(?, bench_run_id)",
                       [list(bench_run_ids)]).fetchall()  # fmt: skip
    return [str(r[0]) for r in rows]


def funnel_rows(
    con: duckdb.DuckDBPyConnection, bench_run_ids: Sequence[str] = (), *, case_run_ids: Sequence[str] | None = None
) -> tuple[FunnelRow, ...]:
    """Every case run of the given bench runs (or the given case runs), in (bench run, case, epoch) order."""
    ids = _case_runs(con, bench_run_ids, case_run_ids)
    if not ids:
        return ()
    rows = con.execute(
        """
        WITH ev AS (
            SELECT case_run_id,
                   bool_or(kind = 'DRAFT_RECEIVED') AS draft_received,
                   coalesce(bool_or(kind = 'DRAFT_RECEIVED' AND draft_valid), false) AS draft_valid,
                   max(CASE WHEN kind = 'EVIDENCE_CHECKED' THEN verdict END) AS evidence_check,
                   max(CASE WHEN kind = 'EVIDENCE_CHECKED' AND verdict <> 'PASSED' THEN detail END) AS evidence_detail,
                   max(CASE WHEN kind = 'GUARD_VERDICT' AND guard = 'SEMANTIC' THEN verdict END) AS semantic_verdict
            FROM events WHERE list_contains(?, case_run_id) GROUP BY case_run_id
        ), tc AS (
            SELECT case_run_id,
                   CASE WHEN bool_or(carries_evidence IS NOT NULL) THEN count(*) FILTER (WHERE carries_evidence)
                        END AS evidence_calls,
                   count(*) FILTER (WHERE carries_evidence AND gain_producer = 'AGENT' AND gain = 'GAINED')
                        AS evidence_gained,
                   count(*) FILTER (WHERE carries_evidence AND gain_producer = 'AGENT' AND gain = 'NO_GAIN')
                        AS evidence_no_gain
            FROM tool_calls WHERE list_contains(?, case_run_id) GROUP BY case_run_id
        )
        SELECT c.case_run_id, c.bench_run_id, c.case_id, c.family, b.label, c.no_gain_threshold, c.expected_outcome,
               c.outcome, c.outcome_passed, c.stop_reason, c.budget_hit, c.error_kind,
               coalesce(ev.draft_received, false), coalesce(ev.draft_valid, false), ev.evidence_check,
               ev.evidence_detail, ev.semantic_verdict, tc.evidence_calls, coalesce(tc.evidence_gained, 0),
               coalesce(tc.evidence_no_gain, 0), c.failures,
               c.passed IS NULL AND c.expected_outcome IS NOT NULL  -- the verdict left it unjudged: the bench's
        FROM case_runs c JOIN bench_runs b USING (bench_run_id)
             LEFT JOIN ev USING (case_run_id) LEFT JOIN tc USING (case_run_id)
        WHERE list_contains(?, c.case_run_id)
        ORDER BY c.bench_run_id, c.case_id, c.epoch
        """,
        [ids] * 3,
    ).fetchall()
    return tuple(
        FunnelRow(
            case_run_id=str(r[0]),
            bench_run_id=str(r[1]),
            case_id=str(r[2]),
            family=str(r[3]),
            label=_s(r[4]),
            no_gain_threshold=_i(r[5]),
            expected_outcome=_s(r[6]),
            outcome=str(r[7]),
            outcome_passed=None if r[8] is None else bool(r[8]),
            stop_reason=_s(r[9]),
            budget_hit=_s(r[10]),
            error_kind=_s(r[11]),
            draft_received=bool(r[12]),
            draft_valid=bool(r[13]),
            evidence_check=_s(r[14]),
            evidence_detail=_s(r[15]),
            semantic_verdict=_s(r[16]),
            evidence_calls=_i(r[17]),
            evidence_gained=int(r[18]),
            evidence_no_gain=int(r[19]),
            failures=_s(r[20]),
            bench_failure=bool(r[21]),
        )
        for r in rows
    )


def _s(value: object) -> str | None:
    return None if value is None else str(value)


def _i(value: object) -> int | None:
    return None if value is None else int(str(value))


@dataclass(frozen=True, slots=True)
class GainTagRow:
    """The agent's gain tags of one case run against the truth of the observations they judged."""

    bench_run_id: str
    """Its bench run."""
    case_id: str
    """The case."""
    label: str | None
    """The bench run's label."""
    no_gain_threshold: int | None
    """The NO_GAIN threshold it ran at."""
    gained_on_evidence: int
    """GAINED on an observation carrying the case's evidence (right)."""
    gained_on_nothing: int
    """GAINED on one carrying none (optimistic)."""
    no_gain_on_evidence: int
    """NO_GAIN on one carrying evidence (premature)."""
    no_gain_on_nothing: int
    """NO_GAIN on one carrying none (right)."""


def gain_tag_rows(
    con: duckdb.DuckDBPyConnection, bench_run_ids: Sequence[str] = (), *, case_run_ids: Sequence[str] | None = None
) -> tuple[GainTagRow, ...]:
    """Per case run with at least one judged tag: the four cells of its confusion (tags by the agent on completed
    calls whose truth is known; the Harness's own NO_GAIN, on empty results and duplicates, is not the agent's)."""
    ids = _case_runs(con, bench_run_ids, case_run_ids)
    if not ids:
        return ()
    rows = con.execute(
        """
        SELECT t.bench_run_id, c.case_id, b.label, c.no_gain_threshold,
               count(*) FILTER (WHERE t.gain = 'GAINED' AND t.carries_evidence),
               count(*) FILTER (WHERE t.gain = 'GAINED' AND NOT t.carries_evidence),
               count(*) FILTER (WHERE t.gain = 'NO_GAIN' AND t.carries_evidence),
               count(*) FILTER (WHERE t.gain = 'NO_GAIN' AND NOT t.carries_evidence)
        FROM tool_calls t JOIN case_runs c USING (case_run_id) JOIN bench_runs b ON b.bench_run_id = t.bench_run_id
        WHERE list_contains(?, t.case_run_id) AND t.gain_producer = 'AGENT' AND t.carries_evidence IS NOT NULL
        GROUP BY t.bench_run_id, c.case_id, c.epoch, b.label, c.no_gain_threshold
        ORDER BY t.bench_run_id, c.case_id, c.epoch
        """,
        [ids],
    ).fetchall()
    return tuple(
        GainTagRow(str(r[0]), str(r[1]), _s(r[2]), _i(r[3]), int(r[4]), int(r[5]), int(r[6]), int(r[7])) for r in rows
    )


@dataclass(frozen=True, slots=True)
class SweepPoint:
    """One bench run of a sweep and the value of each swept setting it ran at."""

    bench_run_id: str
    """The bench run."""
    settings: tuple[tuple[str, SettingValue], ...]
    """(column, value) per sweepable setting, in declaration order."""


def sweep_points(con: duckdb.DuckDBPyConnection, sweep_id: str) -> tuple[SweepPoint, ...]:
    """Every bench run of a sweep with the sweepable settings its case runs used, in bench run order."""
    names = swept_names()  # the one settings declaration: an allowlist of column names
    cols = ", ".join(f"c.{c}" for c in names)
    rows = con.execute(
        f"SELECT DISTINCT c.bench_run_id, {cols} FROM case_runs c JOIN bench_runs b USING (bench_run_id)"
        " WHERE b.sweep_id = ? ORDER BY 1",
        [sweep_id],
    ).fetchall()
    return tuple(SweepPoint(str(r[0]), tuple(zip(names, r[1:], strict=True))) for r in rows)
