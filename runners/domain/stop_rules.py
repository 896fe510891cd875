"""Stop rules as declared policies: the information-gain contract's NO_GAIN threshold, the caps and the loop
detectors peers ship, and their combinations — each a small typed object with its parameters, parsed from a spec.

- `no-gain:T` — T consecutive NO_GAIN make the run saturated: STOP_REQUIRED, then one call for the Draft. The seeds'
  contract (this Harness's `--no-gain-threshold`).
- `tool-cap:N` — at most N tool calls reach a backend; the next is refused and the run stops. Mirrors pydantic-ai's
  `UsageLimits(tool_calls_limit=N)`.
- `turn-cap:N` — at most N diagnosis model calls; the next is not made and the run stops. Mirrors the OpenAI Agents
  SDK's `max_turns` and Inspect AI's `message_limit`.
- `token-cap:N` — once the run's input plus output tokens reach N, no further model call. Mirrors pydantic-ai's
  `total_tokens_limit` and Inspect AI's `token_limit`.
- `repeat:k=K,w=W` — a tool request whose tool and scope came K-1 times already among the last W-1 requests stops
  the run: loop detectors' exact-repeat tier (the pydantic-ai harness's proposal defaults to 5 in a window of 10).
- `error-cycle:k=K` — a request repeating the same failing call for the K-th time in a row stops the run: loop
  detectors' error-cycle tier.
- `alternation:k=K` — a request completing K cycles of A, B, A, B, … (A ≠ B) stops the run: loop detectors' A-B
  alternation tier.
- `A+B` — whichever stops first: a team's combination ("NO_GAIN 2 or cap 8").

Every rule but `no-gain` is a hard stop: when it fires, the request (or model call) it fired on does not run and no
further model call is made — the run ends as at a budget, and the Harness publishes from what it has (a FALLBACK when
verified facts exist, else FAILED). Requests are the model's tool requests in order (rejected ones too: a loop
detector watches what the model asks for); a request's identity is its tool and normalised scope.

A spec that names an unknown rule or a bad parameter is a `StopRuleError` naming it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "Alternation",
    "AnyOf",
    "ErrorCycle",
    "NoGain",
    "Repeat",
    "Request",
    "RuleKind",
    "StopRule",
    "StopRuleError",
    "TokenCap",
    "ToolCap",
    "TurnCap",
    "parse_rules",
]


class StopRuleError(ValueError):
    """A stop-rule spec that names an unknown rule or a bad parameter."""


class RuleKind(StrEnum):
    """The rules a spec may name."""

    NO_GAIN = "no-gain"
    TOOL_CAP = "tool-cap"
    TURN_CAP = "turn-cap"
    TOKEN_CAP = "token-cap"
    REPEAT = "repeat"
    ERROR_CYCLE = "error-cycle"
    ALTERNATION = "alternation"


@dataclass(frozen=True, slots=True)
class Request:
    """One tool request as a loop detector sees it."""

    tool: str
    """The tool asked for."""
    scope: str | None
    """Its normalised scope (None: the request was malformed, it has none)."""
    failed: bool = False
    """It reached the backend and the backend failed."""


class _Rule(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NoGain(_Rule):
    """The information-gain contract: a threshold of consecutive NO_GAIN."""

    kind: Literal[RuleKind.NO_GAIN] = RuleKind.NO_GAIN
    threshold: int = Field(ge=1, le=1_000)
    """Consecutive NO_GAIN that saturate the run."""

    @property
    def spec(self) -> str:
        """The rule as a spec."""
        return f"no-gain:{self.threshold}"


class ToolCap(_Rule):
    """At most `n` tool calls reach a backend."""

    kind: Literal[RuleKind.TOOL_CAP] = RuleKind.TOOL_CAP
    n: int = Field(ge=1, le=1_000_000)
    """The cap."""

    @property
    def spec(self) -> str:
        """The rule as a spec."""
        return f"tool-cap:{self.n}"

    def stops_request(self, executed: int, requests: Sequence[Request], request: Request) -> bool:
        """Whether the request about to run would be the (n+1)-th backend call."""
        return executed >= self.n


class TurnCap(_Rule):
    """At most `n` diagnosis model calls."""

    kind: Literal[RuleKind.TURN_CAP] = RuleKind.TURN_CAP
    n: int = Field(ge=1, le=1_000_000)
    """The cap."""

    @property
    def spec(self) -> str:
        """The rule as a spec."""
        return f"turn-cap:{self.n}"

    def stops_model_call(self, calls: int, tokens: int) -> bool:
        """Whether the model call about to be made would be the (n+1)-th."""
        return calls >= self.n


class TokenCap(_Rule):
    """No model call once the run's tokens reach `n`."""

    kind: Literal[RuleKind.TOKEN_CAP] = RuleKind.TOKEN_CAP
    n: int = Field(ge=1, le=2**62)
    """The cap, input plus output tokens."""

    @property
    def spec(self) -> str:
        """The rule as a spec."""
        return f"token-cap:{self.n}"

    def stops_model_call(self, calls: int, tokens: int) -> bool:
        """Whether the run has used its tokens up."""
        return tokens >= self.n


