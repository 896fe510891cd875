"""An import's reading of a trace holds the traces begun and not yet whole, never the file: the peak of the memory
Python allocates while every run of a trace file is read (`stream_traces`, both its readings) stays within a small
factor when the file holds ten times the spans. (`benchmarks/bench_import.py` measures the whole import, its
resident memory and time, on larger files.)"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from runners.interchange.otel_import import stream_traces

PAYLOAD = "x" * 8000
"""An attribute the reader does not use, so that a span weighs what a span with message contents weighs."""


def _span(trace: str, span: str, parent: str, op: str, n: int) -> dict[str, object]:
    attrs = [{"key": "gen_ai.operation.name", "value": {"stringValue": op}},
             {"key": "app.payload", "value": {"stringValue": PAYLOAD}}]  # fmt: skip
    if op == "execute_tool":
        attrs.append({"key": "gen_ai.tool.name", "value": {"stringValue": "logs"}})
    elif op == "invoke_agent":
        attrs.append({"key": "gen_ai.conversation.id", "value": {"stringValue": f"run-{trace}"}})
    return {"traceId": trace, "spanId": span, "parentSpanId": parent, "name": op,
            "startTimeUnixNano": str(1000 + n), "endTimeUnixNano": str(10_000 - n), "attributes": attrs}  # fmt: skip


def _trace_file(path: Path, traces: int) -> Path:
    """`traces` runs of another agent, a trace per line as an exporter writes them: 5 spans each."""
    with path.open("w", encoding="utf-8") as f:
        for t in range(traces):
            trace, root = f"{t:032x}", f"{t:016x}"
            spans = [_span(trace, f"{t:012x}{k:04x}", root, op, k)
                     for k, op in enumerate(("chat", "execute_tool", "chat", "execute_tool"), 1)]  # fmt: skip
            spans.append(_span(trace, root, "", "invoke_agent", 0))
            f.write(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}) + "\n")
    return path


def _peak(path: Path) -> tuple[int, int]:
    """The runs read, and the peak of what Python allocated reading them."""
    tracemalloc.start()
    try:
        runs = sum(1 for _ in stream_traces(path))
        return runs, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("memory")
    return _trace_file(folder / "small.jsonl", 60), _trace_file(folder / "large.jsonl", 600)


def test_reading_ten_times_the_spans_takes_about_the_same_memory(
    files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from runners.interchange import _json_stream

    monkeypatch.setattr(_json_stream, "_CHUNK", 64 * 1024)  # the window smaller than the small file, as in use
    small, large = files
    sum(1 for _ in stream_traces(small))  # the modules and caches a first reading fills, out of the figures
    runs_small, peak_small = _peak(small)
    runs_large, peak_large = _peak(large)
    assert (runs_small, runs_large) == (60, 600)
    assert large.stat().st_size > 20 * peak_large, "reading holds a small part of the file"
    # what grows is a few hundred bytes a run (its id, kept to refuse a second run under it), not its spans
    assert peak_large < 2 * peak_small, (peak_small, peak_large)
