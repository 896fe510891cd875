"""Committed cassettes: replay offline (recording off, network blocked) and scan for secrets."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

from runners.domain.evalset import load_cases
from runners.plan.options import BenchOptions
from runners.plan.settings import ModelSettings
from runners.run.bench import plan_run, run_bench
from runners.run.case_runner import CaseRun
from runners.store.cassettes import SCRUB_REQUEST_HEADERS, SCRUB_RESPONSE_HEADERS, cassette_path
from tests._db import open_read_only

ROOT = Path(__file__).resolve().parents[3]
CASSETTES = ROOT / "cassettes"
SECRET_PATTERNS = [
    re.compile(r"sk-[A-Za-z0-9_\-]{16,}"),  # OpenAI-style keys
    re.compile(r"Bearer\s+[A-Za-z0-9._\-]{8,}", re.IGNORECASE),
    re.compile(r"(?i)api[_-]?key\"?\s*[:=]\s*\"?[A-Za-z0-9]{12,}"),
    re.compile(r"AKIA[0-9A-Z]{16}"),  # AWS access key ids
]


def _all_cassettes() -> list[Path]:
    """Every committed cassette, the real models' included (their summary.json / recording.json are not
    cassettes; they are scanned by tests/runners/decisions/test_real_models.py's replay)."""
    return sorted(CASSETTES.rglob("epoch*.json"))


def test_every_builtin_case_has_a_committed_cassette() -> None:
    missing = [c.id for c in load_cases() if not cassette_path(CASSETTES, "openai:scripted", c.id, 1).is_file()]
    assert not missing, f"re-record with `make cassettes`: {missing}"


def _verdict(r: CaseRun) -> tuple[object, ...]:
    d, m = r.result.decision, r.metrics
    return (d.outcome, d.fallback_kind, d.stop_reason, m.tool_invocations, m.tool_rejections, m.model_calls,
            m.guard_calls)  # fmt: skip


def test_replay_matches_in_process_per_case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inproc = run_bench(plan_run(BenchOptions.of(db=tmp_path / "in.duckdb")))
    expected = {r.case.id: _verdict(r) for r in inproc.runs}

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("network blocked during replay")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("HB_REPLAY_KEY", "not-used")
    replay = run_bench(plan_run(BenchOptions.of(
        db=tmp_path / "replay.duckdb",
        model_settings=ModelSettings(
            model="openai:scripted", base_url="http://127.0.0.1:9/v1", api_key_env="HB_REPLAY_KEY",
        ),
        cassettes=CASSETTES, record_mode="none", concurrency=3,
    )))  # fmt: skip  # each case run replays its own cassette on its own thread
    got = {r.case.id: _verdict(r) for r in replay.runs}
    assert [r.case.id for r in replay.runs if r.result.error] == []
    assert got == expected


