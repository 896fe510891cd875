"""`harness-bench export --otel FILE.jsonl | --otlp-endpoint URL`: stored case runs as OpenTelemetry GenAI spans.

Each case run's stored events (`runners/store/events.py`, rebuilt as typed events) go through the one mapping the
library's live tracer uses (`harness.otel.SpanRecorder`): the same `invoke_agent` / `chat` / `execute_tool` spans,
`harness.*` attributes and span events. What only the bench knows is added: the run's limits from its bench run's
stored settings (`harness.config.*`), and its verdict — outcome, stop reason, pass and the expectations they were
held to — as `gen_ai.evaluation.result` events on the run's span. `gen_ai.conversation.id` is the case run id.
Message contents (from the stored transcript) only with `content=True`, as the conventions ask.

`--otel` writes one OTLP/JSON `ExportTraceServiceRequest` per case run per line (the OTLP file format, as the
Collector's file exporter writes it): the SDK's own protobuf encoder (`encode_spans`) and protobuf's JSON mapping,
with the two changes OTLP/JSON makes to that mapping — trace and span ids hex, not base64, and enums as integers
(`parse_otlp_json` reads a line back). `--otlp-endpoint` sends the same spans with the SDK's OTLP/HTTP exporter.
Every text goes through the bench's redaction (`runners/domain/redaction.py`) on its way out.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict, ParseDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.semconv.attributes.service_attributes import SERVICE_NAME as SERVICE_NAME_KEY
from opentelemetry.trace import Tracer

from harness import (
    EntryKind,
    Evaluation,
    ModelPurpose,
    Released,
    RunLimits,
    RunStarted,
    SpanRecorder,
    TraceEvent,
    TranscriptEntry,
    __version__,
)
from runners.domain.redaction import Secrets, redact

__all__ = [
    "OTLP_TIMEOUT_SECONDS",
    "SERVICE_NAME",
    "ExportSummary",
    "OtelExportError",
    "export_otel_file",
    "export_otlp_endpoint",
    "parse_otlp_json",
]

SERVICE_NAME = "harness-bench"
"""`service.name` of the exported spans' resource."""
OTLP_TIMEOUT_SECONDS = 10.0
"""How long an export to the endpoint may take, every request and retry included, unless told (the SDK exporter's
default for one request)."""
_ID_FIELDS = frozenset({"traceId", "spanId", "parentSpanId"})
"""The byte fields OTLP/JSON writes as hex (protobuf's JSON mapping would write base64)."""


class OtelExportError(ValueError):
    """Nothing to export, OpenTelemetry missing, or the endpoint did not take the spans (one line, exit 2)."""


@dataclass(frozen=True, slots=True)
class ExportSummary:
    """What an export sent."""

    case_runs: int
    """Case runs exported (one trace each)."""
    spans: int
    """Spans exported."""


@dataclass(frozen=True, slots=True)
class _CaseRun:
    """One stored case run, read whole before anything is exported."""

    case_run_id: str
    """Its id (`gen_ai.conversation.id`)."""
    events: tuple[TraceEvent, ...]
    """Its trace, redacted."""
    start_ns: int
    """When it started (epoch nanoseconds)."""
    limits: RunLimits | None
    """Its bench run's thresholds and budgets (None: the stored settings are unreadable)."""
    evaluations: tuple[Evaluation, ...]
    """Its verdict."""
    entries: tuple[TranscriptEntry, ...] | None
    """Its transcript (redacted), when contents are exported."""


def _redacted(event: TraceEvent, secrets: Secrets) -> TraceEvent:
    texts: dict[str, Any] = {}
    for f in dataclasses.fields(event):
        if isinstance(value := getattr(event, f.name), str):
            texts[f.name] = redact(value, secrets)
    return dataclasses.replace(event, **texts)


