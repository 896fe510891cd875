"""vcrpy cassettes: a live model's answers made replayable offline (issue 4).

One cassette per (case, model, epoch). Requests match on method, path and JSON body — not on
host or port, so a cassette recorded against one local server replays against another — and
repeated requests replay, so runs at different thresholds share their common prefix. Secrets
are scrubbed from request and response headers before anything is written.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from contextlib import AbstractContextManager
from functools import lru_cache
from pathlib import Path
from typing import Any

import vcr
from vcr.record_mode import RecordMode
from vcr.request import Request

from runners.settings import RunSettings, reproduce_flags

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


def rerecord_command(
    cassettes: str | Path, case_id: str, epoch: int, run: RunSettings, *, evalsets: Sequence[str] = (),
    record_mode: str = "none", delete_first: bool = False,
) -> str:  # fmt: skip
    """The command that re-records one case's cassette, reproducing the run: model, tool_choice, schema
    mode and every other non-default setting. Record mode `all` replaces each recorded episode the new
    run sends (vcrpy >= 8.4 replaces a matching recording instead of appending beside it) and keeps the
    episodes of other thresholds that share the file. `delete_first` prefixes an `rm` of the cassette
    (for a corrupted file, which vcrpy cannot load)."""
    ms = run.model_settings
    argv = ["harness-bench", "run", *(a for spec in evalsets for a in ("--evalset", spec)), "--case", case_id]
    if epoch > 1:
        argv += ["--epochs", str(epoch)]
    argv += reproduce_flags(run, always=("model", "tool_choice", "schema_mode"), skip=("base_url",))
    name = ms.model.partition(":")[2] or ms.model
    if ms.base_url and record_mode != "none":
        argv += ["--base-url", ms.base_url]
        note = f"--base-url is the endpoint this run recorded from: it must be serving {name} live"
    elif ms.base_url:
        argv += ["--base-url", "LIVE_BASE_URL"]
        note = (
            f"LIVE_BASE_URL: a live OpenAI-compatible endpoint serving {name}; this run replayed offline, so its"
            f" --base-url {ms.base_url} was never contacted"
        )
    else:
        note = f"records from the OpenAI API with the key in ${ms.api_key_env}"
    argv += ["--cassettes", str(cassettes), "--record-mode", "all"]
    command = shlex.join(argv)
    if delete_first:
        path = cassette_path(cassettes, ms.model, case_id, epoch)
        command = f"rm -- {shlex.quote(str(path))} && {command}"
    return f"{command} ({note})"
