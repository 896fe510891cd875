"""OpenAIChatModel: any OpenAI-compatible endpoint through the `openai` SDK.

The SDK's hidden retries are off (`max_retries=0`); the Harness retries on a stable
classification (harness/retry.py). Assistant `content` is sent as "" rather than null when it
carries tool calls (llama.cpp's server answers 500 to null), and missing usage is tolerated.

Transport stack of the SDK client, outermost first: an optional wrapper (the `transport` hook: the
bench records and replays there), the per-endpoint in-flight cap (one semaphore per base URL, shared by
every model against it), httpx2's connection pool (keep-alive sized to the cap, so connections are reused
rather than churned). A wrapper that knows better than the SDK why a request failed (a replaying transport
that holds no answer for it) raises a `ModelCallError` of its own: the caller gets it as raised.
"""

from __future__ import annotations

import functools
import json
import os
import ssl
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import httpx2
import openai

from harness.contracts import ModelErrorKind, ToolChoiceMode
from harness.models.base import (
    AssistantMessage,
    ChatMessage,
    ChatRequest,
    ModelCallError,
    ModelResponse,
    ToolCallFormat,
    ToolCallRequest,
    ToolMessage,
    Usage,
)


class ModelConfigError(ValueError):
    """The model cannot be configured (e.g. the API key variable is not set)."""


DEFAULT_BASE_URL = "https://api.openai.com/v1"
REQUIRED_FIRST = "required-first"
"""The `tool_choice` setting that requires a call on the first turn and lets the model call or finish after it."""
REQUIRED_UNTIL_EVIDENCE = "required-until-evidence"
"""The `tool_choice` setting that requires a call until an observation has held records, then lets the model call or
finish (STOP_REQUIRED still allows the Draft alone)."""

TransportWrapper = Callable[[httpx2.BaseTransport], httpx2.BaseTransport]
"""Wraps the SDK's HTTP transport (record, replay, inspect); a `ModelCallError` it raises reaches the caller."""


class EndpointSlots:
    """At most `limit` requests in flight to one endpoint, a freed slot handed to the request that has waited longest.

    threading's semaphores are not first come, first served: the thread that releases a slot may take it back before
    the waiter it woke runs, and one that loses the race queues again behind the others, so under load a run could
    wait for as long as two others kept the slot between them (and end in a pool timeout)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._free = limit
        self._waiting: deque[threading.Lock] = deque()

    def acquire(self, timeout: float | None = None) -> bool:
        """Take a slot, waiting up to `timeout` seconds (None: as long as it takes); False when none came."""
        with self._lock:
            if self._free and not self._waiting:
                self._free -= 1
                return True
            handed = threading.Lock()
            handed.acquire()
            self._waiting.append(handed)
        if handed.acquire(timeout=-1 if timeout is None else max(timeout, 0.0)):
            return True
        with self._lock:
            if handed in self._waiting:
                self._waiting.remove(handed)
                return False
        return True  # a slot was handed over as the wait ended: it is this request's

    @property
    def waiting(self) -> int:
        """How many requests wait for a slot now."""
        with self._lock:
            return len(self._waiting)

    def release(self) -> None:
        """Give the slot to the longest waiter, or back to the pool."""
        with self._lock:
            if self._waiting:
                self._waiting.popleft().release()
            else:
                self._free += 1


_SLOTS: dict[str, EndpointSlots] = {}
_SLOTS_LOCK = threading.Lock()


def _endpoint_key(base_url: str | None) -> str:
    """The endpoint a base URL names, as the SDK resolves it (OPENAI_BASE_URL when none is given)."""
    return (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """The TLS settings every client of this process verifies servers with: httpx2's default (the CA bundle, or
    SSL_CERT_FILE / SSL_CERT_DIR as set when the first client is made). Built once: loading the CA bundle costs
    ~20 ms, which a bench that makes a client per run (and its preflight) would pay every time."""
    return httpx2.create_ssl_context()


def endpoint_slots(base_url: str | None, limit: int) -> EndpointSlots:
    """The in-flight slots of one endpoint (a new limit replaces the old one for later requests)."""
    key = _endpoint_key(base_url)
    with _SLOTS_LOCK:
        slots = _SLOTS.get(key)
        if slots is None or slots.limit != limit:
            slots = _SLOTS[key] = EndpointSlots(limit)
        return slots


def read_body(response: httpx2.Response) -> bytes:
    """The whole body of a transport-level response, its stream closed (answers are small)."""
    stream = response.stream
    assert isinstance(stream, httpx2.SyncByteStream)
    try:
        return b"".join(stream)
    finally:
        stream.close()


class CappedTransport(httpx2.BaseTransport):
    """Holds one endpoint slot from sending a request until its body is fully read.

    A run waiting in Harness backoff (429 Retry-After, 5xx) holds no slot, so it never stalls the
    other runs. Waiting longer than the request's pool timeout is httpx2's own PoolTimeout.
    """

    def __init__(self, inner: httpx2.BaseTransport, slots: EndpointSlots) -> None:
        self._inner = inner
        self._slots = slots

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send under a slot; the body is read before the slot is released (responses are small)."""
        timeout = (request.extensions.get("timeout") or {}).get("pool")
        if not self._slots.acquire(timeout=timeout):
            raise httpx2.PoolTimeout("no free in-flight slot for this endpoint within the timeout", request=request)
        try:
            response = self._inner.handle_request(request)
            content = read_body(response)
        finally:
            self._slots.release()
        response.stream = httpx2.ByteStream(content)
        return response

    def close(self) -> None:
        """Close the pool underneath."""
        self._inner.close()


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


