"""Reliability: injected faults (tools, model endpoint, process, files) and a canary secret.

Each test names the fault it injects; the table of docs/reliability.md counts them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from harness.agent import run_diagnosis
from harness.config import HarnessConfig
from harness.contracts import BudgetKind, EvidenceStatus, InvocationStatus, ReleaseOutcome, StopReason
from harness.models.openai_model import OpenAIChatModel
from harness.prompts import DiagnosisTask
from harness.tools.base import ToolResult
from harness.trace import EventKind
from runners.cli import main
from runners.domain.scripted import ScriptedChatModel, Trajectory
from runners.plan.options import BenchOptions
from runners.plan.rules import BenchInputError
from runners.plan.settings import ModelSettings
from runners.run.bench import plan_run, run_bench
from tests._db import open_read_only
from tests._fake_endpoint import completion, serve
from tests.conftest import LINES, LookupInput, LookupTool

ROOT = Path(__file__).resolve().parents[3]
TRAJ = Trajectory.model_validate({
    "steps": [{"tool": "lookup", "input": {"query": "pool"}}, {"tool": "lookup", "input": {"query": "timeout"}}],
    "draft": {"conclusion": None, "next_steps": ["check the pool"]},
})  # fmt: skip


class HangingTool(LookupTool):
    """A backend that never answers in time."""

    def run(self, parsed: LookupInput) -> ToolResult:
        time.sleep(3.0)
        return super().run(parsed)


class MalformedTool(LookupTool):
    """A backend that returns garbage instead of a ToolResult, or a self-contradicting one."""

    def __init__(self, mode: str) -> None:
        super().__init__(LINES)
        self.mode = mode

    def run(self, parsed: LookupInput) -> ToolResult:
        self.calls += 1
        if self.mode == "dict":
            return {"rows": [1, 2]}  # type: ignore[return-value]
        return ToolResult(EvidenceStatus.EVIDENCE, 3, {"query": parsed.query}, ())  # says 3, returns none


# -- tools ----------------------------------------------------------------------------------------------
def test_fault_tool_hangs_past_the_deadline() -> None:
    cfg = HarnessConfig(deadline_seconds=0.6)
    t0 = time.perf_counter()
    r = run_diagnosis(DiagnosisTask("q"), [HangingTool(LINES)], ScriptedChatModel(TRAJ), config=cfg)
    wall = time.perf_counter() - t0
    assert wall < 2.0, "the run must not wait for the hanging backend"
    (inv,) = [e for e in r.events if e.kind is EventKind.TOOL_INVOCATION]
    assert inv.invocation_status is InvocationStatus.FAILED and "timed out" in (inv.detail or "")
    assert [e.budget for e in r.events if e.kind is EventKind.BUDGET_EXHAUSTED] == [BudgetKind.DEADLINE]
    assert r.decision.stop_reason is StopReason.BUDGET_LIMIT_REACHED
    assert r.decision.outcome is ReleaseOutcome.FAILED, "no verified fact: fail closed"
    assert [e.kind for e in r.events].count(EventKind.RELEASED) == 1


def test_fault_tool_slower_than_its_timeout_is_a_failed_call_and_the_run_goes_on() -> None:
    cfg = HarnessConfig(tool_timeout_seconds=0.2, deadline_seconds=30)
    r = run_diagnosis(DiagnosisTask("q"), [HangingTool(LINES)], ScriptedChatModel(TRAJ), config=cfg)
    inv = [e for e in r.events if e.kind is EventKind.TOOL_INVOCATION]
    assert len(inv) == 2 and all(e.invocation_status is InvocationStatus.FAILED for e in inv)
    assert not [e for e in r.events if e.kind is EventKind.GAIN_APPLIED], "failures are never NO_GAIN"
    assert r.decision.stop_reason is None and r.decision.outcome is ReleaseOutcome.FAILED


@pytest.mark.parametrize("mode", ["dict", "contradiction"])
def test_fault_tool_returns_a_malformed_payload(mode: str) -> None:
    tool = MalformedTool(mode)
    r = run_diagnosis(DiagnosisTask("q"), [tool], ScriptedChatModel(TRAJ))
    assert [e.kind for e in r.events].count(EventKind.RELEASED) == 1
    snapshot = r.decision.snapshot
    assert snapshot is not None and not snapshot.observed_facts, "a malformed record is never a fact"
    assert snapshot.limitations and r.decision.outcome is ReleaseOutcome.FAILED
    if mode == "dict":
        inv = [e for e in r.events if e.kind is EventKind.TOOL_INVOCATION]
        assert all("malformed tool payload" in (e.detail or "") for e in inv)


# -- model endpoint -----------------------------------------------------------------------------------
def _tool_call(call_id: str, query: str) -> dict[str, object]:
    args = {"input": {"query": query}}
    return {"id": call_id, "type": "function", "function": {"name": "lookup", "arguments": json.dumps(args)}}


def _model(url: str, monkeypatch: pytest.MonkeyPatch, timeout: float = 5.0) -> OpenAIChatModel:
    monkeypatch.setenv("HB_FAULT_KEY", "sk-fault-test-key-0001")
    return OpenAIChatModel("m", base_url=url, api_key_env="HB_FAULT_KEY", timeout_seconds=timeout)


def test_fault_endpoint_timeout_then_success(monkeypatch: pytest.MonkeyPatch) -> None:
    with serve() as ep:
        ep.push_fault("sleep", 200, completion('{"conclusion": null, "missing_info": ["tenant"]}'), seconds=1.5)
        ep.push(200, completion('{"conclusion": null, "missing_info": ["tenant"]}'))
        cfg = HarnessConfig(model_timeout_seconds=0.4, retry_backoff_seconds=0)
        r = run_diagnosis(DiagnosisTask("q"), [LookupTool(LINES)], _model(ep.base_url, monkeypatch), config=cfg)
    kinds = [e.error_kind.value if e.error_kind else "ok" for e in r.events if e.kind is EventKind.MODEL_CALL]
    assert kinds == ["TIMEOUT", "ok"]
    assert r.decision.outcome is ReleaseOutcome.FALLBACK


def test_fault_endpoint_resets_the_connection_mid_body(monkeypatch: pytest.MonkeyPatch) -> None:
    body = completion('{"conclusion": null, "missing_info": ["time window"]}')
    with serve() as ep:
        ep.push_fault("reset", 200, body)
        ep.push(200, body)
        cfg = HarnessConfig(retry_backoff_seconds=0)
        r = run_diagnosis(DiagnosisTask("q"), [LookupTool(LINES)], _model(ep.base_url, monkeypatch), config=cfg)
    kinds = [e.error_kind.value if e.error_kind else "ok" for e in r.events if e.kind is EventKind.MODEL_CALL]
    assert kinds[-1] == "ok" and kinds[0] in {"CONNECTION", "NOT_A_COMPLETION"}
    assert r.decision.outcome is ReleaseOutcome.FALLBACK


def test_fault_endpoint_response_far_over_the_token_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    with serve() as ep:
        ep.push(200, completion(None, [_tool_call("c1", "pool")], {"prompt_tokens": 5_000_000, "completion_tokens": 9}))
        ep.push(200, completion('{"conclusion": "never asked"}'))
        r = run_diagnosis(DiagnosisTask("q"), [LookupTool(LINES)], _model(ep.base_url, monkeypatch))
        asked = len(ep.requests)
    assert asked == 1, "no extra model call after the token budget is gone"
    assert r.decision.stop_reason is StopReason.BUDGET_LIMIT_REACHED
    assert [e.budget for e in r.events if e.kind is EventKind.BUDGET_EXHAUSTED] == [BudgetKind.TOKENS]
    assert not [e for e in r.events if e.kind is EventKind.TOOL_INVOCATION], "the tool call was not executed"


def test_fault_endpoint_echoes_the_key_in_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with serve() as ep:
        ep.push(401, {"error": {"message": "Incorrect API key provided: sk-fault-test-key-0001"}})
        r = run_diagnosis(DiagnosisTask("q"), [LookupTool(LINES)], _model(ep.base_url, monkeypatch))
    assert r.error is not None and "[REDACTED]" in r.error
    text = json.dumps([str(e) for e in r.events]) + r.error + r.decision.reason
    assert "sk-fault-test-key-0001" not in text


# -- process --------------------------------------------------------------------------------------------
def test_fault_sigkill_half_way_then_resume(tmp_path: Path) -> None:
    db = tmp_path / "killed.duckdb"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cases = [a for c in ("empty_logs", "missing_context") for a in ("--evalset", c)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "runners.cli", "run", "--db", str(db), "--epochs", "60", *cases],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    # Kill once case runs have been committed (the WAL grows with the first flush), well before the end: 60
    # epochs are several seconds of work, the first flush lands after about one.
    wal = Path(f"{db}.wal")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (wal.exists() and wal.stat().st_size > 50_000):
        assert proc.poll() is None, "the bench run ended before it could be killed"
        time.sleep(0.1)
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    con = open_read_only(db)
    ((bench_id, status, planned),) = con.execute(
        "SELECT bench_run_id, status, planned_case_runs FROM bench_runs"
    ).fetchall()
    kept = con.execute("SELECT count(*) FROM case_runs").fetchone()[0]  # type: ignore[index]
    con.close()
    assert status == "running" and 0 < kept < planned, (status, kept, planned)
    assert main(["run", "--db", str(db), "--resume", bench_id]) == 0
    con = open_read_only(db)
    total, distinct = con.execute("SELECT count(*), count(DISTINCT case_run_id) FROM case_runs").fetchone()  # type: ignore[misc]
    final = con.execute("SELECT status FROM bench_runs").fetchone()
    orphans = con.execute(
        "SELECT count(*) FROM events WHERE case_run_id NOT IN (SELECT case_run_id FROM case_runs)"
    ).fetchone()
    con.close()
    assert total == distinct == planned, "every completed case run kept, none duplicated"
    assert final == ("completed",) and orphans == (0,)


def test_stale_running_run_is_marked_interrupted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "stale.duckdb"
    assert main(["run", "--db", str(db), "--case", "empty_logs_gateway_timeout_t1"]) == 0
    con = duckdb.connect(str(db))
    con.execute("UPDATE bench_runs SET status = 'running'")
    con.close()
    assert main(["run", "--db", str(db), "--case", "empty_logs_gateway_timeout_t1"]) == 0
    assert "now 'interrupted'" in capsys.readouterr().err
    con = open_read_only(db)
    assert sorted(r[0] for r in con.execute("SELECT status FROM bench_runs").fetchall()) == ["completed", "interrupted"]
    con.close()


# -- files ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("damage", ["truncated", "garbage", "not_a_cassette"])
def test_fault_corrupted_cassette(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str,
                                  capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    case = "empty_logs_gateway_timeout_t1"
    src = ROOT / "cassettes" / "openai_scripted" / case / "epoch1.json"
    dst = tmp_path / "cas" / "openai_scripted" / case / "epoch1.json"
    dst.parent.mkdir(parents=True)
    raw = src.read_bytes()
    dst.write_bytes(
        {"truncated": raw[: len(raw) // 2], "garbage": b"\x00\xff" * 50, "not_a_cassette": b"[1, 2]"}[damage]
    )
    monkeypatch.setenv("HB_KEY", "x")
    argv = ["run", "--db", str(tmp_path / "c.duckdb"), "--case", case, "--model", "openai:scripted",
            "--base-url", "http://127.0.0.1:9/v1", "--api-key-env", "HB_KEY",
            "--cassettes", str(tmp_path / "cas")]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert str(dst) in err and "re-record with" in err
    with pytest.raises(BenchInputError):
        run_bench(plan_run(BenchOptions.of(case_ids=[case], db=tmp_path / "d.duckdb",
        model_settings=ModelSettings(model="openai:scripted", base_url="http://127.0.0.1:9/v1", api_key_env="HB_KEY"),

                               cassettes=tmp_path / "cas")))  # fmt: skip


# -- secrets --------------------------------------------------------------------------------------------
def test_canary_key_never_lands_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    from runners.domain.evalset import load_cases
    from runners.domain.profiles import trajectory_for_model
    from runners.endpoints.simulator import SimulatorServer

    canary = "sk-canary-9f8e7d6c5b4a39281706"
    monkeypatch.setenv("OPENAI_API_KEY", canary)
    db = tmp_path / "secrets.duckdb"
    cases = ["empty_logs_gateway_timeout_t1", "diagnosable_gateway_risk_pool_exhausted_t1"]
    with SimulatorServer(load_cases(), trajectory_for=trajectory_for_model) as sim:
        assert main(["run", "--db", str(db), "--model", "openai:scripted", "--base-url", sim.base_url,
                     "--cassettes", str(tmp_path / "cas"), "--record-mode", "once", "--label", "canary"]
                    + [a for c in cases for a in ("--case", c)]) == 0  # fmt: skip
    with serve() as ep:  # an endpoint that echoes the key back in its errors
        for _ in range(3):
            ep.push(401, {"error": {"message": f"Incorrect API key provided: {canary}"}})
        # the preflight passes (GET /models answers); every chat request then fails: exit 2, rows kept
        assert main(["run", "--db", str(db), "--model", "openai:x", "--base-url", ep.base_url,
                     "--case", cases[0], "--label", "echo"]) == 2  # fmt: skip
        ep.get_replies.append((401, {"error": {"message": f"Incorrect API key provided: {canary}"}}))
        assert main(["run", "--db", str(db), "--model", "openai:x", "--base-url", ep.base_url,
                     "--case", cases[0], "--label", "preflight"]) == 2  # fmt: skip
    assert main(["report", "--db", str(db), "--out", str(tmp_path / "report")]) == 0
    logs = capsys.readouterr()
    haystack = [logs.out, logs.err]
    haystack += [p.read_text(errors="replace") for p in (tmp_path / "cas").rglob("*.json")]
    haystack += [p.read_bytes().decode("latin-1") for p in (tmp_path / "report").iterdir()]
    con = open_read_only(db)
    for (table,) in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'"
    ).fetchall():
        haystack.append(json.dumps(con.execute(f"SELECT * FROM {table}").fetchall(), default=str))
    errors = [r[0] for r in con.execute("SELECT error FROM case_runs WHERE label = 'echo'").fetchall()]
    con.close()
    assert errors and all("[REDACTED]" in (e or "") for e in errors), errors
    assert len((tmp_path / "cas").rglob("*.json").__next__().read_text()) > 0
    leaks = [h[:80] for h in haystack if canary in h]
    assert not leaks
