"""The cases behind a verdict: per failed test the cases that got worse, worst first (the rendering adds the
command that opens both transcripts)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from runners.decisions.gate.result import COST_METRICS, Hypothesis, Measure, Pair

__all__ = ["WorseCase", "worse_cases"]


@dataclass(frozen=True, slots=True)
class WorseCase:
    """One case that got worse under the candidate."""

    case_id: str
    """The case."""
    epoch: int
    """The epoch to open (a flipped one for pass rates, the costliest for costs)."""
    what: str
    """How it got worse (`passed 3/3 → 1/3`, `tokens 1,200 → 2,400`)."""


def _cost_index(name: str) -> int:
    return list(COST_METRICS).index(name)


def worse_cases(test: Hypothesis, pairs: Sequence[Pair]) -> list[WorseCase]:
    """The cases that got worse for one test, worst first."""
    groups: dict[str, list[Pair]] = {}
    for p in pairs:
        if test.kind is Measure.FAMILY and p.family != test.name:
            continue
        groups.setdefault(p.case_id, []).append(p)
    ranked: list[tuple[float, WorseCase]] = []
    for case_id, ps in groups.items():
        ps = sorted(ps, key=lambda p: p.epoch)
        if test.kind is Measure.COST:
            i = _cost_index(test.name)
            base = sum(p.base_cost[i] for p in ps) / len(ps)
            cand = sum(p.cand_cost[i] for p in ps) / len(ps)
            if cand <= base:
                continue
            worst = max(ps, key=lambda p: p.cand_cost[i] - p.base_cost[i])
            what, score, epoch = f"{test.name} {base:,.1f} → {cand:,.1f} per epoch", cand - base, worst.epoch
        else:
            b, c = sum(p.base_pass for p in ps), sum(p.cand_pass for p in ps)
            if c >= b:
                continue
            flipped = next((p for p in ps if p.base_pass and not p.cand_pass), ps[0])
            what, score, epoch = f"passed {b}/{len(ps)} → {c}/{len(ps)}", float(b - c), flipped.epoch
        ranked.append((score, WorseCase(case_id, epoch, what)))
    ranked.sort(key=lambda x: (-x[0], x[1].case_id))
    return [w for _, w in ranked]
