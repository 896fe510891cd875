"""A bench run exported with `harness-bench export --otlp-endpoint` to a real Arize Phoenix on 127.0.0.1.

Phoenix comes from its own cached venv (`make phoenix`, `scripts.phoenix`; CI installs it in `make ci-deps`). The
test starts `phoenix serve` on free ports with its database in a temporary folder, runs a few built-in cases
(scripted model) into a temporary DuckDB with the CLI, exports them to Phoenix's OTLP/HTTP endpoint and reads them
back through Phoenix's REST API (`GET /v1/projects/default/spans`). Per case run: one `invoke_agent` root, whose
`chat` and `execute_tool` children point at it and number what `case_runs` counts; each `execute_tool` span is the
stored invocation of the same position (tool, status, error status when it failed), each rejection, gain and
stop a span event on the root as `tool_calls` has it, and the run's decisions (outcome, stop reason, budget hit,
STOP_REQUIRED, thresholds) as `harness.*` attributes; Phoenix reads the spans as AGENT / LLM / TOOL. Then headless
Chromium renders Phoenix's trace view of the busiest trace: its DOM names the span tree, its screenshot is not
blank (`HB_PHOENIX_SCREENSHOT=PATH` keeps a copy, e.g. for docs/traces.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import matplotlib.image as mpimg
import pytest

from scripts.phoenix import PHOENIX, PhoenixServer, installed, phoenix_dir, serve
from tests._db import open_read_only

ROOT = Path(__file__).resolve().parents[2]
CASES = (
    "diagnosable_gateway_risk_pool_exhausted_t1",  # SUCCESS, the SemanticGuard's call
    "tool_failures_log_backend_down_db_answers_t8_settlement",  # a FAILED invocation: an error span
    "protocol_violations_unknown_tool_corrected_then_saturated_t6_email",  # a protocol rejection, STOP_REQUIRED
    "empty_logs_risk_declines_ignores_stop_t1",  # NO_GAIN twice, a SATURATED rejection after STOP_REQUIRED
    "budget_exhaustion_tool_budget_all_gained_webhook_backlog",  # ten invocations, the tool budget hit
)
INGEST_TIMEOUT_S = 60.0


def _cli(*args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "runners.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, f"harness-bench {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def _get(server: PhoenixServer, path: str) -> Any:
    with urllib.request.urlopen(f"{server.url}{path}", timeout=30) as resp:
        return json.load(resp)


def _spans(server: PhoenixServer) -> list[dict[str, Any]]:
    """Every span of the default project, all pages."""
    out: list[dict[str, Any]] = []
    cursor = ""
    while True:
        page = _get(server, f"/v1/projects/default/spans?limit=1000{cursor}")
        out.extend(page["data"])
        if not page.get("next_cursor"):
            return out
        cursor = f"&cursor={urllib.request.quote(page['next_cursor'])}"


def _rows(db: Path, sql: str) -> list[dict[str, Any]]:
    con = open_read_only(db)
    try:
        cur = con.execute(sql)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    finally:
        con.close()


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PhoenixServer]:
    exe = installed()
    if exe is None:
        pytest.skip(f"{PHOENIX} is not installed in {phoenix_dir()} (make phoenix, part of make ci-deps)")
    with serve(tmp_path_factory.mktemp("phoenix"), executable=exe) as server:
        yield server


@pytest.fixture(scope="module")
def exported(phoenix: PhoenixServer, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    """The bench run's database and the spans Phoenix holds for it (once all have been ingested)."""
    db = tmp_path_factory.mktemp("bench") / "bench.duckdb"
    _cli("run", "--db", str(db), *(a for c in CASES for a in ("--case", c)))
    runs = _rows(db, "SELECT * FROM case_runs")
    assert len(runs) == len(CASES)
    expected = sum(1 + r["model_calls"] + r["guard_calls"] + r["tool_invocations"] for r in runs)
    out = _cli("export", "--db", str(db), "--otlp-endpoint", phoenix.otlp_endpoint)
    assert f"sent {len(CASES)} case runs ({expected} spans)" in out, out
    until = time.monotonic() + INGEST_TIMEOUT_S  # Phoenix inserts what it received in batches, a moment later
    while len(spans := _spans(phoenix)) < expected and time.monotonic() < until:
        time.sleep(0.5)
    assert len(spans) == expected, f"Phoenix holds {len(spans)} spans of the {expected} sent"
    return db, spans


