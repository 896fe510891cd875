"""The bench runs the live check makes: live case runs through the recording proxy into the metrics database and
into cassettes (one folder per mode), interleaved by mode and started only while the time left covers a run's
worst case; then each mode's runs replayed offline from those cassettes into a database of their own.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness import HarnessConfig
from runners.live._log import log
from runners.live.models import LocalModel
from runners.live.proxy import SETTLE_TIMEOUT_S, Recorded, RecordingProxy
from runners.live.sizing import LivePlan, schedule
from runners.plan.options import BenchOptions
from runners.plan.settings import ModelSettings
from runners.run.bench import plan_run, run_bench

__all__ = ["LIVE_KEY_ENV", "LiveRuns", "Replayed", "live_model_settings", "replay_live", "run_live"]

LIVE_KEY_ENV = "HARNESS_BENCH_LIVE_KEY"
"""The API key variable the live runs name (a local server needs none: it is set to a placeholder)."""


def live_model_settings(model: LocalModel, mode: str, base_url: str | None = None) -> ModelSettings:
    """How the live runs (and their replay, with no `base_url`) ask `model` under `tool_choice` `mode`: by its name,
    with the temperature and tool-call format its registry entry gives."""
    r = model.request
    return ModelSettings(model=f"openai:{model.name}", base_url=base_url, api_key_env=LIVE_KEY_ENV, tool_choice=mode,
                         temperature=r.temperature, tool_call_format=r.tool_call_format)  # fmt: skip


@dataclass(frozen=True, slots=True)
class LiveRuns:
    """What the live phase ran."""

    bench_ids: dict[str, list[str]]
    """Per mode, the bench run ids (one per case run)."""
    ran: dict[str, list[str]]
    """Per mode, the case ids run, in order."""
    records: list[Recorded]
    """Every chat request the server received through the proxy, and its answer."""
    seconds: float
    """How long the live phase took."""
    skipped: int
    """Planned runs not started: their worst case did not fit the time left."""

    @property
    def all_ids(self) -> list[str]:
        """Every live bench run id, mode by mode."""
        return [b for ids in self.bench_ids.values() for b in ids]


def run_live(
    server_root: str, plan: LivePlan, case_ids: Sequence[str], modes: Sequence[str], *, model: LocalModel,
    cfg: HarnessConfig, db: Path, cassettes: Path,
) -> LiveRuns:  # fmt: skip
    """The live case runs, interleaved by mode, recorded through the proxy and into cassettes."""
    bench_ids: dict[str, list[str]] = {m: [] for m in modes}
    ran: dict[str, list[str]] = {m: [] for m in modes}
    shutil.rmtree(cassettes, ignore_errors=True)
    started = time.perf_counter()
    skipped = 0
    with RecordingProxy(server_root) as proxy:
        for mode, case_id in schedule(case_ids, modes):
            left = plan.hard_limit_s - (time.perf_counter() - started)
            if left < plan.run_bound_s:
                skipped += 1
                continue
            proxy.label = f"live-{mode}"
            summary = run_bench(
                plan_run(BenchOptions.of(
                    case_ids=[case_id], model_settings=live_model_settings(model, mode, proxy.base_url),
                    db=db, label=f"live-{mode}", config=cfg, cassettes=cassettes / mode, record_mode="once",
                ))
            )  # fmt: skip
            _settle(proxy)  # a request the deadline cut is recorded under this run's label, before the next run
            bench_ids[mode].append(summary.bench_run_id)
            ran[mode].append(case_id)
            for run in summary.runs:
                d, m = run.result.decision, run.metrics
                error = f" error={run.result.error[:80]}" if run.result.error else ""
                log(
                    f"[{mode}] {case_id}: {d.outcome.value} stop={getattr(d.stop_reason, 'value', None)} "
                    f"model_calls={m.model_calls} tools={m.tool_invocations} rejections={m.tool_rejections} "
                    f"{run.result.wall_ms / 1000:.0f} s{error}"
                )
        records = list(proxy.records)
    return LiveRuns(bench_ids, ran, records, time.perf_counter() - started, skipped)


def _settle(proxy: RecordingProxy) -> None:
    """Wait for the requests the proxy is still relaying (a cut one is recorded a poll after its client gave up)."""
    if not proxy.settle():
        log(f"a request was still in flight {SETTLE_TIMEOUT_S:.0f} s after its run ended: the records may lack it")


@dataclass(frozen=True, slots=True)
class Replayed:
    """The replay of the live runs."""

    bench_ids: dict[str, str | None]
    """Per mode, the replay's bench run id (None: that mode ran nothing live)."""
    db: Path
    """The database the replay wrote."""


def replay_live(
    db: Path, cassettes: Path, cfg: HarnessConfig, ran: Mapping[str, Sequence[str]], model: LocalModel
) -> Replayed:
    """Replay each mode's live runs from its cassettes (offline, record mode none) into a DuckDB file of their own,
    next to `db`."""
    replay_db = db.with_name(db.stem + "-replay.duckdb")
    replay_db.unlink(missing_ok=True)
    ids: dict[str, str | None] = {}
    for mode, cases in ran.items():
        if not cases:
            ids[mode] = None
            continue
        summary = run_bench(
            plan_run(BenchOptions.of(
                case_ids=list(cases), model_settings=live_model_settings(model, mode), db=replay_db,
                label=f"replay-{mode}", config=cfg, cassettes=cassettes / mode,
                record_mode="none",
            ))
        )  # fmt: skip
        ids[mode] = summary.bench_run_id
    return Replayed(ids, replay_db)
