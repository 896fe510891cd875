"""Transcripts as data: a case run's conversation in the `messages` table, and reading it back.

Rows come from the run's transcript (recorded at the model-call boundary, harness/transcript.py) and
its trace: beside every tool call, the Harness's decision on it (admitted or rejected, why, the scope,
the gain applied to it, STOP_REQUIRED, the budget state after it); after the conversation, every
guard verdict. System and user prompts are stored once, by hash, in `prompts`.

Secrets never land in the table: the writer (runners/store/writer.py `MetricsWriter`) passes every row
through the bench's one redaction (runners/domain/redaction.py), as it does every other table's rows.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import duckdb

from harness import (
    BudgetExhausted,
    EntryKind,
    EvidenceChecked,
    GainApplied,
    GuardVerdict,
    ModelCall,
    ModelPurpose,
    RunResult,
    StopRequiredDelivered,
    ToolInvocation,
    ToolRequestRejected,
    TraceEvent,
)
from runners.domain.redaction import REDACTED
from runners.domain.suggest import did_you_mean
from runners.store._host import attach
from runners.store.catalog import has_table
from runners.store.diagnosis_reads import FunnelRow, funnel_rows

__all__ = [
    "GUARD_VERDICT",
    "MESSAGE_COLUMNS",
    "REDACTED",
    "CaseRunInfo",
    "Message",
    "TranscriptError",
    "TranscriptProblem",
    "check_against_requests",
    "load_case_run",
    "load_case_runs",
    "observations",
    "resolve_case_run",
    "transcript_rows",
]

MESSAGE_COLUMNS = [
    "bench_run_id", "case_run_id", "seq", "purpose", "kind", "model_call", "content", "prompt_hash", "tool_call_id",
    "tool", "arguments", "sent", "input_tokens", "output_tokens", "finish_reason", "error_kind", "harness_call_id",
    "invocation_status", "evidence_status", "rejection", "violation", "decision_detail", "scope", "gain",
    "gain_producer", "stop_required", "budget_hit", "used_model_calls", "used_tool_invocations", "used_tokens",
    "guard", "verdict",
]  # fmt: skip
GUARD_VERDICT = "GUARD_VERDICT"
"""The `kind` of a guard-verdict row (EvidenceGuard or SemanticGuard), after the conversation."""
_PROMPT_KINDS = (EntryKind.TOOLS, EntryKind.SYSTEM, EntryKind.USER)
"""Texts many case runs share, stored once by hash (the tools offered, the system prompt, a question)."""


def _v(x: Any) -> Any:
    return getattr(x, "value", x)


@dataclass(slots=True)
class _Decision:
    """The Harness's decision on one tool request, assembled from the trace."""

    event: ToolInvocation | ToolRequestRejected
    gain: GainApplied | None = None
    stop_required: bool = False
    budget_hit: str | None = None
    used: tuple[int, int, int] = (0, 0, 0)


def _decisions(events: Sequence[TraceEvent]) -> list[_Decision]:
    """One decision per tool request, in trace order (each call gets exactly one request record)."""
    out: list[_Decision] = []
    by_id: dict[str, _Decision] = {}
    gains: dict[str, GainApplied] = {}
    calls = tools = tokens = 0
    for e in events:
        match e:
            case ModelCall():
                calls += e.purpose is ModelPurpose.DIAGNOSIS
                tokens += (e.input_tokens or 0) + (e.output_tokens or 0)
            case ToolInvocation() | ToolRequestRejected():
                tools += isinstance(e, ToolInvocation)
                d = _Decision(e, used=(calls, tools, tokens))
                out.append(d)
                by_id[e.tool_call_id] = d
            case GainApplied():
                gains[e.tool_call_id] = e
            case StopRequiredDelivered() if e.tool_call_id in by_id:
                by_id[e.tool_call_id].stop_required = True
            case BudgetExhausted() if e.tool_call_id is not None and e.tool_call_id in by_id:
                by_id[e.tool_call_id].budget_hit = _v(e.budget)
    for d in out:
        d.gain = gains.get(d.event.tool_call_id)
    return out


