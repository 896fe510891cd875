"""harness-bench: run diagnosis-agent evaluation cases through the Harness and record metrics.

Exit codes: 0 ok · 1 regression (gate) or failing cases with --strict · 2 unusable input · 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from harness import __version__
from harness.config import HarnessConfig

EXIT_OK, EXIT_REGRESSION, EXIT_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130

out = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 160)


class UsageError(Exception):
    """Unusable input: printed as one line, exit 2."""


def _fail(message: str) -> NoReturn:
    raise UsageError(message)


# -- shared options -----------------------------------------------------------------------------
def _add_selection(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--evalset", action="append", default=[], metavar="PATH|FAMILY",
        help="evaluation file, folder or family name (repeatable; default: every built-in case)",
    )  # fmt: skip
    p.add_argument("--case", action="append", default=[], metavar="ID", help="only this case id (repeatable)")


def _add_config(p: argparse.ArgumentParser) -> None:
    d = HarnessConfig()
    g = p.add_argument_group("harness config (never shown to the model)")
    g.add_argument(
        "--no-gain-threshold",
        type=int,
        default=d.no_gain_threshold,
        metavar="N",
        help=f"consecutive NO_GAIN that saturate a run (default {d.no_gain_threshold})",
    )
    g.add_argument(
        "--protocol-violation-threshold",
        type=int,
        default=d.protocol_violation_threshold,
        metavar="N",
        help=f"consecutive protocol violations that saturate a run (default {d.protocol_violation_threshold})",
    )
    g.add_argument(
        "--max-tool-calls",
        type=int,
        default=d.max_tool_invocations,
        metavar="N",
        help=f"tool invocation budget (default {d.max_tool_invocations})",
    )
    g.add_argument(
        "--max-model-calls",
        type=int,
        default=d.max_model_calls,
        metavar="N",
        help=f"model call budget (default {d.max_model_calls})",
    )
    g.add_argument(
        "--max-tokens",
        type=int,
        default=d.max_total_tokens,
        metavar="N",
        help=f"token budget (default {d.max_total_tokens})",
    )
    g.add_argument("--deadline", type=float, default=d.deadline_seconds, metavar="SECONDS",
                   help=f"wall-clock deadline per case run (default {d.deadline_seconds:g})")  # fmt: skip


def _add_model(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model")
    g.add_argument(
        "--model",
        default="scripted",
        metavar="MODEL",
        help="'scripted' (default), 'scripted:<profile>' or 'openai:<model-name>'",
    )
    g.add_argument("--base-url", default=None, help="OpenAI-compatible base URL (vLLM, Ollama, llama.cpp, serve-sim)")
    g.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        metavar="VAR",
        help="environment variable holding the API key (default OPENAI_API_KEY)",
    )
    g.add_argument("--tool-choice", default="auto", metavar="auto|none|required|TOOL",
                   help="OpenAI tool_choice (default auto: not sent); a tool name forces that tool")  # fmt: skip
    g.add_argument("--cassettes", type=Path, default=None, metavar="DIR", help="record/replay model HTTP with vcrpy")
    g.add_argument("--record-mode", default="none", choices=["none", "once", "new_episodes", "all"],
                   help="vcrpy record mode with --cassettes (default none: replay only, no network)")  # fmt: skip


def _config_from(args: argparse.Namespace) -> HarnessConfig:
    try:
        return HarnessConfig(
            no_gain_threshold=args.no_gain_threshold,
            protocol_violation_threshold=args.protocol_violation_threshold,
            max_tool_invocations=args.max_tool_calls,
            max_model_calls=args.max_model_calls,
            max_total_tokens=args.max_tokens,
            deadline_seconds=args.deadline,
        )
    except ValidationError as exc:
        names = {
            "max_tool_invocations": "--max-tool-calls", "max_total_tokens": "--max-tokens",
            "deadline_seconds": "--deadline",
        }  # fmt: skip
        problems = []
        for e in exc.errors():
            field = str(e["loc"][0])
            flag = names.get(field, "--" + field.replace("_", "-"))
            problems.append(f"{flag} {e.get('input')!r}: {e['msg']}")
        _fail("; ".join(problems))


# -- commands -------------------------------------------------------------------------------------
def cmd_cases(args: argparse.Namespace) -> int:
    from runners.bench import select_cases

    cases = select_cases(args.evalset, args.case)
    table = Table(title=f"{len(cases)} evaluation cases")
    for col in ("id", "family", "expected outcome", "stop reason", "steps", "question"):
        table.add_column(col, overflow="fold")
    for c in cases:
        e = c.expect
        outcome = e.outcome.value + (f"/{e.fallback_kind.value}" if e.fallback_kind else "")
        table.add_row(
            c.id, c.family.value, outcome, e.stop_reason.value if e.stop_reason else "-",
            str(len(c.trajectory.steps)), c.question[:70],
        )  # fmt: skip
    out.print(table)
    return EXIT_OK


def _print_family_table(db: Path, bench_run_id: str) -> None:
    from runners.bench import family_table
    from runners.metrics_db import connect

    con = connect(db, read_only=True)
    try:
        rows = family_table(con, bench_run_id)
    finally:
        con.close()
    table = Table(title=f"bench run {bench_run_id}")
    for col in ("family", "runs", "pass rate", "outcomes", "stop reasons", "tools", "rejections", "wasted"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(
            r["family"], str(r["runs"]), f"{r['pass_rate']:.0%}", r["outcomes"], r["stop_reasons"],
            f"{r['mean_tools']:.1f}", f"{r['mean_rejections']:.1f}", f"{r['mean_wasted']:.1f}",
        )  # fmt: skip
    out.print(table)


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[passed]}"),
        TimeElapsedColumn(), TimeRemainingColumn(), console=err, disable=not err.is_terminal,
    )  # fmt: skip


def _claim(db: Path) -> None:
    """Open the database as its only writer (clear message if locked) and mark dead runs interrupted."""
    from runners.metrics_db import connect, mark_stale_runs

    con = connect(db)
    try:
        n = mark_stale_runs(con)
    finally:
        con.close()
    if n:
        err.print(f"{n} bench run(s) left 'running' by a process that died are now 'interrupted' (use --resume)")


def cmd_run(args: argparse.Namespace) -> int:
    from runners.bench import BenchOptions, run_bench

    _claim(args.db)
    opts = BenchOptions(
        evalsets=args.evalset, case_ids=args.case, model=args.model, db=args.db, label=args.label,
        epochs=args.epochs, concurrency=args.concurrency, config=_config_from(args), cassettes=args.cassettes,
        record_mode=args.record_mode, base_url=args.base_url, api_key_env=args.api_key_env, resume=args.resume,
        keep_runs=False, tool_choice=args.tool_choice,
    )  # fmt: skip
    passed = [0]
    with _progress() as progress:
        task = progress.add_task("cases", total=None, passed="")

        def hook(done: int, total: int, run: Any) -> None:
            if run is not None and run.passed:
                passed[0] += 1
            progress.update(task, completed=done, total=total, passed=f"{passed[0]} passed")

        summary = run_bench(opts, on_progress=hook)
    _print_family_table(args.db, summary.bench_run_id)
    rate = summary.executed / summary.wall_seconds if summary.wall_seconds else 0.0
    share = summary.write_seconds / summary.wall_seconds if summary.wall_seconds else 0.0
    out.print(
        f"bench run [bold]{summary.bench_run_id}[/bold] {summary.status}: {summary.executed} case runs executed"
        f" ({summary.skipped} already done) in {summary.wall_seconds:.2f}s — {rate:.1f} runs/s,"
        f" DuckDB writes {share:.1%} of wall time → {args.db}"
    )
    for case_id, error in summary.errors[:5]:
        err.print(f"[yellow]{case_id}:[/yellow] {error}", highlight=False)
    if len(summary.errors) > 5:
        err.print(f"… and more case runs with errors (see case_runs.error in {args.db})")
    failing = summary.failed
    if failing and args.strict:
        err.print(f"{failing} case run(s) did not meet their expectations (--strict)")
        return EXIT_REGRESSION
    return EXIT_OK


def cmd_serve_sim(args: argparse.Namespace) -> int:
    from runners.bench import select_cases
    from runners.profiles import trajectory_for_model
    from runners.simulator import SimulatorServer

    cases = select_cases(args.evalset, args.case)
    try:
        server = SimulatorServer(cases, args.host, args.port, trajectory_for=trajectory_for_model,
                                 log=(lambda line: err.print(line)) if args.verbose else None)  # fmt: skip
    except OSError as exc:
        _fail(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}; choose another --port (0 = any free)")
    out.print(f"serve-sim: {len(cases)} cases on {server.base_url} (Ctrl-C to stop)", highlight=False)
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        server.stop()
        return EXIT_INTERRUPTED
    return EXIT_OK


def cmd_sweep(args: argparse.Namespace) -> int:
    from runners.bench import BenchOptions
    from runners.sweep import SweepGrid, SweepOptions, parse_values, run_sweep

    _claim(args.db)
    grid = SweepGrid(
        no_gain_threshold=parse_values(args.no_gain_threshold, "--no-gain-threshold"),
        protocol_violation_threshold=parse_values(args.protocol_violation_threshold, "--protocol-violation-threshold"),
        max_tool_calls=parse_values(args.max_tool_calls, "--max-tool-calls"),
        max_model_calls=parse_values(args.max_model_calls, "--max-model-calls"),
        max_tokens=parse_values(args.max_tokens, "--max-tokens"),
    )
    base = BenchOptions(
        evalsets=args.evalset, case_ids=args.case, model=args.model, db=args.db, label=args.label,
        epochs=args.epochs, concurrency=args.concurrency, cassettes=args.cassettes, record_mode=args.record_mode,
        base_url=args.base_url, api_key_env=args.api_key_env, keep_runs=False, tool_choice=args.tool_choice,
    )  # fmt: skip
    with _progress() as progress:
        task = progress.add_task("sweep", total=None, passed="")
        summary = run_sweep(
            SweepOptions(grid, base, args.resume),
            on_progress=lambda done, total: progress.update(task, completed=done, total=total),
        )
    out.print(
        f"sweep [bold]{summary.sweep_id}[/bold] {summary.status}: {summary.points} grid points → {args.db}\n"
        f"next: harness-bench recommend --db {args.db} --sweep {summary.sweep_id}"
    )
    return EXIT_OK


def cmd_recommend(args: argparse.Namespace) -> int:
    from runners.metrics_db import connect
    from runners.recommend import METRIC_DEFINITIONS, Objective, Rule, measure, recommend, table_rows
    from runners.sweep import sweep_ids

    if not 0.0 <= args.margin <= 1.0:
        _fail(f"--margin {args.margin:g}: a rate margin must be within [0, 1] (0.02 = 2 points)")
    con = connect(args.db, read_only=True)
    try:
        known = sweep_ids(con)
        sweep = args.sweep or (known[0] if known else None)
        if sweep is None:
            _fail(f"{args.db} holds no sweeps; run `harness-bench sweep` first")
        if sweep not in known:
            _fail(f"unknown sweep {sweep!r}; known: {', '.join(known[:5]) or 'none'}")
        stats = measure(con, sweep)
    finally:
        con.close()
    if not stats:
        _fail(f"sweep {sweep} has no case runs yet")
    rec = recommend(stats, Objective(args.objective), rule=Rule(args.rule), margin=args.margin)
    header, rows = table_rows(rec, stats)
    table = Table(title=f"sweep {sweep} (★ recommended, ◆ Pareto front; 95% intervals over cases)")
    for col in header:
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*row)
    out.print(f"[bold]Recommendation:[/bold] {rec.chosen.label(rec.columns)}")
    out.print(rec.reasoning + "\n", highlight=False, markup=False)
    out.print(table)
    for name, definition in METRIC_DEFINITIONS.items():
        out.print(f"  {name}: {definition.split(' — ')[-1]}", highlight=False, markup=False)
    return EXIT_OK


def cmd_gate(args: argparse.Namespace) -> int:
    from runners.gate import GateInputError, evaluate, load_pairs, markdown, validate_flags, write_outputs
    from runners.metrics_db import connect

    try:  # a bad flag is refused before the database is opened
        validate_flags(k=args.k, max_recall_drop=args.max_recall_drop, max_cost_increase=args.max_cost_increase,
                       alpha=args.alpha)  # fmt: skip
    except GateInputError as exc:
        _fail(str(exc))
    con = connect(args.db, read_only=True)
    try:
        pairs = load_pairs(con, args.baseline, args.candidate)
    except GateInputError as exc:
        _fail(str(exc))
    finally:
        con.close()
    try:
        result = evaluate(
            pairs, args.baseline, args.candidate, k=args.k, max_recall_drop=args.max_recall_drop,
            max_cost_increase=args.max_cost_increase, alpha=args.alpha,
        )  # fmt: skip
    except GateInputError as exc:
        _fail(str(exc))
    write_outputs(result, args.summary, args.junit)
    out.print(markdown(result), highlight=False, markup=False)
    out.print(f"wrote {args.summary} and {args.junit}")
    return EXIT_OK if result.passed else EXIT_REGRESSION


def cmd_report(args: argparse.Namespace) -> int:
    from runners.recommend import Objective, Rule
    from runners.report import build_report

    if not 0.0 <= args.margin <= 1.0:
        _fail(f"--margin {args.margin:g}: a rate margin must be within [0, 1] (0.02 = 2 points)")
    if args.sweep and args.bench_run:
        _fail("--sweep and --bench-run: give one of them")
    md, page = build_report(args.db, args.out, sweep_id=args.sweep, bench_run_id=args.bench_run,
                            objective=Objective(args.objective), rule=Rule(args.rule), margin=args.margin)  # fmt: skip
    out.print(f"wrote {md} and {page}")
    return EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    from runners.evalset import json_schema

    sys.stdout.write(json_schema())
    return EXIT_OK


# -- parser ---------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="harness-bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"harness-bench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("cases", help="list evaluation cases with family and expectations")
    _add_selection(p)
    p.set_defaults(func=cmd_cases)

    p = sub.add_parser(
        "run", help="run cases through the harness and write metrics to DuckDB",
        description="Run every selected case (default: all built-in cases, scripted model) into a DuckDB file.",
    )  # fmt: skip
    _add_selection(p)
    _add_model(p)
    _add_config(p)
    p.add_argument("--db", type=Path, default=Path("bench.duckdb"), help="DuckDB file (default bench.duckdb)")
    p.add_argument("--label", default=None, help="label for comparing runs (the gate pairs labels)")
    p.add_argument("--epochs", type=int, default=1, metavar="K", help="repeat every case K times (default 1)")
    p.add_argument("--concurrency", type=int, default=1, metavar="N", help="case runs in flight (default 1)")
    p.add_argument("--resume", default=None, metavar="BENCH_RUN_ID", help="finish only the missing case runs")
    p.add_argument("--strict", action="store_true", help="exit 1 when any case run misses its expectations")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("serve-sim", help="serve an OpenAI-compatible simulator playing the cases' trajectories")
    _add_selection(p)
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    p.add_argument("--verbose", action="store_true", help="log every request")
    p.set_defaults(func=cmd_serve_sim)

    p = sub.add_parser(
        "sweep", help="run the full grid of thresholds and budgets (each point a bench run)",
        description="Each comma-separated list is one axis of the grid; every combination is one bench run.",
    )  # fmt: skip
    _add_selection(p)
    _add_model(p)
    d = HarnessConfig()
    g = p.add_argument_group("grid (comma-separated values)")
    g.add_argument("--no-gain-threshold", default="1,2,3,4", metavar="LIST", help="default 1,2,3,4")
    g.add_argument(
        "--protocol-violation-threshold",
        default=str(d.protocol_violation_threshold),
        metavar="LIST",
        help=f"default {d.protocol_violation_threshold}",
    )
    g.add_argument(
        "--max-tool-calls",
        default=str(d.max_tool_invocations),
        metavar="LIST",
        help=f"default {d.max_tool_invocations}",
    )
    g.add_argument(
        "--max-model-calls", default=str(d.max_model_calls), metavar="LIST", help=f"default {d.max_model_calls}"
    )
    g.add_argument(
        "--max-tokens", default=str(d.max_total_tokens), metavar="LIST", help=f"default {d.max_total_tokens}"
    )
    p.add_argument("--db", type=Path, default=Path("bench.duckdb"), help="DuckDB file (default bench.duckdb)")
    p.add_argument("--label", default=None, help="label stored with every point")
    p.add_argument("--epochs", type=int, default=3, metavar="K", help="repeat every case K times (default 3)")
    p.add_argument("--concurrency", type=int, default=1, metavar="N", help="case runs in flight (default 1)")
    p.add_argument("--resume", default=None, metavar="SWEEP_ID", help="finish an interrupted sweep")
    p.set_defaults(func=cmd_sweep)  # fmt: skip

    p = sub.add_parser("recommend", help="recommend thresholds and budgets from a sweep, with intervals")
    p.add_argument("--db", type=Path, default=Path("bench.duckdb"), help="DuckDB file (default bench.duckdb)")
    p.add_argument("--sweep", default=None, metavar="SWEEP_ID", help="sweep id (default: the newest)")
    p.add_argument(
        "--objective",
        default="tokens",
        choices=["tokens", "tool_invocations", "model_calls", "wasted"],
        help="what 'cheapest' means (default tokens)",
    )
    p.add_argument(
        "--rule", default="non-inferiority", choices=["non-inferiority", "max-recall"],
        help="non-inferiority: the cheapest configuration shown within --margin of the best recall and honest "
        "fallback (default); max-recall: the highest recall first",
    )  # fmt: skip
    p.add_argument("--margin", type=float, default=0.02, metavar="RATE",
                   help="non-inferiority margin in [0, 1] (default 0.02 = 2 points)")  # fmt: skip
    p.set_defaults(func=cmd_recommend)  # fmt: skip

    p = sub.add_parser(
        "gate", help="compare a candidate label with a baseline label; exit 1 on regression",
        description="Pairs the two labels on the same cases and epochs. Exit 0 pass, 1 regression, 2 unusable input.",
    )  # fmt: skip
    p.add_argument("--db", type=Path, default=Path("bench.duckdb"), help="DuckDB file (default bench.duckdb)")
    p.add_argument("--baseline", required=True, metavar="LABEL", help="label of the baseline runs")
    p.add_argument("--candidate", required=True, metavar="LABEL", help="label of the candidate runs")
    p.add_argument("--k", type=int, default=3, help="k of pass^k, at most the epochs per case (default 3)")
    p.add_argument(
        "--max-recall-drop",
        type=float,
        default=0.0,
        metavar="RATE",
        help="pass-rate drop in [0, 1] tolerated even when significant (default 0.0)",
    )
    p.add_argument(
        "--max-cost-increase",
        type=float,
        default=0.25,
        metavar="RATE",
        help="relative increase (>= 0) of mean tool calls, model calls or tokens tolerated (default 0.25)",
    )
    p.add_argument(
        "--alpha", type=float, default=0.05, metavar="A",
        help="false-alarm rate of the whole gate, Holm-corrected over all tests (default 0.05)",
    )  # fmt: skip
    p.add_argument("--summary", type=Path, default=Path("gate-summary.md"), help="Markdown summary path")
    p.add_argument("--junit", type=Path, default=Path("gate-junit.xml"), help="JUnit XML path")
    p.set_defaults(func=cmd_gate)  # fmt: skip

    p = sub.add_parser("report", help="write a Markdown + HTML report with figures from DuckDB")
    p.add_argument("--db", type=Path, default=Path("bench.duckdb"), help="DuckDB file (default bench.duckdb)")
    p.add_argument("--sweep", default=None, metavar="SWEEP_ID", help="report on one sweep (adds the sweep figures)")
    p.add_argument("--bench-run", default=None, metavar="BENCH_RUN_ID", help="report on one bench run")
    p.add_argument("--out", type=Path, default=Path("reports/out"), help="output folder (default reports/out)")
    p.add_argument(
        "--objective",
        default="tokens",
        choices=["tokens", "tool_invocations", "model_calls", "wasted"],
        help="what 'cheapest' means for the recommendation (default tokens)",
    )
    p.add_argument("--rule", default="non-inferiority", choices=["non-inferiority", "max-recall"],
                   help="decision rule of the recommendation (see `recommend --help`)")  # fmt: skip
    p.add_argument("--margin", type=float, default=0.02, metavar="RATE",
                   help="non-inferiority margin in [0, 1] (default 0.02 = 2 points)")  # fmt: skip
    p.set_defaults(func=cmd_report)  # fmt: skip

    p = sub.add_parser("schema", help="print the JSON Schema of evaluation files")
    p.set_defaults(func=cmd_schema)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_OK
    # SIGTERM behaves like Ctrl-C: finished case runs are kept, the bench run is marked interrupted.
    if hasattr(signal, "SIGTERM") and os.getpid() > 0:
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    from runners.bench import BenchInputError
    from runners.evalset import EvalSetError
    from runners.metrics_db import MetricsDbError

    try:
        result: int = args.func(args)
        return result
    except KeyboardInterrupt:
        err.print("interrupted: finished case runs are kept; continue with --resume BENCH_RUN_ID")
        return EXIT_INTERRUPTED
    except EvalSetError as exc:
        err.print(f"[red]error:[/red] {len(exc.problems)} problem(s) in the evaluation set:", highlight=False)
        for problem in exc.problems:
            err.print(f"  - {problem}", highlight=False, markup=False)
        return EXIT_INPUT
    except (UsageError, BenchInputError, MetricsDbError, ValueError) as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        return EXIT_INPUT


if __name__ == "__main__":
    sys.exit(main())
