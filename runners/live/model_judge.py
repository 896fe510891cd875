"""The model judge: an OpenAI-compatible model asked, with a rubric (the root cause's statement, its facts and the
case's distractors), whether a conclusion states the root cause; its reply is a verdict and a reason.

Its calls go through the bench's cassettes (`runners/store/cassettes.py`), one file per (judge model, root cause):
recorded against a live endpoint (`record_mode` `new_episodes`: a case's answers share a cassette), replayed offline
with `none`, so CI re-judges without a server. A reply that is not a verdict counts as a fail (a judge that cannot
say is not a pass); a call that fails, or a replay the cassette does not hold, is a `ModelJudgeError`, never a verdict.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from harness import ChatRequest, ModelPurpose, SystemMessage, UserMessage
from runners.domain.judge import JudgeVerdict
from runners.domain.root_cause import RootCause
from runners.live.recorded_model import RecordedModel, RecordedModelError
from runners.store.cassettes import cassette_path

__all__ = ["JUDGE_RUBRIC", "ModelJudge", "ModelJudgeError"]

JUDGE_RUBRIC = (
    "You grade a diagnosis of an incident. You receive the operator's question, the correct root cause as a "
    "statement, the facts a correct answer must state (any wording), and wrong hypotheses. A conclusion passes only "
    "if it asserts the root cause: every fact stated as true (not denied, not merely possible), and none of the wrong "
    "hypotheses asserted. A conclusion that restates the symptom or names no specific cause fails. Answer with JSON "
    'only: {"verdict": "PASS" | "FAIL", "reason": "<one sentence>"}'
)
_WORD = re.compile(r"\b(PASS|FAIL)\b")


class ModelJudgeError(RuntimeError):
    """The model judge could not judge: its endpoint failed, or a replay's cassette lacks the request."""


def _parse(text: str | None) -> JudgeVerdict:
    body = (text or "").strip().strip("`").removeprefix("json").strip()
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict) and data.get("verdict") in ("PASS", "FAIL"):
        reason = str(data.get("reason") or "")[:300] or "(no reason given)"
        return JudgeVerdict(states_root_cause=data["verdict"] == "PASS", reason=reason)
    words = set(_WORD.findall((text or "").upper()))
    if len(words) == 1:
        return JudgeVerdict(states_root_cause=words.pop() == "PASS", reason=(text or "").strip()[:300])
    return JudgeVerdict(states_root_cause=False, reason="the judge's reply is no verdict (counted as a fail)")


class ModelJudge:
    """A judge that asks `model` (an OpenAI-compatible endpoint at `base_url`) under cassettes in `cassettes`."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None,
        cassettes: Path,
        record_mode: str = "none",
        timeout_seconds: float = 900.0,
    ) -> None:
        self._cassettes = cassettes
        self._model = RecordedModel(
            model, base_url=base_url, record_mode=record_mode, timeout_seconds=timeout_seconds, max_output_tokens=200
        )

    @property
    def name(self) -> str:
        """`model:<model>`."""
        return self._model.name

    def judge(self, root_cause: RootCause, conclusion: str, *, question: str) -> JudgeVerdict:
        """Ask the model once (a failed call is a `ModelJudgeError`)."""
        rubric = {
            "question": question,
            "root_cause": root_cause.statement,
            "facts": [f.variants for f in root_cause.facts],
            "wrong_hypotheses": [d.hypothesis for d in root_cause.distractors],
            "conclusion": conclusion,
        }
        request = ChatRequest(
            messages=(SystemMessage(JUDGE_RUBRIC), UserMessage(json.dumps(rubric, ensure_ascii=False))),
            purpose=ModelPurpose.SEMANTIC_GUARD, timeout_seconds=self._model.timeout_seconds,
        )  # fmt: skip
        # one cassette per statement: a case's answers share it, each matched by its request body
        key = hashlib.sha256(root_cause.statement.encode()).hexdigest()[:12]
        path = cassette_path(self._cassettes, f"judge-{self._model.model}", key, 0)
        try:
            return _parse(self._model.ask(request, path))
        except RecordedModelError as exc:
            raise ModelJudgeError(str(exc)) from None
