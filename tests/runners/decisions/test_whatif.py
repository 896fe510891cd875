"""`harness-bench whatif` is validated where the truth is known: the what-if of a sweep's highest threshold at each
lower one must equal the sweep's own lower points in every count up to the cut — for every scripted behaviour
profile, and for every committed real-model recording replayed offline.

What genuinely cannot be equal is not compared as equal: after an earlier STOP_REQUIRED the model writes its Draft
in one more call, whose tokens (and the SemanticGuard call after it) the higher-threshold run never made, so the
lower run's total tokens are only bounded below by the what-if's tokens up to the cut."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import duckdb
import pytest

from harness.contracts import InvocationStatus, ModelPurpose, StopReason
from harness.trace import ModelCall, StopRequiredDelivered, ToolInvocation, ToolRequestRejected, TraceEvent
from runners.cli import main
from runners.decisions.counterfactual import ConclusionRisk, RunStatus, RunWhatIf, recorded_counts, replay_run
from runners.decisions.whatif import WhatIf, whatif
from runners.domain.profiles import PROFILES
from runners.store.connection import connect
from runners.store.recorded_sweeps import CaseRunRow, read_recorded
from runners.store.replayable_runs import ReplayableRun, runs_of_label
from tests._db import open_read_only
from tests._real_replays import RECORDINGS, replayed, summary_of

ROOT = Path(__file__).resolve().parents[3]
CASES = (
    "diagnosable_late_settlement_cutoff_t2",
    "diagnosable_late_visa_rate_limit_mall88",
    "empty_logs_gateway_timeout_t1",
    "empty_logs_risk_declines_ignores_stop_t1",
    "duplicate_scopes_duplicate_then_evidence_risk_rule",
    "budget_exhaustion_tool_budget_alternating_dead_ends_shop42",
    "multi_call_turns_first_empty_rest_run_t5",
    "multi_call_turns_calls_after_stop_required_same_message_t5",
    "protocol_violations_unknown_tool_corrected_then_saturated_t6_email",
    "generic_kb_refund_policy_gained_then_generic_northwind",
)


def _sweep(db: Path, argv: Sequence[str], capsys: pytest.CaptureFixture[str], label: str = "w") -> None:
    code = main(["sweep", "--db", str(db), "--label", label, "--epochs", "1", *argv])
    assert code == 0, capsys.readouterr().err[-2000:]
    capsys.readouterr()


def _requests(events: Sequence[TraceEvent]) -> list[tuple[object, ...]]:
    """Every tool request as the Harness decided it."""
    out: list[tuple[object, ...]] = []
    for e in events:
        if isinstance(e, ToolInvocation):
            out.append((e.tool_call_id, e.tool, e.scope, e.invocation_status, e.evidence_status))
        elif isinstance(e, ToolRequestRejected):
            out.append((e.tool_call_id, e.tool, e.scope, e.rejection, e.violation))
    return out


def _prefix(events: Sequence[TraceEvent], call_id: str) -> tuple[int, int]:
    """Diagnosis model calls and their tokens before the request `call_id` was decided."""
    calls = tokens = 0
    for e in events:
        if isinstance(e, ToolInvocation | ToolRequestRejected) and e.tool_call_id == call_id:
            break
        if isinstance(e, ModelCall) and e.purpose is ModelPurpose.DIAGNOSIS:
            calls += 1
            tokens += (e.input_tokens or 0) + (e.output_tokens or 0)
    return calls, tokens


def _compare(base: RunWhatIf, base_run: ReplayableRun, lower: ReplayableRun, row: CaseRunRow) -> int:
    """The what-if of `base_run` at `lower`'s threshold against the recorded `lower` run: returns 1 for a cut."""
    where = f"{lower.case_id} at {lower.no_gain_threshold}"
    counts = recorded_counts(lower.events)
    # the stored row and the events it was written from agree
    assert (counts.tool_invocations, counts.model_calls) == (row.tool_invocations, row.model_calls), where
    if base.status is RunStatus.UNCHANGED:
        assert base.to_cut == base.recorded == counts, where
        assert _requests(base_run.events) == _requests(lower.events), where
        return 0
    assert base.status is RunStatus.CUT and base.cut is not None and base.to_cut is not None, where
    cut = base.cut
    assert cut.stop_reason is StopReason.INFORMATION_SATURATED, where
    stops = [e for e in lower.events if isinstance(e, StopRequiredDelivered)]
    # the lower run saturated at the cut, for that reason, and was the same run up to it
    assert stops and stops[0].tool_call_id == cut.tool_call_id, where
    assert row.stop_reason == StopReason.INFORMATION_SATURATED.value, where
    n = cut.request
    same = n if cut.executed else n - 1  # refused instead: the lower run rejected it (SATURATED) where this one ran it
    assert _requests(lower.events)[:same] == _requests(base_run.events)[:same], where
    assert _requests(lower.events)[n - 1][:3] == _requests(base_run.events)[n - 1][:3], where
    # every count up to the cut: tool invocations (none follows a STOP_REQUIRED), model calls and tokens
    assert row.tool_invocations == base.to_cut.tool_invocations, where
    calls, tokens = _prefix(lower.events, cut.tool_call_id)
    assert (calls, tokens) == (base.to_cut.model_calls, base.to_cut.tokens), where
    # after the cut: the one Draft call STOP_REQUIRED allows (no retry here), whose tokens cannot be known
    assert row.model_calls == base.to_cut.model_calls + int(base.draft_call), where
    assert row.input_tokens + row.output_tokens >= base.to_cut.tokens, where
    assert base.saved is not None
    assert base.saved.tool_invocations == base.recorded.tool_invocations - row.tool_invocations, where
    assert base.saved.model_calls == base.recorded.model_calls - row.model_calls, where
    return 1


