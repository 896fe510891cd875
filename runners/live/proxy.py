"""A loopback HTTP proxy in front of an OpenAI-compatible server that records every chat request as it went over
the wire and what came back, and what those responses say (truncations, multi-call turns, refusals).
"""

from __future__ import annotations

import http.client
import json
import select
import socket
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypedDict

from runners.endpoints._serving import STOP_POLL_S

__all__ = ["SETTLE_TIMEOUT_S", "Recorded", "RecordingProxy", "ResponseFigures", "refusal_reason", "response_figures"]

SETTLE_TIMEOUT_S = 10.0
"""How long `RecordingProxy.settle` waits for the requests in flight: a request whose client has gone ends within a
poll of the connection and the upstream call's own join (5 s at most)."""


@dataclass(frozen=True, slots=True)
class Recorded:
    """One chat-completions request as it went over the wire, and what came back."""

    label: str
    """The proxy's label when the request was made (`reference`, `live-auto`, ...)."""
    body: dict[str, Any]
    """The request body exactly as the client sent it."""
    status: int | None
    """The HTTP status the upstream answered; None: the client gave up first (its call timeout or the run's
    deadline), so nothing came back though the server received the request and began on it."""
    response: Any
    """The upstream's answer: parsed JSON, or its text when it was not JSON; None when the client gave up."""

    @property
    def refused(self) -> bool:
        """The server answered with an error status: the request reached no model."""
        return self.status is not None and self.status >= 400


class RecordingProxy:
    """A loopback HTTP proxy in front of an OpenAI-compatible server that records chat requests.

    The recorded bodies are exactly what the client sent (not rebuilt), so rendering them through
    the server's template shows what the model saw. When the client gives up on a request (its
    timeout), the upstream connection is closed too, so llama-server stops generating for it.
    """

    def __init__(self, upstream: str) -> None:
        host, _, port = upstream.removeprefix("http://").partition(":")
        self.label = ""
        self.records: list[Recorded] = []
        self._in_flight = 0
        # A request the client gave up on is recorded when its handler notices the closed connection, up to a poll
        # later than the client's own return: `settle` waits for those before the records are read.
        self._idle = threading.Condition()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _forward(self, method: str) -> None:
                with owner._idle:
                    owner._in_flight += 1
                try:
                    self._relay(method, owner.label)
                finally:
                    with owner._idle:
                        owner._in_flight -= 1
                        owner._idle.notify_all()

            def _relay(self, method: str, label: str) -> None:
                length = int(self.headers.get("content-length") or 0)
                data = self.rfile.read(length) if length else None
                conn = http.client.HTTPConnection(host, int(port), timeout=3600)
                result: dict[str, Any] = {}

                def upstream_call() -> None:
                    try:
                        headers = {"content-type": self.headers.get("content-type", "application/json")}
                        conn.request(method, self.path, body=data, headers=headers)
                        resp = conn.getresponse()
                        result["status"], result["body"] = resp.status, resp.read()
                        result["type"] = resp.getheader("content-type", "application/json")
                    except (OSError, http.client.HTTPException) as exc:
                        result["error"] = exc

                is_chat = method == "POST" and self.path.rstrip("/").endswith("/chat/completions") and bool(data)
                sent: dict[str, Any] = json.loads(data) if is_chat and data else {}
                worker = threading.Thread(target=upstream_call, daemon=True)
                worker.start()
                while worker.is_alive():
                    worker.join(0.2)
                    if worker.is_alive() and _peer_closed(self.connection):
                        if is_chat:  # received all the same: what the run's transcript says it sent
                            with owner._idle:
                                owner.records.append(Recorded(label, sent, None, None))
                        # The client timed out: drop the upstream socket so the server cancels the generation
                        # (shutdown, not close: the pending response still holds a reference to the socket).
                        if conn.sock is not None:
                            try:
                                conn.sock.shutdown(socket.SHUT_RDWR)
                            except OSError:
                                pass
                        conn.close()
                        worker.join(5)
                        self.close_connection = True
                        return
                conn.close()
                if "error" in result:
                    self.send_error(502, f"upstream: {result['error']}")
                    return
                payload: bytes = result["body"]
                if is_chat:
                    try:
                        parsed: Any = json.loads(payload)
                    except ValueError:
                        parsed = payload.decode(errors="replace")
                    with owner._idle:
                        owner.records.append(Recorded(label, sent, result["status"], parsed))
                try:
                    self.send_response(result["status"])
                    self.send_header("content-type", result["type"])
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up (its deadline) while the answer was on its way

            def do_GET(self) -> None:
                self._forward("GET")

            def do_POST(self) -> None:
                self._forward("POST")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(STOP_POLL_S,), name="live-proxy", daemon=True
        )

    @property
    def base_url(self) -> str:
        """The OpenAI base URL to give the client."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def settle(self, timeout_s: float = SETTLE_TIMEOUT_S) -> bool:
        """Wait until no request is being relayed (each ends once it is answered or its client has gone), so that
        `records` holds every request made so far; False if one was still in flight after `timeout_s`."""
        with self._idle:
            return self._idle.wait_for(lambda: self._in_flight == 0, timeout=timeout_s)


def _peer_closed(sock: socket.socket) -> bool:
    """True when the client has closed its end (readable with nothing to read)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


class ResponseFigures(TypedDict):
    """What came back over the wire for a set of recorded requests."""

    answered: int
    cancelled: int
    truncated: int
    tool_call_turns: int
    multi_call_turns: int
    refused: int


def response_figures(records: Sequence[Recorded]) -> ResponseFigures:
    """What came back over the wire: truncated generations, multi-call turns, refusals (with the top reason)."""
    out = ResponseFigures(answered=0, cancelled=0, truncated=0, tool_call_turns=0, multi_call_turns=0, refused=0)
    for rec in records:
        if rec.status is None:
            out["cancelled"] += 1
            continue
        if rec.refused:
            out["refused"] += 1
            continue
        choice = (rec.response.get("choices") or [{}])[0] if isinstance(rec.response, dict) else {}
        calls = (choice.get("message") or {}).get("tool_calls") or []
        out["answered"] += 1
        out["truncated"] += choice.get("finish_reason") == "length"
        out["tool_call_turns"] += bool(calls)
        out["multi_call_turns"] += len(calls) > 1
    return out


def refusal_reason(records: Sequence[Recorded]) -> str:
    """The most frequent error message among refused requests (first 160 characters)."""
    reasons: dict[str, int] = {}
    for rec in records:
        if rec.refused:
            err = rec.response.get("error") if isinstance(rec.response, dict) else None
            text = str(err.get("message") if isinstance(err, dict) else rec.response)[:160]
            reasons[text] = reasons.get(text, 0) + 1
    return max(reasons, key=lambda k: reasons[k]) if reasons else ""
