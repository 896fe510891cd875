"""The one redaction boundary (runners/domain/redaction.py): the run's key value and the base URL's credentials,
planted in a case (question, fixtures), in the model's answers (tool arguments, the Draft) and in the URL, are
found in no file any command writes and on no output stream — and the same scan finds them everywhere when the
redaction is switched off (the test bites)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

import runners.domain.redaction as redaction
from runners.cli import main
from runners.domain.evalset import load_cases
from runners.domain.redaction import REDACTED, Secrets, redact, safe_url
from runners.endpoints.simulator import SimulatorServer
from tests._db import open_read_only

ROOT = Path(__file__).resolve().parents[2]
KEY = "Zq7CanaryKeyValue42x"  # not shaped like a key: found by its value, not by a pattern
USER, PASSWORD = "canaryuser1", "S3kretCanaryPw"
NEEDLES = (KEY, USER, PASSWORD)
CASE = "canary_secrets_everywhere"


# -- the redaction itself -------------------------------------------------------------------------------
_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


@given(before=_text, after=_text, upper=st.booleans())
def test_the_key_is_redacted_in_any_text_in_any_case(before: str, after: str, upper: bool) -> None:
    secrets = Secrets.known(KEY)
    out = redact(before + (KEY.upper() if upper else KEY.lower()) + after, secrets)
    assert KEY.lower() not in out.lower()
    assert REDACTED in out


def test_escaped_spellings_and_shapes_are_redacted() -> None:
    secret = 'pa"ss/wo rd'  # quotes and slashes: JSON- and URL-escaped spellings differ from the raw one
    secrets = Secrets.known(secret)
    for text in (json.dumps(secret), json.dumps(json.dumps(secret)), "pa%22ss%2Fwo%20rd"):
        assert redact(text, secrets).count(REDACTED) == 1, text
    assert (
        redact("http://u:p@host/v1 and https://tok@h:8/x") == f"http://{REDACTED}@host/v1 and https://{REDACTED}@h:8/x"
    )
    assert redact("Authorization: Bearer abcdefghijklmnopqrstuvwxyz") == f"Authorization: {REDACTED}"
    assert redact("authorization: bEaReR abcdefghijklmnopqrstuvwxyz") == f"authorization: {REDACTED}"
    assert redact("key sk-abcdefghijklmnopqrstuv") == f"key {REDACTED}"
    assert redact("mail ops@example.com at 14:00") == "mail ops@example.com at 14:00"  # no URL, no user info


def test_short_values_are_not_searched_for() -> None:
    """A key like `unused` (the model-gate workflow's `OPENAI_API_KEY: unused`) must not eat the word everywhere."""
    assert Secrets.known("unused", "x").values == ()
    assert redact("unused", Secrets.known("unused")) == "unused"


def test_the_run_secrets_come_from_the_key_variable_and_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HB_CANARY_KEY", KEY)
    secrets = Secrets.of(f"http://{USER}:{PASSWORD}@127.0.0.1:9/v1", "HB_CANARY_KEY")
    assert {KEY, USER, PASSWORD} <= set(secrets.values)
    assert Secrets.of("not a url at all", "HB_UNSET_VARIABLE").values == ()


@pytest.mark.parametrize(
    ("url", "stored"),
    [
        (f"http://{USER}:{PASSWORD}@127.0.0.1:8765/v1", "http://127.0.0.1:8765/v1"),
        ("https://token@api.example.com/openai/v1?key=abc#frag", "https://api.example.com/openai/v1"),
        ("http://[::1]:8080/v1", "http://[::1]:8080/v1"),
        ("http://LocalHost:8765/v1/", "http://LocalHost:8765/v1/"),  # nothing to remove: kept exactly
        (None, None),
    ],
)
def test_a_stored_base_url_keeps_scheme_host_port_and_path(url: str | None, stored: str | None) -> None:
    assert safe_url(url) == stored


# -- the scan -------------------------------------------------------------------------------------------
def _texts(path: Path) -> Iterator[str]:
    """Everything a written file holds, as text: every cell of a DuckDB file, an Inspect log's content."""
    if path.suffix == ".duckdb":
        con = open_read_only(path)
        try:
            tables = con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'"
            ).fetchall()
            for (table,) in tables:
                yield json.dumps(con.execute(f'SELECT * FROM "{table}"').fetchall(), default=str, ensure_ascii=False)
        finally:
            con.close()
        yield path.read_bytes().decode("latin-1")
    elif path.suffix == ".eval":
        from inspect_ai.log import read_eval_log

        yield read_eval_log(str(path)).model_dump_json()
    else:
        yield path.read_bytes().decode("utf-8", "replace")


