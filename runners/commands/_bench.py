"""What `harness-bench run` and `harness-bench sweep` share: their flags (the settings and every option, each from
its one declaration), the options a command line gives the planner, and what both say when a run is
claimed, interrupted or stopped by a failed write, with the exact command that continues it."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from rich.text import Text

from runners.commands._common import EXIT_INTERRUPTED, EXIT_STORAGE, _error, _fail, _say, err
from runners.plan import settings
from runners.plan.flags import Flag, FlagModel, group_of
from runners.plan.options import BENCH, CASSETTES, EXECUTION, BenchOptions, ResumeFlag, ResumeRequest
from runners.run import interrupts

__all__ = [
    "_add_bench",
    "_bench_options",
    "_claim",
    "_endpoint_named",
    "_interrupted",
    "_interrupts",
    "_name_run",
    "_storage_failed",
    "_warn_unchecked",
]


# -- shared options -----------------------------------------------------------------------------
def _add_bench(p: argparse.ArgumentParser, *, sweep: bool) -> None:
    """Every flag of `run` (`sweep`): the case selection, the settings, then each option where its declaration
    puts it in `--help` (runners/plan/options.py: flag, type, bounds, default, help)."""
    command = "sweep" if sweep else "run"
    for title in (*settings.GROUPS.values(), CASSETTES, BENCH, EXECUTION):  # the order --help lists them in
        group_of(p, title)
    settings.add_arguments(p, command, sweep=sweep)
    concerns: list[type[FlagModel]] = [*BenchOptions.concerns().values(), ResumeFlag]
    for concern in concerns:
        concern.add_flags(p, command)


def _bench_options(args: argparse.Namespace, *, command: str) -> BenchOptions:
    """The options the flags give, for the flag rules (runners/plan/rules.py) the plan applies. With --resume: where
    and how it executes, the endpoint settings given, and the flags a resume would ignore (the rest is the stored
    run's)."""
    concerns = {name: concern.from_args(args, command) for name, concern in BenchOptions.concerns().items()}
    resume = ResumeFlag.from_args(args, command).resume
    if resume is None:
        return BenchOptions.of_concerns(concerns, settings.settings_from_args(args))
    decl = settings.declaration()
    named = settings.given(args)
    refused = [decl[n].flag for n in named if not decl[n].endpoint]
    refused += [d.flag for c in BenchOptions.concerns().values() for d in c.declared() if d.stored and d.given(args)]
    overrides = {n: v for n, v in named.items() if decl[n].endpoint}
    return BenchOptions.of_concerns(
        concerns, settings.RunSettings.of(), ResumeRequest(resume, overrides, tuple(refused))
    )


# -- what a run or sweep says when it is claimed, interrupted or cannot write ------------------
def _resume_command(command: str, db: Path, run_id: str) -> str:
    """The exact command that continues a bench run (`run`) or sweep (`sweep`), shell-quoted."""
    return f"harness-bench {command} --db {shlex.quote(str(db))} --resume {shlex.quote(run_id)}"


def _say_resume(commands: Sequence[str]) -> None:
    """Each resume command on a line of its own, never wrapped (it is copied into a shell) nor read as markup."""
    for command in commands:
        err.print(Text(f"  {command}"), soft_wrap=True)


def _claim(db: Path) -> None:
    """Open the database as its only writer (clear message if locked) and mark dead runs interrupted."""
    from runners.store.connection import connect
    from runners.store.runs import mark_stale_runs, stale_runs

    if not db.exists():
        return  # nothing to claim; not creating it here lets a failed preflight leave no file behind
    con = connect(db)
    try:
        stale = stale_runs(con)
        mark_stale_runs(con)
    finally:
        con.close()
    if not stale.bench_runs and not stale.sweeps:
        return
    alone = [b for b, sweep in stale.bench_runs if sweep is None]
    named = [f"{b} (sweep {sweep})" if sweep else b for b, sweep in stale.bench_runs]
    named += [f"sweep {s}" for s in stale.sweeps if all(s != sweep for _, sweep in stale.bench_runs)]
    count = f"{len(stale.bench_runs)} bench run(s)" if stale.bench_runs else f"{len(stale.sweeps)} sweep(s)"
    _say(f"{count} left 'running' by a process that died are now 'interrupted': {', '.join(named)};"
         " continue with:", stderr=True)  # fmt: skip
    _say_resume([_resume_command("sweep", db, s) for s in stale.sweeps]
                + [_resume_command("run", db, b) for b in alone])  # fmt: skip


def _interrupted(intr: interrupts.Interrupts, what: str, command: str, db: Path, run_id: str | None,
                 status: str, stored: int, planned: int) -> int:  # fmt: skip
    """Say what an interrupt left (the id, the case runs stored, the exact resume command); its exit code."""
    sig = intr.received.name if intr.received else "interrupt"
    if run_id is None:
        _say(f"{sig}: stopped before anything was written", stderr=True)
    elif status == "completed":
        _say(f"{what} {run_id} completed before {sig} took effect ({stored} of {planned} case runs stored);"
             " nothing to resume", stderr=True)  # fmt: skip
    else:
        _say(f"{what} {run_id} interrupted by {sig}: {stored} of {planned} case runs stored, the ones in flight"
             " discarded; continue with:", stderr=True)  # fmt: skip
        _say_resume([_resume_command(command, db, run_id)])
    return intr.exit_code or EXIT_INTERRUPTED


def _storage_failed(what: str, command: str, db: Path, run_id: str, error: str, stored: int, planned: int,
                    recorded: bool) -> int:  # fmt: skip
    """A write to the database failed (full disk, I/O error): say what is stored and how to continue."""
    state = "recorded 'interrupted'" if recorded else "left 'running' (the next run on it marks it 'interrupted')"
    _error(f"writing {db} failed ({error}): {what} {run_id} stopped, {state}, {stored} of {planned} case runs"
           " stored; free some space (or fix the device), then continue with the command below")  # fmt: skip
    _say_resume([_resume_command(command, db, run_id)])
    return EXIT_STORAGE


def _warn_unchecked(db: Path) -> None:
    """A write-ahead log left next to the database after the writer closed: its checkpoint failed (full
    disk). The rows are safe in it; say so, so that nobody deletes it."""
    wal = db.with_name(db.name + ".wal")
    if wal.exists() and wal.stat().st_size > 0:
        _say(f"warning: {wal} could not be folded into {db} (full disk?); the rows are stored in it: keep it next"
             " to the database (the next writer folds it in once there is room)", stderr=True)  # fmt: skip


def _endpoint_named(run: settings.RunSettings | None, opts: BenchOptions) -> str:
    """The endpoint (and the cassettes) a bench run used, for the one-line error when none of it served."""
    from harness import OpenAIChatModel
    from runners.domain.redaction import safe_url

    name = safe_url(OpenAIChatModel.resolve_base_url(run.model_settings.base_url if run is not None else None)) or ""
    ms = run.model_settings if run is not None else None
    if ms is not None and ms.guard_model is not None and ms.guard_base_url not in (None, ms.base_url):
        name += f" or the SemanticGuard's {safe_url(ms.guard_base_url) or ''}"  # either may have been the one down
    cassettes = opts.replay.cassettes
    return f"{name} (cassettes {cassettes})" if cassettes is not None else name


def _interrupts(args: argparse.Namespace) -> interrupts.Interrupts:
    """The handlers `main` installed for a writing command (a state that never fires when called directly)."""
    intr: interrupts.Interrupts = getattr(args, "interrupts", None) or interrupts.Interrupts()
    intr.exit_note = "nothing had started yet"
    return intr


def _name_run(intr: interrupts.Interrupts, command: str, db: Path, run_id: str) -> None:
    """Once the bench run or sweep exists, a second signal names it and how to continue."""
    what = "sweep" if command == "sweep" else "bench run"
    intr.exit_note = (
        f"{what} {run_id} stays 'running' until the next writer marks it 'interrupted'; continue with:\n"
        f"  {_resume_command(command, db, run_id)}"
    )


# -- tag-probe's own flags (shared with the real-models command, which replays a probe recording) ----------------
class TagProbeFlags(FlagModel):
    """`tag-probe`'s flags of its own, beside every option of a run (runners/plan/options.py)."""

    json_path: Annotated[Path | None, Flag("--json", metavar="PATH")] = None
    """also write the model's confusion per truth grade, the baselines and every probe's answer as JSON"""
    probe: Annotated[tuple[str, ...], Flag(metavar="CASE:STEP")] = ()
    """probe only these observations (repeatable): a selected case's id and the reference step whose observation
    is asked about (default: every probe point of the selected cases)"""


def probe_points_given(given: tuple[str, ...], cases: Any) -> frozenset[tuple[str, int]]:
    """The `--probe CASE:STEP` points; one that names no probe point of a selected case: one line, exit 2."""
    from runners.run.tag_probe import probe_points

    by_id = {c.id: c for c in cases}
    out: set[tuple[str, int]] = set()
    for text in given:
        case_id, sep, step = text.rpartition(":")
        if not sep or not step.isdigit() or case_id not in by_id:
            _fail(f"--probe {text!r}: give CASE:STEP, CASE one of the selected cases and STEP a reference step")
        if int(step) not in {p.step for p in probe_points(by_id[case_id])}:
            _fail(f"--probe {text!r}: step {step} of {case_id} is not an observation the model is asked to evaluate")
        out.add((case_id, int(step)))
    return frozenset(out)