def _check_sweep(db: Path, top: int, lower: Sequence[int], label: str = "w") -> WhatIf:
    """whatif of the `top` point at `lower` equals the stored `lower` points of `label`; returns the what-if."""
    con = connect(db, read_only=True)
    try:
        runs = runs_of_label(con, str(db), label)
    finally:
        con.close()
    rows = {(r.case_id, r.no_gain_threshold): r for r in read_recorded(db, label).runs}
    by_threshold = {(r.case_id, r.no_gain_threshold): r for r in runs}
    base_runs = [r for r in runs if r.no_gain_threshold == top]
    assert base_runs
    result = whatif(base_runs, lower)
    cuts = 0
    for point in result.points:
        for base, base_run in zip(point.per_run, base_runs, strict=True):
            key = (base.case_id, point.no_gain_threshold)
            cuts += _compare(base, base_run, by_threshold[key], rows[key])
        # the run at its own threshold replays to itself
    for r in runs:
        assert replay_run(r, r.no_gain_threshold).status is RunStatus.UNCHANGED, r.case_id
    assert cuts, "no run was cut: the comparison proved nothing"
    return result


@pytest.mark.parametrize("profile", PROFILES)
def test_whatif_of_the_threshold_4_point_equals_the_lower_points(
    profile: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "sweep.duckdb"
    _sweep(db, ["--model", f"scripted:{profile}", "--no-gain-threshold", "1,2,3,4",
                *(a for c in CASES for a in ("--case", c))], capsys)  # fmt: skip
    _check_sweep(db, 4, (1, 2, 3))


HARNESSED = [f for f in RECORDINGS if summary_of(f).agent.value == "native" and summary_of(f).ablation.value == "none"]
"""The recordings through the Harness's loop with every control on (a plain-loop recording, or one with the envelope
switched off, has no information-gain contract to replay; one with a guard off was recorded at one threshold)."""


@pytest.mark.parametrize("folder", HARNESSED, ids=[p.name for p in HARNESSED])
def test_whatif_on_a_real_models_cassettes_equals_its_lower_points(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:  # fmt: skip
    """A recording's highest recorded threshold stands in for the threshold-4 point (a higher one would ask what
    was never recorded). Every lower threshold is replayed from the same cassettes: a threshold the recording
    swept answers from its own recorded runs; one it did not answers up to the cut from the shared prefix and then
    misses the cassette (the Draft request after the earlier STOP_REQUIRED was never sent), which ends that run
    — exactly the part the what-if claims to know.

    The recorded thresholds come from the session's replay of the recording (`replayed`, built once and read by
    every module that needs it; the same `sweep` flags and cassettes): only the thresholds it did not record are
    swept here, under the replay's label, into a copy of it (the shared file is never written to)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    committed = summary_of(folder)
    args = list(committed.sweep_args)
    flags = [a for i, a in enumerate(args) if not (a == "--case" or (i and args[i - 1] == "--case"))]
    at = flags.index("--no-gain-threshold") + 1
    top = max(int(t) for t in flags[at].split(","))
    assert top >= 2, "the recording has no lower threshold to compare"
    if flags[at] == ",".join(str(t) for t in range(1, top + 1)):  # every lower threshold recorded: the replay's
        _check_sweep(replayed(folder, tmp_path_factory), top, tuple(range(1, top)), label=committed.model)
        return
    recorded = {int(t) for t in flags[at].split(",")}
    flags[at] = ",".join(str(t) for t in range(1, top) if t not in recorded)
    cases = [args[i + 1] for i, a in enumerate(args) if a == "--case"]
    db = tmp_path / "replay.duckdb"
    shutil.copyfile(replayed(folder, tmp_path_factory), db)
    _sweep(db, [*flags, *(a for c in cases for a in ("--case", c)), "--cassettes", str(folder), "--record-mode",
                "none"], capsys, label=committed.model)  # fmt: skip
    _check_sweep(db, top, tuple(range(1, top)), label=committed.model)


# -- the command ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("whatif") / "sweep.duckdb"
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


def test_the_command_prints_the_table_and_writes_the_json(
    swept: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "whatif.json"
    code = main(["whatif", "--db", str(swept), "--bench-run", _bench_run(swept, 4), "--no-gain-threshold", "1,3",
                 "--max-tool-invocations", "3", "--json", str(out)])  # fmt: skip
    printed = capsys.readouterr().out
    assert code == 0
    data = json.loads(out.read_text())
    points = data["points"]
    assert [(p["no_gain_threshold"], p["max_tool_invocations"]) for p in points] == [(3, 3), (1, 3)]
    for p in points:
        for total in ("tool_invocations", "model_calls", "tokens"):
            assert set(p[total]) == {"total", "mean", "low", "high", "bound"}
        assert p["runs"] == len(CASES) * 2 and p["runs_cut"] >= 1
        assert all(r["cut"]["tool_call_id"] for r in p["per_run"] if r["status"] == "CUT")
    assert "unknown" in printed and "censored" in printed and "cut points at ngt=1, mti=3" in printed
    # a lower threshold never saves less
    low, high = points[1], points[0]
    assert low["tool_invocations"]["total"] >= high["tool_invocations"]["total"]


def test_a_label_spanning_lower_thresholds_reports_censored_runs(
    swept: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Runs of the threshold-2 point that saturated cannot say what threshold 3 would have done."""
    code = main(["whatif", "--db", str(swept), "--label", "w", "--no-gain-threshold", "3"])
    assert code == 0, capsys.readouterr().err
    con = connect(swept, read_only=True)
    try:
        runs = runs_of_label(con, str(swept), "w")
    finally:
        con.close()
    result = whatif(runs, (3,))
    (point,) = result.points
    censored = [r for r in point.per_run if r.status is RunStatus.CENSORED]
    assert censored and all(r.recorded_no_gain_threshold == 2 for r in censored)
    assert point.runs_censored == len(censored)
    assert all(r.saved is None and r.to_cut is None for r in censored)
    # the savings leave the censored runs out
    answered = [r for r in point.per_run if r.saved is not None]
    assert point.tool_invocations.total == sum(r.saved.tool_invocations for r in answered if r.saved)


def test_a_lower_threshold_cuts_no_later_and_saves_no_less(swept: Path) -> None:
    con = connect(swept, read_only=True)
    try:
        runs = [r for r in runs_of_label(con, str(swept), "w") if r.no_gain_threshold == 4]
    finally:
        con.close()
    points = {p.no_gain_threshold: p for p in whatif(runs, (1, 2, 3)).points}
    for lower, higher in ((1, 2), (2, 3)):
        for a, b in zip(points[lower].per_run, points[higher].per_run, strict=True):
            assert a.case_run_id == b.case_run_id
            if b.cut is not None:  # cut at the higher threshold: cut at the lower one too, no later
                assert a.cut is not None and a.cut.request <= b.cut.request, a.case_id
            if a.saved is not None and b.saved is not None:
                assert a.saved.tool_invocations >= b.saved.tool_invocations, a.case_id
    # the run's own threshold changes nothing: the replay agrees with every recorded decision
    for r in runs:
        own = replay_run(r, 4)
        assert own.status is RunStatus.UNCHANGED and own.saved is not None and own.saved.tool_invocations == 0


def test_a_lower_tool_budget_cuts_exactly(swept: Path) -> None:
    con = connect(swept, read_only=True)
    try:
        runs = [r for r in runs_of_label(con, str(swept), "w") if r.no_gain_threshold == 4]
    finally:
        con.close()
    (point,) = whatif(runs, (3,), (2,)).points
    budget = StopReason.BUDGET_LIMIT_REACHED
    budget_cuts = [r for r in point.per_run if r.cut is not None and r.cut.stop_reason is budget]
    assert budget_cuts
    for r in budget_cuts:
        assert r.to_cut is not None and r.to_cut.tool_invocations == 2 and not r.draft_call and not r.cut.executed


def test_a_published_draft_citing_a_later_record_is_at_risk(swept: Path) -> None:
    con = connect(swept, read_only=True)
    try:
        runs = [r for r in runs_of_label(con, str(swept), "w") if r.no_gain_threshold == 4]
    finally:
        con.close()
    (point,) = whatif(runs, (1,)).points
    at_risk = [r for r in point.per_run if r.conclusion is ConclusionRisk.AT_RISK]
    assert at_risk and point.conclusions_at_risk == len(at_risk)
    by_id = {r.case_run_id: r for r in runs}
    for r in at_risk:
        run = by_id[r.case_run_id]
        assert run.outcome == "SUCCESS" and run.final_message is not None and r.cut is not None
        cited = {c["tool_call_id"] for claim in json.loads(run.final_message)["claims"] for c in claim["citations"]}
        first_lost = r.cut.request if r.cut.executed else r.cut.request - 1  # requests from here on are not run
        later = {req[0] for req in _requests(run.events)[first_lost:] if req[3] is InvocationStatus.COMPLETED}
        assert cited & later, r.case_id
    # without the stored Draft the risk is unknown, never guessed
    blind = [dataclasses.replace(run, final_message=None) for run in runs]
    (unknown,) = whatif(blind, (1,)).points
    assert unknown.conclusions_at_risk == 0 and unknown.conclusions_unknown >= len(at_risk)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--label", "nope", "--no-gain-threshold", "1"], "--label: no case runs labelled 'nope'"),
        (["--bench-run", "br-nope", "--no-gain-threshold", "1"], "--bench-run: unknown bench run 'br-nope'"),
        (["--label", "w", "--no-gain-threshold", "4"], "--no-gain-threshold 4: not below"),
        (["--label", "w", "--no-gain-threshold", "1", "--max-tool-invocations", "99"], "--max-tool-invocations 99"),
        (["--label", "w", "--no-gain-threshold", "0"], "--no-gain-threshold"),
        (["--label", "w", "--no-gain-threshold", "1,,2"], "--no-gain-threshold"),
        (["--no-gain-threshold", "1"], "--label"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(
    swept: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    out = tmp_path / "w.json"
    code = main(["whatif", "--db", str(swept), "--json", str(out), *argv])
    err = capsys.readouterr().err
    assert code == 2
    assert message in " ".join(err.split()) and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


def test_runs_without_events_are_refused(swept: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "no-events.duckdb"
    shutil.copyfile(swept, db)
    con = duckdb.connect(str(db))
    con.execute("DELETE FROM events")
    con.close()
    out = tmp_path / "w.json"
    code = main(["whatif", "--db", str(db), "--label", "w", "--no-gain-threshold", "1", "--json", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "has no stored events to replay" in err and not out.exists()


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["whatif", "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    assert "--no-gain-threshold" in text and "censored" in text and "--json" in text
