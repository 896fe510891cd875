"""A SemanticGuard's error rates on labelled conclusions as a table (`harness-bench guard-check`) and as Markdown rows
(the docs)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import RenderableType

from runners.decisions.guard_rates import GuardRates, LabelVerdicts
from runners.rendering.safe_text import markdown
from runners.rendering.tables import rates_table

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


def render(title: str, results: Sequence[GuardRates]) -> RenderableType:
    """One row per guard, one column per kind of mistake, fitted to the terminal."""
    return rates_table(title, _HEAD, [_row(r) for r in results])


def markdown_rows(set_name: str, results: Sequence[GuardRates]) -> list[str]:
    """`| set | guard | unsupported passed | supported blocked |` rows."""
    return ["| " + " | ".join(markdown(c) for c in [set_name, *_row(r)]) + " |" for r in results]