def _events(span: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [e["attributes"] for e in span.get("events", []) if e["name"] == name]


def test_every_case_run_is_one_span_tree_in_phoenix(exported: tuple[Path, list[dict[str, Any]]]) -> None:
    db, spans = exported
    runs = {r["case_run_id"]: r for r in _rows(db, "SELECT * FROM case_runs")}
    calls = _rows(db, "SELECT * FROM tool_calls ORDER BY case_run_id, seq")
    traces: dict[str, list[dict[str, Any]]] = {}
    for s in spans:
        traces.setdefault(s["context"]["trace_id"], []).append(s)
    assert len(traces) == len(runs)
    seen = set()
    for tree in traces.values():
        roots = [s for s in tree if s["parent_id"] is None]
        assert len(roots) == 1, [s["name"] for s in roots]
        root = roots[0]
        a = root["attributes"]
        assert root["name"] == "invoke_agent harness-diagnosis" and root["span_kind"] == "AGENT"
        assert a["gen_ai.operation.name"] == "invoke_agent"
        run = runs[a["gen_ai.conversation.id"]]
        seen.add(run["case_run_id"])
        children = [s for s in tree if s is not root]
        assert all(s["parent_id"] == root["context"]["span_id"] for s in children)
        chats = [s for s in children if s["name"].startswith("chat ")]
        tools = [s for s in children if s["name"].startswith("execute_tool ")]
        assert len(chats) + len(tools) == len(children)
        assert len(chats) == run["model_calls"] + run["guard_calls"]
        assert all(s["span_kind"] == "LLM" and s["attributes"]["gen_ai.operation.name"] == "chat" for s in chats)
        assert sum(s["attributes"]["harness.semantic_guard"] for s in chats) == run["guard_calls"]
        assert len(tools) == run["tool_invocations"]
        # each execute_tool span is the stored invocation at its position; a failed one is an error span
        mine = [c for c in calls if c["case_run_id"] == run["case_run_id"]]
        invoked = {c["seq"]: (c["tool"], c["invocation_status"]) for c in mine if c["rejection_reason"] is None}
        got = {
            (t := s["attributes"])["harness.seq"]: (t["gen_ai.tool.name"], t["harness.invocation_status"])
            for s in tools
        }
        assert got == invoked
        assert all(s["span_kind"] == "TOOL" for s in tools)
        assert {s["attributes"]["harness.seq"] for s in tools if s["status_code"] == "ERROR"} == {
            c["seq"] for c in mine if c["invocation_status"] == "FAILED"
        }
        # rejections, gains and the stop as span events on the run's span, as tool_calls and case_runs have them
        rejected = {e["harness.seq"]: (e["gen_ai.tool.name"], e["harness.rejection.reason"])
                    for e in _events(root, "harness.tool_request_rejected")}  # fmt: skip
        assert rejected == {c["seq"]: (c["tool"], c["rejection_reason"]) for c in mine if c["rejection_reason"]}
        assert len(rejected) == run["tool_rejections"]
        gains = {e["gen_ai.tool.call.id"]: (e["harness.gain"], e["harness.gain.producer"])
                 for e in _events(root, "harness.gain_applied")}  # fmt: skip
        assert gains == {c["tool_call_id"]: (c["gain"], c["gain_producer"]) for c in mine if c["gain"]}
        counted = Counter({"GAINED": run["gained_count"], "NO_GAIN": run["no_gain_count"]})
        assert Counter(g for g, _ in gains.values()) == +counted  # (+ drops the zero counts)
        # the Harness's decisions on the run's span
        assert a["harness.outcome"] == run["outcome"]
        assert a.get("harness.stop_reason") == run["stop_reason"]
        assert a.get("harness.fallback_kind") == run["fallback_kind"]
        assert a.get("harness.budget_hit") == run["budget_hit"]
        assert a["harness.stop_required_delivered"] is run["stop_required_delivered"]
        assert len(_events(root, "harness.stop_required_delivered")) == run["stop_required_deliveries"]
        assert a["harness.config.no_gain_threshold"] == run["no_gain_threshold"]
        assert a["harness.config.max_tool_invocations"] == run["max_tool_invocations"]
        assert a["gen_ai.usage.input_tokens"] == run["input_tokens"]
        assert a["gen_ai.usage.output_tokens"] == run["output_tokens"]
        verdicts = {e["gen_ai.evaluation.name"]: e for e in _events(root, "gen_ai.evaluation.result")}
        assert verdicts["passed"]["gen_ai.evaluation.score.label"] == ("pass" if run["passed"] else "fail")
    assert seen == set(runs)
    # the selection exercises what is checked
    rows = runs.values()
    assert all(sum(r[k] for r in rows) > 0 for k in ("guard_calls", "tool_rejections", "failed_invocations"))
    assert any(r["budget_hit"] for r in rows) and any(r["stop_required_delivered"] for r in rows)


def _chromium() -> str | None:
    return next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


def _browse(browser: str, url: str, *out: str) -> str:
    """Headless Chromium on `url` after 15 s of the page's virtual time (Phoenix's UI is a JavaScript app)."""
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
             f"--user-data-dir={profile}", "--window-size=1400,1000", "--virtual-time-budget=15000", *out, url],
            capture_output=True, text=True, timeout=180, check=True,
        ).stdout  # fmt: skip


def test_phoenix_trace_view_shows_the_span_tree(
    phoenix: PhoenixServer, exported: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed (make ci-deps): cannot render Phoenix's trace view")
    _, spans = exported
    by_trace = Counter(s["context"]["trace_id"] for s in spans)
    busiest = max(by_trace, key=lambda t: (by_trace[t], t))
    (project,) = [p["id"] for p in _get(phoenix, "/v1/projects")["data"] if p["name"] == "default"]
    url = f"{phoenix.url}/projects/{project}/traces/{busiest}"
    png = tmp_path / "trace.png"
    dom = _browse(browser, url, "--dump-dom", f"--screenshot={png}")  # one page load gives both
    assert "invoke_agent harness-diagnosis" in dom and "execute_tool" in dom and "chat scripted" in dom
    img = mpimg.imread(png)
    assert img.shape[:2] == (1000, 1400)
    assert img.std() > 0.05, "the screenshot is blank"
    if keep := os.environ.get("HB_PHOENIX_SCREENSHOT"):
        shutil.copyfile(png, keep)
