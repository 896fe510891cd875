"""Deeply nested JSON from a model: tool arguments nesting 5,000 `[` (under the argument byte cap), alone, inside
an envelope and under an unknown tool name, and a Draft as deep, go through `run` (every agent loop), `show`,
`report`, `export --inspect` and `gate` as one line or a success — never a traceback — in flat memory; the
OpenTelemetry span recorder keeps them as content.

The commands are the real CLI's `main` in fresh processes started from a small launcher that reads each process's
peak memory: the three runs in one process, `report` in another, the other commands that read them in a third (each
command's exit code and output are its own; the peak bounds every command of its process, so it is no looser than one
process each; `report` alone nears the bound, so it has a process of its own)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.config import HarnessConfig
from runners.cli import main
from tests._cli_batch import batch_argv, read_batch
from tests._fake_endpoint import completion, serve

ROOT = Path(__file__).resolve().parents[2]
CASE = "diagnosable_gateway_risk_pool_exhausted_t1"
DEPTH = 5000
DEEP = "[" * DEPTH + "]" * DEPTH
IN_ENVELOPE = json.dumps({"input": {"tenant": "t1", "query": "pool"}})[:-2] + ', "deep": ' + DEEP + "}}"
IN_OBJECT = '{"start": "2026-06-12T09:00:00Z", "end": "2026-06-12T09:30:00Z", "tenant": "t1", "query": ' + DEEP + "}"
DRAFT = '{"conclusion": "pool", "claims": [' + DEEP + "]}"
PEAK_MB = 300
"""The acceptance bound on a command's peak memory."""
AGENTS = ("native", "pydantic-ai", "openai-agents")

_MEASURE = """
import os, subprocess, sys
proc = subprocess.Popen(sys.argv[1:])
_, status, usage = os.wait4(proc.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss, file=sys.stderr, flush=True)
"""
"""Runs the commands from a small launcher (Linux counts the RSS a process had before exec in its peak, so a child
forked straight from a grown pytest worker would report the worker's size); the last stderr line is
`exit-code peak-kB`."""


@dataclass(frozen=True)
class Done:
    """One command's exit code, output and peak memory."""

    code: int
    """Its exit code."""
    stdout: str
    """What it printed."""
    stderr: str
    """What it wrote on stderr (the launcher's own line taken out)."""
    peak_mb: float
    """Its peak resident memory in MB."""


