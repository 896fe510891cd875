"""Another agent's runs through `import` and `compare-stops`, as a user brings them:

- a trace exported by `export --otel --otel-content` with every `harness.*` attribute (and `harness.*` span event)
  removed — what any GenAI-instrumented agent emits — imports; with `--outcomes` its runs get verdicts and
  `compare-stops` reports a recall on them;
- tau-bench's recorded GPT-4o runs (read from ../shared/external, never copied here; skipped where it is absent)
  import as 200 case runs, 84 passed, and `compare-stops --json` cuts exactly the runs, at exactly the tool call,
  that the rules' definitions (computed here on the raw trajectories, independently of the bench) give.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from runners.cli import main
from runners.decisions.compare_stops import CompareStops
from runners.rendering.compare_stops import plot_points
from tests._db import open_read_only

ROOT = Path(__file__).resolve().parents[2]
TAU_BENCH = ROOT.parent / "shared" / "external" / "tau-bench" / "gpt-4o-airline.json"


def _strip(value: Any) -> Any:
    """The value without any `harness.*` attribute or span event."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in ("attributes", "events") and isinstance(v, list):
                v = [x for x in v if not (isinstance(x, dict) and str(x.get("key", x.get("name", ""))).startswith(
                    "harness."))]  # fmt: skip
            out[k] = _strip(v)
        return out
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def test_a_genai_trace_without_harness_attributes_imports_and_gets_verdicts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, otlp = tmp_path / "bench.duckdb", tmp_path / "spans.jsonl"
    assert main(["run", "--db", str(db), "--label", "orig"]) == 0
    assert main(["export", "--db", str(db), "--otel", str(otlp), "--otel-content"]) == 0
    stripped = tmp_path / "agent.jsonl"
    lines = [json.dumps(_strip(json.loads(line))) for line in otlp.read_text(encoding="utf-8").splitlines()]
    assert "harness." not in "".join(lines).replace('"harness-bench', "")
    stripped.write_text("\n".join(lines) + "\n", encoding="utf-8")
    con = open_read_only(db)
    verdicts = con.execute("SELECT case_run_id, passed FROM case_runs ORDER BY case_run_id").fetchall()
    con.close()
    outcomes = tmp_path / "outcomes.jsonl"
    outcomes.write_text("".join(json.dumps({"run_id": r, "passed": bool(p)}) + "\n" for r, p in verdicts))
    imported = tmp_path / "imported.duckdb"
    capsys.readouterr()
    code = main(["import", str(stripped), "--db", str(imported), "--label", "agent", "--outcomes", str(outcomes)])
    said = capsys.readouterr()
    assert code == 0, said.err
    assert f"{len(verdicts)} with a verdict, {sum(bool(p) for _, p in verdicts)} passed" in " ".join(said.out.split())
    con = open_read_only(imported)
    rows = con.execute(
        "SELECT count(*), count(c.passed), count(c.no_gain_threshold), count(c.gained_count), any_value(b.agent)"
        " FROM case_runs c JOIN bench_runs b USING (bench_run_id)"
    ).fetchone()
    tools = con.execute("SELECT count(*), count(scope) FILTER (WHERE scope <> '') FROM tool_calls").fetchone()
    con.close()
    # every run judged; no limits nor gain tags (not known); the calls' arguments read back from the messages
    assert rows == (len(verdicts), len(verdicts), 0, 0, "plain")
    assert tools is not None and tools[0] > 0 and tools[1] == tools[0]
    out = tmp_path / "stops.json"
    assert main(["compare-stops", "--db", str(imported), "--label", "agent", "--policy", "tool-cap:1",
                 "--json", str(out)]) == 0  # fmt: skip
    printed = " ".join(capsys.readouterr().out.split())
    (policy,) = json.loads(out.read_text())["policies"]
    assert policy["recall_recorded"] is not None and policy["recall_kept"]["mean"] is not None
    assert f"as recorded: recall {policy['recall_recorded']:.2f} over {len(verdicts)} cases" in printed
    # the table's row, however the console's width (set once per process) wraps its cells
    cells = printed.replace("│", " ").split()
    assert "tool-cap:1" in cells and f"{policy['runs_cut']}/{len(verdicts)}" in cells
    assert f"{policy['recall_kept']['mean']:.2f}" in cells


# -- tau-bench ------------------------------------------------------------------------------------------------------
RULES = ("repeat:k=2,w=10", "error-cycle:k=2", "tool-cap:10")


