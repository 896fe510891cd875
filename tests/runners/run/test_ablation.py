"""Each Harness control switched off (`--ablate`) changes that control and nothing else, on every built-in case run by
the scripted reference; the plain loop's `--plain-prompt harness` changes its system prompt and nothing else."""

from __future__ import annotations

import dataclasses
from functools import cache
from pathlib import Path

import pytest

from harness import (
    EvidenceCheck,
    EvidenceChecked,
    GainApplied,
    GuardVerdict,
    HarnessConfig,
    HarnessControl,
    ModelPurpose,
    RejectionReason,
    ReleaseOutcome,
    StopReason,
    StopRequiredDelivered,
    SystemMessage,
    ToolInvocation,
    ToolRequestRejected,
    TraceEvent,
)
from runners.cli import main
from runners.domain.evalset import load_cases
from runners.domain.prompt import BENCH_SYSTEM_PROMPT, PLAIN_SYSTEM_PROMPT
from runners.domain.scripted import ScriptedChatModel
from runners.plan.bench_config import BenchHarnessConfig, PlainPrompt
from runners.run.case_runner import CaseRun, run_case
from runners.run.plain_loop import plain_loop

CASES = load_cases()
BY_ID = {c.id: c for c in CASES}
_VOLATILE = ("seq", "t_ms", "latency_ms")


def _key(e: TraceEvent) -> tuple[str, tuple[tuple[str, object], ...]]:
    """An event without its position, time and latency."""
    fields = {k: v for k, v in dataclasses.asdict(e).items() if k not in _VOLATILE}
    return type(e).__name__, tuple(sorted(fields.items(), key=lambda kv: kv[0]))


@cache
def _run(case_id: str, control: HarnessControl) -> CaseRun:
    return run_case(BY_ID[case_id], config=HarnessConfig(ablate=control))


def _events(run: CaseRun) -> list[tuple[str, tuple[tuple[str, object], ...]]]:
    return [_key(e) for e in run.result.events]


IDS = [c.id for c in CASES]


@pytest.mark.parametrize("case_id", IDS)
def test_semantic_guard_off_changes_only_the_guards_call_and_what_release_makes_of_it(case_id: str) -> None:
    base, off = _run(case_id, HarnessControl.NONE), _run(case_id, HarnessControl.SEMANTIC_GUARD)
    kept = [k for k in _events(base) if k[0] not in ("GuardVerdict", "Released", "ModelCall")]
    assert [k for k in _events(off) if k[0] not in ("GuardVerdict", "Released", "ModelCall")] == kept
    assert not any(isinstance(e, GuardVerdict) for e in off.result.events)
    assert off.result.usage.guard_calls == 0
    passed = any(isinstance(e, EvidenceChecked) and e.verdict is EvidenceCheck.PASSED for e in base.result.events)
    if passed:  # a verified conclusion is published, whatever the guard would have said
        assert off.result.decision.outcome is ReleaseOutcome.SUCCESS
    else:
        assert off.result.decision.outcome is base.result.decision.outcome


@pytest.mark.parametrize("case_id", IDS)
def test_evidence_guard_off_traces_its_verdict_and_applies_none(case_id: str) -> None:
    base, off = _run(case_id, HarnessControl.NONE), _run(case_id, HarnessControl.EVIDENCE_GUARD)
    checks = [e for e in base.result.events if isinstance(e, EvidenceChecked)]
    if not checks or checks[0].verdict is EvidenceCheck.PASSED:  # nothing for the guard to refuse: the same run
        assert _events(off) == _events(base)
        return
    cut = next(i for i, e in enumerate(base.result.events) if isinstance(e, EvidenceChecked)) + 1
    assert _events(off)[:cut] == _events(base)[:cut], "up to EvidenceGuard's verdict, the same run"
    assert [e.verdict for e in off.result.events if isinstance(e, EvidenceChecked)] == [EvidenceCheck.FAILED]
    assert any(isinstance(e, GuardVerdict) for e in off.result.events), "the SemanticGuard judged it instead"


@pytest.mark.parametrize("case_id", IDS)
def test_duplicate_rejection_off_lets_repeats_run_and_changes_nothing_else(case_id: str) -> None:
    base, off = _run(case_id, HarnessControl.NONE), _run(case_id, HarnessControl.DUPLICATE_REJECTION)
    rejected = [e for e in base.result.events
                if isinstance(e, ToolRequestRejected) and e.rejection is RejectionReason.DUPLICATE_SCOPE]  # fmt: skip
    assert not [e for e in off.result.events
                if isinstance(e, ToolRequestRejected) and e.rejection is RejectionReason.DUPLICATE_SCOPE]  # fmt: skip
    if not rejected:
        assert _events(off) == _events(base)
        return
    repeat = rejected[0].tool_call_id  # (its NO_GAIN is traced just before its rejection)
    cut = next(i for i, e in enumerate(base.result.events) if getattr(e, "tool_call_id", None) == repeat)
    assert _events(off)[:cut] == _events(base)[:cut], "until the first repeat, the same run"
    ran = [(e.tool, e.scope) for e in off.result.events if isinstance(e, ToolInvocation)]
    assert len(ran) > len(set(ran)), "the repeat reached the backend"
    assert off.verdicts.outcome_passed or off.result.decision.outcome is not base.result.decision.outcome