def prompt_hash(text: str) -> str:
    """The key of a stored prompt."""
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def transcript_rows(
    bench_run_id: str, case_run_id: str, result: RunResult
) -> tuple[list[tuple[Any, ...]], dict[str, str]]:
    """The `messages` rows of one case run and the prompts they name (as the model saw them: the writer
    redacts them)."""
    rows: list[tuple[Any, ...]] = []
    prompts: dict[str, str] = {}
    decisions = iter(_decisions(result.events))
    seq = 0
    for e in result.transcript:
        content = e.content
        key = None
        if e.kind in _PROMPT_KINDS and content is not None and len(content) > 64:
            key = prompt_hash(content)
            prompts[key] = content
            content = None
        head = (bench_run_id, case_run_id, seq, e.purpose.value, e.kind.value, e.model_call, content, key,
                e.tool_call_id, e.tool, e.arguments, e.sent, e.input_tokens,
                e.output_tokens, e.finish_reason, _v(e.error_kind))  # fmt: skip
        d = next(decisions, None) if e.kind is EntryKind.TOOL_CALL else None
        if d is None:
            rows.append((*head, *(None,) * 14, None, None))
        else:
            ev, g = d.event, d.gain
            if isinstance(ev, ToolInvocation):
                evidence, rejection, violation = _v(ev.evidence_status), None, None
            else:
                evidence, rejection, violation = None, _v(ev.rejection), _v(ev.violation)
            rows.append((
                *head, ev.tool_call_id, _v(ev.invocation_status), evidence, rejection,
                violation, ev.detail, ev.scope, _v(g.gain) if g else None,
                _v(g.producer) if g else None, d.stop_required, d.budget_hit, *d.used, None, None,
            ))  # fmt: skip
        seq += 1
    for verdict in result.events:
        if isinstance(verdict, EvidenceChecked | GuardVerdict):
            rows.append((
                bench_run_id, case_run_id, seq, ModelPurpose.SEMANTIC_GUARD.value, GUARD_VERDICT, None,
                verdict.detail, *(None,) * 23, _v(verdict.guard), _v(verdict.verdict),
            ))  # fmt: skip
            seq += 1
    return rows, prompts


# -- reading back ---------------------------------------------------------------------------------
class TranscriptProblem(StrEnum):
    """Why a transcript cannot be shown."""

    UNKNOWN_CASE_RUN = "UNKNOWN_CASE_RUN"
    UNKNOWN_BENCH_RUN = "UNKNOWN_BENCH_RUN"
    UNKNOWN_LABEL = "UNKNOWN_LABEL"
    UNKNOWN_CASE = "UNKNOWN_CASE"
    OLDER_SCHEMA = "OLDER_SCHEMA"
    NOT_STORED = "NOT_STORED"


class TranscriptError(ValueError):
    """A transcript cannot be found or was never stored (exit 2); the message says how to get it."""

    def __init__(self, problem: TranscriptProblem, message: str) -> None:
        super().__init__(message)
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Message:
    """One stored transcript row, prompts resolved."""

    seq: int
    """Order within the case run."""
    purpose: str
    """DIAGNOSIS or SEMANTIC_GUARD."""
    kind: str
    """SYSTEM, USER, ASSISTANT, TOOL_CALL, OBSERVATION, MODEL_ERROR or GUARD_VERDICT."""
    model_call: int | None
    """The model call attempt that sent or produced it."""
    content: str | None
    """The text."""
    fields: dict[str, Any]
    """Every other column (tool, arguments, the Harness's decision, usage)."""

    def get(self, name: str) -> Any:
        """A column's value (None when absent)."""
        return self.fields.get(name)


@dataclass(frozen=True, slots=True)
class CaseRunInfo:
    """A case run's identity, verdict and transcript."""

    case_run_id: str
    """Its id."""
    row: dict[str, Any]
    """Its `case_runs` row."""
    bench: dict[str, Any]
    """Its bench run's row."""
    messages: tuple[Message, ...]
    """The transcript, in order."""
    funnel: FunnelRow | None = None
    """What its diagnosis funnel reads (None: a file written before there were two verdicts)."""


def _rerun(case_id: str, db: str, bench_row: dict[str, Any] | None = None, epoch: int = 1) -> str:
    """The command that runs the case again with its transcript: derived from its bench run's stored plan (the
    evaluation files, model, label and settings it was run with), else the case and database alone."""
    from runners.plan.stored_plan import rerun_argv

    argv = rerun_argv(bench_row, db, case_id, epoch) if bench_row else None
    return shlex.join(argv) if argv else f"harness-bench run --case {case_id} --db {db}"


