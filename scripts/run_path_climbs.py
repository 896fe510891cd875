"""Measure how the run path reads: `harness-bench run --case X` traced with `sys.setprofile` from the command's
function (`runners.commands.run.run`) to the first executed case (`runners.run.case_runner.run_case`).

    .venv/bin/python -m scripts.run_path_climbs [--case ID] [--show]

What is counted (every call and return of a function of a `runners` module on the main thread; an import's module
body is not a function: a warm-up run first, in the same process, makes every import before the trace starts):

- a *stay* is a stretch of the walk spent in one module: the module of the innermost `runners` frame changes on a
  call into another module and on the return to it; `stays` is how many stretches, `files` how many modules;
- a *step* is a call from one module into another made by the bench's own code: the caller is the innermost
  `runners` frame above the callee, and the frame right above the callee is a `runners` one (a library calling back,
  pydantic a validator or argparse a type, is the library's doing) and the callee is no method a dataclass generated
  (constructing a value is not a step);
- the *phases* of the path are the packages the command's function itself calls into (the flags, the plan, the
  run): the command going from one phase to the next reads top to bottom;
- a step *climbs back up* when it enters a module of a higher layer than its caller's (layers as in
  tests/runners/test_architecture.py: domain < plan < store < run < ... < commands < cli), or when it goes back into a
  package already left: a phase none of whose frames is on the stack any more, entered again from another package than
  the command's (the runner, or the store under it, asking the planner again once planning is done);
- the *strict count* also counts every step back into any package (a phase or not: the store, the cases) that the
  walk first left before it first entered the caller's package (the runner writing to the store the plan checked
  counts there, each call);
- `entered` counts, per package, the steps into it from another package.

Exit 0 with the figures on stdout (`--show`: every step, climbs marked).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

LAYERS = (
    "domain", "plan", "store", "run", "endpoints", "interchange", "decisions", "rendering", "api", "live", "commands",
    "cli",
)  # fmt: skip
"""The bench's layers, lowest first (tests/runners/test_architecture.py)."""
START = ("runners.commands.run", "run")
"""Where the trace starts: the `run` command's function (the parser is built and the flags parsed)."""
STOP = ("runners.run.case_runner", "run_case")
"""Where it stops: the first case run starts."""
DEFAULT_CASE = "empty_logs_gateway_timeout_t1"


def layer(module: str) -> int:
    """The index of `module`'s layer (`runners.api`, `runners.cli`: a layer of one module)."""
    part = module.split(".")[1] if "." in module else "cli"
    return LAYERS.index(part) if part in LAYERS else len(LAYERS)


def package(module: str) -> str:
    """`runners.plan.rules` -> `runners.plan` (a top-level module is its own package)."""
    parts = module.split(".")
    return ".".join(parts[:2])


@dataclass
class Step:
    """One call from a module into another."""

    caller: str
    """The calling module."""
    callee: str
    """The module entered."""
    function: str
    """The function entered (qualified name)."""
    climb: str | None
    """Why the step climbs back up (`layer`, `re-entry`), or None."""
    strict: bool
    """The step climbs by the strict count: into a higher layer, or back into any package (a phase or not) that
    the walk first left before it first entered the caller's package."""


@dataclass
class Walk:
    """What the trace saw."""

    steps: list[Step] = field(default_factory=list)
    """Every call between two modules, in order."""
    stays: list[str] = field(default_factory=list)
    """The module of each stay, in order."""

    @property
    def climbs(self) -> list[Step]:
        """The steps that climb back up."""
        return [s for s in self.steps if s.climb]

    @property
    def strict(self) -> list[Step]:
        """The steps that climb by the strict count."""
        return [s for s in self.steps if s.strict]

    def entered(self) -> Counter[str]:
        """Per package, the steps into it from another package."""
        return Counter(package(s.callee) for s in self.steps if package(s.callee) != package(s.caller))

    def summary(self) -> str:
        entered = ", ".join(f"{p.removeprefix('runners.')}/ {n}" for p, n in self.entered().most_common())
        by_kind = Counter(s.climb for s in self.climbs)
        return (
            f"{len(self.stays)} stays in {len(set(self.stays))} files, {len(self.steps)} steps between modules,"
            f" {len(self.climbs)} climbs back up ({by_kind['layer']} into a higher layer, {by_kind['re-entry']} back"
            f" into a package already left); strict count {len(self.strict)}; entered: {entered}"
        )


