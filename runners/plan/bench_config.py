"""The Harness's settings as the bench runs them: `HarnessConfig`'s fields, each with the bench's marker
(`BenchSetting`: its flag, sweep axis, older spellings) as its own metadata — the library's names, types, bounds,
defaults and docstrings stay the library's — and the loop detectors the bench makes live through the Harness's
request checks (`--stop-rule`). `settings.py` views this class through the flag engine, so the stop rule has its
flag, its `bench_runs` column and its place in a stored run's settings like any other setting."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import Field, field_validator

from harness import HarnessConfig, HarnessControl, RequestCheck, SchemaMode
from runners.domain.stop_rules import RuleKind, StopRule, StopRuleError, parse_rules
from runners.plan.flags import presented
from runners.plan.model_settings import BenchSetting

__all__ = ["NEVER_SATURATES", "BenchHarnessConfig", "PlainPrompt", "live_settings", "request_checks"]

NEVER_SATURATES = 1_000_000
"""A NO_GAIN threshold no run reaches: a run of a policy without `no-gain` (the contract never saturates)."""

_BUDGET_FLAGS = {RuleKind.NO_GAIN: "--no-gain-threshold", RuleKind.TOOL_CAP: "--max-tool-invocations",
                 RuleKind.TURN_CAP: "--max-model-calls", RuleKind.TOKEN_CAP: "--max-total-tokens"}  # fmt: skip


def _marked(name: str, marker: BenchSetting) -> Any:
    """HarnessConfig's field `name` as it is (type, bounds, default, docstring), with the bench's `marker`."""
    return presented(HarnessConfig, name, marker)


_SECONDS = BenchSetting(metavar="SECONDS")


class PlainPrompt(StrEnum):
    """The system prompt the plain loop (`--agent plain`) sends."""

    PLAIN = "plain"
    """Its own: the Harness's without the protocol block (the envelope and the information-gain contract)."""
    HARNESS = "harness"
    """The Harness's, word for word, so that a comparison with the Harness does not change the prompt too."""


class BenchHarnessConfig(HarnessConfig):
    """HarnessConfig, the loop detectors a bench run stops on, and the plain loop's prompt."""

    no_gain_threshold: int = _marked("no_gain_threshold", BenchSetting(sweepable=True, sweep_default=(1, 2, 3, 4)))
    protocol_violation_threshold: int = _marked("protocol_violation_threshold", BenchSetting(sweepable=True))
    max_model_calls: int = _marked("max_model_calls", BenchSetting(sweepable=True))
    # The library's names everywhere (flag, column, stored key); the former flags still parse. `max_tokens` is
    # not one of them: it reads as the per-request cap of a chat request, and this is the run's total.
    max_tool_invocations: int = _marked(
        "max_tool_invocations", BenchSetting(sweepable=True, aliases=("--max-tool-calls",))
    )
    max_total_tokens: int = _marked("max_total_tokens", BenchSetting(sweepable=True, aliases=("--max-tokens",)))
    deadline_seconds: float = _marked("deadline_seconds", BenchSetting(public_name="deadline", metavar="SECONDS"))
    tool_timeout_seconds: float = _marked("tool_timeout_seconds", _SECONDS)
    model_timeout_seconds: float = _marked("model_timeout_seconds", _SECONDS)
    retry_backoff_seconds: float = _marked("retry_backoff_seconds", _SECONDS)
    max_retry_wait_seconds: float = _marked("max_retry_wait_seconds", _SECONDS)
    record_ttl_seconds: float = _marked("record_ttl_seconds", _SECONDS)
    schema_mode: SchemaMode = _marked("schema_mode", BenchSetting(sweepable=True))
    ablate: HarnessControl = _marked("ablate", BenchSetting(sweepable=True, metavar="CONTROL"))

    stop_rule: Annotated[str | None, BenchSetting(metavar="SPEC")] = Field(
        default=None, examples=["repeat:k=3,w=10", "error-cycle:k=2+alternation:k=2"]
    )
    """Loop detectors the run stops on, live (the Harness's request checks; the plain loop's too): repeat:k=K,w=W (a
    tool and scope asked K times within W requests), error-cycle:k=K (the same failing call asked K times in a row),
    alternation:k=K (two calls asked in turn K times), combined with +; the caps are --max-tool-invocations,
    --max-model-calls and --max-total-tokens, the contract's threshold --no-gain-threshold."""

    plain_prompt: Annotated[PlainPrompt, BenchSetting(sweepable=True)] = PlainPrompt.PLAIN
    """The plain loop's system prompt (`--agent plain` only; the Harness's loops always send the Harness's): plain
    (its own, without the protocol block) or harness (the Harness's, word for word)."""

    @field_validator("stop_rule")
    @classmethod
    def _detectors_only(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            policy = parse_rules(value)
        except StopRuleError as exc:  # (the flag's message names the value already)
            raise ValueError(str(exc).removeprefix(f"{value!r}: ")) from None
        for rule in policy.rules:
            if not rule.kind.detector:
                raise ValueError(f"{rule.spec} is not a loop detector: give it as {_BUDGET_FLAGS[rule.kind]}")
        return policy.spec


def request_checks(config: HarnessConfig) -> tuple[RequestCheck, ...]:
    """The request checks a run under `config` is given (none without a stop rule)."""
    if not isinstance(config, BenchHarnessConfig) or config.stop_rule is None:
        return ()
    return parse_rules(config.stop_rule).detectors


def live_settings(policy: StopRule) -> dict[str, int | str | None]:
    """The settings (by public name) that run `policy` live: its threshold (a policy without `no-gain`: one no run
    reaches), its caps as the budgets, its loop detectors as the stop rule; settings it does not name are left out."""
    no_gain = policy.no_gain
    out: dict[str, int | str | None] = {
        "no_gain_threshold": NEVER_SATURATES if no_gain is None else no_gain.threshold,
        "stop_rule": "+".join(d.spec for d in policy.detectors) or None,
    }
    for name, cap in (("max_tool_invocations", policy.tool_cap), ("max_model_calls", policy.turn_cap),
                      ("max_total_tokens", policy.token_cap)):  # fmt: skip
        if cap is not None:
            out[name] = cap.n
    return out
