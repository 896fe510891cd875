"""`harness-bench gate`: compare a candidate label with a baseline label on the same cases and epochs; exit 1 on a
regression, 3 when the comparison had not the power to pass."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Annotated, Any

from rich.text import Text

from runners.commands._common import (
    EXIT_INCONCLUSIVE,
    EXIT_INPUT,
    EXIT_OK,
    EXIT_REGRESSION,
    _add_db,
    _check_outputs,
    _error,
    _fail,
    _say,
    _sub,
    out,
)
from runners.decisions.gate_thresholds import MAX_COST_INCREASE, MAX_LOOKS, GateThresholds
from runners.plan.flags import Flag, FlagModel, presented
from runners.plan.labels import label_arg
from runners.plan.options import MAX_EPOCHS

__all__ = ["register", "run"]


POWER = "power (docs/gate.md: power, INCONCLUSIVE, the plan, sequential looks)"
"""The `--help` group of the flags that size the gate's power."""


class GateThresholdFlags(GateThresholds):
    """The gate's thresholds as `gate`'s flags: each field of the decision's `GateThresholds`
    (runners/decisions/gate_thresholds.py: default, bounds, refusal) with its spelling, placeholder, help and `--help`
    group, the presentation the decision does not carry."""

    k: int = presented(GateThresholds, "k", Flag(help="k of pass^k, at most the epochs per case (default {default})"))
    max_recall_drop: float = presented(
        GateThresholds, "max_recall_drop",
        Flag("--max-pass-rate-drop", aliases=("--max-recall-drop",), metavar="RATE",
             help="pass-rate drop in [0, 1] tolerated even when significant (default {default}; --max-recall-drop is"
                  " the old name: the gate compares pass rates, not recommend's SUCCESS share)"),
    )  # fmt: skip
    max_cost_increase: float = presented(
        GateThresholds, "max_cost_increase",
        Flag(metavar="RATE",
             help=f"relative increase (0 to {MAX_COST_INCREASE:g}) of mean tool calls, model calls or tokens tolerated"
                  " (default {default})"),
    )  # fmt: skip
    alpha: float = presented(
        GateThresholds, "alpha",
        Flag(metavar="A", help="false-alarm rate of the whole gate, Holm-corrected over all tests (default {default})"),
    )  # fmt: skip
    max_mde: float = presented(
        GateThresholds, "max_mde",
        Flag(metavar="RATE", group=POWER,
             help="a pass needs the overall test to detect this pass-rate drop with 80% probability, else"
                  " INCONCLUSIVE, exit 3 (default {default:.2f} = {points:g} points)"),
    )  # fmt: skip
    target_mde: float | None = presented(
        GateThresholds, "target_mde",
        Flag(metavar="RATE", group=POWER,
             help="with --plan: the MDE to plan for; with --sequential: stop with a pass once the overall MDE at 90%"
                  " power is at most this"),
    )  # fmt: skip
    budget: int = presented(
        GateThresholds, "budget",
        Flag(metavar="EPOCHS", group=POWER, tell_given=True,
             help=f"with --sequential: most epochs to run, at most {MAX_EPOCHS} like --epochs (default {{default}})"),
    )  # fmt: skip
    stage: int = presented(
        GateThresholds, "stage",
        Flag(metavar="EPOCHS", group=POWER, tell_given=True,
             help=f"with --sequential: epochs between looks (default {{default}}), at most {MAX_LOOKS} looks up to"
                  " --budget (each look's level is simulated)"),
    )  # fmt: skip


class _GateFlags(FlagModel):
    """The gate command's own flags: which runs it compares and which files it writes (its thresholds are
    `GateThresholdFlags`, the library's `GateThresholds` as flags)."""

    baseline: Annotated[str, Flag(parse=label_arg, metavar="LABEL")]
    """label of the baseline runs"""
    candidate: Annotated[str, Flag(parse=label_arg, metavar="LABEL")]
    """label of the candidate runs"""
    bench_run: Annotated[
        tuple[str, ...],
        Flag(metavar="BENCH_RUN_ID",
             help="the bench run to take a label's case runs from, when the label is used by several (once per label;"
                  " twice to compare two runs of one label, baseline first)"),
    ] = ()  # fmt: skip
    """The bench runs to take the labels' case runs from (baseline first)."""
    summary: Annotated[Path, Flag(tell_given=True, help="Markdown summary path (default ./{default}, overwritten)")] = (
        Path("gate-summary.md")
    )
    """The Markdown summary, in the current folder unless given."""
    junit: Annotated[Path, Flag(tell_given=True, help="JUnit XML path (default ./{default}, overwritten)")] = Path(
        "gate-junit.xml"
    )
    """The JUnit XML, in the current folder unless given."""
    json_path: Annotated[Path | None, Flag("--json")] = None
    """also write the result (verdict, p, MDE) as JSON here"""
    allow_inconclusive: Annotated[bool, Flag(group=POWER)] = False
    """an INCONCLUSIVE verdict exits 0 (JUnit: skipped instead of error)"""
    plan: Annotated[
        bool,
        Flag(group=POWER, help="treat the labels' epochs as a pilot: print how many epochs reach --target-mde (default"
                               " --max-mde); writes no file (refused with --summary, --junit or --json)"),
    ] = False  # fmt: skip
    """Advice only: the epochs that would reach the target MDE."""
    sequential: Annotated[
        bool,
        Flag(group=POWER, help="group-sequential gate: a look every --stage epochs up to --budget, each at its"
                               " O'Brien–Fleming nominal α; exit 3 while undecided, naming the next --epochs"),
    ] = False  # fmt: skip
    """A group-sequential gate."""


