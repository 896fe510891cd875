"""vcrpy cassettes: a live model's answers made replayable offline (issue 4).

One cassette per (case, model, epoch). Requests match on method, path and JSON body — not on
host or port, so a cassette recorded against one local server replays against another — and
repeated requests replay, so runs at different thresholds share their common prefix. Secrets
are scrubbed from request and response headers before anything is written.
"""

from __future__ import annotations

import json
import re
from contextlib import AbstractContextManager
from functools import lru_cache
from pathlib import Path
from typing import Any

import vcr
from vcr.record_mode import RecordMode
from vcr.request import Request

SCRUB_REQUEST_HEADERS = (
    "authorization", "api-key", "x-api-key", "cookie", "openai-organization", "openai-project",
    "proxy-authorization", "host",
)  # fmt: skip
SCRUB_RESPONSE_HEADERS = (
    "set-cookie", "openai-organization", "openai-project", "x-request-id", "request-id", "cf-ray",
    "x-amzn-requestid", "apim-request-id",
)  # fmt: skip
RECORD_MODES = ("none", "once", "new_episodes", "all")


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


def _scrub_response(response: dict[str, Any]) -> dict[str, Any]:
    headers = response.get("headers") or {}
    for key in list(headers):
        if key.lower() in SCRUB_RESPONSE_HEADERS:
            del headers[key]
    return response


def _scrub_request(request: Request) -> Request:
    """A scrubbed copy: secret headers dropped, host normalised (recordings carry no machine address)."""
    headers = {k: v for k, v in request.headers.items() if k.lower() not in SCRUB_REQUEST_HEADERS}
    uri = re.sub(r"^(https?://)[^/]+", r"\1model-endpoint", request.uri)
    return Request(request.method, uri, request.body, headers)


class _VCR(vcr.VCR):  # type: ignore[misc]
    """vcrpy deep-copies every request (several times per request, body included) before its filters;
    our only filter already returns a fresh, scrubbed Request, so the deep copy is skipped (measured:
    ~20% of a replay)."""

    def _build_before_record_request(self, options: dict[str, Any]) -> Any:
        return _scrub_request


def make_vcr(record_mode: str) -> vcr.VCR:
    """A VCR configured for model endpoints."""
    if record_mode not in RECORD_MODES:
        raise ValueError(f"record mode {record_mode!r} is not one of {RECORD_MODES}")
    v = _VCR(
        serializer="json",
        record_mode=RecordMode(record_mode),
        match_on=("method", "path", "json_body"),
        before_record_response=_scrub_response,
        decode_compressed_response=True,
        # The openai SDK sends through httpx2 only; patching every other HTTP library on each
        # cassette entry cost ~4.5 ms per case run.
        skip_patchers=("httplib", "requests", "boto3", "urllib3", "httplib2", "tornado", "aiohttp", "httpx"),
    )
    v.register_matcher("json_body", _json_body)
    return v


class CassetteError(ValueError):
    """A cassette file exists but cannot be read (truncated, corrupted, not a cassette)."""


def check_cassette(path: Path) -> None:
    """Raise CassetteError naming the file when it exists but is not a readable cassette."""
    if not path.exists():
        return
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CassetteError(f"cassette {path} is corrupted or truncated ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("interactions"), list):
        raise CassetteError(f"cassette {path} is not a vcrpy cassette (no 'interactions' list)")


def use_cassette(path: Path, record_mode: str) -> AbstractContextManager[Any]:
    """Context manager that records or replays one cassette file."""
    check_cassette(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    cm: AbstractContextManager[Any] = make_vcr(record_mode).use_cassette(str(path), allow_playback_repeats=True)
    return cm


def rerecord_command(cassettes: str | Path, model: str, case_id: str, base_url: str | None) -> str:
    """The command that re-records a cassette."""
    url = f" --base-url {base_url}" if base_url else ""
    return f"harness-bench run --case {case_id} --model {model}{url} --cassettes {cassettes} --record-mode new_episodes"
