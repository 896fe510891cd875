"""An evaluation case built from a stored case run (`harness-bench capture`), and its YAML (a suite's run: its
declared tools' calls as the case's results, `_capture_suite`).

What the case is made of, and why:

- question and context: parsed back from the user prompt the model was sent (`harness.prompts.render_task`);
- fixtures: the records the run's observations showed (log events, knowledge-base passages as documents),
  and every completed call's result as `fixtures.recorded`, served again for the same scope: the canonical
  records are not stored, the observations are what the model saw, and a BM25 score or a SQL aggregate cannot
  be recomputed from the records it produced. Backend failures become `faults`;
- the trajectory: one step per call the model made (a call answered AWAITING_EVALUATION is the step it is
  sent again as), with the evaluation it carried, its protocol mistake replayed as `mistake:` with
  `on_rejection: skip` (the model's retry is the next step), the Draft with its citations as `@stepN`, and the
  SemanticGuard's verdict;
- expectations: the run's own outcome, stop reason and exact counts. They describe what happened, not what
  should have: the file says to review them.
"""

from __future__ import annotations

import json
import re
import shlex
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pydantic_core
import yaml
from pydantic import BaseModel, ValidationError

from harness import (
    EntryKind,
    EvidenceStatus,
    GuardName,
    InformationGain,
    InvocationStatus,
    JsonValue,
    ModelPurpose,
    RejectionReason,
    ReleaseOutcome,
    Relevance,
    SemanticVerdict,
    ViolationKind,
)
from runners.domain.evalset import TOOL_NAMES, EvalCase, ExpectedStop, Family, FaultKind
from runners.domain.scripted import Mistake, RejectionReaction, StopReaction
from runners.domain.suite import SuiteSpec
from runners.domain.tools.db_query import DbQueryInput, analyse_sql
from runners.domain.tools.kb_search import KbSearchInput
from runners.domain.tools.log_search import LogSearchInput
from runners.interchange._capture_suite import CaptureError, SuiteCall, offered_tables, suite_fields
from runners.run.rule_judge import asserted_words
from runners.store.captured_runs import CapturedMessage, CapturedRun
from runners.store.transcripts import GUARD_VERDICT

__all__ = ["REVIEW", "CaptureError", "build_case", "case_yaml", "replay_argv"]

REVIEW = (
    "expect: the run's own outcome, stop reason and counts, not a judgement of what a correct run does",
    "expect.root_cause: the run's own conclusion as the statement, words taken from it as the facts, no distractors",
    "trajectory: the model's calls, evaluations and Draft as it made them (mistakes included)",
    "fixtures.recorded: each call's result as the run saw it, served again for the same scope",
    "trajectory.steps[].input of a call the run never sent whole: a placeholder (only its length counts)",
    "family and description",
)
"""What a captured case's reviewer must check; written into the file."""

_DIAGNOSIS = ModelPurpose.DIAGNOSIS.value
_CONTEXT_HEAD = "\n\nKnown context:\n"
_NOT_GIVEN = "(not given)"
_MISTAKES = {
    ViolationKind.MISSING_PREVIOUS_OBSERVATION.value: Mistake.MISSING_PREVIOUS_OBSERVATION,
    ViolationKind.WRONG_TOOL_CALL_ID.value: Mistake.WRONG_TOOL_CALL_ID,
    ViolationKind.UNEXPECTED_PREVIOUS_OBSERVATION.value: Mistake.UNEXPECTED_PREVIOUS_OBSERVATION,
    ViolationKind.INVALID_GAIN_VALUE.value: Mistake.INVALID_GAIN_VALUE,
    ViolationKind.UNKNOWN_TOOL.value: Mistake.UNKNOWN_TOOL,
    ViolationKind.INVALID_INPUT.value: Mistake.INVALID_INPUT,
}
"""A violation the Harness reported, as the scripted mistake that makes it (MALFORMED_ENVELOPE: see `_mistake`)."""
_FAULT = re.compile(r"^(?:ToolExecutionError: \w+ backend error|TimeoutError: \w+ backend timed out): (.*)$", re.S)
_PLACEHOLDER: dict[str, dict[str, JsonValue]] = {
    "kb_search": {"query": "input not recorded"},
    "log_search": {"start": "1970-01-01T00:00:00Z", "end": "1970-01-01T00:01:00Z"},
    "db_query": {"sql": "SELECT 1"},
}
"""A valid input for a call whose input the run never sent whole (no JSON, or no `input`, and no retry)."""
_PAD = {
    "kb_search": ("query", "input not recorded "),
    "log_search": ("keyword", ""),
    "db_query": ("sql", "SELECT 1 -- "),
}
"""The field a placeholder is padded in, and its value before the padding."""
_INPUTS: dict[str, type[BaseModel]] = {
    "kb_search": KbSearchInput,
    "log_search": LogSearchInput,
    "db_query": DbQueryInput,
}
"""Each tool's input model (db_query's without a case's table list)."""


