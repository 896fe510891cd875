"""The SemanticGuard measured alone (`harness-bench guard-check`): a model over an OpenAI-compatible endpoint sent the
guard's own request (`runners/run/guard_evidence.py`, built by the Harness's builder under the frozen guard prompt)
and read by the guard's own parser, so a verdict here is the verdict it would give in a run.

Its calls go through the bench's cassettes (`runners/store/cassettes.py`), one file per (guard model, case): recorded
against a live endpoint (`record_mode` `new_episodes`: a case's conclusions share a cassette), replayed offline with
`none`, so CI re-measures without a server. A reply that is no verdict is UNSUPPORTED, as in a run (the guard fails
closed); a call that fails, or a replay the cassette does not hold, is a `ModelGuardError`, never a verdict.
"""

from __future__ import annotations

from pathlib import Path

from harness import SemanticGuardResult, SemanticVerdict, parse_verdict
from runners.live.recorded_model import RecordedModel, RecordedModelError
from runners.run.guard_evidence import GuardEvidence, guard_request
from runners.store.cassettes import cassette_path

__all__ = ["GUARD_CASSETTE_PREFIX", "ModelGuard", "ModelGuardError", "OffGuard"]

GUARD_CASSETTE_PREFIX = "guard-"
"""A guard model's cassettes live under `<cassettes>/guard-<model>/<case>/epoch0.json`."""


class ModelGuardError(RuntimeError):
    """The guard could not be asked: its endpoint failed, or a replay's cassette lacks the request."""


class OffGuard:
    """The SemanticGuard switched off (the ablation's setting): every conclusion passes."""

    @property
    def name(self) -> str:
        """`off`."""
        return "off"

    def check(self, case_id: str, evidence: GuardEvidence, conclusion: str) -> SemanticGuardResult:
        """SUPPORTED, unread."""
        return SemanticGuardResult(SemanticVerdict.SUPPORTED, "the SemanticGuard is switched off")


class ModelGuard:
    """The guard asked of `model` (an OpenAI-compatible endpoint at `base_url`) under cassettes in `cassettes`."""

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
        # as the bench's run builds its guard model (runners/run/_execute.py): temperature 0, no tools
        self._model = RecordedModel(model, base_url=base_url, record_mode=record_mode, timeout_seconds=timeout_seconds)

    @property
    def name(self) -> str:
        """`model:<model>`."""
        return self._model.name

    def check(self, case_id: str, evidence: GuardEvidence, conclusion: str) -> SemanticGuardResult:
        """Ask the model once (a failed call is a `ModelGuardError`)."""
        request = guard_request(evidence, conclusion, self._model.timeout_seconds)
        path = cassette_path(self._cassettes, f"{GUARD_CASSETTE_PREFIX}{self._model.model}", case_id, 0)
        try:
            return parse_verdict(self._model.ask(request, path))
        except RecordedModelError as exc:
            raise ModelGuardError(str(exc)) from None
