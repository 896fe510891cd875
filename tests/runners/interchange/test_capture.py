"""`harness-bench capture`: every built-in case, run, captured and replayed with the scripted model, gives the same
`case_runs` row (ids, timings and the expectations' own columns aside); model-written text round-trips as data;
bad input is one line, exit 2 and nothing written."""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
import uuid
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.prompts import DiagnosisTask, TaskContext, render_task
from runners.cli import main
from runners.domain.evalset import load_cases
from runners.interchange.capture import build_case, case_yaml
from runners.interchange.otel_trace import captured_run_from_trace, captured_runs_from_trace
from runners.store.captured_runs import (
    CapturedMessage,
    CapturedRun,
    CaptureSourceError,
    CaptureSourceProblem,
    load_captured_run,
    load_captured_runs,
)
from runners.store.connection import connect
from tests._db import open_read_only
from tests._real_replays import RECORDINGS, replayed, summary_of

_ASIDE = {"bench_run_id", "case_run_id", "case_id", "wall_ms", "finished_at", "expected_outcome",
          "expected_fallback_kind", "expected_stop_reason", "failures", "passed"}  # fmt: skip
"""Ids and timings, and what the expectations say (a captured case's are the run's own; `passed` is asserted)."""
CANNOT_ROUND_TRIP: dict[str, str] = {}
"""Built-in cases a capture cannot replay to the same row, with the reason: none."""
TRACE_UNSENT_OBSERVATION = {"budget_exhaustion_model_calls_sloppy_envelopes_risk_t7"}
"""Through a trace, only `observation_bytes` differs: the model-call budget ended the run before its last
observation was sent, and a trace holds only the messages a model was sent (the records of that call are not in
it, so the replay's unsent observation is shorter); the transcript in DuckDB stores it, unsent, and round-trips."""
_SCHEMA = json.loads((Path(__file__).resolve().parents[3] / "evalsets" / "schema.json").read_text())
jsonschema.Draft202012Validator.check_schema(_SCHEMA)
SCHEMA = jsonschema.Draft202012Validator(_SCHEMA)
"""The evaluation files' schema, checked and its validator built once (`jsonschema.validate` does both on every
call: five times the cost of the validation itself)."""


def _rows(db: Path) -> dict[str, dict[str, object]]:
    con = open_read_only(db)
    try:
        cur = con.execute("SELECT * FROM case_runs")
        names = [d[0] for d in cur.description or ()]
        return {str(r[names.index("case_id")]): dict(zip(names, r, strict=True)) for r in cur.fetchall()}
    finally:
        con.close()


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("capture") / "original.duckdb"
    assert main(["run", "--db", str(db), "--model", "scripted"]) == 0
    return db


def _replayed(
    original: Path, folder: Path, tmp_path: Path, aside: frozenset[str] = frozenset()
) -> dict[str, dict[str, tuple[object, object]]]:
    """Replay every captured file of `folder`; per built-in case, the columns (but `aside`) whose value changed."""
    rows = _rows(original)
    for out in folder.iterdir():
        SCHEMA.validate(yaml.load(out.read_text(), Loader=yaml.CSafeLoader))
    replay = tmp_path / "replay.duckdb"
    assert main(["run", "--db", str(replay), "--model", "scripted", "--evalset", str(folder)]) == 0
    again = _rows(replay)
    assert len(again) == len(rows)
    differ: dict[str, dict[str, tuple[object, object]]] = {}
    for case_id, row in sorted(rows.items()):
        if case_id in CANNOT_ROUND_TRIP:
            continue
        got = again[f"captured_{case_id}"[:81]]
        diff = {k: (v, got[k]) for k, v in row.items() if k not in _ASIDE | aside and got[k] != v}
        if got["passed"] is not True:  # the expectations written from the run hold on its replay
            diff["passed"] = (True, got["failures"])
        if diff:
            differ[case_id] = diff
    return differ


