"""Endpoint preflight: an unusable `openai:` endpoint is exit 2 before any case
runs and before anything is written — never 81 FAILED case runs that look like a bad model.

Rules:

- the base URL must be http(s) (`ftp://…` is refused before any request);
- `GET {base_url}/models` through an SDK client built as the run's (same URL resolution, key, proxies);
  2xx → usable. 404/405/501 (no such route: llama.cpp builds, bare proxies) → one chat request of
  one output token; 2xx, 400 and 422 there → usable (the route exists and answered);
- 429 on either probe → usable (reachable and authenticated; the Harness backs off per attempt);
- unreachable (refused, DNS, TLS, timeout), 401/403, 404 on the chat route, 5xx → PreflightError
  naming the URL and the status;
- skipped for cassette replay with record mode `none` (offline: nothing may touch the network).

A mid-run outage is not a preflight matter: each case run keeps its classification in
`case_runs.error` (`model call failed after 3 attempt(s): CONNECTION: …`) and its typed kind in
`case_runs.error_kind`; the bench tells such a run from a model's bad answer by that kind
(`ModelErrorKind.infrastructure`, typed where the call failed), never by reading the text.
"""

from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from harness import ModelErrorKind
from runners.domain.model_spec import DEFAULT_API_KEY_ENV, ModelKind
from runners.plan.agent import ADAPTERS_EXTRA, AgentFramework

if TYPE_CHECKING:
    import openai

    from harness import OpenAIChatModel
    from runners.plan.run_plan import RunPlan

PROBE_TIMEOUT_SECONDS = 15.0
"""Upper bound of one probe request (the run's model timeout when shorter)."""


class PreflightError(ValueError):
    """The endpoint cannot serve this bench run (exit 2, nothing written)."""


class ProbeRoute(StrEnum):
    """Which request proved the endpoint usable."""

    MODELS = "GET /models"
    """The model list answered."""
    CHAT = "POST /chat/completions"
    """No model list; a one-token chat request answered."""


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """A usable endpoint."""

    url: str
    """The probed URL."""
    route: ProbeRoute
    """The request that answered."""
    status: int
    """Its HTTP status."""
    latency_ms: float
    """Its round trip."""


_ROUTE_ABSENT = frozenset({404, 405, 501})
_CHAT_ANSWERED = frozenset({400, 422})


def _status_text(exc: openai.APIStatusError) -> str:
    try:
        phrase = exc.response.reason_phrase
    except (AttributeError, RuntimeError):
        phrase = ""
    return f"HTTP {exc.status_code}{' ' + phrase if phrase else ''}"


def probe(model: OpenAIChatModel, model_name: str, *, timeout: float = PROBE_TIMEOUT_SECONDS,
          api_key_env: str = DEFAULT_API_KEY_ENV) -> ProbeResult:  # fmt: skip
    """Probe the model's endpoint; raise PreflightError naming the URL and the status when unusable."""
    import httpx2  # the SDK stack is imported only when an endpoint is really probed
    import openai

    base = model.base_url
    try:
        scheme = httpx2.URL(base).scheme
    except httpx2.InvalidURL as exc:
        raise PreflightError(f"endpoint {base}: not a URL ({exc})") from None
    if scheme not in ("http", "https"):
        raise PreflightError(f"endpoint {base}: unsupported scheme {scheme or '(none)'!r}; use http:// or https://")
    models_url = f"{base}/models"
    t0 = time.perf_counter()
    try:
        response = model.client.get("/models", cast_to=httpx2.Response, options={"timeout": timeout})
        return ProbeResult(models_url, ProbeRoute.MODELS, response.status_code, _ms(t0))
    except openai.APIStatusError as exc:
        if exc.status_code == 429:
            return ProbeResult(models_url, ProbeRoute.MODELS, 429, _ms(t0))
        if exc.status_code not in _ROUTE_ABSENT:
            raise PreflightError(model.redact(_unusable(models_url, exc, api_key_env))) from None
    except openai.APIError as exc:
        raise PreflightError(model.redact(_unusable(models_url, exc, api_key_env))) from None
    chat_url = f"{base}/chat/completions"
    t0 = time.perf_counter()
    try:
        raw = model.client.chat.completions.with_raw_response.create(
            model=model_name, messages=[{"role": "user", "content": "ping"}], max_tokens=1, timeout=timeout
        )
        return ProbeResult(chat_url, ProbeRoute.CHAT, raw.http_response.status_code, _ms(t0))
    except openai.APIStatusError as exc:
        if exc.status_code == 429 or exc.status_code in _CHAT_ANSWERED:
            return ProbeResult(chat_url, ProbeRoute.CHAT, exc.status_code, _ms(t0))
        raise PreflightError(model.redact(_unusable(chat_url, exc, api_key_env))) from None
    except openai.APIError as exc:
        raise PreflightError(model.redact(_unusable(chat_url, exc, api_key_env))) from None


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 1)


def _unusable(url: str, exc: openai.APIError, api_key_env: str) -> str:
    import openai

    from harness import OpenAIChatModel

    head = f"endpoint preflight failed: {url}"
    if isinstance(exc, openai.APIStatusError):
        hint = ""
        if exc.status_code in (401, 403):
            hint = f"; check the API key in ${api_key_env} (--api-key-env)"
        elif exc.status_code == 404:
            hint = "; check --base-url (OpenAI-compatible servers usually end in /v1) and the model name"
        return f"{head} answered {_status_text(exc)}: {exc.message}"[:400] + hint
    err = OpenAIChatModel.classify_error(exc)
    what = "timed out" if err.kind is ModelErrorKind.TIMEOUT else f"is unreachable ({err})"
    return f"{head} {what}"[:400]


def needs_preflight(plan: RunPlan) -> bool:
    """An `openai:` model that may reach the network (not a replay-only cassette run)."""
    return plan.model.kind is ModelKind.OPENAI and not plan.options.replay.replays


_FRAMEWORK_MODULES = {AgentFramework.PYDANTIC_AI: "pydantic_ai", AgentFramework.OPENAI_AGENTS: "agents"}
"""The module each framework's extra installs (`--agent` of a loop whose extra is missing is exit 2)."""


def check_agent_installed(agent: AgentFramework) -> None:
    """PreflightError naming the extra when `--agent` names a framework that is not installed: one line, before
    anything is written (never a traceback and a `failed` bench run row)."""
    module = _FRAMEWORK_MODULES.get(agent)
    if module is None:
        return
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise PreflightError(f"--agent {agent.value} needs its framework, which is not installed: {ADAPTERS_EXTRA}")


def preflight(plan: RunPlan) -> ProbeResult | None:
    """Check the agent loop's framework is installed, then probe the endpoint of a bench run (its model parsed by the
    plan) when it may reach the network; PreflightError when unusable."""
    check_agent_installed(plan.options.execution.agent)
    if not needs_preflight(plan):
        return None
    from harness import OpenAIChatModel
    from runners.domain.redaction import redact

    ms = plan.options.settings.model_settings
    name = plan.model.name
    timeout = min(PROBE_TIMEOUT_SECONDS, plan.options.settings.config.model_timeout_seconds)
    model = OpenAIChatModel(name, base_url=ms.base_url, api_key_env=ms.api_key_env, timeout_seconds=timeout)
    try:
        return probe(model, name, timeout=timeout, api_key_env=ms.api_key_env)
    except PreflightError as exc:  # printed on stderr: it names the URL, credentials included
        raise PreflightError(redact(str(exc), plan.secrets)) from None
    finally:
        model.close()