def leaks(root: Path, streams: dict[str, str], needles: tuple[str, ...] = NEEDLES) -> list[str]:
    """Where any needle occurs (case-insensitively) in a file under `root` or an output stream."""
    found: list[str] = []
    sources = [(name, text) for name, text in streams.items()]
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        sources += [(str(path.relative_to(root)), text) for text in _texts(path)]
    for name, text in sources:
        low = text.lower()
        found += [f"{name}: {n}" for n in needles if n.lower() in low]
    return sorted(set(found))


def test_the_scanner_sees_a_planted_secret(tmp_path: Path) -> None:
    """The scan bites: a secret in a DuckDB cell, a cassette, an Inspect-style file and a stream is reported."""
    con = duckdb.connect(str(tmp_path / "x.duckdb"))
    con.execute("CREATE TABLE t (scope VARCHAR)")
    con.execute("INSERT INTO t VALUES (?)", [f"log_search|keyword={KEY.lower()}"])
    con.close()
    (tmp_path / "cas").mkdir()
    (tmp_path / "cas" / "epoch1.json").write_text(json.dumps({"body": f"http://{USER}:{PASSWORD}@h/v1"}))
    found = leaks(tmp_path, {"stderr": f"error: {KEY.upper()}"})
    assert "x.duckdb: " + KEY in found and "stderr: " + KEY in found
    assert "cas/epoch1.json: " + PASSWORD in found and "cas/epoch1.json: " + USER in found
    assert leaks(tmp_path / "cas", {"stdout": "clean"}, (KEY,)) == []


# -- end to end -----------------------------------------------------------------------------------------
def _canary_evalset(path: Path) -> Path:
    """A diagnosable case with the secrets in its question and fixtures, in the tool arguments the model sends
    and in the Draft it writes."""
    source = yaml.safe_load((ROOT / "evalsets" / "diagnosable.yaml").read_text())
    case = next(c for c in source["cases"] if c["id"] == "diagnosable_gateway_risk_pool_exhausted_t1")
    case["id"] = CASE
    case["question"] += f" Our key is {KEY}, the proxy password {PASSWORD}."
    case["fixtures"]["logs"].append(
        {"ts": "2026-06-12T09:12:00Z", "tenant": "t1", "service": "gateway", "level": "ERROR",
         "message": f"auth failed for {USER} with key {KEY}"}
    )  # fmt: skip
    case["trajectory"]["steps"].insert(
        0, {"tool": "log_search", "input": {"start": "2026-06-12T09:00:00Z", "end": "2026-06-12T09:30:00Z",
                                           "tenant": "t1", "keyword": KEY}},
    )  # fmt: skip
    case["trajectory"]["draft"]["conclusion"] += f" (The key {KEY} of {USER} was not the cause.)"
    case["expect"] = {
        "outcome": "SUCCESS",
        "root_cause": {"statement": "The connection pool was exhausted.", "facts": [{"variants": ["connection pool"]}]},
    }
    for claim in case["trajectory"]["draft"]["claims"]:
        for citation in claim["citations"]:
            citation["tool_call_id"] = "@step2"
    path.write_text(yaml.safe_dump({"cases": [case]}, allow_unicode=True))
    return path


