"""The bench runner: CLI, DuckDB metrics, resume, locking, cassettes through serve-sim."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from runners.cli import main
from runners.domain.evalset import load_cases
from runners.domain.profiles import trajectory_for_model
from runners.endpoints.simulator import SimulatorServer
from runners.plan.options import BenchOptions
from runners.plan.settings import ModelSettings
from runners.run.bench import case_run_id, plan_run, run_bench
from runners.store import connection
from runners.store.connection import connect
from runners.store.errors import DatabaseLockedError, MetricsDbError
from tests._rows import query as _q

ONE = "empty_logs_gateway_timeout_t1"


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Any socket connect fails: replay must not touch the network."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("network blocked in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    yield


def test_run_writes_consistent_metrics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "bench.duckdb"
    assert main(["run", "--db", str(db), "--epochs", "2", "--label", "ci"]) == 0
    printed = capsys.readouterr().out
    assert "bench run br-" in printed and "completed" in printed
    n_cases = len(load_cases())
    (runs,) = _q(db, "SELECT count(*) FROM case_runs")[0]
    assert runs == 2 * n_cases
    assert _q(db, "SELECT status, planned_case_runs, label FROM bench_runs") == [("completed", 2 * n_cases, "ci")]
    # the acceptance query answers
    assert _q(db, "SELECT family, avg(passed::int) FROM case_runs GROUP BY 1")
    # counts in case_runs agree with tool_calls and events
    mismatch = _q(
        db,
        """
        SELECT c.case_run_id FROM case_runs c
        LEFT JOIN (SELECT case_run_id, count(*) FILTER (WHERE invocation_status <> 'REJECTED') AS inv,
                          count(*) FILTER (WHERE invocation_status = 'REJECTED') AS rej
                   FROM tool_calls GROUP BY 1) t USING (case_run_id)
        LEFT JOIN (SELECT case_run_id, count(*) FILTER (WHERE kind = 'RELEASED') AS released,
                          count(*) FILTER (WHERE kind = 'MODEL_CALL' AND purpose = 'DIAGNOSIS') AS calls
                   FROM events GROUP BY 1) e USING (case_run_id)
        WHERE coalesce(t.inv, 0) <> c.tool_invocations OR coalesce(t.rej, 0) <> c.tool_rejections
           OR e.released <> 1 OR e.calls <> c.model_calls
        """,
    )
    assert mismatch == []
    views = {r[0] for r in _q(db, "SELECT table_name FROM information_schema.tables WHERE table_type = 'VIEW'")}
    assert {"v_pass_rate", "v_wasted_calls", "v_outcomes"} <= views


def test_interrupted_run_resumes_without_duplicates(tmp_path: Path) -> None:
    db = tmp_path / "b.duckdb"
    seen = []

    def interrupt_after_three(done: int, total: int, run: object) -> None:
        if run is not None:
            seen.append(run)
            if len(seen) == 3:
                raise KeyboardInterrupt

    opts = BenchOptions.of(case_ids=[ONE], epochs=6, db=db)
    with pytest.raises(KeyboardInterrupt):
        run_bench(plan_run(opts), on_progress=interrupt_after_three)
    ((bench_id, status),) = _q(db, "SELECT bench_run_id, status FROM bench_runs")
    assert status == "interrupted"
    assert _q(db, "SELECT count(*) FROM case_runs")[0][0] == 3, "every completed case run is kept"
    summary = run_bench(plan_run(BenchOptions.of(db=db, resume=bench_id)))
    assert summary.executed == 3 and summary.skipped == 3
    rows = _q(db, "SELECT case_run_id FROM case_runs ORDER BY case_run_id")
    assert [r[0] for r in rows] == sorted(case_run_id(bench_id, ONE, e) for e in range(1, 7))
    assert _q(db, "SELECT status FROM bench_runs") == [("completed",)]
    assert main(["run", "--db", str(db), "--resume", bench_id]) == 2, "a completed run cannot be resumed"


def test_second_writer_gets_a_clear_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "locked.duckdb"
    connect(db).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import duckdb, sys, time
            con = duckdb.connect({str(db)!r})
            print("locked", flush=True)
            sys.stdin.readline()
        """)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(DatabaseLockedError, match="locked by another process"):
            connect(db)
        assert main(["run", "--db", str(db), "--case", ONE]) == 2
        assert "locked by another process" in capsys.readouterr().err
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=10)


