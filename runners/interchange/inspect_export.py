"""`harness-bench export --inspect DIR`: one Inspect AI `.eval` log per stored bench run, written through
Inspect AI's own API (`inspect_ai.log.write_eval_log`), so `inspect view` and `read_eval_log` read it.

One sample per case run (id = case id, epoch = epoch): the transcript as Inspect chat messages, the
case's expectations as target and metadata, outcome / stop reason / pass as scores, each tool call's
Harness decision as sample metadata and as an info event, token usage as model usage.
Inspect AI is an optional extra (`pip install 'harness-bench[inspect]'`; `make venv` installs it).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pydantic_core

from harness import EntryKind, ModelPurpose
from runners.domain.redaction import safe_url
from runners.store.transcripts import GUARD_VERDICT, CaseRunInfo, Message, load_case_runs

__all__ = ["INSPECT_EXTRA", "InspectUnavailable", "export_inspect"]

INSPECT_EXTRA = "pip install 'harness-bench[inspect]'"
TASK = "harness-bench"


class InspectUnavailable(ValueError):
    """Inspect AI is not installed, or nothing matched (exit 2)."""


def _iso(value: Any) -> str:
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
    return datetime.now(UTC).isoformat()


def _arguments(raw: str | None) -> tuple[dict[str, Any], str | None]:
    """The call's arguments as Inspect's dict, or an empty dict and why not with the raw text cut to 500 characters.
    Parsed by pydantic-core, whose nesting limit turns arguments nested deeper than Python's own recursion limit
    allows (a model's `[[[…`) into an error instead of a RecursionError that would stop the whole export."""
    try:
        value = pydantic_core.from_json(raw or "{}")
    except ValueError as exc:
        return {}, f"invalid JSON arguments: {exc}: {raw!r}"[:500]
    if isinstance(value, dict):
        return value, None
    return {}, f"arguments are not a JSON object: {raw!r}"[:500]


def _decision(m: Message) -> dict[str, Any]:
    keys = ("tool", "tool_call_id", "harness_call_id", "invocation_status", "evidence_status", "rejection", "violation",
            "decision_detail", "scope", "gain", "gain_producer", "stop_required", "budget_hit", "used_model_calls",
            "used_tool_invocations", "used_tokens")  # fmt: skip
    return {k: m.get(k) for k in keys if m.get(k) is not None}


def _messages(info: CaseRunInfo, purpose: ModelPurpose) -> list[Any]:
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageTool, ChatMessageUser
    from inspect_ai.tool import ToolCall

    out: list[Any] = []
    assistant: ChatMessageAssistant | None = None
    for m in info.messages:
        if m.purpose != purpose:
            continue
        if m.kind == EntryKind.SYSTEM:
            out.append(ChatMessageSystem(content=m.content or ""))
        elif m.kind == EntryKind.USER:
            out.append(ChatMessageUser(content=m.content or ""))
        elif m.kind == EntryKind.ASSISTANT:
            assistant = ChatMessageAssistant(content=m.content or "", tool_calls=None, model=info.row.get("model"))
            out.append(assistant)
        elif m.kind == EntryKind.TOOL_CALL and assistant is not None:
            args, error = _arguments(m.get("arguments"))
            call = ToolCall(id=m.get("harness_call_id") or m.get("tool_call_id") or "", function=m.get("tool") or "",
                            arguments=args, parse_error=error)  # fmt: skip
            assistant.tool_calls = [*(assistant.tool_calls or []), call]
            assistant.metadata = {**(assistant.metadata or {}), "harness_decisions": [
                *(assistant.metadata or {}).get("harness_decisions", []), _decision(m)]}  # fmt: skip
        elif m.kind == EntryKind.OBSERVATION:
            out.append(ChatMessageTool(content=m.content or "", tool_call_id=m.get("tool_call_id"),
                                       metadata={"sent": m.get("sent") is not False}))  # fmt: skip
        elif m.kind == EntryKind.MODEL_ERROR:
            out.append(ChatMessageAssistant(content=f"[model call failed: {m.get('error_kind')}] {m.content or ''}",
                                            metadata={"model_error": m.get("error_kind")}))  # fmt: skip
    return out


def _sample(info: CaseRunInfo) -> Any:
    from inspect_ai.event import InfoEvent
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ModelOutput, ModelUsage
    from inspect_ai.scorer import Score

    r = info.row
    messages = _messages(info, ModelPurpose.DIAGNOSIS)
    guard = _messages(info, ModelPurpose.SEMANTIC_GUARD)
    question = (
        next((m.content for m in info.messages if m.kind == EntryKind.USER and m.purpose == ModelPurpose.DIAGNOSIS), "")
        or ""
    )
    outcome = r["outcome"] + (f"/{r['fallback_kind']}" if r.get("fallback_kind") else "")
    judged = r["passed"] is not None  # an imported run is observed: held to no expectation, no verdict
    expected = (r["expected_outcome"] or "") + (f"/{r['expected_fallback_kind']}" if r.get("expected_fallback_kind")
                                                else "")  # fmt: skip
    decisions = [_decision(m) for m in info.messages if m.kind == EntryKind.TOOL_CALL]
    verdicts = [{"guard": m.get("guard"), "verdict": m.get("verdict"), "detail": m.content}
                for m in info.messages if m.kind == GUARD_VERDICT]  # fmt: skip
    draft = next(
        (m.content for m in reversed(info.messages)
         if m.kind == EntryKind.ASSISTANT and m.purpose == ModelPurpose.DIAGNOSIS),
        None,
    )  # fmt: skip
    model = str(r.get("model"))
    usage = ModelUsage(input_tokens=int(r.get("input_tokens") or 0), output_tokens=int(r.get("output_tokens") or 0),
                       total_tokens=int(r.get("input_tokens") or 0) + int(r.get("output_tokens") or 0))  # fmt: skip
    failures = json.loads(r["failures"]) if r.get("failures") else []
    scores = {
        "outcome": Score(value=outcome, answer=outcome, explanation=r.get("reason")),
        "stop_reason": Score(value=r.get("stop_reason") or "NONE"),
    }
    if judged:
        scores = {"passed": Score(value="C" if r["passed"] else "I", answer=outcome,
                                  explanation="; ".join(failures) or None), **scores}  # fmt: skip
    events = [InfoEvent(source="harness", data={"decision": d}) for d in decisions]
    events += [InfoEvent(source="harness", data={"guard_verdict": v}) for v in verdicts]
    return EvalSample(
        id=str(r["case_id"]),
        epoch=int(r["epoch"]),
        input=question,
        target=expected,
        messages=messages,
        output=ModelOutput.from_content(model=model, content=draft or ""),
        scores=scores,
        metadata={
            "case_run_id": info.case_run_id,
            "family": r.get("family"),
            "expected": {
                "outcome": r["expected_outcome"],
                "fallback_kind": r.get("expected_fallback_kind"),
                "stop_reason": r.get("expected_stop_reason"),
            },
            "outcome": r["outcome"],
            "fallback_kind": r.get("fallback_kind"),
            "stop_reason": r.get("stop_reason"),
            "failures": failures,
            "harness_decisions": decisions,
            "guard_verdicts": verdicts,
            "semantic_guard_messages": [m.model_dump(mode="json", exclude_none=True) for m in guard],
            "counts": {
                k: r.get(k)
                for k in (
                    "model_calls",
                    "guard_calls",
                    "tool_invocations",
                    "tool_rejections",
                    "protocol_violations",
                    "duplicate_scope_rejections",
                    "no_gain_count",
                )
            },
            "error": r.get("error"),
        },
        events=events,
        model_usage={model: usage},
        total_time=(float(r.get("wall_ms") or 0.0) / 1000.0),
    )


def _bench_runs(con: Any, db: str, bench_run: str | None, label: str | None) -> list[dict[str, Any]]:
    from runners.store.report_reads import bench_run_rows

    runs = [dict(r.columns) for r in bench_run_rows(con, bench_run_id=bench_run, label=label)]
    if not runs:
        what = f"bench run {bench_run!r}" if bench_run else (f"label {label!r}" if label is not None else "bench runs")
        raise InspectUnavailable(f"{db}: no {what} to export (see `harness-bench run`)")
    return runs


def export_inspect(
    db: Path, out: Path, *, bench_run: str | None = None, label: str | None = None
) -> list[tuple[Path, int]]:
    """Write one `.eval` log per selected bench run into `out`; returns (path, samples) per log."""
    try:
        from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalResults, EvalSpec, EvalStats, write_eval_log
        from inspect_ai.model import ModelUsage
        from inspect_ai.viewer import ViewerConfig
    except ImportError:
        raise InspectUnavailable(
            f"export --inspect needs Inspect AI: {INSPECT_EXTRA} (make venv installs it)"
        ) from None
    from runners.store.connection import connect
    from runners.store.runs import case_run_ids_in_order

    con = connect(db, read_only=True)
    try:
        logs = []
        for run in _bench_runs(con, str(db), bench_run, label):
            ids = case_run_ids_in_order(con, run["bench_run_id"])
            if not ids:
                continue
            infos = load_case_runs(con, str(db), ids)  # a run without transcripts: TranscriptError
            logs.append((run, infos))
    finally:
        con.close()
    if not logs:
        raise InspectUnavailable(f"{db}: the selected bench runs hold no case runs")
    from runners.store.output_files import NamedPath, OutputWriteError, check_outputs, replacing

    paths = [out / _log_name(run) for run, _ in logs]
    check_outputs([NamedPath("--inspect", p) for p in paths], [NamedPath("--db", db)])  # before the folder exists
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputWriteError(out, exc) from None
    written = []
    for (run, infos), path in zip(logs, paths, strict=True):
        samples = [_sample(i) for i in infos]
        model = str(infos[0].row.get("model"))
        tokens_in = sum(int(i.row.get("input_tokens") or 0) for i in infos)
        tokens_out = sum(int(i.row.get("output_tokens") or 0) for i in infos)
        passed = sum(bool(i.row["passed"]) for i in infos)
        judged = sum(i.row["passed"] is not None for i in infos)  # imported runs: observed, no verdict
        settings = json.loads(run["settings_json"]) if run.get("settings_json") else {}
        if isinstance(settings.get("base_url"), str):  # a database written before URLs were stored without credentials
            settings["base_url"] = safe_url(settings["base_url"])
        spec = EvalSpec(
            created=_iso(run.get("started_at")), task=TASK, task_id=str(run["bench_run_id"]),
            run_id=str(run["bench_run_id"]), eval_id=str(run["bench_run_id"]).replace("/", "_"),
            dataset=EvalDataset(name=run.get("evalset_hash") or "built-in", samples=len({s.id for s in samples}),
                                sample_ids=sorted({s.id for s in samples})),
            model=model, config=EvalConfig(epochs=int(run.get("epochs") or 1)), task_args=settings,
            metadata={"label": run.get("label"), "sweep_id": run.get("sweep_id"), "git_commit": run.get("git_commit"),
                      "status": run.get("status")},
            # a model's and a case's text is shown as plain text (no Markdown, links, media; bidi visible)
            viewer=ViewerConfig(trust_content=False),
        )  # fmt: skip
        from inspect_ai.log import EvalMetric, EvalScore

        results = EvalResults(
            total_samples=len(samples), completed_samples=len(samples),
            scores=[EvalScore(name="passed", scorer="harness-bench", scored_samples=judged,
                              metrics={"accuracy": EvalMetric(name="accuracy", value=passed / judged)})]
            if judged else [],
        )  # fmt: skip
        stats = EvalStats(
            started_at=_iso(run.get("started_at")), completed_at=_iso(run.get("finished_at")),
            model_usage={model: ModelUsage(input_tokens=tokens_in, output_tokens=tokens_out,
                                           total_tokens=tokens_in + tokens_out)},
        )  # fmt: skip
        status = "success" if run.get("status") == "completed" else "started"
        log = EvalLog(eval=spec, status=status, results=results, stats=stats, samples=samples)
        with replacing(NamedPath("--inspect", path)) as tmp:  # each log whole or absent, also on Ctrl-C
            try:
                write_eval_log(log, str(tmp), format="eval")
            except OSError as exc:  # a full disk, an I/O error: one line naming the log, none of it left
                raise OutputWriteError(path, exc) from None
        written.append((path, len(samples)))
    return written


def _log_name(run: dict[str, Any]) -> str:
    """The .eval file of one bench run: its start time, the task and its id (no `/`)."""
    name = f"{_iso(run.get('started_at'))[:19].replace(':', '-')}_{TASK}_{run['bench_run_id']}.eval"
    return name.replace("/", "_")
