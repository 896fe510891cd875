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
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

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
    # interleaved rounds, best of each: a shared machine's noise is one-sided (it only ever slows a repeat)
    rounds = [{name: _timed(every_case(loop)) for name, loop in loops.items()} for _ in range(rounds_n)]
    best = {name: (min(r[name][0] for r in rounds), min(r[name][1] for r in rounds)) for name in loops}
    where = "the openai SDK over HTTP to serve-sim" if model is not None else "the scripted model in process"
    print(f"{len(CASES)} cases, {calls} tool calls per repeat, {where}, best of {rounds_n} interleaved rounds")
    base_wall, base_cpu = best["no tracer"]
    for name, (wall, cpu) in best.items():
        print(f"{name:12s} {wall / calls * 1e6:7.1f} µs wall, {cpu / calls * 1e6:7.1f} µs CPU per tool call;"
              f"  ratio to no tracer: wall {wall / base_wall:.3f}, CPU {cpu / base_cpu:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
