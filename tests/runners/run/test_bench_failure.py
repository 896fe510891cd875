"""A model call that times out because the machine is loaded is the bench's failure, never the model's: against a real
HTTP endpoint on 127.0.0.1 that stalls past the model timeout on every attempt, the run is retried by the Harness, then
left unjudged (`passed` and `outcome_passed` NULL, the reason in `failures`), counted apart in the end-of-run table, the
funnel and a real model's summary, and out of every pass figure; a reply the model got wrong stays the model's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import ModelErrorKind
from runners.cli import main
from runners.decisions.funnel import FunnelStage, stage_of
from runners.decisions.real_models import summarize
from runners.store.recorded_sweeps import read_recorded
from runners.store.runs import family_rows
from tests._db import open_read_only
from tests._fake_endpoint import completion, serve

CASES = ("missing_context_no_time_acme_pay_refunds", "missing_context_nothing_given_zh")
DECLINE = completion('{"conclusion": null, "missing_info": ["the time window"]}')


def _run(base_url: str, db: Path) -> int:
    return main(["run", "--model", "openai:m", "--base-url", base_url, *(a for c in CASES for a in ("--case", c)),
                 "--model-timeout-seconds", "0.4", "--max-model-attempts", "2", "--retry-backoff-seconds", "0",
                 "--db", str(db), "--label", "loaded"])  # fmt: skip


def test_a_model_call_that_times_out_is_the_benchs_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used-000")
    db = tmp_path / "m.duckdb"
    with serve() as ep:  # the first case run's two attempts stall past the timeout; the second is answered
        ep.push_fault("sleep", 200, DECLINE, seconds=1.2)
        ep.push_fault("sleep", 200, DECLINE, seconds=1.2)
        ep.push(200, DECLINE)
        assert _run(ep.base_url, db) == 0
    assert "1 of 2 case run(s) ended on an endpoint or cassette error" in capsys.readouterr().err
    con = open_read_only(db)
    try:
        rows = con.execute(
            "SELECT passed, outcome_passed, error_kind, failures FROM case_runs ORDER BY error_kind NULLS LAST"
        ).fetchall()
        (family,) = family_rows(con, con.execute("SELECT bench_run_id FROM bench_runs").fetchone()[0])  # type: ignore[index]
    finally:
        con.close()
    (stalled_passed, stalled_outcome, kind, failures), (answered_passed, *_rest) = rows
    assert kind == ModelErrorKind.TIMEOUT.value and stalled_passed is None and stalled_outcome is None
    (reason,) = json.loads(failures)
    assert reason.startswith("[bench] the bench's failure, not the model's") and "TIMEOUT after 2 failed" in reason
    assert answered_passed is not None  # the answered run is judged
    # counted apart, and out of the pass rate: the one judged run decides it
    assert (family.runs, family.bench_failures) == (2, 1)
    assert family.pass_rate == float(answered_passed)
    # a real model's summary and funnel leave it out and count it apart
    recorded = read_recorded(db, "loaded")
    (threshold,) = summarize("m", recorded).thresholds
    assert (threshold.runs, threshold.bench_failures) == (1, 1)
    assert threshold.passed == int(answered_passed)
    assert [stage_of(f) for f in recorded.funnel if f.bench_failure] == [FunnelStage.BENCH_FAILURE]


def test_a_reply_the_model_got_wrong_stays_the_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 2xx whose content is no Draft is the model's answer: judged (and failed), not the bench's."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used-000")
    db = tmp_path / "m.duckdb"
    with serve() as ep:
        for _ in CASES:
            ep.push(200, completion("I cannot tell."))
        assert _run(ep.base_url, db) == 0
    con = open_read_only(db)
    try:
        passed = con.execute("SELECT passed FROM case_runs").fetchall()
    finally:
        con.close()
    assert [p for (p,) in passed if p is None] == []


def test_a_guard_call_that_times_out_is_the_benchs_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The agent (the reference trajectory served over HTTP) reaches the SemanticGuard, whose own endpoint stalls on
    every attempt: the guard fails closed as always, and the run is the bench's, not a conclusion the guard blocked."""
    from runners.domain.evalset import load_cases
    from runners.domain.profiles import trajectory_for_model
    from runners.endpoints.simulator import SimulatorServer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used-000")
    db = tmp_path / "g.duckdb"
    case = "diagnosable_webhook_cert_expired_acme_pay"
    with SimulatorServer(load_cases(), trajectory_for=trajectory_for_model) as sim, serve() as guard:
        guard.push_fault("sleep", 200, completion('{"verdict": "SUPPORTED", "reason": "late"}'), seconds=1.2)
        guard.push_fault("sleep", 200, completion('{"verdict": "SUPPORTED", "reason": "late"}'), seconds=1.2)
        assert main(["run", "--model", "openai:scripted", "--base-url", sim.base_url, "--case", case,
                     "--guard-model", "openai:m", "--guard-base-url", guard.base_url, "--model-timeout-seconds", "0.4",
                     "--max-model-attempts", "2", "--retry-backoff-seconds", "0", "--db", str(db)]) == 2  # fmt: skip
        assert len(guard.requests) == 2
        guard_url = guard.base_url
    err = capsys.readouterr().err
    assert f"or the SemanticGuard's {guard_url} served no case run (exit 2)" in err
    con = open_read_only(db)
    try:
        ((outcome, passed, kind, failures),) = con.execute(
            "SELECT outcome, passed, error_kind, failures FROM case_runs"
        ).fetchall()
    finally:
        con.close()
    assert outcome == "FALLBACK" and passed is None and kind == ModelErrorKind.TIMEOUT.value
    assert json.loads(failures)[0].startswith("[bench] the bench's failure, not the model's")
    # `show` says so, never "observed run" nor a failed verdict
    assert main(["show", "--db", str(db), "--case", case, "--width", "200"]) == 0
    assert "passed: no verdict (the bench's failure, not the model's)" in capsys.readouterr().out