def register(sub: Any) -> None:
    p = _sub(
        sub,
        "gate",
        "compare a candidate label with a baseline label; exit 1 on regression",
        "Pairs the two labels on the same cases and epochs. Exit 0 pass, 1 regression, 2 unusable input, "
        "3 inconclusive (the comparison could not have detected a drop of --max-mde; the verdict line says how many "
        "cases or epochs would).",
    )
    _add_db(p)
    _GateFlags.add_flags(p, "gate", only=("baseline", "candidate"))
    GateThresholdFlags.add_flags(p, "gate", only=("k", "max_recall_drop", "max_cost_increase", "alpha"))
    _GateFlags.add_flags(p, "gate", only=("bench_run", "summary", "junit", "json_path"))
    GateThresholdFlags.add_flags(p, "gate", only=("max_mde",))
    _GateFlags.add_flags(p, "gate", only=("allow_inconclusive", "plan"))
    GateThresholdFlags.add_flags(p, "gate", only=("target_mde",))
    _GateFlags.add_flags(p, "gate", only=("sequential",))
    GateThresholdFlags.add_flags(p, "gate", only=("budget", "stage"))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from runners.decisions.gate import (
        GateInputError,
        Verdict,
        evaluate,
        evaluate_sequential,
        load_pairs,
        pick_bench_runs,
        validate_flags,
    )
    from runners.rendering.gate import markdown, plan, write_outputs
    from runners.store.connection import connect
    from runners.store.output_files import NamedPath, OutputWriteError

    flags, limits = _GateFlags.from_args(args, "gate"), GateThresholdFlags.from_args(args, "gate")
    _refuse_ignored(flags, {*_GateFlags.given(args), *GateThresholdFlags.given(args)})
    outputs = [NamedPath("--summary", flags.summary), NamedPath("--junit", flags.junit)]
    if flags.json_path is not None:
        outputs.append(NamedPath("--json", flags.json_path))
    _check_outputs(outputs, [NamedPath("--db", args.db)])  # never the database it reads, however named
    try:  # a bad flag is refused before the database is opened
        validate_flags(k=limits.k, max_recall_drop=limits.max_recall_drop, max_cost_increase=limits.max_cost_increase,
                       alpha=limits.alpha, max_mde=limits.max_mde)  # fmt: skip
        _check_power_flags(flags, limits)
    except GateInputError as exc:
        _fail(str(exc))
    con = connect(args.db, read_only=True)
    try:
        runs = pick_bench_runs(con, list(flags.bench_run), flags.baseline, flags.candidate)
        pairs = load_pairs(con, flags.baseline, flags.candidate, baseline_run=runs.baseline,
                           candidate_run=runs.candidate)  # fmt: skip
    except GateInputError as exc:
        _fail(str(exc))
    finally:
        con.close()
    try:
        if flags.sequential:
            result = evaluate_sequential(
                pairs, flags.baseline, flags.candidate, budget=limits.budget, stage=limits.stage,
                target_mde=limits.target_mde, k=limits.k, max_recall_drop=limits.max_recall_drop,
                max_cost_increase=limits.max_cost_increase, alpha=limits.alpha, max_mde=limits.max_mde,
            )  # fmt: skip
        else:
            result = evaluate(
                pairs, flags.baseline, flags.candidate, k=limits.k, max_recall_drop=limits.max_recall_drop,
                max_cost_increase=limits.max_cost_increase, alpha=limits.alpha, max_mde=limits.max_mde,
            )  # fmt: skip
    except GateInputError as exc:
        _fail(str(exc))
    if flags.plan:  # advice only: no verdict, nothing written
        _say(plan(result, limits.target_mde or limits.max_mde))
        return EXIT_OK
    if result.verdict is Verdict.INCONCLUSIVE:
        verdict = EXIT_OK if flags.allow_inconclusive else EXIT_INCONCLUSIVE
    else:
        verdict = EXIT_OK if result.passed else EXIT_REGRESSION
    result = dataclasses.replace(result, db=str(args.db))  # the summary's `harness-bench diff` commands name this file
    out.print(Text(markdown(result)), soft_wrap=True)  # the verdict first; table rows never hard-wrapped
    try:
        write_outputs(result, flags.summary, flags.junit, json_path=flags.json_path,
                      allow_inconclusive=flags.allow_inconclusive)  # fmt: skip
    except OutputWriteError as exc:
        _error(f"{exc} (the verdict above stands)")
        return verdict if verdict == EXIT_REGRESSION else EXIT_INPUT  # a regression stays 1; else the file error
    files = [str(flags.summary), str(flags.junit)] + ([str(flags.json_path)] if flags.json_path else [])
    _say(f"wrote {', '.join(files[:-1])} and {files[-1]}")
    return verdict


def _refuse_ignored(flags: _GateFlags, given: set[str]) -> None:
    """A flag the gate would ignore is refused (one line, exit 2)."""
    if flags.plan:  # advice only, printed: no file would get it
        files = [f for name, f in (("summary", "--summary"), ("junit", "--junit"), ("json_path", "--json"))
                 if name in given]  # fmt: skip
        if files:
            _fail(f"--plan prints its advice and writes no file: remove {', '.join(files)}")
    if not flags.sequential:
        sizes = [f"--{n}" for n in ("budget", "stage") if n in given]
        if sizes:
            _fail(f"{' and '.join(sizes)} size the looks of --sequential: add --sequential or remove them")


def _check_power_flags(flags: _GateFlags, limits: GateThresholdFlags) -> None:
    from runners.decisions.gate import GateInputError, sequential_looks

    if flags.sequential:
        sequential_looks(limits.budget, limits.stage)
    elif limits.target_mde is not None and not flags.plan:
        raise GateInputError("--target-mde needs --plan or --sequential")
    if flags.plan and flags.sequential:
        raise GateInputError("--plan and --sequential: give one (--plan estimates epochs from a pilot)")
