"""The rule judge reads a conclusion as a careful person would: whole tokens after normalisation, facts only in clauses
that are not negated, entity and mechanism in one sentence, and a distractor asserted fails the conclusion."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runners.domain.evalset import BUILTIN_DIR, load_cases
from runners.domain.root_cause import Distractor, FactRole, RootCause, RootCauseFact
from runners.run._conclusion_text import Stance, analyse, tokens
from runners.run.rule_judge import RULE_JUDGE

CERT = RootCause(
    statement="The TLS certificate of the webhook endpoint expired.",
    facts=[RootCauseFact(role=FactRole.ENTITY, variants=["cert*", "证书"]),
           RootCauseFact(role=FactRole.MECHANISM, variants=["expir*", "过期"])],
    distractors=[Distractor(hypothesis="our signing secret expired", variants=["signing secret"]),
                 Distractor(hypothesis="the card network's maintenance window", variants=["maintenance"])],
)  # fmt: skip
RULE = RootCause(
    statement="Rollout cfg-2291 lowered rule R-217's threshold from 0.85 to 0.35.",
    facts=[RootCauseFact(role=FactRole.ENTITY, variants=["r-217"]),
           RootCauseFact(role=FactRole.MECHANISM, variants=["threshold*", "cut-off", "lowered"]),
           RootCauseFact(variants=["0.35"])],
)  # fmt: skip
TIMEOUT = RootCause(statement="Orders are cancelled after 300 s.", facts=[RootCauseFact(variants=["300"])])


def passes(cause: RootCause, text: str) -> bool:
    return RULE_JUDGE.judge(cause, text, question="").states_root_cause


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("The endpoint's TLS certificate expired at midnight.", True),
        ("hooks.acme-pay.com 的 TLS 证书已于 6月19日 过期。", True),
        ("It was not the maintenance window; the endpoint's certificate expired.", True),
        ("The certificate is valid and has not expired; our signing secret expired.", False),
        ("Deliveries failed because the certificate expired or did not expire.", False),
        ("The certificate did not expire.", False),
        ("It was the card network's maintenance window; a certificate expired long ago.", False),
        ("Possibly the certificate expired.", False),
        ("The certificate was renewed. Something else expired.", False),
        ("Webhook deliveries failed.", False),
    ],
)
def test_negation_hedges_distractors_and_binding(text: str, ok: bool) -> None:
    assert passes(CERT, text) is ok, RULE_JUDGE.judge(CERT, text, question="").reason


def test_ids_and_numbers_are_whole_tokens() -> None:
    assert passes(RULE, "rule R217's cut-off went from 0.85 to 0.35")
    assert passes(RULE, "R-217: threshold lowered to 0.35 by cfg-2291")
    assert not passes(RULE, "R-2170's threshold went to 0.35")
    assert not passes(RULE, "R-217's threshold went to 0.355")
    assert passes(TIMEOUT, "the order service cancels unconfirmed orders after 300s")
    assert not passes(TIMEOUT, "the order service waits 3000 ms")
    assert tokens("R-217") == tokens("r217") == ("r217",)
    assert tokens("23:00:00 and 2.14.0 and 300ms") == ("23:00:00", "and", "2.14.0", "and", "300", "ms")


def test_a_number_written_longer_matches_but_not_inside_another() -> None:
    reading = analyse("notification 2.14.0 moved the cutoff to 23:00:00")
    assert [f.stance for f in reading.find("2.14")] == [Stance.ASSERTED]
    assert reading.find("23:00") and not reading.find("3:00") and not reading.find("2.1")


def test_a_far_negation_neither_asserts_nor_denies() -> None:
    """'not received within 300s' negates the receipt, not the 300 s; 'not in the allowlist' is a membership."""
    assert [f.stance for f in analyse("confirmation is not received within 300s").find("300")] == [Stance.NEGATED]
    assert [f.stance for f in analyse("IPs that are not in the allowlist").find("allowlist")] == [Stance.ASSERTED]
    assert [f.stance for f in analyse("准备金不足").find("不足")] == [Stance.ASSERTED]


def test_every_reference_success_conclusion_states_its_root_cause() -> None:
    """The scripted model's own SUCCESS conclusions pass the judge (else the scripted cases would fail)."""
    for case in load_cases([str(BUILTIN_DIR)]):
        draft = case.trajectory.draft or {}
        if case.expect.root_cause is not None and isinstance(draft.get("conclusion"), str):
            verdict = RULE_JUDGE.judge(case.expect.root_cause, draft["conclusion"], question=case.question)
            assert verdict.states_root_cause, f"{case.id}: {verdict.reason}"


@given(st.text(max_size=300))
def test_any_text_is_judged_without_error(text: str) -> None:
    verdict = RULE_JUDGE.judge(CERT, text, question="")
    assert isinstance(verdict.states_root_cause, bool) and verdict.reason
    assert tokens(" ".join(tokens(text))) == tokens(text)  # normalising twice changes nothing
