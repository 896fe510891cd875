"""`harness-bench compare-stops` as a user runs it: the Pareto table on a scripted sweep, the JSON every policy's
prediction and every run's cut is in, the plot, policies from a file, and every bad input refused in one line (exit 2,
nothing written); the same comparison in `report`; and, on a committed real-model recording replayed offline, the
NO_GAIN rows equal the lower thresholds the recording ran."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import duckdb
import pytest

from runners.cli import main
from runners.decisions.case_alternatives import with_alternatives
from runners.decisions.compare_stops import compare_stops
from runners.decisions.counterfactual import RunStatus, recorded_counts
from runners.domain.stop_rules import parse_rules
from runners.store.connection import connect
from runners.store.replayable_runs import ReplayableRun, runs_of_label
from tests._db import open_read_only
from tests._real_replays import RECORDINGS, replayed, summary_of

CASES = (
    "diagnosable_late_settlement_cutoff_t2",
    "diagnosable_late_visa_rate_limit_mall88",
    "empty_logs_gateway_timeout_t1",
    "duplicate_scopes_log_field_order_gateway_pool_t1",
    "tool_failures_retry_same_scope_fails_again_t12_webhooks",
    "multi_call_turns_calls_after_stop_required_same_message_t5",
)
POLICIES = ("no-gain:4", "no-gain:1", "tool-cap:2", "repeat:k=2,w=4", "no-gain:2+tool-cap:3")


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("stops") / "sweep.duckdb"
    argv = ["sweep", "--db", str(db), "--label", "w", "--epochs", "2", "--model", "scripted:rewriter",
            "--no-gain-threshold", "2,4", *(a for c in CASES for a in ("--case", c))]  # fmt: skip
    assert main(argv) == 0
    return db


def _bench_run(db: Path, threshold: int) -> str:
    con = open_read_only(db)
    try:
        row = con.execute("SELECT any_value(bench_run_id) FROM case_runs WHERE no_gain_threshold = ?",
                          [threshold]).fetchone()  # fmt: skip
    finally:
        con.close()
    assert row is not None
    return str(row[0])


def test_the_table_the_json_and_the_plot(swept: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, plot = tmp_path / "stops.json", tmp_path / "stops.png"
    argv = ["compare-stops", "--db", str(swept), "--bench-run", _bench_run(swept, 4), "--cut-points", "--json",
            str(out), "--plot", str(plot), *(a for p in POLICIES for a in ("--policy", p))]  # fmt: skip
    code = main(argv)
    printed = capsys.readouterr().out
    assert code == 0
    for spec in POLICIES:
        assert spec in printed
    assert "as recorded: recall" in printed and "◆" in printed and "cut points of no-gain:1" in printed
    assert "censored" in printed and "unknown" in printed
    data = json.loads(out.read_text())
    assert [p["policy"] for p in data["policies"]] == list(POLICIES)
    for p in data["policies"]:
        assert {"tool_invocations", "model_calls", "tokens"} <= set(p["predicted"])
        assert len(p["runs"]) == len(CASES) * 2
        assert all(("cut" in r) and (r["cut"] is None) == (r["status"] != "CUT") for r in p["runs"])
    baseline, lowest = data["policies"][0], data["policies"][1]
    assert baseline["runs_cut"] == 0 and lowest["runs_cut"] >= 1, "the recorded threshold is the baseline"
    recorded = sum(r["recorded"]["tool_invocations"] for r in baseline["runs"])
    assert baseline["predicted"]["tool_invocations"] == recorded
    assert lowest["predicted"]["tool_invocations"] < recorded
    assert plot.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("width", [60, 200])
def test_every_policy_is_named_at_any_terminal_width(swept: Path, width: int) -> None:
    """A terminal too narrow for the table gets one block per policy: the numbers never squeeze the name out."""
    from rich.console import Console

    from runners.rendering.compare_stops import render

    con = connect(swept, read_only=True)
    try:
        runs = runs_of_label(con, str(swept), "w")
    finally:
        con.close()
    result = compare_stops(with_alternatives(runs), [parse_rules(p) for p in POLICIES[1:]])
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(render("stop rules", result))
    text = console.export_text()
    for spec in POLICIES[1:]:
        assert spec in text, (width, text)
    assert ("recall kept 0." in text) is (width < 100)
    assert max(len(line) for line in text.splitlines()) <= width


def test_no_policy_compares_the_default_set(swept: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from runners.domain.stop_rules import DEFAULT_POLICY_SPECS

    out = tmp_path / "s.json"
    assert main(["compare-stops", "--db", str(swept), "--label", "w", "--json", str(out)]) == 0
    assert [p["policy"] for p in json.loads(out.read_text())["policies"]] == list(DEFAULT_POLICY_SPECS)
    assert "default set" in capsys.readouterr().out


def test_a_policy_file_with_a_byte_order_mark_is_read(swept: Path, tmp_path: Path) -> None:
    policies, out = tmp_path / "policies.txt", tmp_path / "s.json"
    policies.write_bytes("\ufefftool-cap:2\r\nno-gain:1\r\n".encode())
    assert main(["compare-stops", "--db", str(swept), "--label", "w", "--policy-file", str(policies),
                 "--json", str(out)]) == 0  # fmt: skip
    assert [p["policy"] for p in json.loads(out.read_text())["policies"]] == ["tool-cap:2", "no-gain:1"]


def test_policies_from_a_file(swept: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policies = tmp_path / "policies.txt"
    policies.write_text("# what we run today, and the contract\ntool-cap:2\n\nno-gain:1  # the contract\n")
    out = tmp_path / "s.json"
    code = main(["compare-stops", "--db", str(swept), "--label", "w", "--policy", "repeat:k=2,w=4",
                 "--policy-file", str(policies), "--json", str(out)])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert [p["policy"] for p in json.loads(out.read_text())["policies"]] == ["repeat:k=2,w=4", "tool-cap:2",
                                                                              "no-gain:1"]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "policy_file", "message"),
    [
        (["--policy", "nope:3"], None, "--policy 'nope:3': not a stop rule"),
        (["--policy", "repeat:k=3"], None, "--policy 'repeat:k=3': w: Field required"),
        (["--policy", "tool-cap:0"], None, "--policy 'tool-cap:0': n: Input should be greater than or equal to 1"),
        (["--policy", "no-gain:2+"], None, "empty stop rule"),
        ([], "tool-cap:2\nturn-cap:x\n", "line 2: 'turn-cap:x': n='x' is not a whole number"),
        ([], "# nothing\n", "no policy in it"),
        ([], b"\xff\xfe", "cannot be read"),
        (["--policy", "repeat:k=3,w=2"], None, "w=2 is less than k=3: the window can never hold k requests"),
        (["--policy", "no-gain:1", "--label", "nope"], None, "--label: no case runs labelled 'nope'"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(
    swept: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], policy_file: str | bytes | None,
    message: str,
) -> None:  # fmt: skip
    out, plot = tmp_path / "s.json", tmp_path / "s.png"
    extra: list[str] = []
    if policy_file is not None:
        path = tmp_path / "policies.txt"
        path.write_bytes(policy_file if isinstance(policy_file, bytes) else policy_file.encode())
        extra = ["--policy-file", str(path)]
    which = [] if "--label" in argv else ["--label", "w"]
    code = main(["compare-stops", "--db", str(swept), *which, "--json", str(out), "--plot", str(plot), *argv,
                 *extra])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert message in " ".join(err.split()) and len(err.strip().splitlines()) == 1, err
    assert not out.exists() and not plot.exists()


def test_an_output_that_is_an_input_or_a_folder_is_refused(
    swept: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policies = tmp_path / "p.txt"
    policies.write_text("tool-cap:2\n")
    before = policies.read_bytes()
    for flag, path, message in (("--json", policies, "--json"), ("--plot", tmp_path, "is a folder"),
                                ("--json", swept, "--db")):  # fmt: skip
        code = main(["compare-stops", "--db", str(swept), "--label", "w", "--policy-file", str(policies), flag,
                     str(path)])  # fmt: skip
        err = capsys.readouterr().err
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert policies.read_bytes() == before


def test_runs_without_events_are_refused(swept: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "no-events.duckdb"
    shutil.copyfile(swept, db)
    con = duckdb.connect(str(db))
    con.execute("DELETE FROM events")
    con.close()
    out = tmp_path / "s.json"
    code = main(["compare-stops", "--db", str(db), "--label", "w", "--policy", "tool-cap:2", "--json", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "has no stored events to compare stop rules on" in err and not out.exists()


@pytest.mark.parametrize(("control", "refused"), [("envelope", True), ("duplicate-rejection", True),
                                                   ("semantic-guard", False)])  # fmt: skip
def test_runs_with_a_tracker_control_off_are_refused(
    control: str, refused: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tracker decides every replayed request with its controls on: a run that ran without one (a duplicate
    scope executed, a request without an envelope) has no exact replay; a guard switched off acts after the loop."""
    db = tmp_path / "ablated.duckdb"
    case = "duplicate_scopes_log_field_order_gateway_pool_t1"
    assert main(["run", "--db", str(db), "--label", "a", "--case", case, "--ablate", control]) == 0
    capsys.readouterr()
    out = tmp_path / "s.json"
    code = main(["compare-stops", "--db", str(db), "--label", "a", "--policy", "tool-cap:2", "--json", str(out)])
    err = capsys.readouterr().err
    if refused:
        assert code == 2 and f"ran with --ablate {control}: the tracker" in err and not out.exists(), err
        assert len(err.strip().splitlines()) == 1
        assert main(["whatif", "--db", str(db), "--label", "a", "--no-gain-threshold", "1"]) == 2
        assert f"ran with --ablate {control}" in capsys.readouterr().err
    else:
        assert code == 0 and out.exists(), err


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["compare-stops", "--help"])
    assert exc.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for flag in ("--policy SPEC", "--policy-file", "--json", "--plot", "--cut-points", "repeat:k=K,w=W"):
        assert flag in text


