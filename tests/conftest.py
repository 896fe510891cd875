"""Shared test helpers: a small real in-memory business tool and call builders."""

from __future__ import annotations

import atexit
import gc
import json
import os
import sys
import threading
from collections.abc import Generator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from pydantic import BaseModel, ConfigDict, Field

from harness.contracts import EvidenceStatus, JsonObject
from harness.models.base import ToolCallRequest
from harness.tools.base import BusinessTool, ToolResult
from tests._durations import ROOT, ModuleCost, add_durations_option, load_durations, register_durations_writer

# In CI (CI=true) a skip is a failure unless listed here with why it may skip: a check that never runs
# where it matters is worse than a red one.
ALLOWED_CI_SKIPS: dict[str, str] = {
    "tests/e2e/test_full_disk.py": "mounting a small tmpfs needs root and mount(8); a CI runner may have neither",
    "tests/runners/live/test_live_llm.py": "needs make on PATH",
    # material read from beside the clone, never copied into it: a clone elsewhere has none of it
    "tests/runners/interchange/test_holmesgpt.py::test_holmesgpts_own_suite_converts_at_least_60_folders_and_lists"
    "_every_other": "../shared/external absent",
    "tests/e2e/test_foreign_import.py::test_tau_bench_s_gpt_4o_runs_are_cut_where_the_rules_definitions_say": (
        "../shared/external absent"
    ),
}
"""Where a skip in CI is not a failure: a test module, or one test by its node id (any of its parameters)."""


# The bench end to end: subprocesses, servers on 127.0.0.1, sweeps, worker processes, Ray, Chromium. Everything
# else — the Harness library, the evaluation cases, the bench's modules on their own — is the fast loop
# (`make test-fast`, `pytest -m "not slow"`); `make test` runs both. Which modules are slow, and the order `make test`
# hands them out in, come from a measured run, not from a list kept by hand: `make durations` writes each module's
# wall and CPU seconds to DURATIONS_FILE (tests/_durations.py).
DURATIONS_FILE = Path(__file__).with_name("durations.json")
SLOW_CPU_SECONDS = 3.0
"""A module whose tests took this much CPU time in all (its subprocesses' included) is `slow`."""
_MEASURED = load_durations(DURATIONS_FILE)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_durations_option(parser)
    parser.addoption("--evalset", action="append", default=[], metavar="PATH",
                     help="`-m eval` runs these cases (a suite's folder, a file, a built-in family) instead of the"
                          " built-in ones; repeatable")  # fmt: skip


def pytest_configure(config: pytest.Config) -> None:
    register_durations_writer(config)


def module_name(path: Path) -> str:
    """A test module's name in DURATIONS_FILE: its path from the repository's root (a module elsewhere, such as a
    test's own scratch suite, keeps its full path and is never measured)."""
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.as_posix()


def module_rank(name: str, measured: Mapping[str, ModuleCost] | None = None) -> tuple[int, float]:
    """Where a module goes in `make test`'s order (`measured`: the durations file's by default): the slow ones
    longest first, then the modules not measured yet (early enough that a heavy newcomer does not end the run
    alone), then the quick ones longest first."""
    cost = (_MEASURED if measured is None else measured).get(name)
    if cost is None:
        return (1, 0.0)
    return (0 if cost.cpu_seconds >= SLOW_CPU_SECONDS else 2, -cost.seconds)


WAITING_SECONDS = 2.0
"""A module measured waiting (wall time its CPU time does not account for: sleeps, deadlines, servers) this long, and
longer than it computes, is a `waiting` one."""


def waits(cost: ModuleCost) -> bool:
    """Whether a module spends most of its time waiting rather than computing."""
    wait = cost.seconds - cost.cpu_seconds
    return wait >= WAITING_SECONDS and wait >= cost.cpu_seconds