def _secrets(bench: dict[str, Any]) -> Secrets:
    settings = _settings(bench)
    if settings is None:
        return Secrets()
    return Secrets.of(settings.model_settings.base_url, settings.model_settings.api_key_env)


def _settings(bench: dict[str, Any]) -> Any:
    from runners.plan.settings import RunSettings, SettingsError, legacy_settings

    try:
        if bench.get("settings_json"):
            return RunSettings.from_json(bench["settings_json"])
        return legacy_settings(bench.get("config_json"), bench.get("model"), bench.get("base_url"))
    except (SettingsError, ValueError):
        return None


def _limits(bench: dict[str, Any]) -> RunLimits | None:
    settings = _settings(bench)
    return RunLimits.of(settings.config) if settings is not None else None


def _evaluations(row: dict[str, Any], secrets: Secrets) -> tuple[Evaluation, ...]:
    """The bench's verdict on a case run, as the expectations it was held to and what it did."""

    def joined(value: Any, kind: Any) -> str:
        return f"{value}/{kind}" if kind else str(value)

    failures = [redact(str(f), secrets) for f in json.loads(row["failures"])] if row.get("failures") else []
    expected_stop = row.get("expected_stop_reason")
    if row["passed"] is None:  # the bench's failure (runners/run/verdict.py): unjudged, no score
        passed = Evaluation("passed", "unjudged", None, "; ".join(failures) or "not judged")
    else:
        passed = Evaluation("passed", "pass" if row["passed"] else "fail", 1.0 if row["passed"] else 0.0,
                            "; ".join(failures) or "every expectation held")  # fmt: skip
    return (
        passed,
        Evaluation("outcome", joined(row["outcome"], row.get("fallback_kind")),
                   explanation=f"expected {joined(row['expected_outcome'], row.get('expected_fallback_kind'))}"),
        Evaluation("stop_reason", str(row.get("stop_reason") or "NONE"),
                   explanation=f"expected {expected_stop}" if expected_stop else "no stop reason expected"),
    )  # fmt: skip


def _start_ns(row: dict[str, Any], events: Sequence[TraceEvent]) -> int:
    """The case run's start: its stored end (`finished_at`, UTC) less its trace's length."""
    end = row.get("finished_at")
    if not isinstance(end, datetime):
        end = datetime.now(UTC)
    end = end if end.tzinfo else end.replace(tzinfo=UTC)
    end_ns = (end - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) * 1000
    return end_ns - int((events[-1].t_ms if events else 0.0) * 1e6)


def _entries(info: Any, secrets: Secrets) -> tuple[TranscriptEntry, ...]:
    kinds = {k.value for k in EntryKind}
    out = []
    for m in info.messages:
        if m.kind not in kinds:  # a guard verdict row: an event already
            continue
        content = redact(m.content, secrets) if m.content is not None else None
        arguments = m.get("arguments")
        out.append(TranscriptEntry(
            m.seq, ModelPurpose(m.purpose), EntryKind(m.kind), int(m.model_call or 0), content,
            tool_call_id=m.get("tool_call_id"), tool=m.get("tool"),
            arguments=redact(arguments, secrets) if arguments is not None else None,
            sent=m.get("sent") is not False, finish_reason=m.get("finish_reason"),
        ))  # fmt: skip
    return tuple(out)


