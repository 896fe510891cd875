"""The tag probe: a model's GAINED / NO_GAIN on every non-empty observation of a case's reference trajectory.

A run's gain tags exist only where the model's own search took it, and a model that drafts right after its first
non-empty observation gives one tag per run at most. The probe asks for every observation instead: for each step of
the reference trajectory whose observation the Harness asks the model to evaluate, one run replays the reference's
calls up to and including that step — teacher-forced: the reference's own calls, each answered by the real tools
through the real Harness session, so the conversation, the envelope and the prompt are exactly what a run at that
point would show — and makes one model call. What the model answers is read as the Harness reads it: a tool call's
`previous_observation` is applied (or rejected) by the interceptor, a final message is read as a Draft.

Each probe is a run of its own (its own session, budgets and deadline, its one model call in the transcript): the
reference's calls are the conversation's history, not model calls.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from harness import (
    CancellationToken,
    ChatMessage,
    ChatModel,
    DeadlineClock,
    GainApplied,
    GainProducer,
    HarnessConfig,
    HarnessSession,
    InformationGain,
    JsonValue,
    RunContext,
    ToolMessage,
    parse_draft,
)
from runners.domain.case_run import CaseRun
from runners.domain.case_setup import build_tools, task_of
from runners.domain.evalset import EvalCase
from runners.domain.probe_answers import ProbeAnswer
from runners.domain.prompt import BENCH_SYSTEM_PROMPT
from runners.domain.scripted import next_turn, step_call_ids
from runners.plan.bench_config import request_checks
from runners.run.case_runner import evidence_calls, metrics_of
from runners.run.verdict import verdicts

__all__ = ["ProbeAnswer", "ProbePoint", "ProbeRun", "probe", "probe_points"]


@dataclass(frozen=True, slots=True)
class ProbePoint:
    """One observation of a reference trajectory the model is asked to evaluate."""

    case_id: str
    """The case."""
    step: int
    """The reference step (1-based) whose observation is evaluated."""
    tool_call_id: str
    """The id of that step's call in the teacher-forced conversation."""


@dataclass(frozen=True, slots=True)
class ProbeRun:
    """One probe: the model's answer at one point, and the run that asked it."""

    point: ProbePoint
    """Where the model was asked."""
    answer: ProbeAnswer
    """What kind of answer it gave."""
    tag: InformationGain | None
    """The tag the Harness applied from the model's envelope (TAGGED only)."""
    implied: InformationGain | None
    """What a Draft implies (GAINED with a conclusion, NO_GAIN without); None otherwise."""
    run: CaseRun
    """The probe's run (one model call), stored like any case run."""


def _context(config: HarnessConfig | None, cancellation: CancellationToken | None,
             deadline_clock: DeadlineClock | None) -> RunContext:  # fmt: skip
    cfg = config or HarnessConfig()
    return RunContext.create(cfg, cancellation=cancellation, deadline_clock=deadline_clock,
                             request_checks=request_checks(cfg))  # fmt: skip


def _forced(case: EvalCase, session: HarnessSession, until: int | None) -> tuple[list[ChatMessage], list[ProbePoint]]:
    """Play the reference's calls through `session` (real tools, real envelope) until step `until`'s observation is
    in the conversation (None: the whole trajectory); the conversation, and every step whose observation the
    Harness asked the model to evaluate, in order."""
    traj = case.trajectory
    messages = session.initial_messages(task_of(case))
    points: list[ProbePoint] = []
    seen: set[int] = set()
    while not session.ended:
        turn = next_turn(traj, messages)
        if not turn.tool_calls:
            break
        session.turns += 1  # an assistant message of the conversation: the tracker numbers turns by it
        messages.append(turn)
        answers = session.handle_tool_calls(turn.tool_calls)
        texts = {a.tool_call_id: a.observation.text for a in answers.answers}
        messages.extend(ToolMessage(a.tool_call_id, a.observation.text) for a in answers.answers)
        for step, call_id in sorted(step_call_ids(traj, messages).items()):
            if step in seen or call_id not in texts:
                continue
            seen.add(step)
            if _evaluation_required(texts[call_id]):
                points.append(ProbePoint(case.id, step, call_id))
                if step == until:
                    return messages, points
        if answers.ended:
            break
    return messages, points


def _evaluation_required(text: str) -> bool:
    try:
        data = json.loads(text)
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("evaluation_required") is True


