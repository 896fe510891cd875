"""Cassettes: a live model's answers made replayable offline (recorded once, replayed with the network
blocked; failed and deadline-cut attempts included).

One cassette per (case, model, epoch), in vcrpy's JSON format. Requests match on method, path and
JSON body — not on host or port, so a cassette recorded against one local server replays against
another — and secrets are scrubbed before anything is written: secret headers dropped, and request and response
bodies passed through the bench's one redaction (runners/domain/redaction.py: the run's key, URL credentials, key and
token shapes). A live request is redacted the same way before it is matched, so a recording whose request held
the key matches again when the replay has the same key set.

Per-run binding instead of vcrpy's process-wide patch: the SDK client's transport
(`CassetteTransport`) serves each request from, or records it to, the cassette bound to the
current thread by `use_cassette`. Case runs on other threads use their own cassettes at the same
time, so replay (and recording) runs concurrently. vcrpy still loads, matches and saves.

Replay reproduces live runs attempt by attempt:

- a request that recurs within one run (the Harness retrying it) replays the recorded answers in
  recorded order: a 500 or a 429 (status, body and Retry-After as recorded), then the success;
- an attempt that got no HTTP response at all (timeout, refused or dropped connection) is recorded
  as a synthetic interaction marked `x-harness-bench-fault: timeout|connection` (status 599, the
  httpx2 exception and its innermost cause in the body) and replay raises that same httpx2
  exception, its cause an exception of the recorded type's name, so the SDK and the library's classification
  produce the same ModelCallError as live;
- a request recurring more often than recorded repeats its last answer (vcrpy's playback
  repeats), and runs at other thresholds share the common prefix, as before;
- deadlines replay as they were decided live: every reading of the run's deadline clock between one
  answer and the next request (or the end of the run) is stored on that answer (header
  `x-harness-bench-deadline-reads`, the seconds left at each reading), and a replay answers the run's
  readings with the recorded ones. An attempt the deadline cut (its timeout was what was left of the
  deadline) is recorded as such (`"cut_by_deadline": true` in its fault) and replays as a deadline
  stop, not as a timeout to retry, although the replay has all its time left; a deadline that passed
  between calls replays at the same reading. (Readings before the first request use the real clock.)

A request a write-protected cassette does not hold is a replay miss: the transport raises the library's
`ModelCallError` of kind REPLAY_MISS ("cassette miss: ..." and vcrpy's first line naming the request), which the
run records and never retries. A replay needs no key: `OFFLINE_KEY` stands in for an unset one.
"""

from __future__ import annotations

import json
import re
import shlex
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from enum import StrEnum
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

import httpx2
import vcr
from vcr.cassette import Cassette
from vcr.errors import CannotOverwriteExistingCassetteException
from vcr.persisters.filesystem import FilesystemPersister
from vcr.record_mode import RecordMode
from vcr.request import Request
from vcr.serialize import serialize
from vcr.stubs.httpx_stubs import _deserialize_response, _serialize_response

from harness import ModelCallError, ModelErrorKind
from runners.domain.redaction import NO_SECRETS, Secrets, redact, safe_url
from runners.plan.options import BenchOptions
from runners.plan.options import RecordMode as RunRecordMode  # the bench's; vcr's own `RecordMode` is above
from runners.plan.rules import RECORD_MODES
from runners.plan.stored_plan import run_argv
from runners.store.output_files import NamedPath, OutputPathError, check_output_path, path_kind, write_text

OFFLINE_KEY = "offline-replay-no-key"
"""The API key a replay sends when the run's key variable is unset (the header is scrubbed, the key never checked):
a replay must not need a real key."""

SCRUB_REQUEST_HEADERS = (
    "authorization", "api-key", "x-api-key", "cookie", "openai-organization", "openai-project",
    "proxy-authorization", "host",
)  # fmt: skip
SCRUB_RESPONSE_HEADERS = (
    "set-cookie", "openai-organization", "openai-project", "x-request-id", "request-id", "cf-ray",
    "x-amzn-requestid", "apim-request-id",
)  # fmt: skip


