"""Transcripts as data: stored for every case run, shown, diffed, named by the gate, exported to Inspect AI.

Real components throughout: DuckDB files written by `harness-bench run`, the CLI, the real openai SDK
over HTTP to the project's simulator on 127.0.0.1 with vcrpy cassettes as the request log.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import duckdb
import pytest
import yaml

from harness.agent import run_diagnosis
from harness.contracts import ModelErrorKind
from harness.models.base import AssistantMessage, ChatRequest, ModelCallError, ModelResponse, Usage
from harness.prompts import DiagnosisTask
from harness.transcript import EntryKind
from runners.cli import main
from runners.decisions.gate import Pair, evaluate
from runners.domain.evalset import BUILTIN_DIR, load_cases
from runners.domain.profiles import trajectory_for_model
from runners.endpoints.simulator import SimulatorServer
from runners.plan.options import BenchOptions
from runners.plan.settings import ModelSettings
from runners.rendering.gate import markdown_section
from runners.run.bench import plan_run, run_bench
from runners.store.transcripts import REDACTED, check_against_requests, load_case_run, observations
from tests._db import open_read_only

ROOT = Path(__file__).resolve().parents[3]
EMPTY = "empty_logs_gateway_timeout_t1"
QUESTION = "Payments for tenant t1 timed out around 14:00 on July 1st, why?"


def _one_run(db: Path, *extra: str) -> str:
    assert main(["run", "--db", str(db), "--case", EMPTY, *extra]) == 0
    con = open_read_only(db)
    try:
        row = con.execute("SELECT case_run_id FROM case_runs ORDER BY finished_at DESC LIMIT 1").fetchone()
    finally:
        con.close()
    assert row is not None
    return str(row[0])


@pytest.fixture(scope="module")
def one_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A database holding one case run of EMPTY, and its id: the tests given it only read it."""
    db = tmp_path_factory.mktemp("one") / "t.duckdb"
    return db, _one_run(db)


