"""`harness-bench export --otel FILE.jsonl | --otlp-endpoint URL`: stored case runs as OpenTelemetry GenAI spans.

Built-in cases are run by the bench (scripted, into a temporary DuckDB) with the library's live tracer attached to
every case run (`HarnessSession(tracer=...)`, through the bench's agent loop). Then:

- the file holds one OTLP/JSON `ExportTraceServiceRequest` per line, read back into the protobuf message; per case
  run one `invoke_agent` span with its `chat` and `execute_tool` children, as many as `case_runs` counts, its
  rejections as span events, its verdict as `gen_ai.evaluation.result` events;
- the spans exported from the stored events equal the spans the live tracer emitted for the same case runs: span
  names, kinds, statuses, every attribute, the parent links and every span event's name and attributes. Not
  compared: times and ids (the export dates a run from its stored end), `gen_ai.conversation.id` (the case run id
  here, the run's own uuid live) and the evaluation events (only the bench has a verdict);
- `--otlp-endpoint` delivers the same spans (times included) to an OTLP/HTTP server this test runs on 127.0.0.1;
  a refused endpoint, and an output naming the database, are one line and exit 2.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import shutil
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai

import runners.run._execute as execute
from harness.agent import run_diagnosis
from harness.otel import EVALUATION_EVENT
from runners.cli import main
from runners.domain.evalset import load_cases
from runners.endpoints._serving import STOP_POLL_S
from runners.interchange.otel_export import SERVICE_NAME, parse_otlp_json
from tests._db import open_read_only

CASES = [c.id for c in load_cases()[::6]]
THRESHOLD = "3"  # not the default: the limits on the run span must come from the stored settings


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[ExportTraceServiceRequest]]]:
    """A bench run of CASES, every case run traced live; returns the database and the live spans, encoded."""
    db = tmp_path_factory.mktemp("otel") / "bench.duckdb"
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    traced = functools.partial(run_diagnosis, tracer=provider.get_tracer("live"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(execute, "loop_for", lambda agent: traced)
        argv = ["run", "--db", str(db), "--label", "base", "--no-gain-threshold", THRESHOLD]
        assert main([*argv, *(a for c in CASES for a in ("--case", c))]) == 0
    spans = exporter.get_finished_spans()
    by_trace: dict[int, list[Any]] = {}
    for s in spans:
        by_trace.setdefault(s.context.trace_id, []).append(s)
    yield db, [encode_spans(group) for group in by_trace.values()]


def _spans(request: ExportTraceServiceRequest) -> list[PbSpan]:
    return [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]


def _attrs(message: Any) -> dict[str, Any]:
    return {a["key"]: a["value"] for a in MessageToDict(message).get("attributes", [])}


def _tree(request: ExportTraceServiceRequest, *, times: bool = False) -> str:
    """One trace as comparable text: the root, then its children in trace order, each with its parent named by
    its position; ids left out, times only when asked for; the conversation id and evaluation events left out
    unless times are compared (two exports of one database)."""
    spans = _spans(request)
    index = {s.span_id: i for i, s in enumerate(sorted(spans, key=lambda s: (s.parent_span_id != b"", _seq(s))))}
    out = []
    for s in sorted(spans, key=lambda s: index[s.span_id]):
        attrs = _attrs(s)
        events = [(e.name, _attrs(e), e.time_unix_nano if times else 0) for e in s.events]
        if not times:
            attrs.pop(gen_ai.GEN_AI_CONVERSATION_ID, None)
            events = [e for e in events if e[0] != EVALUATION_EVENT]
        out.append({
            "name": s.name, "kind": s.kind, "parent": index.get(s.parent_span_id), "status": s.status.code,
            "attributes": attrs, "events": events,
            "times": (s.start_time_unix_nano, s.end_time_unix_nano) if times else None,
        })  # fmt: skip
    return json.dumps(out, sort_keys=True)


def _seq(span: PbSpan) -> int:
    return int(_attrs(span).get("harness.seq", {}).get("intValue", -1))


def _export_file(db: Path, out: Path, *extra: str) -> list[ExportTraceServiceRequest]:
    assert main(["export", "--db", str(db), "--otel", str(out), *extra]) == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    for line in lines:  # OTLP/JSON: hex ids, not protobuf JSON's base64
        for span in (s for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]):
            assert len(span["traceId"]) == 32 and len(span["spanId"]) == 16, span
            int(span["traceId"], 16), int(span["spanId"], 16)
    return [parse_otlp_json(line) for line in lines]


def _case_runs(db: Path) -> dict[str, dict[str, Any]]:
    con = open_read_only(db)
    try:
        cur = con.execute("SELECT * FROM case_runs")
        names = [d[0] for d in cur.description]
        return {r[1]: dict(zip(names, r, strict=True)) for r in cur.fetchall()}
    finally:
        con.close()


def test_one_trace_per_case_run_with_its_counts_rejections_and_verdict(
    bench: tuple[Path, list[ExportTraceServiceRequest]], tmp_path: Path
) -> None:
    db, _ = bench
    requests = _export_file(db, tmp_path / "spans.jsonl")
    rows = _case_runs(db)
    assert len(requests) == len(rows) == len(CASES)
    seen = set()
    for request in requests:
        (resource,) = [rs.resource for rs in request.resource_spans]
        assert _attrs(resource)["service.name"] == {"stringValue": SERVICE_NAME}
        spans = _spans(request)
        roots = [s for s in spans if not s.parent_span_id]
        assert len(roots) == 1 and roots[0].name == "invoke_agent harness-diagnosis"
        root = roots[0]
        assert all(s.parent_span_id == root.span_id and s.trace_id == root.trace_id for s in spans if s is not root)
        ra = _attrs(root)
        row = rows[ra[gen_ai.GEN_AI_CONVERSATION_ID]["stringValue"]]
        seen.add(row["case_run_id"])
        chats = [s for s in spans if s.name.startswith("chat ")]
        tools = [s for s in spans if s.name.startswith("execute_tool ")]
        assert len(chats) == row["model_calls"] + row["guard_calls"]
        assert len(tools) == row["tool_invocations"]
        assert len(spans) == 1 + len(chats) + len(tools)
        assert sum(_attrs(s)["harness.semantic_guard"]["boolValue"] for s in chats) == row["guard_calls"]
        names = Counter(e.name for e in root.events)
        assert names["harness.tool_request_rejected"] == row["tool_rejections"]
        assert ra["harness.outcome"] == {"stringValue": row["outcome"]}
        assert ra["harness.config.no_gain_threshold"] == {"intValue": THRESHOLD}
        evaluations = {_attrs(e)[gen_ai.GEN_AI_EVALUATION_NAME]["stringValue"]: _attrs(e)
                       for e in root.events if e.name == EVALUATION_EVENT}  # fmt: skip
        assert set(evaluations) == {"passed", "outcome", "stop_reason"}
        passed = evaluations["passed"]
        assert passed[gen_ai.GEN_AI_EVALUATION_SCORE_LABEL]["stringValue"] == ("pass" if row["passed"] else "fail")
        assert passed[gen_ai.GEN_AI_EVALUATION_SCORE_VALUE]["doubleValue"] == (1.0 if row["passed"] else 0.0)
        outcome = evaluations["outcome"]
        assert outcome[gen_ai.GEN_AI_EVALUATION_SCORE_LABEL]["stringValue"].split("/")[0] == row["outcome"]
        assert row["expected_outcome"] in outcome[gen_ai.GEN_AI_EVALUATION_EXPLANATION]["stringValue"]
    assert seen == set(rows)
    # the selection exercises what is checked: rejections, the SemanticGuard, more than one outcome
    assert sum(r["tool_rejections"] for r in rows.values()) > 0
    assert sum(r["guard_calls"] for r in rows.values()) > 0
    assert len({r["outcome"] for r in rows.values()}) > 1


def test_exported_spans_equal_the_live_tracers_for_the_same_case_runs(
    bench: tuple[Path, list[ExportTraceServiceRequest]], tmp_path: Path
) -> None:
    db, live = bench
    exported = _export_file(db, tmp_path / "spans.jsonl")
    assert len(live) == len(exported) == len(CASES)
    assert sorted(_tree(r) for r in exported) == sorted(_tree(r) for r in live)


def test_the_comparison_bites_on_a_changed_stored_event(
    bench: tuple[Path, list[ExportTraceServiceRequest]], tmp_path: Path
) -> None:
    """One stored event field changed (a scope, a gain, a model call's tokens): the export no longer equals the
    live spans, so the equality above is read from the stored rows, not assumed."""
    db, live = bench
    wanted = sorted(_tree(r) for r in live)
    for change in (
        "UPDATE events SET scope = 'changed' WHERE kind = 'TOOL_INVOCATION'",
        "UPDATE events SET gain = 'NO_GAIN' WHERE kind = 'GAIN_APPLIED' AND gain = 'GAINED'",
        "UPDATE events SET input_tokens = input_tokens + 1 WHERE kind = 'MODEL_CALL'",
        "UPDATE bench_runs SET settings_json = NULL",  # the limits: the defaults of a legacy row, not the run's
    ):
        copy = tmp_path / "copy.duckdb"
        shutil.copy(db, copy)
        con = duckdb.connect(str(copy))
        con.execute(change)
        con.close()
        assert sorted(_tree(r) for r in _export_file(copy, tmp_path / "changed.jsonl")) != wanted, change


def test_message_contents_only_with_otel_content(
    bench: tuple[Path, list[ExportTraceServiceRequest]], tmp_path: Path
) -> None:
    db, _ = bench
    plain = _export_file(db, tmp_path / "plain.jsonl")
    keys = {k for r in plain for s in _spans(r) for k in _attrs(s)}
    assert gen_ai.GEN_AI_INPUT_MESSAGES not in keys and gen_ai.GEN_AI_OUTPUT_MESSAGES not in keys
    with_content = _export_file(db, tmp_path / "content.jsonl", "--otel-content")
    first = next(s for s in _spans(with_content[0]) if s.name.startswith("chat ") and _seq(s) == 1)
    messages = json.loads(_attrs(first)[gen_ai.GEN_AI_INPUT_MESSAGES]["stringValue"])
    assert [m["role"] for m in messages[:2]] == ["system", "user"]
    assert "diagnosis" in messages[0]["parts"][0]["content"]
    assert json.loads(_attrs(first)[gen_ai.GEN_AI_OUTPUT_MESSAGES]["stringValue"])[0]["role"] == "assistant"


# -- OTLP/HTTP --------------------------------------------------------------------------------------------------
class _Collector(http.server.ThreadingHTTPServer):
    """An OTLP/HTTP traces endpoint: every POST body decoded as an ExportTraceServiceRequest and kept (each answered
    after `delay` seconds)."""

    def __init__(self, delay: float = 0.0) -> None:
        self.received: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        self.first: float | None = None
        """When the first request arrived (monotonic)."""
        collector = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                collector.first = collector.first or time.monotonic()
                time.sleep(delay)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                collector.received.append(request)
                collector.paths.append(self.path)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up waiting (its deadline passed) is no error of the endpoint's: nothing printed."""


@pytest.fixture
def collector() -> Iterator[_Collector]:
    server = _Collector()
    thread = threading.Thread(target=server.serve_forever, args=(STOP_POLL_S,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _by_trace(requests: list[ExportTraceServiceRequest]) -> list[str]:
    """Every span received, regrouped one request per trace (a batch processor mixes traces in a request)."""
    groups: dict[bytes, ExportTraceServiceRequest] = {}
    for request in requests:
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    group = groups.setdefault(span.trace_id, ExportTraceServiceRequest())
                    if not group.resource_spans:
                        group.resource_spans.add().scope_spans.add()
                    group.resource_spans[0].scope_spans[0].spans.append(span)
    return sorted(_tree(r, times=True) for r in groups.values())


def test_the_endpoint_receives_the_same_spans_as_the_file(
    bench: tuple[Path, list[ExportTraceServiceRequest]], tmp_path: Path, collector: _Collector,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    db, _ = bench
    url = f"http://127.0.0.1:{collector.server_address[1]}/v1/traces"
    capsys.readouterr()
    assert main(["export", "--db", str(db), "--otlp-endpoint", url]) == 0
    out = capsys.readouterr().out
    assert f"sent {len(CASES)} case runs" in out and url in out
    assert collector.received and set(collector.paths) == {"/v1/traces"}
    assert _by_trace(collector.received) == _by_trace(_export_file(db, tmp_path / "spans.jsonl"))


def test_a_refused_endpoint_is_one_line_and_exit_2(
    bench: tuple[Path, list[ExportTraceServiceRequest]], capsys: pytest.CaptureFixture[str]
) -> None:
    db, _ = bench
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    capsys.readouterr()
    url = f"http://127.0.0.1:{port}/v1/traces"
    assert main(["export", "--db", str(db), "--otlp-endpoint", url, "--otlp-timeout", "1"]) == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1 and "--otlp-endpoint" in lines[0] and "not accepted" in lines[0], captured.err
    assert "Traceback" not in captured.err and captured.out == ""


def test_otlp_timeout_is_one_deadline_for_the_whole_export(
    bench: tuple[Path, list[ExportTraceServiceRequest]], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Many requests (two spans each here) to an endpoint that takes 0.3 s to accept each: each well within
    --otlp-timeout 1, all of them far past it. The export stops about a second after its first request, saying
    so, instead of taking that long per request."""
    from runners.interchange import otel_export

    db, _ = bench
    monkeypatch.setattr(otel_export, "_BATCH_SPANS", 2)
    slow = _Collector(delay=0.3)
    thread = threading.Thread(target=slow.serve_forever, args=(STOP_POLL_S,), daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{slow.server_address[1]}/v1/traces"
        capsys.readouterr()
        assert main(["export", "--db", str(db), "--otlp-endpoint", url, "--otlp-timeout", "1"]) == 2
        ended = time.monotonic()
    finally:
        slow.shutdown()
        slow.server_close()
    assert slow.first is not None and slow.received, "requests were made, some accepted"
    assert ended - slow.first < 4.0, f"{ended - slow.first:.1f} s after the first request, for --otlp-timeout 1"
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--otlp-timeout 1 s passed before" in err and "spans not accepted" in err, err


@pytest.mark.parametrize("port", ["99999", "0", "abc", "65536"])
def test_an_endpoint_port_out_of_range_is_refused_before_anything_runs(
    bench: tuple[Path, list[ExportTraceServiceRequest]], port: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db, _ = bench
    capsys.readouterr()
    assert main(["export", "--db", str(db), "--otlp-endpoint", f"http://127.0.0.1:{port}/v1/traces"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"port '{port}'" in err and "1 to 65535" in err, err


@pytest.mark.parametrize("url", ["127.0.0.1:4318/v1/traces", "ftp://127.0.0.1/x", "http://"])
def test_an_endpoint_that_is_no_http_url_is_refused(
    bench: tuple[Path, list[ExportTraceServiceRequest]], url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db, _ = bench
    capsys.readouterr()
    assert main(["export", "--db", str(db), "--otlp-endpoint", url]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--otlp-endpoint" in err, err


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_an_otel_file_naming_the_database_is_refused_and_the_database_unchanged(
    bench: tuple[Path, list[ExportTraceServiceRequest]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = Path(shutil.copy(bench[0], tmp_path / "db.duckdb"))
    (tmp_path / "alias.jsonl").symlink_to(db.name)
    digest = _sha(db)
    for out in (db, tmp_path / "alias.jsonl", tmp_path / "." / "db.duckdb"):
        capsys.readouterr()
        assert main(["export", "--db", str(db), "--otel", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "--otel" in err and "--db" in err, err
        assert _sha(db) == digest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alias.jsonl", "db.duckdb"]


def test_nothing_selected_is_one_line_and_no_file(
    bench: tuple[Path, list[ExportTraceServiceRequest]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, _ = bench
    capsys.readouterr()
    assert main(["export", "--db", str(db), "--otel", str(tmp_path / "x.jsonl"), "--label", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "nope" in err, err
    assert not (tmp_path / "x.jsonl").exists()


def test_every_text_exported_is_redacted(
    bench: tuple[Path, list[ExportTraceServiceRequest]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database holding secrets (written before the bench redacted, or by hand): the run's key (from its stored
    key variable), a URL's user info and a key-shaped text reach neither the file nor the endpoint's spans."""
    key = "Zq7CanaryKeyValue42x"
    monkeypatch.setenv("OPENAI_API_KEY", key)  # the stored runs' key variable (the default)
    db = Path(shutil.copy(bench[0], tmp_path / "db.duckdb"))
    con = duckdb.connect(str(db))
    planted = f"key {key} at http://user1:S3kretPw99@host/v1 and sk-abcdefghijklmnopqrstuvwx"
    con.execute("UPDATE events SET detail = ?, scope = ? WHERE kind IN ('TOOL_INVOCATION', 'RELEASED')",
                [planted, planted])  # fmt: skip
    con.execute("UPDATE messages SET content = ? || content WHERE kind IN ('OBSERVATION', 'ASSISTANT')", [planted])
    con.execute("UPDATE messages SET arguments = ? WHERE kind = 'TOOL_CALL'", [planted])
    con.execute("UPDATE prompts SET content = ? || content", [planted])  # the system and user prompts
    con.execute("UPDATE case_runs SET failures = ?", [json.dumps([planted])])
    con.close()
    _export_file(db, tmp_path / "spans.jsonl", "--otel-content")
    text = (tmp_path / "spans.jsonl").read_text(encoding="utf-8")
    assert "[REDACTED]" in text
    for needle in (key, "S3kretPw99", "user1", "sk-abcdefghijklmnopqrstuvwx"):
        assert needle not in text, needle


def test_an_interrupted_export_leaves_the_file_as_it_was(
    bench: tuple[Path, list[ExportTraceServiceRequest]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Ctrl-C after some lines are written: the file keeps its old bytes and no temporary file is left."""
    import runners.interchange.otel_export as otel_export

    out = tmp_path / "spans.jsonl"
    out.write_text("before\n")
    encode = otel_export._otlp_json
    calls = []

    def interrupted(spans: Any) -> str:
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return encode(spans)

    monkeypatch.setattr(otel_export, "_otlp_json", interrupted)
    assert main(["export", "--db", str(bench[0]), "--otel", str(out)]) == 130
    assert "interrupted" in capsys.readouterr().err
    assert out.read_text() == "before\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spans.jsonl"]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ("UPDATE events SET kind = 'BOGUS' WHERE kind = 'GAIN_APPLIED'", "unknown kind 'BOGUS'"),
        ("UPDATE events SET purpose = 'NOT_A_PURPOSE' WHERE kind = 'MODEL_CALL'", "purpose"),
        ("UPDATE events SET tool = NULL WHERE kind = 'TOOL_INVOCATION'", "tool"),
        (
            "DELETE FROM events WHERE kind = 'RELEASED' AND case_run_id = (SELECT min(case_run_id) FROM events)",
            "RELEASED",
        ),
        ("DELETE FROM events WHERE case_run_id = (SELECT min(case_run_id) FROM events)", "RUN_STARTED"),
    ],
)
def test_a_stored_row_that_is_no_event_is_one_line_naming_it(
    bench: tuple[Path, list[ExportTraceServiceRequest]], tmp_path: Path, change: str, named: str,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    db = Path(shutil.copy(bench[0], tmp_path / "db.duckdb"))
    con = duckdb.connect(str(db))
    con.execute(change)
    con.close()
    capsys.readouterr()
    assert main(["export", "--db", str(db), "--otel", str(tmp_path / "x.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "case run " in err and named in err, err
    assert not (tmp_path / "x.jsonl").exists()


@pytest.mark.parametrize(
    "argv",
    [["--inspect", "logs", "--otel-content"], ["--otel", "x.jsonl", "--otlp-timeout", "1"],
     ["--otel", "x.jsonl", "--inspect", "logs"], []],
)  # fmt: skip
def test_flags_that_do_not_go_together_are_one_line(
    bench: tuple[Path, list[ExportTraceServiceRequest]], argv: list[str], tmp_path: Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["export", "--db", str(bench[0]), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("error: "), err
    assert list(tmp_path.iterdir()) == []
