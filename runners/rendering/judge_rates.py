"""The judges' error rates on labelled answers as a table (`harness-bench judge-check`) and as Markdown rows
(the real-models report, the docs)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import RenderableType

from runners.decisions.judge_rates import JudgeRates, LabelRate
from runners.domain.labelled_answers import Label
from runners.rendering.tables import rates_table

__all__ = ["cell", "markdown_rows", "render"]

_COLUMNS = ((Label.WRONG, "wrong passed"), (Label.VAGUE, "vague passed"), (Label.CORRECT, "correct failed"))


def cell(rate: LabelRate) -> str:
    """`k/n = x% [lo–hi]`."""
    if rate.error_share is None or rate.ci95 is None:
        return "no answers"
    lo, hi = rate.ci95
    return f"{rate.error}/{rate.n} = {rate.error_share:.0%} [{lo:.0%}–{hi:.0%}]"


def render(title: str, results: Sequence[JudgeRates]) -> RenderableType:
    """One row per judge, one column per kind of mistake, fitted to the terminal."""
    head = ["judge", *(name for _, name in _COLUMNS)]
    rows = [[f"{r.judge}{' (default)' if r.default else ''}", *(cell(r.by_label[label]) for label, _ in _COLUMNS)]
            for r in results]  # fmt: skip
    return rates_table(title, head, rows)


def markdown_rows(set_name: str, results: Sequence[JudgeRates]) -> list[str]:
    """`| set | judge | wrong passed | vague passed | correct failed |` rows."""
    return [f"| {set_name} | {r.judge}{' (default)' if r.default else ''} | "
            + " | ".join(cell(r.by_label[label]) for label, _ in _COLUMNS) + " |" for r in results]  # fmt: skip