class Repeat(_Rule):
    """An exact repeat of a tool request `k` times within a window of `w` requests."""

    kind: Literal[RuleKind.REPEAT] = RuleKind.REPEAT
    k: int = Field(ge=2, le=1_000)
    """Occurrences, the request itself included, that stop the run."""
    w: int = Field(ge=2, le=10_000)
    """The window of requests looked at, the request itself included."""

    @property
    def spec(self) -> str:
        """The rule as a spec."""
        return f"repeat:k={self.k},w={self.w}"

    def stops_request(self, executed: int, requests: Sequence[Request], request: Request) -> bool:
        """Whether `request` is the k-th of its tool and scope among the last w requests."""
        if request.scope is None:
            return False
        window = [*requests[-(self.w - 1) :], request] if self.w > 1 else [request]
        return sum(r.tool == request.tool and r.scope == request.scope for r in window) >= self.k


class ErrorCycle(_Rule):
    """The same failing call requested `k` times in a row."""

    kind: Literal[RuleKind.ERROR_CYCLE] = RuleKind.ERROR_CYCLE
    k: int = Field(ge=2, le=1_000)
    """Requests of the same call in a row (the earlier ones failed) that stop the run."""

    @property
    def spec(self) -> str:
        """The rule as a spec."""
        return f"error-cycle:k={self.k}"

    def stops_request(self, executed: int, requests: Sequence[Request], request: Request) -> bool:
        """Whether the last k-1 requests were this same call and each failed."""
        tail = requests[-(self.k - 1) :]
        return len(tail) == self.k - 1 and all(
            r.failed and r.tool == request.tool and r.scope == request.scope and r.scope is not None for r in tail
        )


class Alternation(_Rule):
    """An A-B alternation: `k` cycles of two different requests in turn."""

    kind: Literal[RuleKind.ALTERNATION] = RuleKind.ALTERNATION
    k: int = Field(ge=2, le=1_000)
    """Cycles of A, B (2k requests, the request itself the last) that stop the run."""

    @property
    def spec(self) -> str:
        """The rule as a spec."""
        return f"alternation:k={self.k}"

    def stops_request(self, executed: int, requests: Sequence[Request], request: Request) -> bool:
        """Whether the last 2k requests, this one included, alternate between two different calls."""
        window = [*requests[-(2 * self.k - 1) :], request]
        if len(window) < 2 * self.k or any(r.scope is None for r in window):
            return False
        a, b = (window[0].tool, window[0].scope), (window[1].tool, window[1].scope)
        return a != b and all((r.tool, r.scope) == (a if i % 2 == 0 else b) for i, r in enumerate(window))


Single = Union[NoGain, ToolCap, TurnCap, TokenCap, Repeat, ErrorCycle, Alternation]
"""One rule."""
RequestRule = Union[ToolCap, Repeat, ErrorCycle, Alternation]
"""The rules checked before each tool request."""
CallRule = Union[TurnCap, TokenCap]
"""The rules checked before each model call."""


