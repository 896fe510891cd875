"""What each control costs and buys, and the new held-out cases apart: a recording's label names what it changed, a
changed recording is paired with its model's recording of the Harness as it ships (never with another changed one),
and a recording's new held-out figures come from its summary's split counts."""

from __future__ import annotations

from pathlib import Path

from harness import HarnessControl
from runners.decisions.ablation import new_held_out_lines, one_change
from runners.decisions.real_models import RecordedSummary, SplitCounts, ThresholdSummary
from runners.store.recorded_sweeps import CaseRunRow
from scripts.record_real import seed

MODEL = "qwen2.5-coder-1.5b"


def _threshold(t: int, runs: int, splits: dict[str, SplitCounts]) -> ThresholdSummary:
    return ThresholdSummary(
        no_gain_threshold=t, runs=runs, passed=0, families=(), outcomes={}, stop_reasons={}, violations={},
        rejections={}, runs_reaching_backend=0, valid_drafts=0, stop_required_runs=0, stop_required_ignored=0,
        duplicate_scopes_stopped=0, model_calls=0, guard_calls=0, tool_invocations=0, input_tokens=0,
        output_tokens=0, evidence_checks={"PASSED": 2}, splits=splits,
    )  # fmt: skip


def _summary(*flags: str, new: bool = False) -> RecordedSummary:
    counts = SplitCounts(runs=4, outcome_passed=1, success_expected=4, success_reached=1)
    none = SplitCounts(runs=0, outcome_passed=0, success_expected=0, success_reached=0)
    splits = {"dev": none, "held-out": none, "new-held-out": counts} if new else {"dev": none, "held-out": counts}
    return RecordedSummary(model=MODEL, sweep_args=("--model", f"openai:{MODEL}", *flags), cases=4,
                           thresholds=(_threshold(2, 4, splits),))  # fmt: skip


def _row(case: str, *, outcome: str, passed: bool, evidence: str | None, tokens: int) -> CaseRunRow:
    return CaseRunRow(
        case_id=case, family="diagnosable", no_gain_threshold=2, passed=passed, outcome_passed=passed,
        outcome=outcome, stop_reason=None, model_calls=2, guard_calls=0, wall_ms=1.0, tool_invocations=1,
        duplicate_scope_rejections=0, protocol_violations=0, stop_required_deliveries=0, input_tokens=tokens,
        output_tokens=0, draft_valid=True, evidence_check=evidence, semantic_verdict=None,
    )  # fmt: skip


def test_a_label_names_what_the_recording_changed() -> None:
    assert _summary().label == MODEL and _summary().baseline
    off = _summary("--ablate", "semantic-guard")
    assert off.label == f"{MODEL}-no-semantic-guard" and off.ablation is HarnessControl.SEMANTIC_GUARD
    assert not off.baseline
    plain = _summary("--agent", "plain", "--plain-prompt", "harness")
    assert plain.label == f"{MODEL}-plain-harness-prompt" and not plain.baseline
    assert _summary("--agent", "plain").label == f"{MODEL}-plain"
    new = _summary(new=True)
    assert new.label == f"{MODEL}-new-held-out" and new.new_held_out and not new.baseline


def test_a_changed_recording_is_paired_with_the_harness_as_it_ships() -> None:
    base, off, plain = _summary(), _summary("--ablate", "evidence-guard"), _summary("--agent", "plain")
    prompt = _summary("--agent", "plain", "--plain-prompt", "harness")
    runs = {
        base.label: [_row("a", outcome="FALLBACK", passed=False, evidence="FAILED", tokens=100),
                     _row("b", outcome="SUCCESS", passed=True, evidence="PASSED", tokens=100)],
        off.label: [_row("a", outcome="SUCCESS", passed=True, evidence="FAILED", tokens=150),
                    _row("b", outcome="SUCCESS", passed=True, evidence="PASSED", tokens=100)],
        plain.label: [_row("a", outcome="SUCCESS", passed=True, evidence="FAILED", tokens=50)],
        prompt.label: [_row("b", outcome="SUCCESS", passed=True, evidence="PASSED", tokens=300)],
    }  # fmt: skip
    got = one_change([base, off, plain, prompt], runs, {"a": True, "b": True}, 2)
    assert [c.label for c in got] == [off.label, prompt.label], "the plain loop with its own prompt is no ablation"
    ev = got[0].comparison
    assert ev.cases == 2 and ev.harness_blocked == 1 and ev.plain_published_rejected == 1
    assert (got[0].harness_published, got[0].changed_published, got[0].changed_wrong) == (1, 2, 0)
    recall = next(m for m in ev.metrics if m.name.startswith("recall (SUCCESS"))
    assert (recall.harness, recall.plain) == (0.5, 1.0)
    tokens = next(m for m in ev.metrics if m.name == "tokens per run")
    assert tokens.difference.value == 25.0
    assert got[1].changed.plain_loop_with_harness_prompt and got[1].comparison.cases == 1


def test_without_its_baseline_a_changed_recording_is_not_compared() -> None:
    off = _summary("--ablate", "envelope")
    assert one_change([off], {off.label: []}, {}, 2) == ()


def test_the_new_held_out_lines_come_from_the_split_counts() -> None:
    lines = new_held_out_lines([_summary(), _summary(new=True)], 2)
    assert [line.label for line in lines] == [f"{MODEL}-new-held-out"]
    line = lines[0]
    assert (line.runs, line.success_reached, line.success_expected) == (4, 1, 4)
    assert line.reached.low < 0.25 < line.reached.high
    assert new_held_out_lines([_summary(new=True)], 3) == ()


def test_seeding_copies_a_batchs_cassettes_once(tmp_path: Path) -> None:
    src, out = tmp_path / "base", tmp_path / "off"
    (src / f"openai_{MODEL}" / "case_a").mkdir(parents=True)
    (src / f"openai_{MODEL}" / "case_a" / "epoch1.json").write_text("recorded")
    seed(["case_a", "case_b"], src, out)
    copied = out / f"openai_{MODEL}" / "case_a" / "epoch1.json"
    assert copied.read_text() == "recorded" and not (out / f"openai_{MODEL}" / "case_b").exists()
    copied.write_text("changed run's own")
    seed(["case_a"], src, out)
    assert copied.read_text() == "changed run's own", "a case the changed run recorded is never overwritten"
