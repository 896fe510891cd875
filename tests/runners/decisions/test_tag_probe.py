"""The tag probe against the known-truth taggers, the confusion's arithmetic, and the threshold it implies.

The scripted profiles are taggers of known behaviour on the graded truth: `optimist` (GAINED everywhere) can only be
wrong optimistically, `dismissive` (NO_GAIN on everything but a restated complaint) only prematurely, and
`reference` scores exactly what its trajectory's own tags say on the grades (its listed accuracy, computed here from
the case files alone, without a probe). Every probe point of every built-in case is probed, in process.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import InformationGain
from runners.cli import main
from runners.decisions.tag_probe import (
    ProbeFileError,
    ProbeMeasure,
    RecordedProbe,
    Share,
    implied_threshold,
    measure_probes,
    read_probe_file,
)
from runners.domain import profiles
from runners.domain.evalset import EvalCase, load_cases
from runners.domain.probe_answers import ProbeAnswer
from runners.domain.scripted import ScriptedChatModel
from runners.domain.truth_grades import TruthGrade
from runners.run.tag_probe import ProbeRun, probe, probe_points
from runners.store.tag_probes import StoredProbe

CASES = [c for c in load_cases() if probe_points(c)]


def _rows(runs: list[ProbeRun]) -> list[StoredProbe]:
    by_id = {c.id: c for c in CASES}
    out = []
    for r in runs:
        truth = by_id[r.point.case_id].trajectory.steps[r.point.step - 1].truth
        assert truth is not None
        out.append(StoredProbe("br", f"br/{r.point.case_id}/{r.point.step}", r.point.case_id, r.point.step,
                               r.point.tool_call_id, r.answer, r.tag, r.implied, truth.grade))  # fmt: skip
    return out


def _probed(profile: str) -> list[ProbeRun]:
    runs = []
    for case in CASES:
        model = ScriptedChatModel(profiles.trajectory_for(case, profile, 1), name=f"scripted:{profile}")
        runs += [probe(case, p.step, model) for p in probe_points(case)]
    return runs


@pytest.fixture(scope="module")
def probed() -> dict[str, list[ProbeRun]]:
    return {p: _probed(p) for p in ("optimist", "dismissive", "reference")}


def _reference_tags(case: EvalCase) -> Iterator[tuple[int, InformationGain]]:
    """The reference's own tag of each probed observation: the gain of the step that follows it (a call), read
    from the case file."""
    steps = case.trajectory.steps
    for p in probe_points(case):
        if p.step < len(steps) and steps[p.step].tool in ("kb_search", "log_search", "db_query"):
            yield p.step, steps[p.step].gain


def test_the_optimist_is_only_ever_optimistic(probed: dict[str, list[ProbeRun]]) -> None:
    m = measure_probes("scripted:optimist", _rows(probed["optimist"]))
    assert m.judged >= 50 and m.premature == 0 and m.optimistic > 0
    assert m.judged - m.right == m.optimistic
    assert m.by_truth[TruthGrade.NOTHING_NEW].gained == m.optimistic


def test_the_dismissive_is_only_ever_premature(probed: dict[str, list[ProbeRun]]) -> None:
    m = measure_probes("scripted:dismissive", _rows(probed["dismissive"]))
    assert m.judged >= 50 and m.optimistic == 0 and m.premature > 0
    assert m.judged - m.right == m.premature
    assert m.threshold.threshold is None  # NO_GAIN on all the evidence: no threshold keeps the run going


def test_the_reference_scores_its_listed_accuracy(probed: dict[str, list[ProbeRun]]) -> None:
    m = measure_probes("scripted:reference", _rows(probed["reference"]))
    listed: dict[tuple[str, int], InformationGain] = {(c.id, s): g for c in CASES for s, g in _reference_tags(c)}
    tagged = {(a.case_id, a.step): a.tag for a in m.answers if a.answer is ProbeAnswer.TAGGED}
    assert tagged == {k: v for k, v in listed.items() if k in tagged}  # the probe reads the reference's own tags
    grades = {(a.case_id, a.step): a.grade for a in m.answers}
    from runners.domain.truth_grades import right_tags

    right = sum(tag in right_tags(grades[k]) for k, tag in tagged.items())
    assert (m.right, m.judged) == (right, len(tagged))
    # the figure docs/evaluation-cases.md lists for the reference
    assert (m.right, m.judged, m.optimistic, m.premature) == (81, 85, 4, 0)
    # a Draft instead of a call is recorded with what it implies, never judged as a tag
    drafts = [a for a in m.answers if a.answer is ProbeAnswer.DRAFT]
    assert len(drafts) == m.drafted > 0 and all(a.tag is None and a.implied is not None for a in drafts)
    assert sum(r.concluded for r in m.by_truth.values()) == sum(a.implied is InformationGain.GAINED for a in drafts)


def test_the_baselines_score_the_same_judged_observations(probed: dict[str, list[ProbeRun]]) -> None:
    m = measure_probes("scripted:reference", _rows(probed["reference"]))
    always, never, nonempty = (m.baselines[k] for k in ("always GAINED", "always NO_GAIN", "GAINED iff non-empty"))
    assert always.judged == never.judged == nonempty.judged == m.judged
    assert always.premature == 0 and always.optimistic == m.by_truth[TruthGrade.NOTHING_NEW].judged
    assert never.optimistic == 0
    assert never.premature == m.by_truth[TruthGrade.ROOT_CAUSE].judged + m.by_truth[TruthGrade.EXCLUDES].judged
    assert nonempty == always  # every probed observation is non-empty
    acc = m.accuracy
    assert acc.low is not None and acc.high is not None and acc.value is not None
    assert acc.low <= acc.value <= acc.high and acc.cases > 10


def _share(count: int, of: int, high: float | None = None) -> Share:
    value = count / of if of else None
    return Share(count=count, of=of, cases=of, value=value, low=value, high=high if high is not None else value)


@pytest.mark.parametrize(
    ("count", "of", "threshold"),
    [(0, 20, 1), (1, 2, 5), (1, 10, 2), (1, 20, 2), (1, 4, 3), (20, 20, None), (0, 0, None)],
)
def test_the_implied_threshold_is_the_smallest_below_the_risk(count: int, of: int, threshold: int | None) -> None:
    advice = implied_threshold(_share(count, of), _share(0, 10), risk=0.05)
    assert advice.threshold == threshold
    if threshold is not None and of:
        p = count / of
        assert p**threshold < 0.05 and (threshold == 1 or p ** (threshold - 1) >= 0.05)


def test_the_cautious_threshold_reads_the_upper_bound() -> None:
    advice = implied_threshold(_share(1, 10, high=0.5), _share(3, 10), risk=0.05)
    assert (advice.threshold, advice.threshold_upper) == (2, 5)
    assert advice.fires == pytest.approx(0.7**2)


def test_tag_probe_writes_the_json_and_the_database(tmp_path: Path) -> None:
    db, out = tmp_path / "p.duckdb", tmp_path / "p.json"
    cases = ["diagnosable_late_risk_rule_threshold_t7", "generic_kb_gateway_runbook_timeout_t3"]
    argv = ["tag-probe", "--model", "scripted:dismissive", "--db", str(db), "--json", str(out), "--label", "t"]
    assert main([*argv, *(a for c in cases for a in ("--case", c))]) == 0
    data = json.loads(out.read_text())
    model = data["models"][0]
    assert {"model", "judged", "right", "optimistic", "premature", "by_truth", "baselines"} <= set(model)
    measured = ProbeMeasure.model_validate(data).models[0]
    assert (measured.probes, measured.judged, measured.drafted) == (4, 3, 1)
    assert (measured.optimistic, measured.premature, measured.right) == (0, 1, 2)
    # each probe is a case run (its epoch: the step probed) with its one model call's transcript
    assert main(["show", "--db", str(db), "--label", "t", "--case", cases[0], "--epoch", "2"]) == 0
    # and `report` shows the probe on its own: the confusion per grade, the baselines, the implied threshold
    assert main(["report", "--db", str(db), "--out", str(tmp_path / "rep")]) == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    assert f"## Tag probe {measured.bench_run_id} (t)" in md and "| always GAINED | always NO_GAIN |" in md
    assert "no threshold keeps the run going" in md


def test_tag_probe_refuses_a_json_path_it_may_not_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "dir").mkdir()
    argv = ["tag-probe", "--model", "scripted", "--case", "diagnosable_late_order_deadlock_t4",
            "--db", str(tmp_path / "p.duckdb"), "--json", str(tmp_path / "dir")]  # fmt: skip
    assert main(argv) == 2
    assert "--json" in capsys.readouterr().err
    assert not (tmp_path / "p.duckdb").exists()


@pytest.fixture(scope="module")
def swept_and_probed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("recommend")
    db, probe_json = folder / "s.duckdb", folder / "p.json"
    cases = [a for c in ("diagnosable_late_risk_rule_threshold_t7", "generic_kb_gateway_runbook_timeout_t3")
             for a in ("--case", c)]  # fmt: skip
    assert main(["sweep", "--model", "scripted:reference", "--no-gain-threshold", "1,2", "--db", str(db), *cases]) == 0
    assert main(["tag-probe", "--model", "scripted:dismissive", "--db", str(folder / "p.duckdb"),
                 "--json", str(probe_json), *cases]) == 0  # fmt: skip
    return db, probe_json


def test_recommend_states_the_threshold_the_tags_imply(
    swept_and_probed: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    db, probe_json = swept_and_probed
    capsys.readouterr()
    assert main(["recommend", "--db", str(db), "--tag-probe", str(probe_json)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "scripted:dismissive: its tags imply no threshold (its tags dismiss the evidence); the sweep recommends" \
        " NO_GAIN" in text  # fmt: skip


@pytest.mark.parametrize("content", [b"", b"{}", b'{"models": [{"model": 3}]}', b"\xff\xfe", b"[1, 2]"])
def test_recommend_refuses_a_file_that_is_not_a_probe(
    swept_and_probed: tuple[Path, Path], tmp_path: Path, content: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    db, _ = swept_and_probed
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    capsys.readouterr()
    assert main(["recommend", "--db", str(db), "--tag-probe", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"--tag-probe {bad}" in err and len(err.splitlines()) == 1


@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
@settings(max_examples=200, deadline=None)
def test_reading_a_probe_file_fails_in_one_typed_way(data: bytes) -> None:
    try:
        read_probe_file(data, "x.json")
    except ProbeFileError as exc:
        assert str(exc).startswith("x.json: ") and "\n" not in str(exc)


def test_a_probe_file_round_trips(swept_and_probed: tuple[Path, Path]) -> None:
    _, probe_json = swept_and_probed
    measured = read_probe_file(probe_json.read_bytes(), "p.json")
    recorded = RecordedProbe(model="m", probe_args=("--case", "x"), cases=1, measured=measured.models[0])
    assert read_probe_file(recorded.model_dump_json().encode(), "s.json") == measured


@pytest.mark.parametrize("flag", [["--epochs", "3"], ["--shard", "1/2"], ["--executor", "processes"]])
def test_tag_probe_refuses_what_it_does_not_do(
    flag: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "p.duckdb"
    assert main(["tag-probe", "--model", "scripted", *flag, "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert " ".join(flag) in err and len(err.strip().splitlines()) == 1 and not db.exists()


@pytest.mark.parametrize(
    ("given", "said"),
    [("nocolon", "give CASE:STEP"), ("diagnosable_late_risk_rule_threshold_t7:x", "give CASE:STEP"),
     ("other_case:2", "give CASE:STEP"), ("diagnosable_late_risk_rule_threshold_t7:1", "not an observation")],
)  # fmt: skip
def test_probe_refuses_a_point_it_cannot_ask(
    given: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "p.duckdb"
    argv = ["tag-probe", "--model", "scripted", "--case", "diagnosable_late_risk_rule_threshold_t7",
            "--db", str(db), "--probe", given]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1 and not db.exists()


def test_probe_asks_only_the_points_given(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    argv = ["tag-probe", "--model", "scripted", "--case", "diagnosable_late_risk_rule_threshold_t7",
            "--db", str(tmp_path / "p.duckdb"), "--probe", "diagnosable_late_risk_rule_threshold_t7:4",
            "--json", str(out)]  # fmt: skip
    assert main(argv) == 0
    answers = ProbeMeasure.model_validate_json(out.read_bytes()).models[0].answers
    assert [(a.step, a.answer) for a in answers] == [(4, ProbeAnswer.DRAFT)]