def _explain_connection_error(exc: BaseException) -> str:
    """The innermost cause of a connection error, as one readable line."""
    *_, last = _exception_chain(exc)
    return f"{type(last).__name__}: {last}"


def _classify(exc: Exception) -> ModelCallError:
    """Map SDK exceptions onto the Harness's stable classification; a `ModelCallError` a transport wrapper raised
    (as is, or inside the SDK's connection error) is its own classification."""
    for cur in _exception_chain(exc):
        if isinstance(cur, ModelCallError):
            return cur
    if isinstance(exc, openai.RateLimitError):
        return ModelCallError(ModelErrorKind.RATE_LIMIT, f"429 rate limited: {exc.message}", _retry_after(exc))
    if isinstance(exc, openai.APITimeoutError):
        return ModelCallError(ModelErrorKind.TIMEOUT, "request timed out")
    if isinstance(exc, openai.APIConnectionError):
        inner = _explain_connection_error(exc)
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


def _wire_arguments(call: ToolCallRequest) -> str:
    """The call's arguments as echoed in the history: verbatim when they are JSON; otherwise as one JSON
    string (llama.cpp's server answers HTTP 500 to a history holding unparseable arguments, and the
    rejection already told the model what was wrong)."""
    try:
        json.loads(call.arguments)
    except (ValueError, RecursionError):
        return json.dumps(call.arguments, ensure_ascii=False)
    return call.arguments


def to_openai_messages(messages: tuple[ChatMessage, ...]) -> list[dict[str, Any]]:
    """Harness messages -> OpenAI wire format."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, AssistantMessage):
            item: dict[str, Any] = {"role": "assistant", "content": m.content or ""}
            if m.tool_calls:
                item["tool_calls"] = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": _wire_arguments(c)}}
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


def text_tool_call(content: str | None) -> ToolCallRequest | None:
    """The call a reply wrote as text under `ToolCallFormat.JSON`: the whole content is one JSON object with
    exactly the keys `name` (a string) and `arguments` (an object, or a string holding one). Anything else is
    the model's final answer, read as the Draft. The id is left empty: the Harness assigns one."""
    if content is None:
        return None
    try:
        data = json.loads(content)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or set(data) != {"name", "arguments"} or not isinstance(data["name"], str):
        return None
    args = data["arguments"]
    if isinstance(args, dict):
        text = json.dumps(args, ensure_ascii=False)
    elif isinstance(args, str):
        text = args
    else:
        return None
    return ToolCallRequest("", data["name"], text, written_as_text=True)