def resolve_case_run(
    con: duckdb.DuckDBPyConnection, db: str, *, bench_run: str | None = None, label: str | None = None,
    case: str, epoch: int | None = None,
) -> str:  # fmt: skip
    """The case run id of `case` (epoch `epoch`, default the first) in a bench run, or for a label the newest
    case run of that case and epoch under it (the one the gate pairs)."""
    if bench_run is None:
        if not con.execute("SELECT 1 FROM case_runs WHERE label IS NOT DISTINCT FROM ? LIMIT 1", [label]).fetchone():
            raise TranscriptError(
                TranscriptProblem.UNKNOWN_LABEL, f"{label!r} is neither a bench run id nor a label in {db}"
            )
        where, key = "label IS NOT DISTINCT FROM ?", label
    else:
        if not con.execute("SELECT 1 FROM bench_runs WHERE bench_run_id = ?", [bench_run]).fetchone():
            raise TranscriptError(
                TranscriptProblem.UNKNOWN_BENCH_RUN, f"--bench-run {bench_run}: no such bench run in {db}"
            )
        where, key = "bench_run_id = ?", bench_run
    what = f"bench run {bench_run}" if bench_run is not None else f"label {label!r}"
    runs = con.execute(
        f"SELECT case_run_id, epoch FROM case_runs WHERE {where} AND case_id = ? ORDER BY epoch, finished_at DESC",
        [key, case],
    ).fetchall()
    if not runs:
        raise TranscriptError(TranscriptProblem.UNKNOWN_CASE, f"--case {case}: {what} has no case run of it")
    for run_id, e in runs:
        if epoch is None or e == epoch:
            return str(run_id)
    epochs = ", ".join(dict.fromkeys(str(e) for _, e in runs))
    raise TranscriptError(TranscriptProblem.UNKNOWN_CASE, f"--epoch {epoch}: case {case} of {what} has epochs {epochs}")


def latest_bench_run_of_case(con: duckdb.DuckDBPyConnection, db: str, case: str) -> tuple[str, int]:
    """The newest bench run holding a case run of `case`, and how many bench runs hold one (`show --case` without
    `--bench-run` or `--label` shows the only or the latest run, as a user who just ran one expects)."""
    rows = con.execute(
        "SELECT c.bench_run_id, max(b.started_at) AS started FROM case_runs c JOIN bench_runs b USING (bench_run_id)"
        " WHERE c.case_id = ? GROUP BY c.bench_run_id ORDER BY started DESC NULLS LAST, c.bench_run_id DESC",
        [case],
    ).fetchall()
    if not rows:
        known = [str(r[0]) for r in con.execute("SELECT DISTINCT case_id FROM case_runs").fetchall()]
        raise TranscriptError(
            TranscriptProblem.UNKNOWN_CASE, f"--case {case}: no run of it in {db}{did_you_mean(case, known)}"
        )
    return str(rows[0][0]), len(rows)


