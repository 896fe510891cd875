"""`harness-bench judge-check`: per judge, the share of wrong and vague answers passed and of correct answers failed,
with counts and 95% intervals, as a table and as JSON; a bad answers file is one line naming the file and line, exit
2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runners.cli import main
from runners.domain.evalset import BUILTIN_DIR, load_cases
from runners.domain.labelled_answers import LabelledAnswersError, parse_labelled_answers

CASE = "diagnosable_webhook_cert_expired_acme_pay"
CASES = {c.id: c for c in load_cases([str(BUILTIN_DIR)])}


def _line(answer: str, label: str, case: str = CASE) -> str:
    return json.dumps({"case_id": case, "answer": answer, "label": label})


def test_rates_per_label_as_table_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    answers = tmp_path / "a.jsonl"
    answers.write_text("\n".join([
        _line("The endpoint's TLS certificate expired on June 19.", "correct"),
        _line("The certificate expired? No: the certificate did not expire.", "correct"),
        _line("Our signing secret expired; the certificate is fine.", "wrong"),
        _line("Webhook deliveries failed.", "vague"),
    ]) + "\n")  # fmt: skip
    out = tmp_path / "rates.json"
    assert main(["judge-check", "--answers", str(answers), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "rules (default)" in printed and "1/2 = 50%" in printed
    (judge,) = json.loads(out.read_text())["judges"]
    assert judge["judge"] == "rules" and judge["default"] is True
    by = judge["by_label"]
    assert (by["correct"]["n"], by["correct"]["passed"]) == (2, 1)
    assert (by["wrong"]["n"], by["wrong"]["passed"], by["vague"]["passed"]) == (1, 0, 0)
    lo, hi = by["correct"]["ci95"]
    assert lo < 0.5 < hi


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        (_line("x", "correct", case="no_such_case"), "a.jsonl:2: case_id 'no_such_case' is not a case"),
        (_line("x", "maybe"), "a.jsonl:2: label 'maybe' is not one of"),
        (_line("x", "correct", case="empty_logs_gateway_timeout_t1"), "a.jsonl:2: case_id 'empty_logs_gateway_timeout"),
        ("[1, 2]", "a.jsonl:2: not a JSON object"),
        ('{"case_id": "x"}', "a.jsonl:2: answer: Field required"),
    ],
)
def test_a_bad_line_is_one_line_exit_2(
    line: str, needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = tmp_path / "a.jsonl"
    answers.write_text(_line("ok", "correct") + "\n" + line + "\n")
    out = tmp_path / "rates.json"
    assert main(["judge-check", "--answers", str(answers), "--json", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_the_model_judge_needs_its_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    answers = tmp_path / "a.jsonl"
    answers.write_text(_line("ok", "correct") + "\n")
    assert main(["judge-check", "--answers", str(answers), "--judge", "model"]) == 2
    assert "--judge-model" in capsys.readouterr().err


@given(st.lists(st.one_of(st.text(max_size=60), st.builds(_line, st.text(max_size=20), st.sampled_from(
    ["correct", "wrong", "vague", "other"]), st.sampled_from([CASE, "nope"]))), max_size=5))  # fmt: skip
def test_any_text_parses_or_is_refused_by_line(lines: list[str]) -> None:
    text = "\n".join(lines)
    try:
        answers = parse_labelled_answers(text, "f.jsonl", CASES)
    except LabelledAnswersError as exc:
        assert str(exc).startswith("f.jsonl:") and "\n" not in str(exc)
    else:
        assert len(answers) == sum(1 for line in text.splitlines() if line.strip())
