"""Calibration: behaviour profiles, sweeps, recommendation, report, gate, notebook."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import duckdb
import pytest

from harness.config import HarnessConfig
from runners.cli import main
from runners.decisions.recommend import Objective, measure, recommend
from runners.domain.evalset import BUILTIN_DIR, load_cases
from runners.domain.profiles import UnknownProfileError, parse_profile, trajectory_for, trajectory_for_model
from runners.domain.scripted import Mistake, ScriptedChatModel
from runners.endpoints.simulator import SimulatorServer
from runners.plan.options import BenchOptions, ResumeRequest
from runners.plan.settings import ModelSettings
from runners.run.bench import plan_run, run_bench
from runners.run.case_runner import run_case
from runners.run.sweep import SweepGrid, SweepOptions, plan_sweep, run_sweep
from runners.store.connection import connect
from runners.store.migrations import SCHEMA_VERSION, migrate
from tests._db import open_read_only

ROOT = Path(__file__).resolve().parents[3]
# The profiles' known optima were measured on the ten older diagnosable cases (`diagnosable.yaml`); the new held-out
# ones (`diagnosable_new_held_out.yaml`) are for real models, and would only change the counts below.
DIAGNOSABLE = str(BUILTIN_DIR / "diagnosable.yaml")
LATE = [c for c in load_cases([DIAGNOSABLE]) if "late" in c.id]
CALIBRATION_SET = [DIAGNOSABLE, "empty_logs"]


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
    inproc = run_bench(
        plan_run(
            BenchOptions.of(
                evalsets=["diagnosable"],
                model="scripted:rewriter?k=2",
                db=tmp_path / "a.duckdb",
            )
        )
    )
    with SimulatorServer(cases, trajectory_for=trajectory_for_model) as sim:
        http = run_bench(
            plan_run(BenchOptions.of(
                evalsets=["diagnosable"],
                model_settings=ModelSettings(
                    model="openai:scripted:rewriter?k=2", base_url=sim.base_url, api_key_env="HB_KEY",
                ),
                db=tmp_path / "b.duckdb",
            ))
        )  # fmt: skip
    outcome = lambda s: {r.case.id: (r.result.decision.outcome, r.metrics.tool_invocations) for r in s.runs}  # noqa: E731
    assert outcome(http) == outcome(inproc)


# -- sweeps and recommendation ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def sweep_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """One epoch: the profiles' outcomes do not vary by epoch, and that the pick does not move with them is
    test_recommend's. No transcripts: recommend reads `case_runs` only, never the conversations (`messages`)."""
    db = tmp_path_factory.mktemp("sweep") / "sweep.duckdb"
    ids = {}
    for model in ("scripted", "scripted:rewriter?k=2"):
        s = run_sweep(plan_sweep(SweepOptions(SweepGrid(no_gain_threshold=(1, 2, 3, 4, 5)),
                                   BenchOptions.of(evalsets=CALIBRATION_SET,
                                   model=model,
                                   db=db, epochs=1, transcripts=False))))  # fmt: skip
        ids[model] = s.sweep_id
    return db, ids


def test_sweep_recommends_the_known_optimum(sweep_db: tuple[Path, dict[str, str]]) -> None:
    db, ids = sweep_db
    con = open_read_only(db)
    try:
        measured = {m: measure(con, s) for m, s in ids.items()}
    finally:
        con.close()
    recs = {m: recommend(table, Objective.TOKENS) for m, table in measured.items()}  # measured once: seeded numbers
    stats = {m: {st.setting("no_gain_threshold"): st for st in table} for m, table in measured.items()}
    # the known optima of the profiles (runners/domain/profiles.py): reference 2, rewriter with k=2 rewrites 4
    assert recs["scripted"].chosen.setting("no_gain_threshold") == 2
    assert recs["scripted:rewriter?k=2"].chosen.setting("no_gain_threshold") == 4
    # the measured table they follow from: 10 diagnosable cases, 6 of them with late evidence (reached only
    # after a NO_GAIN), so threshold 1 finds 4; the reference finds all 10 from threshold 2, the rewriter (two
    # more NO_GAIN after each) from threshold 4, one late case then exceeding the 10-call budget
    rew = stats["scripted:rewriter?k=2"]
    assert [round(rew[t].recall.value * 10) for t in (1, 2, 3, 4, 5)] == [4, 4, 4, 9, 9]
    assert all(rew[t].recall.n == 10 for t in rew)
    ref = stats["scripted"]
    assert [round(ref[t].recall.value * 10) for t in (1, 2, 3, 4, 5)] == [4, 10, 10, 10, 10]
    # threshold 2 is the cheapest of the equal-recall ones: fewer wasted calls on the no-evidence cases
    assert ref[2].tokens.value < ref[3].tokens.value < ref[4].tokens.value