@dataclass(slots=True)
class _Call:
    """One tool call of the transcript with its answer."""

    message: int
    """The model call that sent it."""
    first_in_message: bool
    """Whether it opened its assistant message."""
    row: CapturedMessage
    """The TOOL_CALL row."""
    envelope: dict[str, JsonValue] | None
    """The arguments as JSON (None: not a JSON object)."""
    observation: dict[str, JsonValue] | None = None
    """The observation answering it (None: never answered or not JSON)."""


@dataclass(slots=True)
class _Step:
    """One trajectory step and the calls that sent it (a call answered AWAITING_EVALUATION is sent again)."""

    step: dict[str, JsonValue]
    """The step as the evaluation file declares it."""
    calls: list[_Call] = field(default_factory=list)
    """Its calls, in order: the last one is the one the Harness decided."""


def _json_object(text: str | None) -> dict[str, JsonValue] | None:
    try:
        data = json.loads(text) if text is not None else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _list(value: JsonValue | None) -> list[JsonValue]:
    return value if isinstance(value, list) else []


def _calls(messages: Sequence[CapturedMessage], *, plain: bool = False) -> list[_Call]:
    """The tool calls with their answers; `plain`: a plain-loop run's arguments are the business input itself (no
    envelope), read as the envelope's `input`, so its steps carry what it sent and no envelope mistake."""
    calls: list[_Call] = []
    by_id: dict[str, _Call] = {}
    last_message: int | None = None
    for m in messages:
        if m.kind == EntryKind.TOOL_CALL.value:
            message = m.model_call if m.model_call is not None else -1
            arguments = _json_object(m.arguments)
            if plain and arguments is not None:
                arguments = {"input": arguments}
            call = _Call(message, message != last_message, m, arguments)
            last_message = message
            calls.append(call)
            for key in (m.tool_call_id, m.harness_call_id):
                if key:
                    by_id[key] = call
        elif m.kind == EntryKind.OBSERVATION.value:
            obs = _json_object(m.content)
            found = by_id.get(m.tool_call_id or "") or by_id.get(str((obs or {}).get("tool_call_id")))
            if found is not None and found.observation is None:
                found.observation = obs
        elif m.kind == EntryKind.ASSISTANT.value:
            last_message = None
    return calls


def _context(user: str) -> tuple[str, dict[str, str]]:
    question, head, rest = user.rpartition(_CONTEXT_HEAD)
    if not head:
        return user, {}
    context: dict[str, str] = {}
    for line in rest.splitlines():
        key, _, value = line.removeprefix("- ").partition(": ")
        if value == _NOT_GIVEN:
            continue
        if key in ("tenant", "service"):
            context[key] = value
        elif key == "time window":
            start, _, end = value.partition(" .. ")
            if start != "?":
                context["time_start"] = start
            if end and end != "?":
                context["time_end"] = end
    return question, context


def _input(call: _Call) -> dict[str, JsonValue] | None:
    value = (call.envelope or {}).get("input")
    return value if isinstance(value, dict) else None


