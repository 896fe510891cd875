"""One reader over both stored forms (runners/plan/stored_plan.py): a bench run's row and a sweep's saved options,
each in today's form and in the form written before schema v3, become the same plan inputs; planning a resume
reads the stored run without writing, and the runner takes only a plan."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from runners.plan.options import BenchOptions, ResumeRequest
from runners.plan.rules import BenchInputError
from runners.plan.settings import RunSettings
from runners.plan.stored_plan import StoredForm, restore_options, saved_sweep_options
from runners.run.bench import plan_run, run_bench
from runners.run.sweep import SweepGrid, SweepOptions, plan_sweep, run_sweep

ONE = "empty_logs_gateway_timeout_t1"


def _inputs(opts: BenchOptions) -> tuple[object, ...]:
    return (opts.settings.values(), opts.selection, opts.storage.label, opts.storage.transcripts, opts.replay,
            opts.execution.agent)  # fmt: skip


def test_both_stored_forms_and_their_pre_v3_forms_restore_the_same_options() -> None:
    run = RunSettings.of().with_values({"model": "openai:m", "base_url": "http://127.0.0.1:9/v1"})
    opts = BenchOptions.of(case_ids=[ONE], label="l", epochs=2, config=run.config, model_settings=run.model_settings)
    given = BenchOptions.of(db=Path("x.duckdb"), concurrency=4, max_in_flight=2)
    saved = json.loads(saved_sweep_options(opts))
    row = {"settings_json": run.to_json(), "evalset_specs": "[]", "case_ids_json": json.dumps([ONE]), "label": "l",
           "epochs": 2, "cassettes": None, "record_mode": None, "transcripts": True, "agent": "native"}  # fmt: skip
    legacy_saved = {k: v for k, v in saved.items() if k != "settings"} | {
        "model": "openai:m", "base_url": "http://127.0.0.1:9/v1"}  # fmt: skip
    legacy_row = {k: v for k, v in row.items() if k != "settings_json"} | {
        "config_json": json.dumps(run.config.model_dump()), "model": "openai:m",
        "base_url": "http://127.0.0.1:9/v1"}  # fmt: skip
    restored = [
        restore_options(saved, StoredForm.SWEEP, given, "--resume sw"),
        restore_options(legacy_saved, StoredForm.SWEEP, given, "--resume sw"),
        restore_options(row, StoredForm.BENCH_RUN, given, "--resume br"),
        restore_options(legacy_row, StoredForm.BENCH_RUN, given, "--resume br"),
    ]
    for r in restored:
        assert _inputs(r) == _inputs(opts)
        invocation = (r.storage.db, r.execution.concurrency, r.execution.max_in_flight)
        assert invocation == (Path("x.duckdb"), 4, 2), "this invocation's execution"
    moved = BenchOptions(resume=ResumeRequest("br", {"base_url": "http://127.0.0.1:8/v1"}))
    restored_settings = restore_options(row, StoredForm.BENCH_RUN, moved, "w").settings
    assert restored_settings.model_settings.base_url == "http://127.0.0.1:8/v1"
    with pytest.raises(BenchInputError, match="only endpoint settings may change"):
        restore_options(row, StoredForm.BENCH_RUN, BenchOptions(resume=ResumeRequest("br", {"epochs": 3})), "w")
    with pytest.raises(BenchInputError, match="--resume br: its stored settings are unusable"):
        restore_options(row | {"settings_json": "[1]"}, StoredForm.BENCH_RUN, given, "--resume br")


def _interrupt(db: Path, table: str) -> None:
    con = duckdb.connect(str(db))
    con.execute(f"UPDATE {table} SET status = 'interrupted'")
    con.close()


def test_planning_a_resume_reads_the_stored_run_and_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    first = run_bench(plan_run(BenchOptions.of(case_ids=[ONE], epochs=2, label="x", db=db, max_in_flight=3)))
    _interrupt(db, "bench_runs")
    before = db.stat().st_mtime_ns, db.read_bytes()
    plan = plan_run(BenchOptions.of(db=db, resume=first.bench_run_id, concurrency=2, max_in_flight=5))
    assert (db.stat().st_mtime_ns, db.read_bytes()) == before, "planning opened the file read only"
    assert plan.resumes and plan.bench_run_id == first.bench_run_id
    assert (plan.options.storage.label, plan.options.selection.epochs, [c.id for c in plan.cases]) == ("x", 2, [ONE])
    execution = plan.options.execution
    assert (execution.concurrency, execution.max_in_flight) == (2, 5), "a resume keeps --max-in-flight"
    assert run_bench(plan).skipped == 2, "the resume's finished case runs are kept"


def test_planning_a_sweep_resume_restores_its_grid_and_shared_options(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    base = BenchOptions.of(case_ids=[ONE], epochs=1, label="s", db=db, model="scripted")
    new = plan_sweep(SweepOptions(SweepGrid(no_gain_threshold=(1, 2)), base))
    assert not new.resumes and [p.options.settings.config.no_gain_threshold for p in new.points] == [1, 2]
    assert not db.exists(), "a plan writes nothing"
    sweep_id = run_sweep(new).sweep_id
    _interrupt(db, "sweeps")
    resumed = plan_sweep(SweepOptions(SweepGrid(), BenchOptions.of(db=db), resume=ResumeRequest(sweep_id)))
    assert resumed.resumes and resumed.sweep_id == sweep_id
    assert [p.record.settings_json for p in resumed.points] == [p.record.settings_json for p in new.points]
    assert _inputs(resumed.base.options) == _inputs(new.base.options)
    assert run_sweep(resumed).status == "completed"


def test_the_runner_takes_only_a_plan(tmp_path: Path) -> None:
    """Options reach the runner only through planning: passing them straight is a TypeError naming the fix."""
    db = tmp_path / "t.duckdb"
    with pytest.raises(TypeError, match=r"plan_run\(BenchOptions"):
        run_bench(BenchOptions.of(db=db))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"plan_sweep\(SweepOptions"):
        run_sweep(SweepOptions(SweepGrid(no_gain_threshold=(1,)), BenchOptions.of(db=db)))  # type: ignore[arg-type]
    assert not db.exists()