def _requests(traj: list[dict[str, Any]]) -> list[tuple[str, str, bool]]:
    """A run's tool calls as they came back: tool, arguments (canonical JSON), failed."""
    asked: dict[str, dict[str, Any]] = {}
    out = []
    for m in traj:
        for call in m.get("tool_calls") or ():
            asked[call["id"]] = call["function"]
        if m["role"] == "tool":
            f = asked.pop(m["tool_call_id"])
            args = json.dumps(json.loads(f["arguments"]), sort_keys=True)
            out.append((f["name"], args, (m["content"] or "").startswith("Error:")))
    return out


def _first_cut(rule: str, requests: list[tuple[str, str, bool]]) -> int | None:
    """The index of the request each rule stops before, by its definition (runners/domain/stop_rules.py)."""
    for i, (tool, args, _) in enumerate(requests):
        if rule == "repeat:k=2,w=10" and any((t, a) == (tool, args) for t, a, _ in requests[max(0, i - 9) : i]):
            return i
        if rule == "error-cycle:k=2" and i and requests[i - 1][:2] == (tool, args) and requests[i - 1][2]:
            return i
        if rule == "tool-cap:10" and i == 10:
            return i
    return None


@pytest.mark.skipif(not TAU_BENCH.is_file(), reason="../shared/external/tau-bench is not beside the checkout")
def test_tau_bench_s_gpt_4o_runs_are_cut_where_the_rules_definitions_say(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, out = tmp_path / "tau.duckdb", tmp_path / "stops.json"
    assert main(["import", "--format", "tau-bench", str(TAU_BENCH), "--db", str(db), "--label", "tau"]) == 0
    assert "200 with a verdict, 84 passed" in " ".join(capsys.readouterr().out.split())
    con = open_read_only(db)
    assert con.execute("SELECT count(*), count(*) FILTER (WHERE passed) FROM case_runs").fetchone() == (200, 84)
    con.close()
    argv = [a for rule in RULES for a in ("--policy", rule)]
    assert main(["compare-stops", "--db", str(db), "--label", "tau", *argv, "--json", str(out)]) == 0
    raw = json.loads(TAU_BENCH.read_text(encoding="utf-8"))
    expected = {rule: {} for rule in RULES}
    for run in raw:
        requests = _requests(run["traj"])
        for rule in RULES:
            cut = _first_cut(rule, requests)
            if cut is not None:
                expected[rule][(str(run["task_id"]), run["trial"] + 1)] = cut
    for policy in json.loads(out.read_text())["policies"]:
        got = {(r["case_id"], r["epoch"]): r["cut"]["tool_requests"] for r in policy["runs"] if r["cut"]}
        assert got == expected[policy["policy"]], policy["policy"]
        assert len(policy["runs"]) == 200 and policy["runs_censored"] == 0
    assert all(expected.values())  # each rule cuts some run: the comparison is not vacuous


def test_runs_without_verdicts_are_never_plotted_as_a_number(tmp_path: Path) -> None:
    """Imported without `--outcomes`: no recall is known, so the plot draws no point (and names the policy)."""
    path = tmp_path / "t.json"
    traj = [
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "a", "type": "function", "function": {"name": "get", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "name": "get", "content": "[1]"},
        {"role": "assistant", "content": "done"},
    ]  # fmt: skip
    path.write_text(json.dumps([{"task_id": 1, "trial": 0, "reward": 1.0, "info": {}, "traj": traj}]))
    db, out, plot = tmp_path / "t.duckdb", tmp_path / "s.json", tmp_path / "s.png"
    assert main(["import", "--format", "tau-bench", str(path), "--db", str(db), "--label", "t"]) == 0
    con = duckdb.connect(str(db))
    con.execute("UPDATE case_runs SET passed = NULL, outcome_passed = NULL, expected_outcome = NULL")
    con.close()
    assert main(["compare-stops", "--db", str(db), "--label", "t", "--policy", "tool-cap:1", "--json", str(out),
                 "--plot", str(plot)]) == 0  # fmt: skip
    result = CompareStops.model_validate_json(out.read_text())
    assert result.policies[0].recall_kept.mean is None
    assert plot_points(result) == ((), ("tool-cap:1",))
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_a_bad_outcomes_row_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One line naming the outcomes file, its line and field; exit 2; no database created."""
    path = tmp_path / "t.json"
    traj = [{"role": "assistant", "content": "hello"}]
    path.write_text(json.dumps([{"task_id": 1, "trial": 0, "reward": 1.0, "info": {}, "traj": traj}]))
    outcomes = tmp_path / "o.csv"
    outcomes.write_text("run_id,passed\n1/0,yes\n", encoding="utf-8")
    db = tmp_path / "t.duckdb"
    capsys.readouterr()
    code = main(["import", "--format", "tau-bench", str(path), "--db", str(db), "--label", "t", "--outcomes",
                 str(outcomes)])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and not db.exists()
    assert err.startswith("error: ") and f"{outcomes}:2: passed" in " ".join(err.split()) and err.count("\n") <= 2
