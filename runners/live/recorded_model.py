"""A model asked one question at a time over an OpenAI-compatible endpoint, every call through the bench's cassettes
(`runners/store/cassettes.py`): recorded against a live endpoint, replayed offline with record mode `none` (no server,
no key). The model judge and the measured SemanticGuard are both this, each with its own request and parser.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from harness import ChatRequest, ModelCallError, OpenAIChatModel
from runners.plan.options import RecordMode
from runners.store.cassettes import OFFLINE_KEY, CassetteError, CassetteTransport, use_cassette

__all__ = ["RecordedModel", "RecordedModelError"]


class RecordedModelError(RuntimeError):
    """The model could not be asked: its endpoint failed, or a replay's cassette lacks the request (never a reply)."""


class RecordedModel:
    """`model` at `base_url`, at temperature 0, its calls recorded to / replayed from cassettes in `record_mode`."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None,
        record_mode: str = "none",
        timeout_seconds: float = 900.0,
        max_output_tokens: int | None = None,
    ) -> None:
        self.model = model
        self.timeout_seconds = timeout_seconds
        self._record_mode = record_mode
        replaying = RecordMode(record_mode) is RecordMode.NONE
        self._chat = OpenAIChatModel(
            model, base_url=base_url, timeout_seconds=timeout_seconds, temperature=0.0,
            max_output_tokens=max_output_tokens, transport=partial(CassetteTransport, require_binding=True),
            api_key=OFFLINE_KEY if replaying else None,
        )  # fmt: skip

    @property
    def name(self) -> str:
        """`model:<model>`."""
        return f"model:{self.model}"

    def ask(self, request: ChatRequest, cassette: Path) -> str | None:
        """The reply's text to `request`, under the cassette file `cassette` (a failed call: `RecordedModelError`)."""
        try:
            with use_cassette(cassette, self._record_mode):
                return self._chat.complete(request).message.content
        except (ModelCallError, CassetteError) as exc:
            raise RecordedModelError(f"{self.name}: {str(exc).splitlines()[0][:200]}") from None