def _held_records(message: ChatMessage) -> bool:
    """Whether `message` is an observation of a completed call that returned records (`evidence_status` EVIDENCE)."""
    if not isinstance(message, ToolMessage):
        return False
    try:
        data = json.loads(message.content)
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("evidence_status") == "EVIDENCE"


def json_reply_format(request: ChatRequest, tool_choice: str | dict[str, Any]) -> dict[str, Any] | None:
    """The `response_format` of `ToolCallFormat.JSON`: the reply is one JSON object, a call of a tool
    `tool_choice` allows (`{"name": <that tool>, "arguments": <its parameters>}`) or, unless a call is
    required, the final answer (the request's answer schema). None when there is nothing to constrain."""
    if not request.tools:
        return None
    if tool_choice == "none":
        allowed: tuple[str, ...] = ()
    elif isinstance(tool_choice, dict):
        allowed = (str(tool_choice["function"]["name"]),)
    else:
        allowed = tuple(t.name for t in request.tools)
    options: list[dict[str, Any]] = [
        {"type": "object", "properties": {"name": {"const": t.name}, "arguments": t.parameters},
         "required": ["name", "arguments"], "additionalProperties": False}
        for t in request.tools if t.name in allowed
    ]  # fmt: skip
    defs: dict[str, Any] = {}
    if request.answer_schema is not None and (tool_choice in ("auto", "none") or not options):
        answer: dict[str, Any] = dict(request.answer_schema)
        found = answer.pop("$defs", None)
        defs = dict(found) if isinstance(found, dict) else {}  # `$ref`s resolve from the root of the whole schema
        options.append(answer)
    if not options:
        return None
    schema: dict[str, Any] = options[0] if len(options) == 1 else {"anyOf": options}
    if defs:
        schema = {**schema, "$defs": defs}
    return {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}


def parse_completion(payload: Any, *, text_calls: bool = False) -> ModelResponse:
    """A chat.completion (JSON dict or SDK object) -> ModelResponse. A body that is no chat completion at
    all (no choices, no message) is NOT_A_COMPLETION: the endpoint's fault, not the model's answer.
    `text_calls`: a reply with no `tool_calls` whose text is one call (`text_tool_call`) is that call."""
    if isinstance(payload, list | str | int | float | bool) or payload is None:
        raise ModelCallError(ModelErrorKind.NOT_A_COMPLETION, f"the response is a JSON {type(payload).__name__}, "
                             "not a chat completion object")  # fmt: skip
    choices = _get(payload, "choices")
    if not choices or not isinstance(choices, list | tuple):
        raise ModelCallError(ModelErrorKind.NOT_A_COMPLETION, "the response has no choices")
    choice = choices[0]
    msg = _get(choice, "message")
    if msg is None:
        raise ModelCallError(ModelErrorKind.NOT_A_COMPLETION, "the first choice has no message")
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
    if text_calls and not calls and isinstance(content, str):
        written = text_tool_call(content)
        if written is not None:
            calls, content = [written], None  # the text was the call: echoed back as a call, not twice
    return ModelResponse(
        AssistantMessage(content if isinstance(content, str) else None, tuple(calls)),
        tokens,
        _get(choice, "finish_reason"),
    )


