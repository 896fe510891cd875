"""The run path from the command line down reads top to bottom: `harness-bench run` (scripted model, two cases, a
temporary DuckDB file; and `run --resume`, `sweep` over two thresholds, `gate` of two labels) is traced with
`sys.setprofile`, and every call between two modules of `runners` recorded. The path is the order in which the run
first enters each module. A return to a module higher up is a call from module B into a module A that is on the call
stack above B (A called, through others, B, and B calls A back): the runner asking the planner or the CLI again, a
callback, a generator handed down and pulled from below.

Not counted, each for its reason:

- value types and vocabularies read everywhere: `runners.plan.settings` (the declaration and `RunSettings`),
  `runners.plan.options` (`BenchOptions`, `RecordMode`), `runners.plan.executor` and `runners.plan.agent` (enums),
  a dataclass's generated methods (`__init__`, `__eq__`, ...), the accessors of a `RunPlan` (its properties:
  reading the plan is what the runner does);
- the run's domain, which the runner executes by design: `runners.domain.*` (cases, tools, the scripted model);
- the progress callbacks the CLI hands the runner (`on_progress`, `on_start`): display, not a decision.

The trace starts where the command starts, `runners.cli._dispatch`: building the parser before it (each command
module registering its flags) reads no flag and decides nothing. Returns up allowed anyway would be named in
`ALLOWED`, each with its reason; there are none.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import duckdb
import pytest

from runners.cli import main

CASES = ("empty_logs_gateway_timeout_t1", "missing_context_no_tenant_gateway_429")

VALUE_MODULES = frozenset({
    "runners.plan.settings", "runners.plan.options", "runners.plan.executor", "runners.plan.agent",
})  # fmt: skip
"""Value types and vocabularies (see the module docstring)."""
CALLBACKS = frozenset(
    {("runners.commands.run", "run.<locals>.hook"), ("runners.commands.run", "run.<locals>.<lambda>")}
)
"""The `run` command's progress callbacks, by module and qualified name."""
ALLOWED: dict[tuple[str, str, str], str] = {}
COMMAND = ("runners.cli", "_dispatch")
"""Where a command starts: the parser is built and the flags parsed."""
"""Returns up that are not the run path's, each with its reason."""
PLANNING = (
    "runners.plan.run_plan", "runners.plan.rules", "runners.plan.stored_plan", "runners.cli", "runners.commands.run",
    "runners.commands._bench",
)  # fmt: skip
"""Modules the runner (everything entered from `runners.run.bench` on) never calls back into."""


def _counted(module: str, qualname: str) -> bool:
    if module in VALUE_MODULES or module.startswith("runners.domain"):
        return False
    name = qualname.rpartition(".")[2]
    if name.startswith("__") and name.endswith("__"):
        return False  # a value's generated method (a dataclass's __init__, __eq__, ...)
    if module == "runners.plan.run_plan" and qualname.startswith("RunPlan.") and qualname != "RunPlan.point":
        return False  # a property of the plan: the runner reading it
    return (module, qualname) not in CALLBACKS


@dataclass
class RunPath:
    """What the trace saw."""

    path: list[str] = field(default_factory=list)
    """Modules of `runners` in the order the run first entered them (counted calls only)."""
    calls: dict[tuple[str, str], str] = field(default_factory=dict)
    """(caller module, callee module) -> the first callee function seen on that edge."""
    ups: dict[tuple[str, str, str], int] = field(default_factory=dict)
    """(caller module, callee module, function) of every return to a module higher up -> how often."""

    def returns(self) -> list[tuple[str, str, str]]:
        """The returns up that are not `ALLOWED`."""
        return [r for r in self.ups if r not in ALLOWED]

    def shown(self) -> str:
        lines = [f"path ({len(self.path)} modules):", *(f"  {i + 1:2d}. {m}" for i, m in enumerate(self.path))]
        lines.append(f"returns to a module higher up ({len(self.ups)}, {len(self.returns())} not allowed):")
        lines += [f"  {a} -> {b}.{fn} ×{n}" + ("  (allowed)" if (a, b, fn) in ALLOWED else "")
                  for (a, b, fn), n in self.ups.items()] or ["  (none)"]  # fmt: skip
        return "\n".join(lines)


