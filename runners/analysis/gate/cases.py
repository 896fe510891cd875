"""The cases behind a verdict: per failed test the cases that got worse, each with the exact `harness-bench diff`
command that opens both transcripts; per recommended configuration its failing case runs with the `harness-bench show`
command."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from runners.analysis._safe_text import MarkdownText
from runners.analysis._safe_text import markdown as md
from runners.analysis._safe_text import markdown_code as md_code
from runners.analysis.gate.result import COST_METRICS, GateResult, Hypothesis, Measure, Pair
from runners.analysis.show import diff_command
from runners.store.gate_pairs import FailingCaseRun

__all__ = ["CASE_LIMIT", "WorseCase", "failing_case_lines", "junit_text", "markdown_section", "worse_cases"]

CASE_LIMIT = 10
"""Cases listed per failed test; the rest are counted (`and N more`)."""


@dataclass(frozen=True, slots=True)
class WorseCase:
    """One case that got worse under the candidate, and how to look at it."""

    case_id: str
    """The case."""
    epoch: int
    """The epoch to open (a flipped one for pass rates, the costliest for costs)."""
    what: str
    """How it got worse (`passed 3/3 → 1/3`, `tokens 1,200 → 2,400`)."""
    command: str
    """The exact diff command."""


def _cost_index(name: str) -> int:
    return list(COST_METRICS).index(name)


def worse_cases(result: GateResult, test: Hypothesis, pairs: Sequence[Pair], db: str) -> list[WorseCase]:
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
        command = diff_command(db, result.baseline, result.candidate, case_id, epoch)
        ranked.append((score, WorseCase(case_id, epoch, what, command)))
    ranked.sort(key=lambda x: (-x[0], x[1].case_id))
    return [w for _, w in ranked]


def _lines(cases: list[WorseCase], limit: int, fmt: str) -> list[str]:
    out = [fmt.format(c=c) for c in cases[:limit]]
    if len(cases) > limit:
        out.append(f"and {len(cases) - limit} more")
    return out


def markdown_section(result: GateResult, db: str, *, limit: int = CASE_LIMIT) -> str:
    """`### Cases that got worse`: per failed test its cases, each with its diff command (empty: no failure)."""
    failures = result.failures
    if not failures:
        return ""
    lines = ["", "### Cases that got worse", ""]
    for test in failures:
        cases = worse_cases(result, test, result.pairs, db)
        lines.append(f"**{test.describe()}** — {len(cases)} case(s) worse:")
        lines.append("")
        if not cases:
            lines.append("- (no single case is worse on its own; the change is spread over many)")
        lines.extend(f"- {md_code(c.case_id)} (epoch {c.epoch}): {md(c.what)} — {md_code(c.command)}"
                     for c in cases[:limit])  # fmt: skip
        if len(cases) > limit:
            lines.append(f"- and {len(cases) - limit} more")
        lines.append("")
    return "\n".join(lines)


def junit_text(result: GateResult, test: Hypothesis, db: str, *, limit: int = CASE_LIMIT) -> str:
    """The same list for one failed JUnit testcase (plain lines)."""
    cases = worse_cases(result, test, result.pairs, db)
    head = f"{len(cases)} case(s) worse:"
    return "\n".join([head, *_lines(cases, limit, "{c.case_id} (epoch {c.epoch}): {c.what}: {c.command}")])


def failing_case_lines(runs: Sequence[FailingCaseRun], db: str, *, limit: int = CASE_LIMIT) -> list[str]:
    """Failing case runs of one configuration (runners/store/gate_pairs.py `failing_case_runs`), each with the
    `harness-bench show` command that opens its transcript (Markdown: ids and commands in code spans)."""
    out: list[str] = [
        MarkdownText(f"{md_code(r.case_id)} (epoch {r.epoch}): {md(r.outcome)}, stop {md(r.stop_reason or 'NONE')} — "
                     + md_code(f"harness-bench show --db {shlex.quote(db)} {shlex.quote(r.case_run_id)}"))
        for r in runs[:limit]
    ]  # fmt: skip
    if len(runs) > limit:
        out.append(f"and {len(runs) - limit} more")
    return out