def _partial(call: _Call) -> dict[str, JsonValue]:
    """The envelope, or as much of it as a call cut short shows (its complete fields)."""
    if call.envelope is not None:
        return call.envelope
    try:
        data = pydantic_core.from_json(call.row.arguments or "", allow_partial=True)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _gain(call: _Call) -> str | None:
    prev = _partial(call).get("previous_observation")
    gain = prev.get("information_gain") if isinstance(prev, dict) else None
    return gain if gain in (InformationGain.GAINED.value, InformationGain.NO_GAIN.value) else None


def _mistake(call: _Call) -> Mistake | None:
    violation = call.row.violation
    if violation == ViolationKind.MALFORMED_ENVELOPE.value:
        return Mistake.MALFORMED_JSON if call.envelope is None else Mistake.MISSING_INPUT
    return _MISTAKES.get(violation or "")


def _steps(calls: Sequence[_Call]) -> list[_Step]:
    steps: list[_Step] = []
    waiting: list[_Step] = []  # answered "not executed": the model sends them again, first in its next message
    queue: list[_Step] = []  # the steps the current message sends again
    pending = expected = False  # an observation awaits the model's evaluation (now; when the message was written)
    for i, call in enumerate(calls):
        awaiting = call.row.rejection == RejectionReason.AWAITING_EVALUATION.value
        if call.first_in_message:
            queue, waiting = waiting, []
            expected = pending  # the scripted model writes a message's envelopes from the state before it
        if queue:
            taken = queue.pop(0)
            taken.calls.append(call)
            if not awaiting and call.row.rejection != RejectionReason.PROTOCOL_VIOLATION.value:
                pending = (call.observation or {}).get("evaluation_required") is True
            resent_gain = _gain(call)  # the evaluation it carries now that one is pending
            if resent_gain is not None:
                taken.step.pop("gain", None)
                if resent_gain != InformationGain.NO_GAIN.value:
                    taken.step["gain"] = resent_gain
            if awaiting:
                waiting.append(taken)
            continue
        step: dict[str, JsonValue] = {"tool": call.row.tool or ""}
        if call.row.rejection == RejectionReason.PROTOCOL_VIOLATION.value:
            mistake = _mistake(call)
        elif call.envelope is None or _input(call) is None:  # refused for another reason before it was read
            mistake = Mistake.MALFORMED_JSON if call.envelope is None else Mistake.MISSING_INPUT
        elif expected != ("previous_observation" in call.envelope):  # refused (saturated, budget) before it was read
            mistake = Mistake.MISSING_PREVIOUS_OBSERVATION if expected else Mistake.UNEXPECTED_PREVIOUS_OBSERVATION
        else:
            mistake = None
        if call.row.rejection not in (
            RejectionReason.PROTOCOL_VIOLATION.value,
            RejectionReason.AWAITING_EVALUATION.value,
        ):
            pending = (call.observation or {}).get("evaluation_required") is True  # as the scripted model tracks it
        given = _input(call)
        if given is None and mistake in (Mistake.MALFORMED_JSON, Mistake.MISSING_INPUT):
            # what the model meant to send is its next well-formed call of that tool (the corrected retry)
            given = next((x for c in calls[i + 1:] if c.row.tool == call.row.tool and (x := _input(c)) is not None),
                         None)  # fmt: skip
        if given is None and mistake in (Mistake.MALFORMED_JSON, Mistake.MISSING_INPUT):
            given = _placeholder(call, mistake)
        step["input"] = given or {}
        gain = _gain(call)
        if gain is not None and gain != InformationGain.NO_GAIN.value:
            step["gain"] = gain
        if mistake is not None:
            step["mistake"] = mistake.value
            step["on_rejection"] = RejectionReaction.SKIP.value
        if not call.first_in_message and steps:
            step["same_turn"] = True
        made = _Step(step, [call])
        steps.append(made)
        if awaiting:
            waiting.append(made)
    return steps