@pytest.mark.parametrize("case_id", IDS)
def test_envelope_off_shows_plain_tools_and_runs_no_gain_contract(case_id: str) -> None:
    off = _run(case_id, HarnessControl.ENVELOPE)
    assert not any(isinstance(e, GainApplied) for e in off.result.events)
    stops = [e for e in off.result.events if isinstance(e, StopRequiredDelivered)]
    assert all(e.stop_reason is not StopReason.INFORMATION_SATURATED for e in stops)
    assert not any(isinstance(e, ToolRequestRejected) and e.rejection is RejectionReason.AWAITING_EVALUATION
                   for e in off.result.events)  # fmt: skip


def test_envelope_off_sends_the_business_schemas_and_the_same_prompt() -> None:
    case = BY_ID["diagnosable_late_settlement_cutoff_t2"]
    seen = []

    class Spy(ScriptedChatModel):
        def complete(self, request):  # type: ignore[no-untyped-def]
            if request.purpose is ModelPurpose.DIAGNOSIS:
                seen.append(request)
            return super().complete(request)

    base = run_case(case, Spy(case.trajectory))
    n = len(seen)
    off = run_case(case, Spy(case.trajectory), config=HarnessConfig(ablate=HarnessControl.ENVELOPE))
    assert base.passed and off.verdicts.outcome_passed
    first_base, first_off = seen[0], seen[n]
    assert first_base.messages[0] == first_off.messages[0], "the same system prompt"
    assert all("input" in t.parameters["properties"] for t in first_base.tools)
    assert all("input" not in t.parameters["properties"] and "previous_observation" not in t.parameters["properties"]
               for t in first_off.tools)  # fmt: skip
    got = [(e.tool, e.scope) for e in off.result.events if isinstance(e, ToolInvocation)]
    assert got == [(e.tool, e.scope) for e in base.result.events if isinstance(e, ToolInvocation)]


def test_without_an_ablation_the_run_is_the_default_one() -> None:
    for case in CASES[:20]:
        assert _events(_run(case.id, HarnessControl.NONE)) == _events(run_case(case))


@pytest.mark.parametrize("prompt", list(PlainPrompt))
def test_the_plain_loop_sends_the_prompt_its_setting_names_and_nothing_else_changes(prompt: PlainPrompt) -> None:
    case = BY_ID["diagnosable_gateway_risk_pool_exhausted_t1"]
    sent: list[str] = []

    class Spy(ScriptedChatModel):
        def complete(self, request):  # type: ignore[no-untyped-def]
            first = request.messages[0]
            assert isinstance(first, SystemMessage)
            sent.append(first.content)
            return super().complete(request)

    run = run_case(case, Spy(case.trajectory), config=BenchHarnessConfig(plain_prompt=prompt), loop=plain_loop,
                   judge_trajectory=False, judge_invariants=False)  # fmt: skip
    want = BENCH_SYSTEM_PROMPT if prompt is PlainPrompt.HARNESS else PLAIN_SYSTEM_PROMPT
    assert set(sent) == {want}
    other = run_case(case, config=BenchHarnessConfig(), loop=plain_loop, judge_trajectory=False, judge_invariants=False)

    def without_prompt_size(r: CaseRun) -> list[object]:  # a longer prompt is more input tokens, nothing else
        return [tuple(kv for kv in k[1] if kv[0] != "input_tokens") for k in _events(r)]

    assert without_prompt_size(run) == without_prompt_size(other)
    assert run.result.decision.outcome is ReleaseOutcome.SUCCESS


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--agent", "plain", "--ablate", "envelope"], "--ablate envelope switches off a Harness control"),
        (["--plain-prompt", "harness"], "--plain-prompt harness applies to --agent plain only"),
        (["--agent", "pydantic-ai", "--plain-prompt", "harness"], "--plain-prompt harness applies to --agent plain"),
    ],
)
def test_a_setting_the_loop_would_ignore_is_refused_in_one_line_and_nothing_is_written(
    flags: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "x.duckdb"
    assert main(["run", "--db", str(db), "--case", "diagnosable_ledger_disk_full_t8", *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not db.exists()