class AnyOf(_Rule):
    """Several rules: whichever stops first."""

    rules: tuple[Single, ...] = Field(min_length=1)
    """The rules, in the order given."""

    @property
    def spec(self) -> str:
        """The combination as a spec."""
        return "+".join(r.spec for r in self.rules)

    @property
    def no_gain(self) -> NoGain | None:
        """Its NO_GAIN threshold, if it has one (the lowest, if several)."""
        found = [r for r in self.rules if isinstance(r, NoGain)]
        return min(found, key=lambda r: r.threshold) if found else None

    @property
    def request_rules(self) -> tuple[RequestRule, ...]:
        """The rules checked before each tool request."""
        return tuple(r for r in self.rules if isinstance(r, ToolCap | Repeat | ErrorCycle | Alternation))

    @property
    def call_rules(self) -> tuple[CallRule, ...]:
        """The rules checked before each model call."""
        return tuple(r for r in self.rules if isinstance(r, TurnCap | TokenCap))


StopRule = AnyOf
"""A declared stop policy: one rule or several (`parse_rules`)."""

_PART = re.compile(r"^(?P<kind>[a-z-]+)(?::(?P<params>.*))?$")
_POSITIONAL = {RuleKind.NO_GAIN: "threshold", RuleKind.TOOL_CAP: "n", RuleKind.TURN_CAP: "n",
               RuleKind.TOKEN_CAP: "n"}  # fmt: skip
_MODELS: dict[RuleKind, type[_Rule]] = {
    RuleKind.NO_GAIN: NoGain, RuleKind.TOOL_CAP: ToolCap, RuleKind.TURN_CAP: TurnCap, RuleKind.TOKEN_CAP: TokenCap,
    RuleKind.REPEAT: Repeat, RuleKind.ERROR_CYCLE: ErrorCycle, RuleKind.ALTERNATION: Alternation,
}  # fmt: skip


def _single(text: str) -> Single:
    found = _PART.match(text.strip())
    kinds = ", ".join(k.value for k in RuleKind)
    if found is None or found.group("kind") not in {k.value for k in RuleKind}:
        raise StopRuleError(f"{text.strip()!r}: not a stop rule; rules are {kinds} (e.g. no-gain:2, repeat:k=3,w=10)")
    kind = RuleKind(found.group("kind"))
    raw = found.group("params")
    params: dict[str, str] = {}
    if raw is None or raw == "":
        raise StopRuleError(f"{text.strip()!r}: {kind.value} needs a parameter (e.g. {_example(kind)})")
    if kind in _POSITIONAL and "=" not in raw:
        params[_POSITIONAL[kind]] = raw
    else:
        for part in raw.split(","):
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                raise StopRuleError(f"{text.strip()!r}: {part!r} is not key=value (e.g. {_example(kind)})")
            if key.strip() in params:
                raise StopRuleError(f"{text.strip()!r}: {key.strip()} given twice")
            params[key.strip()] = value.strip()
    model = _MODELS[kind]
    for key, value in params.items():
        if not re.fullmatch(r"[0-9]+", value):
            raise StopRuleError(f"{text.strip()!r}: {key}={value!r} is not a whole number")
    try:
        rule = model.model_validate({k: int(v) for k, v in params.items()})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "?"
        raise StopRuleError(f"{text.strip()!r}: {where}: {first['msg']} (e.g. {_example(kind)})") from None
    assert isinstance(rule, NoGain | ToolCap | TurnCap | TokenCap | Repeat | ErrorCycle | Alternation)
    return rule


def _example(kind: RuleKind) -> str:
    return {RuleKind.NO_GAIN: "no-gain:2", RuleKind.TOOL_CAP: "tool-cap:8", RuleKind.TURN_CAP: "turn-cap:6",
            RuleKind.TOKEN_CAP: "token-cap:20000", RuleKind.REPEAT: "repeat:k=3,w=10",
            RuleKind.ERROR_CYCLE: "error-cycle:k=2", RuleKind.ALTERNATION: "alternation:k=2"}[kind]  # fmt: skip


def parse_rules(spec: str) -> StopRule:
    """A spec (`no-gain:2`, `repeat:k=3,w=10`, `no-gain:2+tool-cap:8`) as a policy; StopRuleError names what is
    wrong."""
    parts = [p for p in spec.split("+")]
    if not spec.strip() or any(not p.strip() for p in parts):
        raise StopRuleError(f"{spec!r}: empty stop rule (e.g. no-gain:2 or no-gain:2+tool-cap:8)")
    rules = tuple(_single(p) for p in parts)
    if sum(isinstance(r, NoGain) for r in rules) > 1:
        raise StopRuleError(f"{spec!r}: more than one no-gain threshold")
    return AnyOf(rules=rules)
