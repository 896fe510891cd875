"""`harness-bench import` against hostile traces: what goes in never breaks anything.

- Every value is checked before the database is opened: a malformed message part, a boolean or a string where a
  count is due, a count past what BIGINT holds (or a sum past it), a negative count, a threshold outside the
  settings' bounds, a span that ends before it starts, an empty run id — each is one line naming the file, the
  line, the span (OTLP) and the field, exit 2, and an existing database keeps every byte (a property test draws
  such values into a real export).
- No `sk-` key a trace carries (as the model, the run's id, the file's name) reaches a table, a report or a stream.
- `--label` takes run's allowlist; the same runs imported twice under one label are refused.
- Imported runs are observed, not judged: `gate` says "no verdict" (exit 2), `show` and `diff` too.
- Messages name the real cause: a chat span whose parent is not a run span, an event log given to `capture --trace`.
- Text holding U+2028, U+2029 or U+0085 round-trips: run → export → import → capture, and through the event log.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from harness.agent import run_diagnosis
from runners.cli import main
from runners.domain.case_setup import task_of
from runners.domain.evalset import load_cases
from runners.run import _execute as execute
from tests._db import open_read_only

ROOT = Path(__file__).resolve().parents[2]
CASES = ("diagnosable_gateway_risk_pool_exhausted_t1", "budget_exhaustion_model_calls_sloppy_envelopes_risk_t7",
         "empty_logs_gateway_timeout_t1")  # fmt: skip
"""A SUCCESS with a Draft, a run with rejections and a budget stop, a FALLBACK on empty logs."""
KEY = "sk-hostileTraceKey0123456789abcdef"
REDACTED_MARK = "[REDACTED]"
TABLES = ("bench_runs", "case_runs", "tool_calls", "events", "messages", "prompts")


@dataclasses.dataclass(frozen=True)
class Bench:
    """A bench run of CASES (label `base`), its spans with message contents, and its event log."""

    db: Path
    spans: Path
    log: Path


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Bench:
    folder = tmp_path_factory.mktemp("hostile-import")
    db, spans, log = folder / "bench.duckdb", folder / "spans.jsonl", folder / "events.jsonl"
    stream = io.StringIO()
    ids = {task_of(c): c.id for c in load_cases()}

    def logged(task: Any, tools: Any, model: Any, *, ctx: Any, **kw: Any) -> Any:
        ctx = dataclasses.replace(ctx, run_id=f"orig/{ids[task]}/1")
        return run_diagnosis(task, tools, model, ctx=ctx, event_log=stream, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(execute, "loop_for", lambda agent: logged)
        assert main(["run", "--db", str(db), "--label", "base", *(a for c in CASES for a in ("--case", c))]) == 0
    log.write_text(stream.getvalue(), encoding="utf-8")
    assert main(["export", "--db", str(db), "--otel", str(spans), "--otel-content"]) == 0
    return Bench(db, spans, log)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _import(traces: Path, db: Path, label: str = "imp") -> int:
    return main(["import", str(traces), "--db", str(db), "--label", label])


def _refused(traces: Path, bench: Bench, tmp: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """Import `traces` into a copy of the bench database: exit 2, one line (returned), the copy byte-identical and
    nothing beside it."""
    db = tmp / "existing.duckdb"
    if not db.exists():
        shutil.copyfile(bench.db, db)
    digest, listing = _sha(db), sorted(p.name for p in tmp.iterdir())
    capsys.readouterr()
    code = _import(traces, db)
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, (code, captured.err)
    assert "Traceback" not in captured.err and captured.out == ""
    assert _sha(db) == digest, "the existing database changed"
    assert sorted(p.name for p in tmp.iterdir()) == listing, "a file was left beside it"
    return lines[0]


# -- OTLP spans as JSON ----------------------------------------------------------------------------------------------
def _spans(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for rs in request["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def _op(span: dict[str, Any]) -> str | None:
    return next((a["value"].get("stringValue") for a in span["attributes"] if a["key"] == "gen_ai.operation.name"),
                None)  # fmt: skip


def _root(request: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in _spans(request) if _op(s) == "invoke_agent")


def _kids(request: dict[str, Any], op: str) -> list[dict[str, Any]]:
    return [s for s in _spans(request) if _op(s) == op]


def _set(span: dict[str, Any], key: str, value: dict[str, Any]) -> None:
    for a in span["attributes"]:
        if a["key"] == key:
            a["value"] = value
            return
    span["attributes"].append({"key": key, "value": value})


def _messages(span: dict[str, Any], key: str, messages: object) -> None:
    _set(span, key, {"stringValue": json.dumps(messages)})


def _line_with(lines: list[str], op: str) -> int:
    """The first line whose request has a span of `op` (a budget run has rejections: its run span has events)."""
    return next(i for i, line in enumerate(lines) if _kids(json.loads(line), op))


Mutation = Callable[[dict[str, Any]], tuple[str, str]]
"""Change a request in place; the span id and the field the one line must name."""


def _chat(key: str, value: dict[str, Any]) -> Mutation:
    def mutate(req: dict[str, Any]) -> tuple[str, str]:
        span = _kids(req, "chat")[0]
        _set(span, key, value)
        return span["spanId"], key

    return mutate


def _chat_messages(key: str, messages: object) -> Mutation:
    def mutate(req: dict[str, Any]) -> tuple[str, str]:
        span = _kids(req, "chat")[0]
        _messages(span, key, messages)
        return span["spanId"], key

    return mutate


def _run_attr(key: str, value: dict[str, Any]) -> Mutation:
    def mutate(req: dict[str, Any]) -> tuple[str, str]:
        span = _root(req)
        _set(span, key, value)
        return span["spanId"], key

    return mutate


def _tokens_past_bigint(req: dict[str, Any]) -> tuple[str, str]:
    for chat in _kids(req, "chat")[:2]:
        _set(chat, "gen_ai.usage.input_tokens", {"intValue": str(2**62 + 1)})
    return _root(req)["spanId"], "gen_ai.usage.input_tokens"


def _ends_before_it_starts(req: dict[str, Any]) -> tuple[str, str]:
    span = _kids(req, "execute_tool")[0]
    span["endTimeUnixNano"] = str(int(span["startTimeUnixNano"]) - 1000)
    return span["spanId"], "endTimeUnixNano"


OUT, IN = "gen_ai.output.messages", "gen_ai.input.messages"
LISTED: dict[str, Mutation] = {
    "output parts 5": _chat_messages(OUT, [{"role": "assistant", "parts": 5}]),
    "output parts ['str', 1]": _chat_messages(OUT, [{"role": "assistant", "parts": ["str", 1]}]),
    "input parts 7": _chat_messages(IN, [{"role": "user", "parts": 7}]),
    "a text part without text": _chat_messages(OUT, [{"role": "assistant", "parts": [{"type": "text", "content": 5}]}]),
    "a tool call without a name": _chat_messages(OUT, [{"role": "assistant", "parts": [{"type": "tool_call"}]}]),
    "messages not JSON": _chat(OUT, {"stringValue": "[{"}),
    "tokens as a boolean": _chat("gen_ai.usage.input_tokens", {"boolValue": True}),
    "tokens negative": _chat("gen_ai.usage.output_tokens", {"intValue": "-5"}),
    "tokens summing past BIGINT": _tokens_past_bigint,
    "seq as a double": _chat("harness.seq", {"doubleValue": 1.0}),
    "a threshold of 0": _run_attr("harness.config.no_gain_threshold", {"intValue": "0"}),
    "a threshold of -1": _run_attr("harness.config.no_gain_threshold", {"intValue": "-1"}),
    "a budget as a string": _run_attr("harness.config.max_model_calls", {"stringValue": "12"}),
    "an empty run id": _run_attr("gen_ai.conversation.id", {"stringValue": " "}),
    "a span ending before it starts": _ends_before_it_starts,
}


def _mutated(bench: Bench, tmp: Path, mutate: Mutation) -> tuple[Path, int, str, str]:
    """The spans with one request changed by `mutate`: the file, the line (from 1), the span id and the field."""
    lines = bench.spans.read_text(encoding="utf-8").split("\n")[:-1]
    at = _line_with(lines, "execute_tool")
    request = json.loads(lines[at])
    span, field = mutate(request)
    lines[at] = json.dumps(request, ensure_ascii=False)
    bad = tmp / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return bad, at + 1, span, field


@pytest.mark.parametrize("mutation", list(LISTED))
def test_a_listed_hostile_span_is_one_line_naming_file_line_span_and_field(
    bench: Bench, mutation: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad, line, span, field = _mutated(bench, tmp_path, LISTED[mutation])
    message = _refused(bad, bench, tmp_path, capsys)
    assert f"{bad}:{line}: span {span}" in message and field in message, message


# the property: any such value, anywhere
_WRONG_FOR: dict[str, list[dict[str, Any]]] = {
    "intValue": [{"boolValue": True}, {"boolValue": False}, {"stringValue": "1"}, {"doubleValue": 1.0},
                 {"doubleValue": "Infinity"}, {"doubleValue": "NaN"}, {"intValue": "-1"}],
    "boolValue": [{"intValue": "1"}, {"stringValue": "true"}, {"doubleValue": 0.0}],
    "stringValue": [{"intValue": "7"}, {"boolValue": True}, {"doubleValue": 2.5}],
}  # fmt: skip
"""Values of another type (or out of range) for an attribute written as each OTLP type."""
_LIMIT_WRONG = [{"intValue": "0"}, {"intValue": "-3"}, {"boolValue": True}, {"stringValue": "2"}]
_BAD_MESSAGES = [
    {"role": "assistant"}, [{"parts": []}], [{"role": 1, "parts": []}], [{"role": "user", "parts": {"a": 1}}],
    [{"role": "user", "parts": [3]}], [{"role": "user", "parts": [{"content": "x"}]}],
    [{"role": "assistant", "parts": [{"type": "tool_call", "name": 4}]}],
    [{"role": "tool", "parts": [{"type": "tool_call_response", "id": 9, "response": "x"}]}],
    [{"role": "assistant", "parts": [], "finish_reason": 0}], "[[[[", 12,
]  # fmt: skip
"""Message contents the GenAI conventions do not allow (or not JSON)."""
_NOT_MUTATED = {"gen_ai.operation.name"}
"""Changing it changes what the span is (a child no longer of its run): refused, but naming the run's seq."""


