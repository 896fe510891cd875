"""Benchmark: what OpenTelemetry spans add to the native loop's time per tool call — every built-in case run by
`run_diagnosis` (scripted model) without a tracer, and with an SDK TracerProvider whose spans go to an exporter
that drops them (so the figure is the Harness's mapping plus the SDK, not an exporter's I/O), and with a tracer whose
sampler drops every run (the SDK's non-recording path: what a service sampling a share of its runs pays for the
others). Prints wall-time and CPU-time ratios (the process's CPU time, the span processor's thread included, is the
steadier measure on a shared machine).

`--over-http` runs the same native loop as a user deploys it: the real `openai` SDK over HTTP to a model endpoint
(serve-sim, the scripted trajectories served by another process on 127.0.0.1, 0 ms of model latency: the cheapest
endpoint there is, so the ratio is the least favourable a real deployment can see); `--model-latency-ms MS` makes
serve-sim hold each answer MS ms, a model that answers that fast.

`--live` runs the native loop on a real model: the live check's cases on Qwen2.5-Coder 0.5B Instruct served by
llama.cpp's server on 127.0.0.1 (`make live`'s cached wheel and weights; one thread). Each case runs once untimed
(the server keeps a slot's last prompt: that run leaves the cache as each timed run leaves it for the next, so
neither variant gains from going second), then without and with the recording tracer in alternating order. The case
is the unit: each case's ratio of time per tool call with / without the tracer, their mean and its 95% t interval. At
temperature 0 the two runs of a case make the same calls (checked: a pair that differs is left out and counted)."""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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
    """Accepts every span and keeps none (it counts them: a traced run that recorded nothing would prove nothing)."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
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
    parser.add_argument("--model-latency-ms", type=float, default=0.0, metavar="MS",
                        help="--over-http: serve-sim holds each answer MS ms (default 0)")  # fmt: skip
    parser.add_argument("--live", action="store_true", help="a real model served by llama.cpp (see above)")
    parser.add_argument("--cases", type=int, default=None, help="--live: the live check's first N cases (default 8)")
    args = parser.parse_args()
    # a flag its mode does not read would be measured as if it had been: refused, one line, exit 2
    if args.model_latency_ms and not args.over_http:
        parser.error("--model-latency-ms needs --over-http")
    if args.live and args.over_http:
        parser.error("--live and --over-http are two loops: choose one")
    if args.cases is not None and not args.live:
        parser.error("--cases needs --live")
    cases = 8 if args.cases is None else args.cases
    if args.rounds < 1 or cases < 1 or args.model_latency_ms < 0:
        parser.error("--rounds and --cases must be at least 1, --model-latency-ms at least 0")
    if args.live:
        _measure_live(cases, args.rounds)
        return
    sim: subprocess.Popen[str] | None = None
    model: ChatModel | None = None
    if args.over_http:
        sim, base_url = start_simulator(latency_ms=args.model_latency_ms)
        os.environ.setdefault("OPENAI_API_KEY", "sk-bench-local")
        model = OpenAIChatModel("scripted", base_url=base_url)
    try:
        _measure(model, args.rounds, args.model_latency_ms)
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


def _measure(model: ChatModel | None, rounds_n: int, latency_ms: float = 0.0) -> None:
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
    where = (f"the openai SDK over HTTP to serve-sim ({latency_ms:g} ms per model call)" if model is not None
             else "the scripted model in process")  # fmt: skip
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


@dataclass(frozen=True, slots=True)
class PairedCase:
    """One case's timed live runs, its kept rounds pooled."""

    untraced_s: float
    """Seconds of its runs without a tracer."""
    traced_s: float
    """Seconds of its runs with the recording tracer."""
    tool_calls: int
    """Tool calls of its untraced runs (the traced ones made the same)."""


