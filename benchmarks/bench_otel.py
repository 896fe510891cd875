"""Benchmark: what OpenTelemetry spans add to the native loop's time per tool call — every built-in case run by
`run_diagnosis` (scripted model) without a tracer, and with an SDK TracerProvider whose spans go to an exporter
that drops them (so the figure is the Harness's mapping plus the SDK, not an exporter's I/O). Prints ratios."""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from benchmarks._timing import measure
from harness.agent import run_diagnosis
from runners.domain.evalset import load_cases
from runners.run.case_runner import run_case

CASES = load_cases()


class DropExporter(SpanExporter):
    """Accepts every span and keeps none."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def main() -> None:
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(DropExporter()))  # what a service configures
    traced = functools.partial(run_diagnosis, tracer=provider.get_tracer("bench"))
    calls = sum(run_case(c).result.usage.tool_invocations for c in CASES)

    def plain() -> None:
        for c in CASES:
            run_case(c)

    def with_tracer() -> None:
        for c in CASES:
            run_case(c, loop=traced)

    # interleaved rounds, best of each: a shared machine's noise is one-sided (it only ever slows a repeat)
    rounds = [(measure(plain, repeats=1, warmup=0), measure(with_tracer, repeats=1, warmup=0)) for _ in range(9)]
    a = min((r[0] for r in rounds), key=lambda t: t.median)
    b = min((r[1] for r in rounds), key=lambda t: t.median)
    print(f"{len(CASES)} cases, {calls} tool calls per repeat")
    print(f"no tracer:   {a.median / calls * 1e6:.1f} µs per tool call  best of 9")
    print(f"with tracer: {b.median / calls * 1e6:.1f} µs per tool call  best of 9")
    print(f"ratio with/without (best of 9 each): {b.median / a.median:.3f}")


if __name__ == "__main__":
    main()
