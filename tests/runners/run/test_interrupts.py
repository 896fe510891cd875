"""Interrupts never write a wrong row.

SIGINT, SIGTERM and Ctrl-C through a terminal are sent to real `harness-bench sweep` processes at
moments spread over the run — start-up, inside a tool's DuckDB query, inside a metrics write,
between sweep points, inside a model HTTP call, with the thread pool of `--concurrency 2`, after
the last case run. Every time the process must exit 130 (SIGINT) or 143 (SIGTERM) with the exact
resume command, keep only rows the uninterrupted sweep also has, and the resume must complete it to
the uninterrupted sweep's outcomes case by case.

Moments are chosen on observed progress, not on sleeps: `tests/interrupt_probe/sitecustomize.py`
(loaded into the child through PYTHONPATH) reports what the process is doing, and for a moment
*inside* a DuckDB statement keeps the main thread in DuckDB until the signal has been sent.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import shlex
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pytest

from harness.context import CancellationToken
from runners.cli import main
from runners.domain.profiles import trajectory_for_model
from runners.endpoints.simulator import SimulatorServer
from runners.plan.options import BenchOptions
from runners.plan.run_plan import select_cases
from runners.run import interrupts
from runners.run.bench import plan_run, run_bench
from tests._db import open_read_only

ROOT = Path(__file__).resolve().parents[3]
HARNESS_BENCH = str(Path(sys.executable).with_name("harness-bench"))
PROBE = ROOT / "tests" / "interrupt_probe"
# Two families, every tool call a DuckDB query (log_search / db_query); SUCCESS and FALLBACK outcomes.
CASES = (
    "diagnosable_late_risk_rule_threshold_t7", "diagnosable_late_settlement_cutoff_t2",
    "diagnosable_refund_insufficient_balance_bazaar7", "empty_logs_webhook_log_then_db_bloom_retail",
    "empty_logs_refunds_pending_db_shop42", "empty_logs_gateway_timeout_t1",
)  # fmt: skip
SWEEP = [*(a for c in CASES for a in ("--case", c)), "--no-gain-threshold", "1,2", "--epochs", "2"]
PLANNED = 2 * len(CASES) * 2  # grid points x cases x epochs
HOLDS = ("claim", "tool", "flush", "point")  # probe moments that hold the main thread inside DuckDB
TIMEOUT = 120.0  # seconds: a hung child fails the test instead of hanging it (a loaded 2-core machine)

Key = tuple[Any, ...]


# -- what a database holds, case by case ---------------------------------------------------------------
@dataclass(frozen=True)
class Digest:
    """Everything compared between an interrupted-then-resumed sweep and the uninterrupted one."""

    runs: dict[Key, tuple[Any, ...]]
    """(no_gain_threshold, case_id, epoch) -> outcome, fallback_kind, stop_reason, passed and counts."""
    calls: dict[Key, list[tuple[Any, ...]]]
    """Same key -> its tool_calls rows (seq, tool, invocation_status, rejection_reason, gain)."""
    events: dict[Key, int]
    """Same key -> trace events stored."""
    duplicates: int
    """case_runs rows minus distinct case_run ids."""
    orphans: int
    """tool_calls and events rows whose case run is not stored."""
    statuses: tuple[set[str], set[str]]
    """Statuses of the bench runs, and of the sweeps."""
    sweep_ids: list[str]
    """Sweep ids in the file."""


def _digest(db: Path) -> Digest:
    con = open_read_only(db)
    try:
        runs = con.execute(
            "SELECT no_gain_threshold, case_id, epoch, outcome, fallback_kind, stop_reason, passed, model_calls,"
            " tool_invocations, failed_invocations, tool_rejections FROM case_runs"
        ).fetchall()
        calls = con.execute(
            "SELECT c.no_gain_threshold, c.case_id, c.epoch, t.seq, t.tool, t.invocation_status, t.rejection_reason,"
            " t.gain FROM tool_calls t JOIN case_runs c USING (case_run_id) ORDER BY ALL"
        ).fetchall()
        events = con.execute(
            "SELECT c.no_gain_threshold, c.case_id, c.epoch, count(*) FROM events e JOIN case_runs c"
            " USING (case_run_id) GROUP BY ALL"
        ).fetchall()
        (duplicates,) = con.execute("SELECT count(*) - count(DISTINCT case_run_id) FROM case_runs").fetchone() or (0,)
        (orphans,) = con.execute(
            "SELECT (SELECT count(*) FROM events WHERE case_run_id NOT IN (SELECT case_run_id FROM case_runs))"
            " + (SELECT count(*) FROM tool_calls WHERE case_run_id NOT IN (SELECT case_run_id FROM case_runs))"
        ).fetchone() or (0,)
        bench = {r[0] for r in con.execute("SELECT status FROM bench_runs").fetchall()}
        sweeps = con.execute("SELECT sweep_id, status FROM sweeps").fetchall()
    finally:
        con.close()
    by_key: dict[Key, list[tuple[Any, ...]]] = {}
    for row in calls:
        by_key.setdefault(row[:3], []).append(row[3:])
    return Digest(
        {r[:3]: r[3:] for r in runs}, by_key, {r[:3]: r[3] for r in events}, duplicates, orphans,
        (bench, {s for _, s in sweeps}), [i for i, _ in sweeps],
    )  # fmt: skip


def _failed_calls(d: Digest) -> int:
    return sum(1 for calls in d.calls.values() for c in calls if c[2] == "FAILED")


def _assert_subset_of(stored: Digest, baseline: Digest, what: str) -> None:
    """Every stored case run is one the uninterrupted sweep has, with the same outcome, counts and tool calls."""
    assert stored.duplicates == 0 and stored.orphans == 0, what
    for key, row in stored.runs.items():
        assert row == baseline.runs[key], f"{what}: {key} stored {row}, uninterrupted {baseline.runs[key]}"
        assert stored.calls.get(key, []) == baseline.calls.get(key, []), f"{what}: tool calls of {key} differ"
        assert stored.events.get(key) == baseline.events.get(key), f"{what}: events of {key} differ"


def _assert_equal(final: Digest, baseline: Digest, what: str) -> None:
    _assert_subset_of(final, baseline, what)
    assert final.runs.keys() == baseline.runs.keys() and len(final.runs) == PLANNED, what
    assert _failed_calls(final) == _failed_calls(baseline), f"{what}: FAILED tool calls differ"
    assert final.statuses == ({"completed"}, {"completed"}), f"{what}: {final.statuses}"


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Digest:
    """The uninterrupted sweep (in-process: the same code path, without the start-up cost)."""
    db = tmp_path_factory.mktemp("baseline") / "b.duckdb"
    assert main(["sweep", "--db", str(db), *SWEEP]) == 0
    digest = _digest(db)
    assert len(digest.runs) == PLANNED and {r[0] for r in digest.runs.values()} == {"SUCCESS", "FALLBACK"}
    assert sum(len(c) for c in digest.calls.values()) > PLANNED, "the cases run DuckDB-backed tools"
    return digest


# -- a real harness-bench process, with a pipe or a terminal -------------------------------------------
class _Child:
    """`harness-bench ARGS` with the probe loaded; its stderr (pipe) or everything it shows (terminal)."""

    def __init__(
        self, args: list[str], at: str, *, terminal: bool, cwd: Path, env: dict[str, str] | None = None
    ) -> None:
        self.probe_r, probe_w = os.pipe()
        go_r, self.go_w = os.pipe()
        # this checkout's code under the probe (not whichever checkout the venv's harness-bench was installed from)
        env = {**os.environ, "PYTHONPATH": f"{PROBE}{os.pathsep}{ROOT}", "HB_PROBE_FD": str(probe_w),
               "HB_PROBE_GO_FD": str(go_r), "HB_PROBE_AT": at, "COLUMNS": "200", **(env or {})}  # fmt: skip
        argv = [HARNESS_BENCH, *args]
        self.terminal = terminal
        self._chunks: list[bytes] = []
        self.proc: subprocess.Popen[bytes] | None = None
        if terminal:
            pid, self.master = pty.fork()
            if pid == 0:  # the child: the pty is its controlling terminal
                try:
                    os.chdir(cwd)
                    os.set_inheritable(probe_w, True)
                    os.set_inheritable(go_r, True)
                    os.execve(argv[0], argv, env)
                finally:
                    os._exit(127)
            self.pid = pid
            fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
            self._out = self.master
        else:
            self.proc = subprocess.Popen(argv, env=env, cwd=cwd, pass_fds=(probe_w, go_r),
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
            self.pid = self.proc.pid
            assert self.proc.stderr is not None
            self._out = self.proc.stderr.fileno()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        os.close(probe_w)
        os.close(go_r)
        self.code: int | None = None

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self._out, 65536)
            except OSError:  # EIO: the child side closed
                return
            if not chunk:
                return
            self._chunks.append(chunk)

    def events(self, deadline: float) -> Iterator[tuple[str, int, bool]]:
        """Probe lines (`kind:n`, case runs handed to the writer so far, whether the child had received its
        signal) until the child closes the pipe; `("", -1, False)` every 50 ms without one (the caller may
        watch something else)."""
        buf = b""
        while True:
            left = deadline - time.monotonic()
            assert left > 0, "the child stalled"
            if not select.select([self.probe_r], [], [], min(left, 0.05))[0]:
                yield "", -1, False
                continue
            chunk = os.read(self.probe_r, 4096)
            if not chunk:
                return
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                name, cases, received = [*line.decode().split(), "-1", "-"][:3]
                yield name, int(cases), received == "1"

    def ctrl_c_or_kill(self, sig: signal.Signals) -> None:
        """Ctrl-C typed on the terminal (the line discipline signals the foreground group), else kill(2)."""
        if self.terminal and sig is signal.SIGINT:
            os.write(self.master, b"\x03")
        else:
            os.kill(self.pid, sig)

    def go(self) -> None:
        """Let a holding probe return (after the signal was sent)."""
        os.write(self.go_w, b"g")

    def alive(self) -> bool:
        return self._poll() is None

    def shown(self, text: str, timeout: float) -> bool:
        """Whether the terminal shows `text` within `timeout` seconds."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if text.encode() in b"".join(self._chunks):
                return True
            time.sleep(0.02)
        return False

    def _poll(self) -> int | None:
        if self.code is None:
            if self.proc is not None:
                self.code = self.proc.poll()
            else:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    self.code = os.waitstatus_to_exitcode(status)
        return self.code

    def wait(self, timeout: float) -> int:
        end = time.monotonic() + timeout
        while self._poll() is None:
            assert time.monotonic() < end, f"no exit within {timeout}s"
            time.sleep(0.01)
        assert self.code is not None
        return self.code

    def output(self) -> str:
        """Its stderr, or its terminal, without colours and carriage returns (once it has exited)."""
        self._reader.join(timeout=10)
        text = b"".join(self._chunks).decode(errors="replace")
        return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\r", "", text)

    def close(self) -> None:
        """Kill it if it still runs (a failed test leaves no process behind) and release every descriptor."""
        if self._poll() is None:
            os.kill(self.pid, signal.SIGKILL)
            self.wait(10)
        self._reader.join(timeout=10)
        for fd in (self.probe_r, self.go_w, *([self.master] if self.terminal else [])):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.stderr.close()