def _measure_live(n_cases: int, rounds_n: int) -> None:
    """Paired per case: the time per tool call with the recording tracer over the time without, on a real model."""
    import tempfile

    from harness.config import HarnessConfig
    from runners.live.cases import DEFAULT_CASES
    from runners.live.main import set_up_server
    from runners.live.models import QWEN25_CODER_05B as LIVE
    from runners.live.server import SetupError, llama_dir

    provider = TracerProvider()
    exporter = DropExporter()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    traced = functools.partial(run_diagnosis, tracer=provider.get_tracer("bench"))
    # no deadline cut: a run's calls are the model's alone, the same in both variants
    config = HarnessConfig(deadline_seconds=3600, model_timeout_seconds=600)
    by_id = {c.id: c for c in CASES}
    cases = [by_id[i] for i in DEFAULT_CASES[:n_cases]]
    try:
        server = set_up_server(llama_dir(), Path(tempfile.gettempdir()) / "bench-otel-live-server.log", LIVE)
    except SetupError as exc:
        raise SystemExit(f"error: the {LIVE.name} server could not be set up: {exc}") from None
    try:
        os.environ.setdefault("OPENAI_API_KEY", "sk-bench-local")
        r = LIVE.request
        model = OpenAIChatModel(LIVE.name, base_url=f"{server.root}/v1", timeout_seconds=600,
                                tool_choice=r.tool_choice, tool_call_format=r.tool_call_format,
                                temperature=r.temperature)  # fmt: skip
        per_case: list[PairedCase] = []
        differing = 0
        for k, case in enumerate(cases):
            # the server keeps the last prompt of a slot: a first, untimed run leaves the cache as each timed run
            # will leave it for the next, so neither variant gains from going second
            run_case(case, model, config=config)
            kept = PairedCase(0.0, 0.0, 0)
            for r_i in range(rounds_n):
                order = ["no tracer", "with tracer"][:: 1 if (k + r_i) % 2 == 0 else -1]
                timed: dict[str, tuple[float, int, list[str]]] = {}
                for name in order:
                    t = time.perf_counter()
                    run = (run_case(case, model, config=config) if name == "no tracer"
                           else run_case(case, model, config=config, loop=traced))  # fmt: skip
                    wall = time.perf_counter() - t
                    kinds = [type(e).__name__ for e in run.result.events]
                    timed[name] = (wall, run.result.usage.tool_invocations, kinds)
                (w0, n0, k0), (w1, n1, k1) = timed["no tracer"], timed["with tracer"]
                if k0 != k1 or n0 == 0:
                    differing += 1
                    why = "the two runs differ" if k0 != k1 else "no tool call"
                    print(f"{case.id} round {r_i + 1}: left out ({why})")
                    continue
                kept = PairedCase(kept.untraced_s + w0, kept.traced_s + w1, kept.tool_calls + n0)
                print(f"{case.id} round {r_i + 1}: {n0} tool calls, {w0 / n0:.2f} s → {w1 / n1:.2f} s per tool call"
                      f" (ratio {w1 / w0:.3f})", flush=True)  # fmt: skip
            if kept.tool_calls:
                per_case.append(kept)
    finally:
        server.stop()
        provider.shutdown()
    print(f"the traced runs recorded {exporter.spans} spans")
    _live_summary(per_case, differing, LIVE.name)


def _live_summary(per_case: Sequence[PairedCase], differing: int, model: str) -> None:
    """The case is the unit: each case's ratio of time per tool call with / without the tracer (its rounds pooled),
    their mean with a 95% t interval, and what the tracer added per tool call."""
    from scipy import stats

    if len(per_case) < 2:
        print(f"too few cases with paired runs ({len(per_case)}; {differing} pairs left out)")
        return
    ratios = [c.traced_s / c.untraced_s for c in per_case]
    added_ms = [(c.traced_s - c.untraced_s) / c.tool_calls * 1e3 for c in per_case]
    ci = stats.ttest_1samp(ratios, 1.0).confidence_interval(0.95)
    w0, w1 = sum(c.untraced_s for c in per_case), sum(c.traced_s for c in per_case)
    n = sum(c.tool_calls for c in per_case)
    print(f"{len(per_case)} cases on {model} ({differing} pairs left out), {n} tool calls each way:"
          f" {w0 / n:.2f} s per tool call without a tracer, {w1 / n:.2f} s with one. Ratio with/without per case:"
          f" mean {statistics.mean(ratios):.4f} (95% t interval {ci.low:.4f}–{ci.high:.4f}), range"
          f" {min(ratios):.4f}–{max(ratios):.4f}; added per tool call: median {statistics.median(added_ms):+.0f} ms"
          " (the model's speed varies from call to call far more than that)")  # fmt: skip


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