def test_sweep_points_and_resume_after_interrupt(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    calls = []

    def interrupt(done: int, total: int) -> None:
        calls.append(done)
        if done >= 30:
            raise KeyboardInterrupt

    grid = SweepGrid(no_gain_threshold=(1, 2), max_tool_invocations=(6, 10))
    with pytest.raises(KeyboardInterrupt):
        run_sweep(
            plan_sweep(SweepOptions(grid, BenchOptions.of(evalsets=["empty_logs"], db=db, epochs=2))),
            on_progress=interrupt,
        )
    con = open_read_only(db)
    ((sweep_id, status),) = con.execute("SELECT sweep_id, status FROM sweeps").fetchall()
    kept = con.execute("SELECT count(*) FROM case_runs").fetchone()[0]  # type: ignore[index]
    con.close()
    assert status == "interrupted" and kept >= 14
    done = run_sweep(plan_sweep(SweepOptions(grid, BenchOptions.of(db=db), resume=ResumeRequest(sweep_id))))
    assert done.status == "completed"
    con = open_read_only(db)
    n_cases = len(load_cases(["empty_logs"]))
    assert (
        con.execute("SELECT count(*), count(DISTINCT case_run_id) FROM case_runs").fetchone() == (4 * 2 * n_cases,) * 2
    )
    assert con.execute(
        "SELECT count(DISTINCT settings_json) FROM bench_runs WHERE sweep_id = ?", [sweep_id]
    ).fetchone() == (4,)
    con.close()


# -- gate ----------------------------------------------------------------------------------------------
GATE_SET = ["diagnosable", "protocol_violations", "fabricated_citations", "empty_logs"]


@pytest.fixture(scope="module")
def gate_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Five labelled runs, without transcripts: the gate pairs `case_runs` and never reads the conversations
    (`messages`; its summary only prints the `diff` command that would open them)."""
    db = tmp_path_factory.mktemp("gate") / "gate.duckdb"
    for model, label in [("scripted", "base"), ("scripted", "base-again"), ("scripted:sloppy?seed=3", "sloppy"),
                         ("scripted:fabricator?seed=3", "fabricator")]:  # fmt: skip
        run_bench(plan_run(BenchOptions.of(evalsets=GATE_SET, model=model, label=label, db=db, epochs=3,
                                           transcripts=False)))  # fmt: skip
    run_bench(
        plan_run(
            BenchOptions.of(
                evalsets=["diagnosable"],
                model="scripted",
                label="partial",
                db=db,
                epochs=3,
                transcripts=False,
            )
        )
    )
    return db


def _gate(db: Path, tmp: Path, base: str, cand: str, *flags: str) -> tuple[int, str, ET.Element]:
    summary, junit = tmp / f"{cand}.md", tmp / f"{cand}.xml"
    code = main(["gate", "--db", str(db), "--baseline", base, "--candidate", cand,
                 "--summary", str(summary), "--junit", str(junit), *flags])  # fmt: skip
    return (
        code,
        summary.read_text() if summary.exists() else "",
        ET.parse(junit).getroot() if junit.exists() else ET.Element("none"),
    )


def test_gate_passes_reference_against_itself(gate_db: Path, tmp_path: Path) -> None:
    code, md, xml = _gate(gate_db, tmp_path, "base", "base-again")
    assert code == 0 and "PASS" in md
    # one test case for the whole set, one per family, one per cost metric
    assert xml.get("failures") == "0" and len(xml.findall("testcase")) == 1 + len(GATE_SET) + 3


@pytest.mark.parametrize("candidate", ["sloppy", "fabricator"])
def test_gate_fails_regressions_and_every_output_agrees(gate_db: Path, tmp_path: Path, candidate: str) -> None:
    code, md, xml = _gate(gate_db, tmp_path, "base", candidate)
    assert code == 1 and "REGRESSION" in md
    failed = [tc for tc in xml.findall("testcase") if tc.find("failure") is not None]
    assert int(xml.get("failures") or 0) == len(failed) > 0
    verdict = next(line for line in md.splitlines() if line.startswith("❌"))
    for tc in failed:  # every failing JUnit test case is named, with its p-value, in the verdict line
        message = tc.find("failure").get("message")  # type: ignore[union-attr]
        assert message and message in verdict and "p = " in message
    if candidate == "fabricator":
        assert "diagnosable" in [tc.get("name") for tc in failed]


def test_gate_bad_flags_exit_2_and_write_nothing(
    gate_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for flags, needle in [(["--k", "4"], "--k 4: the cases have only 3 epoch(s)"),
                          (["--max-recall-drop", "2"], "--max-recall-drop 2: a pass-rate drop must be within [0, 1]"),
                          (["--alpha", "1.5"], "--alpha 1.5")]:  # fmt: skip
        code, md, _ = _gate(gate_db, tmp_path, "base", "sloppy", *flags)
        err = capsys.readouterr().err
        assert code == 2 and md == "" and needle in err and len(err.strip().splitlines()) == 1, err
    assert not list(tmp_path.iterdir())


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
def test_notebook_saves_its_copy_and_figure_and_removes_its_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scripts.run_notebook import execute

    monkeypatch.delenv("HARNESS_BENCH_NOTEBOOK_DB", raising=False)
    monkeypatch.setenv("HARNESS_BENCH_NOTEBOOK_OUT", str(tmp_path / "out"))
    monkeypatch.chdir(ROOT / "notebooks")  # where Jupyter starts a notebook's kernel
    out = execute(ROOT / "notebooks" / "threshold_sweep.ipynb", tmp_path / "out" / "executed.ipynb")
    nb = json.loads(out.read_text())
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "the curves were drawn"
    assert (tmp_path / "out" / "recall_wasted_vs_threshold.png").stat().st_size > 10_000
    text = "".join("".join(o.get("text", "")) for o in outputs)
    db = Path(re.search(r"metrics database: (\S+)", text).group(1))  # type: ignore[union-attr]
    assert db.name == "sweep.duckdb" and not db.parent.exists(), "the temporary database is removed"


def test_missing_notebook_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from scripts.run_notebook import main as nb_main

    assert nb_main(["notebooks/nope.ipynb"]) == 2
    assert "no such notebook" in capsys.readouterr().err


def test_missing_kernel_is_exit_2(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    from scripts import run_notebook

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ipykernel" else real(name, *a))
    assert run_notebook.main([str(ROOT / "notebooks" / "threshold_sweep.ipynb")]) == 2
    assert "ipykernel is not installed" in capsys.readouterr().err


# -- the power study's shortcut: distinct (case, trajectory) run once, reused ---------------------------------
def test_outcome_table_is_what_a_bench_run_writes(tmp_path: Path) -> None:
    from runners.pipelines.calibration import outcome_table
    from runners.plan.run_plan import select_cases

    db = tmp_path / "o.duckdb"
    run_bench(
        plan_run(
            BenchOptions.of(
                evalsets=["diagnosable"],
                model="scripted:sloppy?seed=1",
                label="s1",
                db=db,
                epochs=2,
            )
        )
    )
    table = outcome_table("sloppy", 2, 2, select_cases(["diagnosable"], []))
    assert table.distinct_runs < 2 * 2 * len(table.cases)  # some (case, trajectory) are reused
    con = open_read_only(db)
    rows = con.execute(
        "SELECT case_id, epoch, passed, tool_invocations, model_calls, input_tokens + output_tokens FROM case_runs"
    ).fetchall()
    con.close()
    index = {c.id: i for i, c in enumerate(table.cases)}
    assert len(rows) == 2 * len(table.cases)
    for cid, epoch, passed, tools, calls, tokens in rows:
        i = index[cid]
        assert bool(table.passed[1, i, epoch - 1]) == passed
        assert tuple(table.cost[1, i, epoch - 1]) == (tools, calls, tokens)
    pairs = table.pairs(0, 1, 2)
    assert {(p.case_id, p.epoch) for p in pairs} == {(r[0], r[1]) for r in rows}


def test_recommend_states_its_resolution_and_refuses_an_unresolved_pick(tmp_path: Path) -> None:
    import dataclasses

    db = tmp_path / "r.duckdb"
    opts = BenchOptions.of(evalsets=["diagnosable"], model="scripted:sloppy?seed=2", db=db, epochs=2)
    sweep_id = run_sweep(plan_sweep(SweepOptions(SweepGrid(no_gain_threshold=(2, 3)), opts))).sweep_id
    con = open_read_only(db)
    stats = measure(con, sweep_id)
    con.close()
    rec = recommend(stats)
    assert rec.separable and "Resolution: with" in rec.reasoning and rec.resolution > 0
    # the same sweep with one configuration a single case run behind the pick: closer than the resolution
    a, b = sorted(stats, key=lambda s: s.config)
    lost = next(c for c, v in b.recall_epochs.items() if v[0] == 1.0)
    worse_epochs = {**b.recall_epochs, lost: (0.0, *b.recall_epochs[lost][1:])}
    worse_recall = {**b.recall_by_case, lost: float(sum(worse_epochs[lost]) / len(worse_epochs[lost]))}
    from runners.decisions.recommend import wilson

    noisy = dataclasses.replace(b, recall_epochs=worse_epochs, recall_by_case=worse_recall,
                                recall=wilson(sum(worse_recall.values()), len(worse_recall)))  # fmt: skip
    rec2 = recommend([a, noisy])
    assert not rec2.separable
    assert rec2.paragraphs[0].startswith("No recommendation: this sweep is too small to separate its configurations")


def test_power_study_reads_the_80_percent_drop_off_the_measured_curve() -> None:
    from runners.pipelines.calibration import crossing

    curve = [(1.0, 0.1), (2.0, 0.5), (4.0, 0.9), (8.0, 1.0)]
    assert crossing(curve, 0.8) == pytest.approx(3.5)  # between 2 (50%) and 4 (90%)
    assert crossing(curve, 0.05) == pytest.approx(0.5)  # from (0, 0)
    assert crossing([(1.0, 0.2), (2.0, 0.4)], 0.8) is None  # never reached on the grid


def test_the_studys_file_reads_back_typed_and_writes_the_same_shape() -> None:
    """The committed results (every part) read into the typed results and written again as the same JSON (the
    reference's power part gains an explicit `"sequential": null`); the docs' tables render from them."""
    from runners.decisions.calibration_results import CalibrationResults
    from runners.rendering.calibration import gate_tables, power_tables

    raw = (ROOT / "reports" / "calibration" / "calibration.json").read_text(encoding="utf-8")
    results = CalibrationResults.model_validate_json(raw)
    assert set(results.gates) == {"gate", "gate_10_epochs"} and results.recommend and results.power
    written = json.loads(results.model_dump_json())
    assert written["power"]["profiles"]["reference"].pop("sequential") is None
    assert written == json.loads(raw)
    assert "All profiles: 6/180 false alarms = 3.3%" in gate_tables(results)
    assert "| reference | 10 | 0.6 / 0.8 | yes |" in power_tables(results.power)