def test_a_reader_holding_the_file_locks_out_the_writer(tmp_path: Path) -> None:
    """A read-only holder's shared lock conflicts with a writer too: the lock table says so, whatever DuckDB's text."""
    db = tmp_path / "read.duckdb"
    connect(db).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import duckdb, sys
            con = duckdb.connect({str(db)!r}, read_only=True)
            print("locked", flush=True)
            sys.stdin.readline()
        """)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(DatabaseLockedError, match="locked by another process"):
            connect(db)
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=10)


def test_an_open_failure_that_mentions_a_lock_is_not_taken_for_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether the file is locked is asked of the lock table, never read from DuckDB's message."""
    db = tmp_path / "free.duckdb"
    connect(db).close()

    def failing(*_args: object, **_kw: object) -> duckdb.DuckDBPyConnection:
        raise duckdb.IOException('IO Error: Could not set lock on file "x": Conflicting lock is held')

    monkeypatch.setattr(connection, "attach", failing)
    with pytest.raises(MetricsDbError) as raised:
        connect(db)
    assert not isinstance(raised.value, DatabaseLockedError)
    assert str(raised.value).startswith(f"{db}: cannot open as a DuckDB database (IO Error: Could not set lock")


def test_foreign_and_newer_databases_are_refused(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign.duckdb"
    con = duckdb.connect(str(foreign))
    con.execute("CREATE TABLE customers (id INT)")
    con.close()
    with pytest.raises(MetricsDbError, match="another program"):
        connect(foreign)
    newer = tmp_path / "newer.duckdb"
    connect(newer).close()
    con = duckdb.connect(str(newer))
    con.execute("INSERT INTO schema_version VALUES (99, now())")
    con.close()
    with pytest.raises(MetricsDbError, match=r"schema version 99"):
        connect(newer)
    garbage = tmp_path / "garbage.duckdb"
    garbage.write_bytes(b"this is not a database" * 100)
    with pytest.raises(MetricsDbError, match=r"garbage\.duckdb"):
        connect(garbage)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["run", "--evalset", "no_such_family"], "no such file, folder or family"),
        (["run", "--no-gain-threshold", "0"], "--no-gain-threshold 0"),
        (["run", "--max-tool-calls", "-3"], "--max-tool-calls -3"),
        (["run", "--model", "gpt-4"], "--model 'gpt-4'"),
        (["run", "--model", "scripted:nope"], "unknown behaviour profile"),
        (["run", "--case", "nope_case"], "unknown case id"),
        (["cases", "--evalset", "/nonexistent/x.yaml"], "no such file"),
    ],
)
def test_unusable_input_exits_2_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    assert main([*argv, *(["--db", str(tmp_path / "x.duckdb")] if argv[0] == "run" else [])]) == 2
    assert needle in capsys.readouterr().err