def _placeholder(call: _Call, mistake: Mistake) -> dict[str, JsonValue] | None:
    """A valid input for a call the run never sent whole (no input, or JSON cut short, and no retry): the Harness
    refuses the call before reading it, so only its length counts (tokens); a cut call's placeholder is padded
    so that the scripted model, which sends the first half of the envelope, sends as many characters."""
    tool = call.row.tool or ""
    if tool not in _PLACEHOLDER:
        return None
    given = dict(_PLACEHOLDER[tool])
    if mistake is not Mistake.MALFORMED_JSON:
        return given
    envelope: dict[str, JsonValue] = {}
    prev = _partial(call).get("previous_observation")
    if isinstance(prev, dict) and set(prev) == {"tool_call_id", "information_gain"}:
        envelope["previous_observation"] = prev
    field, value = _PAD[tool]
    envelope["input"] = {**given, field: value}
    short = 2 * len(call.row.arguments or "") - len(json.dumps(envelope, ensure_ascii=False))
    padded = {**given, field: value + "x" * max(0, short)}
    try:
        _INPUTS[tool].model_validate(padded)
    except ValidationError:  # longer than the field allows: the length cannot be matched, the input stays valid
        return given
    return padded


def _fixtures(calls: Sequence[_Call]) -> dict[str, JsonValue]:
    logs: dict[str, JsonValue] = {}
    passages: dict[str, dict[str, JsonValue]] = {}
    recorded: list[JsonValue] = []
    faults: dict[str, dict[str, JsonValue]] = {}
    completed: Counter[str] = Counter()
    for call in calls:
        obs, tool = call.observation or {}, call.row.tool or ""
        if call.row.invocation_status == InvocationStatus.FAILED.value:
            error = str(obs.get("error") or "backend failed")
            hit = _FAULT.match(error)
            if hit is None:  # the backend's own failure (a SQL error): that call's, not the backend's for good
                recorded.append({"tool": tool, "input": _input(call) or {}, "error": error})
                continue
            kind = (FaultKind.TIMEOUT if error.startswith("TimeoutError") else FaultKind.ERROR).value
            faults.setdefault(
                tool, {"tool": tool, "kind": kind, "after_calls": completed[tool], "message": hit.group(1)}
            )
            continue
        if call.row.invocation_status != InvocationStatus.COMPLETED.value:
            continue
        completed[tool] += 1
        records = [r for r in _list(obs.get("records")) if isinstance(r, dict)]
        relevance = [str(r.pop("relevance")) for r in records if r.get("relevance") in tuple(Relevance)]
        recorded.append({
            "tool": tool, "input": _input(call) or {}, "evidence_status": obs.get("evidence_status") or
            EvidenceStatus.NO_EVIDENCE.value, "count": obs.get("count") or 0, "scope": obs.get("scope") or {},
            "truncated": bool(obs.get("truncated")), "records": list(records), "relevance": list(relevance),
            **({"count_without_text_filter": obs["count_without_text_filter"]}
               if isinstance(obs.get("count_without_text_filter"), int) else {}),
        })  # fmt: skip
        for r in records:
            if tool == "log_search":
                logs.setdefault(json.dumps(r, sort_keys=True), r)
            elif tool == "kb_search" and isinstance(r.get("doc_id"), str):
                doc = passages.setdefault(str(r["doc_id"]), {"title": r.get("title") or "", "chunks": {}})
                chunks = doc["chunks"]
                if isinstance(chunks, dict):
                    chunks.setdefault(str(r.get("chunk_id")), r.get("text") or "")
    kb: list[JsonValue] = []
    for doc_id, doc in passages.items():
        chunks = doc["chunks"] if isinstance(doc["chunks"], dict) else {}
        ordered = sorted(chunks.items(), key=lambda kv: _chunk_number(kv[0]))
        kb.append({"doc_id": doc_id, "title": doc["title"], "text": "\n\n".join(str(t) for _, t in ordered)})
    out: dict[str, JsonValue] = {}
    if kb:
        out["kb"] = kb
    if logs:
        out["logs"] = list(logs.values())
    if faults:
        out["faults"] = list(faults.values())
    if recorded:
        out["recorded"] = recorded
    return out