def _bench(cwd: Path, *argvs: list[str]) -> list[Done]:
    """Each command of `argvs` in turn in one fresh process (tests/_cli_batch.py): its exit code, output and the
    process's peak memory."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "sk-test-deep-0000", "COLUMNS": "100"}
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "results.json"
        done = subprocess.run(
            [sys.executable, "-c", _MEASURE, *batch_argv(sys.executable, results, list(argvs))],
            cwd=cwd, env=env, capture_output=True, text=True, errors="replace", timeout=600,
        )  # fmt: skip
        code, peak_kb = done.stderr.rstrip("\n").split("\n")[-1].split()
        assert code == "0", done.stderr[-2000:]
        ran = read_batch(results)
    return [Done(r.code, r.stdout, r.stderr, int(peak_kb) / 1024) for r in ran]


def _well_behaved(done: Done, *codes: int) -> None:
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    assert "maximum recursion depth" not in done.stderr + done.stdout, done.stderr
    assert done.code in codes, (done.code, done.stderr)
    if done.code == 2:
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.peak_mb < PEAK_MB, done.peak_mb


def _deep_replies(ep: object) -> None:
    usage = {"prompt_tokens": 5, "completion_tokens": 5}
    calls = [
        {"id": "c1", "type": "function", "function": {"name": "log_search", "arguments": DEEP}},
        {"id": "c2", "type": "function", "function": {"name": "log_search", "arguments": IN_ENVELOPE}},
        {"id": "c3", "type": "function", "function": {"name": "log_search", "arguments": IN_OBJECT}},
        {"id": "c4", "type": "function", "function": {"name": "no_such_tool", "arguments": DEEP}},
    ]
    ep.push(200, completion("looking", tool_calls=calls, usage=usage))  # type: ignore[attr-defined]
    for _ in range(8):
        ep.push(200, completion(DRAFT, usage=usage))  # type: ignore[attr-defined]


@dataclass(frozen=True)
class World:
    """A scripted baseline run and one deep run per agent loop, in one database."""

    tmp: Path
    """The working folder."""
    db: Path
    """The database."""
    runs: dict[str, Done]
    """Each deep `run` command by agent loop."""
    reads: dict[str, Done]
    """Each command that reads the deep runs (`show LABEL`, `show --html LABEL`, `report`, `export`, `gate LABEL`)."""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("deep")
    db = tmp / "d.duckdb"
    evalset = str(ROOT / "evalsets" / "diagnosable.yaml")
    # the scripted baseline the gate compares with holds nothing deep: run in process
    assert main(["run", "--evalset", evalset, "--case", CASE, "--db", str(db), "--label", "base"]) == 0
    with serve() as native, serve() as pydantic_ai, serve() as openai_agents:
        endpoints = dict(zip(AGENTS, (native, pydantic_ai, openai_agents), strict=True))
        for ep in endpoints.values():
            _deep_replies(ep)
        done = _bench(tmp, *(
            ["run", "--evalset", evalset, "--case", CASE, "--db", str(db), "--label", agent,
             "--model", "openai:m", "--base-url", ep.base_url, "--agent", agent] for agent, ep in endpoints.items()
        ))  # fmt: skip
        runs = dict(zip(AGENTS, done, strict=True))
        for agent, ep in endpoints.items():
            assert ep.requests, runs[agent].stderr  # each loop asked its own endpoint
    reads: dict[str, list[str]] = {}
    for label in AGENTS:
        show = ["show", "--db", str(db), "--label", label, "--case", CASE]
        reads[f"show {label}"] = show
        reads[f"show --html {label}"] = [*show, "--html", str(tmp / f"{label}.html")]
    reads["export"] = ["export", "--db", str(db), "--inspect", str(tmp / "inspect")]
    for label in AGENTS:
        reads[f"gate {label}"] = [
            "gate", "--db", str(db), "--baseline", "base", "--candidate", label, "--k", "1",
            *(a for s, flag in (("xml", "--junit"), ("json", "--json"), ("md", "--summary"))
              for a in (flag, str(tmp / f"{label}.{s}"))),
        ]  # fmt: skip
    read = dict(zip(reads, _bench(tmp, *reads.values()), strict=True))
    (read["report"],) = _bench(tmp, ["report", "--db", str(db), "--out", str(tmp / "rep")])
    yield World(tmp, db, runs, read)


def test_the_arguments_are_under_the_byte_cap() -> None:
    cap = HarnessConfig().max_argument_bytes
    assert all(len(a.encode()) < cap for a in (DEEP, IN_ENVELOPE, IN_OBJECT, DRAFT))


@pytest.mark.parametrize("label", AGENTS)
def test_run_with_deep_arguments_completes(world: World, label: str) -> None:
    _well_behaved(world.runs[label], 0, 1)
    assert "bench run" in world.runs[label].stdout


@pytest.mark.parametrize("label", AGENTS)
def test_show_renders_the_deep_run(world: World, label: str) -> None:
    done = world.reads[f"show {label}"]
    _well_behaved(done, 0)
    assert "OUTCOME" in done.stdout and "[[[[" in done.stdout
    _well_behaved(world.reads[f"show --html {label}"], 0)
    assert "[[[[" in (world.tmp / f"{label}.html").read_text(encoding="utf-8")


def test_report_renders_the_deep_runs(world: World) -> None:
    _well_behaved(world.reads["report"], 0)
    assert (world.tmp / "rep" / "report.md").exists()


def test_export_writes_every_run_with_a_truthful_placeholder(world: World) -> None:
    from inspect_ai.log import read_eval_log

    out = world.tmp / "inspect"
    _well_behaved(world.reads["export"], 0)
    logs = sorted(out.glob("*.eval"))
    assert len(logs) == 1 + len(AGENTS)
    calls = [c for log in logs for s in read_eval_log(str(log)).samples or [] for m in s.messages
             for c in getattr(m, "tool_calls", None) or []]  # fmt: skip
    deep = [c for c in calls if c.parse_error and "recursion limit" in c.parse_error]
    assert len(deep) >= len(AGENTS)  # every deep run's calls are in its log
    for call in deep:
        assert call.arguments == {}
        assert len(call.parse_error or "") <= 500
        assert "'[[[[" in (call.parse_error or "") or "'{" in (call.parse_error or "")


@pytest.mark.parametrize("label", AGENTS)
def test_gate_on_the_deep_run(world: World, label: str) -> None:
    junit, js, summary = (world.tmp / f"{label}.{s}" for s in ("xml", "json", "md"))
    _well_behaved(world.reads[f"gate {label}"], 0, 1, 3)
    assert json.loads(js.read_text(encoding="utf-8"))
    assert junit.exists() and summary.exists()


def _nested(depth: int) -> tuple[str, ...]:
    """Arguments nesting `depth` lists in every place a model can put them: alone, in the business input, as a
    business field, as the previous observation."""
    d = "[" * depth + "]" * depth
    return (d, '{"input": {"tenant": "t1", "query": "pool", "deep": ' + d + "}}",
            '{"input": {"tenant": "t1", "query": ' + d + "}}",
            '{"input": {"tenant": "t1", "query": "x"}, "previous_observation": ' + d + "}")  # fmt: skip


@pytest.mark.parametrize("depth", [150, 250, 900, 990, DEPTH])
def test_any_depth_ends_in_one_release_and_exports_with_spans_keeping_the_text(
    monkeypatch: pytest.MonkeyPatch, depth: int
) -> None:
    """Around pydantic-core's nesting limit and Python's recursion limit too, in process (a deeper stack than the
    CLI's): the run ends in a Release, the otel recorder keeps the text, export parses or explains each call."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from harness.agent import run_diagnosis
    from harness.models.base import AssistantMessage, ModelResponse, ToolCallRequest, Usage
    from harness.otel import CAPTURE_CONTENT_ENV
    from runners.domain.evalset import load_cases
    from runners.interchange.inspect_export import _arguments
    from runners.run.case_runner import run_case

    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    arguments = _nested(depth)
    calls = tuple(ToolCallRequest(f"c{i}", "log_search", a) for i, a in enumerate(arguments))
    draft = '{"conclusion": "pool", "claims": [{"statement": "s", "citations": ' + arguments[0] + "}]}"
    replies = [ModelResponse(AssistantMessage(None, calls), Usage(5, 5))]
    replies += [ModelResponse(AssistantMessage(draft, ()), Usage(5, 5)) for _ in range(8)]

    class Deep:
        name = "deep"

        def complete(self, request: object) -> ModelResponse:
            return replies.pop(0)

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    case = next(c for c in load_cases() if c.id == CASE)
    run = run_case(case, Deep(), loop=functools.partial(run_diagnosis, tracer=provider.get_tracer("test")))
    assert run.result.decision.outcome is not None
    content = json.dumps([dict(s.attributes or {}) for s in exporter.get_finished_spans()])
    assert "[[[[" in content  # the deep text is kept as text
    for raw in arguments:
        args, error = _arguments(raw)
        if error is None:
            assert isinstance(args, dict) and depth <= 200  # within pydantic-core's nesting limit: parsed
        else:
            assert args == {} and len(error) <= 500 and raw[:40] in error  # why, and the raw text cut
