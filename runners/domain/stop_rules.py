"""Stop rules as declared policies: the information-gain contract's NO_GAIN threshold, the caps and the loop
detectors peers ship, and their combinations — each a small typed object with its parameters, parsed from a spec.

- `no-gain:T` — T consecutive NO_GAIN make the run saturated: STOP_REQUIRED, then one call for the Draft. The seeds'
  contract (this Harness's `--no-gain-threshold`).
- `tool-cap:N` — at most N tool calls reach a backend; the next is refused and the run stops. Mirrors pydantic-ai's
  `UsageLimits(tool_calls_limit=N)`; live, the Harness's `--max-tool-invocations`.
- `turn-cap:N` — at most N model calls; the next is not made and the run stops. Mirrors the OpenAI Agents SDK's
  `max_turns` and Inspect AI's `message_limit`; live, `--max-model-calls` (which the SemanticGuard's call counts
  against too: a Draft written on the N-th call gets no guard call, and is not published as a SUCCESS).
- `token-cap:N` — once the run's input plus output tokens reach N, no further model call (nor any tool call of the
  turn that reached it). Mirrors pydantic-ai's `total_tokens_limit` and Inspect AI's `token_limit`; live,
  `--max-total-tokens` (the SemanticGuard's call included).
- `repeat:k=K,w=W` — a tool request whose tool and scope came K-1 times already among the W-1 requests before it
  stops the run: loop detectors' exact-repeat tier (the pydantic-ai harness's proposal defaults to 5 in a window of
  10; HolmesGPT's loop detection counts repeated identical calls).
- `error-cycle:k=K` — a request repeating, for the K-th time in a row, a call whose K-1 requests before it all
  reached the backend and failed: loop detectors' error-cycle tier.
- `alternation:k=K` — a request completing K cycles of A, B, A, B, … (A ≠ B, the last 2K requests) stops the run:
  loop detectors' A-B alternation tier.
- `A+B` — whichever stops first: a team's combination ("NO_GAIN 2 or cap 8").

Every rule but `no-gain` is a hard stop: when it fires, the request (or model call) it fired on does not run and no
further model call is made — the run ends as at a budget, and the Harness publishes from what it has (a FALLBACK when
verified facts exist, else FAILED; the plain loop publishes FAILED, as peers raise on a limit). Requests are the
model's tool requests in order (rejected ones too: a loop detector watches what the model asks for); a request's
identity is its tool and normalised scope, and a malformed request (no scope) is never a repeat.

The loop detectors run live as the Harness's request checks (`harness.request_checks`, `--stop-rule`): each one's
`stop_before` says why a run should stop; the Harness decides.

A spec that names an unknown rule or a bad parameter is a `StopRuleError` naming it, in one line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import StrEnum
from typing import Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from harness import SeenRequest

__all__ = [
    "DEFAULT_POLICY_SPECS",
    "Alternation",
    "AnyOf",
    "Detector",
    "ErrorCycle",
    "NoGain",
    "Repeat",
    "RuleKind",
    "Single",
    "StopRule",
    "StopRuleError",
    "TokenCap",
    "ToolCap",
    "TurnCap",
    "parse_policy_file",
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

    @property
    def detector(self) -> bool:
        """A loop detector (a request check the Harness runs live), not the contract or a cap."""
        return self in (RuleKind.REPEAT, RuleKind.ERROR_CYCLE, RuleKind.ALTERNATION)


def _same_call(a: SeenRequest, b: SeenRequest) -> bool:
    return a.scope is not None and a.tool == b.tool and a.scope == b.scope


class _Rule(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NoGain(_Rule):
    """`no-gain:T` — the information-gain contract: T consecutive NO_GAIN saturate the run; STOP_REQUIRED is
    delivered and the model gets one call to write its Draft from what it verified. No peer ships it: it is what the
    caps and detectors below are compared with. Live: `--no-gain-threshold T`."""

    kind: Literal[RuleKind.NO_GAIN] = RuleKind.NO_GAIN
    """The rule."""
    threshold: int = Field(ge=1, le=1_000)
    """Consecutive NO_GAIN that saturate the run."""

    @property
    def spec(self) -> str:
        """The rule as a spec."""
        return f"no-gain:{self.threshold}"


class ToolCap(_Rule):
    """`tool-cap:N` — at most N tool calls reach a backend; the (N+1)-th is refused and the run ends there, no further
    model call. Mirrors pydantic-ai's `UsageLimits(tool_calls_limit=N)` (checked before a tool call runs, raising
    `UsageLimitExceeded`). Refused requests (duplicates, bad envelopes) do not count: they never reach a backend.
    Live: `--max-tool-invocations N`."""

    kind: Literal[RuleKind.TOOL_CAP] = RuleKind.TOOL_CAP
    """The rule."""
    n: int = Field(ge=1, le=1_000_000)
    """The cap."""

    @property
    def spec(self) -> str:
        """The rule as a spec."""
        return f"tool-cap:{self.n}"

    def stops_invocation(self, executed: int) -> bool:
        """Whether a request about to reach a backend would be the (n+1)-th backend call."""
        return executed >= self.n


class TurnCap(_Rule):
    """`turn-cap:N` — at most N model calls; the (N+1)-th is not made and the run ends there. Mirrors the OpenAI
    Agents SDK's `Runner.run(max_turns=N)` (a turn is one model invocation; `MaxTurnsExceeded` past it), pydantic-ai's
    `UsageLimits(request_limit=N)` and Inspect AI's `message_limit`. Live: `--max-model-calls N`, which the
    SemanticGuard's call counts against too (a Draft written on the N-th call gets no guard call, and is not
    published as a SUCCESS)."""

    kind: Literal[RuleKind.TURN_CAP] = RuleKind.TURN_CAP
    """The rule."""
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
    """`token-cap:N` — once the run's input plus output tokens reach N, no further model call (nor any tool call of the
    turn whose answer reached it). Mirrors pydantic-ai's `UsageLimits(total_tokens_limit=...)` and Inspect AI's
    `token_limit`, both checked between model calls (a call is never cut in the middle); pydantic-ai stops once the
    total is past its limit, so its limit N-1 is `token-cap:N`. Live: `--max-total-tokens N`, the SemanticGuard's call
    included."""

    kind: Literal[RuleKind.TOKEN_CAP] = RuleKind.TOKEN_CAP
    """The rule."""
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
    """`repeat:k=K,w=W` — a tool request whose tool and normalised scope came K-1 times already among the W-1 requests
    before it stops the run, before it runs. The exact-repeat tier of the loop detectors peers ship: the pydantic-ai
    harness's loop-detection proposal (the same tool with the same arguments K times within the last W calls; its
    default K=5, W=10) and HolmesGPT's repeated identical calls. Identity is the normalised scope, so arguments that
    differ in case or whitespace only are a repeat, as the Harness's duplicate check sees them. Live:
    `--stop-rule`."""

    kind: Literal[RuleKind.REPEAT] = RuleKind.REPEAT
    """The rule."""
    k: int = Field(ge=2, le=1_000)
    """Occurrences, the request itself included, that stop the run."""
    w: int = Field(ge=2, le=10_000)
    """The window of requests looked at, the request itself included."""

    @model_validator(mode="after")
    def _window_holds_k(self) -> Repeat:
        # A window shorter than k can never hold k requests: the rule would never fire, silently.
        if self.w < self.k:
            raise ValueError(f"w={self.w} is less than k={self.k}: the window can never hold k requests (w ≥ k)")
        return self

    @property
    def spec(self) -> str:
        """The rule as a spec."""
        return f"repeat:k={self.k},w={self.w}"

    def stop_before(self, seen: Sequence[SeenRequest], request: SeenRequest) -> str | None:
        """Why `request` stops the run: it is the k-th of its tool and scope among the last w requests."""
        if request.scope is None:
            return None
        count = 1 + sum(_same_call(r, request) for r in seen[max(len(seen) - (self.w - 1), 0) :])
        if count < self.k:
            return None
        return f"{self.spec}: {request.tool} asked for the same scope {count} times within {self.w} requests"


class ErrorCycle(_Rule):
    """`error-cycle:k=K` — a request repeating, for the K-th time in a row, a call whose K-1 requests before it all
    reached the backend and failed: the proposal's error-cycle tier (a model retrying the call that keeps failing).
    A call refused before the backend did not fail. Live: `--stop-rule`."""

    kind: Literal[RuleKind.ERROR_CYCLE] = RuleKind.ERROR_CYCLE
    """The rule."""
    k: int = Field(ge=2, le=1_000)
    """Requests of the same call in a row (the earlier ones failed) that stop the run."""

    @property
    def spec(self) -> str:
        """The rule as a spec."""
        return f"error-cycle:k={self.k}"

    def stop_before(self, seen: Sequence[SeenRequest], request: SeenRequest) -> str | None:
        """Why `request` stops the run: the k-1 requests before it were this same call, and each one failed."""
        tail = seen[max(len(seen) - (self.k - 1), 0) :]
        if len(tail) < self.k - 1 or not all(r.failed and _same_call(r, request) for r in tail):
            return None
        return f"{self.spec}: {request.tool} asked again after failing {self.k - 1} times in a row on the same scope"


class Alternation(_Rule):
    """`alternation:k=K` — the last 2K requests, the new one included, alternate A, B, A, B, … between two different
    calls: the proposal's A-B alternation tier (a model oscillating between two queries). Live: `--stop-rule`."""

    kind: Literal[RuleKind.ALTERNATION] = RuleKind.ALTERNATION
    """The rule."""
    k: int = Field(ge=2, le=1_000)
    """Cycles of A, B (2k requests, the request itself the last) that stop the run."""

    @property
    def spec(self) -> str:
        """The rule as a spec."""
        return f"alternation:k={self.k}"

    def stop_before(self, seen: Sequence[SeenRequest], request: SeenRequest) -> str | None:
        """Why `request` stops the run: the last 2k requests, this one included, alternate between two calls."""
        window = [*seen[max(len(seen) - (2 * self.k - 1), 0) :], request]
        if len(window) < 2 * self.k or any(r.scope is None for r in window):
            return None
        a, b = window[0], window[1]
        if _same_call(a, b) or not all(_same_call(r, a if i % 2 == 0 else b) for i, r in enumerate(window)):
            return None
        return f"{self.spec}: {a.tool} and {b.tool} asked in turn {self.k} times"


