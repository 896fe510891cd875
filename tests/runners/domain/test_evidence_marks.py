"""The built-in cases' evidence marks against the scripted gain taggers.

A case's evidence (`runners/domain/evidence_marks.py`: what its reference Draft cites plus its `expect.evidence`
marks) is the truth a model's GAINED / NO_GAIN is scored against. These tests hold the data to that truth:

- the `reference` profile, at the default settings, tags GAINED exactly the observations that carry evidence and
  NO_GAIN only observations that carry none — except where its tag is the case's own deliberate error, listed in
  `REFERENCE_TAG_IS_THE_CASE` with the reason;
- the mis-taggers come out as built: `optimist` never tags evidence NO_GAIN (and does tag non-evidence GAINED),
  `dismissive` never tags evidence GAINED (and does tag evidence NO_GAIN);
- every declared mark matches at least one fixture record of its tool (a mark that matches nothing is a typo that
  would silently count nothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import pytest

from harness.contracts import GainProducer, InformationGain
from harness.trace import GainApplied
from runners.domain import profiles
from runners.domain.evalset import EvalCase, load_cases
from runners.domain.evidence_marks import carries_evidence
from runners.domain.scripted import ScriptedChatModel
from runners.run.case_runner import run_case
from tests.runners.domain._case_records import fixture_records

CASES = load_cases()

_EVERY_RESULT_GAINED = (
    "the case's model judges every result GAINED, so that nothing saturates and only a budget can stop the run "
    "(the case's point); this result carries no evidence"
)

REFERENCE_TAG_IS_THE_CASE: dict[tuple[str, str], str] = {
    ("budget_exhaustion_tool_budget_all_gained_webhook_backlog", "call_4"): (
        f"{_EVERY_RESULT_GAINED}: the per-tenant delays restate the question"
    ),
    ("budget_exhaustion_tool_budget_all_gained_webhook_backlog", "call_7"): (
        f"{_EVERY_RESULT_GAINED}: the per-partition peak lag (numbers only) repeats the queue-lag lines"
    ),
    ("budget_exhaustion_tool_budget_all_gained_webhook_backlog", "call_10"): (
        f"{_EVERY_RESULT_GAINED}: one webhook retried once is beside the point"
    ),
    ("budget_exhaustion_model_calls_sloppy_envelopes_risk_t7", "call_2"): (
        f"{_EVERY_RESULT_GAINED}: the queue-length WARN lines restate the question"
    ),
    ("duplicate_scopes_sql_layout_refunds_shop42", "call_1"): (
        "the refund status count restates the question; the case tags it GAINED so that its first duplicate does "
        "not saturate the run (the case is about the later duplicates)"
    ),
    ("multi_call_turns_parallel_model_within_tool_budget_t5", "call_6"): (
        f"{_EVERY_RESULT_GAINED}: an order cancelled after the decline is a consequence, not a cause"
    ),
    ("multi_call_turns_parallel_model_within_tool_budget_t5", "call_10"): (
        f"{_EVERY_RESULT_GAINED}: the rollback procedure is background"
    ),
    ("multi_call_turns_parallel_model_within_tool_budget_t5", "call_13"): (
        f"{_EVERY_RESULT_GAINED}: the number of declines restates the question"
    ),
}
"""(case, call) pairs where the reference's tag disagrees with the evidence on purpose, and why."""


@dataclass(frozen=True, slots=True)
class Tag:
    """One observation the agent evaluated."""

    case_id: str
    """The case."""
    call_id: str
    """The call whose result was evaluated."""
    gain: InformationGain
    """The agent's tag."""
    evidence: bool
    """Whether the call's records carry the case's evidence."""


@cache
def _tags(profile: str) -> tuple[Tag, ...]:
    """Every agent-produced tag of every built-in case run with `profile` at the default settings."""
    out: list[Tag] = []
    for case in CASES:
        model = ScriptedChatModel(profiles.trajectory_for(case, profile, 1), name=f"scripted:{profile}")
        run = run_case(case, model)
        out.extend(
            Tag(case.id, e.tool_call_id, e.gain, e.tool_call_id in run.evidence_calls)
            for e in run.result.events
            if isinstance(e, GainApplied) and e.producer is GainProducer.AGENT
        )
    return tuple(out)


def _disagrees(tag: Tag) -> bool:
    return (tag.gain is InformationGain.GAINED) != tag.evidence


def test_reference_tags_agree_with_the_evidence() -> None:
    wrong = {(t.case_id, t.call_id): t for t in _tags("reference") if _disagrees(t)}
    unexpected = [f"{t.case_id} {t.call_id}: tagged {t.gain.value}, evidence={t.evidence}"
                  for key, t in wrong.items() if key not in REFERENCE_TAG_IS_THE_CASE]  # fmt: skip
    assert not unexpected, "the reference's gain tags disagree with the evidence marks:\n" + "\n".join(unexpected)
    stale = sorted(set(REFERENCE_TAG_IS_THE_CASE) - set(wrong))
    assert not stale, f"listed as deliberate disagreements but they agree now (remove them): {stale}"


def test_reference_tags_both_ways() -> None:
    # The agreement above means something only if the reference tags evidence GAINED and other results NO_GAIN.
    tags = _tags("reference")
    assert sum(t.gain is InformationGain.GAINED and t.evidence for t in tags) >= 50
    assert sum(t.gain is InformationGain.NO_GAIN and not t.evidence for t in tags) >= 10


def test_optimist_never_tags_evidence_no_gain() -> None:
    tags = _tags("optimist")
    premature = [f"{t.case_id} {t.call_id}" for t in tags if t.evidence and t.gain is InformationGain.NO_GAIN]
    assert not premature
    # and it is the optimistic tagger it was built as: GAINED on results that carry nothing
    assert sum(not t.evidence and t.gain is InformationGain.GAINED for t in tags) > sum(
        not t.evidence and t.gain is InformationGain.GAINED for t in _tags("reference")
    )


def test_dismissive_never_tags_evidence_gained() -> None:
    tags = _tags("dismissive")
    found = [f"{t.case_id} {t.call_id}" for t in tags if t.evidence and t.gain is InformationGain.GAINED]
    assert not found
    # and it is the premature tagger it was built as: NO_GAIN on evidence
    assert sum(t.evidence and t.gain is InformationGain.NO_GAIN for t in tags) >= 30


MARKED = [case for case in CASES if case.expect.evidence]


@pytest.mark.parametrize("case", MARKED, ids=[c.id for c in MARKED])
def test_every_mark_matches_a_fixture_record(case: EvalCase) -> None:
    dead = [f"{m.tool}: {m.contains!r}" for m in case.expect.evidence
            if not carries_evidence(m.tool, fixture_records(case, m.tool), [m])]  # fmt: skip
    assert not dead, f"{case.id}: marks that match no fixture record of their tool: {dead}"
