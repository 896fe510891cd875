"""`--guard-model`: the SemanticGuard asks its own model at its own endpoint, stored per run; unset, the agent's model
judges its own conclusions."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.semantic_guard import GUARD_MARKER
from runners.cli import main
from runners.domain.evalset import load_cases
from runners.domain.profiles import trajectory_for_model
from runners.endpoints.simulator import SimulatorServer
from tests._db import open_read_only
from tests._fake_endpoint import completion, serve

CASE = "diagnosable_gateway_risk_pool_exhausted_t1"  # a SUCCESS: the SemanticGuard is asked


def test_the_guard_asks_its_own_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HB_SIM_KEY", "k")
    db = tmp_path / "g.duckdb"
    with SimulatorServer(load_cases(), trajectory_for=trajectory_for_model) as sim, serve() as guard:
        guard.push(200, completion('{"verdict": "UNSUPPORTED", "reason": "the guard model disagrees"}'))
        common = ["run", "--case", CASE, "--model", "openai:scripted", "--base-url", sim.base_url,
                  "--api-key-env", "HB_SIM_KEY", "--db", str(db)]  # fmt: skip
        assert main([*common, "--label", "self"]) == 0
        assert guard.requests == []
        assert main([*common, "--label", "other", "--guard-model", "openai:judge-x",
                     "--guard-base-url", guard.base_url]) == 0  # fmt: skip
    (request,) = guard.requests
    assert request["model"] == "judge-x" and request["messages"][0]["content"].startswith(GUARD_MARKER)
    con = open_read_only(db)
    try:
        rows = dict(con.execute("SELECT b.label, c.outcome || '/' || coalesce(b.guard_model, '-') FROM case_runs c"
                                " JOIN bench_runs b USING (bench_run_id)").fetchall())  # fmt: skip
    finally:
        con.close()
    assert rows == {"self": "SUCCESS/-", "other": "FALLBACK/openai:judge-x"}


def test_a_guard_model_is_an_openai_model() -> None:
    assert main(["run", "--case", CASE, "--model", "openai:m", "--base-url", "http://127.0.0.1:9/v1",
                 "--guard-model", "gpt-4o"]) == 2  # fmt: skip
