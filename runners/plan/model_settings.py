"""The model under test and how it is asked (`ModelSettings`), and the marker (`BenchSetting`, a `Flag` of
runners/plan/flags.py) by which a settings field says how the bench exposes it — its flag, column and sweep axis.
`settings.py` views these fields and `HarnessConfig`'s (with the markers `bench_config.py` puts on them) through the
flag engine."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, field_validator, model_validator

from harness import ToolCallFormat
from runners.domain.model_spec import (
    DEFAULT_API_KEY_ENV,
    DEFAULT_MODEL,
    ModelKind,
    ModelSpec,
    ModelSpecError,
    parse_model,
)
from runners.plan.flags import Flag

__all__ = ["TOOL_CHOICE_MODES", "WIRE_TOOL_CHOICES", "BenchSetting", "ModelSettings", "ParallelToolCalls"]

WIRE_TOOL_CHOICES = ("auto", "none", "required")
"""The `tool_choice` values sent on the wire as they are (the OpenAI API's)."""
TOOL_CHOICE_MODES = (*WIRE_TOOL_CHOICES, "required-first", "required-until-evidence")
"""The `tool_choice` values that name no tool (`required-first`: a call on the first turn, then a call or the Draft;
`required-until-evidence`: a call until an observation held records, then a call or the Draft). A new one is added
here: the flag's metavar, its check and its refusal read this tuple."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchSetting(Flag):
    """How the bench exposes a settings field: a `Flag` (its spelling, metavar, older spellings) plus what a setting
    is beyond a flag — its DuckDB column, whether it is a sweep axis, whether resume may change it (a field without
    one is exposed under its own name, not sweepable)."""

    public_name: str | None = None
    """The DuckDB column, the key in stored settings and the name in sweep labels; default: the field name."""
    sweepable: bool = False
    """`sweep` takes a comma list for it and makes it a grid axis; `case_runs` carries it as a column."""
    sweep_default: tuple[int | float | str, ...] = ()
    """The sweep's axis when the flag is not given (default: the field's default alone)."""
    endpoint: bool = False
    """Says where the model is reached, not what is measured: `--resume` may take a new value."""


class ParallelToolCalls(StrEnum):
    """Whether the request asks for one tool call per assistant turn."""

    TRUE = "true"
    """Allow several calls per turn."""
    FALSE = "false"
    """One call per turn (one pending call at a time, docs/architecture.md §4.4)."""
    OMIT = "omit"
    """Do not send the field (for endpoints that refuse it)."""

    @property
    def wire(self) -> bool | None:
        """The `parallel_tool_calls` value sent (None: not sent)."""
        return {ParallelToolCalls.TRUE: True, ParallelToolCalls.FALSE: False}.get(self)


def model_spec(value: object) -> object:
    """`--model`'s text as its typed spec: the one place a model text is parsed (its shape here, whether a scripted
    profile exists by the profiles); a spec passes as it is. A ValueError names what is wrong."""
    if not isinstance(value, str):
        return value
    spec = parse_model(value)
    if spec.kind is ModelKind.SCRIPTED:
        from runners.domain.profiles import parse_profile  # lazy: the profiles bring the evaluation-set module

        parse_profile(spec.name)
    return spec


class ModelSettings(BaseModel):
    """The model under test and how it is asked; declared once like HarnessConfig."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True, arbitrary_types_allowed=True)

    model: Annotated[ModelSpec, BeforeValidator(model_spec), PlainSerializer(str), BenchSetting(metavar="MODEL")] = (
        Field(default=parse_model(DEFAULT_MODEL), examples=["openai:scripted:reference"])
    )
    """'scripted', 'scripted:<profile>' or 'openai:<model-name>'."""
    base_url: Annotated[str | None, BenchSetting(metavar="URL", endpoint=True)] = Field(
        default=None, examples=["http://127.0.0.1:8765/v1"]
    )
    """OpenAI-compatible base URL (vLLM, Ollama, llama.cpp, serve-sim); unset: the OpenAI API."""
    api_key_env: Annotated[str, BenchSetting(metavar="VAR", endpoint=True)] = Field(
        default=DEFAULT_API_KEY_ENV, examples=["HB_TEST_KEY"]
    )
    """Environment variable holding the API key (local servers need none)."""
    tool_choice: Annotated[str, BenchSetting(metavar="{" + ",".join((*TOOL_CHOICE_MODES, "TOOL")) + "}")] = Field(
        default="auto", examples=["kb_search"]
    )
    """OpenAI tool_choice sent with the tools (auto, none, required, required-first, required-until-evidence); a
    tool name forces that tool; required-first sends required on the first turn and auto after it (a call first, then
    a call or the Draft); required-until-evidence sends required until an observation held records, then auto (after
    STOP_REQUIRED: none, the Draft alone)."""
    parallel_tool_calls: ParallelToolCalls = ParallelToolCalls.FALSE
    """Ask for one tool call per turn (false), allow several (true), or omit the field."""
    temperature: float = Field(default=0.0, ge=0, le=2)
    """Sampling temperature."""
    tool_call_format: ToolCallFormat = ToolCallFormat.NATIVE
    """native: the endpoint returns the calls in tool_calls; json: each reply is constrained (response_format) to
    one JSON object, a tool call or the Draft, and the call is read from the text."""

    guard_model: Annotated[str | None, BenchSetting(metavar="MODEL")] = Field(
        default=None, examples=["openai:qwen2.5-coder-1.5b"]
    )
    """The SemanticGuard's model, 'openai:<model-name>' (unset: the agent's own model, which then judges its own
    conclusions: a report says so per verdict)."""
    guard_base_url: Annotated[str | None, BenchSetting(metavar="URL", endpoint=True)] = Field(
        default=None, examples=["http://127.0.0.1:8766/v1"]
    )
    """The guard model's OpenAI-compatible base URL (unset: --base-url)."""

    @field_validator("guard_model")
    @classmethod
    def _guard_is_openai(cls, value: str | None) -> str | None:
        if value is None:
            return value
        try:
            spec = parse_model(value)
        except ModelSpecError:
            spec = None
        if spec is None or spec.kind is not ModelKind.OPENAI or not spec.name.strip():
            raise ValueError("expected openai:<model-name> (the guard is asked over an OpenAI-compatible endpoint)")
        return value

    @field_validator("api_key_env")
    @classmethod
    def _variable_name(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
            raise ValueError(f"expected an environment variable name like {DEFAULT_API_KEY_ENV}")
        return value

    @field_validator("tool_choice")
    @classmethod
    def _known_tool(cls, value: str) -> str:
        from runners.domain.evalset import TOOL_NAMES  # lazy: the evaluation-set module is heavy to import

        if value not in TOOL_CHOICE_MODES and value not in TOOL_NAMES:
            modes = ", ".join(TOOL_CHOICE_MODES)
            raise ValueError(f"expected {modes} or a tool name ({', '.join(TOOL_NAMES)})")
        return value

    @model_validator(mode="after")
    def _openai_only(self) -> ModelSettings:
        # The scripted model sends no request: every other model setting would be silently ignored.
        if self.model.kind is ModelKind.SCRIPTED:
            for name, info in type(self).model_fields.items():
                if name != "model" and getattr(self, name) != info.default:
                    raise ValueError(
                        f"--{name.replace('_', '-')} applies to openai:<model-name> only, not to --model {self.model}"
                    )
        return self
