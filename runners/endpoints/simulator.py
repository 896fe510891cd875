"""`harness-bench serve-sim`: an OpenAI-compatible server that plays each case's trajectory.

It uses the very policy code of the in-process ScriptedChatModel (`next_turn`, `guard_answer`),
so a run through the openai SDK over HTTP reaches the same outcome as the in-process run. The
case is chosen from the conversation: the user's question (for the guard, the question in its
payload). The request's `model` field selects the behaviour profile (`scripted` = reference).

To stand in for a hosted endpoint it can add latency (`latency_ms` ± `jitter_ms`, slept in the
request's own thread: other requests are not held up) and inject faults per (case, turn): a held
request the client times out on, a dropped connection, a 500, a 429 with Retry-After.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from harness import (
    GUARD_MARKER,
    AssistantMessage,
    ChatMessage,
    ChatRequest,
    SystemMessage,
    ToolCallRequest,
    ToolMessage,
    ToolSpec,
    UserMessage,
    render_task,
)
from runners.domain.case_setup import task_of
from runners.domain.evalset import EvalCase
from runners.domain.scripted import Trajectory, estimate_usage, guard_answer, next_turn, plain_tools
from runners.endpoints._serving import STOP_POLL_S

TrajectoryFor = Callable[[EvalCase, str], Trajectory]
"""Maps (case, requested model name) to the trajectory to play (behaviour profiles hook in here)."""


class SimulatorError(ValueError):
    """The request cannot be answered (unknown case, malformed body)."""


def _reference(case: EvalCase, model: str) -> Trajectory:
    return case.trajectory


def wire_to_messages(raw: Sequence[Any]) -> list[ChatMessage]:
    """OpenAI wire messages -> harness messages."""
    out: list[ChatMessage] = []
    for m in raw:
        if not isinstance(m, dict):
            raise SimulatorError("each message must be an object")
        role = m.get("role")
        content = m.get("content")
        if isinstance(content, list):  # content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if role == "system":
            out.append(SystemMessage(content or ""))
        elif role == "user":
            out.append(UserMessage(content or ""))
        elif role == "assistant":
            calls = tuple(
                ToolCallRequest(c.get("id", ""), c.get("function", {}).get("name", ""),
                                c.get("function", {}).get("arguments", ""))
                for c in m.get("tool_calls") or []
            )  # fmt: skip
            out.append(AssistantMessage(content, calls))
        elif role == "tool":
            out.append(ToolMessage(m.get("tool_call_id", ""), content or ""))
        else:
            raise SimulatorError(f"unknown message role {role!r}")
    return out


class CaseIndex:
    """Finds the case a conversation belongs to."""

    def __init__(self, cases: Sequence[EvalCase]) -> None:
        self._by_prompt: dict[str, EvalCase] = {}
        self._by_question: dict[str, list[EvalCase]] = {}
        for c in cases:
            self._by_prompt[render_task(task_of(c))] = c
            self._by_question.setdefault(c.question, []).append(c)

    def for_messages(self, messages: Sequence[ChatMessage]) -> tuple[EvalCase, bool]:
        """(case, is_guard_request)."""
        system = next((m.content for m in messages if isinstance(m, SystemMessage)), "")
        user = next((m.content for m in messages if isinstance(m, UserMessage)), None)
        if user is None:
            raise SimulatorError("the conversation has no user message")
        if GUARD_MARKER in system:
            try:
                question = json.loads(user).get("question", "")
            except (ValueError, AttributeError):
                raise SimulatorError("the guard payload is not JSON") from None
            matches = self._by_question.get(question, [])
            if len(matches) != 1:
                raise SimulatorError(f"{len(matches)} cases match the guard question {question[:80]!r}")
            return matches[0], True
        case = self._by_prompt.get(user)
        if case is None:
            raise SimulatorError(f"no case matches the user message {user[:80]!r}")
        return case, False


GUARD_TURN = -1
"""The `turn` of a SemanticGuard request in fault plans and the request log."""


@dataclass(frozen=True, slots=True)
class _Conversation:
    """A parsed chat request."""

    messages: list[ChatMessage]
    """Its messages."""
    case: EvalCase
    """The case it belongs to."""
    is_guard: bool
    """A SemanticGuard request."""

    @property
    def turn(self) -> int:
        """Assistant turns so far, or GUARD_TURN."""
        return GUARD_TURN if self.is_guard else sum(isinstance(m, AssistantMessage) for m in self.messages)


def _parse(index: CaseIndex, body: dict[str, Any]) -> _Conversation:
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise SimulatorError("'messages' must be a non-empty list")
    messages = wire_to_messages(raw)
    case, is_guard = index.for_messages(messages)
    return _Conversation(messages, case, is_guard)


def answer(index: CaseIndex, body: dict[str, Any], trajectory_for: TrajectoryFor = _reference) -> dict[str, Any]:
    """One chat.completions answer as the OpenAI JSON body."""
    return _answer(_parse(index, body), body, trajectory_for)


def _plain(body: dict[str, Any]) -> bool:
    """Whether the request's tools take no envelope (the plain loop): the scripted model then sends the business
    input alone."""
    tools = body.get("tools")
    specs = [ToolSpec(str(f.get("name")), "", f.get("parameters") or {})
             for t in (tools if isinstance(tools, list) else []) if isinstance(t, dict)
             if isinstance(f := t.get("function"), dict)]  # fmt: skip
    return plain_tools(specs)


def _offered(body: dict[str, Any]) -> tuple[ToolSpec, ...]:
    """The tools of a request, as specs (name, description, parameters)."""
    tools = body.get("tools")
    return tuple(ToolSpec(str(f.get("name")), str(f.get("description") or ""), f.get("parameters") or {})
                 for t in (tools if isinstance(tools, list) else []) if isinstance(t, dict)
                 if isinstance(f := t.get("function"), dict))  # fmt: skip


def _answer(conv: _Conversation, body: dict[str, Any], trajectory_for: TrajectoryFor) -> dict[str, Any]:
    messages, case, is_guard = conv.messages, conv.case, conv.is_guard
    model = str(body.get("model") or "scripted")
    traj = trajectory_for(case, model)
    tools = body.get("tools")
    plain = (
        isinstance(tools, list)
        and bool(tools)
        and all(
            isinstance(t, dict)
            and "input" not in (((t.get("function") or {}).get("parameters") or {}).get("properties") or {})
            for t in tools
        )
    )  # a loop without the Harness's envelope: the scripted model sends the business input alone
    reply = AssistantMessage(guard_answer(traj)) if is_guard else next_turn(traj, messages, plain=plain)
    # the tools offered count as the in-process model counts them (their descriptions), so a run's tokens are the
    # same in process, over HTTP and from a cassette
    usage = estimate_usage(ChatRequest(tuple(messages), tools=_offered(body)), reply)
    msg: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
    if reply.tool_calls:
        msg["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in reply.tool_calls
        ]
    return {
        "id": f"chatcmpl-sim-{case.id}-{len(messages)}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls" if reply.tool_calls else "stop"}],
        "usage": {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.input_tokens + usage.output_tokens,
        },
    }


class InjectedFaultKind(StrEnum):
    """What the simulator does instead of answering."""

    TIMEOUT = "timeout"
    """Hold the request (the client times out), then drop the connection without an answer."""
    DISCONNECT = "disconnect"
    """Drop the connection at once, without an answer."""
    SERVER_ERROR = "server_error"
    """Answer 500."""
    RATE_LIMIT = "rate_limit"
    """Answer 429 with Retry-After."""


@dataclass(frozen=True, slots=True)
class InjectedFault:
    """The first `times` requests of one case at one turn fail this way."""

    case_id: str
    """The case whose conversation is hit."""
    turn: int
    """Diagnosis turn (assistant messages so far: 0 = first request), or GUARD_TURN."""
    kind: InjectedFaultKind
    """What happens instead of the answer."""
    times: int = 1
    """How many requests at that (case, turn) fail before it answers normally."""
    retry_after: float | None = None
    """RATE_LIMIT: the Retry-After header in seconds (none sent when None)."""
    hold_seconds: float = 5.0
    """TIMEOUT: how long the request is held before the connection is dropped."""


@dataclass(frozen=True, slots=True)
class SimRequest:
    """One chat request the simulator saw (tests read the order of events from these)."""

    at: float
    """time.monotonic() when it arrived."""
    case_id: str
    """The case it belongs to."""
    turn: int
    """Its turn (GUARD_TURN for the guard)."""
    fault: InjectedFaultKind | None
    """The fault injected instead of the answer, if any."""


class _Server(ThreadingHTTPServer):
    # socketserver's default accept backlog of 5 drops SYNs when dozens of clients connect at once
    # (each drop is a 1 s retransmit on the client).
    request_queue_size = 256
    daemon_threads = True


class SimulatorServer:
    """A threaded HTTP server on host:port (port 0 picks a free one)."""

    def __init__(
        self,
        cases: Sequence[EvalCase],
        host: str = "127.0.0.1",
        port: int = 0,
        trajectory_for: TrajectoryFor = _reference,
        log: Callable[[str], None] | None = None,
        latency_ms: float = 0.0,
        jitter_ms: float = 0.0,
        faults: Sequence[InjectedFault] = (),
        seed: int = 0,
    ) -> None:
        if latency_ms < 0 or jitter_ms < 0:
            raise ValueError("latency and jitter must be >= 0 ms")
        index = CaseIndex(cases)
        self.requests = 0
        self.log: list[SimRequest] = []
        """Every chat request, in arrival order."""
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._rng = random.Random(seed)
        self._faults = {(f.case_id, f.turn): f for f in faults}
        self._seen: dict[tuple[str, int], int] = {}
        self._in_flight = 0
        self.peak_in_flight = 0
        """The most chat requests this server was answering at one time."""

        server_self = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out as two writes: avoid the 40 ms delayed-ACK stall

            def log_message(self, format: str, *args: Any) -> None:
                if log is not None:
                    log(format % args)

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload, ensure_ascii=False).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/v1/models"):
                    self._send(200, {"object": "list", "data": [
                        {"id": "scripted", "object": "model", "created": 0, "owned_by": "harness-bench"}
                    ]})  # fmt: skip
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                arrived = time.monotonic()
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                server_self._enter()
                try:
                    body = json.loads(raw or b"{}")
                    if not isinstance(body, dict):
                        raise SimulatorError("the request body must be a JSON object")
                    conv = _parse(index, body)
                    fault = server_self._arrived(conv)
                    if fault is not None:
                        server_self._sleep_latency(arrived)
                        self._inject(fault)
                        return
                    reply = _answer(conv, body, trajectory_for)
                    server_self._sleep_latency(arrived)
                    self._send(200, reply)
                except (ValueError, SimulatorError) as exc:
                    self._send(400, {"error": {"message": str(exc), "type": "invalid_request_error"}})
                finally:
                    server_self._leave()

            def _inject(self, fault: InjectedFault) -> None:
                if fault.kind is InjectedFaultKind.SERVER_ERROR:
                    self._send(500, {"error": {"message": "injected server error", "type": "server_error"}})
                elif fault.kind is InjectedFaultKind.RATE_LIMIT:
                    headers = {} if fault.retry_after is None else {"retry-after": f"{fault.retry_after:g}"}
                    self._send(429, {"error": {"message": "injected rate limit", "type": "rate_limit"}}, headers)
                else:
                    if fault.kind is InjectedFaultKind.TIMEOUT:
                        server_self._stopping.wait(fault.hold_seconds)
                    self.close_connection = True  # no answer at all: the client sees a timeout / a drop

        self._server = _Server((host, port), Handler)
        self._thread: threading.Thread | None = None
        self._latency = latency_ms / 1000.0
        self._jitter = jitter_ms / 1000.0

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _arrived(self, conv: _Conversation) -> InjectedFault | None:
        """Log a chat request; the fault to inject instead of its answer, if the plan has one left."""
        key = (conv.case.id, conv.turn)
        with self._lock:
            self.requests += 1
            planned = self._faults.get(key)
            seen = self._seen[key] = self._seen.get(key, 0) + 1
            fault = planned if planned is not None and seen <= planned.times else None
            self.log.append(SimRequest(time.monotonic(), *key, fault.kind if fault else None))
        return fault

    def _sleep_latency(self, arrived: float) -> None:
        """Hold the answer until `latency` (± jitter) after the request arrived — the time spent
        computing the answer included, so L is what the client sees — in this request's thread only."""
        if self._latency <= 0 and self._jitter <= 0:
            return
        with self._lock:
            delay = self._latency + self._rng.uniform(-self._jitter, self._jitter)
        self._stopping.wait(max(0.0, arrived + delay - time.monotonic()))

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (`http://host:port/v1`)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> SimulatorServer:
        """Serve in a background thread."""
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(STOP_POLL_S,), name="serve-sim", daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in the foreground until interrupted."""
        self._server.serve_forever()

    def stop(self) -> None:
        """Shut down and release the port."""
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> SimulatorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        time.sleep(0)