def _tables(steps: Sequence[_Step], offered: Sequence[tuple[str, tuple[str, ...]]]) -> dict[str, JsonValue]:
    """The tables the run was shown (with their columns, no rows: what queries returned is recorded) and, as
    `named_tables`, any other table its SQL read."""
    shown = {name: columns for name, columns in offered if columns}
    out: dict[str, JsonValue] = {}
    if shown:
        out["tables"] = [{"name": name, "columns": list(columns)} for name, columns in shown.items()]
    named = [n for n in _named_tables(steps) if n not in shown] + [n for n, c in offered if not c and n not in shown]
    if named:
        out["named_tables"] = list(dict.fromkeys(named))
    return out


def _named_tables(steps: Sequence[_Step]) -> list[str]:
    """Every table the run's SQL read (its rows are not stored, only what queries returned)."""
    named: dict[str, None] = {}
    for step in steps:
        given = step.step.get("input")
        if step.step.get("tool") != "db_query" or step.step.get("mistake") == Mistake.INVALID_INPUT.value:
            continue  # a table the run was refused is not one it had
        sql = given.get("sql") if isinstance(given, dict) else None
        try:
            named.update(dict.fromkeys(sorted(analyse_sql(sql).tables)) if isinstance(sql, str) else {})
        except ValueError:
            continue
    return list(named)


def _chunk_number(chunk_id: str) -> int:
    _, _, n = chunk_id.rpartition("#")
    return int(n) if n.isdigit() else 0


def _draft(messages: Sequence[CapturedMessage], calls: Sequence[_Call], steps: Sequence[_Step]) -> dict[str, JsonValue]:
    """`draft` (citations as `@stepN`) or `draft_text`: the model's last message without tool calls (none when the
    Harness ended the run). The raw text is kept when it is not a JSON object, or when rendering the object again
    would change its bytes while the replay's call ids (`call_1`, `call_2`, … by call) are the ones it cites."""
    with_calls = {c.message for c in calls}
    final = [m for m in messages if m.purpose == _DIAGNOSIS and m.kind == EntryKind.ASSISTANT.value
             and m.model_call not in with_calls and m.content]  # fmt: skip
    if not final:
        return {}
    text = final[-1].content or ""
    draft = _json_object(text)
    if draft is None:
        return {"draft_text": text}
    ids: dict[str, str] = {}  # a call's id in the run -> the step whose call the replay gives that role
    replayed: dict[str, str] = {}  # the same id -> the id the scripted replay gives that call
    position = {id(c): n for n, c in enumerate(calls, start=1)}
    for n, step in enumerate(steps, start=1):
        done = step.calls[-1]
        if done.row.rejection in (RejectionReason.PROTOCOL_VIOLATION.value, RejectionReason.AWAITING_EVALUATION.value):
            continue
        for key in (done.row.harness_call_id, done.row.tool_call_id):
            if key:
                ids.setdefault(key, f"@step{n}")
                replayed.setdefault(key, f"call_{position[id(done)]}")
    cites: list[dict[str, JsonValue]] = []
    for claim in _list(draft.get("claims")):
        for cite in _list(claim.get("citations")) if isinstance(claim, dict) else []:
            if isinstance(cite, dict) and isinstance(cite.get("tool_call_id"), str):
                cites.append(cite)
    same_ids = all(replayed.get(str(c["tool_call_id"]), c["tool_call_id"]) == c["tool_call_id"] for c in cites)
    if json.dumps(draft, ensure_ascii=False) != text and same_ids:
        return {"draft_text": text}
    for cite in cites:
        cite["tool_call_id"] = ids.get(str(cite["tool_call_id"]), cite["tool_call_id"])
    return {"draft": draft}


