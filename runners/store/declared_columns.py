"""The columns the run settings and kept options have had (`KNOWN_COLUMNS`, `RENAMED_COLUMNS`): a column is derived
from its field when a database is opened (runners/store/migrations.py adds what a file lacks), so a field renamed
without a rename migration would add an empty column beside the old one's values; `unmigrated_columns` names a
declaration that does not match this record (a test runs it on the bench's own)."""

from __future__ import annotations

from runners.plan.options import DeclaredColumns

__all__ = ["KNOWN_COLUMNS", "RENAMED_COLUMNS", "unmigrated_columns"]

RENAMED_COLUMNS: dict[str, str] = {"max_tool_calls": "max_tool_invocations", "max_tokens": "max_total_tokens"}
"""Columns of declared fields a migration renamed (old -> new: v9, in `bench_runs`, `case_runs` and the stored
settings)."""

KNOWN_COLUMNS: dict[str, tuple[str, ...]] = {
    "bench_runs": (
        "model", "base_url", "api_key_env", "tool_choice", "parallel_tool_calls", "temperature", "tool_call_format",
        "no_gain_threshold", "protocol_violation_threshold", "max_model_calls", "max_tool_invocations",
        "max_total_tokens", "max_observation_bytes", "max_run_observation_bytes", "max_argument_bytes", "deadline",
        "tool_timeout_seconds", "model_timeout_seconds", "max_model_attempts", "retry_backoff_seconds",
        "max_retry_wait_seconds", "record_ttl_seconds", "min_excerpt_chars", "schema_mode", "stop_rule",
        "evalset_specs", "case_ids_json", "epochs", "label", "transcripts", "agent", "cassettes", "record_mode",
        "guard_model", "guard_base_url", "ablate", "plain_prompt", *RENAMED_COLUMNS,
    ),
    "case_runs": (
        "no_gain_threshold", "protocol_violation_threshold", "max_model_calls", "max_tool_invocations",
        "max_total_tokens", "schema_mode", "ablate", "plain_prompt", *RENAMED_COLUMNS,
    ),
}  # fmt: skip
"""Every column a declared setting or kept option has had, by table. The columns are derived from the declaration
when a file is opened (`ensure_settings_columns`): a field renamed without a migration would add an empty column
beside the old one's values, so a declared column not listed here, or a listed one no field declares and no
migration renamed, is refused by `unmigrated_columns` (a test runs it)."""


def unmigrated_columns(columns: DeclaredColumns) -> list[str]:
    """What `columns` (a declaration's) asks of a database that no migration accounts for, one line each: a new
    column not in `KNOWN_COLUMNS` (a new field: list it; a renamed one: a rename migration first, see
    `RENAMED_COLUMNS`), or a known column no field declares any more and no migration renamed."""
    problems = []
    for table, declared in (("bench_runs", columns.bench_columns), ("case_runs", columns.case_columns)):
        names = {name for name, _ in declared}
        known = set(KNOWN_COLUMNS[table])
        for name in sorted(names - known):
            problems.append(
                f"{table}.{name}: a column no migration knows: list a new field in KNOWN_COLUMNS;"
                " a renamed field needs a rename migration (its values would stay in the old column)"
            )
        for name in sorted(known - names - set(RENAMED_COLUMNS)):
            problems.append(f"{table}.{name}: no field declares it any more and no migration renamed it")
    return problems