def test_every_builtin_case_round_trips(original: Path, tmp_path: Path) -> None:
    rows = _rows(original)
    assert len(rows) == len(load_cases())
    folder = tmp_path / "captured"
    # the first through the command; the rest as it captures each, read at once (opening the file, or querying it,
    # once per case was most of this test's time)
    (first, first_row), *rest = sorted(rows.items())
    out = folder / f"{first}.yaml"
    assert main(["capture", str(first_row["case_run_id"]), "--db", str(original), "--out", str(out)]) == 0
    con = connect(original, read_only=True)
    try:
        runs = load_captured_runs(con, str(original), [str(row["case_run_id"]) for _, row in rest])
    finally:
        con.close()
    for (case_id, _), run in zip(rest, runs, strict=True):
        out = folder / f"{case_id}.yaml"
        out.write_text(case_yaml(run, build_case(run), str(out)), encoding="utf-8")
    assert _replayed(original, folder, tmp_path) == {}


@pytest.fixture(scope="module")
def full_trace(original: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`export --otel FILE --otel-content` of the original run (read-only for the tests)."""
    pytest.importorskip("opentelemetry.sdk")
    trace = tmp_path_factory.mktemp("trace") / "spans.jsonl"
    assert main(["export", "--db", str(original), "--otel", str(trace), "--otel-content"]) == 0
    return trace


def test_every_builtin_case_round_trips_through_its_exported_trace(
    original: Path, full_trace: Path, tmp_path: Path
) -> None:
    """The same from `export --otel FILE --otel-content`: what a trace holds is enough to capture every case."""
    trace = full_trace
    folder = tmp_path / "captured"
    rows = sorted(_rows(original).items())
    # the first through the command; the rest as it captures each, with the trace read once (not once per case)
    first, row = rows[0]
    assert (
        main(
            ["capture", "--trace", str(trace), "--run", str(row["case_run_id"]), "--out", str(folder / f"{first}.yaml")]
        )
        == 0
    )
    runs = captured_runs_from_trace(trace, [str(row["case_run_id"]) for _, row in rows[1:]])
    for (case_id, _), run in zip(rows[1:], runs, strict=True):
        out = folder / f"{case_id}.yaml"
        out.write_text(case_yaml(run, build_case(run), str(out)), encoding="utf-8")
    # a trace does not name the case's family: the capture says `diagnosable` and lists it for review
    differ = _replayed(original, folder, tmp_path, frozenset({"family"}))
    assert {case: set(diff) for case, diff in differ.items()} == {
        case: {"observation_bytes"} for case in TRACE_UNSENT_OBSERVATION
    }


_COUNTS = ("outcome", "fallback_kind", "stop_reason", "model_calls", "guard_calls", "tool_invocations",
           "failed_invocations", "tool_rejections", "duplicate_scope_rejections", "protocol_violations",
           "no_gain_count", "gained_count", "stop_required_deliveries", "awaiting_rejections", "wasted_invocations",
           "budget_hit")  # fmt: skip
"""What a live model's run and its captured replay share (its call ids are its own, so observation bytes and tokens
are the scripted model's)."""
MODEL_ERROR_RETRIED: set[str] = set()
"""Real-model runs whose replay would make one model call fewer: a call failed (the server dropped the connection)
and was retried, and the scripted model never fails (none in the committed recordings)."""


HARNESSED = [f for f in RECORDINGS if summary_of(f).agent.value == "native" and summary_of(f).ablation.value == "none"]
"""The recordings through the Harness's loop with every control on: a captured case replays through it
(`captured.replay` names no `--agent`), so a plain-loop recording's runs are not compared with their replay, nor a
recording with a control switched off."""


def test_real_model_runs_replay_to_the_same_outcome_and_counts(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Every case run of the committed real-model cassettes (three small local models) captures, and replays at the
    settings it ran with (`captured.replay`) to the same outcome, stop reason and counts. The recordings are the
    session's replays of them (`tests/_real_replays.py`, labelled by model as `real-models` labels them)."""
    rows: list[dict[str, object]] = []
    captured: list[CapturedRun] = []
    for recording in HARNESSED:
        db = replayed(recording, tmp_path_factory)
        # what `capture CASE_RUN_ID --db D` does for each (the command is tested above), read at once: opening the
        # file, or querying it, once per run would be most of this test's time
        con = connect(db, read_only=True)
        try:
            cur = con.execute(
                "SELECT c.*, b.label AS run_label FROM case_runs c JOIN bench_runs b USING (bench_run_id)"
            )
            names = [d[0] for d in cur.description or ()]
            found = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
            captured += load_captured_runs(con, str(db), [str(row["case_run_id"]) for row in found])
        finally:
            con.close()
        rows += found
    assert len(rows) > 100
    groups: dict[tuple[str, ...], list[tuple[str, dict[str, object]]]] = {}
    for n, (row, run) in enumerate(zip(rows, captured, strict=True)):
        out = tmp_path / "cap" / f"{n}.yaml"
        doc = yaml.load(case_yaml(run, build_case(run), str(out)), Loader=yaml.CSafeLoader)
        doc["cases"][0]["id"] = f"r{n}_{doc['cases'][0]['id']}"[:81]
        flags = tuple(
            shlex.split(doc["captured"]["replay"])[6:]
        )  # after `harness-bench run --evalset F --model scripted`
        folder = tmp_path / "by_settings" / "_".join(flags or ("default",))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / out.name).write_text(yaml.dump(doc, Dumper=yaml.CSafeDumper, allow_unicode=True))
        groups.setdefault(flags, []).append((doc["cases"][0]["id"], row))
    differ = set()
    for flags, members in groups.items():
        replay = tmp_path / f"replay{len(differ)}_{abs(hash(flags))}.duckdb"
        folder = tmp_path / "by_settings" / "_".join(flags or ("default",))
        assert main(["run", "--db", str(replay), "--model", "scripted", "--evalset", str(folder), *flags]) == 0
        again = _rows(replay)
        for case_id, row in members:
            got = again[case_id]
            if any(got[k] != row[k] for k in _COUNTS) or got["passed"] is not True:
                differ.add(f"br-*/{row['case_id']}/{row['epoch']} of {row['run_label']}")
    assert differ == MODEL_ERROR_RETRIED


def test_a_captured_case_holds_only_what_the_run_saw(original: Path, tmp_path: Path) -> None:
    """The webhook case's knowledge base has two documents; the run was shown one passage of one of them."""
    row = _rows(original)["diagnosable_webhook_cert_expired_acme_pay"]
    out = tmp_path / "c.yaml"
    assert main(["capture", str(row["case_run_id"]), "--db", str(original), "--out", str(out)]) == 0
    doc = yaml.safe_load(out.read_text())
    case = doc["cases"][0]
    assert [d["doc_id"] for d in case["fixtures"]["kb"]] == ["rb-webhook-delivery"]
    assert case["fixtures"]["kb"][0]["text"].startswith("## TLS handshake failures")
    assert "Signature verification" not in case["fixtures"]["kb"][0]["text"]
    assert len(case["fixtures"]["logs"]) == 2  # the two x509 lines the search returned, not the 200 before
    assert [s["tool"] for s in case["trajectory"]["steps"]] == ["kb_search", "log_search"]
    assert case["trajectory"]["steps"][1]["gain"] == "GAINED"
    cites = [c["tool_call_id"] for claim in case["trajectory"]["draft"]["claims"] for c in claim["citations"]]
    assert set(cites) == {"@step1", "@step2"}
    assert doc["captured"]["review"] and doc["captured"]["from_case_run"] == row["case_run_id"]
    assert case["expect"]["outcome"] == "SUCCESS" and case["expect"]["exact"]["backend_calls"] == 2


# -- hostile text ---------------------------------------------------------------------------------
_AWKWARD = st.sampled_from(list(":-#&*!|>'\"%@`{}[],?\n\r\t\x00\x1b\x85\u2028\u2029\ufeff\u202e中\U0001f600"))
"""What breaks YAML or a terminal: indicators, quotes, line breaks YAML folds (NEL, LS, PS), controls, a BOM, bidi."""
_TEXT = st.text(
    st.one_of(_AWKWARD, st.characters(codec="utf-8", exclude_categories=("Cs",))), min_size=3, max_size=60
).filter(lambda t: t.strip() and "\n\nKnown context:\n" not in t)


def _run(question: str, conclusion: str) -> CapturedRun:
    def msg(seq: int, kind: str, content: str | None, **kw: object) -> CapturedMessage:
        fields: dict[str, object] = dict.fromkeys(
            ("tool_call_id", "harness_call_id", "tool", "arguments", "sent", "invocation_status", "rejection",
             "violation", "stop_required", "guard", "verdict")
        )  # fmt: skip
        fields.update(kw)
        return CapturedMessage(seq, "DIAGNOSIS", kind, seq, content, **fields)  # type: ignore[arg-type]

    user = render_task(DiagnosisTask(question, TaskContext("t1", None, "2026-07-01T00:00:00Z", None)))
    draft = json.dumps({"conclusion": conclusion, "claims": [], "next_steps": [conclusion]}, ensure_ascii=False)
    messages = (msg(0, "SYSTEM", "system"), msg(1, "USER", user), msg(2, "ASSISTANT", draft))
    return CapturedRun("br/x/1", "br", "x-case", "diagnosable", "m\x1b[31m", "l", "FAILED", None, None, conclusion,
                       1, 0, 0, 0, 0, messages)  # fmt: skip


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(question=_TEXT, conclusion=_TEXT)
def test_model_written_text_round_trips_as_data(tmp_path: Path, question: str, conclusion: str) -> None:
    run = _run(question, conclusion)
    text = case_yaml(run, build_case(run), "hostile.yaml")
    path = tmp_path / f"hostile-{uuid.uuid4().hex}.yaml"  # a new name: loading is memoised by path, size and mtime
    path.write_text(text, encoding="utf-8")
    assert text.splitlines()[0].startswith("# Captured")  # the one comment is ours, nothing a model wrote
    (case,) = load_cases([str(path)])
    assert case.question == question
    assert case.context.tenant == "t1" and case.context.time_start == "2026-07-01T00:00:00Z"
    assert case.context.time_end is None
    assert case.trajectory.draft is not None and case.trajectory.draft["conclusion"] == conclusion
    assert yaml.safe_load(text)["captured"]["model"] == "m\x1b[31m"


def test_a_live_models_call_ids_become_step_references() -> None:
    """A Draft citing a live model's own call id (which the scripted replay will not give) is captured structured,
    its citation `@step1`; the call's evaluation, result and the log events it returned come with it."""
    run = _run("Why did t1 fail at 14:00?", "x")
    record = {"ts": "2026-07-01T13:40:00Z", "tenant": "t1", "service": "gw", "level": "ERROR", "message": "boom",
              "trace_id": None}  # fmt: skip
    call_input = {"start": "2026-07-01T13:30:00Z", "end": "2026-07-01T14:30:00Z", "tenant": "t1"}
    scope = {**call_input, "limit": 20}
    obs = {"tool_call_id": "chatcmpl-tool-9f", "tool": "log_search", "status": "COMPLETED",
           "evidence_status": "EVIDENCE", "count": 1, "scope": scope, "truncated": False,
           "evaluation_required": True, "records": [record]}  # fmt: skip
    draft = {"conclusion": "boom", "claims": [{"statement": "s", "citations": [{"tool_call_id": "chatcmpl-tool-9f",
             "excerpt": "boom"}]}]}  # fmt: skip
    head = run.messages[:2]
    rest = (
        CapturedMessage(2, "DIAGNOSIS", "ASSISTANT", 1, "", None, None, None, None, None, None, None, None, None, None,
                        None),
        CapturedMessage(3, "DIAGNOSIS", "TOOL_CALL", 1, None, "chatcmpl-tool-9f", "chatcmpl-tool-9f", "log_search",
                        json.dumps({"input": call_input}), None, "COMPLETED", None, None, False, None, None),
        CapturedMessage(4, "DIAGNOSIS", "OBSERVATION", 2, json.dumps(obs), "chatcmpl-tool-9f", None, None, None, True,
                        None, None, None, None, None, None),
        CapturedMessage(5, "DIAGNOSIS", "ASSISTANT", 2, json.dumps(draft, indent=1), None, None, None, None, None, None,
                        None, None, None, None, None),
    )  # fmt: skip
    run = dataclasses.replace(run, messages=(*head, *rest))
    case = build_case(run)
    assert case.trajectory.draft is not None and case.trajectory.draft_text is None
    assert case.trajectory.draft["claims"] == [{"statement": "s", "citations": [{"tool_call_id": "@step1",
                                                                                 "excerpt": "boom"}]}]  # fmt: skip
    assert [s.input for s in case.trajectory.steps] == [call_input]
    assert [e.message for e in case.fixtures.logs] == ["boom"]
    (recorded,) = case.fixtures.recorded
    assert recorded.records == [record] and recorded.scope == scope and recorded.count == 1


# -- bad input ------------------------------------------------------------------------------------
def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], *needles: str) -> None:
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err