@dataclass(frozen=True, slots=True)
class StepObservation:
    """What one step of a reference trajectory got back, played through the Harness on the case's fixtures."""

    step: int
    """The step (1-based)."""
    tool: str
    """The tool it called."""
    records: tuple[dict[str, JsonValue], ...]
    """The records the backend returned (none for an empty, failed or rejected call)."""
    evaluated: bool
    """The Harness asked the model to evaluate it (a non-empty observation)."""


def step_observations(case: EvalCase, config: HarnessConfig | None = None) -> tuple[StepObservation, ...]:
    """Every step of the case's reference trajectory the reference reached, with the records its call returned."""
    ctx = _context(config, None, None)
    session = HarnessSession(build_tools(case), model_name="reference", ctx=ctx, system_prompt=BENCH_SYSTEM_PROMPT)
    messages, points = _forced(case, session, None)
    evaluated = {p.step for p in points}
    out: list[StepObservation] = []
    for step, call_id in sorted(step_call_ids(case.trajectory, messages).items()):
        stored = ctx.store.read(call_id).record
        result = stored.result if stored is not None else None
        records = tuple(dict(r) for r in result.records) if result is not None else ()
        out.append(StepObservation(step, case.trajectory.steps[step - 1].tool, records, step in evaluated))
    return tuple(out)


def probe_points(case: EvalCase, config: HarnessConfig | None = None) -> tuple[ProbePoint, ...]:
    """Every step of the case's reference trajectory whose observation the Harness asks the model to evaluate."""
    session = HarnessSession(build_tools(case), model_name="reference", ctx=_context(config, None, None),
                             system_prompt=BENCH_SYSTEM_PROMPT)  # fmt: skip
    return tuple(_forced(case, session, None)[1])


def probe(
    case: EvalCase,
    step: int,
    model: ChatModel,
    *,
    config: HarnessConfig | None = None,
    cancellation: CancellationToken | None = None,
    deadline_clock: DeadlineClock | None = None,
) -> ProbeRun:
    """Ask `model` for its next message right after step `step`'s observation of the case's reference trajectory
    (teacher-forced up to there), and read the answer as the Harness does. Raises ValueError when the step is not
    one of the case's probe points."""
    ctx = _context(config, cancellation, deadline_clock)
    session = HarnessSession(build_tools(case), model_name=model.name, ctx=ctx, system_prompt=BENCH_SYSTEM_PROMPT)
    messages, points = _forced(case, session, step)
    point = next((p for p in points if p.step == step), None)
    if point is None:
        raise ValueError(f"case {case.id}: step {step} is not an observation the model is asked to evaluate")
    turn = session.complete(model, messages)
    answer, implied = ProbeAnswer.NO_ANSWER, None
    if turn.message is not None:
        messages.append(turn.message)
        if turn.message.tool_calls:
            before = len(session.events)
            outcome = session.handle_tool_calls(turn.message.tool_calls)
            messages.extend(ToolMessage(a.tool_call_id, a.observation.text) for a in outcome.answers)
            answer = ProbeAnswer.UNTAGGED
        else:
            parsed = parse_draft(turn.message.content)  # read, not received: no SemanticGuard call for a probe
            if parsed.draft is None:
                answer = ProbeAnswer.INVALID_DRAFT
            else:
                answer = ProbeAnswer.DRAFT
                concluded = bool(parsed.draft.conclusion and parsed.draft.conclusion.strip())
                implied = InformationGain.GAINED if concluded else InformationGain.NO_GAIN
    tag = None
    if answer is ProbeAnswer.UNTAGGED:
        tag = next((e.gain for e in session.events[before:] if isinstance(e, GainApplied)
                    and e.tool_call_id == point.tool_call_id and e.producer is GainProducer.AGENT), None)  # fmt: skip
        if tag is not None:
            answer = ProbeAnswer.TAGGED
    result = session.finish(question=case.question, guard_model=model, messages=messages)
    metrics = metrics_of(result)
    judged = verdicts(case, result, metrics, judge_trajectory=False, judge_invariants=False)
    return ProbeRun(
        point, answer, tag, implied, CaseRun(case, result, metrics, judged, evidence_calls(case, result, ctx))
    )


def probe_all(cases: Sequence[EvalCase], config: HarnessConfig | None = None) -> tuple[ProbePoint, ...]:
    """Every probe point of `cases`, case by case in order."""
    return tuple(p for case in cases for p in probe_points(case, config))
