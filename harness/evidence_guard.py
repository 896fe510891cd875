"""EvidenceGuard: whether each citation is real — code, not a model (seed 003 §3).

A citation is real when its tool_call_id is a completed, readable, unexpired record of *this*
run and its excerpt appears in that record's raw result. Whether it supports the claim is
SemanticGuard's question, not this one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from harness.canonical_store import CanonicalStore
from harness.contracts import EvidenceStatus, InvocationStatus
from harness.draft import Draft

_SPACES = re.compile(r"\s+")


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


def _raw_texts(record_values: object) -> list[str]:
    """Every string in a raw payload, plus its JSON form, for excerpt matching."""
    out: list[str] = []

    def walk(v: object) -> None:
        if isinstance(v, str):
            out.append(_norm(v))
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        elif v is not None:
            out.append(_norm(str(v)))

    walk(record_values)
    return out


def check_evidence(draft: Draft, store: CanonicalStore, min_excerpt_chars: int = 4) -> EvidenceVerdict:
    """Verify every citation of the Draft against the canonical store."""
    citations = draft.citations
    if not citations:
        return EvidenceVerdict(False, (), ("the conclusion cites no evidence",))
    verified: list[VerifiedEvidence] = []
    problems: list[str] = []
    cache: dict[str, tuple[list[str], str]] = {}
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
        excerpt = _norm(c.excerpt)
        if len(excerpt) < min_excerpt_chars:
            problems.append(f"citation {c.tool_call_id}: excerpt is shorter than {min_excerpt_chars} characters")
            continue
        if c.tool_call_id not in cache:
            records = rec.result.records
            joined = _norm(json.dumps(records, ensure_ascii=False, default=str))
            cache[c.tool_call_id] = (_raw_texts(records), joined)
        texts, joined = cache[c.tool_call_id]
        if not any(excerpt in t for t in texts) and excerpt not in joined:
            problems.append(f"citation {c.tool_call_id}: excerpt not found in the raw record")
            continue
        verified.append(VerifiedEvidence(c.tool_call_id, rec.tool, c.excerpt))
    return EvidenceVerdict(not problems, tuple(verified), tuple(problems))