def _draw_mutation(data: st.DataObject, request: dict[str, Any]) -> tuple[str, str]:
    """One bad value somewhere in `request`: an attribute of a span or span event, a span's times, a message."""
    spans = _spans(request)
    span = data.draw(st.sampled_from(spans))
    how = data.draw(st.sampled_from(["attribute", "event attribute", "times", "messages"]))
    if how == "messages" and _op(span) == "chat":
        key = data.draw(st.sampled_from([IN, OUT]))
        bad = data.draw(st.sampled_from(_BAD_MESSAGES))
        _set(span, key, {"stringValue": bad if isinstance(bad, str) else json.dumps(bad)})
        return span["spanId"], key
    if how == "times":
        start, end = int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"])
        span["endTimeUnixNano"] = str(start - data.draw(st.integers(1, 10**9)))
        del end
        return span["spanId"], "TimeUnixNano"
    holder = span
    if how == "event attribute" and span.get("events"):
        harness = [e for e in span["events"] if e["name"].startswith("harness.")]
        if harness:
            holder = data.draw(st.sampled_from(harness))
    pool = [a for a in holder.get("attributes", []) if a["key"] not in _NOT_MUTATED]
    attr = data.draw(st.sampled_from(pool))
    (kind,) = attr["value"]
    wrong = _LIMIT_WRONG if attr["key"].startswith("harness.config.") and kind == "intValue" else _WRONG_FOR[kind]
    attr["value"] = data.draw(st.sampled_from(wrong))
    return span["spanId"], attr["key"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          phases=(Phase.explicit, Phase.reuse, Phase.generate))  # fmt: skip
