"""Labelled lines, the shape every labelled test set of the bench shares: one JSON object a line naming a case and a
label (the judge's answers, the SemanticGuard's conclusions). One reader refuses what is not such a line, the same way
for every set: one line naming the file, the line and the field.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, TypeVar

from pydantic import BaseModel, ValidationError

if TYPE_CHECKING:  # the cases' model (and its parsers) load only where lines are read
    from runners.domain.case_model import EvalCase


__all__ = ["LabelledLine", "parse_labelled_lines"]


class LabelledLine(BaseModel):
    """A labelled line: the case it is about (its label and text are the set's own fields)."""

    case_id: str
    """The case the line is about."""


LineT = TypeVar("LineT", bound=LabelledLine)


def parse_labelled_lines(
    text: str,
    source: str,
    line_type: type[LineT],
    labels: type[StrEnum],
    cases: Mapping[str, EvalCase],
    unusable: Callable[[EvalCase], str | None],
    error: type[ValueError],
) -> list[LineT]:
    """The lines of a JSON-lines `text` (blank lines skipped) as `line_type`; `source` names the file in errors,
    `labels` the accepted labels, `unusable` why a case cannot take part (None: it can); `error` is raised."""
    out: list[LineT] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        try:
            raw = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise error(f"{where}: not a JSON object ({str(exc)[:80]})") from None
        if not isinstance(raw, dict):
            raise error(f"{where}: not a JSON object")
        try:
            item = line_type.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "line"
            if field == "label":
                message = f"label {str(raw.get('label'))[:40]!r} is not one of {[v.value for v in labels]}"
            else:
                message = f"{field}: {first['msg']}"
            raise error(f"{where}: {message}") from None
        case = cases.get(item.case_id)
        if case is None:
            raise error(f"{where}: case_id {item.case_id[:80]!r} is not a case")
        why = unusable(case)
        if why is not None:
            raise error(f"{where}: case_id {item.case_id!r} {why}")
        out.append(item)
    return out
