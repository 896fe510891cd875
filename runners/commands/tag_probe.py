"""`harness-bench tag-probe`: ask a model for its GAINED / NO_GAIN on every non-empty observation of the selected cases'
reference trajectories (teacher-forced through the Harness), store every probe as a case run, and print (and write
as JSON) its tags against the observations' graded truth and the trivial taggers."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from runners.commands._bench import (
    TagProbeFlags,
    _add_bench,
    _bench_options,
    _claim,
    _interrupts,
    _name_run,
    probe_points_given,
)
from runners.commands._common import EXIT_INPUT, EXIT_OK, _error, _fail, _progress, _say, _sub, out
from runners.store.output_files import NamedPath

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    p = _sub(sub, "tag-probe", "measure a model's GAINED / NO_GAIN on every observation of the reference trajectories",
             "For each case and each non-empty observation of its reference trajectory, the conversation up to and"
             " including that observation is replayed through the Harness (the reference's calls, the real tools,"
             " envelope and prompt) and the model is asked for its next message; the tag it gives (or the Draft it"
             " writes instead) is compared with the observation's graded truth (root_cause, excludes, symptom,"
             " nothing_new), beside always-GAINED, always-NO_GAIN and GAINED-iff-non-empty. Every probe is a case"
             " run (its epoch is the probed step) in --db, its model call recorded in --cassettes like any"
             " run's.")  # fmt: skip
    _add_bench(p, sweep=False)
    TagProbeFlags.add_flags(p, "tag-probe")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Plan as `run` does (every flag rule), then probe every point and report the confusion."""
    from runners.decisions.tag_probe import ProbeMeasure, measure_probes
    from runners.plan.run_plan import plan_run
    from runners.rendering.tag_probe import probe_table
    from runners.run.probe_bench import run_probes
    from runners.store.connection import connect
    from runners.store.output_files import check_output_path, write_text
    from runners.store.resume import STORED_RUNS
    from runners.store.tag_probes import stored_probes

    flags = TagProbeFlags.from_args(args, "tag-probe")
    if getattr(args, "resume", None):
        _fail("--resume: a tag probe is not resumed; run it again with --cassettes and --record-mode once")
    for flag, value, alone in (("--shard", getattr(args, "shard", None), None),
                               ("--executor", getattr(args, "executor", None), "local")):  # fmt: skip
        if value is not None and str(value) != alone:
            _fail(f"{flag} {value}: a tag probe runs its probes one after another in this process")
    if getattr(args, "epochs", None) not in (None, 1):
        _fail(f"--epochs {args.epochs}: a tag probe asks each observation once (its conversation is the reference's)")
    intr = _interrupts(args)
    if flags.json_path is not None:
        target = NamedPath("--json", flags.json_path)
        check_output_path(target)
        if flags.json_path.resolve() == Path(args.db).resolve():
            _fail(f"--json {flags.json_path} is the --db file; name another")
    opts = _bench_options(args, command="run")
    plan = plan_run(opts, STORED_RUNS)
    only = probe_points_given(flags.probe, plan.cases) if flags.probe else None
    _claim(args.db)
    with _progress() as progress:
        task = progress.add_task("probes", total=None, passed="")

        def hook(done: int, total: int, _: Any) -> None:
            progress.update(task, completed=done, total=total)

        summary = run_probes(plan, cancellation=intr.token, on_progress=hook, only=only,
                             on_start=lambda run_id: _name_run(intr, "run", args.db, run_id))  # fmt: skip
    con = connect(args.db, read_only=True)
    try:
        rows = stored_probes(con, summary.bench_run_id)
    finally:
        con.close()
    label = plan.options.storage.label or plan.model.raw
    measured = ProbeMeasure(models=[measure_probes(label, rows, bench_run_id=summary.bench_run_id)])
    out.print(probe_table(measured))
    _say(f"tag probe {summary.bench_run_id} {summary.status}: {len(summary.probes)} of {summary.planned} probes in"
         f" {summary.wall_seconds:.1f}s → {args.db}")  # fmt: skip
    if flags.json_path is not None:
        write_text(NamedPath("--json", flags.json_path), measured.model_dump_json(indent=1) + "\n")
        _say(f"wrote {flags.json_path}")
    if summary.probes and summary.infra_errors == len(summary.probes):
        _error(f"no probe was answered: every model call ended on an endpoint or cassette error (see {args.db})")
        return EXIT_INPUT
    if summary.infra_errors:
        _say(f"{summary.infra_errors} probe(s) ended on an endpoint or cassette error, not the model's answer",
             stderr=True)  # fmt: skip
    return EXIT_OK