# -- one moment --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Moment:
    """Where the signal is sent."""

    at: str
    """Probe moment `kind:n` (see tests/interrupt_probe/sitecustomize.py)."""
    sig: signal.Signals
    """SIGINT or SIGTERM."""
    concurrency: int = 1
    """--concurrency (2: case runs on the thread pool, the main thread waits in the executor)."""
    terminal: bool = False
    """Ctrl-C typed on a pty instead of kill(2)."""
    flush_each: bool = False
    """One metrics write transaction per case run (HB_PROBE_FLUSH_SECONDS=0), so `flush:n` has work after it."""

    @property
    def code(self) -> int:
        return 128 + int(self.sig)

    def __str__(self) -> str:
        how = "Ctrl-C on a terminal" if self.terminal and self.sig is signal.SIGINT else self.sig.name
        where = self.at + (" (each case run its own write)" if self.flush_each else "")
        return f"{how} at {where}" + (f" --concurrency {self.concurrency}" if self.concurrency > 1 else "")


@dataclass
class Trial:
    """What one interrupted process did."""

    moment: Moment
    """Where the signal was sent."""
    db: Path
    """Its DuckDB file."""
    code: int = -1
    """Exit code (negative: ended by a default signal handler)."""
    output: str = ""
    """Its stderr, or its terminal."""
    cases_before: int = -1
    """Case runs handed to the metrics writer when the signal was sent."""
    cases_after: int = 0
    """Case runs handed to the writer after the child had received the signal."""
    stored: int = -1
    """Case runs in the file when the process had exited."""
    resumed: bool = False
    """Whether a resume was needed (and ran)."""
    notes: list[str] = field(default_factory=list)
    """Anything to report."""


