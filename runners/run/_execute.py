"""One case run of a bench run, as every executor runs it: the model for the case (a scripted trajectory, or
the run's one shared OpenAI client), its cassette when the run records or replays, and the re-record command
when a cassette is missing or does not match."""

from __future__ import annotations

import os
from dataclasses import replace
from functools import partial
from typing import Any

from harness import CancellationToken, ChatModel, ModelErrorKind
from runners.domain import profiles
from runners.domain.evalset import EvalCase
from runners.domain.model_spec import ModelKind, parse_model
from runners.domain.scripted import ScriptedChatModel
from runners.plan.rules import BenchInputError
from runners.plan.run_plan import RunPlan
from runners.run.agents import loop_for
from runners.run.case_runner import CaseRun, run_case
from runners.run.verdict import trajectory_applies

__all__ = ["ModelFactory", "execute_case"]


class ModelFactory:
    """The model of each case run of one bench run (`plan`)."""

    def __init__(self, plan: RunPlan) -> None:
        self.plan = plan
        self.spec = plan.model
        # the plain loop has no Harness: neither its invariants nor a scripted trajectory's bounds are judged (the
        # plan says which loop; the bounds are the run's own rule, asked once per run)
        scripted = self.spec.kind is ModelKind.SCRIPTED
        self.judge_trajectory = plan.harnessed and trajectory_applies(plan.options.settings.config, scripted=scripted)
        self._shared: ChatModel | None = None
        if self.spec.kind is ModelKind.OPENAI:
            # imported here: the openai SDK and the cassette machinery cost ~1 s of start-up that a
            # scripted run (the main job, every test subprocess) never needs
            from harness import OpenAIChatModel
            from runners.store.cassettes import OFFLINE_KEY, CassetteTransport

            opts = plan.options
            ms, execution, replay = opts.settings.model_settings, opts.execution, opts.replay
            self._shared = OpenAIChatModel(
                self.spec.name,
                base_url=ms.base_url,
                api_key_env=ms.api_key_env,
                timeout_seconds=opts.settings.config.model_timeout_seconds,
                tool_choice=ms.tool_choice,
                parallel_tool_calls=ms.parallel_tool_calls.wire,
                tool_call_format=ms.tool_call_format,
                temperature=ms.temperature,
                max_in_flight=execution.max_in_flight or execution.concurrency,
                # Each case run binds its own cassette to its thread (runners/store/cassettes.py).
                transport=partial(CassetteTransport, require_binding=True) if replay.cassettes is not None else None,
                # a replay never reaches an endpoint: it needs no key (a set one is used, as the recording was)
                api_key=(os.environ.get(ms.api_key_env) or OFFLINE_KEY) if replay.replays else None,
            )

        self.guard: ChatModel | None = None
        guard = plan.options.settings.model_settings.guard_model
        if guard is not None:
            from harness import OpenAIChatModel
            from runners.store.cassettes import OFFLINE_KEY, CassetteTransport

            opts = plan.options
            ms, replay = opts.settings.model_settings, opts.replay
            # the guard's isolated calls go through the run's cassette like the agent's
            self.guard = OpenAIChatModel(
                parse_model(guard).name,
                base_url=ms.guard_base_url or ms.base_url,
                api_key_env=ms.api_key_env,
                timeout_seconds=opts.settings.config.model_timeout_seconds,
                temperature=0.0,
                transport=partial(CassetteTransport, require_binding=True) if replay.cassettes is not None else None,
                api_key=(os.environ.get(ms.api_key_env) or OFFLINE_KEY) if replay.replays else None,
            )

    def for_case(self, case: EvalCase, epoch: int) -> ChatModel:
        if self._shared is not None:
            return self._shared
        traj = profiles.trajectory_for(case, self.spec.name, epoch)
        return ScriptedChatModel(traj, name=self.spec.raw)


def execute_case(case: EvalCase, epoch: int, factory: ModelFactory, cancellation: CancellationToken) -> CaseRun:
    """Run one case at one epoch through `factory`'s model (under its cassette when the run has one); once
    `cancellation` is set, the run ends CANCELLED."""
    model = factory.for_case(case, epoch)
    opts = factory.plan.options
    config, loop, replay = opts.settings.config, loop_for(opts.execution.agent), opts.replay
    harnessed, judge = factory.plan.harnessed, factory.judge_trajectory
    if replay.cassettes is None or factory.spec.kind is not ModelKind.OPENAI:
        return run_case(case, model, config=config, cancellation=cancellation, loop=loop, guard_model=factory.guard,
                        judge_trajectory=judge, judge_invariants=harnessed)  # fmt: skip
    from runners.store.cassettes import CassetteError, cassette_path, rerecord_command, use_cassette

    path = cassette_path(replay.cassettes, factory.spec.raw, case.id, epoch)
    try:
        with use_cassette(path, replay.mode, factory.plan.secrets) as tape:
            run = run_case(case, model, config=config, cancellation=cancellation, deadline_clock=tape.deadline_clock,
                           loop=loop, guard_model=factory.guard, judge_trajectory=judge,
                           judge_invariants=harnessed)  # fmt: skip
    except CassetteError as exc:
        command = rerecord_command(opts, case.id, epoch, delete_first=True)
        raise BenchInputError(f"{exc}; re-record with: {command}") from None
    if run.result.error_kind is ModelErrorKind.REPLAY_MISS:
        command = rerecord_command(opts, case.id, epoch)
        message = f"request not in cassette {path} (record mode {replay.mode}); re-record with: {command}"
        verdicts = replace(run.verdicts, outcome_failures=(*run.verdicts.outcome_failures, message))
        run = CaseRun(run.case, _with_error(run, message), run.metrics, verdicts, run.evidence_calls)
    return run


def _with_error(run: CaseRun, message: str) -> Any:
    return replace(run.result, error=message)
