"""Structure, never content: the invariants every live run must satisfy, checked on what the metrics database
stored (one Release per run, within budgets, no run past its deadline + 1 s, no duplicate reaching the backend,
case_runs / tool_calls / events agreeing), and the log line of what the model did.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from runners.live.sizing import DEADLINE_SLACK_S
from runners.store.live_invariants import LiveFigures, live_structure

__all__ = ["check_structure", "format_figures"]

_OUTCOMES = ("SUCCESS", "FALLBACK", "FAILED", "CANCELLED")
"""The outcomes a released case run may have."""


def check_structure(db: Path, bench_run_ids: Sequence[str], deadline_s: float) -> list[str]:
    """Every structural invariant the live runs must satisfy; returns the violations."""
    if not bench_run_ids:
        return []
    facts = live_structure(db, bench_run_ids)
    problems: list[str] = []
    for b in facts.budgets:
        if b.outcome not in _OUTCOMES:
            problems.append(f"{b.case_run_id}: outcome {b.outcome!r}")
        if b.model_calls > b.max_model_calls or b.tool_invocations > b.max_tool_invocations:
            problems.append(
                f"{b.case_run_id}: over budget ({b.model_calls} model calls, {b.tool_invocations} tool invocations)"
            )
        if b.wall_ms > (deadline_s + DEADLINE_SLACK_S) * 1000:
            problems.append(f"{b.case_run_id}: {b.wall_ms / 1000:.1f} s, past its {deadline_s:.0f} s deadline + 1 s")
    for r in facts.released:
        if r.released != 1:
            problems.append(f"{r.case_run_id}: {r.released} RELEASED events")
    for d in facts.duplicates:
        problems.append(
            f"{d.case_run_id}: {d.tool} scope executed {d.executions} times (a duplicate reached the backend)"
        )
    for case_run_id in facts.disagreeing:
        problems.append(f"{case_run_id}: case_runs, tool_calls and events disagree")
    return problems


def format_figures(mode: str, f: LiveFigures) -> str:
    """One log line of figures."""
    med = f["median_call_ms"] or 0
    return (
        f"tool_choice={mode}: {f['runs']} runs | >=1 backend call {f['with_backend_call']} | judged GAINED/NO_GAIN "
        f"{f['judged']} ({f['gained_judgements']} GAINED, {f['no_gain_judgements']} NO_GAIN) | saturated "
        f"{f['saturated']} (STOP_REQUIRED delivered {f['stop_required']}) | valid Draft {f['valid_draft']} | "
        f"{f['model_calls']} model calls (answered: median {med / 1000:.1f} s), {f['tool_invocations']} backend calls, "
        f"{f['rejections']} rejections ({f['violations']} protocol violations) | longest run "
        f"{f['max_wall_ms'] / 1000:.0f} s | {f['outcomes']}"
    )
