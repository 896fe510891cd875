"""The diagnosis funnel and the gain-tag confusion, validated where the failure point is known: scripted profiles
that fail at one stage (a fabricator's citations, an eager model's unsupported conclusion, a budget that stops the
loop, a dismissive tagger), read back from DuckDB as a user's database would be."""

from __future__ import annotations

from pathlib import Path

import pytest

from runners.cli import main
from runners.decisions.funnel import FunnelStage, confusion, funnel, stage_of
from runners.store.diagnosis_reads import funnel_rows, gain_tag_rows
from tests._db import open_read_only

SUCCESS_CASES = (
    "diagnosable_gateway_risk_pool_exhausted_t1",
    "diagnosable_webhook_cert_expired_acme_pay",
    "diagnosable_duplicate_settlement_batch_rerun_shop42",
    "diagnosable_late_order_deadlock_t4",
)


def _stages(db: Path, label: str) -> dict[str, FunnelStage]:
    con = open_read_only(db)
    try:
        ids = [r[0] for r in con.execute("SELECT bench_run_id FROM bench_runs WHERE label = ?", [label]).fetchall()]
        return {r.case_id: stage_of(r) for r in funnel_rows(con, ids)}
    finally:
        con.close()


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("funnel") / "f.duckdb"
    cases = [a for c in SUCCESS_CASES for a in ("--case", c)]
    for label, flags in {
        "reference": ["--model", "scripted:reference"],
        "fabricator": ["--model", "scripted:fabricator?p=1&seed=3"],
        "eager": ["--model", "scripted:eager?p=1"],
        "stopped": ["--model", "scripted:reference", "--max-model-calls", "1"],
        "dismissive": ["--model", "scripted:dismissive"],
        "optimist": ["--model", "scripted:optimist"],
    }.items():
        assert main(["run", "--db", str(path), "--label", label, *flags, *cases]) in (0, 1)
    return path


def test_the_reference_succeeds_at_every_case(db: Path) -> None:
    assert set(_stages(db, "reference").values()) == {FunnelStage.SUCCESS}


def test_a_fabricators_runs_stop_at_evidenceguard(db: Path) -> None:
    stages = _stages(db, "fabricator")
    assert FunnelStage.CITATION_REJECTED in stages.values()
    assert set(stages.values()) <= {FunnelStage.CITATION_REJECTED, FunnelStage.SUCCESS}


def test_a_budget_that_stops_the_loop_is_no_valid_draft_once_evidence_came_back(db: Path) -> None:
    """One model call: where the first call already returned the case's evidence the run stopped before a Draft;
    where it did not, the earlier stage counts."""
    assert _stages(db, "stopped") == {
        "diagnosable_gateway_risk_pool_exhausted_t1": FunnelStage.NO_VALID_DRAFT,
        "diagnosable_webhook_cert_expired_acme_pay": FunnelStage.NO_VALID_DRAFT,
        "diagnosable_duplicate_settlement_batch_rerun_shop42": FunnelStage.NO_VALID_DRAFT,
        "diagnosable_late_order_deadlock_t4": FunnelStage.NEVER_RETRIEVED,
    }


def test_an_eager_model_is_stopped_by_semanticguard_where_it_concludes_early(db: Path) -> None:
    stages = _stages(db, "eager")
    assert set(stages.values()) <= {FunnelStage.UNSUPPORTED, FunnelStage.SUCCESS}
    assert FunnelStage.UNSUPPORTED in stages.values()


def test_the_confusion_shows_each_taggers_error(db: Path) -> None:
    con = open_read_only(db)
    try:
        query = "SELECT bench_run_id FROM bench_runs WHERE label = ?"
        ids = {
            label: [r[0] for r in con.execute(query, [label]).fetchall()]
            for label in ("reference", "dismissive", "optimist")
        }
        by = {label: confusion(gain_tag_rows(con, run_ids))[0] for label, run_ids in ids.items()}
    finally:
        con.close()
    ref, dis, opt = by["reference"], by["dismissive"], by["optimist"]
    assert ref.no_gain_on_evidence == 0 and ref.gained_on_evidence > 0
    assert dis.gained_on_evidence == 0 and 0 < dis.no_gain_on_evidence <= ref.gained_on_evidence
    assert opt.no_gain_on_evidence == 0 and opt.no_gain_on_nothing == 0
    assert opt.gained_on_nothing == ref.gained_on_nothing + ref.no_gain_on_nothing


def test_the_funnel_counts_every_run_expected_to_succeed(db: Path) -> None:
    con = open_read_only(db)
    try:
        rows = funnel_rows(con, [r[0] for r in con.execute("SELECT bench_run_id FROM bench_runs").fetchall()])
    finally:
        con.close()
    groups = funnel(rows)
    assert sum(g.runs for g in groups) == len(rows) == 6 * len(SUCCESS_CASES)
    assert all(sum(n for _, n in g.stages) == g.runs for g in groups)
    assert [s for s, _ in groups[0].stages] == list(FunnelStage)
