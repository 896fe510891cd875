"""The model under test as the bench names it: `scripted`, `scripted:<profile>[?k=v]` or `openai:<model-name>`.

The one parser of that text: every other module takes the parsed `ModelSpec` (or asks `model_kind`), so the
spelling of a model is decided here and nowhere else. The parser checks the shape only; whether a profile exists
is the profiles' to say (runners/domain/profiles.py), when the run is planned.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_MODEL",
    "DEFAULT_PROFILE",
    "ModelKind",
    "ModelSpec",
    "ModelSpecError",
    "model_kind",
    "parse_model",
]

DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
"""The environment variable an `openai:` model's API key is read from unless `--api-key-env` names another."""
DEFAULT_MODEL = "scripted"
"""The model of a run that names none: the scripted model, reference profile (no network)."""
DEFAULT_PROFILE = "reference"
"""The profile of `scripted` and `scripted:` (the case's own trajectory)."""
EXPECTED = "expected 'scripted', 'scripted:<profile>' or 'openai:<model-name>'"
"""What a model text must look like, for the message that refuses one."""


class ModelKind(StrEnum):
    """Which model answers a run's requests."""

    SCRIPTED = "scripted"
    """The scripted model: plays a profile of each case's trajectory, sends no request."""
    OPENAI = "openai"
    """An OpenAI-compatible chat endpoint (the OpenAI API or a local server)."""


class ModelSpecError(ValueError):
    """The text is none of the model spellings; the message says which are."""


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A parsed model text."""

    kind: ModelKind
    """Scripted or openai."""
    name: str
    """The profile (scripted; `reference` when none is given) or the model name sent to the endpoint (openai)."""
    raw: str
    """The text as given (what runs are stored and labelled by)."""

    @property
    def is_openai(self) -> bool:
        """The model is reached over HTTP (cassettes, base URL and API key apply)."""
        return self.kind is ModelKind.OPENAI

    def __str__(self) -> str:
        return self.raw


_SCRIPTED_PREFIX = f"{ModelKind.SCRIPTED.value}:"
_OPENAI_PREFIX = f"{ModelKind.OPENAI.value}:"


def parse_model(text: str) -> ModelSpec:
    """The spec of a model text; `ModelSpecError` when it is none of the spellings."""
    if text == ModelKind.SCRIPTED.value or text.startswith(_SCRIPTED_PREFIX):
        return ModelSpec(ModelKind.SCRIPTED, text.partition(":")[2] or DEFAULT_PROFILE, text)
    if text.startswith(_OPENAI_PREFIX) and len(text) > len(_OPENAI_PREFIX):
        return ModelSpec(ModelKind.OPENAI, text.partition(":")[2], text)
    raise ModelSpecError(EXPECTED)


def model_kind(text: str) -> ModelKind | None:
    """The kind of a model text, None when it is none of the spellings (the plan refuses it, naming them)."""
    try:
        return parse_model(text).kind
    except ModelSpecError:
        return None
