"""`--stop-rule`: the loop detectors as a run and sweep setting — declared once with the Harness's settings, stored
with the bench run (so a stored run says which rule it ran under), reproduced by its flags, run live by the Harness
and by the plain loop, refused in one line when it names a cap (a budget's flag) or a bad rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import BudgetKind, RejectionReason
from runners.cli import main
from runners.plan.bench_config import BenchHarnessConfig, request_checks
from runners.plan.settings import RunSettings, reproduce_flags
from runners.run.verdict import trajectory_applies
from tests._db import open_read_only

CASE = "duplicate_scopes_log_field_order_gateway_pool_t1"
"""A case whose reference trajectory asks the same log query again (a repeat the Harness refuses as a duplicate)."""


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("tool-cap:8", "--stop-rule 'tool-cap:8': tool-cap:8 is not a loop detector: give it as --max-tool-invoc"),
        ("no-gain:1", "give it as --no-gain-threshold"),
        ("turn-cap:3+repeat:k=3,w=10", "give it as --max-model-calls"),
        ("nope:3", "--stop-rule 'nope:3': not a stop rule"),
        ("repeat:k=1,w=10", "k: Input should be greater than or equal to 2"),
        ("repeat:k=3", "w: Field required"),
        ("repeat:k=3,w=10+", "empty stop rule"),
    ],
)
def test_a_bad_stop_rule_is_one_line_exit_2_and_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str, message: str
) -> None:
    db = tmp_path / "x.duckdb"
    code = main(["run", "--db", str(db), "--case", CASE, "--stop-rule", spec])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not db.exists()


def test_the_rule_is_stored_with_the_run_and_stops_it_live(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "x.duckdb"
    code = main(["run", "--db", str(db), "--case", CASE, "--stop-rule", "repeat:w=4,k=2", "--label", "native"])
    assert code == 0, capsys.readouterr().err
    code = main(["sweep", "--db", str(db), "--case", CASE, "--stop-rule", "repeat:k=2,w=4", "--agent", "plain",
                 "--no-gain-threshold", "2", "--epochs", "1", "--label", "plain"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    con = open_read_only(db)
    try:
        stored = con.execute(
            "SELECT c.label, b.stop_rule, b.settings_json FROM bench_runs b JOIN (SELECT DISTINCT"
            " bench_run_id, label FROM case_runs) c USING (bench_run_id) ORDER BY c.label"
        ).fetchall()
        stops = con.execute(
            "SELECT c.label, e.budget, e.tool_call_id FROM events e JOIN case_runs c USING"
            " (case_run_id) WHERE e.kind = 'BUDGET_EXHAUSTED' ORDER BY c.label"
        ).fetchall()
        refused = con.execute("SELECT rejection FROM events WHERE kind = 'TOOL_REQUEST_REJECTED'").fetchall()
        passed = con.execute("SELECT label, passed, trajectory_passed FROM case_runs ORDER BY label").fetchall()
    finally:
        con.close()
    # stored in its canonical spelling, in its column and in the stored settings
    assert [(label, rule) for label, rule, _ in stored] == [("native", "repeat:k=2,w=4"), ("plain", "repeat:k=2,w=4")]
    assert all('"stop_rule":"repeat:k=2,w=4"' in settings for _, _, settings in stored)
    # both loops stopped on it, the Harness refusing the request it fired on
    assert [(label, budget) for label, budget, _ in stops] == [("native", BudgetKind.STOP_RULE.value),
                                                              ("plain", BudgetKind.STOP_RULE.value)]  # fmt: skip
    assert (RejectionReason.STOP_RULE.value,) in refused
    # the reference trajectory's bounds were written for runs without a stop rule: not judged on them
    assert all(trajectory is None for _, _, trajectory in passed)


def test_the_rule_is_reproduced_by_its_flag_and_makes_the_request_checks() -> None:
    settings = RunSettings.from_values({"stop_rule": "alternation:k=2+error-cycle:k=3"})
    assert isinstance(settings.config, BenchHarnessConfig)
    assert reproduce_flags(settings) == ["--stop-rule", "alternation:k=2+error-cycle:k=3"]
    assert [c.spec for c in request_checks(settings.config)] == ["alternation:k=2", "error-cycle:k=3"]  # type: ignore[attr-defined]
    assert request_checks(RunSettings.of().config) == ()
    assert not trajectory_applies(settings.config, scripted=True)
    assert trajectory_applies(RunSettings.of().config, scripted=True)