@given(data=st.data())
def test_any_malformed_value_in_a_real_export_is_one_line_and_the_database_byte_identical(
    bench: Bench, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = bench.spans.read_text(encoding="utf-8").split("\n")[:-1]
    at = data.draw(st.integers(0, len(lines) - 1))
    request = json.loads(lines[at])
    span, field = _draw_mutation(data, request)
    lines[at] = json.dumps(request, ensure_ascii=False)
    folder = tmp_path_factory.mktemp("drawn")
    bad = folder / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    message = _refused(bad, bench, folder, capsys)
    assert f"{bad}:{at + 1}: " in message, message
    assert f"span {span}" in message or field == "harness.seq", message  # a seq made negative: named on its run
    assert field in message, message


# -- the event log -----------------------------------------------------------------------------------------------
EventMutation = Callable[[dict[str, Any]], str]


def _event_field(name: str, value: object, *, kind: str | None = None) -> EventMutation:
    def mutate(line: dict[str, Any]) -> str:
        line["event"][name] = value
        return f"event.{name}"

    return mutate


EVENT_LOG: dict[str, tuple[str, EventMutation]] = {
    "seq as true": ("MODEL_CALL", _event_field("seq", True)),
    "seq as '1'": ("MODEL_CALL", _event_field("seq", "1")),
    "t_ms Infinity": ("TOOL_INVOCATION", _event_field("t_ms", float("inf"))),
    "tokens as a boolean": ("MODEL_CALL", _event_field("input_tokens", True)),
    "tokens negative": ("MODEL_CALL", _event_field("output_tokens", -1)),
    "an empty run id": ("RUN_STARTED", lambda line: line.update(run_id="") or "run_id"),
    "a threshold of -1": ("RUN_STARTED", lambda line: line["limits"].update(no_gain_threshold=-1)
                          or "limits.no_gain_threshold"),
    "a threshold as true": ("RUN_STARTED", lambda line: line["limits"].update(max_model_calls=True)
                            or "limits.max_model_calls"),
}  # fmt: skip


@pytest.mark.parametrize("mutation", list(EVENT_LOG))
def test_a_hostile_event_log_line_is_one_line_naming_file_line_and_field(
    bench: Bench, mutation: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kind, mutate = EVENT_LOG[mutation]
    lines = bench.log.read_text(encoding="utf-8").split("\n")[:-1]
    at = next(i for i, line in enumerate(lines) if json.loads(line)["event"]["kind"] == kind)
    parsed = json.loads(lines[at])
    field = mutate(parsed)
    lines[at] = json.dumps(parsed, ensure_ascii=False)  # Infinity written as JSON's non-standard literal
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    message = _refused(bad, bench, tmp_path, capsys)
    assert f"{bad}:{at + 1}: " in message and field in message, message


# -- secrets, labels, twice ------------------------------------------------------------------------------------------
def _cells_holding(db: Path, needle: str) -> list[str]:
    con = open_read_only(db)
    try:
        found = []
        for table in TABLES:
            for (column,) in con.execute(f"SELECT column_name FROM (DESCRIBE {table})").fetchall():
                sql = f'SELECT count(*) FROM {table} WHERE CAST("{column}" AS VARCHAR) LIKE ?'
                if (con.execute(sql, [f"%{needle}%"]).fetchone() or (0,))[0]:
                    found.append(f"{table}.{column}")
        return found
    finally:
        con.close()


def test_no_key_a_trace_carries_reaches_a_table_a_report_or_a_stream(
    bench: Bench, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = bench.spans.read_text(encoding="utf-8")
    request = json.loads(text.split("\n")[0])
    root = _root(request)
    _set(root, "gen_ai.request.model", {"stringValue": KEY})
    _set(root, "gen_ai.conversation.id", {"stringValue": f"{KEY}/case/1"})
    for chat in _kids(request, "chat"):
        _set(chat, "gen_ai.request.model", {"stringValue": KEY})
    traces = tmp_path / f"{KEY}.jsonl"  # the file's own name
    traces.write_text(json.dumps(request) + "\n", encoding="utf-8")
    db, report = tmp_path / "keys.duckdb", tmp_path / "report"
    capsys.readouterr()
    assert _import(traces, db) == 0
    con = open_read_only(db)
    (case_run,) = con.execute("SELECT case_run_id FROM case_runs").fetchone() or ("",)
    con.close()
    assert main(["report", "--db", str(db), "--out", str(report)]) == 0
    assert main(["show", "--db", str(db), str(case_run)]) == 0
    assert main(["whatif", "--db", str(db), "--label", "imp", "--no-gain-threshold", "1"]) == 0
    streams = capsys.readouterr()
    assert _cells_holding(db, "sk-") == [], "a key stored"
    for page in report.iterdir():
        assert b"sk-" not in page.read_bytes(), page
    assert "sk-" not in streams.out and "sk-" not in streams.err
    # the scan bites: the same trace without redaction would hold it
    assert KEY in traces.read_text()


@pytest.mark.parametrize("label", ["\x1b[2Jevil", "<script>alert(1)</script>", "x" * 300, " ", ""])
def test_an_import_label_takes_the_label_allowlist(
    bench: Bench, label: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "existing.duckdb"
    shutil.copyfile(bench.db, db)
    digest = _sha(db)
    capsys.readouterr()
    assert _import(bench.spans, db, label) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--label" in err and "\x1b" not in err, err
    assert _sha(db) == digest


def _new_span_ids(text: str) -> str:
    """The same runs exported again: every span under another id."""
    for line in text.split("\n")[:-1]:
        for span in _spans(json.loads(line)):
            text = text.replace(span["spanId"], f"{int(span['spanId'], 16) ^ (2**64 - 1):016x}")
    return text


def test_the_same_runs_imported_twice_under_one_label_are_refused(
    bench: Bench, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "twice.duckdb"
    assert _import(bench.spans, db) == 0
    again = tmp_path / "again.jsonl"
    again.write_text(_new_span_ids(bench.spans.read_text(encoding="utf-8")), encoding="utf-8")
    for traces in (bench.spans, again):  # the same file, and the same runs under other span ids
        digest = _sha(db)
        capsys.readouterr()
        assert _import(traces, db) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "already imported under label 'imp'" in err, err
        assert _sha(db) == digest
    assert _import(bench.spans, db, "other") == 0  # under another label: on purpose
    con = open_read_only(db)
    assert con.execute("SELECT label, count(*) FROM case_runs GROUP BY label ORDER BY label").fetchall() == [
        ("imp", len(CASES)), ("other", len(CASES))]  # fmt: skip
    con.close()


# -- observed, not judged --------------------------------------------------------------------------------------------
def test_imported_runs_get_no_verdict_from_gate_show_or_diff(
    bench: Bench, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "observed.duckdb"
    shutil.copyfile(bench.db, db)
    assert _import(bench.spans, db, "one") == 0
    assert _import(bench.log, db, "two") == 0
    gate = ["gate", "--db", str(db), "--k", "1", "--summary", str(tmp_path / "s.md"), "--junit", str(tmp_path / "j")]
    for baseline, candidate, named in (("one", "two", "--baseline 'one' and --candidate 'two'"),
                                       ("base", "one", "--candidate 'one'")):  # fmt: skip
        capsys.readouterr()
        assert main([*gate, "--baseline", baseline, "--candidate", candidate]) == 2
        captured = capsys.readouterr()
        assert "\n" not in captured.err.strip() and "no verdict" in captured.err and named in captured.err
        assert "0%" not in captured.out and not (tmp_path / "s.md").exists()
    capsys.readouterr()
    assert main(["diff", "--db", str(db), "base", "one", "--case", CASES[0]]) == 0
    assert "passed no verdict (observed run)" in " ".join(capsys.readouterr().out.split())
    assert main(["show", "--db", str(db), "--label", "two", "--case", CASES[0]]) == 0
    assert "passed: no verdict (observed run)" in capsys.readouterr().out
    logs = tmp_path / "logs"
    assert main(["export", "--db", str(db), "--label", "one", "--inspect", str(logs)]) == 0  # no expectation: no crash
    from inspect_ai.log import read_eval_log

    (log,) = [read_eval_log(str(p)) for p in logs.iterdir()]
    assert log.results is not None and log.results.scores == [] and log.samples
    assert all("passed" not in (s.scores or {}) for s in log.samples)


# -- messages naming the real cause ----------------------------------------------------------------------------------
@pytest.mark.parametrize("operation", [None, "chat"])
def test_a_chat_span_whose_parent_is_no_run_span_says_so(
    bench: Bench, operation: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = bench.spans.read_text(encoding="utf-8").split("\n")[:-1]
    request = json.loads(lines[0])
    root = _root(request)
    root["attributes"] = [a for a in root["attributes"] if a["key"] != "gen_ai.operation.name"]
    if operation is not None:
        root["attributes"].append({"key": "gen_ai.operation.name", "value": {"stringValue": operation}})
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(request) + "\n", encoding="utf-8")
    message = _refused(bad, bench, tmp_path, capsys)
    assert f"its parent span {root['spanId']}" in message and "is not a run span" in message, message
    assert "is not in the file" not in message


def test_capture_of_an_event_log_says_it_is_not_otlp(
    bench: Bench, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    out = tmp_path / "case.yaml"
    assert main(["capture", "--trace", str(bench.log), "--run", f"orig/{CASES[0]}/1", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "an event-log line" in err and "not an OTLP/JSON traces request" in err, err
    assert not out.exists()


# -- text with other line separators round-trips ---------------------------------------------------------------------
SEPARATORS = "\u2028\u2029\x85"
"""What str.splitlines() ends a line at, which JSON holds raw inside a string."""


def test_a_question_holding_line_separators_round_trips_run_export_import_capture(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = yaml.safe_load((ROOT / "evalsets" / "diagnosable.yaml").read_text(encoding="utf-8"))
    case = next(c for c in source["cases"] if c["id"] == CASES[0])
    question = f"Tenant t1{SEPARATORS[0]}card payments{SEPARATORS[1]}returned 502{SEPARATORS[2]} at the gateway"
    case = {**case, "id": "separators_in_the_question", "question": question}
    evalset = tmp_path / "separators.yaml"
    evalset.write_text(yaml.safe_dump({"cases": [case]}, allow_unicode=True), encoding="utf-8")
    db, spans, imported = tmp_path / "run.duckdb", tmp_path / "spans.jsonl", tmp_path / "imported.duckdb"
    assert main(["run", "--evalset", str(evalset), "--db", str(db), "--label", "base"]) == 0
    assert main(["export", "--db", str(db), "--otel", str(spans), "--otel-content"]) == 0
    assert all(c in spans.read_text(encoding="utf-8") for c in SEPARATORS), "written raw, as JSON allows"
    assert _import(spans, imported) == 0

    def rows(path: Path, sql: str) -> list[Any]:
        con = open_read_only(path)
        try:
            return con.execute(sql).fetchall()
        finally:
            con.close()

    user = ("SELECT coalesce(m.content, p.content) FROM messages m LEFT JOIN prompts p USING (prompt_hash)"
            " WHERE m.kind = 'USER' ORDER BY m.seq")  # fmt: skip
    assert rows(db, user) == rows(imported, user) and question in rows(imported, user)[0][0]
    counts = "SELECT outcome, stop_reason, tool_invocations, model_calls, input_tokens, output_tokens FROM case_runs"
    assert rows(db, counts) == rows(imported, counts)
    (run_id,) = rows(db, "SELECT case_run_id FROM case_runs")[0]
    out = tmp_path / "captured.yaml"
    assert main(["capture", "--trace", str(spans), "--run", run_id, "--out", str(out)]) == 0
    (captured,) = yaml.safe_load(out.read_text(encoding="utf-8"))["cases"]
    assert captured["question"] == question


def test_an_event_log_line_holding_line_separators_imports(
    bench: Bench, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The library's own `event_line()` writes them raw: a detail holding them comes back whole."""
    lines = bench.log.read_text(encoding="utf-8").split("\n")[:-1]
    at = next(i for i, line in enumerate(lines) if json.loads(line)["event"]["kind"] == "RELEASED")
    parsed = json.loads(lines[at])
    parsed["event"]["detail"] = f"first{SEPARATORS}last"
    lines[at] = json.dumps(parsed, ensure_ascii=False)
    log, db = tmp_path / "events.jsonl", tmp_path / "imported.duckdb"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert _import(log, db) == 0
    con = open_read_only(db)
    details = {r[0] for r in con.execute("SELECT detail FROM events WHERE kind = 'RELEASED'").fetchall()}
    con.close()
    assert f"first{SEPARATORS}last" in details


CREDENTIALS = {
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJvbmNhbGwtYm90In0.c2lnbmF0dXJlLW9mLXRoZS10b2tlbg",
    "aws key id": "AKIAQ3EGRSTUVWXYZ234",
    "github": "ghp_" + "Zx81Ke7LmQ0pW4rT9vB2nC6dF3gH5jA1sY0u",
    "slack": "xoxb-2048-4096-hostileSlackToken",
    "basic": "Basic b25jYWxsOmh1bnRlcjJodW50ZXIy",  # oncall:hunter2hunter2
}


def test_no_credential_shape_a_trace_carries_reaches_a_table_or_a_stream(
    bench: Bench, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    request = json.loads(bench.spans.read_text(encoding="utf-8").split("\n")[0])
    carried = " ".join(CREDENTIALS.values())
    root = _root(request)
    _set(root, "gen_ai.request.model", {"stringValue": f"model {carried}"})
    for chat in _kids(request, "chat"):
        _set(chat, "gen_ai.request.model", {"stringValue": f"Authorization: {carried}"})
    traces = tmp_path / "creds.jsonl"
    traces.write_text(json.dumps(request) + "\n", encoding="utf-8")
    db = tmp_path / "creds.duckdb"
    capsys.readouterr()
    assert _import(traces, db) == 0
    streams = capsys.readouterr()
    secrets = {name: value.removeprefix("Basic ") for name, value in CREDENTIALS.items()}
    found = {name: _cells_holding(db, value) for name, value in secrets.items()}
    assert found == {name: [] for name in secrets}, found
    assert not any(v in streams.out + streams.err for v in secrets.values())
    # the scan bites: the imported rows do carry the redacted spans' other text
    assert _cells_holding(db, REDACTED_MARK)


# -- duplicate keys, cycles, equal timestamps ------------------------------------------------------------------------
def test_a_key_given_twice_in_an_event_log_line_is_refused(
    bench: Bench, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = bench.log.read_text(encoding="utf-8").split("\n")[:-1]
    at = next(i for i, line in enumerate(lines) if '"input_tokens":' in line.replace(" ", ""))
    lines[at] = lines[at].replace('"input_tokens":', '"input_tokens":-7,"input_tokens":', 1)
    bad = tmp_path / "twice.jsonl"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    message = _refused(bad, bench, tmp_path, capsys)
    assert f"{bad}:{at + 1}: " in message and "'input_tokens' given twice" in message, message


def test_a_key_given_twice_in_a_span_is_refused(
    bench: Bench, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = bench.spans.read_text(encoding="utf-8").split("\n")[:-1]
    lines[0] = lines[0].replace('"spanId":', '"spanId":"00","spanId":', 1)
    bad = tmp_path / "twice-span.jsonl"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    message = _refused(bad, bench, tmp_path, capsys)
    assert f"{bad}:1: " in message and "'spanId' given twice" in message, message


@pytest.mark.parametrize("shape", ["its own parent", "two spans each the other's parent"])
def test_a_span_that_is_its_own_ancestor_is_refused(
    bench: Bench, tmp_path: Path, capsys: pytest.CaptureFixture[str], shape: str
) -> None:
    request = json.loads(bench.spans.read_text(encoding="utf-8").split("\n")[0])
    chats = _kids(request, "chat")
    if shape == "its own parent":
        chats[0]["parentSpanId"] = chats[0]["spanId"]
    else:
        root = _root(request)
        chats[0]["parentSpanId"], root["parentSpanId"] = root["spanId"], chats[0]["spanId"]
    bad = tmp_path / "cycle.jsonl"
    bad.write_text(json.dumps(request) + "\n", encoding="utf-8")
    message = _refused(bad, bench, tmp_path, capsys)
    assert "is its own ancestor" in message and f"{bad}:1: " in message, message


def test_events_of_one_run_with_the_same_timestamp_import(bench: Bench, tmp_path: Path) -> None:
    """Real traces stamp several events in one millisecond: equal times are ordered by their sequence, not refused."""
    lines = bench.log.read_text(encoding="utf-8").split("\n")[:-1]
    parsed = [json.loads(line) for line in lines]
    first_run = parsed[0]["run_id"]
    stamp = next(p["event"]["t_ms"] for p in parsed if p["run_id"] == first_run)
    for p in parsed:
        if p["run_id"] == first_run:
            p["event"]["t_ms"] = stamp
    same = tmp_path / "same-time.jsonl"
    same.write_text("\n".join(json.dumps(p, ensure_ascii=False) for p in parsed) + "\n", encoding="utf-8")
    assert _import(same, tmp_path / "same.duckdb") == 0