def test_unknown_case_run_is_refused(original: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "c.yaml"
    _refused(["capture", "br-nope/x/1", "--db", str(original), "--out", str(out)], capsys, "CASE_RUN_ID", "br-nope/x/1")
    assert not out.exists()


def test_runs_read_at_once_are_each_run_as_read_alone_in_the_order_asked(original: Path) -> None:
    ids = [str(row["case_run_id"]) for _, row in sorted(_rows(original).items())][:5][::-1]
    con = connect(original, read_only=True)
    try:
        assert load_captured_runs(con, str(original), ids) == [load_captured_run(con, str(original), i) for i in ids]
        with pytest.raises(CaptureSourceError, match="'br-nope/x/1': no such case run") as caught:
            load_captured_runs(con, str(original), [ids[0], "br-nope/x/1", ids[1]])
        assert caught.value.problem is CaptureSourceProblem.UNKNOWN_CASE_RUN
    finally:
        con.close()


def test_runs_captured_from_a_trace_at_once_are_each_as_captured_alone(tmp_path: Path) -> None:
    """Read at once, runs of one case and epoch from two bench runs (imported apart) and an id asked for twice come
    back, in the order asked, as each comes back read alone."""
    pytest.importorskip("opentelemetry.sdk")
    db, trace = tmp_path / "two.duckdb", tmp_path / "spans.jsonl"
    cases = ("diagnosable_webhook_cert_expired_acme_pay", "empty_logs_gateway_timeout_t1")
    for model in ("scripted", "scripted:eager"):
        assert main(["run", "--db", str(db), "--model", model, *(a for c in cases for a in ("--case", c))]) == 0
    assert main(["export", "--db", str(db), "--otel", str(trace), "--otel-content"]) == 0
    con = open_read_only(db)
    try:
        rows = con.execute("SELECT case_run_id, case_id, epoch FROM case_runs ORDER BY case_id, model").fetchall()
    finally:
        con.close()
    assert len(rows) == 4 and rows[0][1:] == rows[1][1:]  # one case and epoch in both bench runs
    ids = [str(rows[i][0]) for i in (1, 2, 0, 2, 3)]
    alone = tuple(captured_run_from_trace(trace, i) for i in ids)
    assert captured_runs_from_trace(trace, ids) == alone
    assert len({run.model for run in alone}) == 2  # the two bench runs' runs are each their own


def test_a_run_of_a_trace_read_at_once_that_cannot_be_captured_is_named(
    full_trace: Path, original: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run whose import holds no transcript (none of the bench's exports makes one: an import that lost it) is
    refused by its own id among runs read at once, as when read alone."""
    import runners.interchange.otel_trace as otel_trace

    ids = [str(row["case_run_id"]) for _, row in sorted(_rows(original).items())][:3]
    real = otel_trace.import_rows

    def losing_the_second(runs: list[Any], bench_run_id: str, label: str) -> list[Any]:
        imported = zip(runs, real(runs, bench_run_id, label), strict=True)
        return [(rows, ([] if run.run_id == ids[1] else messages, prompts))
                for run, (rows, (messages, prompts)) in imported]  # fmt: skip

    monkeypatch.setattr(otel_trace, "import_rows", losing_the_second)
    for asked in (ids, ids[1:2]):
        with pytest.raises(otel_trace.TraceError, match=rf"^--run '{re.escape(ids[1])}': .*no transcript stored"):
            captured_runs_from_trace(full_trace, asked)


def test_run_without_transcripts_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db, out = tmp_path / "bare.duckdb", tmp_path / "c.yaml"
    case = "diagnosable_webhook_cert_expired_acme_pay"
    assert main(["run", "--db", str(db), "--model", "scripted", "--case", case, "--no-transcripts"]) == 0
    (row,) = _rows(db).values()
    _refused(["capture", str(row["case_run_id"]), "--db", str(db), "--out", str(out)], capsys, "--no-transcripts")
    assert not out.exists()


def test_out_that_is_the_db_or_exists_is_refused(
    original: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    row = _rows(original)["diagnosable_webhook_cert_expired_acme_pay"]
    before = original.read_bytes()
    _refused(["capture", str(row["case_run_id"]), "--db", str(original), "--out", str(original)], capsys, "--out")
    assert original.read_bytes() == before
    out = tmp_path / "existing.yaml"
    out.write_text("keep me\n")
    _refused(["capture", str(row["case_run_id"]), "--db", str(original), "--out", str(out)], capsys, "--force")
    assert out.read_text() == "keep me\n"
    assert main(["capture", str(row["case_run_id"]), "--db", str(original), "--out", str(out), "--force"]) == 0
    assert out.read_text().startswith("# Captured")


def test_bad_traces_are_refused(
    original: Path, full_trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    row = _rows(original)["diagnosable_webhook_cert_expired_acme_pay"]
    bare, full, out = tmp_path / "bare.jsonl", full_trace, tmp_path / "c.yaml"
    assert main(["export", "--db", str(original), "--otel", str(bare)]) == 0
    before = full.read_bytes()
    run = str(row["case_run_id"])
    _refused(["capture", "--trace", str(bare), "--run", run, "--out", str(out)], capsys, "--otel-content")
    _refused(["capture", "--trace", str(full), "--run", "br-x/y/1", "--out", str(out)], capsys, "--run", "br-x/y/1")
    _refused(["capture", "--trace", str(full), "--out", str(out)], capsys, "--trace FILE and --run ID")
    _refused(["capture", run, "--trace", str(full), "--run", run, "--out", str(out)], capsys, "not both")
    _refused(["capture", "--trace", str(full), "--run", run, "--out", str(full)], capsys, "--out")
    (tmp_path / "junk.jsonl").write_text("{not json\n")
    _refused(["capture", "--trace", str(tmp_path / "junk.jsonl"), "--run", run, "--out", str(out)], capsys, "line 1")
    assert not out.exists() and full.read_bytes() == before


# -- the two emitters ----------------------------------------------------------------------------------------------
_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
_KEY = st.from_regex(r"[a-z_][a-z0-9_]{0,11}", fullmatch=True)
"""A captured file's keys are field and column names (an empty key is written `? ''` by one emitter only)."""


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(_KEY, st.recursive(
    _TEXT, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEY, inner, max_size=3), max_leaves=8,
), max_size=4))  # fmt: skip
def test_a_captured_file_is_the_text_pyyamls_emitter_writes(doc: dict[str, object]) -> None:
    """A captured file is written by libyaml's emitter unless its text goes beyond the BMP (which libyaml escapes):
    the same text as PyYAML's own emitter, which loads back as the document."""
    from runners.interchange import capture

    written = capture._dump(doc)
    assert written == yaml.dump(doc, Dumper=capture._Dumper, allow_unicode=True, sort_keys=False, width=120)
    assert yaml.load(written, Loader=yaml.CSafeLoader) == doc


def test_a_captured_emoji_is_written_as_itself(original: Path, tmp_path: Path) -> None:
    row = _rows(original)["diagnosable_webhook_cert_expired_acme_pay"]
    con = connect(original, read_only=True)
    try:
        run = load_captured_run(con, str(original), str(row["case_run_id"]))
    finally:
        con.close()
    run = dataclasses.replace(run, label="on call 🔥")
    text = case_yaml(run, build_case(run), "x.yaml")
    assert "label: on call 🔥\n" in text
    assert yaml.safe_load(text)["captured"]["label"] == "on call 🔥"