Single = Union[NoGain, ToolCap, TurnCap, TokenCap, Repeat, ErrorCycle, Alternation]
"""One rule."""
Detector = Union[Repeat, ErrorCycle, Alternation]
"""The loop detectors: checked before each tool request (live, the Harness's request checks)."""


class AnyOf(_Rule):
    """Several rules: whichever stops first."""

    rules: tuple[Single, ...] = Field(min_length=1)
    """The rules, in the order given."""

    @property
    def spec(self) -> str:
        """The combination as a spec (`parse_rules` reads it back to the same policy)."""
        return "+".join(r.spec for r in self.rules)

    @property
    def no_gain(self) -> NoGain | None:
        """Its NO_GAIN threshold, if it has one."""
        return next((r for r in self.rules if isinstance(r, NoGain)), None)

    @property
    def tool_cap(self) -> ToolCap | None:
        """Its tool-call cap, if it has one."""
        return next((r for r in self.rules if isinstance(r, ToolCap)), None)

    @property
    def turn_cap(self) -> TurnCap | None:
        """Its model-call cap, if it has one."""
        return next((r for r in self.rules if isinstance(r, TurnCap)), None)

    @property
    def token_cap(self) -> TokenCap | None:
        """Its token cap, if it has one."""
        return next((r for r in self.rules if isinstance(r, TokenCap)), None)

    @property
    def detectors(self) -> tuple[Detector, ...]:
        """Its loop detectors, in the order given."""
        return tuple(r for r in self.rules if isinstance(r, Repeat | ErrorCycle | Alternation))

    @property
    def call_rules(self) -> tuple[TurnCap | TokenCap, ...]:
        """The rules checked before each model call."""
        return tuple(r for r in (self.turn_cap, self.token_cap) if r is not None)


