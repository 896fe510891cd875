"""Shared test helpers: a small real in-memory business tool and call builders."""

from __future__ import annotations

import gc
import json
import os
import threading
from collections.abc import Generator, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from pydantic import BaseModel, ConfigDict, Field

from harness.contracts import EvidenceStatus, JsonObject
from harness.models.base import ToolCallRequest
from harness.tools.base import BusinessTool, ToolResult

# In CI (CI=true) a skip is a failure unless listed here with why it may skip: a check that never runs
# where it matters is worse than a red one.
ALLOWED_CI_SKIPS: dict[str, str] = {
    "tests/e2e/test_full_disk.py": "mounting a small tmpfs needs root and mount(8); a CI runner may have neither",
    "tests/runners/live/test_live_llm.py": "needs make on PATH",
}


# The bench end to end: subprocesses, servers on 127.0.0.1, sweeps, worker processes, Ray, Chromium. Everything
# else — the Harness library, the evaluation cases, the bench's modules on their own — is the fast loop
# (`make test-fast`, `pytest -m "not slow"`); `make test` runs both.
# Heaviest first, as measured (pytest --durations=0, 2026-12-03; test_agent_equivalence.py added 2026-12-04: handed
# out among the quick modules, its 8 s were the last ones to end): the order `make test` hands them out in.
SLOW_MODULES: tuple[str, ...] = (
    "test_capture.py", "test_phoenix.py", "test_output_paths.py", "test_wheel.py", "test_interrupts.py",
    "test_settings.py", "test_deep_json.py", "test_shards.py", "test_hostile_text.py", "test_ray_executor.py",
    "test_flag_bounds.py",
    "test_process_executor.py", "test_evalset_stream.py", "test_full_disk.py", "test_bad_flags.py",
    "test_real_models_report.py", "test_calibration.py", "test_cassettes.py", "test_live_llm.py",
    "test_transcripts.py", "test_power.py", "test_otel_import.py", "test_recommend.py", "test_whatif.py",
    "test_compare_stops_live.py", "test_compare_stops_command.py",
    "test_agent_equivalence.py", "test_readme_commands.py",
    "test_report.py", "test_reliability.py", "test_serve_model.py", "test_preflight.py", "test_real_models.py",
    "test_cassette_faults.py", "test_tables.py", "test_deadline_replay.py", "test_secrets.py", "test_input_bounds.py",
    "test_cassette_atomic.py", "test_bad_paths.py", "test_bench.py", "test_serve_model_live.py", "test_ci_skips.py",
    "test_concurrency.py", "test_otel_export.py", "test_multi_call_turns.py", "test_views.py", "test_docs_site.py",
    "test_unknown_query_e2e.py", "test_import_cost.py", "test_mkdocs_hooks.py",
)  # fmt: skip
_SLOW_RANK = {name: rank for rank, name in enumerate(SLOW_MODULES)}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--evalset", action="append", default=[], metavar="PATH",
                     help="`-m eval` runs these cases (a suite's folder, a file, a built-in family) instead of the"
                          " built-in ones; repeatable")  # fmt: skip


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test of a module in SLOW_MODULES `slow`, and run those modules first.

    `make test` hands whole modules to its workers in collection order (`--no-loadscope-reorder`: xdist would
    otherwise order them by their number of tests, which puts many-parametrised quick modules first and a heavy
    module of few tests last): a slow module handed out last keeps one worker busy while the others idle. Slow
    modules first, heaviest first, and the short ones filling in behind is the longest-first order that keeps every
    worker busy to the end. Within a module the order is unchanged."""
    for item in items:
        if item.path.name in _SLOW_RANK:
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: _SLOW_RANK.get(item.path.name, len(SLOW_MODULES)))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Everything collection built (every test module, the libraries they import) lives to the end of the session:
    moved out of the garbage collector's generations, the collections the tests' own allocations trigger stop
    traversing it again and again (a few percent of the suite's CPU)."""
    gc.collect()
    gc.freeze()


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """With CI=true, an unlisted skip is reported as a failure naming the skip's reason."""
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or hasattr(report, "wasxfail") or not _in_ci():
        return
    if item.nodeid.split("::", 1)[0] in ALLOWED_CI_SKIPS:
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
