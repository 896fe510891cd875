"""The analysis's named queries: the same numbers as the tables they summarise, one scope at a time, and a
configuration of the wrong length refused rather than matched against the wrong columns."""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import pytest

from runners.cli import main
from runners.plan.settings import swept_names
from runners.store import report_reads as reads
from runners.store.connection import connect


@pytest.fixture(scope="module")
def con(tmp_path_factory: pytest.TempPathFactory) -> Iterator[duckdb.DuckDBPyConnection]:
    db = tmp_path_factory.mktemp("reads") / "r.duckdb"
    sweep = ["sweep", "--db", str(db), "--evalset", "empty_logs", "--no-gain-threshold", "1,3", "--label", "S"]
    assert main(sweep) == 0
    assert main(["run", "--db", str(db), "--evalset", "empty_logs", "--label", "L"]) == 0
    c = connect(db, read_only=True)
    yield c
    c.close()


def _sweep_and_run(con: duckdb.DuckDBPyConnection) -> tuple[str, str]:
    (sweep_id,) = con.execute("SELECT DISTINCT sweep_id FROM bench_runs WHERE sweep_id IS NOT NULL").fetchone() or ()
    (run_id,) = con.execute("SELECT bench_run_id FROM case_runs WHERE label = 'L' LIMIT 1").fetchone() or ()
    return str(sweep_id), str(run_id)


def test_one_bench_run_or_one_configuration_never_pools_the_others(con: duckdb.DuckDBPyConnection) -> None:
    sweep_id, run_id = _sweep_and_run(con)
    (run,) = reads.family_counts(con, reads.BenchRunScope(run_id))
    n = con.execute("SELECT count(*) FROM case_runs WHERE bench_run_id = ?", [run_id]).fetchone()
    assert (run.family, run.case_runs) == ("empty_logs", n[0] if n else None)
    assert run.success + run.fallback + run.failed == run.case_runs
    assert run.saturated + run.budget + run.protocol + run.on_its_own == run.case_runs
    assert len(reads.tool_requests(con, reads.BenchRunScope(run_id))) == run.case_runs
    swept = reads.sweep_case_runs(con, sweep_id)
    points = {r.config for r in swept}
    assert len(points) == 2 and all(len(p) == len(swept_names()) for p in points)
    for point in points:
        (fam,) = reads.family_counts(con, reads.SweepPointScope(sweep_id, point))
        assert fam.case_runs == sum(r.config == point for r in swept) < len(swept)  # one point's, not both points'
    summaries = reads.bench_run_summaries(con, None)
    assert len(summaries) == 3 and [s.started_at for s in summaries] == sorted(
        (s.started_at for s in summaries), reverse=True
    )
    assert [s.bench_run_id for s in reads.bench_run_summaries(con, run_id)] == [run_id]


def test_a_configuration_of_the_wrong_length_is_refused(con: duckdb.DuckDBPyConnection) -> None:
    sweep_id, _ = _sweep_and_run(con)
    with pytest.raises(ValueError, match="a configuration has"):
        reads.family_counts(con, reads.SweepPointScope(sweep_id, (1,)))


def test_the_exports_rows_carry_every_column(con: duckdb.DuckDBPyConnection) -> None:
    _, run_id = _sweep_and_run(con)
    labelled = reads.bench_run_rows(con, label="L")
    assert [r.columns["bench_run_id"] for r in labelled] == [run_id]
    assert {"settings_json", *swept_names()} <= set(labelled[0].columns)
    assert len(reads.bench_run_rows(con)) == 3
    rows = reads.case_run_rows_of(con, run_id)
    assert [(r.columns["epoch"], r.columns["case_id"]) for r in rows] == sorted(
        (r.columns["epoch"], r.columns["case_id"]) for r in rows
    )
    counts = reads.threshold_counts(con, "S")
    assert [c.no_gain_threshold for c in counts] == [1, 3]
    assert {r.bench_run_id for r in reads.label_case_runs_at(con, "L", 2)} == {run_id}
