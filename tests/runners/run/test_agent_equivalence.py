"""`--agent pydantic-ai` and `--agent openai-agents` write the rows `--agent native` writes, on every built-in
case — those with a call to a tool the agent does not have included (the Harness, not the framework, answers it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from harness.session import RunResult
from runners.cli import main
from runners.domain.evalset import load_cases
from runners.domain.scripted import Mistake
from runners.plan.agent import AgentFramework
from runners.run import agents
from tests._db import open_read_only

_SKIP = {"bench_run_id", "case_run_id", "wall_ms", "finished_at", "latency_ms", "t_ms"}
CASES = load_cases()


def _rows(db: Path, table: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of `table` without ids and timings, by case id, in order."""
    con = open_read_only(db)
    try:
        cols = [r[0] for r in con.execute(f"DESCRIBE {table}").fetchall() if r[0] not in _SKIP]
        order = "x.case_id" if table == "case_runs" else "c.case_id, x.seq"
        join = "" if table == "case_runs" else " JOIN case_runs c USING (case_run_id)"
        case = "x.case_id" if table == "case_runs" else "c.case_id"
        out: dict[str, list[tuple[Any, ...]]] = {}
        picked = ", ".join("x." + c for c in cols)
        for row in con.execute(f"SELECT {case}, {picked} FROM {table} x{join} ORDER BY {order}").fetchall():
            out.setdefault(row[0], []).append(row[1:])
        return out
    finally:
        con.close()


@pytest.fixture(scope="module")
def native(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("native") / "n.duckdb"
    assert main(["run", "--db", str(db)]) == 0
    return db


@pytest.mark.parametrize("agent", [AgentFramework.PYDANTIC_AI, AgentFramework.OPENAI_AGENTS])
def test_every_case_gives_the_native_rows(agent: AgentFramework, native: Path, tmp_path: Path) -> None:
    db = tmp_path / "a.duckdb"
    assert main(["run", "--db", str(db), "--agent", agent.value]) == 0
    ids = [c.id for c in CASES]
    assert len(ids) == 106, "docs/library.md states the count"
    for table in ("case_runs", "tool_calls", "events", "messages"):
        want, got = _rows(native, table), _rows(db, table)
        differing = sorted(c for c in ids if want.get(c) != got.get(c))
        assert differing == [], f"{agent}: {table} rows differ from native for {differing}"
    # the cases with an unknown tool name are among them, and the Harness saw that name (not the framework)
    unknown = [c.id for c in CASES if any(s.mistake is Mistake.UNKNOWN_TOOL for s in c.trajectory.steps)]
    assert len(unknown) == 4
    violations = _rows(db, "events")
    assert all(any("UNKNOWN_TOOL" in row for row in violations[c]) for c in unknown)


def test_a_resumed_run_keeps_its_agent_and_refuses_another(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--agent` is stored with the bench run: a resume drives the rest of its cases through the same loop, and a
    resume naming another loop is refused."""
    agent = AgentFramework.PYDANTIC_AI
    odd = CASES[0].id
    db = tmp_path / "r.duckdb"
    assert main(["run", "--db", str(db), "--agent", agent.value, "--case", odd]) == 0
    before = _rows(db, "case_runs")[odd]
    con = duckdb.connect(str(db))
    (run_id, stored) = con.execute("SELECT bench_run_id, agent FROM bench_runs").fetchone() or ("", "")
    assert stored == agent.value
    for table in ("messages", "events", "tool_calls", "case_runs"):  # as if interrupted before this case run
        con.execute(f"DELETE FROM {table}")
    con.execute("UPDATE bench_runs SET status = 'interrupted'")
    con.close()
    capsys.readouterr()
    assert main(["run", "--db", str(db), "--resume", run_id, "--agent", "openai-agents"]) == 2
    assert "--agent" in capsys.readouterr().err
    driven: list[str] = []

    def recording_loop(*args: Any, **kwargs: Any) -> RunResult:
        driven.append(agent.value)
        return loop(*args, **kwargs)

    loop = agents.pydantic_ai_loop
    monkeypatch.setattr(agents, "pydantic_ai_loop", recording_loop)
    assert main(["run", "--db", str(db), "--resume", run_id]) == 0
    assert driven == [agent.value], "the resumed case run went through the stored agent loop"
    assert _rows(db, "case_runs")[odd] == before
