"""The stored runs a counterfactual replays (`whatif`, `compare-stops`, the real-models report), as named queries
returning typed rows: which labels and bench runs exist, and every selected case run with what its replay needs — the
thresholds and budgets it ran under, its published outcome, its final diagnosis message (the Draft, when transcripts
were stored) and its trace as typed events. Parameters, never SQL text, cross this boundary."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from harness import HarnessControl, TraceEvent
from runners.store.catalog import has_table
from runners.store.events import read_bench_run_events

__all__ = [
    "ReplayableRun", "UnknownLimitsError", "bench_run_exists", "label_exists", "runs_of_bench_run", "runs_of_label",
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class ReplayableRun:
    """One stored case run, with what a what-if replay of it reads."""

    case_run_id: str
    """The case run."""
    bench_run_id: str
    """Its bench run."""
    case_id: str
    """The evaluation case."""
    epoch: int
    """Its epoch."""
    no_gain_threshold: int | None
    """The consecutive-NO_GAIN threshold it ran with (None: not recorded — another agent's run)."""
    protocol_violation_threshold: int | None
    """The consecutive-violation threshold it ran with (None: not recorded — another agent's run)."""
    max_tool_invocations: int | None
    """Its tool-invocation budget (None: not recorded — another agent's run)."""
    max_model_calls: int | None
    """Its model-call budget (None: not recorded — another agent's run)."""
    max_total_tokens: int | None
    """Its token budget (None: not recorded — another agent's run)."""
    outcome: str
    """The published outcome (a `ReleaseOutcome` value)."""
    transcripts: bool
    """Whether its bench run stored transcripts (without them the Draft is not known)."""
    final_message: str | None
    """The content of its last diagnosis-loop assistant message (the Draft, if it wrote one); None when none is
    stored."""
    events: tuple[TraceEvent, ...]
    """Its trace, in order (empty: none stored)."""
    expected_outcome: str | None = None
    """Its case's expected outcome (None: an imported run, held to no expectation)."""
    expected_fallback_kind: str | None = None
    """Its case's expected fallback kind."""
    fallback_kind: str | None = None
    """The fallback kind it published."""
    outcome_passed: bool | None = None
    """The outcome verdict (None: not judged, or stored before there were two verdicts)."""
    agent: str | None = None
    """The loop it ran under (`native`, `plain`, …; None: native, stored before the column existed)."""
    ablate: HarnessControl | None = None
    """The Harness control it ran with switched off (None or `NONE`: every control on; None: stored before the column
    existed)."""
    alternative_outcome: str | None = None
    """What a model without its case's mistake publishes, when the case says (the case file's `without_mistake`; not
    stored with the run: None unless a caller read it from the case)."""
    alternative_fallback_kind: str | None = None
    """That alternative's fallback kind."""

    def passing_outcomes(self) -> tuple[tuple[str, str | None], ...]:
        """The (outcome, fallback kind) pairs its case's outcome verdict accepts without reading a conclusion."""
        if self.expected_outcome is None:
            return ()
        primary = (self.expected_outcome, self.expected_fallback_kind)
        if self.alternative_outcome is None:
            return (primary,)
        return (primary, (self.alternative_outcome, self.alternative_fallback_kind))


def bench_run_exists(con: duckdb.DuckDBPyConnection, bench_run_id: str) -> bool:
    """Whether a bench run of that id is stored."""
    return con.execute("SELECT 1 FROM bench_runs WHERE bench_run_id = ?", [bench_run_id]).fetchone() is not None


def label_exists(con: duckdb.DuckDBPyConnection, label: str) -> bool:
    """Whether a case run of that label is stored."""
    return con.execute("SELECT 1 FROM case_runs WHERE label = ? LIMIT 1", [label]).fetchone() is not None


def runs_of_bench_run(con: duckdb.DuckDBPyConnection, db: str, bench_run_id: str) -> tuple[ReplayableRun, ...]:
    """The newest case run of each (case, epoch) of one bench run (a resumed run may hold two), by case and epoch."""
    return _runs(con, db, "c.bench_run_id = ?", [bench_run_id])


def runs_of_label(con: duckdb.DuckDBPyConnection, db: str, label: str) -> tuple[ReplayableRun, ...]:
    """The newest case run of each (bench run, case, epoch) of a label, by bench run, case and epoch."""
    return _runs(con, db, "c.label = ?", [label])


class UnknownLimitsError(ValueError):
    """A selected case run does not record the thresholds and budgets it ran under (one line, exit 2)."""


_PLAIN = "plain"
"""`bench_runs.agent` of a run no Harness drove (`runners.plan.agent.AgentFramework.PLAIN`)."""


def _int(value: object) -> int | None:
    return None if value is None else int(str(value))


# `where` is one of the two fixed filters above, never text from a caller.
_RUNS = """
    WITH newest AS (
        SELECT c.*, row_number() OVER (PARTITION BY c.bench_run_id, c.case_id, c.epoch
                                       ORDER BY c.finished_at DESC, c.case_run_id DESC) AS k
        FROM case_runs c WHERE {where}
    )
    SELECT n.case_run_id, n.bench_run_id, n.case_id, n.epoch, n.no_gain_threshold, n.protocol_violation_threshold,
           n.max_tool_invocations, n.max_model_calls, n.max_total_tokens, n.outcome, coalesce(b.transcripts, false),
           n.expected_outcome, n.expected_fallback_kind, n.fallback_kind, n.outcome_passed, b.agent, n.ablate
    FROM newest n JOIN bench_runs b USING (bench_run_id)
    WHERE n.k = 1 ORDER BY b.started_at, n.bench_run_id, n.case_id, n.epoch
"""

_FINAL_MESSAGES = """
    SELECT case_run_id, arg_max(content, seq) FROM messages
    WHERE purpose = 'DIAGNOSIS' AND kind = 'ASSISTANT' AND list_contains(?, case_run_id)
    GROUP BY case_run_id
"""


def _runs(con: duckdb.DuckDBPyConnection, db: str, where: str, params: list[object]) -> tuple[ReplayableRun, ...]:
    rows = con.execute(_RUNS.format(where=where), params).fetchall()
    # a run imported from a trace that did not say the limits it ran under (another agent's run, stored as the
    # plain loop, has none: it is compared on caps and loop detectors only)
    unknown = next((r for r in rows if any(v is None for v in r[4:9]) and r[15] != _PLAIN), None)
    if unknown is not None:
        raise UnknownLimitsError(
            f"{db}: case run {unknown[0]} has no recorded thresholds and budgets (imported from a trace without"
            " harness.config.* attributes): its what-if cannot be known"
        )
    ids = [str(r[0]) for r in rows]
    finals: dict[str, str | None] = {}
    if ids and has_table(con, "messages"):
        for case_run_id, content in con.execute(_FINAL_MESSAGES, [ids]).fetchall():
            finals[str(case_run_id)] = None if content is None else str(content)
    events: dict[str, tuple[TraceEvent, ...]] = {}
    for bench_run_id in dict.fromkeys(str(r[1]) for r in rows):
        events.update(read_bench_run_events(con, db, bench_run_id))
    return tuple(
        ReplayableRun(
            case_run_id=str(r[0]),
            bench_run_id=str(r[1]),
            case_id=str(r[2]),
            epoch=int(r[3]),
            no_gain_threshold=_int(r[4]),
            protocol_violation_threshold=_int(r[5]),
            max_tool_invocations=_int(r[6]),
            max_model_calls=_int(r[7]),
            max_total_tokens=_int(r[8]),
            outcome=str(r[9]),
            transcripts=bool(r[10]),
            final_message=finals.get(str(r[0])),
            events=events.get(str(r[0]), ()),
            expected_outcome=None if r[11] is None else str(r[11]),
            expected_fallback_kind=None if r[12] is None else str(r[12]),
            fallback_kind=None if r[13] is None else str(r[13]),
            outcome_passed=None if r[14] is None else bool(r[14]),
            agent=None if r[15] is None else str(r[15]),
            ablate=None if r[16] is None else HarnessControl(str(r[16])),
        )
        for r in rows
    )