def _expect(run: CapturedRun, calls: Sequence[_Call]) -> dict[str, JsonValue]:
    if run.outcome not in tuple(ReleaseOutcome):
        raise CaptureError(f"case run {run.case_run_id!r} has no Release outcome (it did not finish)")
    expect: dict[str, JsonValue] = {"outcome": run.outcome}
    if run.outcome == ReleaseOutcome.FALLBACK.value and run.fallback_kind:
        expect["fallback_kind"] = run.fallback_kind
    stop = run.stop_reason or ExpectedStop.NONE.value
    if stop in tuple(ExpectedStop):
        expect["stop_reason"] = stop
    if run.outcome == ReleaseOutcome.SUCCESS.value:
        conclusion = (run.conclusion or "").strip()
        words = asserted_words(conclusion)
        facts: list[JsonValue] = [{"variants": [w]} for w in words[:3]] or [{"variants": [conclusion[:40] or "?"]}]
        expect["root_cause"] = {"statement": f"As the run concluded: {conclusion[:370]}", "facts": facts}
    expect["stop_required_delivered"] = run.stop_required_deliveries > 0
    rejections = Counter(c.row.rejection for c in calls if c.row.rejection in tuple(RejectionReason))
    exact: dict[str, JsonValue] = {"backend_calls": run.tool_invocations, "model_calls": run.model_calls}
    if run.stop_required_deliveries <= 1:
        exact["stop_required_deliveries"] = run.stop_required_deliveries
    exact["rejections"] = {str(k): n for k, n in sorted(rejections.items())}
    exact["no_gain"] = run.no_gain_count
    exact["gained"] = run.gained_count
    expect["exact"] = exact
    return expect


def _case_id(case_id: str) -> str:
    slug = re.sub(r"[^a-z0-9_\-]+", "_", case_id.lower()).strip("_-") or "run"
    return f"captured_{slug}"[:81]


def build_case(run: CapturedRun, suite: SuiteSpec | None = None) -> EvalCase:
    """The evaluation case replaying `run` (validated: CaptureError when the run cannot make one); `suite`: the
    suite of the folder the case is written to, whose declared tools' calls become the case's results."""
    diagnosis = [m for m in run.messages if m.purpose == _DIAGNOSIS]
    user = next((m.content for m in diagnosis if m.kind == EntryKind.USER.value and m.content), None)
    if user is None:
        raise CaptureError(f"case run {run.case_run_id!r}: its transcript has no user prompt (no question)")
    question, context = _context(user)
    calls = _calls(diagnosis, plain=run.agent == "plain")
    steps = _steps(calls)
    stops = [i for i, c in enumerate(calls) if c.row.stop_required]
    verdict = next((m.verdict for m in run.messages if m.kind == GUARD_VERDICT and m.guard == GuardName.SEMANTIC), None)
    trajectory: dict[str, JsonValue] = {"steps": [s.step for s in steps]}
    if stops and stops[0] < len(calls) - 1:
        trajectory["on_stop_required"] = StopReaction.IGNORE.value
    trajectory.update(_draft(diagnosis, calls, steps))
    if verdict in tuple(SemanticVerdict) and verdict != SemanticVerdict.SUPPORTED.value:
        trajectory["semantic_verdict"] = verdict
    family = run.family if run.family in tuple(Family) or suite is not None else Family.DIAGNOSABLE.value
    mine = [c for c in calls if (c.row.tool or "") in TOOL_NAMES or suite is None]  # the built-in tools' calls
    fixtures: dict[str, JsonValue] = {**_fixtures(mine), **_tables(steps, offered_tables(diagnosis))}
    entry = next((m.content for m in diagnosis if m.kind == EntryKind.TOOLS.value), None)
    called = [SuiteCall(c.row.tool or "", c.row.invocation_status, _input(c), c.observation) for c in calls]
    suited = suite_fields(run.case_run_id, suite, called, entry, fixtures)
    raw: dict[str, JsonValue] = {
        **suited,
        "id": _case_id(run.case_id),
        "family": family,
        "description": f"Captured from case run {run.case_run_id} (model {run.model or '?'}); review the"
        " expectations, the trajectory and the recorded results before adding it to an evaluation set.",
        "question": question,
        "context": dict(context),
        "fixtures": fixtures,
        "expect": _expect(run, calls),
        "trajectory": trajectory,
    }
    from runners.domain.evalset import step_input_problems

    try:
        case = EvalCase.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise CaptureError(
            f"case run {run.case_run_id!r} does not make a valid case: {where}: {first['msg']}"
        ) from None
    problems = step_input_problems(case)
    if problems:
        where, msg = problems[0]
        raise CaptureError(f"case run {run.case_run_id!r} does not make a valid case: {where}: {msg}")
    return case