def _disable_redaction(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every binding of the redaction functions, in every bench module, replaced by the identity."""
    identity: dict[str, Callable[..., Any]] = {
        "redact": lambda text, secrets=None: text,
        "safe_url": lambda url: url,
        "redact_cells": lambda row, secrets: row,
    }
    originals = {name: getattr(redaction, name) for name in identity}
    for module in [m for name, m in sys.modules.items() if name.startswith("runners") and m is not None]:
        for name, stub in identity.items():
            if getattr(module, name, None) is originals[name]:  # bound by `from … import` (and the module itself)
                monkeypatch.setattr(module, name, stub)


def _every_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, dict[str, str]]:
    """Run every command that writes a file, against a simulator reached through a URL with credentials;
    returns the folder of everything written (the evaluation file, an input, lives beside it) and the output
    streams."""
    (tmp_path / "in").mkdir()
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    evalset = str(_canary_evalset(tmp_path / "in" / "canary.yaml"))
    tmp_path = out_dir
    db, cas = tmp_path / "bench.duckdb", tmp_path / "cas"
    streams: dict[str, str] = {}

    def run(name: str, argv: list[str], *codes: int) -> None:
        code = main(argv)
        out = capsys.readouterr()
        streams[f"{name} stdout"], streams[f"{name} stderr"] = out.out, out.err
        assert code in codes, (name, code, out.err[-2000:])

    model = ["--evalset", evalset, "--model", "openai:scripted", "--api-key-env", "HB_CANARY_KEY"]
    with SimulatorServer(load_cases([evalset])) as sim:
        url = sim.base_url.replace("http://", f"http://{USER}:{PASSWORD}@")
        run("run", ["run", *model, "--base-url", url, "--cassettes", str(cas), "--record-mode", "once",
                    "--db", str(db), "--label", "base"], 0)  # fmt: skip
        # a replay of the recording (with redaction, the redacted answers no longer fit the case: it misses)
        run("replay", ["run", *model, "--base-url", url, "--cassettes", str(cas), "--record-mode", "none",
                       "--db", str(db), "--label", "replay"], 0, 2)  # fmt: skip
        # the gate's candidate: a second live run (a replay that misses is the bench's failure, which no gate
        # compares)
        run("cand", ["run", *model, "--base-url", url, "--db", str(db), "--label", "cand"], 0)
        # a replay with no recording: the cassette misses at once (the error, the failures, the re-record
        # command and "the endpoint …" on stderr all name the URL)
        (tmp_path / "empty").mkdir()
        run("miss", ["run", *model, "--base-url", url, "--cassettes", str(tmp_path / "empty"), "--record-mode",
                     "none", "--db", str(db), "--label", "miss"], 2)  # fmt: skip
        run("sweep", ["sweep", *model, "--base-url", url, "--no-gain-threshold", "1,2", "--db",
                      str(tmp_path / "sweep.duckdb"), "--label", "sweep"], 0)  # fmt: skip
    run("show", ["show", "--db", str(db), "--label", "base", "--case", CASE], 0)
    run("show html", ["show", "--db", str(db), "--label", "base", "--case", CASE,
                      "--html", str(tmp_path / "show.html")], 0)  # fmt: skip
    run("show miss", ["show", "--db", str(db), "--label", "miss", "--case", CASE,
                      "--html", str(tmp_path / "miss.html")], 0)  # fmt: skip
    run("report", ["report", "--db", str(db), "--out", str(tmp_path / "report")], 0)
    run("gate", ["gate", "--db", str(db), "--baseline", "base", "--candidate", "cand", "--k", "1",
                 "--json", str(tmp_path / "gate.json"), "--summary", str(tmp_path / "gate.md"),
                 "--junit", str(tmp_path / "gate.xml")], 0, 1, 2, 3)  # fmt: skip
    run("export", ["export", "--db", str(db), "--inspect", str(tmp_path / "inspect")], 0)
    run("export otel", ["export", "--db", str(db), "--otel", str(tmp_path / "otel.jsonl"), "--otel-content"], 0)
    run("merge", ["merge", str(tmp_path / "merged.duckdb"), str(db), str(tmp_path / "sweep.duckdb")], 0)
    return out_dir, streams


def _setup(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HB_CANARY_KEY", KEY)
    monkeypatch.chdir(tmp_path)  # anything written to the working directory is scanned too


def test_canary_secrets_reach_no_file_and_no_stream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    _setup(monkeypatch, tmp_path)
    out, streams = _every_command(tmp_path, capsys)
    written = {p.relative_to(out).parts[0] for p in out.rglob("*") if p.is_file()}
    assert {"bench.duckdb", "cas", "show.html", "miss.html", "report", "gate.json", "gate.md", "gate.xml",
            "inspect", "otel.jsonl", "merged.duckdb", "sweep.duckdb"} <= written  # fmt: skip
    assert leaks(tmp_path / "in", {}) != []  # the input holds them: the scan would see them
    assert leaks(out, streams) == []
    assert [p for p in tmp_path.iterdir() if p.name not in ("in", "out")] == []  # nothing written elsewhere
    # what was redacted is marked, and what a resume needs is kept
    con = open_read_only(out / "bench.duckdb")
    (stored_url,) = con.execute("SELECT DISTINCT base_url FROM bench_runs").fetchone() or (None,)
    scopes = [r[0] for r in con.execute("SELECT scope FROM tool_calls").fetchall()]
    (miss,) = con.execute("SELECT error FROM case_runs WHERE label = 'miss'").fetchone() or (None,)
    (conclusion,) = con.execute("SELECT conclusion FROM case_runs WHERE label = 'base'").fetchone() or (None,)
    # the replay's first request held the key in its question: redacted on both sides, it matched the recording
    (replayed,) = con.execute(
        "SELECT count(*) FROM messages JOIN case_runs USING (case_run_id) WHERE label = 'replay' AND kind = 'TOOL_CALL'"
    ).fetchone() or (0,)
    con.close()
    assert stored_url is not None and stored_url.startswith("http://127.0.0.1:") and stored_url.endswith("/v1")
    assert any(REDACTED.lower() in (s or "").lower() for s in scopes), scopes
    assert miss is not None and "request not in cassette" in miss and "--base-url" in miss
    assert conclusion is not None and f"The key {REDACTED} of {REDACTED} was not the cause" in conclusion
    assert replayed >= 1
    cassette = next((out / "cas").rglob("*.json")).read_text()
    assert REDACTED in cassette


def test_with_redaction_disabled_the_scan_finds_the_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """The end-to-end check bites: without the one redaction function, every kind of output leaks."""
    _setup(monkeypatch, tmp_path)
    _disable_redaction(monkeypatch)
    out, streams = _every_command(tmp_path, capsys)
    found = leaks(out, streams)
    where = {x.split(":")[0].split("/")[0] for x in found}
    assert {"bench.duckdb", "cas", "sweep.duckdb", "merged.duckdb", "inspect", "otel.jsonl", "show.html",
            "miss.html"} <= where  # fmt: skip
    assert "miss stderr" in where, where
    assert {n for n in NEEDLES if any(x.endswith(": " + n) for x in found)} == set(NEEDLES)


def test_a_run_with_url_credentials_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """The stored URL has no credentials; a resume given them again with --base-url runs the rest, and the
    stored URL stays clean."""
    from runners.plan.options import BenchOptions
    from runners.plan.settings import ModelSettings
    from runners.run.bench import plan_run, run_bench

    monkeypatch.setenv("HB_CANARY_KEY", KEY)
    db = tmp_path / "r.duckdb"
    cases = ["empty_logs_gateway_timeout_t1", "diagnosable_gateway_risk_pool_exhausted_t1"]
    seen: list[object] = []

    def interrupt_after_one(done: int, total: int, run: object) -> None:
        if run is not None:
            seen.append(run)
            raise KeyboardInterrupt

    with SimulatorServer(load_cases()) as sim:
        url = sim.base_url.replace("http://", f"http://{USER}:{PASSWORD}@")
        ms = ModelSettings(model="openai:scripted", base_url=url, api_key_env="HB_CANARY_KEY")
        with pytest.raises(KeyboardInterrupt):
            run_bench(plan_run(BenchOptions.of(case_ids=cases, db=db, model_settings=ms, epochs=2)),
                      on_progress=interrupt_after_one)  # fmt: skip
        con = open_read_only(db)
        ((bench_run_id, stored, status),) = con.execute(
            "SELECT bench_run_id, base_url, status FROM bench_runs"
        ).fetchall()
        con.close()
        assert status == "interrupted" and stored == sim.base_url
        assert main(["run", "--db", str(db), "--resume", bench_run_id, "--base-url", url]) == 0
        con = open_read_only(db)
        assert con.execute("SELECT base_url, status FROM bench_runs").fetchall() == [(sim.base_url, "completed")]
        assert con.execute("SELECT count(DISTINCT case_run_id) FROM case_runs").fetchone() == (4,)
        con.close()
    streams = capsys.readouterr()
    assert leaks(tmp_path, {"stdout": streams.out, "stderr": streams.err}) == []


def test_a_refused_url_is_named_without_its_password(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"ftp://{USER}:{PASSWORD}@127.0.0.1/v1"
    argv = ["run", "--model", "openai:x", "--base-url", url, "--cassettes", str(tmp_path), "--record-mode", "none",
            "--db", str(tmp_path / "x.duckdb")]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "is not an http:// or https:// URL" in err and f"ftp://{REDACTED}@127.0.0.1/v1" in err
    assert leaks(tmp_path, {"stderr": err}) == []


def test_cassette_bodies_and_fault_texts_are_redacted_and_still_match() -> None:
    """A recorded request and answer hold `[REDACTED]`; the same live request, redacted the same way, matches the
    recording; a fault's text loses the key it was sent with and the URL's credentials."""
    import httpx2
    from vcr.request import Request

    from runners.store.cassettes import _fault_response, _json_body, _scrub_request, _scrub_response

    secrets = Secrets.known(KEY, PASSWORD)
    body = json.dumps({"messages": [{"role": "user", "content": f"why? key {KEY.lower()}"}]}).encode()
    live = Request("POST", f"http://{USER}:{PASSWORD}@127.0.0.1:9/v1/chat/completions", body, {})
    recorded = _scrub_request(live, secrets)
    assert KEY.lower().encode() not in recorded.body and REDACTED.encode() in recorded.body
    assert recorded.uri == "http://model-endpoint/v1/chat/completions"
    _json_body(_scrub_request(live, secrets), recorded)  # raises when the bodies differ
    answer = {"status": {"code": 200}, "headers": {}, "body": {"string": json.dumps({"content": f"{KEY} {PASSWORD}"})}}
    assert _scrub_response(answer, secrets)["body"]["string"] == json.dumps({"content": f"{REDACTED} {REDACTED}"})
    request = httpx2.Request("POST", "http://127.0.0.1:9/v1/chat/completions",
                             headers={"authorization": "Bearer OtherKeyValue123"})  # fmt: skip
    exc = httpx2.ConnectError(f"refused http://{USER}:{PASSWORD}@127.0.0.1:9 with OtherKeyValue123 and {KEY}")
    fault = json.dumps(_fault_response(exc, request, 0.1, secrets=secrets))
    assert PASSWORD not in fault and KEY not in fault and "OtherKeyValue123" not in fault and USER not in fault
