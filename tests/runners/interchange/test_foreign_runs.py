"""Runs of another agent in: tau-bench's recorded runs (small files written here in its format) and their verdicts
from the reward; `--outcomes` files (CSV and JSON Lines); what the Harness's rules infer of each result (and what is
left unknown). Property tests for both parsers: every file either reads whole or is one line naming the file and the
field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness import GainApplied, GainProducer, InformationGain, InvocationStatus, ModelCall, Released, ToolInvocation
from runners.interchange._foreign_events import INFERRED
from runners.interchange.observed_runs import TraceImportError
from runners.interchange.outcomes import OutcomesError, match_outcomes, read_outcomes
from runners.interchange.tau_bench import read_tau_bench


def _call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)}}]}  # fmt: skip


def _result(call_id: str, name: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}


def _run(task: int, trial: int, reward: float, traj: list[dict[str, Any]]) -> dict[str, Any]:
    return {"task_id": task, "trial": trial, "reward": reward, "info": {"source": "user"}, "traj": traj}


TRAJ = [
    {"role": "system", "content": "policy"},
    {"role": "user", "content": "change my flight"},
    _call("c1", "get_user_details", {"user_id": "u1"}),
    _result("c1", "get_user_details", '{"name": "A"}'),
    _call("c2", "search_direct_flight", {"origin": "JFK", "date": "2024-05-20"}),
    _result("c2", "search_direct_flight", '[{"flight_number": "HAT1"}]'),
    # the same call again (its arguments in another order), under a reused id as tau-bench's files do
    _call("c2", "search_direct_flight", {"date": "2024-05-20", "origin": "JFK"}),
    _result("c2", "search_direct_flight", '[{"flight_number": "HAT1"}]'),
    _call("c4", "think", {"thought": "hm"}),
    _result("c4", "think", ""),
    _call("c3", "book_reservation", {"user_id": "u1"}),
    _result("c3", "book_reservation", "Error: payment amount does not add up"),
    {"role": "assistant", "content": "Done."},
    {"role": "user", "content": "###STOP###"},
]


def _write(path: Path, runs: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(runs), encoding="utf-8")
    return path


def test_a_tau_bench_run_is_a_case_run_with_its_calls_in_order_and_its_reward_as_verdict(tmp_path: Path) -> None:
    read = read_tau_bench(_write(tmp_path / "t.json", [_run(7, 0, 1.0, TRAJ), _run(7, 1, 0.0, TRAJ[:4])]))
    first, second = read.runs
    assert (first.run_id, first.case_id, first.epoch, second.epoch) == ("7/0", "7", 1, 2)
    assert not first.harnessed and first.limits is None
    calls = [e for e in first.events if isinstance(e, ToolInvocation)]
    assert [(c.tool_call_id, c.tool) for c in calls] == [
        ("c1", "get_user_details"), ("c2", "search_direct_flight"), ("c2~2", "search_direct_flight"),
        ("c4", "think"), ("c3", "book_reservation"),
    ]  # fmt: skip
    assert calls[1].scope == calls[2].scope == '{"date":"2024-05-20","origin":"JFK"}'
    assert [c.invocation_status for c in calls][-1] is InvocationStatus.FAILED
    assert sum(isinstance(e, ModelCall) for e in first.events) == 6
    # the Harness's NO_GAIN: the repeat, the empty result; none for the failure, none for a result with evidence
    gains = [(e.tool_call_id, e.gain, e.producer) for e in first.events if isinstance(e, GainApplied)]
    assert gains == [("c2~2", InformationGain.NO_GAIN, GainProducer.HARNESS),
                     ("c4", InformationGain.NO_GAIN, GainProducer.HARNESS)]  # fmt: skip
    released = first.events[-1]
    assert isinstance(released, Released) and released.detail == INFERRED
    assert [e.seq for e in first.events] == list(range(len(first.events)))
    assert (read.verdicts["7/0"].passed, read.verdicts["7/1"].passed) == (True, False)
    # the messages as each model call's transcript: what it was given since the call before, and its answer
    assert len(first.contents) == 6 and first.final_text == "Done."
    given = first.contents[1].given
    assert given is not None and [m.role for m in given] == ["tool"]  # c1's result, answered by the second call


@pytest.mark.parametrize(
    ("runs", "message"),
    [
        ({"task_id": 1}, "a JSON dict where tau-bench's list of runs is due"),
        ([], "an empty list"),
        ([_run(1, 0, 2.0, TRAJ)], "run 0 (task_id 1, trial 0): reward: 2.0: must be a number from 0 to 1"),
        ([_run(1, 0, 1.0, TRAJ), _run(1, 0, 1.0, TRAJ)], "run 1 (task_id 1, trial 0): task 1 trial 0 twice"),
        ([{**_run(1, 0, 1.0, TRAJ), "task_id": True}], "run 0 (task_id True, trial 0): task_id:"),
        ([_run(1, 0, 1.0, [_result("zz", "x", "")])], "traj[0].tool_call_id: 'zz': no call of that id is waiting"),
        ([_run(1, 0, 1.0, [{"role": "robot"}])], "run 0 (task_id 1, trial 0): traj[0].role:"),
    ],
)
def test_a_file_not_in_tau_bench_s_shape_is_one_line(tmp_path: Path, runs: Any, message: str) -> None:
    path = _write(tmp_path / "bad.json", runs)
    with pytest.raises(TraceImportError) as err:
        read_tau_bench(path)
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value) and "\n" not in str(err.value)


_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_ARGS = st.dictionaries(st.sampled_from("abc"), st.integers(0, 3) | _TEXT, max_size=2)


@st.composite
def _trajectories(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[tuple[str, str, bool]]]:
    traj: list[dict[str, Any]] = [{"role": "system", "content": draw(_TEXT)}]
    expected = []
    for n in range(draw(st.integers(0, 6))):
        name = draw(st.sampled_from(["get", "search", "book"]))
        content = draw(st.sampled_from(["", "[]", "{}", "Error: no", '{"x": 1}']) | _TEXT)
        call_id = draw(st.sampled_from([f"id{n}", "same"]))
        traj += [_call(call_id, name, draw(_ARGS)), _result(call_id, name, content)]
        expected.append((name, content, content.startswith("Error:")))
        if draw(st.booleans()):
            traj.append({"role": "user", "content": draw(_TEXT)})
    return traj, expected


@given(_trajectories(), st.integers(0, 50), st.integers(0, 3), st.sampled_from([0.0, 1.0, 0.5, 1]))
def test_any_tau_bench_run_reads_with_every_call_in_order(
    tmp_path_factory: pytest.TempPathFactory, drawn: Any, task: int, trial: int, reward: float
) -> None:
    traj, expected = drawn
    path = _write(tmp_path_factory.mktemp("tau") / "t.json", [_run(task, trial, reward, traj)])
    read = read_tau_bench(path)
    (run,) = read.runs
    calls = [e for e in run.events if isinstance(e, ToolInvocation)]
    assert [(c.tool, c.invocation_status is InvocationStatus.FAILED) for c in calls] == [
        (name, failed) for name, _, failed in expected
    ]
    assert len({c.tool_call_id for c in calls}) == len(calls)
    assert [e.seq for e in run.events] == list(range(len(run.events)))
    assert read.verdicts[run.run_id].passed is (reward == 1)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | _TEXT,
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
                    max_leaves=12))  # fmt: skip
def test_any_json_is_tau_bench_runs_or_one_line(tmp_path_factory: pytest.TempPathFactory, value: Any) -> None:
    path = tmp_path_factory.mktemp("tau") / "t.json"
    path.write_text(json.dumps(value), encoding="utf-8")
    try:
        read_tau_bench(path)
    except TraceImportError as exc:
        assert str(exc).startswith(f"{path}:") and "\n" not in str(exc)


# -- --outcomes ------------------------------------------------------------------------------------------------------
def test_outcomes_as_csv_and_json_lines_give_the_same_verdicts(tmp_path: Path) -> None:
    csv_file = tmp_path / "o.csv"
    csv_file.write_text("run_id,passed,expected_outcome\nr1,true,\nr2,false,FALLBACK\n", encoding="utf-8")
    jsonl = tmp_path / "o.jsonl"
    jsonl.write_text('{"run_id": "r1", "reward": 1}\n{"trace_id": "' + "ab" * 16 + '", "reward": 0.5,'
                     ' "expected_outcome": "FALLBACK"}\n', encoding="utf-8")  # fmt: skip
    runs = {"r1": None, "r2": "ab" * 16}
    a = match_outcomes(csv_file, read_outcomes(csv_file), runs)
    b = match_outcomes(jsonl, read_outcomes(jsonl), runs)
    assert (
        {k: (v.passed, v.expected_outcome.value) for k, v in a.items()}
        == {k: (v.passed, v.expected_outcome.value) for k, v in b.items()}
        == {"r1": (True, "SUCCESS"), "r2": (False, "FALLBACK")}
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("run_id,passed\nr1,maybe\n", ':2: passed: "maybe": must be true or false'),
        ("run_id,reward\nr1,1.5\n", ':2: reward: "1.5": must be a number from 0 to 1'),
        ("run_id,passed,reward\nr1,true,1\n", ":2: passed or reward: both given"),
        ("trace_id,passed\nxyz,true\n", ':2: trace_id: "xyz": must be 32 hex digits'),
        ("run_id,passed,score\nr1,true,3\n", ":2: 'score': not a field of an outcome"),
        ('{"run_id": "r9", "passed": true}\n', ':1: run_id: "r9": no imported run has that id'),
        ('{"run_id": "r1", "passed": true}\n{"run_id": "r1", "passed": false}\n', ':2: run_id: run "r1" already'),
        ('{"run_id": "r1", "passed": 1}\n', ":1: passed: 1: must be true or false"),
        ('{"run_id": "r1", "passed": true, "expected_outcome": "FAILED"}\n', ':1: expected_outcome: "FAILED"'),
        ('{"run_id": "r1", "passed": tru}\n', ":1: not JSON"),
        ("run_id,passed\nr1,true,extra\n", ":2: 3 cells where the header has 2"),
    ],
)
def test_a_bad_outcome_row_is_one_line_naming_file_line_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "o.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(OutcomesError) as err:
        match_outcomes(path, read_outcomes(path), {"r1": None})
    assert str(err.value).startswith(f"{path}:") and message in str(err.value) and "\n" not in str(err.value)


_CELL = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=10)


@given(st.lists(st.fixed_dictionaries({}, optional={"run_id": _CELL, "trace_id": _CELL, "passed": _CELL | st.booleans(),
                                                    "reward": _CELL | st.floats(), "expected_outcome": _CELL,
                                                    "other": _CELL}), max_size=4),
       st.booleans())  # fmt: skip
def test_any_outcomes_file_reads_or_is_one_line(
    tmp_path_factory: pytest.TempPathFactory, rows: list[dict[str, Any]], as_json: bool
) -> None:
    path = tmp_path_factory.mktemp("o") / "o.txt"
    if as_json:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    else:
        import csv
        import io

        out = io.StringIO()
        writer = csv.writer(out)
        names = sorted({k for r in rows for k in r}) or ["run_id"]
        writer.writerow(names)
        for r in rows:
            writer.writerow([r.get(k, "") for k in names])
        path.write_text(out.getvalue(), encoding="utf-8")
    try:
        verdicts = match_outcomes(path, read_outcomes(path), {str(r.get("run_id")): None for r in rows})
    except OutcomesError as exc:
        assert str(exc).startswith(f"{path}") and "\n" not in str(exc)
        return
    for run_id, verdict in verdicts.items():
        row = next(r for r in rows if str(r.get("run_id")) == run_id)
        if "passed" in row:
            assert verdict.passed is (str(row["passed"]).strip().lower() == "true")
        else:
            assert verdict.passed is (abs(float(row["reward"]) - 1.0) <= 1e-6)


# -- the contract, inferred ----------------------------------------------------------------------------------------
def _replayable(tmp_path: Path, traj: list[dict[str, Any]]) -> Any:
    from runners.store.replayable_runs import ReplayableRun

    (run,) = read_tau_bench(_write(tmp_path / "t.json", [_run(1, 0, 1.0, traj)])).runs
    return ReplayableRun(case_run_id="b/1/1", bench_run_id="b", case_id="1", epoch=1, no_gain_threshold=None,
                         protocol_violation_threshold=None, max_tool_invocations=None, max_model_calls=None,
                         max_total_tokens=None, outcome="SUCCESS", transcripts=False, final_message=None,
                         events=run.events, expected_outcome="SUCCESS", outcome_passed=True, agent="plain")  # fmt: skip


EMPTY_TWICE = [
    _call("a", "search", {"q": 1}), _result("a", "search", '["x"]'),
    _call("b", "search", {"q": 2}), _result("b", "search", "[]"),
    _call("c", "search", {"q": 3}), _result("c", "search", ""),
    _call("d", "search", {"q": 4}), _result("d", "search", '["y"]'),
    {"role": "assistant", "content": "done"},
]  # fmt: skip


@pytest.mark.parametrize(
    ("traj", "policy", "status", "at"),
    [
        # two empty results in a row saturate the run at the second: STOP_REQUIRED rides on its result
        (EMPTY_TWICE, "no-gain:2", "CUT", ("c", True, 3)),
        (EMPTY_TWICE, "no-gain:1", "CUT", ("b", True, 2)),
        (EMPTY_TWICE, "no-gain:3", "UNCHANGED", None),
        # a repeat saturating the run is refused there; one that does not makes the run another (censored)
        (TRAJ, "no-gain:1", "CUT", ("c2~2", False, 2)),
        (TRAJ, "no-gain:2", "CENSORED", None),
        (TRAJ, "tool-cap:3", "CUT", ("c4", False, 3)),
    ],
)
def test_the_contract_on_another_agent_s_run_is_inferred_from_the_harness_s_own_no_gains(
    tmp_path: Path, traj: list[dict[str, Any]], policy: str, status: str, at: tuple[str, bool, int] | None
) -> None:
    from runners.decisions.compare_stops import Effect, compare_stops, run_under
    from runners.domain.stop_rules import parse_rules

    run = _replayable(tmp_path, traj)
    under = run_under(run, parse_rules(policy))
    assert under.status.value == status
    cut = under.cut
    assert (None if cut is None else (cut.tool_call_id, cut.executed, cut.tool_requests)) == at
    if policy.startswith("no-gain") and status == "CUT":
        assert cut is not None and cut.draft_call and under.effect is Effect.UNKNOWN  # the Draft was never recorded
    assert compare_stops([run], [parse_rules(policy)]).policies[0].run_count == 1
