"""What a real model's recorded sweep yielded, per NO_GAIN threshold: the numbers a code change must not move.

The summary of a label's case runs is committed beside the model's cassettes (`cassettes/<model>/summary.json`);
the offline replay test rebuilds it from the cassettes and compares, so a change to the Harness that alters what a
recorded model's runs yield shows the differing numbers. `scripts/record_real.py` writes it (`summarize`) and the
recording's cost (`recording_cost`) after every batch it records.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from harness import HarnessControl, RejectionReason
from runners.decisions.funnel import FunnelStage, stage_of
from runners.domain.evalset import BUILTIN_DIR, load_cases
from runners.domain.splits import Split, split_of_cases
from runners.plan.agent import AgentFramework
from runners.plan.bench_config import PlainPrompt
from runners.store.diagnosis_reads import FunnelRow, GainTagRow
from runners.store.recorded_sweeps import CaseRunRow, RecordedRows, RejectionRow

__all__ = ["FamilyPassRate", "GainTags", "RecordedSummary", "SplitCounts", "ThresholdSummary", "summarize"]


class FamilyPassRate(BaseModel):
    """Passed case runs of one family."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    family: str
    """The family."""
    passed: int
    """Case runs that met their expectations."""
    runs: int
    """Case runs."""


class GainTags(BaseModel):
    """The agent's gain tags against what the observations it judged held (runners/decisions/funnel.py)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gained_on_evidence: int = 0
    """GAINED on an observation carrying the case's evidence (right)."""
    gained_on_nothing: int = 0
    """GAINED on one carrying none (optimistic)."""
    no_gain_on_evidence: int = 0
    """NO_GAIN on one carrying evidence (premature)."""
    no_gain_on_nothing: int = 0
    """NO_GAIN on one carrying none (right)."""


class SplitCounts(BaseModel):
    """One split's case runs (runners/domain/splits.py): model-facing text was developed on `dev`, never on
    `held-out`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    runs: int
    """Case runs."""
    outcome_passed: int
    """Of those, the runs that passed the outcome verdict."""
    success_expected: int
    """Runs of cases expected to end in SUCCESS."""
    success_reached: int
    """Of those, the runs that published SUCCESS with the root cause through both guards."""


class ThresholdSummary(BaseModel):
    """One threshold's case runs of one model, counted."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    no_gain_threshold: int
    """The NO_GAIN threshold."""
    runs: int
    """Case runs."""
    passed: int
    """Case runs that met their expectations."""
    families: tuple[FamilyPassRate, ...]
    """Pass counts per family, by family name."""
    outcomes: dict[str, int]
    """Case runs per Release outcome."""
    stop_reasons: dict[str, int]
    """Case runs per stop reason (`NONE`: the agent finished on its own)."""
    violations: dict[str, int]
    """Protocol violations by kind."""
    rejections: dict[str, int]
    """Requests rejected before the backend, by reason."""
    runs_reaching_backend: int
    """Case runs with at least one backend invocation."""
    valid_drafts: int
    """Case runs whose final message parsed as a Draft."""
    stop_required_runs: int
    """Case runs in which STOP_REQUIRED was delivered."""
    stop_required_ignored: int
    """Of those, the runs in which the model asked for a tool again after it (rejected, never executed)."""
    duplicate_scopes_stopped: int
    """Requests stopped before the backend as a repeated scope."""
    model_calls: int
    """Agent model calls."""
    guard_calls: int
    """SemanticGuard model calls."""
    tool_invocations: int
    """Backend invocations."""
    input_tokens: int
    """Prompt tokens."""
    output_tokens: int
    """Generated tokens."""
    outcome_passed: int = 0
    """Case runs that passed the outcome verdict (the published outcome and the Harness's invariants)."""
    bench_failures: int = 0
    """Case runs that ended on the bench's failure, not the model's (a model call timed out on a loaded machine, was
    refused or failed on the endpoint after the Harness's retries: runners/run/verdict.py): left out of `runs` and of
    every count here."""
    finished_by_model: int = 0
    """Case runs that ended on the model's own valid Draft (no stop by the Harness)."""
    evidence_checks: dict[str, int] = {}
    """EvidenceGuard's verdicts on Drafts with a conclusion (PASSED / FAILED)."""
    semantic_verdicts: dict[str, int] = {}
    """SemanticGuard's verdicts on the Drafts EvidenceGuard passed."""
    gain_tags: GainTags = GainTags()
    """The agent's gain tags against the truth."""
    funnel: dict[str, int] = {}
    """Runs of cases expected to succeed, by the funnel stage where they fell out (runners/decisions/funnel.py)."""
    splits: dict[str, SplitCounts] = {}
    """Outcome passes and SUCCESS reached per split (dev and held-out always; new held-out and unassigned when the
    sweep ran a case of theirs)."""
    fallback_sources: dict[str, int] = {}
    """FALLBACK releases by where they came from: the model declined, a guard blocked, the Harness relabelled."""


