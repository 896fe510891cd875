"""Calibration: behaviour profiles, sweeps, recommendation, report, gate, notebook (issue 5)."""

from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import duckdb
import matplotlib.image as mpimg
import pytest

from harness.config import HarnessConfig
from harness.models.scripted import Mistake, ScriptedChatModel
from runners.bench import BenchOptions, run_bench
from runners.case_runner import run_case
from runners.cli import main
from runners.evalset import load_cases
from runners.gate import mcnemar_regression_p, pass_hat_k
from runners.metrics_db import SCHEMA_VERSION, connect, migrate
from runners.profiles import UnknownProfileError, parse_profile, trajectory_for, trajectory_for_model
from runners.recommend import Objective, bootstrap_mean, measure, recommend, significantly_below, wilson
from runners.simulator import SimulatorServer
from runners.sweep import SweepGrid, SweepOptions, run_sweep

ROOT = Path(__file__).resolve().parent.parent
LATE = [c for c in load_cases(["diagnosable"]) if "late" in c.id]
CALIBRATION_SET = ["diagnosable", "empty_logs"]


# -- statistics ---------------------------------------------------------------------------------
def test_wilson_matches_known_values() -> None:
    iv = wilson(8, 10)
    assert math.isclose(iv.low, 0.4902, abs_tol=1e-3) and math.isclose(iv.high, 0.9433, abs_tol=1e-3)
    assert wilson(0, 0).n == 0 and wilson(10, 10).high == 1.0


def test_bootstrap_interval_contains_mean_and_is_seeded() -> None:
    data = [1.0, 2.0, 3.0, 4.0, 10.0]
    a, b = bootstrap_mean(data), bootstrap_mean(data)
    assert a == b and a.low <= a.value == 4.0 <= a.high
    assert bootstrap_mean([2.0, 2.0]).low == 2.0


def test_significance_and_exact_mcnemar() -> None:
    assert significantly_below(4, 10, 9, 10) and not significantly_below(9, 10, 10, 10)
    assert mcnemar_regression_p(5, 0) == pytest.approx(1 / 32)
    assert mcnemar_regression_p(0, 5) == 1.0
    assert pass_hat_k({"a": (3, 3), "b": (2, 3)}, 3) == pytest.approx(0.5)
    assert pass_hat_k({"a": (2, 3)}, 2) == pytest.approx(1 / 3)


# -- profiles -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "needle"),
    [("nope", "unknown behaviour profile"), ("sloppy?q=1", "unknown parameter"), ("sloppy?p=2", "within [0, 1]"),
     ("rewriter?k=x", "not a number")],
)  # fmt: skip
def test_bad_profiles_are_named(text: str, needle: str) -> None:
    with pytest.raises(UnknownProfileError, match=re.escape(needle)):
        parse_profile(text)


def test_profiles_are_deterministic_per_seed_and_epoch() -> None:
    cases = load_cases(["diagnosable", "generic_kb"])
    a = [trajectory_for(c, "sloppy?p=0.5&seed=1", 1) for c in cases]
    assert a == [trajectory_for(c, "sloppy?p=0.5&seed=1", 1) for c in cases]
    assert a != [trajectory_for(c, "sloppy?p=0.5&seed=2", 1) for c in cases]
    assert any(s.mistake is not None for t in a for s in t.steps)


def test_rewriter_inserts_k_rewrites_and_needs_a_higher_threshold() -> None:
    case = LATE[0]
    traj = trajectory_for(case, "rewriter?k=2", 1)
    assert len(traj.steps) > len(case.trajectory.steps)
    assert sum(1 for s in traj.steps if (s.note or "").startswith("paraphrase")) % 2 == 0
    low = run_case(case, ScriptedChatModel(traj), config=HarnessConfig(no_gain_threshold=2))
    high = run_case(case, ScriptedChatModel(traj), config=HarnessConfig(no_gain_threshold=4, max_tool_invocations=16))
    assert low.result.decision.outcome.value != "SUCCESS"
    assert high.result.decision.outcome.value == "SUCCESS", high.result.decision.reason


