"""One case run of a bench run, as every executor runs it: the model for the case (a scripted trajectory, or
the run's one shared OpenAI client), its cassette when the run records or replays, and the re-record command
when a cassette is missing or does not match."""

from __future__ import annotations

import os
from dataclasses import replace
from functools import partial
from typing import Any

from harness import ChatModel, ModelErrorKind
from runners.domain import profiles
from runners.domain.evalset import EvalCase
from runners.domain.model_spec import ModelKind, ModelSpec
from runners.domain.scripted import ScriptedChatModel
from runners.plan.options import BenchOptions
from runners.plan.rules import BenchInputError
from runners.run.agents import loop_for
from runners.run.case_runner import CaseRun, run_case
from runners.run.verdict import trajectory_applies

__all__ = ["ModelFactory", "execute_case"]


class ModelFactory:
    """The model of each case run of one bench run."""

    def __init__(self, spec: ModelSpec, opts: BenchOptions) -> None:
        self.spec = spec
        self.opts = opts
        self._shared: ChatModel | None = None
        if spec.kind is ModelKind.OPENAI:
            # imported here: the openai SDK and the cassette machinery cost ~1 s of start-up that a
            # scripted run (the main job, every test subprocess) never needs
            from harness import OpenAIChatModel
            from runners.store.cassettes import OFFLINE_KEY, CassetteTransport

            ms = opts.model_settings
            self._shared = OpenAIChatModel(
                spec.name,
                base_url=ms.base_url,
                api_key_env=ms.api_key_env,
                timeout_seconds=opts.config.model_timeout_seconds,
                tool_choice=ms.tool_choice,
                parallel_tool_calls=ms.parallel_tool_calls.wire,
                tool_call_format=ms.tool_call_format,
                temperature=ms.temperature,
                max_in_flight=opts.max_in_flight or opts.concurrency,
                # Each case run binds its own cassette to its thread (runners/store/cassettes.py).
                transport=partial(CassetteTransport, require_binding=True) if opts.cassettes is not None else None,
                # a replay never reaches an endpoint: it needs no key (a set one is used, as the recording was)
                api_key=(os.environ.get(ms.api_key_env) or OFFLINE_KEY) if opts.replays else None,
            )

    def for_case(self, case: EvalCase, epoch: int) -> ChatModel:
        if self._shared is not None:
            return self._shared
        traj = profiles.trajectory_for(case, self.spec.name, epoch)
        return ScriptedChatModel(traj, name=self.spec.raw)


def execute_case(case: EvalCase, epoch: int, factory: ModelFactory, opts: BenchOptions) -> CaseRun:
    """Run one case at one epoch through `factory`'s model (under its cassette when the run has one)."""
    model = factory.for_case(case, epoch)
    harnessed = opts.agent.harnessed
    judge = harnessed and trajectory_applies(opts.config, scripted=factory.spec.kind is ModelKind.SCRIPTED)
    if opts.cassettes is None or factory.spec.kind is not ModelKind.OPENAI:
        return run_case(case, model, config=opts.config, cancellation=opts.cancellation, loop=loop_for(opts.agent),
                        judge_trajectory=judge, judge_invariants=harnessed)  # fmt: skip
    from runners.plan.redact import Secrets
    from runners.store.cassettes import CassetteError, cassette_path, rerecord_command, use_cassette

    secrets = Secrets.of(opts.model_settings.base_url, opts.model_settings.api_key_env)
    path = cassette_path(opts.cassettes, factory.spec.raw, case.id, epoch)
    try:
        with use_cassette(path, opts.mode, secrets) as tape:
            run = run_case(case, model, config=opts.config, cancellation=opts.cancellation,
                           deadline_clock=tape.deadline_clock, loop=loop_for(opts.agent),
                           judge_trajectory=judge, judge_invariants=harnessed)  # fmt: skip
    except CassetteError as exc:
        command = rerecord_command(opts, case.id, epoch, delete_first=True)
        raise BenchInputError(f"{exc}; re-record with: {command}") from None
    if run.result.error_kind is ModelErrorKind.REPLAY_MISS:
        command = rerecord_command(opts, case.id, epoch)
        message = f"request not in cassette {path} (record mode {opts.mode}); re-record with: {command}"
        verdicts = replace(run.verdicts, outcome_failures=(*run.verdicts.outcome_failures, message))
        run = CaseRun(run.case, _with_error(run, message), run.metrics, verdicts, run.evidence_calls)
    return run


def _with_error(run: CaseRun, message: str) -> Any:
    return replace(run.result, error=message)
