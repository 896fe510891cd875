"""What a lower NO_GAIN threshold (or a lower tool budget) would have done to stored runs, computed exactly.

Every stored case run's tool requests are replayed, in trace order, through the real `DiagnosisProgressTracker`
at the point's threshold: the agent's recorded evaluations (`GAIN_APPLIED` by the agent) ride on the next
request as its `previous_observation`, recorded protocol violations are handed in as they were found, completed
invocations are completed with their recorded evidence. Up to the first place the point's tracker decides
otherwise the run is the recorded run (the model is never told the threshold, so it saw the same observations),
so everything before that place is known exactly:

- the tracker delivers STOP_REQUIRED earlier: the run is CUT there; no backend call follows (later requests are
  rejected), the model gets the one call STOP_REQUIRED allows for its Draft — what it writes there, that
  call's tokens and whether a SemanticGuard call follows are not known (UNKNOWN);
- the point's tool budget is used up first: CUT with BUDGET_LIMIT_REACHED; no model call follows, so all counts
  are exact;
- the run reaches its recorded end (or its recorded STOP_REQUIRED) with the tracker agreeing: UNCHANGED;
- the run stopped where the point would have let it go on (a threshold above the one it saturated at, a budget
  above the one it hit): CENSORED — what it would have done next was never recorded.

The replay is the counterfactual core's (`runners.decisions.counterfactual`, shared with `compare-stops`); this
module picks the points and sums them. Pure: stored runs in (`runners.store.replayable_runs`), typed results out;
no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from runners.decisions._model import Frozen
from runners.decisions.counterfactual import (
    ConclusionRisk,
    Counts,
    CutPoint,
    ReplayError,
    RunStatus,
    RunWhatIf,
    replay_run,
    unreplayable,
)
from runners.decisions.intervals import t_interval
from runners.store.replayable_runs import ReplayableRun

__all__ = [
    "NOTES",
    "Bound",
    "ConclusionRisk",
    "Counts",
    "CutPoint",
    "PointWhatIf",
    "ReplayError",
    "RunStatus",
    "RunWhatIf",
    "Saving",
    "WhatIf",
    "WhatIfInputError",
    "check_points",
    "replay_run",
    "whatif",
]

NOTES = (
    "unknown: the Draft the model would have written after an earlier STOP_REQUIRED, the tokens of that one"
    " Draft call and whether a SemanticGuard call follows it; so a STOP_REQUIRED cut's tokens saved are at most"
    " the figure shown, and its model calls saved count that Draft call once (its retries are not known)",
    "censored: a run that stopped where the point would have let it go on (a threshold above the one it"
    " saturated at, a tool budget above the one it hit): what it did next was never recorded, so it is left out"
    " of the savings",
    "model calls and tokens are the diagnosis loop's (a SemanticGuard call is not replayed); the Draft call after"
    " STOP_REQUIRED is counted when the model-call and token budgets still allow it (the deadline and the"
    " observation-byte budget are assumed to)",
)
"""What the what-if cannot know, said once (printed under the table, written into the JSON)."""


class Bound(StrEnum):
    """How a saving is known."""

    EXACT = "EXACT"
    """Exactly."""
    AT_MOST = "AT_MOST"
    """As an upper bound (a cut run's Draft call after STOP_REQUIRED costs tokens that are not known)."""


class WhatIfInputError(ValueError):
    """A point the selection cannot answer (a threshold or budget not below the runs'), or runs without events."""


class Saving(Frozen):
    """One count saved at a point, over the runs it answers (censored runs left out)."""

    total: int
    """Summed over the runs."""
    mean: float | None
    """Per run (None: no run)."""
    low: float | None
    """Lower end of the 95% t interval of the per-run mean (None: under two runs)."""
    high: float | None
    """Upper end (None: under two runs)."""
    bound: Bound
    """Exact, or an upper bound."""


class PointWhatIf(Frozen):
    """One point of the what-if: a threshold (and a tool budget)."""

    no_gain_threshold: int
    """The consecutive-NO_GAIN threshold replayed."""
    max_tool_invocations: int | None
    """The tool budget replayed (None: each run's own)."""
    runs: int
    """Runs replayed."""
    runs_cut: int
    """Runs that stop earlier."""
    runs_censored: int
    """Runs the point cannot answer."""
    conclusions_at_risk: int
    """Cut runs whose published Draft cites a record obtained after the cut."""
    conclusions_unknown: int
    """Cut runs that published a Draft that is not stored."""
    tool_invocations: Saving
    """Tool invocations saved."""
    model_calls: Saving
    """Diagnosis model calls saved."""
    tokens: Saving
    """Tokens saved."""
    per_run: tuple[RunWhatIf, ...]
    """Every run at this point, cut points included."""


class WhatIf(Frozen):
    """The what-if of a selection of stored runs."""

    points: tuple[PointWhatIf, ...]
    """One per (threshold, tool budget), thresholds descending."""
    notes: tuple[str, ...] = NOTES
    """What cannot be known, and how it is counted."""


# -- the points -------------------------------------------------------------------------------------------------
def check_points(runs: Sequence[ReplayableRun], thresholds: Sequence[int], budgets: Sequence[int]) -> None:
    """Refuse what the selection cannot answer: no runs, runs without events, a threshold or tool budget that is
    not below the highest one the runs used (a what-if replays lower settings only)."""
    problem = unreplayable(runs, "to replay")
    if problem is not None:
        raise WhatIfInputError(problem)
    plain = next((r.case_run_id for r in runs if r.agent == "plain"), None)
    if plain is not None:  # no contract, no gain evaluations: nothing a lower threshold could have changed
        raise WhatIfInputError(
            f"case run {plain} ran the plain loop (--agent plain), which has no information-gain contract to replay;"
            " compare caps and loop detectors on it with compare-stops"
        )
    for flag, values in (("--no-gain-threshold", thresholds), ("--max-tool-invocations", budgets)):
        low = next((v for v in values if v < 1), None)
        if low is not None:
            raise WhatIfInputError(f"{flag} {low}: must be ≥ 1")
    top = max(r.no_gain_threshold for r in runs)
    for t in thresholds:
        if t >= top:
            raise WhatIfInputError(
                f"--no-gain-threshold {t}: not below the threshold the selected runs used ({top}); a what-if"
                " replays lower thresholds only"
            )
    most = max(r.max_tool_invocations for r in runs)
    for n in budgets:
        if n >= most:
            raise WhatIfInputError(
                f"--max-tool-invocations {n}: not below the tool budget the selected runs used ({most}); a what-if"
                " replays lower budgets only"
            )


def _saving(values: Sequence[int], bound: Bound) -> Saving:
    iv = t_interval(values)
    return Saving(total=sum(values), mean=iv.mean, low=iv.low, high=iv.high, bound=bound)


def _point(runs: Sequence[ReplayableRun], threshold: int, budget: int | None) -> PointWhatIf:
    per_run = tuple(replay_run(r, threshold, budget) for r in runs)
    answered = [r.saved for r in per_run if r.saved is not None]
    cut = [r for r in per_run if r.status is RunStatus.CUT]
    tokens_bound = Bound.AT_MOST if any(r.draft_call for r in cut) else Bound.EXACT
    return PointWhatIf(
        no_gain_threshold=threshold,
        max_tool_invocations=budget,
        runs=len(per_run),
        runs_cut=len(cut),
        runs_censored=sum(r.status is RunStatus.CENSORED for r in per_run),
        conclusions_at_risk=sum(r.conclusion is ConclusionRisk.AT_RISK for r in cut),
        conclusions_unknown=sum(r.conclusion is ConclusionRisk.UNKNOWN for r in cut),
        tool_invocations=_saving([s.tool_invocations for s in answered], Bound.EXACT),
        model_calls=_saving([s.model_calls for s in answered], tokens_bound),
        tokens=_saving([s.tokens for s in answered], tokens_bound),
        per_run=per_run,
    )


def whatif(runs: Sequence[ReplayableRun], thresholds: Sequence[int], budgets: Sequence[int] = ()) -> WhatIf:
    """Every point (each threshold, with each tool budget or, without any, each run's own) over `runs`."""
    check_points(runs, thresholds, budgets)
    grid: list[int | None] = list(dict.fromkeys(sorted(budgets, reverse=True))) or [None]
    points = [
        _point(runs, t, n) for t in dict.fromkeys(sorted(thresholds, reverse=True)) for n in grid
    ]  # fmt: skip
    return WhatIf(points=tuple(points))
