"""`harness-bench guard-check`: how often a SemanticGuard is wrong on labelled conclusions — the share of `unsupported`
conclusions it passes and of `supported` ones it blocks, with counts and 95% intervals, per guard."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from runners.commands._common import EXIT_OK, _check_outputs, _fail, _say, _sub, out
from runners.domain.labelled_conclusions import GuardSetting
from runners.plan.flags import Flag, FlagModel
from runners.plan.options import RecordMode
from runners.store.output_files import NamedPath

if TYPE_CHECKING:
    from runners.domain.case_model import EvalCase
    from runners.domain.labelled_conclusions import LabelledConclusion
    from runners.live.model_guard import ModelGuard, OffGuard
    from runners.run.guard_evidence import GuardEvidence

__all__ = ["register", "run"]


class _GuardCheckFlags(FlagModel):
    """`guard-check`'s flags: the labelled conclusions, which guards, the guard models' endpoint and recordings."""

    conclusions: Annotated[Path, Flag(metavar="FILE.jsonl", required=True)]
    """labelled conclusions, one JSON object a line: {{"case_id", "conclusion", "label"}} (label supported or
    unsupported), judged against what the case's reference run shows the SemanticGuard"""
    guard: Annotated[tuple[GuardSetting, ...], Flag(metavar="NAME")] = ()
    """a guard to measure (repeatable): off (the SemanticGuard switched off), model (each --guard-model); default:
    model with --guard-model, else off"""
    guard_model: Annotated[tuple[str, ...], Flag(metavar="NAME")] = ()
    """a guard model, as its OpenAI-compatible endpoint names it (repeatable: each is measured)"""
    guard_base_url: Annotated[str | None, Flag(metavar="URL")] = None
    """the guard models' endpoint (a replay with --record-mode none reaches none)"""
    guard_cassettes: Annotated[Path, Flag(metavar="DIR", help="the guard models' recordings (default {default})")] = (
        Path("cassettes/guards")
    )
    """Where the guard models' calls are recorded and replayed from."""
    record_mode: Annotated[str, Flag(metavar="MODE", help="the guard models' cassettes: none (replay only, the "
                                     "default) or new_episodes (record what is missing)")] = "none"  # fmt: skip
    """How the guard models use their cassettes."""
    json_path: Annotated[Path | None, Flag("--json", metavar="PATH")] = None
    """also write the rates as JSON: {{"conclusions": N, "guards": [{{"guard", "by_label": {{label: {{"n", "passed",
    "error", "error_share"}}}}, "mistakes": [{{"case_id", "conclusion", "label", "reason"}}]}}]}}"""


def register(sub: Any) -> None:
    p = _sub(sub, "guard-check", "measure a SemanticGuard on labelled conclusions: unsupported passed, supported "
             "blocked",
             "Each conclusion of FILE.jsonl is put to each guard exactly as Release would put it in a run: the guard's"
             " own request (frozen prompt) with the question and the verified evidence of the case's reference run,"
             " the labelled conclusion in place of the reference Draft's. Per guard, the share of `unsupported`"
             " conclusions it passed (SUPPORTED) and of `supported` ones it blocked, with the counts and 95%"
             " intervals. A model guard's calls are recorded into --guard-cassettes and replayed offline (record"
             " mode none, the default). A conclusion for an unknown case, a case whose reference run never asks the"
             " guard, or with another label is one line naming the file and line, exit 2.")  # fmt: skip
    _GuardCheckFlags.add_flags(p, "guard-check")
    p.set_defaults(func=run)


def _read(path: Path) -> str:
    from runners.domain.input_files import MAX_EVALSET_BYTES, InputPathError, read_input_text

    try:  # before the cases load: a FIFO would block, a device never end
        return read_input_text(path, max_bytes=MAX_EVALSET_BYTES, flag="--conclusions")
    except InputPathError as exc:
        _fail(str(exc))


