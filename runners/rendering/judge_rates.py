"""The judges' error rates on labelled answers as a table (`harness-bench judge-check`) and as Markdown rows
(the real-models report, the docs)."""

from __future__ import annotations

from collections.abc import Sequence

from runners.decisions.judge_rates import JudgeRates, LabelRate
from runners.domain.labelled_answers import Label

__all__ = ["cell", "markdown_rows", "render"]

_COLUMNS = ((Label.WRONG, "wrong passed"), (Label.VAGUE, "vague passed"), (Label.CORRECT, "correct failed"))


def cell(rate: LabelRate) -> str:
    """`k/n = x% [lo–hi]`."""
    if rate.error_share is None or rate.ci95 is None:
        return "no answers"
    lo, hi = rate.ci95
    return f"{rate.error}/{rate.n} = {rate.error_share:.0%} [{lo:.0%}–{hi:.0%}]"


def render(title: str, results: Sequence[JudgeRates]) -> str:
    """A plain table: one row per judge, one column per kind of mistake."""
    head = ["judge", *(name for _, name in _COLUMNS)]
    rows = [[f"{r.judge}{' (default)' if r.default else ''}", *(cell(r.by_label[label]) for label, _ in _COLUMNS)]
            for r in results]  # fmt: skip
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]
    lines = [title, "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines)


def markdown_rows(set_name: str, results: Sequence[JudgeRates]) -> list[str]:
    """`| set | judge | wrong passed | vague passed | correct failed |` rows."""
    return [f"| {set_name} | {r.judge}{' (default)' if r.default else ''} | "
            + " | ".join(cell(r.by_label[label]) for label, _ in _COLUMNS) + " |" for r in results]  # fmt: skip
