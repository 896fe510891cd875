"""Endpoint preflight: an unusable endpoint is exit 2 with one message naming the
URL and the status, and nothing is written — not even the database file. Real SDK, real HTTP."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from harness.contracts import ModelErrorKind
from harness.models.openai_model import OpenAIChatModel
from runners.cli import main
from runners.domain.evalset import load_cases
from runners.domain.profiles import trajectory_for_model
from runners.endpoints.simulator import SimulatorServer
from runners.run.preflight import ProbeRoute, probe
from tests._db import open_read_only
from tests._fake_endpoint import completion, serve

ONE = "empty_logs_gateway_timeout_t1"


def _run(db: Path, base_url: str, *extra: str) -> int:
    return main(["run", "--db", str(db), "--model", "openai:m", "--base-url", base_url, "--case", ONE, *extra])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("ftp://127.0.0.1:21/v1", "unsupported scheme 'ftp'"),
        ("http://127.0.0.1:9/v1", "is unreachable (connection error: ConnectionRefusedError: [Errno 111]"),
    ],
)
def test_unusable_url_is_exit_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str, says: str
) -> None:
    db = tmp_path / "p.duckdb"
    assert _run(db, url) == 2
    err = capsys.readouterr().err.replace("\n", "")
    assert url.rstrip("/") in err and says in err, err
    assert not db.exists()


@pytest.mark.parametrize(
    ("status", "hint"),
    [(401, "check the API key in $OPENAI_API_KEY"), (403, "check the API key"), (500, "HTTP 500"), (503, "HTTP 503")],
)
def test_models_route_status_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, status: int, hint: str
) -> None:
    canary = "sk-preflight-canary-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", canary)
    db = tmp_path / "p.duckdb"
    with serve() as ep:
        ep.get_replies.append((status, {"error": {"message": f"nope for key {canary}"}}))
        assert _run(db, ep.base_url) == 2
        assert ep.requests == [], "no chat request once the preflight failed"
    err = capsys.readouterr().err.replace("\n", "")
    assert f"{ep.base_url}/models answered HTTP {status}" in err and hint in err, err
    assert canary not in err and "[REDACTED]" in err
    assert not db.exists()


def test_no_models_route_falls_back_to_a_one_token_chat_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HB_PF_KEY", "x")
    with serve() as ep:
        ep.get_replies.append((404, {"error": {"message": "no such route"}}))
        ep.push(200, completion("p"))
        result = probe(OpenAIChatModel("tiny", base_url=ep.base_url, api_key_env="HB_PF_KEY"), "tiny")
        (chat,) = ep.requests
    assert result.route is ProbeRoute.CHAT and result.status == 200
    assert chat["max_tokens"] == 1 and chat["model"] == "tiny"


def test_chat_route_404_names_the_chat_url(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "p.duckdb"
    with serve() as ep:
        ep.get_replies.append((404, {"error": {"message": "no such route"}}))
        ep.push(404, {"error": {"message": "model 'm' not found"}})
        assert _run(db, ep.base_url) == 2
    err = capsys.readouterr().err.replace("\n", "")
    assert f"{ep.base_url}/chat/completions answered HTTP 404" in err and "check --base-url" in err, err
    assert not db.exists()


def test_rate_limited_endpoint_is_usable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HB_PF_KEY", "x")
    with serve() as ep:
        ep.get_replies.append((429, {"error": {"message": "slow down"}}))
        result = probe(OpenAIChatModel("m", base_url=ep.base_url, api_key_env="HB_PF_KEY"), "m")
    assert (result.route, result.status) == (ProbeRoute.MODELS, 429)


def test_serve_sim_passes_the_preflight(tmp_path: Path) -> None:
    with SimulatorServer(load_cases(), trajectory_for=trajectory_for_model) as sim:
        assert main(["run", "--db", str(tmp_path / "ok.duckdb"), "--model", "openai:scripted",
                     "--base-url", sim.base_url, "--case", ONE]) == 0  # fmt: skip


def test_sweep_against_an_unusable_endpoint_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.duckdb"
    url = f"http://127.0.0.1:{_free_port()}/v1"
    assert main(["sweep", "--db", str(db), "--model", "openai:m", "--base-url", url, "--case", ONE,
                 "--no-gain-threshold", "1,2", "--epochs", "1"]) == 2  # fmt: skip
    assert url in capsys.readouterr().err.replace("\n", "")
    assert not db.exists()


def test_mid_run_outage_is_classified_and_loud(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The preflight passes, then every chat request fails: rows keep the classification, exit 2."""
    db = tmp_path / "o.duckdb"
    cases = [ONE, "missing_context_no_tenant_gateway_429"]
    with serve() as ep:
        for _ in range(6):
            ep.push(503, {"error": {"message": "upstream overloaded"}})
        assert main(["run", "--db", str(db), "--model", "openai:m", "--base-url", ep.base_url,
                     "--case", cases[0], "--case", cases[1]]) == 2  # fmt: skip
    err = capsys.readouterr().err.replace("\n", "")
    assert "2 of 2 case run(s) ended on an endpoint or cassette error" in err
    assert "served no case run" in err
    con = open_read_only(db)
    rows = con.execute("SELECT error, error_kind FROM case_runs ORDER BY case_id").fetchall()
    con.close()
    assert len(rows) == 2 and all("after 3 attempt(s): SERVER_ERROR: HTTP 503" in e for e, _ in rows), rows
    assert [k for _, k in rows] == ["SERVER_ERROR", "SERVER_ERROR"], "the error is stored typed, beside its text"


