"""What the live check runs: its built-in cases and the `tool_choice` modes."""

from __future__ import annotations

__all__ = ["DEFAULT_CASES", "MODES"]

# One case from each family that makes tool calls, plus missing context: structure, not content.
DEFAULT_CASES = (
    "empty_logs_gateway_timeout_t1",
    "generic_kb_gateway_runbook_timeout_t3",
    "duplicate_scopes_sql_layout_refunds_shop42",
    "protocol_violations_missing_prev_obs_corrected_visa_429_t4",
    "missing_context_no_tenant_gateway_429",
    "diagnosable_gateway_risk_pool_exhausted_t1",
    "fabricated_citations_never_ran_call99_t1",
    "tool_failures_log_backend_down_db_answers_t8_settlement",
)
MODES = ("auto", "required")
"""tool_choice values run live. llama-server --jinja accepts auto/none/required; a named function
(an object) is not accepted: it logs "Wrong type supplied" and falls back to auto (probed each run)."""
