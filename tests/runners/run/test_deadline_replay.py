"""A run cut by its deadline is recorded as a budget stop and replays as one, and an endpoint that answers
200 with something other than a chat completion is the endpoint's fault.

Live: the real openai SDK over HTTP to serve-sim on 127.0.0.1 with 1.5 s per answer, a 4 s deadline and a
2.5 s model timeout (the deadline is longer than one call's timeout, as with the defaults 120 s / 60 s):
the third call of one case, and the SemanticGuard call of another, are cut by the deadline. Replay: record
mode none, network blocked, no key — with all its time left, it must still stop where the live run did.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from harness.config import HarnessConfig
from harness.contracts import ModelErrorKind
from runners.cli import main
from runners.domain.evalset import load_cases
from runners.domain.profiles import trajectory_for_model
from runners.endpoints.simulator import SimulatorServer
from runners.plan.options import BenchOptions
from runners.plan.settings import ModelSettings
from runners.run.bench import plan_run, run_bench
from runners.store.cassettes import DEADLINE_READS_HEADER, FaultKind, cassette_path, deadline_reads_of, fault_of
from tests._db import open_read_only
from tests._fake_endpoint import serve
from tests._rows import case_runs_by_case

DIAGNOSIS_CUT = "generic_kb_gateway_runbook_timeout_t3"  # 4 diagnosis calls: the 3rd is cut
GUARD_CUT = "diagnosable_gateway_risk_pool_exhausted_t1"  # 2 diagnosis calls, then the guard: the guard is cut
CASES = [DIAGNOSIS_CUT, GUARD_CUT]
CONFIG = HarnessConfig(deadline_seconds=4.0, model_timeout_seconds=2.5, retry_backoff_seconds=0.05)
MODEL = "openai:scripted"


def _events(db: Path) -> list[tuple[object, ...]]:
    """Every event but its timings: kind, purpose, attempt, error kind, budget, stop reason, detail."""
    con = open_read_only(db)
    try:
        return con.execute(
            "SELECT c.case_id, e.seq, e.kind, e.purpose, e.attempt, e.error_kind, e.budget, e.stop_reason, e.detail"
            " FROM events e JOIN case_runs c USING (case_run_id) ORDER BY c.case_id, e.seq"
        ).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A live recording against a slow serve-sim, two case runs at a time."""
    root = tmp_path_factory.mktemp("deadline")
    cassettes, db = root / "cas", root / "live.duckdb"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HB_DEADLINE_KEY", "sk-live-deadline-test-0123456789")
        with SimulatorServer(load_cases(), trajectory_for=trajectory_for_model, latency_ms=1500) as sim:
            summary = run_bench(plan_run(BenchOptions.of(
                case_ids=CASES, db=db,
                model_settings=ModelSettings(model=MODEL, base_url=sim.base_url, api_key_env="HB_DEADLINE_KEY"),
                cassettes=cassettes, record_mode="once", config=CONFIG, concurrency=2,
            )))  # fmt: skip
    assert summary.executed == len(CASES)
    return cassettes, db


def test_a_deadline_in_any_call_is_a_budget_stop(recorded: tuple[Path, Path]) -> None:
    _, db = recorded
    runs = case_runs_by_case(db)
    for case_id in CASES:
        row = runs[case_id]
        assert (row["stop_reason"], row["budget_hit"]) == ("BUDGET_LIMIT_REACHED", "DEADLINE"), (case_id, row)
        assert row["error"] is None, "a deadline is a budget, not an infrastructure failure"
    assert runs[DIAGNOSIS_CUT]["model_calls"] == 3
    assert runs[GUARD_CUT]["model_calls"] == 2 and runs[GUARD_CUT]["guard_calls"] == 1
    assert runs[GUARD_CUT]["outcome"] != "SUCCESS", "an unverified conclusion is never published"


def test_the_cassette_says_the_deadline_cut_the_attempt(recorded: tuple[Path, Path]) -> None:
    cassettes, _ = recorded
    for case_id in CASES:
        data = json.loads(cassette_path(cassettes, MODEL, case_id, 1).read_text())
        last = data["interactions"][-1]["response"]
        assert fault_of(last) is FaultKind.TIMEOUT
        assert json.loads(last["body"]["string"])["cut_by_deadline"] is True
        assert deadline_reads_of(last) == [], "the run stopped at once: no reading after the cut attempt"
        # each earlier answer carries the readings made after it; the one before the cut attempt was its timeout
        reads = deadline_reads_of(data["interactions"][-2]["response"])
        assert reads and 0 < reads[-1] < CONFIG.model_timeout_seconds
        for earlier in data["interactions"][:-1]:
            assert DEADLINE_READS_HEADER in earlier["response"]["headers"]