class ReplayedCause(Exception):
    """The innermost cause of a transport failure as a cassette recorded it. Replay raises it, under the recorded
    name (`replayed_cause`), as the cause of the recorded httpx2 error: the library names a connection error by
    its innermost cause's type, so a replay gives the live text word for word."""


@lru_cache(maxsize=64)
def _cause_class(type_name: str) -> type[ReplayedCause]:
    """A `ReplayedCause` subclass named `type_name` (one per name: recorded names are few)."""
    return type(type_name, (ReplayedCause,), {"__module__": __name__})


def replayed_cause(type_name: str, message: str) -> ReplayedCause:
    """The recorded cause `type_name: message` as an exception whose type has that name."""
    return _cause_class(type_name)(message)


def _innermost_cause(exc: BaseException) -> BaseException:
    """The last exception of `exc`'s cause/context chain (`exc` itself when it has none)."""
    seen: set[int] = set()
    cur: BaseException = exc
    while id(cur) not in seen:
        seen.add(id(cur))
        nxt = cur.__cause__ or cur.__context__
        if nxt is None:
            break
        cur = nxt
    return cur


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "model"


def cassette_path(directory: str | Path, model: str, case_id: str, epoch: int) -> Path:
    """Where the cassette of one (case, model, epoch) lives."""
    return Path(directory) / _slug(model) / case_id / f"epoch{epoch}.json"


