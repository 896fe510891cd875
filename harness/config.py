"""HarnessConfig: thresholds and hard budgets. The model is never told any of these."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from harness.contracts import SchemaMode


@dataclass(frozen=True, slots=True)
class BenchSetting:
    """How the bench exposes a settings field (`runners/plan/settings.py` derives the CLI flag, the DuckDB
    column, the sweep axis and resume from the field plus this marker; a field without it is exposed
    under its own name, not sweepable)."""

    public_name: str | None = None
    """CLI flag (`--public-name`) and DuckDB column; default: the field name."""
    sweepable: bool = False
    """`sweep` takes a comma list for it and makes it a grid axis; `case_runs` carries it as a column."""
    sweep_default: tuple[int | float | str, ...] = ()
    """The sweep's axis when the flag is not given (default: the field's default alone)."""
    metavar: str | None = None
    """Placeholder shown in --help (default: from the type)."""
    endpoint: bool = False
    """Says where the model is reached, not what is measured: `--resume` may take a new value."""


class HarnessConfig(BaseModel):
    """Per-run control settings; out-of-range values fail with the field's name."""

    # Attribute docstrings become field descriptions: the bench's --help text (runners/plan/settings.py).
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    no_gain_threshold: Annotated[int, BenchSetting(sweepable=True, sweep_default=(1, 2, 3, 4))] = Field(default=2, ge=1)
    """Consecutive NO_GAIN observations that make the run SATURATED."""
    protocol_violation_threshold: Annotated[int, BenchSetting(sweepable=True)] = Field(default=2, ge=1)
    """Consecutive progress-protocol violations that make the run SATURATED."""
    max_model_calls: Annotated[int, BenchSetting(sweepable=True)] = Field(default=12, ge=1)
    """Diagnosis-loop model calls (every retry attempt counts)."""
    max_tool_invocations: Annotated[int, BenchSetting("max_tool_calls", sweepable=True)] = Field(default=10, ge=1)
    """Backend tool invocations; rejections never count."""
    max_total_tokens: Annotated[int, BenchSetting("max_tokens", sweepable=True)] = Field(default=200_000, ge=1)
    """Input plus output tokens over the whole run (a run total, not the per-response `max_tokens` of a request)."""
    max_observation_bytes: int = Field(default=4_096, ge=256)
    """Byte cap of one model observation, header included; the rest is cut and flagged `truncated`."""
    max_run_observation_bytes: int = Field(default=65_536, ge=256)
    """Observation bytes handed to the model over the whole run (seed 000 §9's bytes budget)."""
    max_argument_bytes: int = Field(default=16_384, ge=64)
    """Tool-call arguments larger than this are a malformed envelope."""
    # Timeouts and waits are capped at one day: they feed thread, socket and sleep timeouts, which raise
    # OverflowError past ~9.2e9 s (threading.TIMEOUT_MAX).
    deadline_seconds: Annotated[float, BenchSetting("deadline", metavar="SECONDS")] = Field(
        default=120.0, gt=0, le=86_400
    )
    """Wall-clock deadline for the whole run."""
    tool_timeout_seconds: Annotated[float, BenchSetting(metavar="SECONDS")] = Field(default=30.0, gt=0, le=86_400)
    """Timeout of one backend tool call (also capped by the run's deadline)."""
    model_timeout_seconds: Annotated[float, BenchSetting(metavar="SECONDS")] = Field(default=60.0, gt=0, le=86_400)
    """Timeout of one model HTTP request."""
    max_model_attempts: int = Field(default=3, ge=1)
    """Attempts per model call on retryable errors (rate limit, 5xx, timeout)."""
    retry_backoff_seconds: Annotated[float, BenchSetting(metavar="SECONDS")] = Field(default=0.5, ge=0, le=86_400)
    """Base of the exponential backoff when no Retry-After is given."""
    max_retry_wait_seconds: Annotated[float, BenchSetting(metavar="SECONDS")] = Field(default=20.0, ge=0, le=86_400)
    """Upper bound on a single backoff or Retry-After wait."""
    # A record lives within one run, which its deadline ends: a TTL past the longest deadline is never reached.
    record_ttl_seconds: Annotated[float, BenchSetting(metavar="SECONDS")] = Field(default=3_600.0, gt=0, le=86_400)
    """How long a canonical record stays readable for guards and the snapshot."""
    min_excerpt_chars: int = Field(default=4, ge=1)
    """Shortest citation excerpt EvidenceGuard accepts."""
    schema_mode: Annotated[SchemaMode, BenchSetting(sweepable=True)] = SchemaMode.ADAPTIVE
    """Agent-facing envelope schema: adaptive (states the pending id per call) or static."""
