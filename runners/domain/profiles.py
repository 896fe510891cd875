"""Behaviour profiles: seeded transformations of a case's reference trajectory.

Calibration needs models that behave differently. Each profile rewrites the reference
trajectory *before* the run, deterministically from (profile, seed, case, epoch), so the same
profile is played identically in-process and by `serve-sim`:

- `reference` — the trajectory as written.
- `rewriter` (`k`=2, `seed`) — the seed's keyword-rewriting loop: after every NO_GAIN observation
  it inserts `k` paraphrased queries (each judged NO_GAIN) before moving on.
- `sloppy` (`p`=0.35, `seed`) — forgets or garbles `previous_observation` with probability `p`,
  and with probability `p` again does not learn from the corrective observation.
- `eager` (`p`=0.6, `seed`) — concludes right after the first non-empty result with probability
  `p`, often on generic REFERENCE text (SemanticGuard rejects the over-interpretation).
- `fabricator` (`p`=0.5, `seed`) — corrupts each citation with probability `p` (an id that never
  ran, or an excerpt that is not in the record).
- `parallel` (`p`=0.5, `seed`) — a parallel-calling model (OpenAI's default): each step is sent in
  the same message as the one before it with probability `p`, copying that message's evaluation.
- `optimist` — tags every observation it evaluates GAINED, evidence or not (an optimistic gain tagger).
- `dismissive` — tags every observation that carries the case's evidence NO_GAIN (a premature gain tagger;
  `runners/domain/evidence_marks.py` says which records carry it), and every other one NO_GAIN too except one that
  restates the complaint (truth grade `symptom`), which it tags as the reference does: its only wrong tags are
  premature ones.
- `mocked-path` — a suite's case: each fixture's call once, in order, then a Draft citing what they returned
  (`runners/domain/mocked_path.py`); a case without declared tools' fixtures plays its reference trajectory.

Select one with `--model scripted:<profile>[?seed=N&k=K&p=P]`; over HTTP, send the same string as
the request's `model` (`openai:scripted:rewriter?k=3` through serve-sim). To know which
observations are empty, a profile replays the trajectory's queries once against the case's own
fixtures (the real tools), exactly as the run will see them.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from harness import EvidenceStatus, InformationGain, JsonValue, SemanticVerdict
from runners.domain.evalset import EvalCase
from runners.domain.mocked_path import mocked_path
from runners.domain.model_spec import DEFAULT_PROFILE, ModelKind, ModelSpecError, parse_model
from runners.domain.scripted import Mistake, RejectionReaction, ScriptStep, Trajectory
from runners.domain.suggest import did_you_mean
from runners.domain.truth_grades import TruthGrade

PROFILES = (
    "reference",
    "rewriter",
    "sloppy",
    "eager",
    "fabricator",
    "parallel",
    "optimist",
    "dismissive",
    "mocked-path",
)
_DEFAULTS: dict[str, dict[str, float]] = {
    "reference": {},
    "rewriter": {"k": 2},
    "sloppy": {"p": 0.35},
    "eager": {"p": 0.6},
    "fabricator": {"p": 0.5},
    "parallel": {"p": 0.5},
    "optimist": {},
    "dismissive": {},
    "mocked-path": {},
}


class UnknownProfileError(ValueError):
    """The profile name or a parameter is not known."""


def parse_profile(text: str) -> tuple[str, dict[str, float]]:
    """`name[?k=v&k=v]` -> (name, params with defaults); names what is wrong."""
    name, _, query = text.partition("?")
    name = name or DEFAULT_PROFILE
    if name not in PROFILES:
        raise UnknownProfileError(
            f"unknown behaviour profile {name!r}{did_you_mean(name, PROFILES)}; profiles are {', '.join(PROFILES)}"
        )
    params: dict[str, float] = {"seed": 0, "epoch": 0, **_DEFAULTS[name]}
    given: set[str] = set()
    for part in filter(None, query.split("&")):
        key, sep, value = part.partition("=")
        if not sep or key not in params:
            raise UnknownProfileError(f"profile {name!r}: unknown parameter {part!r}; allowed: {sorted(params)}")
        if key in given:
            raise UnknownProfileError(f"profile {name!r}: parameter {key} given twice ({query!r}); give it once")
        given.add(key)
        try:
            params[key] = float(value)
        except ValueError:
            raise UnknownProfileError(f"profile {name!r}: parameter {key}={value!r} is not a number") from None
    if "p" in params and not 0 <= params["p"] <= 1:
        raise UnknownProfileError(f"profile {name!r}: p={params['p']:g} must be within [0, 1]")
    for key, (lo, hi) in _INTEGER_RANGES.items():
        if key in params and not (float(params[key]).is_integer() and lo <= params[key] <= hi):
            raise UnknownProfileError(
                f"profile {name!r}: {key}={params[key]:g} must be a whole number within [{lo}, {hi}]"
            )
    return name, params


_INTEGER_RANGES: dict[str, tuple[int, int]] = {"k": (0, 1_000), "seed": (0, 2**63 - 1), "epoch": (0, 1_000_000)}
"""Parameters that count something: whole numbers within these bounds (nan and infinities are refused too)."""


def _rng(name: str, params: dict[str, float], case_id: str, epoch: int) -> random.Random:
    key = json.dumps([name, sorted(params.items()), case_id, epoch])
    return random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))


@lru_cache(maxsize=1024)
def _observations(case_json: str) -> tuple[tuple[bool, str | None], ...]:
    """For each reference step: (non-empty?, first record text) as the real tools return them."""
    return tuple((non_empty, first) for non_empty, first, _ in _observed(case_json))


@lru_cache(maxsize=1024)
def _observed(case_json: str) -> tuple[tuple[bool, str | None, bool], ...]:
    """For each reference step: (non-empty?, first record text, carries the case's evidence?) as the real tools
    return them."""
    from runners.domain.case_setup import (
        build_tools,  # here: the tools load BM25 and DuckDB, a profile name needs neither
    )
    from runners.domain.evidence_marks import carries_evidence, evidence_marks

    case = EvalCase.model_validate_json(case_json)
    marks = evidence_marks(case)
    healthy = case.model_copy(update={"fixtures": case.fixtures.model_copy(update={"faults": []})})
    tools = {t.name: t for t in build_tools(healthy)}
    seen: set[tuple[str, str]] = set()
    out: list[tuple[bool, str | None, bool]] = []
    for step in case.trajectory.steps:
        tool = tools.get(step.tool)
        if tool is None:
            out.append((False, None, False))
            continue
        try:
            parsed = tool.parse_input(step.input)
            scope = tool.normalize_scope(parsed)
            if (step.tool, scope) in seen:
                out.append((False, None, False))
                continue
            seen.add((step.tool, scope))
            result = tool.run(parsed)
        except Exception:
            out.append((False, None, False))
            continue
        first = None
        if result.records:
            first = next((v for v in result.records[0].values() if isinstance(v, str) and len(v) > 12), None)
        evidence = carries_evidence(step.tool, result.records, marks)
        out.append((result.evidence_status is EvidenceStatus.EVIDENCE, first, evidence))
    return tuple(out)


def _paraphrase(step: ScriptStep, n: int, rng: random.Random) -> ScriptStep:
    words = ["error", "failed", "timeout", "latency", "exception", "declined", "retry", "unavailable"]
    extra = rng.choice(words)
    data: dict[str, JsonValue] = dict(step.input)
    if step.tool == "log_search":
        base = data.get("keyword")
        data["keyword"] = f"{base} {extra}" if isinstance(base, str) else extra
    elif step.tool == "kb_search":
        data["query"] = f"{data.get('query', '')} {extra} {n}".strip()
    elif step.tool == "db_query":
        data["sql"] = f"SELECT * FROM ({data.get('sql', 'SELECT 1')}) AS rewrite_{n} LIMIT {40 + n}"
    return ScriptStep(tool=step.tool, input=data, gain=InformationGain.NO_GAIN, note=f"paraphrase {n}")


def _rewriter(case: EvalCase, params: dict[str, float], rng: random.Random) -> Trajectory:
    traj = case.trajectory
    obs = _observations(case.model_dump_json())
    k = int(params["k"])
    steps: list[ScriptStep] = []
    renumber: dict[int, int] = {}
    after_rewrites = False
    for i, step in enumerate(traj.steps):
        if after_rewrites:  # it now evaluates the last rewrite, which gained nothing
            step = step.model_copy(update={"gain": InformationGain.NO_GAIN})
        steps.append(step)
        renumber[i + 1] = len(steps)
        after_rewrites = False
        nxt = traj.steps[i + 1] if i + 1 < len(traj.steps) else None
        if nxt is None or step.mistake is not None:
            continue
        empty = not obs[i][0]
        if not (empty or nxt.gain is InformationGain.NO_GAIN):
            continue
        # The seed's loop: rewrite the query k times before moving on, each rewrite judged NO_GAIN.
        for n in range(1, k + 1):
            para = _paraphrase(step, n, rng)
            steps.append(para.model_copy(update={"gain": nxt.gain}) if n == 1 else para)
        after_rewrites = True
    return traj.model_copy(update={"steps": steps, "draft": _renumber(traj.draft, renumber)})


def _renumber(value: Any, mapping: dict[int, int]) -> Any:
    """Keep `@stepN` citations pointing at the same original step after steps were inserted."""
    if isinstance(value, str) and value.startswith("@step") and value[5:].isdigit():
        return f"@step{mapping.get(int(value[5:]), int(value[5:]))}"
    if isinstance(value, list):
        return [_renumber(v, mapping) for v in value]
    if isinstance(value, dict):
        return {k: _renumber(v, mapping) for k, v in value.items()}
    return value


def _sloppy(case: EvalCase, params: dict[str, float], rng: random.Random) -> Trajectory:
    traj = case.trajectory
    obs = _observations(case.model_dump_json())
    p = params["p"]
    steps: list[ScriptStep] = []
    for i, step in enumerate(traj.steps):
        if step.mistake is None and rng.random() < p:
            pending = i > 0 and obs[i - 1][0]
            mistakes = (
                [Mistake.MISSING_PREVIOUS_OBSERVATION, Mistake.WRONG_TOOL_CALL_ID, Mistake.INVALID_GAIN_VALUE]
                if pending
                else [Mistake.UNEXPECTED_PREVIOUS_OBSERVATION, Mistake.MALFORMED_JSON]
            )
            reaction = RejectionReaction.REPEAT if rng.random() < p else RejectionReaction.CORRECT
            step = step.model_copy(update={"mistake": rng.choice(mistakes), "on_rejection": reaction})
        steps.append(step)
    return traj.model_copy(update={"steps": steps})


def _eager(case: EvalCase, params: dict[str, float], rng: random.Random) -> Trajectory:
    traj = case.trajectory
    obs = _observations(case.model_dump_json())
    for i, (non_empty, text) in enumerate(obs):
        if not non_empty or text is None:
            continue
        if rng.random() >= params["p"]:
            return traj
        cited_by_reference = f"@step{i + 1}" in json.dumps(traj.draft or {})
        if cited_by_reference and i + 1 == len(traj.steps):
            return traj  # the first evidence is the decisive one: eager changes nothing
        excerpt = text[: min(len(text), 60)]
        draft: dict[str, Any] = {
            "conclusion": f"Root cause: {excerpt}",
            "claims": [{"statement": excerpt, "citations": [{"tool_call_id": f"@step{i + 1}", "excerpt": excerpt}]}],
            "missing_info": [],
            "next_steps": [],
        }
        return traj.model_copy(
            update={"steps": traj.steps[: i + 1], "draft": draft, "draft_text": None,
                    "semantic_verdict": SemanticVerdict.UNSUPPORTED}
        )  # fmt: skip
    return traj


def _fabricator(case: EvalCase, params: dict[str, float], rng: random.Random) -> Trajectory:
    traj = case.trajectory
    if not traj.draft:
        return traj
    draft = json.loads(json.dumps(traj.draft))
    for claim in draft.get("claims") or []:
        for cit in claim.get("citations") or []:
            if rng.random() < params["p"]:
                if rng.random() < 0.5:
                    cit["tool_call_id"] = f"call_{90 + rng.randrange(9)}"
                else:
                    cit["excerpt"] = f"{cit.get('excerpt', '')} confirmed by the on-call engineer"
    return traj.model_copy(update={"draft": draft})


def _parallel(case: EvalCase, params: dict[str, float], rng: random.Random) -> Trajectory:
    traj = case.trajectory
    steps = [
        step.model_copy(update={"same_turn": True})
        if i > 0 and step.mistake is None and traj.steps[i - 1].mistake is None and rng.random() < params["p"]
        else step
        for i, step in enumerate(traj.steps)
    ]
    return traj.model_copy(update={"steps": steps})


def _optimist(case: EvalCase, params: dict[str, float], rng: random.Random) -> Trajectory:
    traj = case.trajectory
    steps = [step.model_copy(update={"gain": InformationGain.GAINED}) for step in traj.steps]
    return traj.model_copy(update={"steps": steps})


def _dismissive(case: EvalCase, params: dict[str, float], rng: random.Random) -> Trajectory:
    traj = case.trajectory
    obs = _observed(case.model_dump_json())
    steps = [
        step.model_copy(update={"gain": InformationGain.NO_GAIN}) if i > 0 and _dismissed(traj, i - 1, obs) else step
        for i, step in enumerate(traj.steps)
    ]
    return traj.model_copy(update={"steps": steps})


def _dismissed(traj: Trajectory, i: int, obs: tuple[tuple[bool, str | None, bool], ...]) -> bool:
    """Whether the dismissive tagger says NO_GAIN on step `i`'s observation: when it carries the case's evidence,
    and wherever else its truth grade makes NO_GAIN a right tag except a restated complaint (`symptom`), which it
    tags as the reference does — so its only errors are premature ones (a step without a grade: the evidence
    alone decides)."""
    truth = traj.steps[i].truth
    return obs[i][2] or (truth is not None and truth.grade is not TruthGrade.SYMPTOM)


_TRANSFORMS: dict[str, Callable[[EvalCase, dict[str, float], random.Random], Trajectory]] = {
    "rewriter": _rewriter,
    "sloppy": _sloppy,
    "eager": _eager,
    "fabricator": _fabricator,
    "parallel": _parallel,
    "optimist": _optimist,
    "dismissive": _dismissive,
    "mocked-path": lambda case, params, rng: mocked_path(case),
}


def trajectory_for(case: EvalCase, profile: str, epoch: int) -> Trajectory:
    """The trajectory a scripted model plays for this case, profile and epoch."""
    name, params = parse_profile(profile)
    if name == "reference":
        return case.trajectory
    if params.get("epoch"):
        epoch = int(params["epoch"])
    return _TRANSFORMS[name](case, params, _rng(name, params, case.id, epoch))


def trajectory_for_model(case: EvalCase, model: str, epoch: int = 1) -> Trajectory:
    """For serve-sim: the request's `model` field (`scripted`, `scripted:<profile>`) picks the profile."""
    try:
        spec = parse_model(model)
    except ModelSpecError:  # a request's model field may be any text: the reference trajectory answers it
        spec = None
    profile = spec.name if spec is not None and spec.kind is ModelKind.SCRIPTED else DEFAULT_PROFILE
    return trajectory_for(case, profile, epoch)
