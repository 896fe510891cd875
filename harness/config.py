"""HarnessConfig: thresholds and hard budgets. The model is never told any of these. RunLimits: the ones a run's
event log line and trace span carry, so that a reader of either can replay its stop decisions."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from harness.contracts import HarnessControl, SchemaMode


class HarnessConfig(BaseModel):
    """Per-run control settings; out-of-range values fail with the field's name."""

    # Attribute docstrings become field descriptions: the bench's --help text (runners/plan/settings.py, which
    # also holds how the bench exposes each field: its flag, column and sweep axis).
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    no_gain_threshold: int = Field(default=2, ge=1)
    """Consecutive NO_GAIN observations that make the run SATURATED."""
    protocol_violation_threshold: int = Field(default=2, ge=1)
    """Consecutive progress-protocol violations that make the run SATURATED."""
    max_model_calls: int = Field(default=12, ge=1)
    """Diagnosis-loop model calls (every retry attempt counts)."""
    max_tool_invocations: int = Field(default=10, ge=1)
    """Backend tool invocations; rejections never count."""
    max_total_tokens: int = Field(default=200_000, ge=1)
    """Input plus output tokens over the whole run (a run total, not the per-response `max_tokens` of a request)."""
    max_observation_bytes: int = Field(default=4_096, ge=256)
    """Byte cap of one model observation, header included; the rest is cut and flagged `truncated`."""
    max_run_observation_bytes: int = Field(default=65_536, ge=256)
    """Observation bytes handed to the model over the whole run (the run's bytes budget, docs/architecture.md §5.6)."""
    max_argument_bytes: int = Field(default=16_384, ge=64)
    """Tool-call arguments larger than this are a malformed envelope."""
    # Timeouts and waits are capped at one day: they feed thread, socket and sleep timeouts, which raise
    # OverflowError past ~9.2e9 s (threading.TIMEOUT_MAX).
    deadline_seconds: float = Field(default=120.0, gt=0, le=86_400)
    """Wall-clock deadline for the whole run."""
    tool_timeout_seconds: float = Field(default=30.0, gt=0, le=86_400)
    """Timeout of one backend tool call (also capped by the run's deadline)."""
    model_timeout_seconds: float = Field(default=60.0, gt=0, le=86_400)
    """Timeout of one model HTTP request."""
    max_model_attempts: int = Field(default=3, ge=1)
    """Attempts per model call on retryable errors (rate limit, 5xx, timeout)."""
    retry_backoff_seconds: float = Field(default=0.5, ge=0, le=86_400)
    """Base of the exponential backoff when no Retry-After is given."""
    max_retry_wait_seconds: float = Field(default=20.0, ge=0, le=86_400)
    """Upper bound on a single backoff or Retry-After wait."""
    # A record lives within one run, which its deadline ends: a TTL past the longest deadline is never reached.
    record_ttl_seconds: float = Field(default=3_600.0, gt=0, le=86_400)
    """How long a canonical record stays readable for guards and the snapshot."""
    min_excerpt_chars: int = Field(default=4, ge=1)
    """Shortest citation excerpt EvidenceGuard accepts."""
    schema_mode: SchemaMode = SchemaMode.ADAPTIVE
    """Agent-facing envelope schema: adaptive (states the pending id per call) or static."""
    ablate: HarnessControl = HarnessControl.NONE
    """The one Harness control switched off, to measure what it buys (never for production): none, envelope (with
    the information-gain contract), duplicate-rejection, evidence-guard or semantic-guard."""


class RunLimits(BaseModel):
    """The thresholds and budgets a run used: on its event log's RUN_STARTED line and its trace span."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    no_gain_threshold: int
    """Consecutive NO_GAIN that saturate the run."""
    protocol_violation_threshold: int
    """Consecutive protocol violations that saturate the run."""
    max_tool_invocations: int
    """Backend tool invocations allowed."""
    max_model_calls: int
    """Model call attempts allowed."""
    max_total_tokens: int
    """Input plus output tokens allowed."""
    schema_mode: str | None = None
    """The envelope schema mode the model was shown (`adaptive`, …; None: not known)."""

    @classmethod
    def of(cls, config: HarnessConfig) -> RunLimits:
        """The limits of a run under `config`."""
        return cls(no_gain_threshold=config.no_gain_threshold,
                   protocol_violation_threshold=config.protocol_violation_threshold,
                   max_tool_invocations=config.max_tool_invocations, max_model_calls=config.max_model_calls,
                   max_total_tokens=config.max_total_tokens, schema_mode=config.schema_mode.value)  # fmt: skip