def test_sloppy_fabricator_eager_change_behaviour() -> None:
    cases = load_cases(["diagnosable"])
    sloppy = [trajectory_for(c, "sloppy?p=1", 1) for c in cases]
    assert all(s.mistake in set(Mistake) for t in sloppy for s in t.steps)
    fab = [trajectory_for(c, "fabricator?p=1", 1) for c in cases]
    assert all(
        run_case(c, ScriptedChatModel(t)).result.decision.outcome.value != "SUCCESS"
        for c, t in zip(cases, fab, strict=True)
    )
    eager = [trajectory_for(c, "eager?p=1", 1) for c in cases]
    assert any(len(e.steps) < len(c.trajectory.steps) for c, e in zip(cases, eager, strict=True))


def test_serve_sim_plays_profiles_like_in_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cases = load_cases(["diagnosable"])
    monkeypatch.setenv("HB_KEY", "x")
    inproc = run_bench(BenchOptions(evalsets=["diagnosable"], model="scripted:rewriter?k=2", db=tmp_path / "a.duckdb"))
    with SimulatorServer(cases, trajectory_for=trajectory_for_model) as sim:
        http = run_bench(
            BenchOptions(
                evalsets=["diagnosable"], model="openai:scripted:rewriter?k=2", base_url=sim.base_url,
                api_key_env="HB_KEY", db=tmp_path / "b.duckdb",
            )
        )  # fmt: skip
    outcome = lambda s: {r.case.id: (r.result.decision.outcome, r.metrics.tool_invocations) for r in s.runs}  # noqa: E731
    assert outcome(http) == outcome(inproc)


# -- sweeps and recommendation ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def sweep_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    db = tmp_path_factory.mktemp("sweep") / "sweep.duckdb"
    ids = {}
    for model in ("scripted", "scripted:rewriter?k=2"):
        s = run_sweep(SweepOptions(SweepGrid(no_gain_threshold=(1, 2, 3, 4, 5)),
                                   BenchOptions(evalsets=CALIBRATION_SET, model=model, db=db, epochs=2)))  # fmt: skip
        ids[model] = s.sweep_id
    return db, ids


def test_sweep_recommends_a_higher_threshold_for_rewriter(sweep_db: tuple[Path, dict[str, str]]) -> None:
    db, ids = sweep_db
    con = duckdb.connect(str(db), read_only=True)
    try:
        recs = {m: recommend(measure(con, s), Objective.TOKENS) for m, s in ids.items()}
        for model, rec in recs.items():
            # the recommendation follows from the measured table: recompute it from plain SQL
            rows = con.execute(
                """SELECT c.no_gain_threshold, avg(c.input_tokens + c.output_tokens),
                          sum((c.outcome = 'SUCCESS')::INT) FILTER (WHERE c.expected_outcome = 'SUCCESS'),
                          count(*) FILTER (WHERE c.expected_outcome = 'SUCCESS')
                   FROM case_runs c JOIN bench_runs b USING (bench_run_id) WHERE b.sweep_id = ? GROUP BY 1""",
                [ids[model]],
            ).fetchall()
            best = max(rows, key=lambda r: r[2] / r[3])
            eligible = [r for r in rows if not significantly_below(r[2], r[3], best[2], best[3])]
            cheapest = min(eligible, key=lambda r: r[1])
            assert rec.chosen.config[0] == cheapest[0], model
            assert rec.chosen in rec.eligible and rec.reasoning.startswith("The best diagnosis recall")
    finally:
        con.close()
    assert recs["scripted:rewriter?k=2"].chosen.config[0] > recs["scripted"].chosen.config[0]


