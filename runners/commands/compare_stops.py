"""`harness-bench compare-stops`: which stop rule pays — the information-gain contract's thresholds, caps and loop
detectors compared on the same stored runs, each exact up to its cut; what cannot be known is printed as such."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Annotated, Any, ClassVar

from runners.commands._common import EXIT_OK, _add_db, _check_outputs, _fail, _say, _sub, out
from runners.plan.flags import Flag, FlagModel
from runners.store.output_files import NamedPath

__all__ = ["register", "run"]


class _CompareStopsFlags(FlagModel):
    """`compare-stops`' flags: which stored case runs, which policies, where to write the comparison."""

    exclusive_required: ClassVar[tuple[str, ...]] = ("runs",)

    label: Annotated[str | None, Flag(exclusive="runs")] = None
    """the case runs of this label (every bench run of it)"""
    bench_run: Annotated[str | None, Flag(exclusive="runs", metavar="BENCH_RUN_ID")] = None
    """the case runs of one bench run"""
    policy: Annotated[
        tuple[str, ...],
        Flag(metavar="SPEC",
             help="a stop policy (repeatable): no-gain:T, tool-cap:N, turn-cap:N, token-cap:N, repeat:k=K,w=W,"
                  " error-cycle:k=K, alternation:k=K, or several joined with + (whichever stops first), e.g."
                  " no-gain:2+tool-cap:8; none given: no-gain:2, no-gain:3, tool-cap:8, turn-cap:8, repeat:k=3,w=10,"
                  " error-cycle:k=2, alternation:k=3"),
    ] = ()  # fmt: skip
    """The stop policies to compare, as specs."""
    policy_file: Annotated[Path | None, Flag(metavar="PATH")] = None
    """policies from a file, one spec a line (blank lines and # comments skipped), compared after the --policy ones"""
    cut_points: bool = False
    """also list every cut run: its case, the rule that fired, where, what it saves"""
    json_path: Annotated[Path | None, Flag("--json", metavar="PATH")] = None
    """also write, per policy, what the runs spend under it and every run's cut (or none) as JSON"""
    plot: Annotated[Path | None, Flag(metavar="PATH")] = None
    """also draw recall kept against tool calls saved, one point per policy, as a PNG"""


def register(sub: Any) -> None:
    p = _sub(sub, "compare-stops", "compare stop rules on stored runs: the NO_GAIN contract, caps and loop detectors",
             "Each policy (a NO_GAIN threshold, a tool-call, model-call or token cap, a loop detector — an exact"
             " repeat, an error cycle, an A-B alternation — or a combination with +) is applied to every stored case"
             " run, exact up to the place it would have stopped the run: the runs it cuts and where, the recall and"
             " honest fallback it keeps or loses, the tool calls, model calls and tokens it saves against the run as"
             " recorded (95% intervals over cases), and the Pareto front of recall kept and tool calls saved. What"
             " cannot be known is printed as such: the Draft written after an earlier STOP_REQUIRED (unknown), and a"
             " run that was stopped where a policy would have let it go on (censored).")  # fmt: skip
    _add_db(p)
    _CompareStopsFlags.add_flags(p, "compare-stops")
    p.set_defaults(func=run)


def _specs(specs: tuple[str, ...]) -> list[Any]:
    """The policies of `--policy` specs; a bad one: one line naming it (the error quotes the spec)."""
    from runners.domain.stop_rules import StopRuleError, parse_rules

    policies = []
    for spec in specs:
        try:
            policies.append(parse_rules(spec))
        except StopRuleError as exc:
            _fail(f"--policy {exc}")
    return policies


def run(args: argparse.Namespace) -> int:
    from runners.decisions.case_alternatives import with_alternatives
    from runners.decisions.compare_stops import compare_stops
    from runners.rendering.compare_stops import render
    from runners.store.connection import connect
    from runners.store.output_files import write_text
    from runners.store.replayable_runs import bench_run_exists, label_exists, runs_of_bench_run, runs_of_label

    flags = _CompareStopsFlags.from_args(args, "compare-stops")
    policies = _specs(flags.policy)
    if flags.policy_file is not None:
        policies += _policies_of(flags.policy_file)
    outputs = [NamedPath(flag, path) for flag, path in (("--json", flags.json_path), ("--plot", flags.plot)) if path]
    inputs = [NamedPath("--db", args.db)]
    if flags.policy_file is not None:
        inputs.append(NamedPath("--policy-file", flags.policy_file))
    if outputs:
        _check_outputs(outputs, inputs)
    db = str(args.db)
    con = connect(args.db, read_only=True)
    try:
        if flags.bench_run is not None:
            if not bench_run_exists(con, flags.bench_run):
                _fail(f"--bench-run: unknown bench run {flags.bench_run!r} in {db}")
            runs = runs_of_bench_run(con, db, flags.bench_run)
        else:
            assert flags.label is not None  # the two are a required, exclusive pair
            if not label_exists(con, flags.label):
                _fail(f"--label: no case runs labelled {flags.label!r} in {db}")
            runs = runs_of_label(con, db, flags.label)
    finally:
        con.close()
    if not policies:  # the documented default set (caps and detectors only on plain-loop runs), said first
        from runners.domain.stop_rules import DEFAULT_POLICY_SPECS

        plain = any(r.agent == "plain" for r in runs)
        specs = tuple(s for s in DEFAULT_POLICY_SPECS if not (plain and s.startswith("no-gain")))
        policies = _specs(specs)
        _say(f"no --policy given: comparing the default set {' '.join(specs)}")
    policies = list({p.spec: p for p in policies}.values())  # a policy given twice is compared once
    result = compare_stops(with_alternatives(runs), policies)  # refuses before anything is written
    selection = f"bench run {flags.bench_run}" if flags.bench_run is not None else f"label {flags.label}"
    title = f"stop rules on {selection} in {db}: {len(runs)} case runs"
    out.print(render(title, result, cut_points=flags.cut_points))
    if flags.json_path is not None:
        write_text(NamedPath("--json", flags.json_path), result.model_dump_json(indent=2) + "\n")
        _say(f"wrote {flags.json_path}")
    if flags.plot is not None:
        from runners.rendering.compare_stops import pareto_png
        from runners.store.output_files import write_bytes

        write_bytes(NamedPath("--plot", flags.plot), pareto_png(result, title))
        _say(f"wrote {flags.plot}")
    return EXIT_OK


def _policies_of(path: Path) -> list[Any]:
    """The policies of a policy file; a file that cannot be read or holds a bad spec: one line naming it."""
    from runners.domain.stop_rules import StopRuleError, parse_policy_file
    from runners.store.output_files import path_kind

    kind = path_kind(path)
    if kind is not None:  # a folder; a FIFO or a device would block the read
        _fail(f"--policy-file {path} is {kind}, not a file")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        _fail(f"--policy-file {path}: cannot be read ({why})")
    try:
        return list(parse_policy_file(text))
    except StopRuleError as exc:
        _fail(f"--policy-file {path}: {exc}")
