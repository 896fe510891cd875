"""Benchmark: what OpenTelemetry spans add to the native loop's time per tool call — every built-in case run by
`run_diagnosis` (scripted model) without a tracer, and with an SDK TracerProvider whose spans go to an exporter
that drops them (so the figure is the Harness's mapping plus the SDK, not an exporter's I/O), and with a tracer whose
sampler drops every run (the SDK's non-recording path: what a service sampling a share of its runs pays for the
others). Prints wall-time and CPU-time ratios (the process's CPU time, the span processor's thread included, is the
steadier measure on a shared machine).

`--over-http` runs the same native loop as a user deploys it: the real `openai` SDK over HTTP to a model endpoint
(serve-sim, the scripted trajectories served by another process on 127.0.0.1, 0 ms of model latency: the cheapest
endpoint there is, so the ratio is the least favourable a real deployment can see)."""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.util.types import AttributeValue

from benchmarks._serve_sim import start_simulator
from harness.agent import AgentLoop, run_diagnosis
from harness.models.base import ChatModel
from harness.models.openai_model import OpenAIChatModel
from runners.domain.evalset import load_cases
from runners.run.case_runner import run_case

CASES = load_cases()


class DropExporter(SpanExporter):
    """Accepts every span and keeps none."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


ROUNDS = 9


def _timed(fn: Callable[[], None]) -> tuple[float, float]:
    """Wall and CPU seconds of one call."""
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--over-http", action="store_true", help="the openai SDK over HTTP to serve-sim (see above)")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"interleaved rounds (default {ROUNDS})")
    args = parser.parse_args()
    sim: subprocess.Popen[str] | None = None
    model: ChatModel | None = None
    if args.over_http:
        sim, base_url = start_simulator()
        os.environ.setdefault("OPENAI_API_KEY", "sk-bench-local")
        model = OpenAIChatModel("scripted", base_url=base_url)
    try:
        _measure(model, args.rounds)
    finally:
        if sim is not None:
            sim.terminate()
            sim.wait(10)


def _sdk_floor(spans_per_call: float, events_per_call: float, n: int = 20_000) -> float:
    """Microseconds the OpenTelemetry SDK alone takes per tool call: `spans_per_call` bare spans (ten attributes,
    started and ended under a run's span, into the same batch processor) and `events_per_call` span events — no
    mapping of ours at all, so no recorder can cost less."""
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(DropExporter()))
    tracer = provider.get_tracer("floor")
    run = tracer.start_span("invoke_agent floor")
    ctx = otel_trace.set_span_in_context(run)
    attrs: dict[str, AttributeValue] = {f"harness.field{i}": i for i in range(8)}
    attrs |= {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
    t = time.perf_counter()
    for _ in range(n):
        tracer.start_span("chat m", context=ctx, attributes=attrs, start_time=1).end(2)
    span_us = (time.perf_counter() - t) / n * 1e6
    t = time.perf_counter()
    for _ in range(n):
        run.add_event("harness.gain_applied", attrs, 3)
    event_us = (time.perf_counter() - t) / n * 1e6
    run.end()
    provider.shutdown()
    return spans_per_call * span_us + events_per_call * event_us


def _measure(model: ChatModel | None, rounds_n: int) -> None:
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(DropExporter()))  # what a service configures
    sampled_out = TracerProvider(sampler=ALWAYS_OFF)
    loops: dict[str, AgentLoop | None] = {
        "no tracer": None,
        "with tracer": functools.partial(run_diagnosis, tracer=provider.get_tracer("bench")),
        "sampled out": functools.partial(run_diagnosis, tracer=sampled_out.get_tracer("bench")),
    }
    calls = sum(run_case(c, model).result.usage.tool_invocations for c in CASES)

    def every_case(loop: AgentLoop | None) -> Callable[[], None]:
        def run() -> None:
            for c in CASES:
                run_case(c, model) if loop is None else run_case(c, model, loop=loop)

        return run

    for loop in loops.values():  # warm-up
        every_case(loop)()
    # Interleaved rounds, each starting with the next variant (a variant always measured after another would carry
    # the machine's drift within a round as a bias); best of each, and the median of each round's ratio to the
    # no-tracer repeat of the same round (the steadier figure on a shared machine).
    names = list(loops)
    rounds: list[dict[str, tuple[float, float]]] = []
    for r in range(rounds_n):
        order = names[r % len(names) :] + names[: r % len(names)]
        rounds.append({name: _timed(every_case(loops[name])) for name in order})
    best = {name: (min(r[name][0] for r in rounds), min(r[name][1] for r in rounds)) for name in loops}
    where = "the openai SDK over HTTP to serve-sim" if model is not None else "the scripted model in process"
    print(f"{len(CASES)} cases, {calls} tool calls per repeat, {where}, {rounds_n} interleaved rounds, the first"
          " variant rotating")  # fmt: skip
    base_wall, base_cpu = best["no tracer"]
    for name, (wall, cpu) in best.items():
        wall_r = sorted(r[name][0] / r["no tracer"][0] for r in rounds)
        cpu_r = sorted(r[name][1] / r["no tracer"][1] for r in rounds)
        print(f"{name:12s} {wall / calls * 1e6:7.1f} µs wall, {cpu / calls * 1e6:7.1f} µs CPU per tool call (best);"
              f"  ratio to no tracer, best: wall {wall / base_wall:.3f}, CPU {cpu / base_cpu:.3f};"
              f"  per round, median [min, max]: wall {statistics.median(wall_r):.3f} [{wall_r[0]:.3f},"
              f" {wall_r[-1]:.3f}], CPU {statistics.median(cpu_r):.3f} [{cpu_r[0]:.3f}, {cpu_r[-1]:.3f}]")  # fmt: skip
    spans, events = _span_counts(model)
    floor = _sdk_floor(spans / calls, events / calls)
    print(f"SDK floor    {floor:7.1f} µs per tool call ({spans / calls:.1f} bare spans and {events / calls:.1f} span"
          f" events per tool call, no mapping): {floor / (base_wall / calls * 1e6):.3f} of the loop's time per tool"
          " call without a tracer — what any recorder on this SDK adds at least")  # fmt: skip


def _span_counts(model: ChatModel | None) -> tuple[int, int]:
    """Spans and span events one round over every case makes (counted by an in-memory exporter)."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    counting = TracerProvider()
    counting.add_span_processor(SimpleSpanProcessor(memory))
    loop = functools.partial(run_diagnosis, tracer=counting.get_tracer("count"))
    for c in CASES:
        run_case(c, model, loop=loop)
    finished = memory.get_finished_spans()
    return len(finished), sum(len(s.events) for s in finished)


if __name__ == "__main__":
    main()
