"""The rule judge: the default judge, deterministic and offline. It reads a conclusion clause by clause
(`_conclusion_text.py`) and passes it when

- every fact of the root cause is asserted in one of its wordings (in a clause neither negated nor hedged), the
  entity and the mechanism together in one sentence;
- no fact is denied (outside a clause that denies a distractor: "not the maintenance window" rejects the distractor);
- no distractor is asserted.
"""

from __future__ import annotations

from functools import lru_cache

from runners.domain.judge import JudgeVerdict
from runners.domain.root_cause import FactRole, RootCause, RootCauseFact
from runners.run._conclusion_text import Found, Reading, Stance, analyse, tokens

__all__ = ["RULE_JUDGE", "RuleJudge", "asserted_words"]


def _found(reading: Reading, variants: list[str]) -> list[Found]:
    return [f for v in variants for f in reading.find(v)]


def _label(fact: RootCauseFact) -> str:
    return fact.variants[0]


class RuleJudge:
    """The deterministic judge (see the module docstring)."""

    @property
    def name(self) -> str:
        """`rules`."""
        return "rules"

    def judge(self, root_cause: RootCause, conclusion: str, *, question: str = "") -> JudgeVerdict:
        """Whether `conclusion` states `root_cause` (the question is not read: the facts are the case's)."""
        # A verdict depends on these two texts only, and a sweep judges the same conclusion of the same case at
        # every point and epoch: it is remembered, by the root cause's content (a case edited in place is another).
        return _judged(root_cause.model_dump_json(), conclusion)


@lru_cache(maxsize=2048)
def _judged(root_cause_json: str, conclusion: str) -> JudgeVerdict:
    return _judge(RootCause.model_validate_json(root_cause_json), conclusion)


def _judge(root_cause: RootCause, conclusion: str) -> JudgeVerdict:
    reading = analyse(conclusion)
    distractor_clauses: set[int] = set()
    for d in root_cause.distractors:
        places = _found(reading, d.variants)
        asserted = [f for f in places if f.stance is Stance.ASSERTED]
        if asserted:
            return JudgeVerdict(states_root_cause=False, reason=f"asserts a wrong hypothesis: {d.hypothesis}")
        distractor_clauses |= {f.clause for f in places}
    missing: list[str] = []
    sentences: dict[FactRole, set[int]] = {}
    for fact in root_cause.facts:
        places = _found(reading, fact.variants)
        denied = [f for f in places if f.stance is Stance.DENIED and f.clause not in distractor_clauses]
        if denied:
            return JudgeVerdict(states_root_cause=False, reason=f"denies {_label(fact)!r}")
        asserted = [f for f in places if f.stance is Stance.ASSERTED]
        if not asserted:
            hedged = any(f.stance is Stance.HEDGED for f in places)
            missing.append(f"{_label(fact)!r}{' (only hedged)' if hedged else ''}")
            continue
        if fact.role is not FactRole.DETAIL:
            found = {f.sentence for f in asserted}
            sentences[fact.role] = sentences[fact.role] & found if fact.role in sentences else found
    if missing:
        return JudgeVerdict(states_root_cause=False, reason=f"does not state {', '.join(missing)}")
    if (
        FactRole.ENTITY in sentences
        and FactRole.MECHANISM in sentences
        and not (sentences[FactRole.ENTITY] & sentences[FactRole.MECHANISM])
    ):
        return JudgeVerdict(
            states_root_cause=False, reason="names the entity and the mechanism, but not in one sentence"
        )
    return JudgeVerdict(states_root_cause=True, reason="states every fact of the root cause")


def asserted_words(conclusion: str, *, min_length: int = 5) -> list[str]:
    """The words of `conclusion` (normalised tokens of at least `min_length` characters, first occurrence first) that
    it asserts wherever it uses them: each one, as a fact, is one the rule judge finds stated."""
    reading = analyse(conclusion)
    out: list[str] = []
    for word in dict.fromkeys(tokens(conclusion)):
        if len(word) >= min_length and not word[0].isdigit() and word != "*":
            places = reading.find(word)
            if places and all(f.stance is Stance.ASSERTED for f in places):
                out.append(word)
    return out


RULE_JUDGE = RuleJudge()
"""The default judge."""