@lru_cache(maxsize=4096)
def _canonical(body: bytes | str | None) -> str | None:
    """A body's JSON in canonical form (cached: vcrpy compares every request with every recording)."""
    if body is None or body in (b"", ""):
        return None
    raw = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        return json.dumps(json.loads(raw), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return raw


def _json_body(r1: Any, r2: Any) -> None:
    if r1.body == r2.body:
        return
    assert _canonical(r1.body) == _canonical(r2.body), "request bodies differ"


def _redact_body(body: bytes | str | None, secrets: Secrets) -> Any:
    """A body (bytes or text, as vcrpy holds it) through the bench's redaction; bytes that are not UTF-8 kept."""
    if not body:
        return body
    if isinstance(body, str):
        return redact(body, secrets)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return body
    redacted = redact(text, secrets)
    return body if redacted == text else redacted.encode("utf-8")


def _scrub_response(response: dict[str, Any], secrets: Secrets = NO_SECRETS) -> dict[str, Any]:
    headers = response.get("headers") or {}
    for key in list(headers):
        if key.lower() in SCRUB_RESPONSE_HEADERS:
            del headers[key]
    body = response.get("body")
    if isinstance(body, dict) and "string" in body:
        body["string"] = _redact_body(body["string"], secrets)
    return response


def _scrub_request(request: Request, secrets: Secrets = NO_SECRETS) -> Request:
    """A scrubbed copy: secret headers dropped, host normalised (recordings carry no machine address), the body
    redacted."""
    headers = {k: v for k, v in request.headers.items() if k.lower() not in SCRUB_REQUEST_HEADERS}
    uri = re.sub(r"^(https?://)[^/]+", r"\1model-endpoint", request.uri)
    return Request(request.method, uri, _redact_body(request.body, secrets), headers)


class _VCR(vcr.VCR):  # type: ignore[misc]  # vcrpy ships no types: its VCR is Any to mypy
    """vcrpy deep-copies every request (several times per request, body included) before its filters;
    our only filter already returns a fresh, scrubbed Request, so the deep copy is skipped (measured:
    ~20% of a replay). Only its cassette configuration is used: nothing is patched."""

    def __init__(self, secrets: Secrets, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._secrets = secrets

    def _build_before_record_request(self, options: dict[str, Any]) -> Any:
        return partial(_scrub_request, secrets=self._secrets)


class AtomicPersister(FilesystemPersister):  # type: ignore[misc]  # vcrpy ships no types (Any to mypy)
    """vcrpy's file persister, saving through a temporary file renamed into place (runners/store/output_files.py):
    a crash, a full disk or Ctrl-C mid-save leaves the old cassette or the complete new one, never half a file."""

    @staticmethod
    def save_cassette(cassette_path: str | Path, cassette_dict: dict[str, Any], serializer: Any) -> None:
        """Serialize as vcrpy does and write the file whole."""
        write_text(NamedPath("cassette", Path(cassette_path)), serialize(cassette_dict, serializer))


def make_vcr(record_mode: str, secrets: Secrets = NO_SECRETS) -> vcr.VCR:
    """A VCR configured for model endpoints (its cassette settings: matchers, scrubbing, JSON)."""
    if record_mode not in RECORD_MODES:
        raise ValueError(f"record mode {record_mode!r} is not one of {RECORD_MODES}")
    v = _VCR(
        secrets,
        serializer="json",
        record_mode=RecordMode(record_mode),
        match_on=("method", "path", "json_body"),
        before_record_response=partial(_scrub_response, secrets=secrets),
        decode_compressed_response=True,
    )
    v.register_matcher("json_body", _json_body)
    v.register_persister(AtomicPersister)
    return v


class CassetteError(ValueError):
    """A cassette file exists but cannot be read (truncated, corrupted, not a cassette)."""


def check_cassette(path: Path, *, writing: bool = False) -> None:
    """Raise CassetteError naming the file when it exists but is not a readable cassette — or, for a run that
    records (`writing`), is not one it may write by the output-path rule (a device, FIFO or symlink is never read,
    written through or replaced)."""
    if writing:
        try:
            check_output_path(NamedPath("cassette", path))
        except OutputPathError as exc:
            raise CassetteError(str(exc)) from None
    what = path_kind(path)
    if what is not None:  # read, a FIFO would block and a device give nothing a cassette holds
        raise CassetteError(f"cassette {path} is {what}, not a cassette file")
    if not path.exists():
        return
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise CassetteError(f"cassette {path} is corrupted or truncated ({type(exc).__name__}: {exc})"[:500]) from None
    if not isinstance(data, dict) or not isinstance(data.get("interactions"), list):
        raise CassetteError(f"cassette {path} is not a vcrpy cassette (no 'interactions' list)")


class FaultKind(StrEnum):
    """An attempt that got no HTTP response, as recorded in a cassette."""

    TIMEOUT = "timeout"
    """The request timed out (connect, read, write or waiting for a connection slot)."""
    CONNECTION = "connection"
    """The connection was refused, reset or closed before a response arrived."""


FAULT_HEADER = "x-harness-bench-fault"
"""Response header marking a synthetic interaction: the attempt failed without a response."""
FAULT_STATUS = 599
"""Status of a synthetic fault interaction (never a real response; vcrpy needs a status)."""


def _fault_text(text: str, request: httpx2.Request, secrets: Secrets) -> str:
    """An exception text with the endpoint's host and the secrets removed (cassettes hold no address); the key
    the request was sent with is one of them even when the run's key variable does not hold it."""
    host = request.url.host
    if host:  # as a whole name only: a short host must not eat letters of the message
        text = re.sub(rf"(?<![\w.-]){re.escape(host)}(?![\w-])", "model-endpoint", text)
    token = request.headers.get("authorization", "").partition(" ")[2]
    text = redact(text, secrets)
    return redact(text, Secrets.known(token)) if token else text


DEADLINE_READS_HEADER = "x-harness-bench-deadline-reads"
"""Response header holding the run's deadline readings (seconds left) made after this answer, as JSON."""


def _fault_response(
    exc: Exception, request: httpx2.Request, elapsed: float, *, cut_by_deadline: bool = False,
    secrets: Secrets = NO_SECRETS,
) -> dict[str, Any]:  # fmt: skip
    """The synthetic interaction recorded for an attempt that failed without a response (`cut_by_deadline`:
    its timeout was what was left of the run's deadline, so the deadline, not the endpoint, ended it)."""
    kind = FaultKind.TIMEOUT if isinstance(exc, httpx2.TimeoutException) else FaultKind.CONNECTION
    cause = _innermost_cause(exc)
    cause_type = type(cause).__name__
    body = {
        "fault": kind.value,
        "exception": type(exc).__name__,
        "message": _fault_text(str(exc), request, secrets),
        "cause": {"type": cause_type, "message": _fault_text(str(cause), request, secrets)},
        "elapsed_ms": round(elapsed * 1000),
        "cut_by_deadline": cut_by_deadline,
    }
    return {
        "status": {"code": FAULT_STATUS, "message": "Harness-Bench Recorded Fault"},
        "headers": {FAULT_HEADER: [kind.value], "content-type": ["application/json"]},
        "body": {"string": json.dumps(body)},
    }


def deadline_reads_of(response: dict[str, Any]) -> list[float] | None:
    """The deadline readings recorded after an answer (None when it carries none: an older recording)."""
    for name, values in (response.get("headers") or {}).items():
        if name.lower() == DEADLINE_READS_HEADER:
            raw = values[0] if isinstance(values, list) else values
            try:
                reads = json.loads(raw)
            except (TypeError, ValueError):
                return None
            return [float(v) for v in reads] if isinstance(reads, list) else None
    return None


def _timeout_of(request: httpx2.Request) -> float | None:
    """The read timeout the client gave this attempt."""
    timeout = request.extensions.get("timeout") or {}
    value = timeout.get("read") if isinstance(timeout, dict) else None
    return float(value) if isinstance(value, int | float) else None


def _cut_by_deadline(exc: Exception, last_read: float | None, timeout: float | None) -> bool:
    """A timeout whose limit was what was left of the run's deadline (the Harness gives each attempt
    min(model timeout, time left)): the deadline, not the endpoint, ended the attempt."""
    if not isinstance(exc, httpx2.TimeoutException) or last_read is None or timeout is None:
        return False
    return last_read <= timeout


class _SessionClock:
    """A cassette run's deadline clock (harness.context.DeadlineClock): the session's readings."""

    __slots__ = ("_session",)

    def __init__(self, session: CassetteSession) -> None:
        self._session = session

    def remaining(self, deadline: float) -> float:
        """Seconds left: recorded (replay) or read and logged (recording)."""
        return self._session.read_deadline(deadline)


def fault_of(response: dict[str, Any]) -> FaultKind | None:
    """The fault a recorded response stands for, if it is a synthetic fault interaction."""
    for name, values in (response.get("headers") or {}).items():
        if name.lower() == FAULT_HEADER:
            return FaultKind(values[0] if isinstance(values, list) else values)
    return None


def _raise_fault(response: dict[str, Any], kind: FaultKind, request: httpx2.Request) -> None:
    """Raise the recorded httpx2 exception, its recorded innermost cause chained under it."""
    raw = response["body"]["string"]
    data = json.loads(raw.decode() if isinstance(raw, bytes) else raw)
    cls = getattr(httpx2, str(data.get("exception", "")), None)
    if not (isinstance(cls, type) and issubclass(cls, httpx2.TransportError)):
        cls = httpx2.ReadTimeout if kind is FaultKind.TIMEOUT else httpx2.ConnectError
    cause = data.get("cause") or {}
    raise cls(str(data.get("message", "")), request=request) from replayed_cause(
        str(cause.get("type", "Exception")), str(cause.get("message", ""))
    )


class CassetteSession:
    """One cassette file bound to one case run: replays in recorded order, records what is new."""

    def __init__(self, path: Path, record_mode: str, secrets: Secrets = NO_SECRETS) -> None:
        cfg = make_vcr(record_mode, secrets).get_merged_config(path=str(path), allow_playback_repeats=True)
        for key in ("path_transformer", "func_path_generator", "record_on_exception"):
            cfg.pop(key, None)
        self.path = path
        self._secrets = secrets
        self.cassette = Cassette.load(**cfg)
        self._mode = RecordMode(record_mode)
        self._loaded = len(self.cassette.data)
        self._played: set[int] = set()
        self.deadline_clock = _SessionClock(self)
        """The run's deadline clock: bind it to the run (`RunContext.create(deadline_clock=...)`)."""
        self._reads: list[float] = []  # live readings since the last answer recorded in this session
        self._last_recorded: int | None = None  # that answer's index
        self._replayed: deque[float] | None = None  # recorded readings left after the last replayed answer
        self._last_replayed: float | None = None

    def read_deadline(self, deadline: float) -> float:
        """One reading of the run's deadline: the next recorded one after a replayed answer (write-protected
        replay only), else the real clock, logged for the answer recorded last."""
        if self._replayed is not None:
            if self._replayed:
                self._last_replayed = self._replayed.popleft()
            if self._last_replayed is not None:  # (more readings than recorded: the last one holds)
                return self._last_replayed
        value = deadline - time.monotonic()
        self._reads.append(value)
        return value

    def _attach_reads(self) -> None:
        """Store the readings made since the last recorded answer on that answer."""
        if self._last_recorded is not None:
            headers = self.cassette.data[self._last_recorded][1].setdefault("headers", {})
            headers[DEADLINE_READS_HEADER] = [json.dumps(self._reads)]
        self._reads = []

    def _next_recorded(self, request: Request) -> int | None:
        """The recorded interaction that answers this occurrence of `request`, if any.

        The first unplayed match in recorded order (a retried request gets the fault, then the
        success); once every match has played, the last one again in replay-only modes. Answers
        recorded during this very session are never replayed: a retry must reach the endpoint.
        """
        if self._mode is RecordMode.ALL:
            return None
        matches: list[int] = [i for i, _ in self.cassette._responses(request) if i < self._loaded]
        for index in matches:
            if index not in self._played:
                return index
        if matches and self.cassette.write_protected:
            return matches[-1]
        return None

    def handle(self, request: httpx2.Request, inner: httpx2.BaseTransport) -> httpx2.Response:
        """Answer from the cassette, or send through `inner` and record the answer or the fault."""
        body = request.read()
        vcr_request = Request(request.method, str(request.url), body, request.headers)
        index = self._next_recorded(vcr_request)
        # The reading just before this attempt is the time it was given: its timeout is min(model timeout, it).
        last_read = self._reads[-1] if self._reads else None
        self._attach_reads()
        self._last_recorded = None
        if index is not None:
            self._played.add(index)
            self.cassette.play_counts[index] += 1
            recorded = self.cassette.data[index][1]
            reads = deadline_reads_of(recorded) if self.cassette.write_protected else None
            self._replayed, self._last_replayed = (deque(reads), None) if reads is not None else (None, None)
            kind = fault_of(recorded)
            if kind is not None:
                _raise_fault(recorded, kind, request)
            response: httpx2.Response = _deserialize_response(recorded, httpx2)
            return response
        self._replayed = None
        if self.cassette.write_protected:
            miss = CannotOverwriteExistingCassetteException(cassette=self.cassette, failed_request=vcr_request)
            # Not retryable: replaying the same request against the same cassette misses again.
            first = str(miss).splitlines()[0]
            raise ModelCallError(ModelErrorKind.REPLAY_MISS, f"cassette miss: {first}") from miss
        from harness import read_body  # loads the openai SDK's module: only a recording needs it

        t0 = time.perf_counter()
        try:
            response = inner.handle_request(request)
            content = read_body(response)
        except (httpx2.TransportError, OSError) as exc:
            cut = _cut_by_deadline(exc, last_read, _timeout_of(request))
            fault = _fault_response(exc, request, time.perf_counter() - t0, cut_by_deadline=cut, secrets=self._secrets)
            self._record(vcr_request, fault)
            raise
        self._record(vcr_request, _serialize_response(response, content))
        response.stream = httpx2.ByteStream(content)
        return response

    def _record(self, request: Request, response: dict[str, Any]) -> None:
        before = len(self.cassette.data)
        self.cassette.append(request, response)
        self._played.update(range(before, len(self.cassette.data)))
        self._last_recorded = len(self.cassette.data) - 1

    def save(self) -> None:
        """Write the cassette if anything was recorded (vcrpy's rules per record mode), the readings made
        after the last answer stored on it."""
        self._attach_reads()
        self.cassette._save()


_BOUND: ContextVar[CassetteSession | None] = ContextVar("harness_bench_cassette", default=None)
_PATH_LOCKS: dict[Path, threading.Lock] = {}
_PATH_LOCKS_GUARD = threading.Lock()


class CassetteNotBound(RuntimeError):
    """A model request of a cassette run was made on a thread with no cassette bound (a bug)."""


class CassetteTransport(httpx2.BaseTransport):
    """Serves requests from the cassette bound to the current thread.

    With `require_binding` (the bench's cassette runs) a request on a thread with no cassette bound
    is refused rather than sent unrecorded; without it, such a request passes through.
    """

    def __init__(self, inner: httpx2.BaseTransport, *, require_binding: bool = False) -> None:
        self._inner = inner
        self._require_binding = require_binding

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        """Replay or record through the bound session, else send (or refuse)."""
        session = _BOUND.get()
        if session is not None:
            return session.handle(request, self._inner)
        if self._require_binding:
            raise CassetteNotBound(f"{request.method} {request.url.path}: no cassette is bound to this thread")
        return self._inner.handle_request(request)

    def close(self) -> None:
        """Close the transport underneath."""
        self._inner.close()


def _path_lock(path: Path) -> threading.Lock:
    key = path.resolve()
    with _PATH_LOCKS_GUARD:
        return _PATH_LOCKS.setdefault(key, threading.Lock())


@contextmanager
def _bound(path: Path, record_mode: str, secrets: Secrets) -> Iterator[CassetteSession]:
    # One session per file at a time: two runs recording into one file would overwrite each other.
    with _path_lock(path):
        session = CassetteSession(path, record_mode, secrets)
        token = _BOUND.set(session)
        try:
            yield session
        finally:
            _BOUND.reset(token)
            session.save()


def use_cassette(
    path: Path, record_mode: str, secrets: Secrets = NO_SECRETS
) -> AbstractContextManager[CassetteSession]:
    """Bind one cassette file to the current thread: model requests through a `CassetteTransport`
    replay from it or record to it (`record_mode` as vcrpy's), bodies redacted of `secrets`. Other threads
    are unaffected."""
    if record_mode not in RECORD_MODES:
        raise ValueError(f"record mode {record_mode!r} is not one of {RECORD_MODES}")
    check_cassette(path, writing=record_mode != RecordMode.NONE.value)
    path.parent.mkdir(parents=True, exist_ok=True)
    return _bound(path, record_mode, secrets)


def rerecord_command(opts: BenchOptions, case_id: str, epoch: int, *, delete_first: bool = False) -> str:
    """The command that re-records one case's cassette, derived from the run's plan (`opts`, as stored): its
    case selection narrowed to the case, epochs up to `epoch`, every other run option and every non-default
    setting (model, tool_choice and schema mode always), the cassettes, record mode `all`
    (runners/plan/stored_plan.py `run_argv`). Record mode `all` replaces each recorded episode the new run sends
    (vcrpy >= 8.4 replaces a matching recording instead of appending beside it) and keeps the episodes of other
    thresholds that share the file. `delete_first` prefixes an `rm` of the cassette (for a corrupted file, which
    vcrpy cannot load). Where it executes (shard, run id, database) is not part of it."""
    cassettes = opts.replay.cassettes
    assert cassettes is not None, "a re-record command is for a run with cassettes"
    ms = opts.settings.model_settings
    record = opts.replaced(case_ids=(case_id,), epochs=epoch, record_mode=RunRecordMode.ALL, shard=None, run_id=None)
    argv = run_argv(record, always=("model", "tool_choice", "schema_mode"), skip=("base_url",))
    name = ms.model.name  # the rules let cassettes record an openai:<model-name> only
    base_url = safe_url(ms.base_url)  # printed and stored: credentials in the URL are given again by the user
    if base_url and not opts.replay.replays:
        argv += ["--base-url", base_url]
        note = f"--base-url is the endpoint this run recorded from: it must be serving {name} live"
    elif base_url:
        argv += ["--base-url", "LIVE_BASE_URL"]
        note = (
            f"LIVE_BASE_URL: a live OpenAI-compatible endpoint serving {name}; this run replayed offline, so its"
            f" --base-url {base_url} was never contacted"
        )
    else:
        note = f"records from the OpenAI API with the key in ${ms.api_key_env}"
    command = shlex.join(argv)
    if delete_first:
        path = cassette_path(cassettes, ms.model.raw, case_id, epoch)
        command = f"rm -- {shlex.quote(str(path))} && {command}"
    return f"{command} ({note})"
