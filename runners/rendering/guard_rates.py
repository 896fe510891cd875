"""A SemanticGuard's error rates on labelled conclusions as a table (`harness-bench guard-check`) and as Markdown rows
(the docs)."""

from __future__ import annotations

from collections.abc import Sequence

from runners.decisions.guard_rates import GuardRates, LabelVerdicts
from runners.rendering.safe_text import markdown, terminal

__all__ = ["cell", "markdown_rows", "render"]

_HEAD = ("guard", "unsupported passed", "supported blocked")


def cell(rate: LabelVerdicts) -> str:
    """`k/n = x% [lo–hi]`."""
    share = rate.error_share
    if share.mean is None or share.low is None or share.high is None:
        return "no conclusions"
    return f"{rate.error}/{rate.n} = {share.mean:.0%} [{share.low:.0%}–{share.high:.0%}]"


def _row(r: GuardRates) -> list[str]:
    return [r.guard, cell(r.unsupported_passed), cell(r.supported_blocked)]


def render(title: str, results: Sequence[GuardRates]) -> str:
    """A plain table: one row per guard, one column per kind of mistake."""
    rows = [[terminal(c) for c in _row(r)] for r in results]  # a guard's name is the user's --guard-model
    widths = [max(len(row[i]) for row in [list(_HEAD), *rows]) for i in range(len(_HEAD))]
    lines = [title, "  ".join(h.ljust(w) for h, w in zip(_HEAD, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines)


def markdown_rows(set_name: str, results: Sequence[GuardRates]) -> list[str]:
    """`| set | guard | unsupported passed | supported blocked |` rows."""
    return ["| " + " | ".join(markdown(c) for c in [set_name, *_row(r)]) + " |" for r in results]