def _module(frame: FrameType) -> str:
    return str(frame.f_globals.get("__name__", ""))


def _stack(frame: FrameType) -> list[str]:
    """The modules of `runners` up the stack from `frame` (nearest first, through harness, stdlib, libraries)."""
    out: list[str] = []
    up = frame.f_back
    while up is not None:
        name = _module(up)
        if name.startswith("runners.") and (not out or out[-1] != name):
            out.append(name)
        up = up.f_back
    return out


@contextmanager
def traced(start: tuple[str, str] | None = None) -> Iterator[RunPath]:
    """Record the calls between modules of `runners` made on this thread (from the first call of `start`, a module
    and a function's qualified name, when given)."""
    seen = RunPath()
    entered: set[str] = set()
    started = [start is None]

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call":
            return
        callee = _module(frame)
        if not callee.startswith("runners."):
            return
        qualname = frame.f_code.co_qualname
        if not started[0]:
            if (callee, qualname) != start:
                return
            started[0] = True
        if not _counted(callee, qualname):
            return
        if callee not in entered:
            entered.add(callee)
            seen.path.append(callee)
        stack = _stack(frame)
        if not stack or stack[0] == callee:
            return
        seen.calls.setdefault((stack[0], callee), qualname)
        if callee in stack[1:]:
            key = (stack[0], callee, qualname)
            seen.ups[key] = seen.ups.get(key, 0) + 1

    assert threading.current_thread() is threading.main_thread()
    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(None)


def _run(db: Path) -> int:
    argv = ["run", "--db", str(db), "--label", "path", *(a for c in CASES for a in ("--case", c))]
    return main(argv)


def _interrupted_copy(db: Path) -> str:
    """Make the bench run in `db` resumable: its last case run removed, its status `interrupted`."""
    con = duckdb.connect(str(db))
    try:
        (bench_run_id,) = con.execute("SELECT bench_run_id FROM bench_runs").fetchone() or ("",)
        (last,) = con.execute("SELECT max(case_run_id) FROM case_runs").fetchone() or ("",)
        for table in ("case_runs", "tool_calls", "events", "messages"):
            con.execute(f"DELETE FROM {table} WHERE case_run_id = ?", [last])
        con.execute("UPDATE bench_runs SET status = 'interrupted'")
        return str(bench_run_id)
    finally:
        con.close()


@pytest.mark.parametrize("resume", [False, True], ids=["run", "resume"])
def test_the_run_path_enters_each_module_once_and_never_returns_up(tmp_path: Path, resume: bool) -> None:
    assert _run(tmp_path / "warm.duckdb") == 0  # every import done: the trace sees the run, not the imports
    argv = ["run", "--db", str(tmp_path / "warm.duckdb"), "--resume", _interrupted_copy(tmp_path / "warm.duckdb")]
    with traced(start=COMMAND) as seen:
        code = main(argv) if resume else _run(tmp_path / "traced.duckdb")
    assert code == 0
    shown = seen.shown()
    print(shown)  # the measurement itself (pytest -s shows it)
    assert seen.path[0] == "runners.cli", shown
    on_path = ["runners.plan.run_plan", "runners.plan.rules", "runners.run.bench", "runners.store.writer"]
    for module in on_path + (["runners.plan.stored_plan"] if resume else []):
        assert module in seen.path, f"{module} not on the run path\n{shown}"
    order = {m: i for i, m in enumerate(seen.path)}
    assert order["runners.plan.rules"] < order["runners.run.bench"], f"planning comes before running\n{shown}"
    runner = {m for m in seen.path if order[m] >= order["runners.run.bench"]}
    back = [(a, b, fn) for (a, b), fn in seen.calls.items() if a in runner and b in PLANNING]
    assert not back, f"the runner called back into planning or the CLI: {back}\n{shown}"
    assert seen.returns() == [], shown