def test_replay_reproduces_the_deadline_cut_run_exactly(
    recorded: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cassettes, live_db = recorded

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("network blocked during replay")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    replay_db = tmp_path / "replay.duckdb"
    summary = run_bench(plan_run(BenchOptions.of(
        case_ids=CASES, db=replay_db,
        model=MODEL,
        cassettes=cassettes, record_mode="none", config=CONFIG,
        concurrency=2,
    )))  # fmt: skip
    assert summary.executed == len(CASES) and summary.infra_errors == 0
    assert case_runs_by_case(replay_db) == case_runs_by_case(live_db)
    assert _events(replay_db) == _events(live_db)


def test_a_200_that_is_not_a_chat_completion_is_the_endpoints_fault(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The preflight passes (/models answers), then every chat request gets a 200 HTML page: the rows say
    NOT_A_COMPLETION (typed where the body was read), the summary warns, and the run exits 2 naming the URL."""
    db = tmp_path / "g.duckdb"
    cases = ["empty_logs_gateway_timeout_t1", "missing_context_no_tenant_gateway_429"]
    with serve() as ep:
        for _ in range(6):
            ep.push(200, b"<html><body>Welcome to nginx!</body></html>", {"content-type": "text/html"})
        code = main(["run", "--db", str(db), "--model", "openai:m", "--base-url", ep.base_url,
                     "--case", cases[0], "--case", cases[1]])  # fmt: skip
        url = ep.base_url
    captured = capsys.readouterr()
    err = captured.err.replace("\n", "")
    assert code == 2
    assert "2 of 2 case run(s) ended on an endpoint or cassette error" in err
    # the summary never says the agent finished on its own, nor that the run simply completed
    table = " ".join(captured.out.split())
    assert "own" not in table.replace("known", "") and "err:1" in table, captured.out
    assert "err=no stop reason (the case run ended on a failed model call; see case_runs.error)" in table
    assert "completed, but every case run ended on an endpoint or cassette error" in table
    assert f"the endpoint {url} served no case run" in err
    con = open_read_only(db)
    errors = [r[0] for r in con.execute("SELECT error FROM case_runs ORDER BY case_id").fetchall()]
    kinds = {r[0] for r in con.execute("SELECT DISTINCT error_kind FROM events WHERE kind = 'MODEL_CALL'").fetchall()}
    con.close()
    assert kinds == {ModelErrorKind.NOT_A_COMPLETION.value}
    assert all(f"NOT_A_COMPLETION: endpoint {url} answered HTTP 200 (" in e for e in errors), errors
    assert all("is not a chat completion: '<html>" in e for e in errors), errors


def test_a_200_json_without_choices_is_not_a_completion_either(tmp_path: Path) -> None:
    with serve() as ep:
        for _ in range(3):
            ep.push(200, {"status": "ok"})
        summary = run_bench(plan_run(BenchOptions.of(
            case_ids=["empty_logs_gateway_timeout_t1"], db=tmp_path / "j.duckdb",
            model_settings=ModelSettings(model="openai:m", base_url=ep.base_url),
            config=HarnessConfig(retry_backoff_seconds=0),
        )))  # fmt: skip
    (run,) = summary.runs
    assert run.result.error_kind is ModelErrorKind.NOT_A_COMPLETION and summary.infra_errors == 1
    assert run.result.error is not None and "the response has no choices" in run.result.error


def test_deadline_readings_between_calls_replay_in_order(tmp_path: Path) -> None:
    """A deadline that passed between two calls (no request in flight): the readings made after an answer are
    stored on it and a replay gets them back in order, whatever its own clock says."""
    import time

    import httpx2

    from runners.store.cassettes import CassetteTransport, use_cassette

    inner = httpx2.MockTransport(lambda r: httpx2.Response(200, json={"ok": 1}))
    client = httpx2.Client(transport=CassetteTransport(inner, require_binding=True))
    url = "http://model-endpoint/v1/chat/completions"
    path = tmp_path / "c.json"
    with use_cassette(path, "once") as tape:
        assert tape.deadline_clock.remaining(time.monotonic() + 100) > 99  # the live clock
        client.post(url, json={"turn": 1})
        live = [tape.deadline_clock.remaining(time.monotonic() - 0.5), tape.deadline_clock.remaining(time.monotonic())]
    assert live[0] < 0
    with use_cassette(path, "none") as tape:
        client.post(url, json={"turn": 1})
        far = time.monotonic() + 1000  # the replay's own deadline is far away
        replayed = [tape.deadline_clock.remaining(far) for _ in range(3)]
    assert replayed == [*live, live[-1]], "recorded readings in order; past the last one, it holds"