StopRule = AnyOf
"""A declared stop policy: one rule or several (`parse_rules`)."""

_PART = re.compile(r"(?P<kind>[a-z-]+)(?::(?P<params>.*))?", re.DOTALL)
_WHOLE = re.compile(r"[0-9]+")
_POSITIONAL = {RuleKind.NO_GAIN: "threshold", RuleKind.TOOL_CAP: "n", RuleKind.TURN_CAP: "n",
               RuleKind.TOKEN_CAP: "n"}  # fmt: skip
_MODELS: dict[RuleKind, type[_Rule]] = {
    RuleKind.NO_GAIN: NoGain, RuleKind.TOOL_CAP: ToolCap, RuleKind.TURN_CAP: TurnCap, RuleKind.TOKEN_CAP: TokenCap,
    RuleKind.REPEAT: Repeat, RuleKind.ERROR_CYCLE: ErrorCycle, RuleKind.ALTERNATION: Alternation,
}  # fmt: skip
_EXAMPLES = {RuleKind.NO_GAIN: "no-gain:2", RuleKind.TOOL_CAP: "tool-cap:8", RuleKind.TURN_CAP: "turn-cap:6",
             RuleKind.TOKEN_CAP: "token-cap:20000", RuleKind.REPEAT: "repeat:k=3,w=10",
             RuleKind.ERROR_CYCLE: "error-cycle:k=2", RuleKind.ALTERNATION: "alternation:k=2"}  # fmt: skip
