"""Evaluation files: the built-in set's shape, and one clear message per problem in a bad file."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from harness.contracts import ViolationKind
from harness.trace import EventKind
from runners.cli import main
from runners.domain.evalset import EvalSetError, Family, load_cases
from runners.domain.tools import _duck
from runners.run.case_runner import run_case

GOOD = """
cases:
  - id: tiny_case_one
    family: empty_logs
    description: a minimal valid case used by the loader tests
    question: "Why did tenant t1 fail at 14:00?"
    context: {tenant: t1, time_start: "2026-07-01T13:00:00Z", time_end: "2026-07-01T15:00:00Z"}
    expect: {outcome: FALLBACK, fallback_kind: MISSING_REQUIRED_CONTEXT}
    trajectory:
      steps: []
      draft: {conclusion: null, missing_info: [service]}
"""


def test_builtin_set_covers_every_family_and_seed_row() -> None:
    cases = load_cases()
    assert len(cases) >= 60
    per_family = Counter(c.family for c in cases)
    assert set(per_family) == set(Family) and min(per_family.values()) >= 5, per_family
    rows = {int(m) for c in cases for m in re.findall(r"§13 row (\d)", c.description)}
    assert rows >= {1, 2, 3, 4, 5, 6, 7}
    assert len({c.question for c in cases}) == len(cases), "serve-sim identifies a case by its question"
    assert any(re.search(r"[\u4e00-\u9fff]", c.question) for c in cases), "some questions in Chinese"
    late = [c for c in cases if c.family is Family.DIAGNOSABLE and "late" in c.id]
    assert len(late) >= 3


def test_family_selection(tmp_path: Path) -> None:
    only = load_cases(["missing_context"])
    assert only and {c.family for c in only} == {Family.MISSING_CONTEXT}
    f = tmp_path / "one.yaml"
    f.write_text(GOOD)
    both = load_cases([str(f), "missing_context"])
    assert {c.id for c in both} == {"tiny_case_one"} | {c.id for c in only}


def _steps(*steps: str) -> str:
    """GOOD with a `payments(id, tenant)` table and these flow-style trajectory steps."""
    table = "    fixtures: {tables: [{name: payments, columns: [id, tenant], rows: [[1, t1]]}]}\n    expect:"
    return GOOD.replace("    expect:", table).replace("steps: []", f"steps: [{', '.join(steps)}]")


BAD = [
    ("bad_yaml", "cases:\n  - id: x\n    family: [unclosed\n", [r"bad_yaml\.yaml: line \d+, column \d+: invalid YAML"]),
    ("unknown_family", GOOD.replace("family: empty_logs", "family: flaky_logs"),
     [r"case 'tiny_case_one': field family: Input should be 'empty_logs'"]),
    ("missing_field", GOOD.replace('    question: "Why did tenant t1 fail at 14:00?"\n', ""),
     [r"case 'tiny_case_one': field question: Field required"]),
    ("unknown_tool", GOOD.replace("steps: []", "steps: [{tool: grep_everything, input: {q: x}}]"),
     [r"case 'tiny_case_one': field trajectory.*grep_everything.*does not exist"]),
    ("bad_table", GOOD.replace("    expect:", "    fixtures:\n      tables: [{name: payments, columns: [id, tenant], "
                                              "rows: [[1, t1, 3]]}]\n    expect:"),
     [r"case 'tiny_case_one': field fixtures\.tables\[0\].*row 0 has 3 values for 2 columns"]),
    ("fallback_without_kind", GOOD.replace(", fallback_kind: MISSING_REQUIRED_CONTEXT", ""),
     [r"field expect: expect\.fallback_kind is required"]),
    ("two_problems", GOOD.replace("family: empty_logs", "family: nope").replace("outcome: FALLBACK", "outcome: MAYBE"),
     [r"field family", r"field expect\.outcome"]),
    ("not_a_list", "cases: {a: 1}\n", [r"top level must be a mapping with a 'cases' list"]),
    # context: two ISO-8601 instants, in order
    ("bad_timestamp", GOOD.replace('time_start: "2026-07-01T13:00:00Z"', "time_start: yesterday"),
     [r"case 'tiny_case_one': field context\.time_start: 'yesterday' is not an ISO-8601 timestamp"]),
    ("reversed_window", GOOD.replace('"2026-07-01T13:00:00Z"', '"2026-07-01T16:00:00Z"'),
     [r"case 'tiny_case_one': field context\.time_end: 2026-07-01T15:00:00Z is before time_start "
      r"2026-07-01T16:00:00Z$"]),
    ("reversed_across_offsets", GOOD.replace('"2026-07-01T15:00:00Z"', '"2026-07-01T20:00:00+08:00"'),
     [r"field context\.time_end: 2026-07-01T20:00:00\+08:00 is before time_start"]),
    # trajectory steps: each input validates against its tool, as the corrected retry would send it
    ("bad_sql_function", _steps("{tool: db_query, input: {sql: \"select current_setting('home_directory')\"}}"),
     [r"case 'tiny_case_one': field trajectory\.steps\[0\]\.input\.sql: function current_setting is not allowed"]),
    ("unknown_table", _steps("{tool: db_query, input: {sql: select * from refunds}}"),
     [r"field trajectory\.steps\[0\]\.input\.sql: unknown table\(s\) refunds; available tables: payments$"]),
    ("log_search_missing_start", _steps('{tool: log_search, input: {end: "2026-07-01T15:00:00Z"}}'),
     [r"field trajectory\.steps\[0\]\.input\.start: Field required"]),
    ("log_search_bad_end", _steps('{tool: log_search, input: {start: "2026-07-01T13:00:00Z", end: later}}'),
     [r"field trajectory\.steps\[0\]\.input\.end: 'later' is not an ISO-8601 timestamp"]),
    ("kb_search_extra_field", _steps("{tool: kb_search, input: {query: pool, k: 3}}"),
     [r"field trajectory\.steps\[0\]\.input\.k: Extra inputs are not permitted"]),
    ("protocol_mistake_keeps_input_checked",
     _steps("{tool: kb_search, input: {query: pool, top_k: 99}, mistake: missing_input}"),
     [r"field trajectory\.steps\[0\]\.input\.top_k: Input should be less than or equal to 10"]),
    ("two_bad_steps", _steps("{tool: kb_search, input: {}}", "{tool: db_query, input: {sql: drop table x}}"),
     [r"field trajectory\.steps\[0\]\.input\.query: Field required",
      r"field trajectory\.steps\[1\]\.input\.sql: only a SELECT query is allowed, got DROP"]),
    ("invalid_input_that_is_valid",
     _steps("{tool: kb_search, input: {query: pool}, mistake: invalid_input, on_rejection: skip}"),
     [r"field trajectory\.steps\[0\]\.mistake: invalid_input, but the input is valid for kb_search"]),
    ("invalid_input_corrected",
     _steps("{tool: kb_search, input: {query: pool, top_k: 0}, mistake: invalid_input}"),
     [r"field trajectory\.steps\[0\]\.on_rejection: a step with mistake invalid_input has no valid input"]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "text", "patterns"), BAD, ids=[b[0] for b in BAD])
def test_malformed_files_name_file_case_and_field(tmp_path: Path, name: str, text: str, patterns: list[str]) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    with pytest.raises(EvalSetError) as err:
        load_cases([str(path)])
    problems = err.value.problems
    assert len(problems) == len(patterns), problems
    for problem, pattern in zip(problems, patterns, strict=True):
        assert str(path) in problem
        assert re.search(pattern, problem), (pattern, problem)


def test_invalid_utf8_and_duplicate_ids(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(GOOD.replace("Why", "Caf\xe9").encode("latin-1"))
    dup = tmp_path / "dup.yaml"
    dup.write_text(GOOD)
    dup2 = tmp_path / "dup2.yaml"
    dup2.write_text(GOOD)
    with pytest.raises(EvalSetError) as err:
        load_cases([str(tmp_path)])
    text = "\n".join(err.value.problems)
    assert "latin1.yaml: not valid UTF-8" in text
    assert "case 'tiny_case_one': field id: duplicate of a case in" in text


def test_cli_prints_every_problem_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "two.yaml"
    path.write_text(BAD[6][1])
    assert main(["cases", "--evalset", str(path)]) == 2
    err = capsys.readouterr().err
    assert "2 problem(s)" in err and "field family" in err and "field expect.outcome" in err


def test_a_window_in_order_in_any_notation_loads(tmp_path: Path) -> None:
    path = tmp_path / "offsets.yaml"
    # 15:00+08:00 is 07:00Z, before 07:30Z; and a fractional second after a whole one is later.
    path.write_text(
        GOOD.replace('"2026-07-01T13:00:00Z"', '"2026-07-01T15:00:00+08:00"').replace(
            '"2026-07-01T15:00:00Z"', '"2026-07-01 07:30:00.5"'
        )
    )
    (case,) = load_cases([str(path)])
    assert case.context.time_start == "2026-07-01T15:00:00+08:00"  # kept as written: the agent sees it


def test_a_deliberately_invalid_step_loads_and_is_rejected_before_the_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "invalid_input.yaml"
    path.write_text(
        _steps(
            "{tool: db_query, input: {sql: \"select current_setting('home_directory')\"}, "
            "mistake: invalid_input, on_rejection: skip}",
            "{tool: db_query, input: {sql: select count(*) as n from payments}}",
        ).replace("family: empty_logs", "family: protocol_violations")
    )
    (case,) = load_cases([str(path)])

    sent: list[str] = []
    real_cursor = _duck.cursor

    class Recording:
        def __init__(self) -> None:
            self.inner = real_cursor()

        def execute(self, sql: str, *args: Any) -> Any:
            sent.append(sql)
            return self.inner.execute(sql, *args)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    monkeypatch.setattr(_duck, "cursor", Recording)
    run = run_case(case)
    rejected = [e for e in run.result.events if e.kind is EventKind.TOOL_REQUEST_REJECTED]
    assert [e.violation for e in rejected] == [ViolationKind.INVALID_INPUT]
    assert run.metrics.tool_invocations == 1 and run.metrics.protocol_violations == 1
    assert not any("current_setting" in s.lower() for s in sent)  # DuckDB never saw the rejected call
    assert any("count(*)" in s.lower() for s in sent)  # ...and did see the valid one
