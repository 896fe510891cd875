"""The cases behind a gate verdict as text: per failed test the cases that got worse, each with the exact
`harness-bench diff` command that opens both transcripts; per recommended configuration its failing case runs with the
`harness-bench show` command."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from runners.decisions.gate import GateResult, Hypothesis, WorseCase, worse_cases
from runners.rendering.safe_text import MarkdownText
from runners.rendering.safe_text import markdown as md
from runners.rendering.safe_text import markdown_code as md_code
from runners.rendering.show import diff_command
from runners.store.gate_pairs import FailingCaseRun

__all__ = ["CASE_LIMIT", "failing_case_lines", "junit_text", "markdown_section"]

CASE_LIMIT = 10
"""Cases listed per failed test; the rest are counted (`and N more`)."""


def _command(result: GateResult, case: WorseCase, db: str) -> str:
    return diff_command(db, result.baseline, result.candidate, case.case_id, case.epoch)


def _lines(cases: list[WorseCase], limit: int, fmt: str, result: GateResult, db: str) -> list[str]:
    out = [fmt.format(c=c, command=_command(result, c, db)) for c in cases[:limit]]
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
        cases = worse_cases(test, result.pairs)
        lines.append(f"**{test.describe()}** — {len(cases)} case(s) worse:")
        lines.append("")
        if not cases:
            lines.append("- (no single case is worse on its own; the change is spread over many)")
        lines.extend(f"- {md_code(c.case_id)} (epoch {c.epoch}): {md(c.what)} — {md_code(_command(result, c, db))}"
                     for c in cases[:limit])  # fmt: skip
        if len(cases) > limit:
            lines.append(f"- and {len(cases) - limit} more")
        lines.append("")
    return "\n".join(lines)


def junit_text(result: GateResult, test: Hypothesis, db: str, *, limit: int = CASE_LIMIT) -> str:
    """The same list for one failed JUnit testcase (plain lines)."""
    cases = worse_cases(test, result.pairs)
    head = f"{len(cases)} case(s) worse:"
    return "\n".join([head, *_lines(cases, limit, "{c.case_id} (epoch {c.epoch}): {c.what}: {command}", result, db)])


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
