"""`harness-bench gate`: compare a candidate label with a baseline label on the same cases and epochs; exit 1 on a
regression, 3 when the comparison had not the power to pass."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

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
from runners.decisions.gate_flags import (
    ALPHA_RANGE,
    COST_RANGE,
    DEFAULTS,
    DROP_RANGE,
    EPOCHS_RANGE,
    K_RANGE,
    MAX_COST_INCREASE,
    MAX_LOOKS,
    MDE_RANGE,
    TARGET_MDE_RANGE,
)
from runners.plan.rules import MAX_EPOCHS
from runners.plan.run_options import label_arg

__all__ = ["register", "run"]


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
    p.add_argument("--baseline", required=True, type=label_arg, metavar="LABEL", help="label of the baseline runs")
    p.add_argument("--candidate", required=True, type=label_arg, metavar="LABEL", help="label of the candidate runs")
    p.add_argument("--k", type=K_RANGE, default=DEFAULTS.k,
                   help=f"k of pass^k, at most the epochs per case (default {DEFAULTS.k})")  # fmt: skip
    p.add_argument(
        "--max-pass-rate-drop", "--max-recall-drop", dest="max_recall_drop", type=DROP_RANGE,
        default=DEFAULTS.max_recall_drop, metavar="RATE",
        help=f"pass-rate drop in [0, 1] tolerated even when significant (default {DEFAULTS.max_recall_drop}; "
        "--max-recall-drop is the old name: the gate compares pass rates, not recommend's SUCCESS share)",
    )  # fmt: skip
    p.add_argument(
        "--max-cost-increase", type=COST_RANGE, default=DEFAULTS.max_cost_increase, metavar="RATE",
        help=f"relative increase (0 to {MAX_COST_INCREASE:g}) of mean tool calls, model calls or tokens tolerated"
        f" (default {DEFAULTS.max_cost_increase})",
    )  # fmt: skip
    p.add_argument(
        "--alpha", type=ALPHA_RANGE, default=DEFAULTS.alpha, metavar="A",
        help=f"false-alarm rate of the whole gate, Holm-corrected over all tests (default {DEFAULTS.alpha})",
    )  # fmt: skip
    p.add_argument("--bench-run", action="append", default=None, metavar="BENCH_RUN_ID",
                   help="the bench run to take a label's case runs from, when the label is used by several"
                        " (once per label; twice to compare two runs of one label, baseline first)")  # fmt: skip
    p.add_argument("--summary", type=Path, default=None,
                   help=f"Markdown summary path (default ./{DEFAULTS.summary}, overwritten)")  # fmt: skip
    p.add_argument("--junit", type=Path, default=None,
                   help=f"JUnit XML path (default ./{DEFAULTS.junit}, overwritten)")  # fmt: skip
    p.add_argument("--json", type=Path, default=None, help="also write the result (verdict, p, MDE) as JSON here")
    g = p.add_argument_group("power (docs/gate.md: power, INCONCLUSIVE, the plan, sequential looks)")
    g.add_argument("--max-mde", type=MDE_RANGE, default=DEFAULTS.max_mde, metavar="RATE",
                   help="a pass needs the overall test to detect this pass-rate drop with 80%% probability, else"
                        f" INCONCLUSIVE, exit 3 (default {DEFAULTS.max_mde:.2f} = {DEFAULTS.max_mde * 100:g}"
                        " points)")  # fmt: skip
    g.add_argument("--allow-inconclusive", action="store_true",
                   help="an INCONCLUSIVE verdict exits 0 (JUnit: skipped instead of error)")  # fmt: skip
    g.add_argument("--plan", action="store_true",
                   help="treat the labels' epochs as a pilot: print how many epochs reach --target-mde"
                        " (default --max-mde); writes no file (refused with --summary, --junit or --json)")  # fmt: skip
    g.add_argument("--target-mde", type=TARGET_MDE_RANGE, default=None, metavar="RATE",
                   help="with --plan: the MDE to plan for; with --sequential: stop with a pass once the overall"
                        " MDE at 90%% power is at most this")  # fmt: skip
    g.add_argument("--sequential", action="store_true",
                   help="group-sequential gate: a look every --stage epochs up to --budget, each at its"
                        " O'Brien–Fleming nominal α; exit 3 while undecided, naming the next --epochs")  # fmt: skip
    g.add_argument("--budget", type=EPOCHS_RANGE, default=None, metavar="EPOCHS",
                   help=f"with --sequential: most epochs to run, at most {MAX_EPOCHS} like --epochs"
                        f" (default {DEFAULTS.budget})")  # fmt: skip
    g.add_argument("--stage", type=EPOCHS_RANGE, default=None, metavar="EPOCHS",
                   help=f"with --sequential: epochs between looks (default {DEFAULTS.stage}), at most {MAX_LOOKS}"
                        " looks up to --budget (each look's level is simulated)")  # fmt: skip
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
    from runners.store._files import NamedPath, OutputWriteError
    from runners.store.connection import connect

    _refuse_ignored(args)  # before the defaults fill in what was not given
    outputs = [NamedPath("--summary", args.summary), NamedPath("--junit", args.junit)]
    if args.json is not None:
        outputs.append(NamedPath("--json", args.json))
    _check_outputs(outputs, [NamedPath("--db", args.db)])  # never the database it reads, however named
    try:  # a bad flag is refused before the database is opened
        validate_flags(k=args.k, max_recall_drop=args.max_recall_drop, max_cost_increase=args.max_cost_increase,
                       alpha=args.alpha, max_mde=args.max_mde)  # fmt: skip
        _check_power_flags(args)
    except GateInputError as exc:
        _fail(str(exc))
    con = connect(args.db, read_only=True)
    try:
        runs = pick_bench_runs(con, list(args.bench_run or []), args.baseline, args.candidate)
        pairs = load_pairs(con, args.baseline, args.candidate, baseline_run=runs.baseline,
                           candidate_run=runs.candidate)  # fmt: skip
    except GateInputError as exc:
        _fail(str(exc))
    finally:
        con.close()
    try:
        if args.sequential:
            result = evaluate_sequential(
                pairs, args.baseline, args.candidate, budget=args.budget, stage=args.stage,
                target_mde=args.target_mde, k=args.k, max_recall_drop=args.max_recall_drop,
                max_cost_increase=args.max_cost_increase, alpha=args.alpha, max_mde=args.max_mde,
            )  # fmt: skip
        else:
            result = evaluate(
                pairs, args.baseline, args.candidate, k=args.k, max_recall_drop=args.max_recall_drop,
                max_cost_increase=args.max_cost_increase, alpha=args.alpha, max_mde=args.max_mde,
            )  # fmt: skip
    except GateInputError as exc:
        _fail(str(exc))
    if args.plan:  # advice only: no verdict, nothing written
        _say(plan(result, args.target_mde or args.max_mde))
        return EXIT_OK
    if result.verdict is Verdict.INCONCLUSIVE:
        verdict = EXIT_OK if args.allow_inconclusive else EXIT_INCONCLUSIVE
    else:
        verdict = EXIT_OK if result.passed else EXIT_REGRESSION
    result = dataclasses.replace(result, db=str(args.db))  # the summary's `harness-bench diff` commands name this file
    out.print(Text(markdown(result)), soft_wrap=True)  # the verdict first; table rows never hard-wrapped
    try:
        write_outputs(result, args.summary, args.junit, json_path=args.json, allow_inconclusive=args.allow_inconclusive)
    except OutputWriteError as exc:
        _error(f"{exc} (the verdict above stands)")
        return verdict if verdict == EXIT_REGRESSION else EXIT_INPUT  # a regression stays 1; else the file error
    written = f"{args.summary}, {args.junit} and {args.json}" if args.json else f"{args.summary} and {args.junit}"
    _say(f"wrote {written}")
    return verdict


_GIVEN_OR_DEFAULT = ("summary", "junit", "budget", "stage")
"""The flags whose absence means something: refused where they would be ignored, else their `DEFAULTS`."""


def _refuse_ignored(args: argparse.Namespace) -> None:
    """A flag the gate would ignore is refused (one line, exit 2); then the ones not given take their defaults."""
    if args.plan:  # advice only, printed: no file would get it
        given = [f"--{n}" for n in ("summary", "junit", "json") if getattr(args, n) is not None]
        if given:
            _fail(f"--plan prints its advice and writes no file: remove {', '.join(given)}")
    if not args.sequential:
        given = [f"--{n}" for n in ("budget", "stage") if getattr(args, n) is not None]
        if given:
            _fail(f"{' and '.join(given)} size the looks of --sequential: add --sequential or remove them")
    for name in _GIVEN_OR_DEFAULT:
        if getattr(args, name) is None:
            setattr(args, name, getattr(DEFAULTS, name))


def _check_power_flags(args: argparse.Namespace) -> None:
    from runners.decisions.gate import GateInputError, sequential_looks

    if args.sequential:
        sequential_looks(args.budget, args.stage)
    elif args.target_mde is not None and not args.plan:
        raise GateInputError("--target-mde needs --plan or --sequential")
    if args.plan and args.sequential:
        raise GateInputError("--plan and --sequential: give one (--plan estimates epochs from a pilot)")
