"""Committed cassettes: replay offline (recording off, network blocked) and scan for secrets."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

from runners.bench import BenchOptions, run_bench
from runners.case_runner import CaseRun
from runners.cassettes import SCRUB_REQUEST_HEADERS, SCRUB_RESPONSE_HEADERS, cassette_path
from runners.evalset import load_cases

ROOT = Path(__file__).resolve().parent.parent
CASSETTES = ROOT / "cassettes"
SECRET_PATTERNS = [
    re.compile(r"sk-[A-Za-z0-9_\-]{16,}"),  # OpenAI-style keys
    re.compile(r"Bearer\s+[A-Za-z0-9._\-]{8,}", re.IGNORECASE),
    re.compile(r"(?i)api[_-]?key\"?\s*[:=]\s*\"?[A-Za-z0-9]{12,}"),
    re.compile(r"AKIA[0-9A-Z]{16}"),  # AWS access key ids
]


def _all_cassettes() -> list[Path]:
    return sorted(CASSETTES.rglob("*.json"))


def test_every_builtin_case_has_a_committed_cassette() -> None:
    missing = [c.id for c in load_cases() if not cassette_path(CASSETTES, "openai:scripted", c.id, 1).is_file()]
    assert not missing, f"re-record with `make cassettes`: {missing}"


def _verdict(r: CaseRun) -> tuple[object, ...]:
    d, m = r.result.decision, r.metrics
    return (d.outcome, d.fallback_kind, d.stop_reason, m.tool_invocations, m.tool_rejections, m.model_calls,
            m.guard_calls)  # fmt: skip


def test_replay_matches_in_process_per_case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inproc = run_bench(BenchOptions(db=tmp_path / "in.duckdb"))
    expected = {r.case.id: _verdict(r) for r in inproc.runs}

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("network blocked during replay")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("HB_REPLAY_KEY", "not-used")
    replay = run_bench(BenchOptions(
        db=tmp_path / "replay.duckdb", model="openai:scripted", base_url="http://127.0.0.1:9/v1",
        api_key_env="HB_REPLAY_KEY", cassettes=CASSETTES, record_mode="none", concurrency=3,
    ))  # fmt: skip  # each case run replays its own cassette on its own thread
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
    """The commands of .github/workflows/model-gate.yml, as written, against the committed cassettes."""
    import shlex

    import yaml

    from runners.cli import main

    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "model-gate.yml").read_text())
    env = workflow["env"]
    steps = [s["run"] for s in workflow["jobs"]["gate"]["steps"] if "harness-bench" in s.get("run", "")]
    assert len(steps) == 3 and all("--record-mode none" in s for s in steps[:2])

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("network blocked")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, str(value))
    codes = []
    for step in steps:
        argv = shlex.split(step.replace("\n", " "))
        argv = [a.replace("$BASELINE_MODEL", env["BASELINE_MODEL"]).replace("$CANDIDATE_MODEL", env["CANDIDATE_MODEL"])
                .replace("$EPOCHS", env["EPOCHS"]) for a in argv[1:]]  # fmt: skip
        argv = [str(tmp_path / a) if a.startswith("gate") and "." in a else a for a in argv]
        argv += ["--base-url", "http://model-endpoint/v1"] if argv[0] == "run" else []
        codes.append(main(argv))
    assert codes == [0, 0, 0]
    assert "PASS" in (tmp_path / "gate-summary.md").read_text()


def test_sweep_in_replay_mode_makes_no_network_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep over committed cassettes: the shared prefix replays; anything else is a named cassette
    miss, never a network call (the socket layer refuses every connect)."""
    from runners.sweep import SweepGrid, SweepOptions, run_sweep

    attempts: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(args)
        raise OSError("network blocked")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("HB_SWEEP_KEY", "x")
    db = tmp_path / "sweep.duckdb"
    run_sweep(SweepOptions(
        SweepGrid(no_gain_threshold=(2, 3)),
        BenchOptions(evalsets=["empty_logs", "missing_context"], db=db, model="openai:scripted",
                     base_url="http://127.0.0.1:9/v1", api_key_env="HB_SWEEP_KEY", cassettes=CASSETTES,
                     record_mode="none"),
    ))  # fmt: skip
    assert attempts == []
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute("SELECT no_gain_threshold, error FROM case_runs").fetchall()
    con.close()
    assert all(err is None for t, err in rows if t == 2), "the recorded configuration replays completely"
    assert all(err is None or err.startswith("request not in cassette") for _, err in rows)
    assert any(err is None for t, err in rows if t == 3), "runs at another threshold share the common prefix"