class RecordedSummary(BaseModel):
    """A label's recorded sweep, per threshold."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    """The registry name of the model."""
    sweep_args: tuple[str, ...]
    """The `harness-bench sweep` flags that replay these cassettes (cases, thresholds, model settings), without
    `--db`, `--label`, `--cassettes` and `--record-mode`."""
    cases: int
    """Distinct cases run."""
    thresholds: tuple[ThresholdSummary, ...]
    """One entry per NO_GAIN threshold, ascending."""

    @property
    def agent(self) -> AgentFramework:
        """The loop the sweep drove the model through (its `--agent`; the Harness's own loop when not given)."""
        args = list(self.sweep_args)
        given = args[args.index("--agent") + 1] if "--agent" in args[:-1] else AgentFramework.NATIVE.value
        return AgentFramework(given)

    def _flag(self, flag: str) -> str | None:
        args = list(self.sweep_args)
        return args[args.index(flag) + 1] if flag in args[:-1] else None

    @property
    def ablation(self) -> HarnessControl:
        """The Harness control the sweep switched off (`--ablate`; none when not given)."""
        return HarnessControl(self._flag("--ablate") or HarnessControl.NONE.value)

    @property
    def plain_prompt(self) -> PlainPrompt:
        """The plain loop's system prompt (`--plain-prompt`; its own when not given)."""
        return PlainPrompt(self._flag("--plain-prompt") or PlainPrompt.PLAIN.value)

    @property
    def new_held_out(self) -> bool:
        """Every case it ran is a new held-out case (written after the model-facing text froze)."""
        first = self.thresholds[0] if self.thresholds else None
        new = first.splits.get(Split.NEW_HELD_OUT.value) if first is not None else None
        return first is not None and new is not None and new.runs == first.runs > 0

    @property
    def label(self) -> str:
        """The recording's name in a replay's database: the model, suffixed by the loop when it is not the Harness's
        own (a model recorded through both loops is two recordings), by the plain loop's prompt when it is the
        Harness's, by the control switched off, and by `new-held-out` when it ran only those cases."""
        name = self.model if self.agent is AgentFramework.NATIVE else f"{self.model}-{self.agent.value}"
        if self.plain_prompt is PlainPrompt.HARNESS:
            name += "-harness-prompt"
        if self.ablation is not HarnessControl.NONE:
            name += f"-no-{self.ablation.value}"
        return name + ("-new-held-out" if self.new_held_out else "")

    @property
    def baseline(self) -> bool:
        """A recording of the Harness as it ships on the older held-out cases: what gates, loop comparisons and
        ablations are measured against."""
        whole = self.ablation is HarnessControl.NONE and self.plain_prompt is PlainPrompt.PLAIN
        return self.agent is AgentFramework.NATIVE and whole and not self.new_held_out


class RecordingCost(BaseModel):
    """What recording a model's sweep cost, measured once when it was recorded (not part of the replayed
    summary: wall time is the machine's)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    """The registry name of the model."""
    recorded_calls: int
    """Model calls that reached the live server: the interactions stored in the cassettes."""
    case_runs: int
    """Case runs of the sweep."""
    wall_s_per_case_run: dict[int, float]
    """Mean wall seconds of a case run while it was recorded, per NO_GAIN threshold (a threshold recorded after
    another replays the shared prefix from the cassette, so it is cheaper)."""


def count_interactions(folder: Path) -> int:
    """The recorded request/response pairs in every cassette under `folder`."""
    return sum(len(json.loads(p.read_text())["interactions"]) for p in sorted(folder.rglob("epoch*.json")))


def recording_cost(model: str, rows: RecordedRows, cassettes: Path) -> RecordingCost:
    """The cost of a recorded sweep from its live database rows and its cassettes."""
    walls: dict[int, list[float]] = {}
    for r in rows.runs:
        walls.setdefault(r.no_gain_threshold, []).append(r.wall_ms / 1000)
    return RecordingCost(
        model=model,
        recorded_calls=count_interactions(cassettes),
        case_runs=len(rows.runs),
        wall_s_per_case_run={t: round(sum(w) / len(w), 1) for t, w in sorted(walls.items())},
    )


_AFTER_STOP = frozenset({RejectionReason.SATURATED.value, RejectionReason.BUDGET.value})


def _counts(values: Iterable[str]) -> dict[str, int]:
    return dict(sorted(Counter(values).items()))


def _threshold(
    threshold: int, runs: Sequence[CaseRunRow], rejected: Sequence[RejectionRow], funnel_of: Sequence[FunnelRow],
    tags: Sequence[GainTagRow], split_of: Mapping[str, Split],
) -> ThresholdSummary:  # fmt: skip
    bench = [r for r in runs if r.passed is None]  # unjudged: the bench's failure, not the model's (verdict.py)
    runs = [r for r in runs if r.passed is not None]
    funnel_of = [f for f in funnel_of if not f.bench_failure]
    families: dict[str, list[CaseRunRow]] = {}
    for run in runs:
        families.setdefault(run.family, []).append(run)
    stopped = {r.case_id for r in runs if r.stop_required_deliveries > 0}
    ignored = {r.case_id for r in rejected if r.case_id in stopped and r.rejection in _AFTER_STOP}
    return ThresholdSummary(
        no_gain_threshold=threshold,
        runs=len(runs),
        passed=sum(r.passed is True for r in runs),
        bench_failures=len(bench),
        families=tuple(
            FamilyPassRate(family=f, passed=sum(r.passed is True for r in rs), runs=len(rs))
            for f, rs in sorted(families.items())
        ),
        outcomes=_counts(r.outcome for r in runs),
        stop_reasons=_counts(r.stop_reason or "NONE" for r in runs),
        violations=_counts(r.violation for r in rejected if r.violation),
        rejections=_counts(r.rejection for r in rejected),
        runs_reaching_backend=sum(r.tool_invocations > 0 for r in runs),
        valid_drafts=sum(r.draft_valid for r in runs),
        stop_required_runs=len(stopped),
        stop_required_ignored=len(ignored),
        duplicate_scopes_stopped=sum(r.duplicate_scope_rejections for r in runs),
        model_calls=sum(r.model_calls for r in runs),
        guard_calls=sum(r.guard_calls for r in runs),
        tool_invocations=sum(r.tool_invocations for r in runs),
        input_tokens=sum(r.input_tokens for r in runs),
        output_tokens=sum(r.output_tokens for r in runs),
        outcome_passed=sum(bool(r.outcome_passed) for r in runs),
        finished_by_model=sum(r.draft_valid and r.stop_reason is None for r in runs),
        evidence_checks=_counts(r.evidence_check for r in runs if r.evidence_check),
        semantic_verdicts=_counts(r.semantic_verdict for r in runs if r.semantic_verdict),
        gain_tags=GainTags(
            gained_on_evidence=sum(t.gained_on_evidence for t in tags),
            gained_on_nothing=sum(t.gained_on_nothing for t in tags),
            no_gain_on_evidence=sum(t.no_gain_on_evidence for t in tags),
            no_gain_on_nothing=sum(t.no_gain_on_nothing for t in tags),
        ),
        funnel=_counts(stage_of(f).value for f in funnel_of if f.expected_outcome == "SUCCESS"),
        splits={
            split.value: _split(split, funnel_of, split_of)
            for split in Split
            if split in _ALWAYS_COUNTED or any(split_of.get(r.case_id) is split for r in funnel_of)
        },
        fallback_sources=_counts(s.value for f in funnel_of if (s := f.fallback_source) is not None),
    )


_ALWAYS_COUNTED = frozenset({Split.DEV, Split.HELD_OUT})
"""The splits a summary counts even when it ran none of their cases; the others appear once it ran one of theirs."""


def _split(split: Split, rows: Sequence[FunnelRow], split_of: Mapping[str, Split]) -> SplitCounts:
    mine = [r for r in rows if split_of.get(r.case_id) is split]
    expected = [r for r in mine if r.expected_outcome == "SUCCESS"]
    return SplitCounts(runs=len(mine), outcome_passed=sum(bool(r.outcome_passed) for r in mine),
                       success_expected=len(expected),
                       success_reached=sum(stage_of(r) is FunnelStage.SUCCESS for r in expected))  # fmt: skip


def summarize(model: str, rows: RecordedRows, sweep_args: Sequence[str] = ()) -> RecordedSummary:
    """Count a label's case runs per threshold."""
    thresholds = sorted({r.no_gain_threshold for r in rows.runs})
    split_of = split_of_cases(load_cases([str(BUILTIN_DIR)]))
    return RecordedSummary(
        model=model,
        sweep_args=tuple(sweep_args),
        cases=len({r.case_id for r in rows.runs}),
        thresholds=tuple(
            _threshold(
                t,
                [r for r in rows.runs if r.no_gain_threshold == t],
                [r for r in rows.rejections if r.no_gain_threshold == t],
                [f for f in rows.funnel if f.no_gain_threshold == t],
                [g for g in rows.gain_tags if g.no_gain_threshold == t],
                split_of,
            )
            for t in thresholds
        ),
    )