_KINDS = ", ".join(k.value for k in RuleKind)


def _single(text: str) -> Single:
    shown = repr(text.strip()) if len(text.strip()) <= 80 else f"{text.strip()[:80]!r}…"
    found = _PART.fullmatch(text.strip())
    if found is None or found.group("kind") not in {k.value for k in RuleKind}:
        raise StopRuleError(f"{shown}: not a stop rule; rules are {_KINDS} (e.g. no-gain:2, repeat:k=3,w=10)")
    kind = RuleKind(found.group("kind"))
    example = _EXAMPLES[kind]
    raw = found.group("params")
    if raw is None or not raw.strip():
        raise StopRuleError(f"{shown}: {kind.value} needs a parameter (e.g. {example})")
    params: dict[str, str] = {}
    if kind in _POSITIONAL and "=" not in raw:
        params[_POSITIONAL[kind]] = raw.strip()
    else:
        for part in raw.split(","):
            key, sep, value = (p.strip() for p in part.partition("="))
            if not sep or not key:
                raise StopRuleError(f"{shown}: {part.strip()!r} is not key=value (e.g. {example})")
            if key in params:
                raise StopRuleError(f"{shown}: {key} given twice (e.g. {example})")
            params[key] = value
    for key, value in params.items():
        if not _WHOLE.fullmatch(value):
            raise StopRuleError(f"{shown}: {key}={value!r} is not a whole number (e.g. {example})")
    try:
        rule = _MODELS[kind].model_validate({k: int(v) for k, v in params.items()})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or kind.value
        why = first["msg"].removeprefix("Value error, ")
        raise StopRuleError(f"{shown}: {where}: {why} (e.g. {example})") from None
    assert isinstance(rule, NoGain | ToolCap | TurnCap | TokenCap | Repeat | ErrorCycle | Alternation)
    return rule


def parse_rules(spec: str) -> StopRule:
    """A spec (`no-gain:2`, `repeat:k=3,w=10`, `no-gain:2+tool-cap:8`) as a policy; StopRuleError names what is
    wrong, in one line."""
    shown = repr(spec) if len(spec) <= 80 else f"{spec[:80]!r}…"
    parts = spec.split("+")
    if not spec.strip() or any(not p.strip() for p in parts):
        raise StopRuleError(f"{shown}: empty stop rule (e.g. no-gain:2 or no-gain:2+tool-cap:8)")
    rules = tuple(_single(p) for p in parts)
    for kind in RuleKind:
        same = [r for r in rules if r.kind is kind]
        if len(same) > 1 and not kind.detector:
            raise StopRuleError(f"{shown}: more than one {kind.value} (give one)")
    if len({r.spec for r in rules}) < len(rules):
        raise StopRuleError(f"{shown}: a rule given twice (give it once)")
    return AnyOf(rules=rules)


def parse_policy_file(text: str) -> tuple[StopRule, ...]:
    """A policy file's policies: one spec a line; blank lines and `#` comments (whole lines or after a spec) are
    skipped. StopRuleError names the first bad line (`line N: ...`), or says the file holds no policy."""
    policies: list[StopRule] = []
    text = text.removeprefix("\ufeff")  # a byte-order mark, as editors on Windows write one
    for number, line in enumerate(text.splitlines(), start=1):
        spec = line.split("#", 1)[0].strip()
        if not spec:
            continue
        try:
            policies.append(parse_rules(spec))
        except StopRuleError as exc:
            raise StopRuleError(f"line {number}: {exc}") from None
    if not policies:
        raise StopRuleError("no policy in it (one spec a line, e.g. no-gain:2 or repeat:k=3,w=10)")
    return tuple(policies)


DEFAULT_POLICY_SPECS: tuple[str, ...] = (
    "no-gain:2",
    "no-gain:3",
    "tool-cap:8",
    "turn-cap:8",
    "repeat:k=3,w=10",
    "error-cycle:k=2",
    "alternation:k=3",
)
"""What `compare-stops` compares when given no policy: the contract at the Harness's default threshold and one above,
a cap of each kind peers ship, and each loop detector at the settings their tiers propose (docs/calibration.md)."""
