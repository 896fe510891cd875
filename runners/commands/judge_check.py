"""`harness-bench judge-check`: how often a judge is wrong on labelled answers — the share of `wrong` and `vague`
answers it passes and of `correct` answers it fails, with counts and 95% intervals, per judge."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Annotated, Any

from runners.commands._common import EXIT_OK, _check_outputs, _fail, _say, _sub, out
from runners.domain.judge import JudgeName
from runners.plan.flags import Flag, FlagModel
from runners.plan.options import RecordMode
from runners.store.output_files import NamedPath

__all__ = ["register", "run"]


class _JudgeCheckFlags(FlagModel):
    """`judge-check`'s flags: the labelled answers, which judges, the model judge's endpoint and recordings."""

    answers: Annotated[Path, Flag(metavar="FILE.jsonl", required=True)]
    """labelled answers, one JSON object a line: {{"case_id", "answer", "label"}} (label correct, wrong or vague)"""
    judge: Annotated[tuple[JudgeName, ...], Flag(metavar="NAME")] = ()
    """a judge to measure (repeatable): rules (the default judge), model (needs --judge-model); default: rules"""
    judge_model: Annotated[str | None, Flag(metavar="NAME")] = None
    """the model judge's model, as its OpenAI-compatible endpoint names it"""
    judge_base_url: Annotated[str | None, Flag(metavar="URL")] = None
    """the model judge's endpoint (a replay with --record-mode none reaches none)"""
    judge_cassettes: Annotated[Path, Flag(metavar="DIR", help="the model judge's recordings (default {default})")] = (
        Path("cassettes/judges")
    )
    """Where the model judge's calls are recorded and replayed from."""
    record_mode: Annotated[str, Flag(metavar="MODE", help="the model judge's cassettes: none (replay only, the "
                                     "default) or new_episodes (record what is missing)")] = "none"  # fmt: skip
    """How the model judge uses its cassettes."""
    json_path: Annotated[Path | None, Flag("--json", metavar="PATH")] = None
    """also write the rates as JSON: {{"judges": [{{"judge", "default", "by_label": {{label: {{"n", "passed",
    ...}}}}}}]}}"""


def register(sub: Any) -> None:
    p = _sub(sub, "judge-check", "measure a judge on labelled answers: wrong and vague passed, correct failed",
             "Each answer of FILE.jsonl is judged against its case's root cause (the case's statement, facts and"
             " distractors) by each --judge; per judge, the share of `wrong` and of `vague` answers it passed and of"
             " `correct` answers it failed, with the counts and 95% intervals. Without --judge the default (rules)"
             " judge runs, offline. An answer for an unknown case or with another label is one line naming the file"
             " and line, exit 2.")  # fmt: skip
    _JudgeCheckFlags.add_flags(p, "judge-check")
    p.set_defaults(func=run)


def _answers(path: Path, cases: dict[str, Any]) -> list[Any]:
    from runners.domain.input_files import MAX_EVALSET_BYTES, InputPathError, read_input_text
    from runners.domain.labelled_answers import LabelledAnswersError, parse_labelled_answers

    try:  # a FIFO would block, a device never end
        text = read_input_text(path, max_bytes=MAX_EVALSET_BYTES, flag="--answers")
    except InputPathError as exc:
        _fail(str(exc))
    try:
        answers = parse_labelled_answers(text, str(path), cases)
    except LabelledAnswersError as exc:
        _fail(str(exc))
    if not answers:
        _fail(f"--answers {path}: no labelled answers")
    return answers


def _judges(flags: _JudgeCheckFlags) -> list[Any]:
    from runners.run.rule_judge import RULE_JUDGE

    names = list(dict.fromkeys(flags.judge or (JudgeName.RULES,)))
    out: list[Any] = []
    for name in names:
        if name is JudgeName.RULES:
            out.append(RULE_JUDGE)
            continue
        if flags.judge_model is None:
            _fail("--judge model needs --judge-model NAME (and --judge-base-url URL to record)")
        if flags.record_mode not in ("none", "new_episodes"):
            _fail(f"--record-mode {flags.record_mode!r}: must be none or new_episodes")
        if RecordMode(flags.record_mode) is not RecordMode.NONE and flags.judge_base_url is None:
            _fail(f"--record-mode {flags.record_mode} records: give the endpoint with --judge-base-url URL")
        from runners.live.model_judge import ModelJudge

        out.append(ModelJudge(_model_name(flags.judge_model), base_url=flags.judge_base_url,
                              cassettes=flags.judge_cassettes, record_mode=flags.record_mode))  # fmt: skip
    return out


def run(args: argparse.Namespace) -> int:
    from runners.decisions.judge_rates import judge_rates
    from runners.domain.evalset import load_cases
    from runners.live.model_judge import ModelJudgeError
    from runners.rendering.judge_rates import render
    from runners.store.output_files import write_text

    flags = _JudgeCheckFlags.from_args(args, "judge-check")
    if flags.json_path is not None:
        _check_outputs([NamedPath("--json", flags.json_path)], [NamedPath("--answers", flags.answers)])
    cases = {c.id: c for c in load_cases()}
    answers = _answers(flags.answers, cases)
    judges = _judges(flags)
    results = []
    for judge in judges:
        try:
            results.append(judge_rates(judge, answers, cases, default=judge.name == "rules"))
        except ModelJudgeError as exc:
            _fail(f"{exc} (record the model judge with --record-mode new_episodes --judge-base-url URL)")
    out.print(render(f"judges on {flags.answers}: {len(answers)} labelled answers", results))
    if flags.json_path is not None:
        payload = {"judges": [r.model_dump(mode="json") for r in results]}
        write_text(NamedPath("--json", flags.json_path), json.dumps(payload, indent=2) + "\n")
        _say(f"wrote {flags.json_path}")
    return EXIT_OK


def _model_name(text: str) -> str:
    """The judge model's name as its endpoint knows it: `openai:NAME` as `--model` spells it, or the name alone."""
    from runners.domain.model_spec import ModelSpecError, parse_model

    try:
        return parse_model(text).name
    except ModelSpecError:
        return text
