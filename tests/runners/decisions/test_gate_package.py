"""The gate as a package: a frozen result, one set of defaults for the command and the library, its SQL in the
store as named queries (the command runs none), and modules of one concept each."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import re
from pathlib import Path
from typing import Annotated

import pytest
from pydantic import Field

from runners.cli import build_parser
from runners.decisions.gate import (
    OVERALL_WEIGHT,
    GateInputError,
    Pair,
    evaluate,
    evaluate_sequential,
    load_pairs,
    pick_bench_runs,
    validate_flags,
)
from runners.decisions.gate_thresholds import DEFAULTS, GateThresholds
from runners.plan.flags import presented
from runners.rendering.gate import failing_case_lines
from runners.store import gate_pairs
from runners.store.gate_pairs import FailingCaseRun, LabelRun, PairedRun

ROOT = Path(__file__).resolve().parents[3]
GATE = ROOT / "runners" / "decisions" / "gate"
GATE_TEXT = ROOT / "runners" / "rendering" / "gate"
CASES = ["diagnosable_gateway_risk_pool_exhausted_t1", "diagnosable_duplicate_settlement_batch_rerun_shop42"]


def _pairs() -> list[Pair]:
    return [Pair(f"c{i}", "fam", e, True, i % 3 != 0, (1.0, 2.0, 10.0), (1.0, 2.0, 10.0))
            for i in range(12) for e in (1, 2)]  # fmt: skip


def test_the_gate_result_is_frozen_and_a_change_is_a_new_result() -> None:
    result = evaluate(_pairs(), "b", "c", k=1, mde=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.db = "other.duckdb"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.overall.test.p_adjusted = 0.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.families[0].test.mde = None  # type: ignore[misc]
    moved = dataclasses.replace(result, db="other.duckdb")
    assert moved.db == "other.duckdb" and result.db == "bench.duckdb" and moved.failures == result.failures


def test_a_sequential_look_is_a_new_result_too() -> None:
    result = evaluate_sequential(_pairs(), "b", "c", budget=2, stage=1, k=1, mde=False)
    assert result.look is not None and result.look.index == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.inconclusive = "x"  # type: ignore[misc]


def _gate_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser = sub.choices["gate"]
    assert isinstance(parser, argparse.ArgumentParser)
    return parser


def test_the_command_and_the_library_take_their_defaults_from_one_place() -> None:
    args = _gate_parser().parse_args(["--baseline", "a", "--candidate", "b"])
    for name in ("k", "max_recall_drop", "max_cost_increase", "alpha", "max_mde"):
        assert getattr(args, name) == getattr(DEFAULTS, name), name
        for function in (evaluate, evaluate_sequential):
            assert inspect.signature(function).parameters[name].default == getattr(DEFAULTS, name), name
    assert inspect.signature(validate_flags).parameters["max_mde"].default == DEFAULTS.max_mde
    # the help texts say the default the parser gives: the command's flags present the decision's fields as they are
    from runners.commands.gate import GateThresholdFlags

    for name, decided in GateThresholds.model_fields.items():
        shown = GateThresholdFlags.model_fields[name]
        assert (shown.default, shown.description) == (decided.default, decided.description), name
        assert GateThresholdFlags.field(name).bounds == GateThresholds.field(name).bounds, name

    class Changed(GateThresholds):  # the same fields (refusals, bounds), other defaults
        k: Annotated[int, GateThresholds.field("k").marker] = Field(default=2, ge=1, le=10)
        alpha: Annotated[float, GateThresholds.field("alpha").marker] = Field(default=0.1, gt=0.0, lt=1.0)
        max_mde: Annotated[float, GateThresholds.field("max_mde").marker] = Field(default=0.2, gt=0.0, le=1.0)
        stage: Annotated[int, GateThresholds.field("stage").marker] = Field(default=5, ge=1, le=10)

    class ChangedFlags(Changed):  # the command's presentation of the changed declaration
        k: int = presented(Changed, "k", GateThresholdFlags.field("k").marker)
        alpha: float = presented(Changed, "alpha", GateThresholdFlags.field("alpha").marker)
        max_mde: float = presented(Changed, "max_mde", GateThresholdFlags.field("max_mde").marker)
        stage: int = presented(Changed, "stage", GateThresholdFlags.field("stage").marker)

    parser = argparse.ArgumentParser()
    ChangedFlags.add_flags(parser, "gate")
    args = parser.parse_args([])
    assert (args.k, args.alpha, args.max_mde) == (2, 0.1, 0.2)
    text = " ".join(parser.format_help().split())
    assert "(default 2)" in text and "(default 0.1)" in text and "(default 0.20 = 20 points)" in text
    assert "epochs between looks (default 5)" in text


def test_the_docstring_gives_the_overall_test_the_share_the_code_gives() -> None:
    from runners.decisions.gate import statistics

    doc = " ".join((statistics.__doc__ or "").split())
    assert f"carries {OVERALL_WEIGHT:.0%} of α" in doc and "half of α" not in doc
    page = " ".join((ROOT / "docs" / "gate.md").read_text().split())
    assert f"the overall pass rate ({OVERALL_WEIGHT:.0%} of α" in page


def test_the_gate_runs_its_sql_only_through_the_store() -> None:
    sources = [ROOT / "runners" / "commands" / "gate.py", *sorted(GATE.glob("*.py")), *sorted(GATE_TEXT.glob("*.py"))]
    for path in sources:
        text = path.read_text()
        assert ".execute(" not in text, path
        assert not re.search(r"\b(SELECT|WHERE)\b", text), path
    assert "where: str" not in (GATE / "cases.py").read_text()


def test_each_gate_module_is_under_600_lines() -> None:
    modules = sorted(GATE.glob("*.py")) + sorted(GATE_TEXT.glob("*.py"))
    assert {p.name for p in modules} >= {"result.py", "load.py", "statistics.py", "render.py", "cases.py", "files.py"}
    assert all(len(p.read_text().splitlines()) <= 600 for p in modules), [p.name for p in modules]


@pytest.fixture(scope="module")
def two_labels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from runners.plan.options import BenchOptions
    from runners.run.bench import plan_run, run_bench

    db = tmp_path_factory.mktemp("gate_pairs") / "two.duckdb"
    for label, model in (("base", "scripted"), ("cand", "scripted:eager"), ("cand", "scripted")):
        options = BenchOptions.of(case_ids=CASES, model=model, label=label, db=db, epochs=2)
        run_bench(plan_run(options))
    return db


def test_the_store_answers_the_gates_queries_with_typed_rows(two_labels: Path) -> None:
    from runners.store.connection import connect

    con = connect(two_labels, read_only=True)
    try:
        assert gate_pairs.labels(con) == frozenset({"base", "cand"})
        (base,) = gate_pairs.label_runs(con, "base")
        cand = gate_pairs.label_runs(con, "cand")
        assert isinstance(base, LabelRun) and (base.case_runs, base.epochs) == (4, 2)
        assert len(cand) == 2 and all(r.case_runs == 4 for r in cand)
        assert gate_pairs.label_of_bench_run(con, base.bench_run_id) == "base"
        assert gate_pairs.label_of_bench_run(con, "br-none") is None
        rows = gate_pairs.latest_case_runs(con, "base", base.bench_run_id)
        assert {(r.case_id, r.epoch) for r in rows} == {(c, e) for c in CASES for e in (1, 2)}
        assert all(isinstance(r, PairedRun) and isinstance(r.passed, bool) and r.tokens > 0 for r in rows)
        # each --bench-run goes to the label it carries; the candidate's second run is picked by id
        runs = pick_bench_runs(con, [cand[1].bench_run_id], "base", "cand")
        assert (runs.baseline, runs.candidate) == (None, cand[1].bench_run_id)
        with pytest.raises(GateInputError, match="is used by 2 bench runs"):
            load_pairs(con, "base", "cand")
        pairs = load_pairs(con, "base", "cand", candidate_run=runs.candidate)
        assert len(pairs) == 4 and all(p.base_pass == p.cand_pass for p in pairs)  # the same scripted model
        with pytest.raises(GateInputError, match="--bench-run br-none: not a bench run of --baseline 'base'"):
            pick_bench_runs(con, ["br-none"], "base", "cand")
        with pytest.raises(ValueError, match="a configuration has"):
            gate_pairs.failing_case_runs(con, sweep_id="s", config=[])
    finally:
        con.close()


def test_failing_case_lines_render_the_stores_rows_and_count_the_rest() -> None:
    runs = [FailingCaseRun(f"cr-{i}", f"case_{i}", 1, "FALLBACK", None if i else "max_steps") for i in range(4)]
    lines = failing_case_lines(runs, "my db.duckdb", limit=2)
    assert lines[0] == ("`case_0` (epoch 1): FALLBACK, stop max_steps — `harness-bench show --db 'my db.duckdb' cr-0`")
    assert "stop NONE" in lines[1] and lines[2:] == ["and 2 more"]