def module_order(names: Iterable[str], measured: Mapping[str, ModuleCost] | None = None) -> list[str]:
    """The modules in `make test`'s order: by `module_rank`, with the waiting ones (`waits`, longest wait first)
    taken out and set one after every two others. Ranked by wall time, the waiting modules would run at the same
    moment on every worker and leave the cores idle; beside two that compute, a waiting module's wait is filled."""
    costs = _MEASURED if measured is None else measured
    ranked = sorted(dict.fromkeys(names), key=lambda n: module_rank(n, costs))
    waiting = sorted((n for n in ranked if n in costs and waits(costs[n])),
                     key=lambda n: costs[n].cpu_seconds - costs[n].seconds)  # fmt: skip
    busy = [n for n in ranked if n not in waiting]
    order: list[str] = []
    for i, name in enumerate(busy):
        order.append(name)
        if i % 2 == 1 and waiting:
            order.append(waiting.pop(0))
    return order + waiting


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test of a module measured at SLOW_CPU_SECONDS or more `slow`, and order the modules by
    `module_order`.

    `make test` hands whole modules to its workers in collection order (`--no-loadscope-reorder`: xdist would
    otherwise order them by their number of tests, which puts many-parametrised quick modules first and a heavy
    module of few tests last): a slow module handed out last keeps one worker busy while the others idle. Longest
    first, and the short ones filling in behind, is the order that keeps every worker busy to the end. Within a
    module the order is unchanged."""
    names = {item: module_name(item.path) for item in items}
    for item in items:
        if module_rank(names[item])[0] == 0:
            item.add_marker(pytest.mark.slow)
    position = {name: i for i, name in enumerate(module_order(names.values()))}
    items.sort(key=lambda item: position[names[item]])


def pytest_collection_finish(session: pytest.Session) -> None:
    """Everything collection built (every test module, the libraries they import) lives to the end of the session:
    moved out of the garbage collector's generations, the collections the tests' own allocations trigger stop
    traversing it again and again (a few percent of the suite's CPU)."""
    gc.collect()
    gc.freeze()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> Generator[None, int | pytest.ExitCode, int | pytest.ExitCode]:
    """An xdist worker whose session has ended (its last report sent, its temporary folders removed, every exit
    handler run) leaves at once instead of tearing its interpreter down: taking apart everything the whole suite
    imported and built kept the run waiting about 3 s after its last test. Only what the tests still hold when the
    session ends goes without its destructor; every test's own clean-up has run."""
    code = yield
    if hasattr(config, "workerinput"):
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(code))
    return code


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """With CI=true, an unlisted skip is reported as a failure naming the skip's reason."""
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or hasattr(report, "wasxfail") or not _in_ci():
        return
    plain = item.nodeid.split("[", 1)[0]
    if plain in ALLOWED_CI_SKIPS or plain.split("::", 1)[0] in ALLOWED_CI_SKIPS:
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = (
        f"skipped in CI ({reason}): install what it needs (make ci-deps) or list it in ALLOWED_CI_SKIPS"
        " (tests/conftest.py) with the reason it may skip"
    )


# Property tests assert behaviour, not speed: no per-example deadline on a loaded 2-core CI machine.
settings.register_profile("harness-bench", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("harness-bench")


class LookupInput(BaseModel):
    """Input of the test lookup tool."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1)
    """Case-insensitive substring to find."""
    tenant: str | None = None
    """Optional tenant filter."""


class LookupTool(BusinessTool[LookupInput]):
    """A real (in-memory) business tool that counts backend calls and remembers inputs."""

    name = "lookup"
    description = "Find lines containing the query."
    input_model = LookupInput

    def __init__(self, lines: Sequence[str] = (), *, fail: bool = False) -> None:
        self.lines = list(lines)
        self.fail = fail
        self.calls = 0
        self.seen_inputs: list[JsonObject] = []
        self._lock = threading.Lock()

    def run(self, parsed: LookupInput) -> ToolResult:
        with self._lock:
            self.calls += 1
            self.seen_inputs.append(parsed.model_dump(mode="json"))
        if self.fail:
            raise RuntimeError("backend exploded")
        hits = tuple({"line": line} for line in self.lines if parsed.query.casefold() in line.casefold())
        status = EvidenceStatus.EVIDENCE if hits else EvidenceStatus.NO_EVIDENCE
        return ToolResult(status, len(hits), {"query": parsed.query, "tenant": parsed.tenant}, hits)


LINES = [
    "2026-07-01T14:02:11Z ERROR gateway tenant=t1 upstream timeout after 3000ms calling settlement",
    "2026-07-01T14:02:12Z ERROR settlement tenant=t1 db connection pool exhausted (max=20)",
    "2026-07-01T14:05:00Z INFO order tenant=t2 order created",
]


def call(
    call_id: str,
    query: str | None = "timeout",
    *,
    prev: tuple[str, str] | None = None,
    name: str = "lookup",
    raw: str | None = None,
    **extra_input: object,
) -> ToolCallRequest:
    """Build a tool call with the envelope; `raw` overrides the arguments text entirely."""
    if raw is not None:
        return ToolCallRequest(call_id, name, raw)
    envelope: dict[str, object] = {"input": {"query": query, **extra_input} if query is not None else dict(extra_input)}
    if prev is not None:
        envelope["previous_observation"] = {"tool_call_id": prev[0], "information_gain": prev[1]}
    return ToolCallRequest(call_id, name, json.dumps(envelope))


@pytest.fixture
def lookup() -> LookupTool:
    return LookupTool(LINES)