def test_the_report_has_the_pareto_table_and_its_plot(
    swept: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report"
    assert main(["report", "--db", str(swept), "--sweep", "latest", "--out", str(out)]) == 0, capsys.readouterr().err
    md = (out / "report.md").read_text()
    assert "## Which stop rule pays" in md and "| policy | runs cut |" in md and "stop_rules_pareto.png" in md
    assert "no-gain:3" in md and "no-gain:2+tool-cap:8" in md and "repeat:k=3,w=10" in md
    assert (out / "stop_rules_pareto.png").read_bytes().startswith(b"\x89PNG")
    assert "Which stop rule pays" in (out / "report.html").read_text()


# -- the real-model recordings --------------------------------------------------------------------------------------
def _by_threshold(db: Path, label: str) -> dict[int, dict[tuple[str, int], ReplayableRun]]:
    con = connect(db, read_only=True)
    try:
        runs = runs_of_label(con, str(db), label)
    finally:
        con.close()
    out: dict[int, dict[tuple[str, int], ReplayableRun]] = {}
    for r in runs:
        out.setdefault(r.no_gain_threshold, {})[(r.case_id, r.epoch)] = r
    return out


SWEPT = [f for f in RECORDINGS if len(summary_of(f).thresholds) >= 2]
"""The recordings that ran more than one NO_GAIN threshold (a plain-loop recording has no contract to sweep)."""


@pytest.mark.parametrize("folder", SWEPT, ids=[p.name for p in SWEPT])
def test_on_a_real_recording_the_no_gain_rows_equal_the_recorded_lower_thresholds(
    folder: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The recording's highest threshold is the runs as recorded; each lower threshold it also ran is a `no-gain`
    policy whose row must be what those runs did: the same runs cut (each saturated at the cut request), the same
    tool calls and model calls (the one Draft call after the cut included), and every run the policy leaves alone
    the recorded run; tokens after a cut were never recorded, so the prediction is their lower bound."""
    committed = summary_of(folder)
    thresholds = sorted(t.no_gain_threshold for t in committed.thresholds)
    by = _by_threshold(replayed(folder, tmp_path_factory), committed.model)
    top, lower = thresholds[-1], thresholds[:-1]
    base = list(by[top].values())
    result = compare_stops(with_alternatives(base), [parse_rules(f"no-gain:{t}") for t in [top, *lower]])
    assert result.policies[0].runs_cut == 0, "the recorded threshold changes nothing"
    compared = 0
    for t, row in zip(lower, result.policies[1:], strict=True):
        recorded = by[t]
        for cf in row.runs:
            if cf.status is RunStatus.CENSORED:  # the model was not asked the same: nothing to compare
                continue
            live = recorded[(cf.case_id, cf.epoch)]
            counts = recorded_counts(live.events)
            assert cf.to_cut is not None, cf.case_id
            if cf.status is RunStatus.UNCHANGED:
                assert counts == cf.to_cut, (t, cf.case_id)
                assert live.outcome_passed == by[top][(cf.case_id, cf.epoch)].outcome_passed, (t, cf.case_id)
                continue
            assert cf.cut is not None and live.outcome is not None
            assert counts.tool_invocations == cf.to_cut.tool_invocations, (t, cf.case_id)
            assert counts.model_calls == cf.to_cut.model_calls + int(cf.cut.draft_call), (t, cf.case_id)
            assert counts.tokens >= cf.to_cut.tokens, (t, cf.case_id)
            compared += 1
        answered = [cf for cf in row.runs if cf.status is not RunStatus.CENSORED]
        keys = [(cf.case_id, cf.epoch) for cf in answered]
        assert row.predicted.tool_invocations == sum(recorded_counts(recorded[k].events).tool_invocations
                                                     for k in keys), t  # fmt: skip
        assert row.predicted.model_calls == sum(recorded_counts(recorded[k].events).model_calls for k in keys), t
    assert compared, "no run was cut: the comparison proved nothing"
