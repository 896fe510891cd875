"""OpenAIChatModel: any OpenAI-compatible endpoint through the `openai` SDK.

The SDK's hidden retries are off (`max_retries=0`); the Harness retries on a stable
classification (harness/retry.py). Assistant `content` is sent as "" rather than null when it
carries tool calls (llama.cpp's server answers 500 to null), and missing usage is tolerated.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import openai

from harness.contracts import ModelErrorKind, ToolChoiceMode
from harness.models.base import (
    AssistantMessage,
    ChatMessage,
    ChatRequest,
    ModelCallError,
    ModelResponse,
    ToolCallRequest,
    ToolMessage,
    Usage,
)


class ModelConfigError(ValueError):
    """The model cannot be configured (e.g. the API key variable is not set)."""


def _retry_after(exc: openai.APIStatusError) -> float | None:
    headers = getattr(exc.response, "headers", None)
    if headers is None:
        return None
    value = headers.get("retry-after")
    if value is None:
        ms = headers.get("retry-after-ms")
        try:
            return float(ms) / 1000.0 if ms is not None else None
        except ValueError:
            return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _exception_chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and its causes/contexts, outermost first, each once."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = cur.__cause__ or cur.__context__


def explain_connection_error(exc: BaseException) -> str:
    """The innermost cause of a connection error, as one readable line."""
    *_, last = _exception_chain(exc)
    return f"{type(last).__name__}: {last}"


def _cassette_miss(exc: BaseException) -> str | None:
    """vcrpy's CannotOverwriteExistingCassetteException, raw or inside the SDK's connection error."""
    for cur in _exception_chain(exc):
        if type(cur).__name__ == "CannotOverwriteExistingCassetteException":
            return str(cur).splitlines()[0]
    return None


def classify(exc: Exception) -> ModelCallError:
    """Map SDK exceptions onto the Harness's stable classification."""
    miss = _cassette_miss(exc)
    if miss is not None:
        # Not retryable: replaying the same request against the same cassette misses again.
        return ModelCallError(ModelErrorKind.CLIENT_ERROR, f"cassette miss: {miss}")
    if isinstance(exc, openai.RateLimitError):
        return ModelCallError(ModelErrorKind.RATE_LIMIT, f"429 rate limited: {exc.message}", _retry_after(exc))
    if isinstance(exc, openai.APITimeoutError):
        return ModelCallError(ModelErrorKind.TIMEOUT, "request timed out")
    if isinstance(exc, openai.APIConnectionError):
        inner = explain_connection_error(exc)
        return ModelCallError(ModelErrorKind.CONNECTION, f"connection error: {inner}"[:500])
    if isinstance(exc, openai.APIStatusError):
        code = exc.status_code
        kind = ModelErrorKind.SERVER_ERROR if code >= 500 else ModelErrorKind.CLIENT_ERROR
        if code == 408:
            kind = ModelErrorKind.TIMEOUT
        return ModelCallError(kind, f"HTTP {code}: {exc.message}"[:500], _retry_after(exc))
    if isinstance(exc, (openai.APIResponseValidationError, ValueError, KeyError, TypeError)):
        return ModelCallError(ModelErrorKind.BAD_RESPONSE, f"unusable response: {type(exc).__name__}: {exc}"[:500])
    return ModelCallError(ModelErrorKind.BAD_RESPONSE, f"{type(exc).__name__}: {exc}"[:500])