def _refused(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err
    assert needle in lines[0], lines[0]
    assert captured.out == ""
    return lines[0]


def test_show_prints_question_tool_calls_observations_stop_required_and_outcome(
    one_run: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    db, run_id = one_run
    bench_run = run_id.split("/")[0]
    capsys.readouterr()
    assert main(["show", "--db", str(db), "--bench-run", bench_run, "--case", EMPTY]) == 0
    text = capsys.readouterr().out
    assert QUESTION in text
    assert text.count("TOOL CALL log_search") == 2
    assert '"keyword": "timeout"' in text and '"level": "ERROR"' in text  # each call's raw arguments
    assert "Harness: ADMITTED → COMPLETED NO_EVIDENCE" in text and "gain NO_GAIN (harness)" in text
    assert "[STOP_REQUIRED]" in text and '"control":"STOP_REQUIRED"' in text
    assert "DRAFT" in text and '"conclusion": null' in text
    assert "OUTCOME FALLBACK/INSUFFICIENT_EVIDENCE   stop reason INFORMATION_SATURATED" in text.replace("\n", " ")
    assert max(len(line) for line in text.splitlines()) <= 80
    # the same case run by its id, and the stored observations are the tool messages the model was sent
    assert main(["show", "--db", str(db), run_id]) == 0
    assert capsys.readouterr().out == text
    con = open_read_only(db)
    try:
        info = load_case_run(con, str(db), run_id)
    finally:
        con.close()
    sent = observations(info.messages)
    assert len(sent) == 2 and "STOP_REQUIRED" in sent[1] and "STOP_REQUIRED" not in sent[0]


def test_show_html_is_one_self_contained_page(
    one_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, run_id = one_run
    page = tmp_path / "case.html"
    assert main(["show", "--db", str(db), run_id, "--html", str(page)]) == 0
    body = page.read_text()
    assert body.startswith("<!doctype html>") and "STOP_REQUIRED" in body and "log_search" in body
    assert "Payments for tenant t1 timed out" in body
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", body), "no external resource"


def test_no_transcripts_flag_stores_none_and_show_says_how_to_get_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "t.duckdb"
    run_id = _one_run(db, "--no-transcripts")
    con = open_read_only(db)
    try:
        assert con.execute("SELECT count(*) FROM messages").fetchone() == (0,)
        assert con.execute("SELECT transcripts FROM bench_runs").fetchone() == (False,)
    finally:
        con.close()
    line = _refused(["show", "--db", str(db), run_id], "--no-transcripts", capsys)
    assert f"harness-bench run --case {EMPTY} " in line and line.endswith(f" --db {db}")


def test_the_hint_of_a_run_without_transcripts_runs_the_same_case_again_with_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The printed command carries the run's evaluation set, model, label and settings: run as printed, it
    stores the same case under the same label and model, with its transcript, and `show --label` opens it."""
    db = tmp_path / "with space.duckdb"
    model = "scripted:sloppy?seed=3"
    argv = ["--evalset", "empty_logs", "--label", "cand", "--model", model, "--epochs", "2", "--max-tool-calls", "4"]
    assert main(["run", "--db", str(db), "--no-transcripts", *argv]) == 0
    (old_id,) = _q_one(db, "SELECT case_run_id FROM case_runs WHERE epoch = 2 ORDER BY case_id LIMIT 1")
    case = old_id.split("/")[1]
    line = _refused(["show", "--db", str(db), old_id], "--no-transcripts", capsys)
    hint = shlex.split(line.partition("without --no-transcripts: ")[2])
    assert hint[:2] == ["harness-bench", "run"] and "--no-transcripts" not in hint, line
    assert main(hint[1:]) == 0
    con = open_read_only(db)
    try:
        rows = con.execute(
            "SELECT c.label, b.model, b.transcripts, c.epoch, b.settings_json FROM case_runs c JOIN bench_runs b"
            " USING (bench_run_id) WHERE c.case_id = ? ORDER BY c.finished_at DESC LIMIT 1", [case]
        ).fetchone()  # fmt: skip
        old = con.execute("SELECT settings_json FROM bench_runs ORDER BY started_at LIMIT 1").fetchone()
    finally:
        con.close()
    assert rows is not None and old is not None
    assert rows[:4] == ("cand", model, True, 2) and rows[4] == old[0]
    capsys.readouterr()
    assert main(["show", "--db", str(db), "--label", "cand", "--case", case, "--epoch", "2"]) == 0
    assert "OUTCOME" in capsys.readouterr().out


def test_runs_read_at_once_are_each_run_as_read_alone(tmp_path: Path) -> None:
    """Runs of two bench runs (one without transcripts) read at once, an id asked for twice: each as read alone, in
    the order asked; the first that cannot be read is refused as it is alone."""
    from runners.store.transcripts import TranscriptError, load_case_runs

    db = tmp_path / "t.duckdb"
    assert main(["run", "--db", str(db), "--evalset", "empty_logs", "--model", "scripted"]) == 0
    bare = _one_run(db, "--no-transcripts")
    con = open_read_only(db)
    try:
        ids = [str(r[0]) for r in con.execute("SELECT case_run_id FROM case_runs WHERE case_run_id <> ?"
                                              " ORDER BY case_id", [bare]).fetchall()]  # fmt: skip
        asked = [ids[2], ids[0], ids[2], *ids[3:]]
        assert len(asked) > 3
        assert load_case_runs(con, str(db), asked) == [load_case_run(con, str(db), i) for i in asked]
        for wrong, alone in ((["br-nope/x/1"], "no case run 'br-nope/x/1'"), ([bare], "has no transcript")):
            with pytest.raises(TranscriptError) as at_once:
                load_case_runs(con, str(db), [ids[0], *wrong, ids[1]])
            assert alone in str(at_once.value)
            with pytest.raises(TranscriptError) as by_itself:
                load_case_run(con, str(db), wrong[0])
            assert str(at_once.value) == str(by_itself.value)
    finally:
        con.close()


def _q_one(db: Path, sql: str) -> tuple[str]:
    con = open_read_only(db)
    try:
        row = con.execute(sql).fetchone()
    finally:
        con.close()
    assert row is not None
    return (str(row[0]),)


def test_a_database_from_before_transcripts_is_named_and_then_migrated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "old.duckdb"
    run_id = _one_run(db)
    con = duckdb.connect(str(db))  # make it what the previous schema version wrote
    con.execute("DROP TABLE messages")
    con.execute("DROP TABLE prompts")
    con.execute("ALTER TABLE bench_runs DROP COLUMN transcripts")
    con.execute("DELETE FROM schema_version WHERE version >= 5")
    con.close()
    # read through an upgraded copy (the file itself is left as it is): the case run is named, with the fix
    line = _refused(["show", "--db", str(db), run_id], "written before transcripts were stored", capsys)
    assert "harness-bench run --case" in line and "--no-transcripts" not in line
    new_id = _one_run(db)  # the writer migrates the file; the new case run has its transcript
    assert main(["show", "--db", str(db), new_id]) == 0
    _refused(["show", "--db", str(db), run_id], "has no transcript", capsys)


def test_unknown_ids_are_one_line_exit_2(
    one_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, run_id = one_run
    bench_run = run_id.split("/")[0]
    _refused(["show", "--db", str(db), "br-nope/x/1"], "no case run 'br-nope/x/1'", capsys)
    _refused(["show", "--db", str(db), "--bench-run", "br-nope", "--case", EMPTY], "no such bench run", capsys)
    _refused(["show", "--db", str(db), "--bench-run", bench_run, "--case", "nope"], "--case nope", capsys)
    _refused(["show", "--db", str(db), "--bench-run", bench_run, "--case", EMPTY, "--epoch", "7"], "--epoch 7",
             capsys)  # fmt: skip
    _refused(["show", "--db", str(db)], "name the case run", capsys)
    _refused(["diff", "--db", str(db), bench_run, "no-such-label", "--case", EMPTY], "'no-such-label'", capsys)
    _refused(["show", "--db", str(tmp_path / "missing.duckdb"), run_id], "no such DuckDB file", capsys)


def test_show_refuses_a_bench_run_with_a_label_and_help_says_what_a_label_picks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--bench-run B --label OTHER` would show B's case run whatever OTHER is: refused, one line, exit 2. A label
    picks the newest case run of the case (and epoch), as `resolve_case_run` does, not a bench run."""
    db = tmp_path / "t.duckdb"
    bench_run = _one_run(db, "--label", "base").split("/")[0]
    _refused(["show", "--db", str(db), "--bench-run", bench_run, "--label", "other", "--case", EMPTY],
             f"give --bench-run '{bench_run}' or --label 'other', not both", capsys)  # fmt: skip
    for command in ("show", "diff"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert "newest bench run" not in text and "newest case run of" in text, text


def _custom_case(tmp_path: Path, question: str) -> Path:
    doc = yaml.safe_load((ROOT / "evalsets" / "empty_logs.yaml").read_text())
    case = next(c for c in doc["cases"] if c["id"] == EMPTY)
    case["id"] = "canary_case"
    case["question"] = question
    path = tmp_path / "canary.yaml"
    path.write_text(yaml.safe_dump({"cases": [case]}))
    return path


def test_secrets_never_land_in_the_transcript(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    canary = "hb-canary-key-7f3a9c2e51"
    monkeypatch.setenv("OPENAI_API_KEY", canary)  # the run's key variable (the default one)
    shaped = "sk-live0123456789abcdefXYZ"
    evalset = _custom_case(tmp_path, f"Why did tenant t1 time out? (the key {canary} and {shaped} were in the ticket)")
    db = tmp_path / "c.duckdb"
    assert main(["run", "--db", str(db), "--evalset", str(evalset)]) == 0
    con = open_read_only(db)
    try:
        dump = json.dumps(con.execute("SELECT * FROM messages").fetchall(), default=str)
        dump += json.dumps(con.execute("SELECT * FROM prompts").fetchall(), default=str)
    finally:
        con.close()
    assert canary not in dump and shaped not in dump
    assert REDACTED in dump and "Why did tenant t1 time out?" in dump


def test_merge_carries_transcripts_of_every_shard(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shards = []
    for i in (1, 2):
        db = tmp_path / f"s{i}.duckdb"
        argv = ["run", "--db", str(db), "--evalset", "empty_logs", "--shard", f"{i}/2", "--run-id", "ci7"]
        assert main(argv) == 0
        shards.append(db)
    out = tmp_path / "merged.duckdb"
    assert main(["merge", str(out), *map(str, shards)]) == 0
    assert main(["merge", str(out), *map(str, shards)]) == 0  # idempotent: nothing copied twice

    def counts(path: Path) -> tuple[int, int, int]:
        con = open_read_only(path)
        try:
            row = con.execute(
                "SELECT (SELECT count(*) FROM messages), (SELECT count(DISTINCT case_run_id) FROM messages),"
                " (SELECT count(*) FROM prompts)"
            ).fetchone()
        finally:
            con.close()
        assert row is not None
        return int(row[0]), int(row[1]), int(row[2])

    got = [counts(s) for s in shards]
    merged = counts(out)
    assert merged[0] == got[0][0] + got[1][0] and merged[1] == got[0][1] + got[1][1]
    assert merged[2] <= got[0][2] + got[1][2]  # the system prompt is stored once
    con = open_read_only(out)
    try:
        ids = [r[0] for r in con.execute("SELECT case_run_id FROM case_runs ORDER BY 1").fetchall()]
    finally:
        con.close()
    capsys.readouterr()
    for run_id in ids:
        assert main(["show", "--db", str(out), run_id]) == 0
    assert capsys.readouterr().out.count("OUTCOME ") == len(ids)


@pytest.fixture(scope="module")
def gate_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("gate") / "g.duckdb"
    older = str(BUILTIN_DIR / "diagnosable.yaml")  # ten cases: the summary lists every one that got worse
    assert main(["run", "--db", str(db), "--evalset", older, "--epochs", "3", "--label", "base"]) == 0
    assert main(["run", "--db", str(db), "--evalset", older, "--epochs", "3", "--label", "cand",
                 "--model", "scripted:eager"]) == 0  # fmt: skip
    return db


def test_a_failed_gate_names_its_cases_with_a_working_diff_command(
    gate_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summary, junit = tmp_path / "s.md", tmp_path / "j.xml"
    argv = ["gate", "--db", str(gate_db), "--baseline", "base", "--candidate", "cand", "--summary", str(summary),
            "--junit", str(junit)]  # fmt: skip
    assert main(argv) == 1
    md = summary.read_text()
    assert "### Cases that got worse" in md
    commands = re.findall(r"`(harness-bench diff [^`]+)`", md)
    assert commands, md
    con = open_read_only(gate_db)
    try:
        flipped = {r[0] for r in con.execute(
            "SELECT b.case_id FROM case_runs b JOIN case_runs c USING (case_id, epoch) WHERE b.label = 'base'"
            " AND c.label = 'cand' AND b.passed AND NOT c.passed").fetchall()}  # fmt: skip
    finally:
        con.close()
    listed = {re.search(r"--case (\S+)", c).group(1) for c in commands}  # type: ignore[union-attr]
    assert listed == flipped
    failure = ET.parse(junit).getroot().find("testcase/failure")  # the failed test carries the same list
    assert failure is not None and failure.text is not None
    assert all(c in failure.text for c in commands) and f"{len(commands)} case(s) worse" in failure.text
    # the printed command works as printed (split as a shell splits it, from the folder the gate ran in): the
    # program it names is this CLI, run here on the command's arguments
    argv_diff = shlex.split(commands[0])
    assert argv_diff[0] == "harness-bench", commands[0]
    capsys.readouterr()
    code = main(argv_diff[1:])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert ">>> first divergence at block" in out and "<<< DIVERGES" in out
    assert out.count("OUTCOME ") == 2 and "passed: NO" in out and "passed: yes" in out
    assert max(len(line) for line in out.splitlines()) <= 80


def test_diff_of_a_run_with_itself_has_no_divergence(gate_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    case = "diagnosable_late_order_deadlock_t4"
    capsys.readouterr()
    assert main(["diff", "--db", str(gate_db), "base", "base", "--case", case, "--epoch", "2"]) == 0
    assert "the two transcripts are the same turn for turn" in capsys.readouterr().out


def test_the_case_list_stops_at_its_limit_with_and_n_more() -> None:
    pairs = [Pair(f"c{i:02d}", "fam", e, True, i % 3 == 0, (1, 1, 1), (1, 1, 1)) for i in range(30) for e in (1, 2)]
    result = evaluate(pairs, "base", "cand", k=2)
    assert not result.passed
    text = markdown_section(result, "x.duckdb", limit=3)
    first = text.split("**")[2]
    assert first.count("harness-bench diff") == 3 and "and 17 more" in first


def test_report_lists_the_recommended_configurations_failing_cases(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    assert main(["sweep", "--db", str(db), "--evalset", "diagnosable", "--evalset", "empty_logs", "--epochs", "1",
                 "--model", "scripted:eager", "--no-gain-threshold", "1,2"]) == 0  # fmt: skip
    assert main(["report", "--db", str(db), "--sweep", "latest", "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "report.md").read_text()
    assert "## Failing cases at the recommended configuration" in md
    commands = re.findall(r"`(harness-bench show [^`]+)`", md)
    assert commands
    assert main(shlex.split(commands[0])[1:]) == 0


def test_live_transcripts_equal_the_tool_messages_the_server_received(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real openai SDK over HTTP to serve-sim on 127.0.0.1; the vcrpy cassette is the request log."""
    cases = load_cases()
    ids = [c.id for c in cases if c.family.value in ("empty_logs", "protocol_violations", "multi_call_turns")][:9]
    key = "sk-canary-transcripts-live-0000"
    monkeypatch.setenv("HB_SIM_KEY", key)
    cassettes = tmp_path / "cassettes"
    db = tmp_path / "live.duckdb"
    with SimulatorServer(cases, trajectory_for=trajectory_for_model) as sim:
        summary = run_bench(plan_run(BenchOptions.of(
            case_ids=ids, db=db,
            model_settings=ModelSettings(model="openai:scripted", base_url=sim.base_url, api_key_env="HB_SIM_KEY"),
            cassettes=cassettes, record_mode="once",
        )))  # fmt: skip
    assert summary.executed == len(ids) and not summary.infra_errors
    con = open_read_only(db)
    try:
        run_ids = [r[0] for r in con.execute("SELECT case_run_id FROM case_runs").fetchall()]
        infos = {load_case_run(con, str(db), r).row["case_id"]: load_case_run(con, str(db), r) for r in run_ids}
        assert key not in json.dumps(con.execute("SELECT * FROM messages").fetchall(), default=str)
    finally:
        con.close()
    bodies = [json.loads(i["request"]["body"]) for p in cassettes.rglob("*.json")
              for i in json.loads(p.read_text())["interactions"]]  # fmt: skip
    assert check_against_requests(db, [summary.bench_run_id], bodies) == []
    tampered = [{**b, "messages": [{**m, "content": m["content"] + " "} if m["role"] == "tool" else m
                                   for m in b["messages"]]} for b in bodies]  # fmt: skip
    assert len(check_against_requests(db, [summary.bench_run_id], tampered)) == sum(
        1 for i in infos.values() if observations(i.messages)
    )
    checked = 0
    for path in sorted(cassettes.rglob("*.json")):
        interactions = json.loads(path.read_text())["interactions"]
        bodies = [json.loads(i["request"]["body"]) for i in interactions]
        diagnosis = [b for b in bodies if "semantic-guard" not in json.dumps(b["messages"][0])]
        last = diagnosis[-1]["messages"]  # the conversation is append-only: the last request holds every message
        received = [m["content"] for m in last if m["role"] == "tool"]
        case_id = next(c for c in infos if c in str(path))
        stored = observations(infos[case_id].messages)
        assert stored == received, case_id
        assert [m["content"] for m in last if m["role"] == "system"] == [
            m.content for m in infos[case_id].messages if m.kind == "SYSTEM" and m.purpose == "DIAGNOSIS"
        ]
        checked += 1
    assert checked == len(ids)
    assert any("STOP_REQUIRED" in o for i in infos.values() for o in observations(i.messages))


def test_export_inspect_of_every_case_reads_back_with_every_sample(tmp_path: Path) -> None:
    log_api = pytest.importorskip("inspect_ai.log")
    db = tmp_path / "all.duckdb"
    summary = run_bench(plan_run(BenchOptions.of(db=db)))
    n = summary.executed
    assert n == len(load_cases())
    out = tmp_path / "logs"
    assert main(["export", "--db", str(db), "--inspect", str(out)]) == 0
    files = sorted(out.glob("*.eval"))
    assert len(files) == 1
    log = log_api.read_eval_log(str(files[0]))
    assert log.samples is not None and len(log.samples) == n
    for sample in log.samples:
        assert sample.messages and sample.messages[0].role == "system"
        assert sample.scores is not None and {"passed", "outcome", "stop_reason"} <= set(sample.scores)
        assert sample.target and sample.metadata["case_run_id"].endswith(f"/{sample.id}/{sample.epoch}")
    one = next(s for s in log.samples if s.id == EMPTY)
    tool_texts = [m.text for m in one.messages if m.role == "tool"]
    assert len(tool_texts) == 2 and "STOP_REQUIRED" in tool_texts[1]
    assert one.scores["stop_reason"].value == "INFORMATION_SATURATED"  # type: ignore[index]
    assert one.metadata["harness_decisions"][0]["invocation_status"] == "COMPLETED"
    assert one.model_usage["scripted"].total_tokens > 0
    assert log.results is not None and log.results.total_samples == n
    _inspect_view_serves(out, n)


def _inspect_view_serves(log_dir: Path, samples: int) -> None:
    """`inspect view` on 127.0.0.1 lists the log and serves it with every sample (what its pages load)."""
    import socket
    import time
    import urllib.parse
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = Path(sys.executable).parent / "inspect"
    view = subprocess.Popen([str(exe), "view", "--log-dir", str(log_dir), "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}/api"
        listing = None
        for _ in range(1200):  # a minute at most, asked every 50 ms (the server is up in a few seconds)
            try:
                with urllib.request.urlopen(f"{base}/log-files", timeout=5) as r:
                    listing = json.load(r)
                break
            except OSError:
                time.sleep(0.05)
        assert listing is not None, "inspect view did not start"
        (entry,) = listing["files"]
        assert entry["task"] == "harness-bench"
        with urllib.request.urlopen(f"{base}/logs/{urllib.parse.quote(entry['name'], safe='')}", timeout=60) as r:
            log = json.load(r)
        assert len(log["samples"]) == samples and log["eval"]["task"] == "harness-bench"
    finally:
        view.terminate()
        try:
            view.wait(10)
        except subprocess.TimeoutExpired:
            view.kill()
            view.wait(10)


class _FailsOnce:
    """A chat model whose first call fails with a retryable server error, then writes a Draft."""

    name = "fails-once"

    def __init__(self) -> None:
        self.calls = 0

    def complete(self, request: ChatRequest) -> ModelResponse:
        self.calls += 1
        if self.calls == 1:
            raise ModelCallError(ModelErrorKind.SERVER_ERROR, "HTTP 503 from the endpoint")
        draft = '{"conclusion": null, "missing_info": ["the tenant"]}'
        return ModelResponse(AssistantMessage(draft), Usage(11, 7), "stop")


def test_a_retried_call_is_one_error_entry_and_the_prompts_are_recorded_once() -> None:
    result = run_diagnosis(DiagnosisTask("Why did payments fail?"), [], _FailsOnce(), sleep=lambda _s: None)
    kinds = [(e.kind, e.model_call) for e in result.transcript]
    assert kinds == [(EntryKind.SYSTEM, 1), (EntryKind.USER, 1), (EntryKind.MODEL_ERROR, 1), (EntryKind.ASSISTANT, 2)]
    error, answer = result.transcript[2], result.transcript[3]
    assert error.error_kind is ModelErrorKind.SERVER_ERROR and "503" in (error.content or "")
    assert answer.input_tokens == 11 and answer.finish_reason == "stop" and "missing_info" in (answer.content or "")


def test_an_observation_the_run_never_sent_is_stored_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = "generic_kb_pool_guide_ignores_stop_settlement_t5"  # a tool call after STOP_REQUIRED: controlled stop
    db = tmp_path / "u.duckdb"
    assert main(["run", "--db", str(db), "--case", case]) == 0
    con = open_read_only(db)
    try:
        rows = con.execute("SELECT kind, sent, model_call FROM messages WHERE sent = false").fetchall()
        (run_id,) = con.execute("SELECT case_run_id FROM case_runs").fetchone()  # type: ignore[misc]
    finally:
        con.close()
    assert rows == [("OBSERVATION", False, 0)]
    capsys.readouterr()
    assert main(["show", "--db", str(db), run_id]) == 0
    text = capsys.readouterr().out
    assert "produced but never sent (the run ended first)" in text and "(never sent)" in text


def test_worker_processes_store_the_same_transcripts_as_threads(tmp_path: Path) -> None:
    def stored(db: Path) -> list[tuple[object, ...]]:
        con = open_read_only(db)
        try:
            return con.execute(
                "SELECT split_part(case_run_id, '/', 2), seq, kind, content, prompt_hash, arguments, invocation_status,"
                " gain, sent FROM messages ORDER BY 1, 2"
            ).fetchall()
        finally:
            con.close()

    local, procs = tmp_path / "local.duckdb", tmp_path / "procs.duckdb"
    assert main(["run", "--db", str(local), "--evalset", "empty_logs"]) == 0
    assert main(["run", "--db", str(procs), "--evalset", "empty_logs", "--executor", "processes",
                 "--concurrency", "2"]) == 0  # fmt: skip
    rows = stored(local)
    assert rows and stored(procs) == rows
