"""Which tool records of a case carry evidence: the truth an agent's GAINED / NO_GAIN is scored against.

A case's evidence is what its reference Draft cites (each citation's excerpt, for the tool of the step it cites)
plus the marks it declares (`expect.evidence`: records that exclude a hypothesis, or root-cause records the Draft
does not quote). A record carries evidence when one of its string values contains a mark's text — compared as
EvidenceGuard compares an excerpt: case-insensitively, whitespace runs collapsed, each value on its own. An
observation carries evidence when any of its records does; whether an agent *said* so is its gain tag.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from runners.domain.case_model import TOOL_NAMES, EvalCase, EvidenceMark, ToolName

__all__ = ["carries_evidence", "evidence_marks"]

_SPACES = re.compile(r"\s+")
_STEP = re.compile(r"^@step(\d+)$")
_TOOL: dict[str, ToolName] = {"kb_search": "kb_search", "log_search": "log_search", "db_query": "db_query"}
assert set(_TOOL) == set(TOOL_NAMES)


def _norm(text: str) -> str:
    return _SPACES.sub(" ", text).strip().casefold()


def evidence_marks(case: EvalCase) -> tuple[EvidenceMark, ...]:
    """The case's declared marks and one per citation of its reference Draft (`@stepN` names the step's tool)."""
    marks = list(case.expect.evidence)
    draft = case.trajectory.draft
    claims = draft.get("claims") if isinstance(draft, dict) else None
    for claim in claims if isinstance(claims, list) else ():
        citations = claim.get("citations") if isinstance(claim, dict) else None
        for cite in citations if isinstance(citations, list) else ():
            if not isinstance(cite, dict):
                continue
            ref, excerpt = cite.get("tool_call_id"), cite.get("excerpt")
            found = _STEP.match(ref) if isinstance(ref, str) else None
            if found is None or not isinstance(excerpt, str) or len(excerpt.strip()) < 4:
                continue
            index = int(found.group(1)) - 1
            steps = case.trajectory.steps
            tool = _TOOL.get(steps[index].tool) if 0 <= index < len(steps) else None
            if tool is not None:
                marks.append(EvidenceMark(tool=tool, contains=excerpt.strip()))
    return tuple(dict.fromkeys(marks))


def _strings(value: object) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def carries_evidence(tool: str, records: Iterable[Mapping[str, object]], marks: Iterable[EvidenceMark]) -> bool:
    """Whether any of `tool`'s `records` holds a string value containing one of the marks for that tool."""
    wanted = [_norm(m.contains) for m in marks if m.tool == tool]
    if not wanted:
        return False
    for record in records:
        for text in _strings(dict(record)):
            normal = _norm(text)
            if any(w in normal for w in wanted):
                return True
    return False