def to_openai_messages(messages: tuple[ChatMessage, ...]) -> list[dict[str, Any]]:
    """Harness messages -> OpenAI wire format."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, AssistantMessage):
            item: dict[str, Any] = {"role": "assistant", "content": m.content or ""}
            if m.tool_calls:
                item["tool_calls"] = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in m.tool_calls
                ]
            out.append(item)
        elif isinstance(m, ToolMessage):
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content})
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def _get(obj: Any, key: str) -> Any:
    """Field access on the JSON body (dict) or on an SDK model object alike."""
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def parse_completion(payload: Any) -> ModelResponse:
    """A chat.completion (JSON dict or SDK object) -> ModelResponse; raises BAD_RESPONSE when unusable."""
    choices = _get(payload, "choices")
    if not choices or not isinstance(choices, list | tuple):
        raise ModelCallError(ModelErrorKind.BAD_RESPONSE, "the response has no choices")
    choice = choices[0]
    msg = _get(choice, "message")
    if msg is None:
        raise ModelCallError(ModelErrorKind.BAD_RESPONSE, "the first choice has no message")
    calls: list[ToolCallRequest] = []
    for raw in _get(msg, "tool_calls") or []:
        fn = _get(raw, "function") or {}
        name = _get(fn, "name") or ""
        args = _get(fn, "arguments")
        if not isinstance(args, str):
            args = json.dumps(args) if args is not None else ""
        calls.append(ToolCallRequest(str(_get(raw, "id") or ""), str(name), args))
    usage = _get(payload, "usage")
    tokens = Usage(
        int(_get(usage, "prompt_tokens") or 0) if usage else 0,
        int(_get(usage, "completion_tokens") or 0) if usage else 0,
    )
    content = _get(msg, "content")
    return ModelResponse(
        AssistantMessage(content if isinstance(content, str) else None, tuple(calls)),
        tokens,
        _get(choice, "finish_reason"),
    )


class OpenAIChatModel:
    """A model behind an OpenAI-compatible `/v1/chat/completions` endpoint."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_seconds: float = 60.0,
        temperature: float | None = 0.0,
        max_output_tokens: int | None = None,
        tool_choice: str = "auto",
        parallel_tool_calls: bool | None = False,
    ) -> None:
        key = os.environ.get(api_key_env)
        if not key:
            if base_url is None:
                raise ModelConfigError(
                    f"environment variable {api_key_env} is not set; export it or pass --api-key-env NAME"
                )
            key = "not-needed"  # local servers (vLLM, Ollama, llama.cpp) ignore the key
        self._model = model
        self._key = key
        # Sent explicitly whenever tools are present, "auto" included: some servers (llama-cpp-python's
        # chatml-function-calling) show the model no tools at all when tool_choice is absent.
        # "none"/"required" are sent as such; any other value forces that tool by name.
        self._tool_choice = tool_choice
        # One pending call at a time (seed 000 §4): ask for one call per turn. None = not sent, for
        # endpoints that refuse the field.
        self._parallel_tool_calls = parallel_tool_calls
        self._temperature = temperature
        self._max_output_tokens = max_output_tokens
        self._client = openai.OpenAI(api_key=key, base_url=base_url, max_retries=0, timeout=timeout_seconds)

    @property
    def name(self) -> str:
        """`openai:<model>`."""
        return f"openai:{self._model}"

    def complete(self, request: ChatRequest) -> ModelResponse:
        """One HTTP round trip; errors become ModelCallError."""
        # messages and tools are plain JSON built here; sending them through `extra_body` skips the
        # SDK's recursive TypedDict transform (measured: ~40% of a cassette replay). Same wire body.
        body: dict[str, Any] = {"messages": to_openai_messages(request.messages)}
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in request.tools
            ]
        kwargs: dict[str, Any] = {
            "model": self._model,
            "messages": [],
            "timeout": request.timeout_seconds,
            "extra_body": body,
        }
        if request.tools:
            kwargs["tool_choice"] = self._wire_tool_choice(request.tool_choice)
            if self._parallel_tool_calls is not None:
                kwargs["parallel_tool_calls"] = self._parallel_tool_calls
        if self._temperature is not None:
            kwargs["temperature"] = self._temperature
        if self._max_output_tokens is not None:
            kwargs["max_tokens"] = self._max_output_tokens
        try:
            # The raw response skips building the SDK's pydantic models; the JSON body is parsed here.
            raw = self._client.chat.completions.with_raw_response.create(**kwargs)
            completion = raw.http_response.json()
        except ModelCallError:
            raise
        except Exception as exc:
            raise self._redacted(classify(exc)) from None
        try:
            return parse_completion(completion)
        except ModelCallError:
            raise
        except Exception as exc:
            raise self._redacted(classify(exc)) from None

    def _wire_tool_choice(self, mode: ToolChoiceMode) -> str | dict[str, Any]:
        """The `tool_choice` field: "none" after STOP_REQUIRED, else the configured choice."""
        if mode is ToolChoiceMode.NONE or self._tool_choice == "none":
            return "none"
        if self._tool_choice in ("auto", "required"):
            return self._tool_choice
        return {"type": "function", "function": {"name": self._tool_choice}}

    def _redacted(self, err: ModelCallError) -> ModelCallError:
        """An endpoint may echo the key back in its error text; it never reaches a trace or a log."""
        text = str(err)
        if len(self._key) >= 8 and self._key in text:
            return ModelCallError(err.kind, text.replace(self._key, "[REDACTED]"), err.retry_after)
        return err

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()
