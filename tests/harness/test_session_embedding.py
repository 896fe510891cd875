"""An embedder's own loop over HarnessSession gets exactly what run_diagnosis gets: the same case_runs
row, tool_calls rows and event kinds, on every built-in case's scripted trajectory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from harness import (
    BusinessTool,
    ChatModel,
    DiagnosisTask,
    EventKind,
    HarnessSession,
    ModelCall,
    RunContext,
    RunResult,
    ToolMessage,
)
from runners.domain.evalset import load_cases
from runners.run.case_runner import CaseRun, run_case
from runners.store.schema import TOOL_CALL_COLUMNS, case_run_rows

CASES = load_cases()
_TIMING = {"wall_ms", "finished_at"}


def plain_loop(
    task: DiagnosisTask,
    tools: Sequence[BusinessTool[Any]],
    model: ChatModel,
    *,
    ctx: RunContext,
    guard_model: ChatModel | None,
    system_prompt: str,
) -> RunResult:
    """What an embedder writes: its own message list and loop, every decision left to the session."""
    session = HarnessSession(tools, model_name=model.name, ctx=ctx, system_prompt=system_prompt)
    history = session.initial_messages(task)
    for _ in range(1000):  # the embedder's own bound; the session ends the loop long before
        turn = session.complete(model, history)
        if turn.message is None:
            break
        if turn.final:
            session.receive_final(turn.message.content)
            break
        history.append(turn.message)
        for answer in session.handle_tool_calls(turn.message.tool_calls).answers:
            history.append(ToolMessage(answer.tool_call_id, answer.observation.text))
        if session.ended:
            break
    return session.finish(question=task.question, guard_model=guard_model or model, messages=history)


def _rows(run: CaseRun) -> tuple[dict[str, Any], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    rows = case_run_rows("br", "cr", "scripted", None, 1, {}, run)
    case_row, event_rows = rows.case_run, rows.events
    tool_rows = [r.cells() for r in rows.tool_calls]
    return (
        {k: v for k, v in case_row.items() if k not in _TIMING},
        [tuple(v for i, v in enumerate(r) if i != TOOL_CALL_COLUMNS.index("latency_ms")) for r in tool_rows],
        [(r[2], r[3]) for r in event_rows],  # seq, kind
    )


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_an_embedders_loop_gets_the_same_rows_as_run_diagnosis(case: Any) -> None:
    native = run_case(case)
    embedded = run_case(case, loop=plain_loop)
    assert _rows(embedded) == _rows(native)
    assert embedded.passed == native.passed


def test_the_session_counts_model_calls_and_emits_run_started() -> None:
    """What the pieces alone never gave an embedder: RUN_STARTED, MODEL_CALL events and model_calls."""
    run = run_case(CASES[0], loop=plain_loop)
    kinds = [e.kind for e in run.result.events]
    assert kinds[0] is EventKind.RUN_STARTED and kinds[-1] is EventKind.RELEASED
    calls = [e for e in run.result.events if isinstance(e, ModelCall)]
    usage = run.result.usage
    assert usage.model_calls >= 1 and len(calls) == usage.model_calls + usage.guard_calls