@pytest.mark.parametrize("path", _all_cassettes(), ids=lambda p: str(p.relative_to(CASSETTES)))
def test_committed_cassette_holds_no_secret(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    for pattern in SECRET_PATTERNS:
        assert not pattern.search(text), f"{path}: matches {pattern.pattern}"
    data = json.loads(text)
    for interaction in data["interactions"]:
        req_headers = {k.lower() for k in interaction["request"]["headers"]}
        resp_headers = {k.lower() for k in interaction["response"]["headers"]}
        assert not req_headers & set(SCRUB_REQUEST_HEADERS), path
        assert not resp_headers & set(SCRUB_RESPONSE_HEADERS), path
        assert "127.0.0.1" not in interaction["request"]["uri"]


def test_example_gate_workflow_runs_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The commands of .github/workflows/model-gate.yml, as written, against the committed cassettes: every
    matrix shard's replays one after the other (each into its own file), then the gate job's merge and gate;
    the merged database holds the same case runs as one unsharded replay. The commands run exactly as
    written (no flag added), with the workflow's environment and the network blocked."""
    import glob
    import shlex

    import yaml

    from runners.cli import main

    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "model-gate.yml").read_text())
    env = {k: str(v) for k, v in workflow["env"].items()}
    jobs = workflow["jobs"]
    shards = [str(s) for s in jobs["shard"]["strategy"]["matrix"]["shard"]]
    assert shards == [str(i) for i in range(1, int(env["SHARDS"]) + 1)], "the matrix covers every shard"
    assert jobs["gate"]["needs"] == "shard"
    shard_steps = [s["run"] for s in jobs["shard"]["steps"] if "harness-bench" in s.get("run", "")]
    gate_steps = [s["run"] for s in jobs["gate"]["steps"] if "harness-bench" in s.get("run", "")]
    assert len(shard_steps) == 2 and all("--record-mode none" in s and "--shard" in s for s in shard_steps)
    assert [shlex.split(s)[1] for s in gate_steps] == ["merge", "gate"]
    assert "${{ github.run_id }}" in env["RUN_ID"]
    env["RUN_ID"] = "4242-1"  # what GitHub substitutes for ${{ github.run_id }}-${{ github.run_attempt }}

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("network blocked")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for name, value in env.items():  # the workflow's environment, as the runner sets it
        monkeypatch.setenv(name, value)

    def argv_of(step: str, values: dict[str, str]) -> list[str]:
        words = shlex.split(re.sub(r"\$(\w+)", lambda m: values[m.group(1)], step.replace("\n", " ")))[1:]
        out: list[str] = []
        for word in words:  # files the jobs write or read live in the job's folder (here: tmp_path)
            if word.endswith((".duckdb", ".md", ".xml")):
                found = sorted(glob.glob(str(tmp_path / word)))
                out += found if "*" in word else [str(tmp_path / word)]
            else:
                out.append(word)
        return out

    codes = []
    for shard in shards:  # the matrix jobs, one after the other
        values = {**env, "SHARD": shard}
        codes += [main(argv_of(step, values)) for step in shard_steps]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"shard-{s}.duckdb" for s in shards]
    codes += [main(argv_of(step, env)) for step in gate_steps]
    assert codes == [0] * (2 * len(shards) + 2)
    assert "PASS" in (tmp_path / "gate-summary.md").read_text()

    # the merged database is what one unsharded job would have written
    monkeypatch.setenv("HB_REPLAY_KEY", "not-used")
    whole = run_bench(plan_run(BenchOptions.of(
        db=tmp_path / "whole.duckdb",
        model_settings=ModelSettings(
            model="openai:scripted", base_url="http://model-endpoint/v1", api_key_env="HB_REPLAY_KEY",
        ),
        cassettes=CASSETTES, record_mode="none", label="baseline",
        run_id="4242-1-baseline",
    )))  # fmt: skip
    q = (
        "SELECT case_run_id, outcome, fallback_kind, stop_reason, passed, model_calls, tool_invocations,"
        " tool_rejections, input_tokens, output_tokens FROM case_runs WHERE label = 'baseline' ORDER BY 1"
    )
    merged = open_read_only(tmp_path / "gate.duckdb")
    one = open_read_only(tmp_path / "whole.duckdb")
    try:
        assert merged.execute(q).fetchall() == one.execute(q).fetchall() != []
        assert whole.executed == len(load_cases())
        assert merged.execute("SELECT label, status, planned_case_runs FROM bench_runs ORDER BY 1").fetchall() == [
            ("baseline", "completed", whole.planned),
            ("candidate", "completed", whole.planned),
        ]
    finally:
        merged.close()
        one.close()


def test_sweep_in_replay_mode_makes_no_network_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep over committed cassettes: the shared prefix replays; anything else is a named cassette
    miss, never a network call (the socket layer refuses every connect)."""
    from runners.run.sweep import SweepGrid, SweepOptions, plan_sweep, run_sweep

    attempts: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(args)
        raise OSError("network blocked")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("HB_SWEEP_KEY", "x")
    db = tmp_path / "sweep.duckdb"
    run_sweep(plan_sweep(SweepOptions(
        SweepGrid(no_gain_threshold=(2, 3)),
        BenchOptions.of(evalsets=["empty_logs", "missing_context"], db=db,
        model_settings=ModelSettings(
            model="openai:scripted", base_url="http://127.0.0.1:9/v1", api_key_env="HB_SWEEP_KEY",
        ),
                     cassettes=CASSETTES,
                     record_mode="none"),
    )))  # fmt: skip
    assert attempts == []

    con = open_read_only(db)
    rows = con.execute("SELECT no_gain_threshold, error FROM case_runs").fetchall()
    con.close()
    assert all(err is None for t, err in rows if t == 2), "the recorded configuration replays completely"
    assert all(err is None or err.startswith("request not in cassette") for _, err in rows)
    assert any(err is None for t, err in rows if t == 3), "runs at another threshold share the common prefix"