def test_a_partial_outage_warns_but_keeps_the_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from runners.endpoints.simulator import InjectedFault, InjectedFaultKind

    db = tmp_path / "w.duckdb"
    down = InjectedFault(ONE, 0, InjectedFaultKind.SERVER_ERROR, times=3)
    with SimulatorServer(load_cases(), trajectory_for=trajectory_for_model, faults=[down]) as sim:
        code = main(["run", "--db", str(db), "--model", "openai:scripted", "--base-url", sim.base_url,
                     "--case", ONE, "--case", "missing_context_no_tenant_gateway_429"])  # fmt: skip
    assert code == 0
    assert "1 of 2 case run(s) ended on an endpoint or cassette error" in capsys.readouterr().err.replace("\n", "")


def test_only_the_models_own_answer_is_not_an_infrastructure_error() -> None:
    infra = {k for k in ModelErrorKind if k.infrastructure}
    assert infra == set(ModelErrorKind) - {ModelErrorKind.BAD_RESPONSE}
    assert ModelErrorKind.REPLAY_MISS in infra and not ModelErrorKind.REPLAY_MISS.retryable


def test_replay_needs_no_api_key_and_no_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--record-mode none` without --base-url and without OPENAI_API_KEY: offline, no key, exit 0."""
    attempts: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(args)
        raise OSError("network blocked")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    root = Path(__file__).resolve().parents[3]
    assert main(["run", "--db", str(tmp_path / "r.duckdb"), "--model", "openai:scripted", "--case", ONE,
                 "--cassettes", str(root / "cassettes"), "--record-mode", "none"]) == 0  # fmt: skip
    assert attempts == []
    assert "error" not in capsys.readouterr().err


def test_a_sweep_probes_its_endpoint_once_for_every_grid_point(tmp_path: Path) -> None:
    """The probe is the sweep's, not each point's: three grid points, one GET of the models route (each point
    running its own probe made it four)."""
    with serve() as ep:
        main(["sweep", "--db", str(tmp_path / "s.duckdb"), "--model", "openai:m", "--base-url", ep.base_url,
              "--case", ONE, "--no-gain-threshold", "1,2,3", "--epochs", "1", "--max-model-attempts", "1"])  # fmt: skip
        assert len(ep.requests) >= 3, "every point reached the endpoint (the probe count below is not vacuous)"
        assert ep.gets == ["/v1/models"], ep.gets