def test_the_trace_sees_a_return_up() -> None:
    """The measurement bites: a callback into a module on the stack above is counted, a value type's is not."""

    def hook() -> None:
        pass

    def runner(callback: Any) -> None:
        callback()

    runner.__module__ = hook.__module__ = "x"
    fake = {"__name__": "runners.fake_runner"}
    runner_in_module = type(runner)(runner.__code__, fake)  # a function whose module is runners.fake_runner
    with traced() as seen:
        runner_in_module(hook)  # this test module (not runners.*) -> fake_runner -> back here: not counted
    assert seen.path == ["runners.fake_runner"] and seen.ups == {}
    cli = {"__name__": "runners.cli"}
    top = type(runner)(compile("def top(run, cb):\n    run(cb)\n", "<cli>", "exec").co_consts[0], cli)
    back = type(hook)(compile("def again():\n    pass\n", "<cli>", "exec").co_consts[0], cli)
    with traced() as seen:
        top(runner_in_module, back)  # cli -> fake_runner -> cli: a return up
    assert seen.path == ["runners.cli", "runners.fake_runner"], seen.shown()
    assert seen.returns() == [("runners.fake_runner", "runners.cli", "again")], seen.shown()


MAX_RETURNS_UP = 5
"""The most returns to a module higher up a command's path may make (each is printed)."""


def _sweep(db: Path, label: str = "path") -> int:
    argv = ["sweep", "--db", str(db), "--label", label, "--no-gain-threshold", "1,2", "--epochs", "1",
            *(a for c in CASES for a in ("--case", c))]  # fmt: skip
    return main(argv)


def test_the_sweep_path_reads_top_to_bottom(tmp_path: Path) -> None:
    assert _sweep(tmp_path / "warm.duckdb") == 0  # imports done
    with traced(start=COMMAND) as seen:
        code = _sweep(tmp_path / "traced.duckdb")
    assert code == 0
    shown = seen.shown()
    print(shown)
    for module in ("runners.plan.sweep_plan", "runners.plan.rules", "runners.run.sweep", "runners.run.bench"):
        assert module in seen.path, f"{module} not on the sweep path\n{shown}"
    order = {m: i for i, m in enumerate(seen.path)}
    assert order["runners.plan.rules"] < order["runners.run.sweep"], f"planning comes before running\n{shown}"
    assert len(seen.returns()) <= MAX_RETURNS_UP, shown


def test_the_gate_path_reads_top_to_bottom(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the gate writes its summary and JUnit report into the working folder
    db = tmp_path / "g.duckdb"
    for label in ("base", "cand"):
        assert main(["run", "--db", str(db), "--label", label, *(a for c in CASES for a in ("--case", c))]) == 0
    argv = ["gate", "--db", str(db), "--baseline", "base", "--candidate", "cand", "--k", "1", "--allow-inconclusive"]
    main(argv)  # imports done
    with traced(start=COMMAND) as seen:
        code = main(argv)
    shown = seen.shown()
    print(shown)
    assert code in (0, 3), shown
    for module in ("runners.commands.gate", "runners.store.gate_pairs", "runners.decisions.gate.statistics"):
        assert module in seen.path, f"{module} not on the gate path\n{shown}"
    assert len(seen.returns()) <= MAX_RETURNS_UP, shown


MAX_CLIMBS = 5
"""The most climbs back up `scripts/run_path_climbs.py` may count on `run`'s path (today 3: the store's reads handed
to the planner, and the two progress callbacks of the CLI)."""


def test_the_run_path_climbs_back_up_at_most_five_times(tmp_path: Path) -> None:
    """The path from `run`'s command function to the first case run, as scripts/run_path_climbs.py measures it:
    into a higher layer, or back into a phase (the planner) once it was left, at most MAX_CLIMBS times."""
    from scripts.run_path_climbs import trace

    assert _run(tmp_path / "warm.duckdb") == 0  # every import done
    walk = trace(["run", "--db", str(tmp_path / "traced.duckdb"), "--case", CASES[0]])
    shown = "\n".join(f"{s.caller} -> {s.callee}.{s.function} ({s.climb})" for s in walk.climbs)
    assert len(walk.climbs) <= MAX_CLIMBS, f"{walk.summary()}\n{shown}"
    assert not [s for s in walk.climbs if s.climb == "re-entry"], f"the runner asked the planner again:\n{shown}"
