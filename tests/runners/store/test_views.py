"""The analyst views carry bench_run_id, sweep_id and every swept setting: repeated runs
are never merged, and v_wasted_calls never merges points that differ only in protocol threshold or budgets."""

from __future__ import annotations

from pathlib import Path

import pytest

from runners.cli import main
from runners.domain.evalset import load_cases
from runners.plan.settings import swept_names
from tests._rows import query as _q

VIEWS = ("v_pass_rate", "v_wasted_calls", "v_outcomes", "v_sweep_points")


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("views") / "v.duckdb"
    # four sweep points that differ only in the protocol threshold and the tool budget ...
    assert main(["sweep", "--db", str(path), "--evalset", "empty_logs", "--epochs", "1", "--no-gain-threshold", "2",
                 "--protocol-violation-threshold", "1,2", "--max-tool-calls", "2,10"]) == 0  # fmt: skip
    # ... and the same configuration run twice, outside any sweep
    for _ in range(2):
        assert main(["run", "--db", str(path), "--evalset", "empty_logs"]) == 0
    return path


@pytest.mark.parametrize("view", VIEWS)
def test_every_view_carries_run_sweep_and_swept_settings(db: Path, view: str) -> None:
    columns = {r[0] for r in _q(db, f"SELECT column_name FROM information_schema.columns WHERE table_name = '{view}'")}
    assert {"bench_run_id", "sweep_id", *swept_names()} <= columns


def test_views_never_merge_bench_runs(db: Path) -> None:
    per_run = dict(_q(db, "SELECT bench_run_id, count(*) FROM case_runs GROUP BY 1"))
    assert len(per_run) == 6
    assert dict(_q(db, "SELECT bench_run_id, sum(case_runs) FROM v_pass_rate GROUP BY 1")) == per_run
    assert dict(_q(db, "SELECT bench_run_id, sum(case_runs) FROM v_outcomes GROUP BY 1")) == per_run
    # one family: one v_wasted_calls row per bench run, its means those of that run alone
    direct = dict(_q(db, "SELECT bench_run_id, avg(tool_invocations) FROM case_runs GROUP BY 1"))
    assert dict(_q(db, "SELECT bench_run_id, mean_tool_invocations FROM v_wasted_calls")) == direct


def test_wasted_calls_keep_points_that_differ_only_in_protocol_threshold_or_budget(db: Path) -> None:
    rows = _q(db, """SELECT protocol_violation_threshold, max_tool_invocations, count(*) FROM v_wasted_calls
                     WHERE sweep_id IS NOT NULL GROUP BY ALL ORDER BY ALL""")  # fmt: skip
    assert rows == [(1, 2, 1), (1, 10, 1), (2, 2, 1), (2, 10, 1)]
    points = _q(
        db, "SELECT protocol_violation_threshold, max_tool_invocations, case_runs FROM v_sweep_points ORDER BY ALL"
    )
    n = len(load_cases(["empty_logs"]))  # the family's case count, one case run each per point
    assert points == [(1, 2, n), (1, 10, n), (2, 2, n), (2, 10, n)]
    # each row's settings are those of the one bench run it summarises
    mismatched = _q(db, """SELECT v.bench_run_id FROM v_wasted_calls v JOIN bench_runs b USING (bench_run_id)
                           WHERE v.protocol_violation_threshold <> b.protocol_violation_threshold
                              OR v.max_tool_invocations <> b.max_tool_invocations""")  # fmt: skip
    assert mismatched == []
