"""Live concurrency: one run's 429 backoff never stalls the others, and the
per-endpoint cap bounds the requests in flight. Real SDK over HTTP to serve-sim on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.config import HarnessConfig
from harness.models.openai_model import EndpointSlots, endpoint_slots
from runners.domain.evalset import load_cases
from runners.domain.profiles import trajectory_for_model
from runners.endpoints.simulator import InjectedFault, InjectedFaultKind, SimulatorServer
from runners.plan.options import BenchOptions
from runners.plan.settings import ModelSettings
from runners.run.bench import plan_run, run_bench

LIMITED = "empty_logs_gateway_timeout_t1"
OTHERS = ["diagnosable_late_order_deadlock_t4", "diagnosable_late_visa_rate_limit_mall88"]


def test_a_429_backoff_does_not_stall_the_other_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One endpoint slot (--max-in-flight 1), three runs; run A is told Retry-After: 2. While A waits,
    the other runs keep being served through that one slot; A retries after the 2 s it was told."""
    monkeypatch.setenv("HB_CC_KEY", "x")
    fault = InjectedFault(LIMITED, 0, InjectedFaultKind.RATE_LIMIT, retry_after=2.0)
    with SimulatorServer(load_cases(), trajectory_for=trajectory_for_model, faults=[fault], latency_ms=100) as sim:
        summary = run_bench(plan_run(BenchOptions.of(
            case_ids=[LIMITED, *OTHERS], db=tmp_path / "c.duckdb",
            model_settings=ModelSettings(model="openai:scripted", base_url=sim.base_url, api_key_env="HB_CC_KEY"),
            concurrency=3, max_in_flight=1,
        )))  # fmt: skip
        log = list(sim.log)
    assert all(r.result.error is None for r in summary.runs)
    (limited,) = [r for r in log if r.fault is InjectedFaultKind.RATE_LIMIT]
    retry = next(r for r in log if r.case_id == LIMITED and r.turn == 0 and r.at > limited.at)
    assert retry.at - limited.at >= 1.95, "Retry-After is honoured"
    # the other runs need 14 requests of >= 100 ms each through the one slot, so they still have work
    # when A is told to wait: they must get the slot at once, not after A's wait
    first_second = [r for r in log if r.case_id in OTHERS and limited.at < r.at < limited.at + 1.0]
    assert len(first_second) >= 3, f"only {len(first_second)} requests of other runs in the first second"
    assert sim.peak_in_flight == 1


def test_the_endpoint_cap_bounds_requests_in_flight(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HB_CC_KEY", "x")
    cases = [c.id for c in load_cases(["empty_logs", "missing_context"])][:8]
    peaks = {}
    for cap in (2, None):
        with SimulatorServer(load_cases(), trajectory_for=trajectory_for_model, latency_ms=60) as sim:
            run_bench(plan_run(BenchOptions.of(
                case_ids=cases, db=tmp_path / f"cap{cap}.duckdb",
                model_settings=ModelSettings(model="openai:scripted", base_url=sim.base_url, api_key_env="HB_CC_KEY"),
                concurrency=8, max_in_flight=cap,
                config=HarnessConfig(model_timeout_seconds=30),
            )))  # fmt: skip
            peaks[cap] = sim.peak_in_flight
    assert peaks[2] == 2
    assert peaks[None] > 2, "without a cap of its own, --concurrency bounds it (the cap defaults to it)"


def test_every_model_against_one_endpoint_shares_its_slots() -> None:
    a = endpoint_slots("http://127.0.0.1:1234/v1", 4)
    assert endpoint_slots("http://127.0.0.1:1234/v1/", 4) is a
    assert endpoint_slots("http://127.0.0.1:1235/v1", 4) is not a


def test_a_freed_slot_goes_to_the_request_that_waited_longest() -> None:
    """The thread that frees a slot cannot take it back ahead of one already waiting (threading's semaphores let it:
    a run could then wait behind two others for as long as they kept the slot between them)."""
    slots = EndpointSlots(1)
    assert slots.acquire()
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(slots.acquire(timeout=30)))
    waiter.start()
    deadline = time.monotonic() + 30
    while slots.waiting == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    slots.release()
    assert not slots.acquire(timeout=0), "the slot went back to the thread that freed it, not to the waiter"
    waiter.join(30)
    assert got == [True]
    assert not slots.acquire(timeout=0.05) and slots.waiting == 0  # a wait that times out leaves no place in line
    slots.release()
    assert slots.acquire(timeout=0)


_WATCH = """
import ast, json, sys, threading
real = ast.parse
seen = []
def parse(*args, **kwargs):
    if threading.current_thread() is not threading.main_thread():
        seen.append(threading.current_thread().name)
    return real(*args, **kwargs)
ast.parse = parse
"""
"""Records the name of every thread but the main one that calls `ast.parse` (in `seen`)."""
_PROBE = (
    _WATCH
    + """
import contextlib, io
from runners.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    code = main(sys.argv[1:])
print(json.dumps([code, seen]))
"""
)
"""`harness-bench ARGV` under the watch; prints its exit code and the threads that parsed."""
_WORKER_WATCH = """
import ast, sys, threading
real = ast.parse
def parse(*args, **kwargs):
    if threading.current_thread() is not threading.main_thread():
        print('thread-parse', threading.current_thread().name, file=sys.stderr, flush=True)
    return real(*args, **kwargs)
ast.parse = parse
"""
"""The watch in the worker processes (as sitecustomize, in the interpreter they come from): a thread that parses
says so on stderr at once (a worker forked from the fork server ends with `os._exit`, so no exit hook would run)."""


@pytest.mark.parametrize("executor", ["local", "processes"])
def test_case_runs_on_threads_never_parse_python(executor: str, tmp_path: Path) -> None:
    """`ast.parse` is not safe on two threads at once in CPython 3.11 (python/cpython#106905: "AST constructor
    recursion depth mismatch"), and importing numpy parses signatures: the tools' libraries are imported before
    the case threads start, so a run on threads (in this process, or in a worker process, whose threads report
    the same way through its own patched `ast`) parses nothing on them. A fresh interpreter: this one has them."""
    root = Path(__file__).resolve().parents[3]
    probe = tmp_path / "probe.py"
    probe.write_text(_PROBE)
    argv = ["run", "--db", str(tmp_path / "t.duckdb"), "--evalset", "generic_kb", "--concurrency", "4"]
    if executor == "processes":
        # the worker processes come from a fresh interpreter (the fork server, or spawned): it imports the watch
        # through sitecustomize on PYTHONPATH
        (tmp_path / "sitecustomize.py").write_text(_WORKER_WATCH)
        argv += ["--executor", "processes"]
    done = subprocess.run([sys.executable, str(probe), *argv], cwd=root, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": f"{tmp_path}:{root}"})  # fmt: skip
    code, seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert code == 0, done.stderr
    assert seen == [], f"ast.parse on threads {sorted(set(seen))}"
    assert "thread-parse" not in done.stderr, done.stderr