def test_sweep_points_and_resume_after_interrupt(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    calls = []

    def interrupt(done: int, total: int) -> None:
        calls.append(done)
        if done >= 30:
            raise KeyboardInterrupt

    grid = SweepGrid(no_gain_threshold=(1, 2), max_tool_calls=(6, 10))
    with pytest.raises(KeyboardInterrupt):
        run_sweep(SweepOptions(grid, BenchOptions(evalsets=["empty_logs"], db=db, epochs=2)), on_progress=interrupt)
    con = duckdb.connect(str(db), read_only=True)
    ((sweep_id, status),) = con.execute("SELECT sweep_id, status FROM sweeps").fetchall()
    kept = con.execute("SELECT count(*) FROM case_runs").fetchone()[0]  # type: ignore[index]
    con.close()
    assert status == "interrupted" and kept >= 14
    done = run_sweep(SweepOptions(grid, BenchOptions(db=db), resume=sweep_id))
    assert done.status == "completed"
    con = duckdb.connect(str(db), read_only=True)
    n_cases = len(load_cases(["empty_logs"]))
    assert (
        con.execute("SELECT count(*), count(DISTINCT case_run_id) FROM case_runs").fetchone() == (4 * 2 * n_cases,) * 2
    )
    assert con.execute(
        "SELECT count(DISTINCT config_json) FROM bench_runs WHERE sweep_id = ?", [sweep_id]
    ).fetchone() == (4,)
    con.close()


def test_report_files_figures_and_numbers(sweep_db: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    db, ids = sweep_db
    out = tmp_path / "rep"
    assert main(["report", "--db", str(db), "--sweep", ids["scripted"], "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    page = (out / "report.html").read_text()
    pngs = sorted(out.glob("*.png"))
    assert {p.name for p in pngs} >= {"recall_wasted_vs_threshold.png", "pareto_front.png",
                                      "outcomes_per_family.png", "tool_call_distribution.png"}  # fmt: skip
    for p in pngs:
        img = mpimg.imread(p)
        assert img.shape[0] > 100 and img.shape[1] > 100 and img.std() > 0.01, p.name
        assert p.name in md
    assert page.count("data:image/png;base64,") == len(pngs), "the HTML is self-contained"
    con = duckdb.connect(str(db), read_only=True)
    sql = con.execute(
        """SELECT family, count(*), round(avg(passed::INT), 3), round(avg(tool_invocations), 2)
           FROM case_runs c JOIN bench_runs b USING (bench_run_id) WHERE b.sweep_id = ? GROUP BY 1""",
        [ids["scripted"]],
    ).fetchall()
    con.close()
    for family, n, rate, tools in sql:
        row = next(line for line in md.splitlines() if line.startswith(f"| {family} "))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert int(cells[1]) == n and float(cells[2]) == rate and float(cells[9]) == tools


# -- gate ----------------------------------------------------------------------------------------------
GATE_SET = ["diagnosable", "protocol_violations", "fabricated_citations", "empty_logs"]


@pytest.fixture(scope="module")
def gate_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("gate") / "gate.duckdb"
    for model, label in [("scripted", "base"), ("scripted", "base-again"), ("scripted:sloppy?seed=3", "sloppy"),
                         ("scripted:fabricator?seed=3", "fabricator")]:  # fmt: skip
        run_bench(BenchOptions(evalsets=GATE_SET, model=model, label=label, db=db, epochs=3))
    run_bench(BenchOptions(evalsets=["diagnosable"], model="scripted", label="partial", db=db, epochs=3))
    return db


def _gate(db: Path, tmp: Path, base: str, cand: str) -> tuple[int, str, ET.Element]:
    summary, junit = tmp / f"{cand}.md", tmp / f"{cand}.xml"
    code = main(["gate", "--db", str(db), "--baseline", base, "--candidate", cand,
                 "--summary", str(summary), "--junit", str(junit)])  # fmt: skip
    return (
        code,
        summary.read_text() if summary.exists() else "",
        ET.parse(junit).getroot() if junit.exists() else ET.Element("none"),
    )


def test_gate_passes_reference_against_itself(gate_db: Path, tmp_path: Path) -> None:
    code, md, xml = _gate(gate_db, tmp_path, "base", "base-again")
    assert code == 0 and "PASS" in md
    assert xml.get("failures") == "0" and len(xml.findall("testcase")) == len(GATE_SET) + 3


@pytest.mark.parametrize("candidate", ["sloppy", "fabricator"])
def test_gate_fails_regressions_naming_families(gate_db: Path, tmp_path: Path, candidate: str) -> None:
    code, md, xml = _gate(gate_db, tmp_path, "base", candidate)
    assert code == 1 and "REGRESSION" in md
    failed = [tc.get("name") for tc in xml.findall("testcase") if tc.find("failure") is not None]
    assert failed and "Regressed families: " in md
    named = md.split("Regressed families: ")[1].split(".")[0].split(", ")
    assert set(named) == {f for f in failed if f in GATE_SET}
    if candidate == "fabricator":
        assert "diagnosable" in named


def test_gate_refuses_different_case_sets(gate_db: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["gate", "--db", str(gate_db), "--baseline", "base", "--candidate", "partial",
                 "--summary", str(tmp_path / "x.md"), "--junit", str(tmp_path / "x.xml")]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "only in base" in err and "empty_logs_" in err
    assert not (tmp_path / "x.md").exists(), "nothing written half-way"
    assert main(["gate", "--db", str(gate_db), "--baseline", "base", "--candidate", "nope"]) == 2
    assert "unknown label 'nope'" in capsys.readouterr().err


# -- bad input -------------------------------------------------------------------------------------------
def test_bad_sweep_and_report_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "e.duckdb"
    assert main(["sweep", "--db", str(db), "--no-gain-threshold", ",", "--evalset", "empty_logs"]) == 2
    assert "the grid is empty" in capsys.readouterr().err
    assert main(["sweep", "--db", str(db), "--no-gain-threshold", "1,x"]) == 2
    assert "comma-separated integers" in capsys.readouterr().err
    assert main(["sweep", "--db", str(db), "--no-gain-threshold", "0"]) == 2
    assert not db.exists(), "refused before the database file is created"
    connect(db).close()
    assert main(["recommend", "--db", str(db), "--sweep", "sw-nope"]) == 2
    assert "unknown sweep 'sw-nope'" in capsys.readouterr().err
    assert main(["report", "--db", str(db), "--sweep", "sw-nope", "--out", str(tmp_path / "r")]) == 2
    assert not (tmp_path / "r").exists()


def test_older_schema_is_migrated(tmp_path: Path) -> None:
    db = tmp_path / "v1.duckdb"
    con = duckdb.connect(str(db))
    migrate(con, str(db), upto=1)
    con.execute("INSERT INTO bench_runs (bench_run_id, status) VALUES ('br-old', 'completed')")
    con.close()
    con = connect(db)
    assert con.execute("SELECT max(version) FROM schema_version").fetchone() == (SCHEMA_VERSION,)
    assert con.execute("SELECT count(*) FROM sweeps").fetchone() == (0,)
    assert con.execute("SELECT status FROM bench_runs").fetchall() == [("completed",)]
    con.close()


# -- notebook -------------------------------------------------------------------------------------------
def test_notebook_executes_on_the_project_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runners.run_notebook import execute

    monkeypatch.setenv("HARNESS_BENCH_NOTEBOOK_DB", str(tmp_path / "nb.duckdb"))
    monkeypatch.chdir(ROOT)
    out = tmp_path / "executed.ipynb"
    execute(ROOT / "notebooks" / "threshold_sweep.ipynb", out)
    nb = json.loads(out.read_text())
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "the curves were drawn"
    assert (tmp_path / "nb.duckdb").exists()


def test_missing_notebook_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from runners.run_notebook import main as nb_main

    assert nb_main(["notebooks/nope.ipynb"]) == 2
    assert "no such notebook" in capsys.readouterr().err


def test_missing_kernel_is_exit_2(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    from runners import run_notebook

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ipykernel" else real(name, *a))
    assert run_notebook.main([str(ROOT / "notebooks" / "threshold_sweep.ipynb")]) == 2
    assert "ipykernel is not installed" in capsys.readouterr().err
