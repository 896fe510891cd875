"""A tag-probe bench run: every probe point of the plan's cases asked of its model, each probe a case run in DuckDB.

The plan is a bench run's (`harness-bench tag-probe` takes `run`'s flags): its cases, model, settings, cassettes
and database. Each probe is stored as a case run of one bench run — its `epoch` column holds the reference step the
probe asked about, so `show RUN/CASE/STEP` prints its transcript — and answered from, or recorded into, a cassette
of its own (`<cassettes>/<model>/<case>/step<N>.json`), so a recording resumes probe by probe.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from harness import CancellationToken, ModelErrorKind, __version__
from runners.domain.evalset import EvalCase
from runners.domain.model_spec import ModelKind
from runners.plan.rules import BenchInputError
from runners.plan.run_plan import RunPlan
from runners.run._execute import ModelFactory
from runners.run.bench import _new_id, case_run_id, git_commit
from runners.run.preflight import preflight
from runners.run.tag_probe import ProbeRun, probe, probe_points
from runners.store.connection import connect
from runners.store.runs import BenchRunStart, finish_bench_run, start_bench_run
from runners.store.schema import case_run_rows
from runners.store.tag_probes import StoredProbe, store_probe
from runners.store.transcripts import transcript_rows
from runners.store.writer import MetricsWriter

__all__ = ["ProbeHook", "ProbeSummary", "run_probes"]

ProbeHook = Callable[[int, int, ProbeRun | None], None]
"""Called with (probes done, probes planned, the probe just done)."""


@dataclass
class ProbeSummary:
    """What a tag-probe run did."""

    bench_run_id: str
    """The bench run its probes are stored under."""
    status: str
    """completed | interrupted | failed."""
    planned: int
    """Probes planned."""
    probes: list[ProbeRun] = field(default_factory=list)
    """Every probe made, in plan order."""
    wall_seconds: float = 0.0
    """Wall time."""
    infra_errors: int = 0
    """Probes whose model call ended on an endpoint or cassette error (not the model's answer)."""


def _probe_one(case: EvalCase, step: int, factory: ModelFactory, cancellation: CancellationToken) -> ProbeRun:
    model = factory.for_case(case, 1)
    opts = factory.plan.options
    config, replay = opts.settings.config, opts.replay
    if replay.cassettes is None or factory.spec.kind is not ModelKind.OPENAI:
        return probe(case, step, model, config=config, cancellation=cancellation)
    from runners.store.cassettes import CassetteError, probe_cassette_path, use_cassette

    path = probe_cassette_path(replay.cassettes, factory.spec.raw, case.id, step)
    try:
        with use_cassette(path, replay.mode, factory.plan.secrets) as tape:
            return probe(case, step, model, config=config, cancellation=cancellation,
                         deadline_clock=tape.deadline_clock)  # fmt: skip
    except CassetteError as exc:
        raise BenchInputError(f"{exc}; delete {path} and record it again") from None


def _stored(bench_run_id: str, case_run_id: str, case: EvalCase, done: ProbeRun) -> StoredProbe:
    truth = case.trajectory.steps[done.point.step - 1].truth
    if truth is None:
        raise BenchInputError(f"case {case.id}: trajectory step {done.point.step} has no truth grade; grade it first")
    return StoredProbe(bench_run_id, case_run_id, case.id, done.point.step, done.point.tool_call_id, done.answer,
                       done.tag, done.implied, truth.grade)  # fmt: skip


def run_probes(plan: RunPlan, *, cancellation: CancellationToken | None = None,
               on_progress: ProbeHook | None = None, on_start: Callable[[str], None] | None = None,
               only: frozenset[tuple[str, int]] | None = None) -> ProbeSummary:  # fmt: skip
    """Ask the plan's model at every probe point of the plan's cases (one epoch: a probe is teacher-forced), each
    probe stored as a case run of one new bench run (`only`: these (case, step) points alone). Once `cancellation`
    is set no probe starts."""
    t0 = time.perf_counter()
    token = cancellation or CancellationToken()
    config = plan.options.settings.config
    points = [(case, p.step) for case in plan.cases for p in probe_points(case, config)
              if only is None or (case.id, p.step) in only]  # fmt: skip
    preflight(plan)
    con = connect(plan.options.storage.db, columns=plan.record.columns)
    summary = ProbeSummary(_new_id(), "running", len(points))
    record, spec = plan.record, plan.model
    status, error = "failed", None
    try:
        start_bench_run(con, BenchRunStart(
            summary.bench_run_id, False, None, git_commit(), record.evalset_hash, len(points), __version__, None,
            record.settings_json, record.setting_columns, record.option_columns,
        ))  # fmt: skip
        if on_start:
            on_start(summary.bench_run_id)
        writer = MetricsWriter(con, secrets=plan.secrets)
        factory = ModelFactory(plan)
        if on_progress:
            on_progress(0, len(points), None)
        for case, step in points:
            if token.cancelled:
                break
            done = _probe_one(case, step, factory, token)
            if token.cancelled:
                break  # in flight when interrupted: discarded
            run_id = case_run_id(summary.bench_run_id, case.id, step)
            rows = case_run_rows(summary.bench_run_id, run_id, spec.raw, plan.options.storage.label, step,
                                 record.swept, done.run)  # fmt: skip
            writer.add_transcript(*transcript_rows(summary.bench_run_id, run_id, done.run.result))
            writer.add(rows)
            writer.flush()
            store_probe(con, _stored(summary.bench_run_id, run_id, case, done))
            kind = done.run.result.error_kind
            summary.infra_errors += kind is not None and kind.infrastructure
            summary.probes.append(done)
            if on_progress:
                on_progress(len(summary.probes), len(points), done)
        status = "completed" if len(summary.probes) == len(points) else "interrupted"
    except BaseException as exc:
        error = f"{type(exc).__name__}: {exc}"[:300]
        raise
    finally:
        finish_bench_run(con, summary.bench_run_id, status, error)
        con.close()
        summary.status = status
        summary.wall_seconds = time.perf_counter() - t0
    return summary


def replay_missed(summary: ProbeSummary) -> int:
    """Probes whose request a write-protected cassette did not hold."""
    return sum(p.run.result.error_kind is ModelErrorKind.REPLAY_MISS for p in summary.probes)