def _dicts(cur: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    names = [d[0] for d in cur.description or ()]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def load_case_run(con: duckdb.DuckDBPyConnection, db: str, case_run_id: str) -> CaseRunInfo:
    """A case run and its transcript; a missing id or transcript is a TranscriptError naming the fix."""
    return load_case_runs(con, db, [case_run_id])[0]


def load_case_runs(con: duckdb.DuckDBPyConnection, db: str, case_run_ids: Sequence[str]) -> list[CaseRunInfo]:
    """Each case run of `case_run_ids` with its transcript, in that order, in five queries whatever their number (an
    export reads every run of a bench run: each query's fixed cost was most of reading one); the first that is
    missing or has no transcript is a TranscriptError, as `load_case_run` gives it for that run alone."""
    ids = list(case_run_ids)
    where, value = _matching("case_run_id", ids)
    rows = {str(r["case_run_id"]): r for r in _dicts(con.execute(f"SELECT * FROM case_runs WHERE {where}", [value]))}
    where, value = _matching("bench_run_id", sorted({str(r["bench_run_id"]) for r in rows.values()}))
    benches = {str(b["bench_run_id"]): b for b in _dicts(con.execute(f"SELECT * FROM bench_runs WHERE {where}",
                                                                      [value]))}  # fmt: skip
    with_messages = has_table(con, "messages")
    found: dict[str, list[dict[str, Any]]] = {}
    if with_messages:
        where, value = _matching("m.case_run_id", ids)
        for m in _dicts(con.execute(
            "SELECT m.*, coalesce(m.content, p.content) AS text FROM messages m LEFT JOIN prompts p"
            f" USING (prompt_hash) WHERE {where} ORDER BY m.case_run_id, m.seq", [value],
        )):  # fmt: skip
            found.setdefault(str(m["case_run_id"]), []).append(m)
    for case_run_id in ids:  # the first run that cannot be read, with the reason it alone would be refused for
        _check_readable(db, case_run_id, rows.get(case_run_id), benches, with_messages, case_run_id in found)
    judged = [i for i in dict.fromkeys(ids) if "outcome_passed" in rows[i]]
    funnel = {f.case_run_id: f for f in funnel_rows(con, case_run_ids=judged)} if judged else {}
    base = {"bench_run_id", "case_run_id", "seq", "purpose", "kind", "model_call", "content", "text"}
    out = []
    for case_run_id in ids:
        row = rows[case_run_id]
        messages = tuple(
            Message(int(m["seq"]), str(m["purpose"]), str(m["kind"]), m["model_call"], m["text"],
                    {k: v for k, v in m.items() if k not in base and v is not None})
            for m in found[case_run_id]
        )  # fmt: skip
        out.append(CaseRunInfo(case_run_id, row, benches.get(str(row["bench_run_id"]), {}), messages,
                               funnel.get(case_run_id)))  # fmt: skip
    return out


def _matching(column: str, ids: Sequence[str]) -> tuple[str, object]:
    """The condition selecting the rows of `ids` and its parameter: one id compared as itself (what `show` reads: a
    point lookup the table's index and zone maps answer), several joined to the list (an export's runs)."""
    distinct = list(dict.fromkeys(ids))
    if len(distinct) == 1:
        return f"{column} = ?", distinct[0]
    return f"{column} IN (SELECT unnest(?::VARCHAR[]))", distinct


def _check_readable(
    db: str, case_run_id: str, row: dict[str, Any] | None, benches: Mapping[str, dict[str, Any]],
    with_messages: bool, has_messages: bool,
) -> None:  # fmt: skip
    """A TranscriptError naming the fix when the case run is missing or has no transcript."""
    if row is None:
        raise TranscriptError(
            TranscriptProblem.UNKNOWN_CASE_RUN,
            f"no case run {case_run_id!r} in {db} (ids are BENCH_RUN_ID/CASE/EPOCH; or give --bench-run ID --case"
            " CASE)",
        )
    bench_row = benches.get(str(row["bench_run_id"]), {})
    if not with_messages:
        raise TranscriptError(
            TranscriptProblem.OLDER_SCHEMA,
            f"{db} was written before transcripts were stored (no messages table); run the case again to store"
            f" one: {_rerun(row['case_id'], db, bench_row, int(row['epoch'] or 1))}",
        )
    if not has_messages:
        off = bench_row.get("transcripts") is False
        why = "with --no-transcripts" if off else "by a harness-bench written before transcripts were stored"
        again = "without --no-transcripts" if off else "to store one"
        raise TranscriptError(
            TranscriptProblem.NOT_STORED,
            f"case run {case_run_id} has no transcript (its bench run {row['bench_run_id']} was run {why}); run the"
            f" case again {again}: {_rerun(row['case_id'], db, bench_row, int(row['epoch'] or 1))}",
        )


def observations(messages: Iterable[Message]) -> list[str]:
    """The observation texts the model was sent, in order."""
    return [m.content or "" for m in messages if m.kind == EntryKind.OBSERVATION.value and m.get("sent")]


def check_against_requests(db: str | Path, bench_run_ids: Sequence[str], bodies: Sequence[Any]) -> list[str]:
    """Every stored transcript against the chat request bodies an endpoint received (a request log or
    cassette): for each case run, some diagnosis request of the log carries its system and user prompts and,
    as its `tool` messages, exactly the observation texts the transcript says were sent. Returns the
    case runs for which no request matches (an empty list: the transcripts are what the model saw)."""
    sent: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for body in bodies:
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list):
            continue
        head = tuple(str(m.get("content")) for m in messages if m.get("role") in ("system", "user"))
        sent.setdefault(head, []).append(tuple(str(m.get("content")) for m in messages if m.get("role") == "tool"))
    con = attach(str(db), read_only=True)
    problems: list[str] = []
    try:
        ids = [str(r[0]) for r in con.execute(
            "SELECT case_run_id FROM case_runs WHERE bench_run_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY 1",
            [list(bench_run_ids)]).fetchall()]  # fmt: skip
        for case_run_id in ids:
            info = load_case_run(con, str(db), case_run_id)
            diagnosis = [m for m in info.messages if m.purpose == ModelPurpose.DIAGNOSIS.value]
            head = tuple(m.content or "" for m in diagnosis if m.kind in (EntryKind.SYSTEM.value, EntryKind.USER.value))
            stored = tuple(observations(diagnosis))
            if stored not in sent.get(head, []):
                problems.append(
                    f"{case_run_id}: its stored observations ({len(stored)}) are not the tool messages of any"
                    " request the endpoint received"
                )
    finally:
        con.close()
    return problems