@pytest.mark.parametrize(
    "command", [[], ["cases"], ["run"], ["serve-sim"], ["schema"], ["sweep"], ["recommend"], ["report"], ["gate"]]
)
def test_help_on_every_command(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert "usage: harness-bench" in text
    if command == ["run"]:
        assert "--no-gain-threshold" in text and "--record-mode" in text and "--resume" in text


def _outcomes(runs: list[object]) -> dict[str, tuple[str, str | None, str | None]]:
    out = {}
    for r in runs:
        d = r.result.decision  # type: ignore[attr-defined]
        out[r.case.id] = (
            d.outcome.value,
            getattr(d.fallback_kind, "value", None),
            getattr(d.stop_reason, "value", None),
        )  # type: ignore[attr-defined]
    return out


def test_record_through_serve_sim_then_replay_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    cases = load_cases()
    ids = [c.id for c in cases][:8]
    monkeypatch.setenv("HB_SIM_KEY", "sk-canary-record-test-0000")
    cassettes = tmp_path / "cassettes"
    inproc = run_bench(plan_run(BenchOptions.of(case_ids=ids, db=tmp_path / "a.duckdb")))
    with SimulatorServer(cases, trajectory_for=trajectory_for_model) as sim:
        recorded = run_bench(plan_run(BenchOptions.of(
            case_ids=ids, db=tmp_path / "b.duckdb",
            model_settings=ModelSettings(model="openai:scripted", base_url=sim.base_url, api_key_env="HB_SIM_KEY"),
            cassettes=cassettes, record_mode="once",
        )))  # fmt: skip
    assert _outcomes(recorded.runs) == _outcomes(inproc.runs)
    files = sorted(cassettes.rglob("*.json"))
    assert len(files) == len(ids)
    for f in files:
        assert "sk-canary-record-test" not in f.read_text()
    request.getfixturevalue("no_network")
    replayed = run_bench(plan_run(BenchOptions.of(
        case_ids=ids, db=tmp_path / "c.duckdb",
        model_settings=ModelSettings(
            model="openai:scripted", base_url="http://127.0.0.1:1/v1", api_key_env="HB_SIM_KEY",
        ),
        cassettes=cassettes, record_mode="none",
    )))  # fmt: skip
    assert _outcomes(replayed.runs) == _outcomes(inproc.runs)
    assert all(r.result.error is None for r in replayed.runs)


def test_cassette_miss_names_the_cassette_and_the_rerecord_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_network: None
) -> None:
    monkeypatch.setenv("HB_SIM_KEY", "x")
    cassettes = tmp_path / "empty"
    cassettes.mkdir()  # a replay of a missing folder is refused by the plan (tests/runners/plan/test_plan_rules.py)
    summary = run_bench(plan_run(BenchOptions.of(
        case_ids=[ONE], db=tmp_path / "m.duckdb",
        model_settings=ModelSettings(
            model="openai:scripted", base_url="http://127.0.0.1:1/v1", api_key_env="HB_SIM_KEY",
        ),
        cassettes=cassettes, record_mode="none", config=_cfg(no_gain_threshold=3),
    )))  # fmt: skip
    (run,) = summary.runs
    assert not run.passed
    error = run.result.error or ""
    assert f"{cassettes}/openai_scripted/{ONE}/epoch1.json" in error
    assert f"re-record with: harness-bench run --case {ONE} --model openai:scripted" in error
    assert "--tool-choice auto" in error and "--schema-mode adaptive" in error and "--api-key-env HB_SIM_KEY" in error
    assert "--record-mode all" in error and "--no-gain-threshold 3" in error
    # a replay never contacted its --base-url: the command asks for a live one instead of echoing it
    assert "--base-url LIVE_BASE_URL" in error and "--base-url http://127.0.0.1:1/v1 was never contacted" in error
    stored = _q(tmp_path / "m.duckdb", "SELECT error, passed FROM case_runs")
    assert stored == [(error, None)]  # a cassette miss is the bench's failure: unjudged, never the model's


def _cfg(**kw: int) -> object:
    from harness.config import HarnessConfig

    return HarnessConfig(**kw)


def test_schema_file_is_current(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    current = capsys.readouterr().out
    committed = Path(__file__).resolve().parents[2] / "evalsets" / "schema.json"
    assert committed.read_text() == current, "run: harness-bench schema > evalsets/schema.json"
    assert json.loads(current)["properties"]["cases"]["type"] == "array"


def test_serve_sim_on_a_busy_port_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["serve-sim", "--port", str(port)]) == 2
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


def test_openai_model_without_key_or_base_url_is_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    db = tmp_path / "k.duckdb"
    assert main(["run", "--db", str(db), "--model", "openai:gpt-4o-mini", "--case", ONE]) == 2
    assert "OPENAI_API_KEY is not set" in capsys.readouterr().err
    assert not db.exists(), "refused before the database file is created"