class OpenAIChatModel:
    """A model behind an OpenAI-compatible `/v1/chat/completions` endpoint.

    The key is `api_key` when given, else the environment variable `api_key_env`; a local server (a `base_url`
    given) needs none. `transport` wraps the SDK's HTTP transport (`TransportWrapper`): the hook a recording or
    replaying layer binds to. `max_in_flight` caps the requests in flight to the endpoint over every model of the
    process that uses it.
    """

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
        tool_call_format: ToolCallFormat = ToolCallFormat.NATIVE,
        max_in_flight: int | None = None,
        transport: TransportWrapper | None = None,
        api_key: str | None = None,
    ) -> None:
        key = api_key or os.environ.get(api_key_env)
        if not key:
            if base_url is None:
                raise ModelConfigError(
                    f"environment variable {api_key_env} is not set; export it or pass --api-key-env NAME"
                )
            else:
                key = "not-needed"  # local servers (vLLM, Ollama, llama.cpp) ignore the key
        if max_in_flight is not None and max_in_flight < 1:
            raise ModelConfigError(f"max_in_flight must be >= 1, got {max_in_flight}")
        self._model = model
        self._key = key
        # Sent explicitly whenever tools are present, "auto" included: some servers (llama-cpp-python's
        # chatml-function-calling) show the model no tools at all when tool_choice is absent.
        # "none"/"required" are sent as such; "required-first" sends "required" on the first turn and "auto" after
        # it; "required-until-evidence" sends "required" until an observation held records, then "auto"; any other
        # value forces that tool by name.
        self._tool_choice = tool_choice
        # One pending call at a time (docs/architecture.md §4.4): ask for one call per turn. None = not sent, for
        # endpoints that refuse the field.
        self._parallel_tool_calls = parallel_tool_calls
        self._tool_call_format = tool_call_format
        self._temperature = temperature
        self._max_output_tokens = max_output_tokens
        self._base_url = _endpoint_key(base_url)
        # Keep-alive as large as the cap: above httpx2's 20 idle connections each extra request in
        # flight would open (and later close) a fresh TCP connection.
        keepalive = 100 if max_in_flight is None else max_in_flight
        http_client = openai.DefaultHttpxClient(
            timeout=timeout_seconds,
            limits=httpx2.Limits(max_connections=None, max_keepalive_connections=keepalive),
            verify=_tls_context(),
        )
        slots = endpoint_slots(base_url, max_in_flight) if max_in_flight is not None else None

        def stack(inner: httpx2.BaseTransport) -> httpx2.BaseTransport:
            capped = CappedTransport(inner, slots) if slots is not None else inner
            return transport(capped) if transport is not None else capped

        # Wrap the pool httpx2 chose and any proxy it mounted from the environment (passing our own
        # `transport=` would silently drop HTTPS_PROXY/NO_PROXY handling).
        http_client._transport = stack(http_client._transport)
        http_client._mounts = {p: None if t is None else stack(t) for p, t in http_client._mounts.items()}
        self._client = openai.OpenAI(
            api_key=key, base_url=base_url, max_retries=0, timeout=timeout_seconds, http_client=http_client
        )

    @staticmethod
    def resolve_base_url(base_url: str | None) -> str:
        """The endpoint a base URL names, as the SDK resolves it (`OPENAI_BASE_URL`, else the OpenAI API, when
        none is given), without a trailing slash."""
        return _endpoint_key(base_url)

    @staticmethod
    def classify_error(exc: Exception) -> ModelCallError:
        """An exception of the `openai` SDK (or of the transport under it) as the Harness's stable classification:
        what `complete` raises for it, and what a caller probing the endpoint through `client` reports."""
        return _classify(exc)

    @property
    def client(self) -> openai.OpenAI:
        """The SDK client (the endpoint preflight probes through it: same URL, key and transport)."""
        return self._client

    @property
    def base_url(self) -> str:
        """The endpoint's base URL as resolved (OPENAI_BASE_URL or the official API when none given)."""
        return self._base_url

    @property
    def name(self) -> str:
        """`openai:<model>`."""
        return f"openai:{self._model}"

    def complete(self, request: ChatRequest) -> ModelResponse:
        """One HTTP round trip; errors become ModelCallError."""
        # messages and tools are plain JSON built here; sending them through `extra_body` skips the
        # SDK's recursive TypedDict transform (measured: ~40% of a replayed run). Same wire body.
        body: dict[str, Any] = {"messages": to_openai_messages(request.messages)}
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in request.tools
            ]
        if request.tools:
            body["tool_choice"] = self._wire_tool_choice(request)
            if self._parallel_tool_calls is not None:
                body["parallel_tool_calls"] = self._parallel_tool_calls
        text_calls = self._tool_call_format is ToolCallFormat.JSON
        if text_calls:
            reply_format = json_reply_format(request, body.get("tool_choice", "none"))
            if reply_format is not None:
                body["response_format"] = reply_format
        if self._temperature is not None:
            body["temperature"] = self._temperature
        if self._max_output_tokens is not None:
            body["max_tokens"] = self._max_output_tokens
        # The body is plain JSON built here, posted through the SDK's own client (auth, headers, errors,
        # timeouts): `chat.completions.create` would run its recursive TypedDict transform over the same
        # body first (measured ~0.9 ms per request, the largest client-side cost at high concurrency).
        payload: dict[str, Any] = {"model": self._model, **body}
        try:
            # The raw response skips building the SDK's pydantic models; the JSON body is parsed here.
            response = self._client.post(
                "/chat/completions", cast_to=httpx2.Response, body=payload, options={"timeout": request.timeout_seconds}
            )
        except ModelCallError as err:  # the transport wrapper's own classification
            raise self._redacted(err) from None
        except Exception as exc:
            raise self._redacted(_classify(exc)) from None
        try:
            completion = response.json()
        except (ValueError, RecursionError):  # a 2xx that is not JSON (an HTML page, a banner, a cut or too deep body)
            raise self._redacted(self._not_a_completion(response)) from None
        try:
            return parse_completion(completion, text_calls=text_calls)
        except ModelCallError as err:
            if err.kind is ModelErrorKind.NOT_A_COMPLETION:
                raise self._redacted(ModelCallError(err.kind, f"endpoint {self._base_url}: {err}"[:500])) from None
            raise
        except Exception as exc:
            raise self._redacted(_classify(exc)) from None

    def _not_a_completion(self, response: httpx2.Response) -> ModelCallError:
        """The typed error of a 2xx answer whose body is not JSON, naming the endpoint and what came back."""
        ctype = response.headers.get("content-type", "no content-type")
        head = response.text[:80]
        return ModelCallError(
            ModelErrorKind.NOT_A_COMPLETION,
            f"endpoint {self._base_url} answered HTTP {response.status_code} ({ctype}) with a body that is not a "
            f"chat completion: {head!r}"[:500],
        )

    def _wire_tool_choice(self, request: ChatRequest) -> str | dict[str, Any]:
        """The `tool_choice` field: "none" after STOP_REQUIRED, else the configured choice (`required-first`:
        "required" until the model has answered once, then "auto", so it may call or finish)."""
        if request.tool_choice is ToolChoiceMode.NONE or self._tool_choice == "none":
            return "none"
        if self._tool_choice == REQUIRED_FIRST:
            answered = any(isinstance(m, AssistantMessage) for m in request.messages)
            return "auto" if answered else "required"
        if self._tool_choice == REQUIRED_UNTIL_EVIDENCE:
            return "auto" if any(_held_records(m) for m in request.messages) else "required"
        if self._tool_choice in ("auto", "required"):
            return self._tool_choice
        return {"type": "function", "function": {"name": self._tool_choice}}

    def redact(self, text: str) -> str:
        """`text` without the API key (endpoints echo it back in error messages)."""
        return text.replace(self._key, "[REDACTED]") if len(self._key) >= 8 else text

    def _redacted(self, err: ModelCallError) -> ModelCallError:
        """An endpoint may echo the key back in its error text; it never reaches a trace or a log."""
        text = str(err)
        redacted = self.redact(text)
        return err if redacted == text else ModelCallError(err.kind, redacted, err.retry_after)

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()
