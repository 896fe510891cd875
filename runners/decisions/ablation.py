"""What each Harness control costs and buys: a model's runs with one control switched off (`--ablate`), or through the
plain loop with the Harness's own prompt (`--plain-prompt harness`), against its runs through the Harness as it
ships, on the same cases, model, settings and budgets.

Each comparison changes one thing. It is paired by case over the cases both recordings ran at the gate's threshold
(the measures of `runners/decisions/loop_comparison.py`: recall, recall with citations EvidenceGuard accepts, honest
fallback, tokens, model and tool calls per run; per case the changed run's value minus the Harness's, with a 95%
bootstrap interval over cases). What a control buys is what switching it off loses; what it costs is what switching
it off saves. The new held-out cases are summarised apart (`new_held_out_lines`): no model-facing text or tool
behaviour was developed on them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from harness import HarnessControl
from runners.decisions._model import Frozen
from runners.decisions.intervals import Interval
from runners.decisions.loop_comparison import LoopComparison, compare_loops
from runners.decisions.real_models import RecordedSummary
from runners.decisions.recommend import wilson
from runners.domain.splits import Split
from runners.store.recorded_sweeps import CaseRunRow

__all__ = ["ChangedThing", "NewHeldOutLine", "OneChange", "one_change", "new_held_out_lines"]


class ChangedThing(Frozen):
    """What a recording changed against the Harness as it ships."""

    control: HarnessControl
    """The Harness control switched off (none for the plain loop)."""
    plain_loop_with_harness_prompt: bool
    """The plain loop (no control at all) with the Harness's system prompt word for word."""

    @property
    def text(self) -> str:
        """How the report names it."""
        if self.plain_loop_with_harness_prompt:
            return "every control (the plain loop, the Harness's prompt)"
        return {
            HarnessControl.ENVELOPE: "envelope + information-gain contract",
            HarnessControl.DUPLICATE_REJECTION: "duplicate rejection",
            HarnessControl.EVIDENCE_GUARD: "EvidenceGuard",
            HarnessControl.SEMANTIC_GUARD: "SemanticGuard",
        }.get(self.control, self.control.value)


class OneChange(Frozen):
    """One recording that changed one thing, against the model's Harness recording."""

    label: str
    """The changed recording's label."""
    changed: ChangedThing
    """What it changed."""
    comparison: LoopComparison
    """Paired by case: `harness` is the Harness as it ships, `plain` the changed run (whatever loop it used)."""
    harness_published: int
    """Over the cases both ran: the Harness's SUCCESS releases."""
    changed_published: int
    """The changed run's SUCCESS releases."""
    harness_wrong: int
    """Of the Harness's SUCCESS releases, those the outcome verdict fails (a case expecting a fallback, or a
    conclusion without the root cause's words)."""
    changed_wrong: int
    """The same of the changed run's."""


def one_change(
    summaries: Sequence[RecordedSummary],
    runs_of: Mapping[str, Sequence[CaseRunRow]],
    expected_success: Mapping[str, bool],
    threshold: int,
) -> tuple[OneChange, ...]:
    """Every recording with a control switched off, or through the plain loop with the Harness's prompt, against its
    model's baseline recording (`RecordedSummary.baseline`) at `threshold`; `runs_of`: each label's case runs."""
    from runners.plan.agent import AgentFramework
    from runners.plan.bench_config import PlainPrompt

    baselines = {s.model: s for s in summaries if s.baseline}
    out: list[OneChange] = []
    for s in summaries:
        base = baselines.get(s.model)
        harness_prompt = s.agent is AgentFramework.PLAIN and s.plain_prompt is PlainPrompt.HARNESS
        changed = s.agent is AgentFramework.NATIVE and s.ablation is not HarnessControl.NONE
        if base is None or not (changed or harness_prompt):
            continue
        mine = [r for r in runs_of[s.label] if harness_prompt or r.no_gain_threshold == threshold]
        comparison = compare_loops(s.label, runs_of[base.label], mine, expected_success, threshold)
        if comparison.cases:
            what = ChangedThing(control=s.ablation, plain_loop_with_harness_prompt=harness_prompt)
            h = {r.case_id: r for r in runs_of[base.label] if r.no_gain_threshold == threshold}
            c = {r.case_id: r for r in mine}
            common = set(h) & set(c)
            h_ok, c_ok = (
                [h[i] for i in common if h[i].outcome == "SUCCESS"],
                [c[i] for i in common if c[i].outcome == "SUCCESS"],
            )
            out.append(OneChange(
                label=s.label, changed=what, comparison=comparison, harness_published=len(h_ok),
                changed_published=len(c_ok), harness_wrong=sum(not r.outcome_passed for r in h_ok),
                changed_wrong=sum(not r.outcome_passed for r in c_ok),
            ))  # fmt: skip
    return tuple(out)


class NewHeldOutLine(Frozen):
    """A recording's figures on the new held-out cases, at one threshold."""

    label: str
    """The recording."""
    no_gain_threshold: int
    """The threshold."""
    runs: int
    """Runs of new held-out cases."""
    outcome_passed: int
    """Of those, the runs that passed the outcome verdict."""
    success_expected: int
    """Runs of cases expecting SUCCESS (all of the new ones do)."""
    success_reached: int
    """Of those, SUCCESS with the root cause through both guards."""
    reached: Interval
    """`success_reached / success_expected` with its 95% Wilson interval."""
    evidence_checks: dict[str, int]
    """EvidenceGuard's verdicts at this threshold (over every run of the recording)."""
    semantic_verdicts: dict[str, int]
    """SemanticGuard's verdicts at this threshold."""


def new_held_out_lines(summaries: Sequence[RecordedSummary], threshold: int) -> tuple[NewHeldOutLine, ...]:
    """The figures of every recording that ran new held-out cases, at `threshold` (from its summary's split counts)."""
    out: list[NewHeldOutLine] = []
    for s in summaries:
        at = next((t for t in s.thresholds if t.no_gain_threshold == threshold), None)
        counts = at.splits.get(Split.NEW_HELD_OUT.value) if at is not None else None
        if at is None or counts is None or counts.runs == 0:
            continue
        out.append(NewHeldOutLine(
            label=s.label, no_gain_threshold=threshold, runs=counts.runs, outcome_passed=counts.outcome_passed,
            success_expected=counts.success_expected, success_reached=counts.success_reached,
            reached=wilson(counts.success_reached, max(counts.success_expected, 1)),
            evidence_checks=dict(at.evidence_checks), semantic_verdicts=dict(at.semantic_verdicts),
        ))  # fmt: skip
    return tuple(out)
