"""The model judge over an OpenAI-compatible endpoint: its rubric carries the root cause's statement, facts and
distractors; its verdicts are recorded into cassettes and replayed offline (no server), so CI re-judges without one; a
reply that is no verdict fails the answer; a replay the cassette lacks is an error, never a verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runners.domain.root_cause import Distractor, FactRole, RootCause, RootCauseFact
from runners.live.model_judge import ModelJudge, ModelJudgeError
from tests._fake_endpoint import completion, serve

CAUSE = RootCause(
    statement="The TLS certificate of the webhook endpoint expired.",
    facts=[RootCauseFact(role=FactRole.ENTITY, variants=["cert*"]),
           RootCauseFact(role=FactRole.MECHANISM, variants=["expir*"])],
    distractors=[Distractor(hypothesis="our signing secret expired", variants=["signing secret"])],
)  # fmt: skip


def test_recorded_verdicts_replay_offline(tmp_path: Path) -> None:
    with serve() as ep:
        ep.push(200, completion('{"verdict": "PASS", "reason": "states the expiry"}'))
        ep.push(200, completion("I think this FAIL s"))
        ep.push(200, completion("no idea"))
        live = ModelJudge("m", base_url=ep.base_url, cassettes=tmp_path, record_mode="new_episodes")
        first = live.judge(CAUSE, "the certificate expired", question="why?")
        second = live.judge(CAUSE, "the signing secret expired", question="why?")
        third = live.judge(CAUSE, "something broke", question="why?")
        rubric = json.loads(ep.requests[0]["messages"][1]["content"])
    assert first.states_root_cause and first.reason == "states the expiry"
    assert not second.states_root_cause and not third.states_root_cause
    assert "no verdict" in third.reason
    assert rubric["root_cause"] == CAUSE.statement and rubric["wrong_hypotheses"] == ["our signing secret expired"]
    assert rubric["facts"] == [["cert*"], ["expir*"]] and rubric["conclusion"] == "the certificate expired"
    # the server is gone: the same judgements replay from the cassette, another answer is an error
    replay = ModelJudge("m", base_url="http://127.0.0.1:9/v1", cassettes=tmp_path, record_mode="none")
    assert replay.judge(CAUSE, "the certificate expired", question="why?") == first
    assert replay.judge(CAUSE, "the signing secret expired", question="why?") == second
    with pytest.raises(ModelJudgeError, match="model:m"):
        replay.judge(CAUSE, "an answer never recorded", question="why?")
