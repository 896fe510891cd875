"""A tiny OpenAI-compatible HTTP endpoint on 127.0.0.1 that replies from a queue (tests only)."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from runners.endpoints._serving import STOP_POLL_S


class _QuietServer(ThreadingHTTPServer):
    """The endpoint's server, silent about a client that hung up: a stalling reply outlives the client's timeout by
    design, and the traceback its thread would print lands in whichever test is capturing stderr at that moment."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


def completion(
    content: str | None = None, tool_calls: list[dict[str, Any]] | None = None, usage: dict[str, int] | None = None
) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    body: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls" if tool_calls else "stop"}],
    }
    if usage is not None:
        body["usage"] = {**usage, "total_tokens": sum(usage.values())}
    return body


_MODELS = {"object": "list", "data": [{"id": "m", "object": "model", "created": 0, "owned_by": "test"}]}


class Endpoint:
    """Replies are (status, headers, body-bytes); requests are kept as parsed JSON."""

    def __init__(self) -> None:
        self.replies: list[tuple[int, dict[str, str], bytes]] = []
        self.faults: dict[int, tuple[str, float]] = {}  # reply index -> ("sleep", s) | ("reset", 0)
        self.get_replies: list[tuple[int, dict[str, Any]]] = []  # GET /models (preflight); default 200
        self.gets: list[str] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.lock = threading.Lock()
        self.port = 0

    def push(self, status: int, body: dict[str, Any] | bytes | str, headers: dict[str, str] | None = None) -> None:
        data = (
            body if isinstance(body, bytes) else (body.encode() if isinstance(body, str) else json.dumps(body).encode())
        )
        self.replies.append((status, headers or {}, data))

    def push_fault(self, kind: str, status: int, body: dict[str, Any], seconds: float = 0.0) -> None:
        """A reply with a fault: "sleep" waits before answering, "reset" drops the connection mid-body."""
        self.faults[len(self.replies)] = (kind, seconds)
        self.push(status, body)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@contextmanager
def serve() -> Iterator[Endpoint]:
    ep = Endpoint()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            with ep.lock:
                ep.gets.append(self.path)
                status, payload = ep.get_replies.pop(0) if ep.get_replies else (200, _MODELS)
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            raw = self.rfile.read(length)
            with ep.lock:
                index = len(ep.requests)
                ep.requests.append(json.loads(raw or b"{}"))
                ep.headers.append({k.lower(): v for k, v in self.headers.items()})
                status, headers, body = ep.replies.pop(0) if ep.replies else (500, {}, b'{"error": "no reply"}')
                fault = ep.faults.get(index)
            if fault and fault[0] == "sleep":
                time.sleep(fault[1])
            if fault and fault[0] == "reset":
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[: len(body) // 3])
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.connection.close()
                return
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

    server = _QuietServer(("127.0.0.1", 0), Handler)
    ep.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, args=(STOP_POLL_S,), daemon=True)
    thread.start()
    try:
        yield ep
    finally:
        server.shutdown()
        server.server_close()
