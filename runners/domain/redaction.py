"""The bench's one redaction boundary: what no file the bench writes, and no line it prints, may hold.

Every writer calls `redact` on text as it enters the bench — the rows of the DuckDB writer (every text
cell of `case_runs`, `tool_calls`, `events`, `messages`, `prompts`), cassette request and response bodies
and fault texts, the errors and commands printed on stderr — with the run's `Secrets`:

- the run's API key (the value of its key variable) and the user name and password of its base URL, when
  8 characters or longer (a shorter value would eat ordinary words), matched case-insensitively (the scope
  normaliser lower-cases tool arguments) and in their JSON- and URL-escaped spellings;
- whatever the run's secrets, the user info of any URL (`scheme://user:password@host` keeps
  `scheme://[REDACTED]@host`), and anything shaped like a credential: an `sk-` key, a bearer token, a JWT, an AWS
  access key id (`AKIA…`) and, next to a word like "secret" or "key", a 40-character AWS secret key, a GitHub token
  (`ghp_…`, `github_pat_…`), a Slack token (`xoxb-…`) and HTTP basic auth (`Basic <base64 of user:password>`).

A stored base URL keeps its scheme, host, port and path only (`safe_url`): a resume or a re-record of a run
whose endpoint needs credentials in its URL is given them again with `--base-url`.

This module imports nothing of the bench, so every layer (plan, store, endpoints, commands) may use it.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
from dataclasses import dataclass, field
from typing import overload
from urllib.parse import quote, unquote, urlsplit, urlunsplit

__all__ = ["MIN_SECRET_CHARS", "NO_SECRETS", "REDACTED", "Secrets", "redact", "redact_cells", "safe_url"]

REDACTED = "[REDACTED]"
MIN_SECRET_CHARS = 8
"""A known secret shorter than this is not searched for in free text (URL user info is removed whatever its length)."""

_AWS_SECRET_SHAPE = r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
_AWS_SECRET = re.compile(_AWS_SECRET_SHAPE)
"""The one shape with no literal piece to look for first: searched for alone (a fifth of the time of all the shapes
at once) in text that holds no trigger but a word like "key" (a model request: its tool schemas say "key")."""
_SHAPES = re.compile(
    "|".join(
        [
            r"\bsk-[A-Za-z0-9_\-]{16,}",  # an OpenAI-style key
            r"(?i:bearer)\s+[A-Za-z0-9._~+/\-]{16,}=*",  # a bearer token
            r"(?<=://)[A-Za-z0-9._~%!$&'()*+,;=:\-]+(?=@[A-Za-z0-9\[])",  # a URL's user info (user:password)
            r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",  # a JWT (header.payload.signature)
            r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b",  # an AWS access key id
            _AWS_SECRET_SHAPE,  # an AWS secret key's shape (checked in `_shapes`)
            r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})",  # a GitHub token
            r"\bxox[abposre]-[A-Za-z0-9\-]{10,}",  # a Slack token
        ]
    )
)
_BASIC = re.compile(r"(?i:\bbasic)\s+([A-Za-z0-9+/]{6,}={0,2})(?![A-Za-z0-9+/=])")
"""`Basic <base64>` (HTTP basic auth): redacted when the base64 decodes to `user:password`, so prose ("basic
troubleshooting") is left alone."""
_TRIGGERS = ("sk-", "bearer", "@", "eyj", "akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa", "ghp_",
             "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox", "basic")  # fmt: skip
"""Lower-cased pieces one of which every shape but the AWS secret key holds: text holding none skips the patterns
(most text). A GitHub token's own prefixes, not "gh": that is in "high" and "through", and misses `github_pat_`."""
_SECRET_KEY_CONTEXT = re.compile(r"(?i)(secret|aws|credential|password|passwd|token|key)")
"""A 40-character base64 run is an AWS secret key only next to words like these (a hash or a path is not)."""


def _basic(m: re.Match[str]) -> str:
    try:
        decoded = base64.b64decode(m.group(1) + "=" * (-len(m.group(1)) % 4), validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return m.group(0)
    if ":" not in decoded or not decoded.isprintable():
        return m.group(0)
    return m.group(0)[: m.start(1) - m.start(0)] + REDACTED


def _shapes(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        token = m.group(0)
        if len(token) == 40 and re.fullmatch(r"[A-Za-z0-9/+]{40}", token):  # the AWS secret key's bare shape:
            before = text[max(m.start() - 40, 0) : m.start()]  # only beside a word like "secret", and mixed like
            mixed = all(any(f(c) for c in token) for f in (str.isupper, str.islower, str.isdigit))  # a key (a hex
            if not (mixed and _SECRET_KEY_CONTEXT.search(before)):  # digest or a path is not)
                return token
        return REDACTED

    text = _SHAPES.sub(one, text)
    return _BASIC.sub(_basic, text) if "basic" in text.lower() else text


@dataclass(frozen=True, slots=True)
class Secrets:
    """The values of one run that no written text may hold."""

    values: tuple[str, ...] = ()
    """The secret values themselves (the API key, the base URL's user name and password)."""

    @classmethod
    def of(cls, base_url: str | None, api_key_env: str | None) -> Secrets:
        """A run's secrets: its key variable's value (read from the environment) and its base URL's user info."""
        found: list[str] = []
        key = os.environ.get(api_key_env or "")
        if key:
            found.append(key)
        if base_url:
            try:
                parts = urlsplit(base_url)
                found += [p for p in (parts.username, parts.password) if p]
            except ValueError:
                pass  # not a URL: the text-shape rule still removes any user info
        return cls.known(*found)

    @classmethod
    def known(cls, *values: str) -> Secrets:
        """Secrets of given values (each in every spelling of `_spellings`; shorter than MIN_SECRET_CHARS: not kept)."""
        spellings = {s for v in values for s in _spellings(v) if len(s) >= MIN_SECRET_CHARS}
        return cls(tuple(sorted(spellings, key=lambda s: (-len(s), s))))

    _pattern: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    """The values as one case-insensitive pattern, longest first (compiled once per run)."""

    _lowered: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """The values lower-cased: a cheap test before the pattern runs (most text holds none)."""

    def __post_init__(self) -> None:
        pattern = re.compile("|".join(map(re.escape, self.values)), re.IGNORECASE) if self.values else None
        object.__setattr__(self, "_pattern", pattern)
        object.__setattr__(self, "_lowered", tuple({v.lower() for v in self.values}))


def _spellings(value: str) -> set[str]:
    """A secret as written raw, URL-decoded and -encoded, and JSON-escaped once and twice (a tool call's
    arguments are JSON inside a JSON request body)."""
    out = {value, unquote(value), quote(value, safe="")}
    for v in list(out):
        once = json.dumps(v)[1:-1]
        out |= {once, json.dumps(once)[1:-1]}
    return out


NO_SECRETS = Secrets()
"""No known secret: only the shapes (URL user info, `sk-` keys, bearer tokens) are removed."""


def _maybe_aws_secret(text: str) -> bool:
    return len(text) >= 40 and _SECRET_KEY_CONTEXT.search(text) is not None and _AWS_SECRET.search(text) is not None


_CACHED_CHARS = 2048
"""Texts up to this long are remembered with their redaction (a run stores the same tool names, scopes, states and
case ids thousands of times: 1,980 distinct texts in 71,379 cells of a run of the built-in cases)."""


def redact(text: str, secrets: Secrets = NO_SECRETS) -> str:
    """`text` with every secret of the run, any URL user info and anything shaped like a key replaced."""
    if not text:
        return text
    if type(text) is not str:  # a str subclass (an enum's value) is returned as itself when unchanged: a cached
        return _redact(text, secrets)  # equal str would not be it
    if len(text) <= _CACHED_CHARS:
        return _redact_remembered(text, secrets)
    return _redact_long_remembered(text, secrets)


@functools.lru_cache(maxsize=4096)
def _redact_remembered(text: str, secrets: Secrets) -> str:
    return _redact(text, secrets)


@functools.lru_cache(maxsize=512)
def _redact_long_remembered(text: str, secrets: Secrets) -> str:
    """Long texts, fewer of them: a model request's body is the whole conversation so far, tens of kilobytes, and a
    cassette redacts it several times (vcrpy filters a request to find its match, to play it and to count plays;
    measured: a sixth of a replay's CPU time went to redacting the same bodies again). A sweep loads each cassette
    again at every grid point: the bodies of one model's recording (about 120 for the committed ones) must fit, or
    each point redacts them all again (`real-models`: 4,414 of 7,781 bodies redacted with room for 64, 1,341 with
    512, 13% of its CPU time; about 10 MB more at its peak)."""
    return _redact(text, secrets)


def _redact(text: str, secrets: Secrets) -> str:
    low = text.lower()
    if any(t in low for t in _TRIGGERS) or _maybe_aws_secret(text):  # the shapes first: a URL's whole user info
        text = _shapes(text)  # goes, not only the password within it
        low = text.lower()
    pattern = secrets._pattern
    if pattern is None or not any(v in low for v in secrets._lowered):
        return text
    return pattern.sub(REDACTED, text)


@overload
def redact_cells(row: dict[str, object], secrets: Secrets) -> dict[str, object]: ...
@overload
def redact_cells(row: tuple[object, ...], secrets: Secrets) -> tuple[object, ...]: ...
def redact_cells(
    row: dict[str, object] | tuple[object, ...], secrets: Secrets
) -> dict[str, object] | tuple[object, ...]:  # fmt: skip
    """A row (tuple or dict of cells) with every text cell (and every text in a list cell) redacted."""
    if isinstance(row, dict):
        return {k: v if type(v) in _NOT_TEXT else _cell(v, secrets) for k, v in row.items()}
    if isinstance(row, tuple):
        return tuple(v if type(v) in _NOT_TEXT else _cell(v, secrets) for v in row)
    raise TypeError(f"a row is a tuple or a dict, not {type(row).__name__}")


_NOT_TEXT = frozenset({int, float, bool, type(None)})
"""Cell types passed through without a call (most cells of a row: counts, flags, times, NULLs)."""


def _cell(value: object, secrets: Secrets) -> object:
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, list | tuple):
        return type(value)(_cell(v, secrets) for v in value)
    return value


def safe_url(url: str | None) -> str | None:
    """A URL as stored: scheme, host, port and path (no user info, query or fragment)."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact(url)  # not parseable as a URL: stored as text, user info removed
    netloc = parts.netloc.rpartition("@")[2]
    if (netloc, parts.query, parts.fragment) == (parts.netloc, "", "") and "#" not in url and "?" not in url:
        return url  # nothing to remove: stored exactly as given
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
