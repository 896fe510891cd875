"""The Python API (runners/api.py): sweep, recommend, what-if and gate on a database, typed in and out, refused in
one line naming the flag as the command line is; and the threshold-sweep notebook imports nothing of `runners` but
the API."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from runners import api
from runners.api import (
    AgentFramework,
    BenchInputError,
    BenchOptions,
    GateResult,
    GateThresholds,
    Objective,
    Recommendation,
    RecommendChoices,
    SweepSummary,
    Verdict,
    WhatIf,
)
from tests._db import open_read_only

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "threshold_sweep.ipynb"
CASES = ["empty_logs_gateway_timeout_t1", "diagnosable_gateway_risk_pool_exhausted_t1"]


def runners_imports(code: str) -> list[str]:
    """Every module of `runners` the code imports, as written (`import runners.x`, `from runners.x import y`,
    `from runners import x`: `runners.x`)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "runners"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "runners":
            found += [f"runners.{a.name}" for a in node.names] if node.module == "runners" else [node.module]
    return found


def notebook_code(path: Path) -> str:
    """The code cells of a notebook, one after another (IPython's magics left out)."""
    cells = json.loads(path.read_text())["cells"]
    lines = [line for c in cells if c["cell_type"] == "code" for line in "".join(c["source"]).splitlines()]
    return "\n".join(line for line in lines if not line.lstrip().startswith(("%", "!")))


def test_the_notebook_imports_nothing_of_runners_but_the_api() -> None:
    imported = runners_imports(notebook_code(NOTEBOOK))
    assert imported and set(imported) == {"runners.api"}, imported


@pytest.mark.parametrize(
    "code",
    ["from runners.plan.options import BenchOptions", "import runners.run.sweep", "from runners import plan",
     "from runners.api import sweep\nfrom runners.decisions.recommend import measure"],
)  # fmt: skip
def test_the_import_check_bites(code: str) -> None:
    assert set(runners_imports(code)) - {"runners.api"}, code


def test_every_public_name_is_documented() -> None:
    for name in api.__all__:
        value = getattr(api, name)
        assert getattr(value, "__doc__", None), f"runners.api.{name} says nothing of itself"


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SweepSummary]:
    db = tmp_path_factory.mktemp("api") / "api.duckdb"
    done = api.sweep({"no_gain_threshold": (1, 2)}, BenchOptions.of(case_ids=CASES, db=db, epochs=2, label="base"))
    api.run(BenchOptions.of(case_ids=CASES, db=db, epochs=2, label="cand", model="scripted:eager"))
    api.run(BenchOptions.of(case_ids=CASES, db=db, epochs=2, label="again"))
    return db, done


def test_a_sweep_then_its_recommendation(swept: tuple[Path, SweepSummary]) -> None:
    db, done = swept
    assert isinstance(done, SweepSummary) and done.status == "completed" and done.points == 2
    assert api.sweeps(db) == [done.sweep_id]
    rec = api.recommend(db, done.sweep_id, RecommendChoices(objective=Objective.MODEL_CALLS))
    assert isinstance(rec, Recommendation) and rec.objective is Objective.MODEL_CALLS
    assert rec.chosen.setting("no_gain_threshold") in (1, 2) and rec.reasoning
    assert api.recommend(db).chosen == api.recommend(db, done.sweep_id).chosen, "the newest sweep by default"


def test_whatif_and_gate_on_the_database(swept: tuple[Path, SweepSummary]) -> None:
    db, _ = swept
    result = api.whatif(db, (1,), label="cand")
    assert isinstance(result, WhatIf) and [p.no_gain_threshold for p in result.points] == [1]
    gate = api.gate(db, "again", "cand", GateThresholds(k=1))
    assert isinstance(gate, GateResult) and gate.verdict in (Verdict.PASS, Verdict.INCONCLUSIVE)
    assert gate.db == str(db), "its diff commands name the database"
    assert gate.loops is None, "one loop on both sides: nothing to say"


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda db: api.recommend(db, "sw-nope"), "--sweep: unknown sweep 'sw-nope'"),
        (lambda db: api.whatif(db, (1,), label="nobody"), "--label: no case runs labelled 'nobody'"),
        (lambda db: api.whatif(db, (1,)), "give one of --label and --bench-run"),
        (lambda db: api.gate(db, "base", "nobody"), "nobody"),
        (lambda db: api.sweep({"no_gain_threshold": (0,)}, BenchOptions.of(db=db)), "--no-gain-threshold 0"),
        (lambda db: api.run(BenchOptions.of(db=db, epochs=0)), "--epochs 0: must be an integer from 1 to 10000"),
        (lambda db: api.recommend(db, choices=RecommendChoices(margin=2)), "--margin 2: a rate margin must be within"),
        (lambda db: api.gate(db, "again", "cand", GateThresholds(alpha=1.0)), "--alpha 1: must be within (0, 1)"),
    ],
)  # fmt: skip
def test_a_refusal_is_one_line_naming_the_flag(swept: tuple[Path, SweepSummary], call: object, words: str) -> None:
    db, _ = swept
    before = db.read_bytes()
    with pytest.raises((BenchInputError, ValueError)) as info:
        call(db)  # type: ignore[operator]
    assert words in str(info.value) and "\n" not in str(info.value), str(info.value)
    assert db.read_bytes() == before, "nothing written"


def test_the_agent_loop_and_the_tool_choice_modes_through_the_api(tmp_path: Path) -> None:
    """The options `run` gained are names `BenchOptions.of` takes: the plain loop runs and is stored as such, every
    mode of `TOOL_CHOICE_MODES` is accepted, and anything else refused naming `--tool-choice`."""
    db = tmp_path / "plain.duckdb"
    done = api.run(BenchOptions.of(case_ids=CASES[:1], db=db, agent=AgentFramework.PLAIN, label="plain"))
    assert done.status == "completed"
    con = open_read_only(db)
    try:
        assert con.execute("SELECT agent FROM bench_runs").fetchall() == [("plain",)]
    finally:
        con.close()
    for mode in api.TOOL_CHOICE_MODES:
        assert BenchOptions.of(model="openai:m", tool_choice=mode).settings.model_settings.tool_choice == mode
    with pytest.raises(ValueError, match="--tool-choice 'required-later': expected auto, none, required, required-"):
        BenchOptions.of(model="openai:m", tool_choice="required-later")
