"""The analyst views over the metrics tables, keyed by every swept setting (recreated at writer connect by
`migrations.ensure_settings_columns` when they lack one)."""

from __future__ import annotations

__all__ = ["VIEWS", "view_statements"]

VIEWS = ("v_pass_rate", "v_wasted_calls", "v_outcomes", "v_sweep_points")


def view_statements(swept: list[str]) -> list[str]:
    """The analyst views: never merge two bench runs, sweeps, or points that differ in any swept setting."""
    cols = "".join(f'c."{name}", ' for name in swept)
    keys = f"c.bench_run_id, b.sweep_id, c.model, c.label, {cols}"
    source = "FROM case_runs c JOIN bench_runs b USING (bench_run_id)"
    return [
        f"""CREATE OR REPLACE VIEW v_pass_rate AS
            SELECT {keys}c.family, count(*) AS case_runs, avg(c.passed::INT) AS pass_rate
            {source} GROUP BY ALL""",
        f"""CREATE OR REPLACE VIEW v_wasted_calls AS
            SELECT {keys}c.family, avg(c.wasted_invocations) AS mean_wasted_invocations,
                   avg(c.tool_rejections) AS mean_rejections, avg(c.tool_invocations) AS mean_tool_invocations
            {source} GROUP BY ALL""",
        f"""CREATE OR REPLACE VIEW v_outcomes AS
            SELECT {keys}c.family, c.outcome, c.fallback_kind, c.stop_reason, count(*) AS case_runs
            {source} GROUP BY ALL""",
        f"""CREATE OR REPLACE VIEW v_sweep_points AS
            SELECT {keys}count(*) AS case_runs, avg(c.passed::INT) AS pass_rate,
                   avg(c.tool_invocations) AS mean_tool_invocations, avg(c.wasted_invocations) AS mean_wasted
            {source} WHERE b.sweep_id IS NOT NULL GROUP BY ALL""",
    ]