def _module(frame: FrameType | None) -> str:
    return str(frame.f_globals.get("__name__", "")) if frame is not None else ""


def _runners_stack(frame: FrameType | None) -> list[str]:
    """The `runners` modules on the stack from `frame` up (innermost first)."""
    out: list[str] = []
    while frame is not None:
        name = _module(frame)
        if name.startswith("runners."):
            out.append(name)
        frame = frame.f_back
    return out


def _direct(frame: FrameType) -> bool:
    """A call the bench's own code makes: its caller is a `runners` frame, and it is no method a dataclass generated
    (constructing a value is not a step); a library calling back into the bench (pydantic a validator, argparse a
    type) is the library's doing, not the path's."""
    return _module(frame.f_back).startswith("runners.") and not frame.f_code.co_qualname.startswith("__create_fn__")


def trace(argv: list[str]) -> Walk:
    """Run `harness-bench argv` in this process and record its walk from START to STOP."""
    from runners.cli import main

    walk = Walk()
    phases: set[str] = set()
    """The packages the command's function itself called into: the phases of the path."""
    first: dict[str, int] = {}
    """Package -> when the walk first entered it (the stays before)."""
    left: dict[str, int] = {}
    """Package -> when the walk first left it (none of its frames on the stack any more)."""
    state: dict[str, Any] = {"started": False, "stopped": False, "current": "", "command": None}

    def stay(module: str) -> None:
        if module and module != state["current"]:
            walk.stays.append(module)
            state["current"] = module

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if state["stopped"] or event not in ("call", "return"):
            return
        callee = _module(frame)
        if not state["started"]:
            if event == "call" and (callee, frame.f_code.co_qualname) == START:
                state["started"], state["command"] = True, frame
                first[package(callee)] = 0
                stay(callee)
            return
        if event == "return":
            above = _runners_stack(frame.f_back)
            if callee.startswith("runners.") and package(callee) not in {package(m) for m in above}:
                left.setdefault(package(callee), len(walk.stays))
            stay(above[0] if above else "")
            return
        if not callee.startswith("runners.") or not _direct(frame):
            return
        above = _runners_stack(frame.f_back)
        caller = above[0]
        entering, calling = package(callee), package(caller)
        on_stack = {package(m) for m in above}
        if frame.f_back is state["command"]:
            phases.add(entering)
        if caller != callee:
            climb, strict = None, False
            if layer(callee) > layer(caller):
                climb = "layer"
            elif entering != calling and entering not in on_stack:
                if entering in phases and calling != package(START[0]):
                    climb = "re-entry"
                strict = entering in left and first[calling] > left[entering]
            walk.steps.append(Step(caller, callee, frame.f_code.co_qualname, climb, strict or climb == "layer"))
        first.setdefault(entering, len(walk.stays))
        stay(callee)
        if (callee, frame.f_code.co_qualname) == STOP:
            state["stopped"] = True

    sys.setprofile(profile)
    try:
        main(argv)
    finally:
        sys.setprofile(None)
    if not state["stopped"]:
        raise SystemExit(f"the trace never reached {'.'.join(STOP)}: did the run start a case?")
    return walk


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.run_path_climbs", description=__doc__.split("\n")[0])
    parser.add_argument("--case", default=DEFAULT_CASE, help=f"the case to run (default {DEFAULT_CASE})")
    parser.add_argument("--show", action="store_true", help="print every step, climbs marked")
    args = parser.parse_args(argv)
    from runners.cli import main as bench

    with tempfile.TemporaryDirectory(prefix="run-path-") as tmp:
        warm = bench(["run", "--db", str(Path(tmp) / "warm.duckdb"), "--case", args.case])
        if warm != 0:
            raise SystemExit(f"the warm-up run exited {warm}")
        walk = trace(["run", "--db", str(Path(tmp) / "traced.duckdb"), "--case", args.case])
    if args.show:
        for s in walk.steps:
            mark = f"  <- climb ({s.climb})" if s.climb else ("  <- strict" if s.strict else "")
            print(f"{s.caller} -> {s.callee}.{s.function}{mark}")
    print(f"harness-bench run --case {args.case}: {walk.summary()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
