"""EvidenceGuard: whether each citation is real — code, not a model (docs/architecture.md §7.2).

A citation is real when its tool_call_id is a completed, readable, unexpired record of *this*
run and its excerpt is proved against that record's raw result values (`excerpt_problem`).
Whether it supports the claim is SemanticGuard's question, not this one.

The excerpt rule (an allow-list of what counts as quoting evidence):

- Only string values of the result records count, each value on its own. Keys, JSON punctuation,
  numbers, booleans and nulls never match, and neither does text that spans two fields or two
  records: `message`, `{"line":` or `"tenant": "t1"` quote the record's shape, not its content.
- Comparison ignores case and collapses whitespace runs (a model re-wraps lines when quoting); a
  value's JSON-escaped form (`\"`, `\n`, as the observation showed it) counts as the same value.
- An excerpt has at least `min_excerpt_chars` characters and at least one letter: digits and
  punctuation alone (`3000`, `14:03`, `-0`) are in almost every record and prove nothing.
- A whole value passes (an id such as `R-217`, a status such as `FAILED`, a timestamp cell): a
  complete field is a unit of evidence. A fragment of a value must also contain a word of three or
  more letters (any script), so `07-12T09` or `t2-0` cut out of an id or a timestamp do not pass.

Numbers are not matched even as whole values: `3000` would verify against any count, amount,
latency or id digit, so a claim about a number quotes the text around it or the row's string cells.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from harness.canonical_store import CanonicalStore
from harness.contracts import EvidenceStatus, InvocationStatus, JsonObject
from harness.draft import Draft

_SPACES = re.compile(r"\s+")
_LETTER = re.compile(r"[^\W\d_]")  # a letter in any script (\w minus digits and underscore)
_WORD = re.compile(r"[^\W\d_]{3,}")


def _norm(text: str) -> str:
    return _SPACES.sub(" ", text).strip().casefold()


@dataclass(frozen=True, slots=True)
class VerifiedEvidence:
    """A citation that passed: its excerpt and where it came from."""

    tool_call_id: str
    """The canonical record."""
    tool: str
    """Tool name."""
    excerpt: str
    """The cited text (verbatim from the raw record)."""


@dataclass(frozen=True, slots=True)
class EvidenceVerdict:
    """All citations real, or the reasons some are not."""

    passed: bool
    """True when every citation verified and there is at least one."""
    verified: tuple[VerifiedEvidence, ...]
    """The citations that verified."""
    problems: tuple[str, ...]
    """One line per rejected citation."""


def string_values(records: tuple[JsonObject, ...]) -> tuple[str, ...]:
    """Every string value in the records (nested ones included), normalised; keys and non-strings left out.

    A value holding quotes, backslashes or control characters is also listed in its JSON-escaped form,
    the way the model saw it in the observation, so a quote copied with its escapes still verifies.
    """
    out: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, str):
            out.append(_norm(value))
            escaped = json.dumps(value, ensure_ascii=False)[1:-1]
            if escaped != value:
                out.append(_norm(escaped))
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)

    walk(records)
    return tuple(out)


def excerpt_problem(excerpt: str, values: tuple[str, ...], min_excerpt_chars: int) -> str | None:
    """Why `excerpt` does not prove anything against `values` (from `string_values`), or None when it does."""
    quoted = _norm(excerpt)
    if len(quoted) < min_excerpt_chars:
        return f"excerpt is shorter than {min_excerpt_chars} characters"
    if not _LETTER.search(quoted):
        return "excerpt has no letters; numbers and punctuation alone prove nothing"
    if quoted in values:
        return None  # a whole value
    if not any(quoted in value for value in values):
        return (
            "excerpt not found in the raw record: it must be text inside one value of one record "
            "(keys, numbers and text spanning two fields do not count)"
        )
    if not _WORD.search(quoted):
        return "excerpt is a fragment of a value with no word of 3 or more letters; quote the whole value or more text"
    return None


def check_evidence(draft: Draft, store: CanonicalStore, min_excerpt_chars: int = 4) -> EvidenceVerdict:
    """Verify every citation of the Draft against the canonical store."""
    citations = draft.citations
    if not citations:
        return EvidenceVerdict(False, (), ("the conclusion cites no evidence",))
    verified: list[VerifiedEvidence] = []
    problems: list[str] = []
    cache: dict[str, tuple[str, ...]] = {}
    for c in citations:
        read = store.read(c.tool_call_id)
        rec = read.record
        if rec is None:
            why = "never ran in this run" if read.problem and read.problem.value == "MISSING" else "expired"
            problems.append(f"citation {c.tool_call_id}: {why}")
            continue
        if rec.status is not InvocationStatus.COMPLETED or rec.result is None:
            problems.append(f"citation {c.tool_call_id}: the call did not complete")
            continue
        if rec.result.evidence_status is EvidenceStatus.NO_EVIDENCE:
            problems.append(f"citation {c.tool_call_id}: the call returned no records")
            continue
        values = cache.get(c.tool_call_id)
        if values is None:
            values = cache[c.tool_call_id] = string_values(rec.result.records)
        problem = excerpt_problem(c.excerpt, values, min_excerpt_chars)
        if problem is not None:
            problems.append(f"citation {c.tool_call_id}: {problem}")
            continue
        verified.append(VerifiedEvidence(c.tool_call_id, rec.tool, c.excerpt))
    return EvidenceVerdict(not problems, tuple(verified), tuple(problems))