def replay_argv(run: CapturedRun, path: str) -> list[str]:
    """The command that replays the captured case `path` with the scripted model at the settings the run used
    (the Harness's own: those of the model do not apply to the scripted one)."""
    from runners.plan.settings import SettingOwner, declaration

    used = {s.name: s.value for s in run.settings}
    argv = ["harness-bench", "run", "--evalset", path, "--model", "scripted"]
    if run.agent not in (None, "native"):  # replayed through the loop it ran under
        argv += ["--agent", str(run.agent)]
    for s in declaration().settings:
        value = used.get(s.name)
        if s.owner is SettingOwner.HARNESS and value is not None and value != s.default:
            argv += [s.flag, s.cli_text(value)]
    return argv


def case_yaml(run: CapturedRun, case: EvalCase, path: str) -> str:
    """The evaluation file `path` holding `case`, with the capture's provenance, its replay command and what to
    review beside `cases:`."""
    doc = {
        "captured": {
            "from_case_run": run.case_run_id,
            "bench_run": run.bench_run_id,
            "case": run.case_id,
            "model": run.model,
            "label": run.label,
            "replay": shlex.join(replay_argv(run, path)),
            "review": list(REVIEW),
        },
        "cases": [case.model_dump(mode="json", exclude_defaults=True, exclude={"suite"})],
    }
    head = "# Captured by `harness-bench capture`: REVIEW the fields listed under captured.review before use.\n"
    return head + _dump(doc)


def _dump(doc: Mapping[str, object]) -> str:
    """`doc` as PyYAML's safe emitter writes it (`_Dumper`), written by libyaml's where that gives the same text.

    libyaml's emitter is ten times faster, but escapes every character beyond the BMP (an emoji becomes
    "\\U0001F600"): a document holding one goes through PyYAML's own, so that it reads as written. And the two differ
    on whether a document ending in a block scalar that keeps its final newlines needs an explicit `...` end
    marker: one that libyaml closes with it goes through PyYAML's own too."""
    if not _BEYOND_BMP.search(json.dumps(doc, ensure_ascii=False)):
        text = yaml.dump(doc, Dumper=_CDumper, allow_unicode=True, sort_keys=False, width=_WIDTH)
        if not text.endswith("\n...\n"):
            return text
    return yaml.dump(doc, Dumper=_Dumper, allow_unicode=True, sort_keys=False, width=_WIDTH)


_WIDTH = 120
"""The line width of a captured file, the same for both emitters (the same text needs the same options)."""


_BEYOND_BMP = re.compile("[\U00010000-\U0010ffff]")


class _Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper, every string written so that it loads back as itself: a YAML reader folds NEL, LS and
    PS (U+0085, U+2028/9) into spaces in plain and single-quoted scalars, so a string holding one, or any other
    character that is not printable, is double-quoted (where the emitter escapes it); other multi-line text is a
    literal block (the emitter falls back to quotes where one cannot hold it)."""


def _str(dumper: yaml.representer.SafeRepresenter, value: str) -> yaml.ScalarNode:
    if any(not ch.isprintable() and ch != "\n" for ch in value) or any(ch in value for ch in "\x85\u2028\u2029\ufeff"):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


class _CDumper(yaml.CSafeDumper):
    """`_Dumper` with libyaml's emitter (the same file for any text within the BMP; the pinned PyYAML wheels carry
    libyaml, which the case files' reader uses too)."""


_Dumper.add_representer(str, _str)
_CDumper.add_representer(str, _str)