class _Gate:
    """serve-sim's trajectory lookup, holding the n-th chat completion until the test has sent its signal."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.seen = 0
        self.arrived = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()

    def trajectory_for(self, case: Any, model: str) -> Any:
        with self._lock:
            self.seen += 1
            mine = self.seen == self.n
        if mine:
            self.arrived.set()
            self.release.wait(TIMEOUT)
        return trajectory_for_model(case, model)


def _interrupt(moment: Moment, db: Path, servers: list[SimulatorServer]) -> Trial:
    """Start a sweep, send `moment.sig` at `moment.at`, wait for the exit. `http:n`: the model is
    openai:scripted over HTTP (serve-sim, kept running in `servers` for the resume) and the signal is
    sent while the n-th chat completion is being answered."""
    trial = Trial(moment, db)
    args = ["sweep", "--db", str(db), *SWEEP, "--concurrency", str(moment.concurrency)]
    kind, _, n = moment.at.partition(":")
    gate = _Gate(int(n)) if kind == "http" else None
    if gate is not None:
        server = SimulatorServer(select_cases([], list(CASES)), "127.0.0.1", 0, trajectory_for=gate.trajectory_for)
        servers.append(server.start())
        args += ["--model", "openai:scripted", "--base-url", server.base_url, "--api-key-env", "HB_TEST_KEY"]
    env = {"HB_TEST_KEY": "sk-local-simulator", **({"HB_PROBE_FLUSH_SECONDS": "0"} if moment.flush_each else {})}
    child = _Child(args, moment.at, terminal=moment.terminal, cwd=db.parent, env=env)
    hold = kind in HOLDS
    sent = False
    try:
        for name, cases, received in child.events(time.monotonic() + TIMEOUT):
            trial.cases_after += name.startswith("case:") and received
            if sent:
                continue
            if cases >= 0:
                trial.cases_before = cases
            if gate is not None and gate.arrived.is_set():
                child.ctrl_c_or_kill(moment.sig)  # the SDK waits for this completion: the signal lands in it
                sent = True
                time.sleep(0.3)
                gate.release.set()
            elif name == moment.at and not hold:  # the process runs on; the signal lands wherever it is next
                child.ctrl_c_or_kill(moment.sig)
                sent = True
            elif name == "holding":  # the probe keeps the main thread inside DuckDB statements
                child.ctrl_c_or_kill(moment.sig)
                child.go()
                sent = True
        trial.code = child.wait(TIMEOUT)
        trial.output = child.output()
    finally:
        if gate is not None:
            gate.release.set()
        child.close()
    assert sent, f"{moment}: the moment never came (exit {trial.code})\n{trial.output}"
    return trial


RESUME = re.compile(r"^\s*(harness-bench sweep --db .+ --resume \S+)\s*$", re.M)


def _check(trial: Trial, baseline: Digest) -> Trial:
    """The process honoured the signal and wrote no wrong row; its printed resume command completes the sweep."""
    m = trial.moment
    what = str(m)
    out = trial.output
    assert "Traceback" not in out and "Query interrupted" not in out, f"{what}:\n{out}"
    stored = _digest(trial.db)
    trial.stored = len(stored.runs)
    _assert_subset_of(stored, baseline, what)
    assert _failed_calls(stored) == 0 == _failed_calls(baseline), f"{what}: a FAILED tool call was stored"
    # Once the handler has run, the next check of the flag discards whatever comes back: at most the one case
    # run whose check had just passed when the signal landed is written after it.
    assert trial.cases_after <= 1, f"{what}: {trial.cases_after} case runs written after the signal arrived"
    assert len(stored.sweep_ids) == 1, f"{what}: no sweep to resume (exit {trial.code})\n{out}"
    (sweep_id,) = stored.sweep_ids
    bench, sweeps = stored.statuses
    if trial.code != m.code:
        # Only a signal that came after the last case run may find the handlers gone (exit 0, or the
        # default handler's -2/-15); anything else is an ignored interrupt. The file says whether every case run
        # was done, not the probe's last report before the signal: on a loaded machine the child can finish the
        # remaining case runs before that report reaches the test.
        assert trial.code in (0, -int(m.sig)) and trial.stored == PLANNED, f"{what}: exit {trial.code}\n{out}"
        assert (bench, sweeps) == ({"completed"}, {"completed"}), what
        trial.notes.append(f"exit {trial.code}: the signal came after the last case run")
        _assert_equal(stored, baseline, what)
        return trial
    assert f"{m.sig.name}: stopping" in out, f"{what}: the handler did not announce the stop\n{out}"
    if sweeps == {"completed"}:  # every case run had finished before the flag was set
        assert f"completed before {m.sig.name} took effect" in out and "nothing to resume" in out, out
        trial.notes.append("completed before the signal took effect")
        _assert_equal(stored, baseline, what)
        return trial
    assert sweeps == {"interrupted"} and bench <= {"completed", "interrupted"}, f"{what}: {stored.statuses}"
    assert f"sweep {sweep_id} interrupted by {m.sig.name}: {trial.stored} of {PLANNED} case runs stored" in out, out
    commands = RESUME.findall(out)
    expected = f"harness-bench sweep --db {shlex.quote(str(trial.db))} --resume {sweep_id}"
    assert commands == [expected], f"{what}: resume command {commands!r}\n{out}"
    argv = shlex.split(commands[0])
    assert main(argv[1:]) == 0, f"{what}: the printed resume command failed"
    trial.resumed = True
    _assert_equal(_digest(trial.db), baseline, f"{what}, resumed")
    return trial


# 20 moments spread over the run: 24 case runs (point 1 = case runs 1-12, point 2 = 13-24), ~42 tool calls,
# ~80 chat completions over HTTP. Three are Ctrl-C typed on a terminal, two land inside a model HTTP call.
MOMENTS = [
    Moment("claim:1", signal.SIGINT),  # start-up: inside the writer's first DuckDB statements
    Moment("tool:1", signal.SIGTERM),  # inside the first tool's DuckDB query
    Moment("case:1", signal.SIGINT, terminal=True),
    Moment("flush:2", signal.SIGTERM, flush_each=True),  # inside a metrics write, case runs still to come
    Moment("tool:3", signal.SIGINT, concurrency=2),  # a tool on a pool thread: the main thread waits in the executor
    Moment("http:7", signal.SIGINT),  # inside a model HTTP call (openai SDK -> serve-sim)
    Moment("case:4", signal.SIGTERM),
    Moment("tool:5", signal.SIGINT, terminal=True),
    Moment("case:6", signal.SIGINT, concurrency=2),
    Moment("tool:8", signal.SIGTERM),
    Moment("flush:1", signal.SIGINT, terminal=True),  # inside the write that ends point 1
    Moment("point:2", signal.SIGTERM),  # between sweep points
    Moment("case:13", signal.SIGINT, concurrency=2),
    Moment("tool:16", signal.SIGINT),
    Moment("flush:15", signal.SIGTERM, flush_each=True),
    Moment("http:60", signal.SIGTERM),
    Moment("tool:25", signal.SIGTERM, concurrency=2),
    Moment("case:20", signal.SIGTERM, concurrency=2),
    Moment("flush:23", signal.SIGINT, flush_each=True),  # near the end
    Moment("case:24", signal.SIGTERM),  # after the last case run
]

SAMPLED = ["claim:1", "tool:1", "case:1", "tool:3", "http:7", "flush:1", "point:2", "flush:15", "case:20", "case:24"]
"""The moments every commit runs: each moment kind (claim, tool, case, flush, http, point), both signals, Ctrl-C
typed on a terminal, a tool on a pool thread, a write per case run, and stored counts of 0, inside each grid
point and at the end. `HB_ALL_MOMENTS=1` runs all 20 (`make test-full`)."""


def _moments() -> list[Moment]:
    if os.environ.get("HB_ALL_MOMENTS") == "1":
        return MOMENTS
    return [m for m in MOMENTS if m.at in SAMPLED]


def _run_trials(moments: list[Moment], tmp_path: Path, baseline: Digest) -> list[Trial]:
    """Two processes at a time (their start-up is most of their cost); resumes in this process, as they finish."""
    folders = [tmp_path / f"m{i:02d}" for i, _ in enumerate(moments)]
    for folder in folders:
        folder.mkdir()
    servers: list[SimulatorServer] = []
    checked: list[Trial] = []
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = [
                pool.submit(_interrupt, m, f / "s.duckdb", servers) for m, f in zip(moments, folders, strict=True)
            ]
            for fut in as_completed(futures):
                checked.append(_check(fut.result(), baseline))
    finally:
        for server in servers:
            server.stop()
    return sorted(checked, key=lambda t: str(t.db))


def _report(trials: list[Trial]) -> str:
    lines = [f"{'moment':42} exit  stored  resumed  notes"]
    for t in trials:
        lines.append(f"{t.moment!s:42} {t.code:4}  {t.stored:3}/{PLANNED}  {'yes' if t.resumed else 'no ':3}      "
                     f"{'; '.join(t.notes)}")  # fmt: skip
    return "\n".join(lines)


def test_sweep_interrupted_at_spread_moments_resumes_to_the_uninterrupted_outcomes(
    tmp_path: Path, baseline: Digest, capsys: pytest.CaptureFixture[str]
) -> None:
    moments = _moments()
    trials = _run_trials(moments, tmp_path, baseline)
    with capsys.disabled():
        print("\n" + _report(trials))
    assert len(trials) == len(moments) and {t.moment.sig for t in trials} == {signal.SIGINT, signal.SIGTERM}
    kinds = {m.at.split(":")[0] for m in MOMENTS}
    assert {t.moment.at.split(":")[0] for t in trials} == kinds, "every moment kind is hit"
    terminal = sum(m.terminal for m in moments)
    assert terminal >= 2 and sum(t.moment.terminal and t.code == 130 and t.resumed for t in trials) == terminal
    assert any(m.concurrency == 2 for m in moments) and any(m.flush_each for m in moments)
    stored = [t.stored for t in trials]
    # really spread: nothing stored yet, inside each grid point, and at the end
    assert min(stored) == 0 and max(stored) >= PLANNED - 1, stored
    assert any(0 < s < PLANNED // 2 for s in stored) and any(PLANNED // 2 < s < PLANNED for s in stored), stored
    # Every moment but the last leaves case runs to do: 19 resumes expected. One more may find nothing left
    # on a machine so loaded that the last case runs finish before the signal is even sent; `_check` has
    # verified each of them either way (exit code, rows, resume).
    late = [t for t in trials if not t.resumed]
    assert len(late) <= 2 and all(t.cases_before >= PLANNED - 4 for t in late), _report(trials)
    assert all(t.code == t.moment.code for t in trials if t.moment.at != "case:24"), _report(trials)


def test_a_second_ctrl_c_exits_at_once(tmp_path: Path, baseline: Digest, capsys: pytest.CaptureFixture[str]) -> None:
    """The first Ctrl-C waits for the statement in flight (held by the probe, as a slow query would be); the
    second exits at once, leaving the run `running`; the next command names it and resumes it."""
    db = tmp_path / "s.duckdb"
    child = _Child(["sweep", "--db", str(db), *SWEEP], "tool:3", terminal=True, cwd=tmp_path)
    try:
        for name, _, _ in child.events(time.monotonic() + TIMEOUT):
            if name == "holding":
                break
        child.ctrl_c_or_kill(signal.SIGINT)  # the probe keeps the tool's DuckDB query running
        assert child.shown("SIGINT: stopping", TIMEOUT), "the first Ctrl-C reached the handler"
        time.sleep(0.5)
        assert child.alive(), "the first Ctrl-C waits for the case run in flight"
        t0 = time.monotonic()
        child.ctrl_c_or_kill(signal.SIGINT)
        code = child.wait(TIMEOUT)
        took = time.monotonic() - t0
        out = child.output()
    finally:
        child.close()
    assert code == 130 and took < 10, (code, took)  # the held query would have run for 60 s
    assert "SIGINT: stopping" in out and "second SIGINT: exiting at once" in out, out
    stored = _digest(db)
    (sweep_id,) = stored.sweep_ids
    assert stored.statuses == ({"running"}, {"running"}), "no cleanup ran"
    con = open_read_only(db)
    ((bench_id,),) = con.execute("SELECT bench_run_id FROM bench_runs").fetchall()
    con.close()
    _assert_subset_of(stored, baseline, "second Ctrl-C")
    command = f"harness-bench sweep --db {shlex.quote(str(db))} --resume {sweep_id}"
    assert command in out, out
    capsys.readouterr()
    assert main(shlex.split(command)[1:]) == 0
    err = capsys.readouterr().err
    stale = f"1 bench run(s) left 'running' by a process that died are now 'interrupted': {bench_id} (sweep {sweep_id})"
    assert stale in " ".join(err.split()) and f"  {command}\n" in err, err
    _assert_equal(_digest(db), baseline, "second Ctrl-C, resumed")


def test_a_second_sigterm_exits_at_once(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    child = _Child(["sweep", "--db", str(db), *SWEEP], "tool:2", terminal=False, cwd=tmp_path)
    try:
        for name, _, _ in child.events(time.monotonic() + TIMEOUT):
            if name == "holding":
                break
        child.ctrl_c_or_kill(signal.SIGTERM)
        assert child.shown("SIGTERM: stopping", TIMEOUT), "the first SIGTERM reached the handler"
        time.sleep(0.5)
        assert child.alive(), "the first SIGTERM waits for the case run in flight"
        child.ctrl_c_or_kill(signal.SIGTERM)
        assert child.wait(10) == 143
        out = child.output()
    finally:
        child.close()
    assert "second SIGTERM: exiting at once" in out and "--resume sw-" in out, out


# -- in-process: the flag, the bench, the messages -----------------------------------------------------------
def test_the_handler_sets_one_flag_and_duckdb_statements_complete() -> None:
    """The root cause: a raising handler makes DuckDB abort with 'Query interrupted'; the flag lets it finish."""
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    con = duckdb.connect()
    with interrupts.installed() as intr:
        timer = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        results = []
        deadline = time.monotonic() + 30
        while intr.received is None and time.monotonic() < deadline:  # stay inside DuckDB until it lands
            results.append(con.execute("SELECT count(*) FROM range(2000000)").fetchone())
        timer.join()
        assert intr.received is interrupts.InterruptSignal.SIGINT and intr.token.cancelled
        assert intr.exit_code == 130 and set(results) == {(2_000_000,)}
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before, "handlers restored"
    assert interrupts.InterruptSignal.SIGTERM.exit_code == 143


@pytest.mark.parametrize("concurrency", [1, 2])
def test_a_cancelled_bench_discards_what_was_in_flight_and_resumes(tmp_path: Path, concurrency: int) -> None:
    token = CancellationToken()
    seen: list[int] = []

    def cancel_after_three(done: int, total: int, run: object) -> None:
        if run is not None:
            seen.append(done)
            if len(seen) == 3:
                token.cancel()  # as the signal handler does: no exception

    db = tmp_path / "b.duckdb"
    opts = BenchOptions.of(case_ids=list(CASES), epochs=2, db=db, concurrency=concurrency)
    summary = run_bench(plan_run(opts), cancellation=token, on_progress=cancel_after_three)
    assert summary.status == "interrupted" and summary.executed == 3 == len(seen)
    con = open_read_only(db)
    assert con.execute("SELECT count(*), count(*) FILTER (outcome = 'CANCELLED') FROM case_runs").fetchone() == (3, 0)
    assert con.execute("SELECT status FROM bench_runs").fetchone() == ("interrupted",)
    con.close()
    done = run_bench(plan_run(BenchOptions.of(db=db, resume=summary.bench_run_id)))
    assert done.status == "completed" and done.executed == 2 * len(CASES) - 3


def test_stale_runs_are_named_with_their_resume_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "a [red]b c"  # rich markup and a space: printed literally, quoted for a shell
    folder.mkdir()
    db = folder / "x.duckdb"
    one = ["--case", CASES[0]]
    assert main(["run", "--db", str(db), *one]) == 0
    assert main(["sweep", "--db", str(db), *one, "--no-gain-threshold", "1", "--epochs", "1"]) == 0
    con = duckdb.connect(str(db))
    ids = con.execute("SELECT bench_run_id, sweep_id FROM bench_runs ORDER BY started_at").fetchall()
    ((run_id, _), (point_id, sweep_id)) = ids
    con.execute("UPDATE bench_runs SET status = 'running'")
    con.execute("UPDATE sweeps SET status = 'running'")
    con.close()
    capsys.readouterr()
    assert main(["run", "--db", str(db), *one]) == 0
    err = capsys.readouterr().err
    assert (f"2 bench run(s) left 'running' by a process that died are now 'interrupted': {run_id}, "
            f"{point_id} (sweep {sweep_id}); continue with:") in " ".join(err.split()), err  # fmt: skip
    quoted = shlex.quote(str(db))
    lines = [line.strip() for line in err.splitlines()]
    assert f"harness-bench sweep --db {quoted} --resume {sweep_id}" in lines, err
    assert f"harness-bench run --db {quoted} --resume {run_id}" in lines, err
    assert shlex.split(f"harness-bench run --db {quoted} --resume {run_id}")[3] == str(db)
    assert main(["run", "--db", str(db), "--resume", run_id]) == 0
    assert main(["sweep", "--db", str(db), "--resume", sweep_id]) == 0


def test_run_interrupted_names_its_bench_run_and_resume_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`harness-bench run` (in-process): SIGTERM lands while the third case run is being handed back."""
    import runners.run.bench as bench

    real, calls = bench.execute_case, [0]

    def execute(*args: Any) -> Any:
        run = real(*args)
        calls[0] += 1
        if calls[0] == 3:
            os.kill(os.getpid(), signal.SIGTERM)  # the handler runs in this (main) thread, right here
        return run

    monkeypatch.setattr(bench, "execute_case", execute)
    db = tmp_path / "r.duckdb"
    cases = [a for c in CASES[:3] for a in ("--case", c)]
    assert main(["run", "--db", str(db), *cases, "--epochs", "2"]) == 143
    err = " ".join(capsys.readouterr().err.split())
    con = open_read_only(db)
    ((run_id, status),) = con.execute("SELECT bench_run_id, status FROM bench_runs").fetchall()
    assert con.execute("SELECT count(*) FROM case_runs").fetchone() == (2,), "the case run in flight is discarded"
    con.close()
    assert status == "interrupted"
    command = f"harness-bench run --db {shlex.quote(str(db))} --resume {run_id}"
    assert f"bench run {run_id} interrupted by SIGTERM: 2 of 6 case runs stored" in err and command in err, err
    monkeypatch.setattr(bench, "execute_case", real)
    assert main(shlex.split(command)[1:]) == 0
    con = open_read_only(db)
    assert con.execute("SELECT count(*), count(DISTINCT case_run_id) FROM case_runs").fetchone() == (6, 6)
    assert con.execute("SELECT status FROM bench_runs").fetchone() == ("completed",)
    con.close()
