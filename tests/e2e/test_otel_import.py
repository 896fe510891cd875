"""`harness-bench import`: a bench run's exported spans (and the library's event log of the same runs) imported
into an empty database give the original's `case_runs`, `tool_calls` and `events` rows; `show` and `whatif` read
the imported run; a trace that is not a set of whole runs is one line, exit 2, and nothing written.

Also: the library without a tracer never imports OpenTelemetry (checked in a fresh interpreter)."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from harness.agent import run_diagnosis
from runners.cli import main
from runners.domain.case_setup import task_of
from runners.domain.evalset import load_cases
from runners.run import _execute as execute
from tests._db import open_read_only

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
from runners.domain.evalset import load_cases
from runners.run.case_runner import run_case
run = run_case(load_cases()[0])
assert run.result.events, "the case ran"
print(sorted(m for m in sys.modules if m == "opentelemetry" or m.startswith("opentelemetry.")))
"""


def test_no_opentelemetry_import_without_a_tracer() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


# -- the round trip ------------------------------------------------------------------------------------------------
# Columns left out of the comparison, and why:
IDS = {"bench_run_id", "case_run_id", "label"}
"""The import's own bench run, case run ids (`NEW_BENCH/CASE/EPOCH`) and `--label`; rows are paired by case and
epoch (and `seq` within a case run) instead."""
TIMINGS = {"wall_ms", "finished_at", "t_ms", "latency_ms"}
"""Times: the spans carry them to the nanosecond from the case run's stored end, not the run's own clock."""
VERDICT = {
    "expected_outcome",
    "expected_fallback_kind",
    "expected_stop_reason",
    "passed",
    "outcome_passed",
    "trajectory_passed",
    "failures",
    "family",
    "carries_evidence",
}
"""The bench's verdicts, the evidence truth and the case's family: an imported run is an observation, held to no
expectation and its records never seen (these are NULL, and `family` is `observed`; asserted below)."""
UNCARRIED = {"ablate", "plain_prompt"}
"""Run settings of the bench's own experiments that a trace does not carry (a control switched off, the plain loop's
prompt): unknown on import, NULL, never guessed."""
EXCLUDED = IDS | TIMINGS | VERDICT | UNCARRIED
# `observation_bytes` of a case run with a rejection is NULL on import (a rejection's answer has a size no event
# records) and compared everywhere else; `conclusion` is the Draft's text, message content: compared when the
# spans carry contents (`--otel-content`), NULL otherwise (asserted below).


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """Every built-in case run by the bench with the scripted model, each run's typed events also written to an
    event log by the library (`run_diagnosis(event_log=...)`, under the case run's own id)."""
    folder = tmp_path_factory.mktemp("import")
    db = folder / "bench.duckdb"
    log = io.StringIO()
    cases = {task_of(c): c.id for c in load_cases()}

    def logged(task: Any, tools: Any, model: Any, *, ctx: Any, **kw: Any) -> Any:
        ctx = dataclasses.replace(ctx, run_id=f"orig/{cases[task]}/1")
        return run_diagnosis(task, tools, model, ctx=ctx, event_log=log, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(execute, "loop_for", lambda agent: logged)
        assert main(["run", "--db", str(db), "--label", "orig"]) == 0
    (folder / "events.jsonl").write_text(log.getvalue(), encoding="utf-8")
    yield db, folder / "events.jsonl"


Rows = dict[tuple[Any, ...], dict[str, Any]]
TABLES = ("case_runs", "tool_calls", "events")
"""The tables compared."""


def _rows(db: Path, table: str) -> Rows:
    con = open_read_only(db)
    try:
        return _rows_of(con, table)
    finally:
        con.close()


def _tables(db: Path) -> dict[str, Rows]:
    """The rows of every compared table, read over one connection."""
    con = open_read_only(db)
    try:
        return {table: _rows_of(con, table) for table in TABLES}
    finally:
        con.close()


def _rows_of(con: duckdb.DuckDBPyConnection, table: str) -> Rows:
    cur = con.execute(f"SELECT * FROM {table}")
    names = [d[0] for d in cur.description or ()]
    rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    out = {}
    for r in rows:
        case, epoch = str(r["case_run_id"]).split("/")[-2:]
        key = (case, epoch, r.get("seq")) if table != "case_runs" else (case, epoch)
        assert key not in out
        out[key] = r
    return out


@pytest.fixture(scope="module")
def original(bench: tuple[Path, Path]) -> dict[str, Rows]:
    """The bench run's rows, read once: the file is only read after the fixture wrote it."""
    return _tables(bench[0])


def _same(original: dict[str, Rows], imported: Path, *, contents: bool) -> dict[str, Rows]:
    """The imported rows are the `original` rows, column by column, but for `EXCLUDED` (and what the comments say);
    returns the imported rows."""
    rows = _tables(imported)
    for table in TABLES:
        a, b = original[table], rows[table]
        assert set(a) == set(b), (table, set(a) ^ set(b))
        for key, row in a.items():
            got = b[key]
            assert set(row) == set(got)
            for column in set(row) - EXCLUDED:
                if table == "case_runs" and column == "observation_bytes" and got["tool_rejections"]:
                    assert got[column] is None, key
                elif table == "case_runs" and column == "conclusion" and not contents:
                    assert got[column] is None, key
                else:
                    assert got[column] == row[column], (table, key, column, row[column], got[column])
            if table == "case_runs":
                assert all(got[c] is None for c in UNCARRIED & set(got)), key
                verdict = ("family", "passed", "outcome_passed", "trajectory_passed", "expected_outcome", "failures")
                assert tuple(got[c] for c in verdict) == ("observed", None, None, None, None, None)
            if table == "tool_calls":
                assert got["carries_evidence"] is None, key
    return rows


def _import(traces: Path, db: Path, label: str = "imp") -> int:
    return main(["import", str(traces), "--db", str(db), "--label", label])


@pytest.fixture(scope="module")
def exported(bench: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    db, _ = bench
    folder = tmp_path_factory.mktemp("exported")
    out = {"contents": folder / "contents.jsonl", "plain": folder / "plain.jsonl"}
    assert main(["export", "--db", str(db), "--otel", str(out["contents"]), "--otel-content"]) == 0
    assert main(["export", "--db", str(db), "--otel", str(out["plain"])]) == 0
    return out


@pytest.fixture(scope="module")
def imports(exported: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """`exported[which]` imported into an empty database, once for the module: the tests only read it."""
    folder = tmp_path_factory.mktemp("imported")
    done: dict[str, Path] = {}

    def imported(which: str) -> Path:
        if which not in done:
            db = folder / f"{which}.duckdb"
            assert _import(exported[which], db) == 0
            done[which] = db
        return done[which]

    return imported


@pytest.mark.parametrize("which", ["contents", "plain"])
def test_exported_spans_imported_give_the_original_rows(
    original: dict[str, Rows], imports: Callable[[str], Path], which: str
) -> None:
    db = imports(which)
    rows = _same(original, db, contents=which == "contents")
    assert len(rows["case_runs"]) == len(load_cases())  # every built-in case
    con = open_read_only(db)
    try:
        bench_runs = con.execute("SELECT source, status, label FROM bench_runs").fetchall()
    finally:
        con.close()
    assert bench_runs == [("imported", "completed", "imp")]


def test_the_event_log_imported_gives_the_original_rows(
    bench: tuple[Path, Path], original: dict[str, Rows], tmp_path: Path
) -> None:
    db = tmp_path / "imported.duckdb"
    assert _import(bench[1], db) == 0
    rows = _same(original, db, contents=False)
    assert len(rows["case_runs"]) == len(load_cases())


def test_the_comparison_bites(original: dict[str, Rows], exported: dict[str, Path], tmp_path: Path) -> None:
    """A changed gain in the spans is a changed row (the comparison is not vacuous)."""
    changed = tmp_path / "changed.jsonl"
    text = exported["plain"].read_text(encoding="utf-8")
    assert '"stringValue":"GAINED"' in text
    changed.write_text(text.replace('"stringValue":"GAINED"', '"stringValue":"NO_GAIN"', 1), encoding="utf-8")
    db = tmp_path / "imported.duckdb"
    assert _import(changed, db) == 0
    with pytest.raises(AssertionError):
        _same(original, db, contents=False)


def test_show_and_whatif_read_an_imported_run(
    bench: tuple[Path, Path], imports: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = imports("contents")
    con = open_read_only(db)
    (case_run,) = con.execute("SELECT case_run_id FROM case_runs WHERE case_id LIKE 'diagnosable%' LIMIT 1").fetchone()
    con.close()
    capsys.readouterr()
    assert main(["show", "--db", str(db), case_run]) == 0
    shown = capsys.readouterr().out
    assert "OUTCOME SUCCESS" in shown and "TOOL CALL" in shown and "Harness: ADMITTED" in shown
    assert "expected nothing: an observed run" in shown and "passed: no verdict (observed run)" in shown
    assert main(["report", "--db", str(db), "--out", str(tmp_path / "report")]) == 0
    assert "| observed | " in (tmp_path / "report" / "report.md").read_text()
    assert "nan" not in (tmp_path / "report" / "report.md").read_text()
    # the what-if of the imported run is the original's, run by run (contents carried: the conclusions too)
    original, imported = tmp_path / "w0.json", tmp_path / "w1.json"
    argv = ["whatif", "--no-gain-threshold", "1", "--json"]
    assert main([*argv, str(original), "--db", str(bench[0]), "--label", "orig"]) == 0
    assert main([*argv, str(imported), "--db", str(db), "--label", "imp"]) == 0

    def runs(path: Path) -> list[Any]:
        data = json.loads(path.read_text())
        for point in data["points"]:
            for run in point["per_run"]:
                run.pop("case_run_id", None)
        return list(data["points"])

    assert runs(original) == runs(imported)
    assert any(p["runs_cut"] for p in runs(imported))


# -- bad traces ----------------------------------------------------------------------------------------------------
def _one_line_exit_2(traces: Path, db: Path, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert _import(traces, db) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def _digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def _line(text: str, n: int) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(text.splitlines()[n])
    return data


def _spans_of(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for rs in request["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def _op(span: dict[str, Any]) -> str:
    return next(a["value"]["stringValue"] for a in span["attributes"] if a["key"] == "gen_ai.operation.name")


def _drop_chat(req: dict[str, Any]) -> str:
    spans = req["resourceSpans"][0]["scopeSpans"][0]["spans"]
    chat = next(s for s in spans if _op(s) == "chat")
    spans.remove(chat)
    return "harness.seq"


def _drop_root(req: dict[str, Any]) -> str:
    spans = req["resourceSpans"][0]["scopeSpans"][0]["spans"]
    root = next(s for s in spans if _op(s) == "invoke_agent")
    spans.remove(root)
    return root["spanId"]


def _unknown_attribute(req: dict[str, Any]) -> str:
    span = _spans_of(req)[0]
    span["attributes"].append({"key": "harness.mystery", "value": {"intValue": "1"}})
    return "harness.mystery"


def _bad_enum(req: dict[str, Any]) -> str:
    for span in _spans_of(req):
        for a in span["attributes"]:
            if a["key"] == "harness.invocation_status":
                a["value"] = {"stringValue": "EXPLODED"}
                return span["spanId"]
    raise AssertionError("no execute_tool span")


def _no_release(req: dict[str, Any]) -> str:
    root = next(s for s in _spans_of(req) if _op(s) == "invoke_agent")
    root["attributes"] = [a for a in root["attributes"] if a["key"] != "harness.outcome"]
    return "harness.outcome"


BAD_OTLP: dict[str, Callable[[dict[str, Any]], str]] = {
    "a chat span missing": _drop_chat,
    "the run span missing (cut off)": _drop_root,
    "an unknown attribute": _unknown_attribute,
    "a value not of its type": _bad_enum,
    "a run never released": _no_release,
}


@pytest.mark.parametrize("mutation", sorted(BAD_OTLP))
def test_a_bad_span_trace_is_one_line_exit_2_and_nothing_written(
    exported: dict[str, Path], mutation: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = exported["plain"].read_text(encoding="utf-8").splitlines()
    request = json.loads(lines[3])
    needle = BAD_OTLP[mutation](request)
    lines[3] = json.dumps(request)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    db = tmp_path / "absent.duckdb"
    message = _one_line_exit_2(bad, db, capsys)
    assert f"{bad}:4:" in message and needle in message, message
    assert not db.exists() and not Path(f"{db}.wal").exists()


def test_a_bad_trace_leaves_an_existing_database_byte_identical(
    bench: tuple[Path, Path], exported: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "existing.duckdb"
    shutil.copyfile(bench[0], db)
    before = _digest(db)
    bad = tmp_path / "bad.jsonl"
    text = exported["plain"].read_text(encoding="utf-8")
    bad.write_text(text[: len(text) // 2], encoding="utf-8")  # cut off mid-line
    assert "not JSON (Unterminated string)" in _one_line_exit_2(bad, db, capsys)
    assert _digest(db) == before


def _event_log_cases(text: str) -> dict[str, tuple[str, str]]:
    """Bad event logs: the text, and what the one line must name."""
    lines = text.splitlines()
    first_run = json.loads(lines[0])["run_id"]
    own = [i for i, line in enumerate(lines) if json.loads(line)["run_id"] == first_run]
    cut = [line for i, line in enumerate(lines) if i != own[-1]]  # its RELEASED gone
    gap = [line for i, line in enumerate(lines) if i != own[2]]
    twice = [*lines[: own[-1] + 1], lines[own[1]], *lines[own[-1] + 1 :]]  # an event after its RELEASED
    unknown = json.loads(lines[own[1]])
    unknown["event"]["mystery"] = 1
    deep = "[" * 100_000 + "]" * 100_000
    return {
        "cut off": ("\n".join(cut), f"run {first_run}: cut off"),
        "an event missing": ("\n".join(gap), f":{own[2] + 1}: run {first_run}: event seq 3 where seq 2"),
        "two runs under one id": ("\n".join(twice), f":{own[-1] + 2}: run {first_run}:"),
        "an unknown field": ("\n".join([lines[0], json.dumps(unknown)]), ":2: run"),
        "malformed JSON": (lines[0] + "\n" + lines[1][:-3], ":2: not an event-log line"),
        "deep JSON": (lines[0] + "\n" + deep, ":2: not an event-log line"),
        "deep JSON first": (deep, ":1: JSON nested too deep"),
    }


@pytest.mark.parametrize(
    "which", ["cut off", "an event missing", "two runs under one id", "an unknown field", "malformed JSON",
              "deep JSON", "deep JSON first"],
)  # fmt: skip
def test_a_bad_event_log_is_one_line_exit_2_and_nothing_written(
    bench: tuple[Path, Path], which: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, needle = _event_log_cases(bench[1].read_text(encoding="utf-8"))[which]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(text + "\n", encoding="utf-8")
    db = tmp_path / "absent.duckdb"
    message = _one_line_exit_2(bad, db, capsys)
    assert str(bad) in message and needle in message, message
    assert not db.exists()


def test_deep_json_in_spans_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "deep.jsonl"
    deep = "[" * 100_000 + "]" * 100_000
    span = '{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": ' + deep + "}]}]}]}"
    bad.write_text('{"resourceSpans": []}\n' + span + "\n")
    assert ":2: JSON nested too deep" in _one_line_exit_2(bad, tmp_path / "absent.duckdb", capsys)
    bad.write_text('{"resourceSpans": []}\n{"resourceSpans": ' + deep + "}\n")  # where a resourceSpans item is due
    message = _one_line_exit_2(bad, tmp_path / "x.duckdb", capsys)
    assert ":2: not JSON (a resourceSpans item: an object expected" in message


# -- mutations -----------------------------------------------------------------------------------------------------
def _mutate(request: Any, data: st.DataObject) -> Any:
    """One random change to a request: a span, a span event or an attribute removed, duplicated or changed."""
    spans = _spans_of(request)
    span = data.draw(st.sampled_from(spans))
    how = data.draw(st.sampled_from(["drop span", "duplicate span", "drop event", "drop attribute", "rename key",
                                     "retype value", "reorder spans"]))  # fmt: skip
    if how == "drop span":
        spans_list = request["resourceSpans"][0]["scopeSpans"][0]["spans"]
        spans_list.remove(span)
    elif how == "duplicate span":
        request["resourceSpans"][0]["scopeSpans"][0]["spans"].append(span)
    elif how == "drop event" and span.get("events"):
        span["events"].pop(data.draw(st.integers(0, len(span["events"]) - 1)))
    elif how in ("drop attribute", "rename key", "retype value"):
        required = [
            a
            for a in span["attributes"]
            if a["key"] in ("harness.seq", "gen_ai.operation.name", "harness.outcome", "gen_ai.conversation.id")
        ]
        pool = required if how == "drop attribute" else span["attributes"]
        if pool:
            attr = data.draw(st.sampled_from(pool))
            if how == "drop attribute":
                span["attributes"].remove(attr)
            elif how == "rename key":
                attr["key"] = "harness." + data.draw(st.text("xyz_", min_size=3, max_size=8))
            else:
                attr["value"] = {"arrayValue": {"values": []}}
    elif how == "reorder spans":
        request["resourceSpans"][0]["scopeSpans"][0]["spans"].reverse()
    return request


@pytest.fixture(scope="module")
def small(exported: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], dict[str, Rows]]:
    """The first six case runs' spans, and the rows of their import (the reference)."""
    lines = exported["plain"].read_text(encoding="utf-8").splitlines()[:6]
    folder = tmp_path_factory.mktemp("small")
    (folder / "small.jsonl").write_text("\n".join(lines) + "\n")
    reference = folder / "reference.duckdb"
    assert _import(folder / "small.jsonl", reference) == 0
    return lines, _tables(reference)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
)  # shrinking a 150 kB request takes minutes
@given(data=st.data())
def test_a_mutated_export_imports_whole_and_equal_or_not_at_all(
    small: tuple[list[str], dict[str, Rows]], data: st.DataObject, tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    lines, reference = small
    lines = list(lines)
    at = data.draw(st.integers(0, len(lines) - 1))
    if data.draw(st.booleans()):
        lines[at] = json.dumps(_mutate(json.loads(lines[at]), data))
    else:  # the line cut short
        lines[at] = lines[at][: data.draw(st.integers(1, len(lines[at]) - 1))]
    folder = tmp_path_factory.mktemp("mutated")
    traces, db = folder / "m.jsonl", folder / "m.duckdb"
    traces.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    code = _import(traces, db)
    err = capsys.readouterr().err.strip().splitlines()
    if code == 0:
        _same(reference, db, contents=False)  # the mutation changed nothing the rows hold (e.g. span order)
    else:
        assert code == 2 and len(err) == 1 and str(traces) in err[0], (code, err)
        assert not db.exists()


def test_a_version_7_file_migrates_its_bench_runs_to_source_null(bench: tuple[Path, Path], tmp_path: Path) -> None:
    """Schema v8 adds `bench_runs.source`; runs written before it were run by the bench (NULL)."""
    from runners.store.connection import connect
    from runners.store.migrations import SCHEMA_VERSION, migrate

    old = tmp_path / "v7.duckdb"
    con = duckdb.connect(str(old))
    migrate(con, str(old), upto=7)
    con.execute("INSERT INTO bench_runs (bench_run_id, status) VALUES ('br-old', 'completed')")
    con.close()
    con = connect(old)
    try:
        assert con.execute("SELECT max(version) FROM schema_version").fetchone() == (SCHEMA_VERSION,)
        assert con.execute("SELECT bench_run_id, source FROM bench_runs").fetchall() == [("br-old", None)]
    finally:
        con.close()


def _other_ids(request: dict[str, Any]) -> dict[str, Any]:
    """The same request under other span ids (the same run recorded twice)."""
    text = json.dumps(request)
    for span in _spans_of(request):
        text = text.replace(span["spanId"], f"{int(span['spanId'], 16) ^ (2**64 - 1):016x}")
    out: dict[str, Any] = json.loads(text)
    return out


@pytest.mark.parametrize("how", ["the same spans twice", "one run id on two run spans"])
def test_two_runs_under_one_id_are_one_line_exit_2(
    exported: dict[str, Path], how: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = exported["plain"].read_text(encoding="utf-8").splitlines()[:5]
    again = lines[2] if how == "the same spans twice" else json.dumps(_other_ids(json.loads(lines[2])))
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([*lines, again]) + "\n", encoding="utf-8")
    message = _one_line_exit_2(bad, tmp_path / "absent.duckdb", capsys)
    needle = "appears twice (also line 3)" if how == "the same spans twice" else "two runs interleaved under one id"
    assert f"{bad}:" in message and needle in message, message
    assert not (tmp_path / "absent.duckdb").exists()


def _stored(db: Path) -> tuple[list[Any], dict[str, Rows]]:
    """The bench runs of `db`, and the rows of every compared table, over one connection."""
    con = open_read_only(db)
    try:
        return con.execute("SELECT bench_run_id FROM bench_runs").fetchall(), {t: _rows_of(con, t) for t in TABLES}
    finally:
        con.close()


def _full_disk(*args: Any, **kwargs: Any) -> None:
    raise duckdb.IOException("No space left on device")


def test_a_storage_failure_mid_import_leaves_nothing(
    bench: tuple[Path, Path], exported: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """The bench run's row and its case runs' rows are one transaction: a failure after the row is inserted (the
    transcripts, written last) keeps none of them; a database the import created is removed."""
    from runners.store import writer

    monkeypatch.setattr(writer, "_write_transcripts", _full_disk)
    existing = tmp_path / "existing.duckdb"
    shutil.copyfile(bench[0], existing)
    before = _stored(existing)
    assert _import(exported["plain"], existing) == 74
    assert _stored(existing) == before
    created = tmp_path / "new.duckdb"
    assert _import(exported["plain"], created) == 74
    assert not created.exists() and not Path(f"{created}.wal").exists()
    assert "No space left on device" in capsys.readouterr().err


def test_two_bench_runs_of_one_case_in_one_file_become_two_epochs(exported: dict[str, Path], tmp_path: Path) -> None:
    line = exported["plain"].read_text(encoding="utf-8").splitlines()[0]
    other = json.dumps(_other_ids(json.loads(line)))
    bench_id = json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"][-1]
    conversation = next(
        a["value"]["stringValue"] for a in bench_id["attributes"] if a["key"] == "gen_ai.conversation.id"
    )
    other = other.replace(conversation, "br-elsewhere/" + conversation.split("/", 1)[1])
    traces, db = tmp_path / "two.jsonl", tmp_path / "two.duckdb"
    traces.write_text(line + "\n" + other + "\n", encoding="utf-8")
    assert _import(traces, db) == 0
    rows = _rows(db, "case_runs")
    assert sorted(epoch for _, epoch in rows) == ["1", "2"] and len({case for case, _ in rows}) == 1


def test_whatif_on_runs_whose_trace_names_no_limits_is_one_line(
    exported: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A producer that does not record `harness.config.*`: imported (thresholds NULL), and `whatif` says it cannot
    know, in one line, exit 2."""
    import re

    lines = exported["plain"].read_text(encoding="utf-8").splitlines()[:3]
    traces, db = tmp_path / "nolimits.jsonl", tmp_path / "nolimits.duckdb"
    pattern = r'\{"key":"harness\.config\.[a-z_]+","value":\{"[a-zA-Z]+":"?[^"}]*"?\}\},'
    traces.write_text("\n".join(re.sub(pattern, "", line) for line in lines) + "\n", encoding="utf-8")
    assert "harness.config" not in traces.read_text()
    assert _import(traces, db) == 0
    assert {r["no_gain_threshold"] for r in _rows(db, "case_runs").values()} == {None}
    capsys.readouterr()
    assert main(["whatif", "--db", str(db), "--label", "imp", "--no-gain-threshold", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no recorded thresholds and budgets" in err[0], err


class _SignalAt:
    """A connection that sends this process SIGINT at one point of the import's last step: the COMMIT of the
    transaction that holds the bench run's row, or the close (DuckDB's checkpoint) after it."""

    def __init__(self, con: duckdb.DuckDBPyConnection, where: str) -> None:
        self._con, self._where, self._bench_row = con, where, False

    def execute(self, sql: str, *args: Any) -> Any:
        self._bench_row = self._bench_row or sql.startswith("INSERT INTO bench_runs")
        if sql == "COMMIT" and self._bench_row and self._where == "commit":
            os.kill(os.getpid(), signal.SIGINT)
        return self._con.execute(sql, *args)

    def close(self) -> None:
        if self._where == "close" and self._bench_row:
            os.kill(os.getpid(), signal.SIGINT)
        self._con.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


@pytest.mark.parametrize("where", ["commit", "close"])
@pytest.mark.parametrize("fresh", [True, False], ids=["new-db", "existing-db"])
def test_an_interrupt_during_the_final_commit_lets_it_finish_and_says_so(
    bench: tuple[Path, Path], exported: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], where: str, fresh: bool,
) -> None:  # fmt: skip
    """Ctrl-C once the import's transaction is being committed (or its file closed, DuckDB's checkpoint) cannot
    make it untrue: the commit finishes, every case run is stored, and the command says it imported them (exit 0)
    — never "interrupted" over rows that are there, nor a new database removed with them.

    The first six case runs' spans: the import stages up to 200 case runs a batch and then copies them in one
    transaction, so six go the way every built-in one would, at a fraction of the cost (four imports here)."""
    from runners.store import connection

    runs = exported["plain"].read_text(encoding="utf-8").splitlines()[:6]
    traces = tmp_path / "six.jsonl"
    traces.write_text("\n".join(runs) + "\n", encoding="utf-8")
    real = connection.connect
    monkeypatch.setattr(connection, "connect", lambda *a, **kw: _SignalAt(real(*a, **kw), where))
    db = tmp_path / "into.duckdb"
    if not fresh:
        shutil.copyfile(bench[0], db)
    assert _import(traces, db) == 0
    out, err = capsys.readouterr()
    lines = " ".join(out.split())  # the terminal's width wraps the line
    imported = f"imported {len(runs)} case runs"
    assert "interrupted" not in (out + err).splitlines() and lines.startswith(imported), out + err
    assert "SIGINT came while the import was being committed: it was let finish" in lines, out
    con = open_read_only(db)
    try:
        assert con.execute("SELECT count(*) FROM case_runs WHERE bench_run_id IN (SELECT bench_run_id FROM"
                           " bench_runs WHERE label = 'imp')").fetchone() == (len(runs),)  # fmt: skip
    finally:
        con.close()
    assert not list(tmp_path.glob(".harness-bench-import-*")), "the staging folder is removed"


def _seq(attrs: list[dict[str, Any]]) -> int:
    return int(next((a["value"]["intValue"] for a in attrs if a["key"] == "harness.seq"), -1))


def test_a_run_missing_its_last_span_event_is_refused(
    exported: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The last span event before RELEASED dropped (here a budget stop) leaves no gap in `harness.seq` (RELEASED
    takes the next number): the run span's budget stop says it is missing."""
    lines = exported["plain"].read_text(encoding="utf-8").splitlines()
    for n, line in enumerate(lines):
        request = json.loads(line)
        spans = _spans_of(request)
        root = next(s for s in spans if _op(s) == "invoke_agent")
        events = [e for e in root.get("events", []) if e["name"].startswith("harness.")]
        last_event = max(events, key=lambda e: _seq(e["attributes"]), default=None)
        last_span = max((_seq(s["attributes"]) for s in spans if s is not root), default=-1)
        if (
            last_event
            and last_event["name"] == "harness.budget_exhausted"
            and _seq(last_event["attributes"]) > last_span
        ):
            root["events"].remove(last_event)
            lines[n] = json.dumps(request)
            break
    else:
        raise AssertionError("no run ends with a budget stop")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    message = _one_line_exit_2(bad, tmp_path / "absent.duckdb", capsys)
    assert f"{bad}:{n + 1}:" in message and "harness.budget_hit 'MODEL_CALLS' where no budget_exhausted" in message


def test_a_run_whose_token_sums_disagree_with_its_chat_spans_is_refused(
    exported: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = exported["plain"].read_text(encoding="utf-8").splitlines()
    request = json.loads(lines[0])
    root = next(s for s in _spans_of(request) if _op(s) == "invoke_agent")
    tokens = next(a for a in root["attributes"] if a["key"] == "gen_ai.usage.input_tokens")
    tokens["value"] = {"intValue": str(int(tokens["value"]["intValue"]) + 1)}
    lines[0] = json.dumps(request)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    message = _one_line_exit_2(bad, tmp_path / "absent.duckdb", capsys)
    assert f"{bad}:1:" in message and "gen_ai.usage.input_tokens" in message and "chat span missing?" in message