def _read(db: Path, bench_run: str | None, label: str | None, content: bool) -> list[_CaseRun]:
    from runners.interchange.inspect_export import _bench_runs
    from runners.store.connection import connect
    from runners.store.events import read_bench_run_events
    from runners.store.report_reads import case_run_rows_of
    from runners.store.transcripts import load_case_runs

    con = connect(db, read_only=True)
    try:
        out = []
        for bench in _bench_runs(con, str(db), bench_run, label):
            secrets, limits = _secrets(bench), _limits(bench)
            stored = read_bench_run_events(con, str(db), bench["bench_run_id"])
            rows = [dict(r.columns) for r in case_run_rows_of(con, bench["bench_run_id"])]
            ids = [str(row["case_run_id"]) for row in rows]
            for case_run_id in ids:
                _check_whole(db, case_run_id, stored.get(case_run_id, ()))
            # every run's transcript read at once (a read per run was most of an export's time)
            infos = load_case_runs(con, str(db), ids) if content else None
            for n, (row, case_run_id) in enumerate(zip(rows, ids, strict=True)):
                events = tuple(_redacted(e, secrets) for e in stored.get(case_run_id, ()))
                entries = _entries(infos[n], secrets) if infos is not None else None
                out.append(_CaseRun(case_run_id, events, _start_ns(row, events), limits,
                                    _evaluations(row, secrets), entries))  # fmt: skip
    finally:
        con.close()
    if not out:
        raise OtelExportError(f"{db}: the selected bench runs hold no case runs")
    return out


def _check_whole(db: Path, case_run_id: str, events: Sequence[TraceEvent]) -> None:
    """A run's span starts at RUN_STARTED and ends at RELEASED: without either, a trace without its root."""
    if not events or not isinstance(events[0], RunStarted) or not isinstance(events[-1], Released):
        raise OtelExportError(
            f"{db}: case run {case_run_id}: its stored events do not run from RUN_STARTED to RELEASED"
            f" ({len(events)} events); nothing exported"
        )


def _content_of(entries: Sequence[TranscriptEntry]) -> Callable[[int], Sequence[TranscriptEntry]]:
    def content(call: int) -> list[TranscriptEntry]:
        return [e for e in entries if e.model_call == call]

    return content


def _provider(processor: SpanProcessor) -> TracerProvider:
    """A TracerProvider whose spans are all kept (no sampling, no count limits) with the bench's resource."""
    unlimited = SpanLimits(max_events=SpanLimits.UNSET, max_span_attributes=SpanLimits.UNSET,
                           max_event_attributes=SpanLimits.UNSET)  # fmt: skip
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME_KEY: SERVICE_NAME}), sampler=ALWAYS_ON,
                              span_limits=unlimited)  # fmt: skip
    provider.add_span_processor(processor)
    return provider


def _tracer(provider: TracerProvider) -> Tracer:
    return provider.get_tracer(SERVICE_NAME, __version__)


def _record(run: _CaseRun, tracer: Tracer) -> None:
    content = _content_of(run.entries) if run.entries is not None else None
    recorder = SpanRecorder(tracer, run_id=run.case_run_id, limits=run.limits, content=content,
                            evaluations=run.evaluations, start_ns=run.start_ns)  # fmt: skip
    for event in run.events:
        recorder(event)


# -- OTLP/JSON ------------------------------------------------------------------------------------
def _ids(value: Any, convert: Callable[[str], str]) -> Any:
    if isinstance(value, dict):
        return {k: convert(v) if k in _ID_FIELDS and isinstance(v, str) else _ids(v, convert) for k, v in value.items()}
    if isinstance(value, list):
        return [_ids(v, convert) for v in value]
    return value


def _otlp_json(spans: Sequence[ReadableSpan]) -> str:
    """One line of OTLP/JSON: the SDK's encoding of `spans`, in protobuf's JSON mapping with hex ids."""
    data = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    hexed = _ids(data, lambda b: base64.b64decode(b).hex())
    return json.dumps(hexed, ensure_ascii=False, separators=(",", ":"))


def parse_otlp_json(line: str) -> ExportTraceServiceRequest:
    """One OTLP/JSON line read back as an `ExportTraceServiceRequest` (hex ids turned back into bytes)."""
    data = _ids(json.loads(line), lambda h: base64.b64encode(bytes.fromhex(h)).decode())
    request = ExportTraceServiceRequest()
    ParseDict(data, request)
    return request


