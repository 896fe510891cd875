"""Suites with declared tools: the fixture matcher, the suite parser, a suite's cases read and run through the Harness,
and the built-in cases as the suite of `evalsets/suite.yaml`."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import EvidenceStatus, InformationGain, InvocationStatus, ReleaseOutcome, ToolInvocation
from runners.cli import main
from runners.domain.case_model import TOOL_NAMES, Family
from runners.domain.evalset import BUILTIN_DIR, EvalSetError, load_cases
from runners.domain.mocked_path import mocked_path
from runners.domain.profiles import trajectory_for
from runners.domain.prompt import BENCH_SYSTEM_PROMPT, PLAIN_SYSTEM_PROMPT, case_system_prompt, plain_prompt
from runners.domain.scripted import ScriptedChatModel
from runners.domain.suite import SuiteError, SuiteSpec, read_suite
from runners.domain.tool_fixtures import WILDCARD, FixtureStatus, ToolFixture, first_match, matches
from runners.run.case_runner import run_case

SUITE = textwrap.dedent("""\
    suite: tiny
    role: You are a diagnosis assistant for a tiny cluster. You investigate, then write a Draft.
    families:
      - {name: pods, description: pod questions}
    tools:
      - name: get_pods
        description: List the pods of a namespace.
        parameters:
          type: object
          properties:
            namespace: {type: string, description: the namespace}
            limit: {type: integer}
          required: [namespace]
        scope: [namespace]
      - name: pod_logs
        description: A pod's logs.
        parameters:
          properties:
            pod: {type: string}
    """)

CASES = textwrap.dedent("""\
    cases:
      - id: tiny_crashing_pod
        family: pods
        description: the pod crashes because its config map is missing
        question: Why does web-1 crash in namespace shop?
        fixtures:
          results:
            - {tool: get_pods, match: {namespace: shop}, output: "web-1  CrashLoopBackOff  7 restarts"}
            - {tool: pod_logs, match: {pod: "*"}, status: error, error: "logs backend unavailable"}
            - {tool: pod_logs, match: {pod: web-2}, status: no_data}
        expect: {outcome: SUCCESS, root_cause_statement: "web-1 crashes: its config map is missing"}
        trajectory: {}
    """)


def _suite(tmp_path: Path, suite: str = SUITE, cases: str = CASES) -> Path:
    folder = tmp_path / "tiny"
    folder.mkdir(parents=True)
    (folder / "suite.yaml").write_text(suite, encoding="utf-8")
    (folder / "cases.yaml").write_text(cases, encoding="utf-8")
    return folder


# -- the matcher ------------------------------------------------------------------------------------------------------
_scalars = st.one_of(st.integers(-5, 5), st.text("abc", max_size=3), st.booleans())
_args = st.dictionaries(st.sampled_from("pqrstu"), _scalars, max_size=5)


@given(_args, st.data())
def test_a_subset_of_the_calls_arguments_matches_and_a_changed_value_does_not(
    args: dict[str, object], data: st.DataObject
) -> None:
    keys = data.draw(st.lists(st.sampled_from(sorted(args)), unique=True) if args else st.just([]))
    match = {k: args[k] for k in keys}
    assert matches(match, args)  # type: ignore[arg-type]
    wild = data.draw(st.sampled_from("pqrstu"))
    assert matches({**match, wild: WILDCARD}, args)  # type: ignore[arg-type]  # present or not: any value
    if keys:
        k = keys[0]
        other = data.draw(_scalars.filter(lambda v: not (type(v) is type(args[k]) and v == args[k])))
        assert not matches({**match, k: other}, args)  # type: ignore[arg-type]
    missing = next((k for k in "vwxyz" if k not in args), None)
    assert missing is not None and not matches({**match, missing: 1}, args)  # type: ignore[arg-type]


@given(_args, st.lists(_args, max_size=4))
def test_the_first_fixture_that_matches_answers(args: dict[str, object], matchers: list[dict[str, object]]) -> None:
    fixtures = [ToolFixture(tool="t", match=m, output=f"out {i}") for i, m in enumerate(matchers)]  # type: ignore[arg-type]
    found = first_match(fixtures, "t", args)  # type: ignore[arg-type]
    hits = [f for f in fixtures if matches(f.match, args)]  # type: ignore[arg-type]
    assert found is (hits[0] if hits else None)
    assert first_match(fixtures, "other", args) is None  # type: ignore[arg-type]


def test_values_compare_as_json_does() -> None:
    assert matches({"n": 1}, {"n": 1.0}) and not matches({"n": 1}, {"n": True}) and not matches({"n": "1"}, {"n": 1})
    assert matches({"o": {"a": [1, "x"]}}, {"o": {"a": [1, "x"]}, "p": 2})


# -- the suite parser -------------------------------------------------------------------------------------------------
_names = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
_param = st.fixed_dictionaries(
    {"type": st.sampled_from(["string", "integer", "number", "boolean", "array", "object", "date"])},
    optional={"description": st.text(max_size=10)},
)
_tool = st.fixed_dictionaries(
    {"name": _names, "description": st.text(min_size=0, max_size=20)},
    optional={"parameters": st.fixed_dictionaries({"properties": st.dictionaries(_names, _param, max_size=3)},
                                                  optional={"required": st.lists(_names, max_size=2)}),
              "scope": st.lists(_names, max_size=2)},
)  # fmt: skip
_doc = st.fixed_dictionaries(
    {"suite": st.one_of(_names, st.just("Bad Name")),
     "families": st.lists(st.fixed_dictionaries({"name": _names}), max_size=3),
     "tools": st.lists(st.one_of(_tool, st.fixed_dictionaries({"builtin": st.sampled_from(["log_search", "grep"])})),
                       max_size=3)},
    optional={"role": st.text(max_size=30), "extra": st.integers()},
)  # fmt: skip


@settings(max_examples=80, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_doc)
def test_a_suite_file_is_read_or_refused_in_one_line_naming_file_line_and_field(
    tmp_path: Path, doc: dict[str, object]
) -> None:
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    try:
        spec = read_suite(path)
    except SuiteError as exc:
        message = str(exc)
        assert "\n" not in message and message.startswith(f"{path}: line ") and ": field " in message
        line = int(message.split(": line ", 1)[1].split(":", 1)[0])
        assert 1 <= line <= len(path.read_text(encoding="utf-8").splitlines())
        return
    again = tmp_path / "again.yaml"
    again.write_text(yaml.safe_dump(spec.model_dump(mode="json", exclude_none=True)), encoding="utf-8")
    assert read_suite(again) == spec  # what it read, written back, reads the same


def test_a_refusal_points_at_the_line_of_the_field(tmp_path: Path) -> None:
    bad = SUITE.replace("limit: {type: integer}", "limit: {type: date}")
    path = tmp_path / "suite.yaml"
    path.write_text(bad, encoding="utf-8")
    with pytest.raises(SuiteError) as caught:
        read_suite(path)
    line = next(i for i, text in enumerate(bad.splitlines(), 1) if "type: date" in text)
    assert str(caught.value).startswith(f"{path}: line {line}: field tools[0].parameters.properties.limit.type: ")
    path.write_text(SUITE.replace("scope: [namespace]", "scope: [namespace, pod]"), encoding="utf-8")
    with pytest.raises(SuiteError, match=r"line 14: field tools\[0\]\.scope: pod not among"):
        read_suite(path)


def test_a_bad_suite_file_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _suite(tmp_path, SUITE.replace("  - {name: pods", "  - {nome: pods"))
    assert main(["cases", "--evalset", str(folder)]) == 2
    err = capsys.readouterr().err
    assert f"{folder / 'suite.yaml'}: line 4: field families[0].name" in " ".join(err.split())


# -- a suite's cases --------------------------------------------------------------------------------------------------
def test_a_suites_cases_carry_its_tools_families_and_role(tmp_path: Path) -> None:
    (case,) = load_cases([str(_suite(tmp_path))])
    assert case.suite is not None and case.tool_names == ("get_pods", "pod_logs")
    assert case_system_prompt(case).count("tiny cluster") == 1 and case_system_prompt(case) != BENCH_SYSTEM_PROMPT
    assert plain_prompt(case_system_prompt(case)).count("tiny cluster") == 1  # the plain loop keeps the role
    assert plain_prompt(BENCH_SYSTEM_PROMPT) == PLAIN_SYSTEM_PROMPT
    with pytest.raises(EvalSetError, match=r"field family: Input should be 'pods'"):
        load_cases([str(_suite(tmp_path / "b", cases=CASES.replace("family: pods", "family: diagnosable")))])
    with pytest.raises(EvalSetError, match=r"fixtures.results\[0\].tool: 'kubectl' is not a declared tool"):
        load_cases([str(_suite(tmp_path / "c", cases=CASES.replace("tool: get_pods", "tool: kubectl")))])
    with pytest.raises(EvalSetError, match=r"field suite: set by the folder's suite.yaml"):
        load_cases([str(_suite(tmp_path / "d", cases=CASES.replace("family: pods", "family: pods\n    suite: {}")))])


def test_a_suite_case_runs_through_the_harness_on_its_fixtures(tmp_path: Path) -> None:
    (case,) = load_cases([str(_suite(tmp_path))])
    steps = [
        {"tool": "get_pods", "input": {"namespace": "shop", "limit": 5}},
        {"tool": "pod_logs", "input": {"pod": "web-1"}, "gain": "GAINED"},
        {"tool": "pod_logs", "input": {}, "gain": "NO_GAIN"},
        {"tool": "get_pods", "input": {"namespace": "kube-system"}},
    ]
    cited = {"tool_call_id": "@step1", "excerpt": "CrashLoopBackOff  7 restarts"}
    draft = {"conclusion": "web-1 crashes: its config map is missing",
             "claims": [{"statement": "web-1 restarts", "citations": [cited]}]}  # fmt: skip
    played = case.model_copy(update={"trajectory": case.trajectory.model_validate({"steps": steps, "draft": draft})})
    run = run_case(played)
    calls = [e for e in run.result.events if isinstance(e, ToolInvocation)]
    assert [(c.tool, c.invocation_status, c.evidence_status) for c in calls] == [
        ("get_pods", InvocationStatus.COMPLETED, EvidenceStatus.EVIDENCE),
        ("pod_logs", InvocationStatus.FAILED, None),  # the wildcard fixture's error: a failed call, never NO_GAIN
        ("pod_logs", InvocationStatus.FAILED, None),
        ("get_pods", InvocationStatus.COMPLETED, EvidenceStatus.NO_EVIDENCE),  # no fixture matches: no data
    ]
    assert run.result.decision.outcome is ReleaseOutcome.SUCCESS, run.failures
    assert run.passed, run.failures


def test_the_mocked_path_calls_each_fixture_once_and_cites_the_results(tmp_path: Path) -> None:
    (case,) = load_cases([str(_suite(tmp_path))])
    path = mocked_path(case)
    assert [(s.tool, s.input, s.gain) for s in path.steps] == [
        ("get_pods", {"namespace": "shop"}, InformationGain.NO_GAIN),
        ("pod_logs", {}, InformationGain.GAINED),
        ("pod_logs", {"pod": "web-2"}, InformationGain.NO_GAIN),
    ]
    assert trajectory_for(case, "mocked-path", 1) == path
    run = run_case(case, model=ScriptedChatModel(path))
    assert run.result.decision.outcome is ReleaseOutcome.SUCCESS and run.passed, run.failures
    statuses = [e.invocation_status for e in run.result.events if isinstance(e, ToolInvocation)]
    # web-2's no_data fixture comes after the wildcard's error: the first that matches answers
    assert statuses == [InvocationStatus.COMPLETED, InvocationStatus.FAILED, InvocationStatus.FAILED]


def test_a_fixture_says_what_its_status_needs() -> None:
    with pytest.raises(ValueError, match="error: required when status is error"):
        ToolFixture(tool="t", status=FixtureStatus.ERROR)
    with pytest.raises(ValueError, match="an empty result is no_data"):
        ToolFixture(tool="t", output="  ")


# -- the built-in suite -----------------------------------------------------------------------------------------------
def test_the_built_in_cases_are_the_suite_of_evalsets_suite_yaml() -> None:
    spec = read_suite(BUILTIN_DIR / "suite.yaml")
    assert isinstance(spec, SuiteSpec) and spec.builtin_only
    assert tuple(t.name for t in spec.tools) == TOOL_NAMES
    assert [f.name for f in spec.families] == [f.value for f in Family]
    cases = load_cases()
    assert all(c.suite is None and c.tools is None for c in cases)  # run exactly as before suites existed
    assert {case_system_prompt(c) for c in cases} == {BENCH_SYSTEM_PROMPT}