def _conclusions(
    path: Path, text: str, cases: dict[str, EvalCase], evidence: dict[str, GuardEvidence | None]
) -> list[LabelledConclusion]:
    from runners.domain.labelled_conclusions import LabelledConclusionsError, parse_labelled_conclusions
    from runners.run.guard_evidence import guard_evidence, unusable_for_guard

    def unusable(case: EvalCase) -> str | None:
        if case.id not in evidence:  # the reference run, once per case
            evidence[case.id] = guard_evidence(case)
        return unusable_for_guard(evidence[case.id])

    try:
        found = parse_labelled_conclusions(text, str(path), cases, unusable)
    except LabelledConclusionsError as exc:
        _fail(str(exc))
    if not found:
        _fail(f"--conclusions {path}: no labelled conclusions")
    return found


def _guards(flags: _GuardCheckFlags) -> list[OffGuard | ModelGuard]:
    from runners.live.model_guard import ModelGuard, OffGuard

    names = list(dict.fromkeys(flags.guard or ((GuardSetting.MODEL,) if flags.guard_model else (GuardSetting.OFF,))))
    if GuardSetting.MODEL in names and not flags.guard_model:
        _fail("--guard model needs --guard-model NAME (and --guard-base-url URL to record)")
    if flags.record_mode not in ("none", "new_episodes"):
        _fail(f"--record-mode {flags.record_mode!r}: must be none or new_episodes")
    if RecordMode(flags.record_mode) is not RecordMode.NONE and flags.guard_base_url is None:
        _fail(f"--record-mode {flags.record_mode} records: give the endpoint with --guard-base-url URL")
    out: list[OffGuard | ModelGuard] = []
    for name in names:
        if name is GuardSetting.OFF:
            out.append(OffGuard())
            continue
        out += [ModelGuard(_model_name(m), base_url=flags.guard_base_url, cassettes=flags.guard_cassettes,
                           record_mode=flags.record_mode) for m in dict.fromkeys(flags.guard_model)]  # fmt: skip
    return out


def run(args: argparse.Namespace) -> int:
    from runners.decisions.guard_rates import guard_rates
    from runners.domain.evalset import load_cases
    from runners.live.model_guard import ModelGuardError
    from runners.rendering.guard_rates import render
    from runners.store.output_files import write_text

    flags = _GuardCheckFlags.from_args(args, "guard-check")
    if flags.json_path is not None:
        _check_outputs([NamedPath("--json", flags.json_path)], [NamedPath("--conclusions", flags.conclusions)])
    guards = _guards(flags)
    text = _read(flags.conclusions)
    cases = {c.id: c for c in load_cases()}
    evidence: dict[str, GuardEvidence | None] = {}
    conclusions = _conclusions(flags.conclusions, text, cases, evidence)
    results = []
    for guard in guards:
        judged = []
        for i, item in enumerate(conclusions, start=1):
            shown = evidence[item.case_id]
            assert shown is not None  # parse_labelled_conclusions refused a case that shows the guard nothing
            try:
                result = guard.check(item.case_id, shown, item.conclusion)
            except ModelGuardError as exc:
                _fail(f"{exc} (record the guard with --record-mode new_episodes --guard-base-url URL)")
            judged.append((item, result))
            live = RecordMode(flags.record_mode) is not RecordMode.NONE and guard.name != "off"
            if live and i % 10 == 0:  # a live guard takes minutes
                _say(f"{guard.name}: {i}/{len(conclusions)} conclusions", stderr=True)
        results.append(guard_rates(guard.name, judged))
    out.print(render(f"guards on {flags.conclusions}: {len(conclusions)} labelled conclusions", results))
    if flags.json_path is not None:
        payload = {"conclusions": len(conclusions), "guards": [r.model_dump(mode="json") for r in results]}
        write_text(NamedPath("--json", flags.json_path), json.dumps(payload, indent=2) + "\n")
        _say(f"wrote {flags.json_path}")
    return EXIT_OK


def _model_name(text: str) -> str:
    """The guard model's name as its endpoint knows it: `openai:NAME` as `--model` spells it, or the name alone."""
    from runners.domain.model_spec import ModelSpecError, parse_model

    try:
        spec = parse_model(text)
    except ModelSpecError:  # the name alone
        return text
    return spec.name if spec.is_openai else text