def export_otel_file(
    db: Path, out: Path, *, bench_run: str | None = None, label: str | None = None, content: bool = False
) -> ExportSummary:
    """Write the selected case runs to `out`, one OTLP/JSON request (one trace) per case run per line: the file
    whole or, on any error or interrupt, as it was (`/dev/stdout`: the lines written to stdout as they are made)."""
    from runners.store.output_files import NamedPath, check_outputs, opened_text

    output = NamedPath("--otel", out, stream=True)
    check_outputs([output], [NamedPath("--db", db)])
    runs = _read(db, bench_run, label, content)
    exporter = InMemorySpanExporter()
    provider = _provider(SimpleSpanProcessor(exporter))
    tracer = _tracer(provider)
    spans = 0
    try:
        with opened_text(output) as f:
            for run in runs:
                _record(run, tracer)
                finished = exporter.get_finished_spans()
                exporter.clear()
                spans += len(finished)
                f.write(_otlp_json(finished) + "\n")
    finally:
        provider.shutdown()
    return ExportSummary(len(runs), spans)


# -- OTLP/HTTP ------------------------------------------------------------------------------------
_BATCH_SPANS = 512
"""Spans per request to the endpoint (the SDK batch processor's own default batch size)."""


class _LastError(logging.Handler):
    """The OpenTelemetry SDK's own log lines while exporting, kept (not printed): the last says why a batch failed."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        self.last = record.getMessage().splitlines()[0] if record.getMessage() else None


@contextmanager
def _sdk_logs_kept() -> Iterator[_LastError]:
    logger = logging.getLogger("opentelemetry")
    handler = _LastError()
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def export_otlp_endpoint(
    db: Path, url: str, *, bench_run: str | None = None, label: str | None = None, content: bool = False,
    timeout: float | None = None,
) -> ExportSummary:  # fmt: skip
    """Send the selected case runs' spans to an OTLP/HTTP (protobuf) traces endpoint, `_BATCH_SPANS` per request;
    every span delivered, or an OtelExportError saying how many were not and why. `timeout`: seconds the whole
    export may take, every request and retry included (default `OTLP_TIMEOUT_SECONDS`): each request gets what is
    left of it, and none starts once it has passed."""
    import time

    from runners.domain.redaction import safe_url

    timeout = OTLP_TIMEOUT_SECONDS if timeout is None else timeout
    runs = _read(db, bench_run, label, content)
    deadline = time.monotonic() + timeout
    recorded = InMemorySpanExporter()
    provider = _provider(SimpleSpanProcessor(recorded))
    try:
        tracer = _tracer(provider)
        for run in runs:
            _record(run, tracer)
        spans = recorded.get_finished_spans()
    finally:
        provider.shutdown()
    sent = 0
    why: str | None = None
    with _sdk_logs_kept() as logs:
        for start in range(0, len(spans), _BATCH_SPANS):
            left = deadline - time.monotonic()
            if left <= 0:
                why = f"--otlp-timeout {timeout:g} s passed before they were sent"
                break
            batch = spans[start : start + _BATCH_SPANS]
            exporter: SpanExporter = OTLPSpanExporter(endpoint=url, timeout=left)
            try:
                result = exporter.export(batch)
            except Exception:  # the SDK logs and returns FAILURE for what it expects; anything else is a failure too
                result = SpanExportResult.FAILURE
            finally:
                exporter.shutdown()
            if result is not SpanExportResult.SUCCESS:
                if time.monotonic() >= deadline:  # the request ran out of the time left: the deadline is the cause
                    why = f"--otlp-timeout {timeout:g} s passed before they were accepted"
                else:
                    why = redact(logs.last) if logs.last else "the endpoint refused them"
                break
            sent += len(batch)
    if sent < len(spans):
        raise OtelExportError(
            f"--otlp-endpoint {safe_url(url)}: {len(spans) - sent} of {len(spans)} spans not accepted ({why});"
            " is an OTLP/HTTP traces endpoint listening there?"
        )
    return ExportSummary(len(runs), len(spans))
