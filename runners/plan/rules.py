"""The flag rules of a run: every flag that would be ignored, or that contradicts another, is refused here,
before anything is opened or written. Each rule is one function that raises `PlanError` with one line naming
the flag, the value and what to do; `check_options` applies them all in order to a run's `BenchOptions`. The
command line, the Python API and the notebook reach a run only through these rules (`runners.plan.run_plan`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from runners.domain.input_files import what_is
from runners.domain.model_spec import ModelKind, ModelSpec
from runners.domain.redaction import redact
from runners.domain.repository import hint_for_missing
from runners.plan.executor import Executor, check_available
from runners.plan.flags import BenchInputError
from runners.plan.options import DEFAULT_DB, MAX_CONCURRENCY, MAX_EPOCHS, BenchOptions, RecordMode, ResumeRequest

if TYPE_CHECKING:  # the shard module brings DuckDB: not imported when the command line is only parsed
    from runners.plan.shard import ShardSpec

__all__ = [
    "DEFAULT_DB",
    "MAX_CONCURRENCY",
    "MAX_EPOCHS",
    "RECORD_MODES",
    "BenchInputError",
    "PlanError",
    "UsageError",
    "check_api_key",
    "check_cassettes",
    "check_endpoint_url",
    "check_execution",
    "check_loop_settings",
    "check_options",
    "check_resume",
]

RECORD_MODES = tuple(m.value for m in RecordMode)
"""vcrpy's record modes, the values of `--record-mode`."""


class PlanError(BenchInputError):
    """A flag that would be ignored or contradicts another (exit 2); the message names the flag and the fix."""


class UsageError(Exception):
    """Unusable command-line input: printed as one line, exit 2."""


def check_resume(resume: ResumeRequest | None) -> None:
    """A resume restores every stored setting and run option: a flag that would be ignored is refused."""
    if resume is not None and resume.refused:
        raise PlanError(f"--resume {resume.run_id} restores the stored settings; remove {', '.join(resume.refused)}")


def check_cassettes(model: ModelSpec, cassettes: Path | None, record_mode: RecordMode | str | None) -> None:
    """--record-mode needs --cassettes; cassettes record an openai model's HTTP; a replay reads a folder."""
    if record_mode is not None and cassettes is None:
        raise PlanError(f"--record-mode {record_mode} needs --cassettes DIR")
    if cassettes is None:
        return
    if model.kind is not ModelKind.OPENAI:
        raise PlanError(f"--cassettes records a model's HTTP; --model {model} makes none (use openai:<model-name>)")
    if cassettes.exists() and not cassettes.is_dir():
        raise PlanError(f"--cassettes {cassettes} is {what_is(cassettes)}, not a folder")
    if (record_mode or RecordMode.NONE) == RecordMode.NONE and not cassettes.is_dir():
        why = hint_for_missing(cassettes) or (
            "; a replay (--record-mode none) reads recorded cassettes: check the path, or record them first with"
            " --record-mode all"
        )
        raise PlanError(f"--cassettes {cassettes}: no such folder{why}")


def check_endpoint_url(model: ModelSpec, base_url: str | None, *, replay: bool) -> None:
    """A base URL (--base-url, else OPENAI_BASE_URL) that is not http(s)://host is refused (a live run's
    --base-url is the preflight's to check; a replay makes no preflight)."""
    if model.kind is not ModelKind.OPENAI or (base_url and not replay):
        return
    source, url = ("--base-url", base_url) if base_url else ("OPENAI_BASE_URL", os.environ.get("OPENAI_BASE_URL"))
    if not url:
        return
    try:
        parts = urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        ok = False
    if not ok:
        shown = redact(url)  # printed: the URL's user info (a password) never is
        shown = shown if len(shown) <= 80 else shown[:80] + "…"
        raise PlanError(f"{source} {shown!r} is not an http:// or https:// URL with a host; fix it or unset it")


def check_api_key(model: ModelSpec, base_url: str | None, api_key_env: str, *, replay: bool) -> None:
    """An openai model served by the OpenAI API (no base URL) needs its key variable set; a replay (offline) and
    a local server (which ignores the key) need none. Checked on every invocation, a resume's too: the key is
    this shell's, never stored."""
    if model.kind is not ModelKind.OPENAI or base_url is not None or replay or os.environ.get(api_key_env):
        return
    raise PlanError(f"environment variable {api_key_env} is not set; export it or pass --api-key-env NAME")


def check_execution(
    shard: ShardSpec | None, run_id: str | None, executor: Executor, ray_address: str | None, *, resume: bool
) -> None:
    """--shard needs a shared --run-id, --ray-address needs --executor ray, Ray needs to be installed."""
    if shard is not None and run_id is None and not resume:  # a resume restores its shard itself
        raise PlanError(f"--shard {shard} needs --run-id NAME, the same on every shard (e.g. the CI run number),"
                        " so that the shards' files merge into one run")  # fmt: skip
    if ray_address is not None and executor is not Executor.RAY:
        raise PlanError(f"--ray-address {ray_address} applies to --executor ray only")
    check_available(executor)


def check_loop_settings(opts: BenchOptions) -> None:
    """--ablate switches off a control of the Harness, which the plain loop has none of; --plain-prompt is the plain
    loop's prompt, which the Harness's loops never send."""
    from harness import HarnessControl
    from runners.plan.agent import AgentFramework
    from runners.plan.bench_config import BenchHarnessConfig, PlainPrompt

    config, agent = opts.settings.config, opts.execution.agent
    if agent is AgentFramework.PLAIN and config.ablate is not HarnessControl.NONE:
        raise PlanError(f"--ablate {config.ablate.value} switches off a Harness control; --agent plain runs none")
    prompt = config.plain_prompt if isinstance(config, BenchHarnessConfig) else PlainPrompt.PLAIN
    if agent is not AgentFramework.PLAIN and prompt is not PlainPrompt.PLAIN:
        raise PlanError(f"--plain-prompt {prompt.value} applies to --agent plain only (the Harness sends its own)")


def check_options(opts: BenchOptions) -> None:
    """Every rule, in the order a user fixes them: execution, resume, cassettes, endpoint, API key (a count out of
    its range is refused by its declaration, runners/plan/options.py). A resume is checked twice: its flags before
    the stored run is read (the model is not known yet: the default, scripted, needs no key), then the stored
    run's model for this invocation's API key (the rest is the stored run's, checked when it was planned)."""
    execution, replay = opts.execution, opts.replay
    check_execution(execution.shard, opts.storage.run_id, execution.executor, execution.ray_address,
                    resume=opts.resume is not None)  # fmt: skip
    check_resume(opts.resume)
    check_loop_settings(opts)
    ms = opts.settings.model_settings
    if opts.resume is None:
        check_cassettes(ms.model, replay.cassettes, replay.record_mode)
        check_endpoint_url(ms.model, ms.base_url, replay=replay.cassettes is not None)
    check_api_key(ms.model, ms.base_url, ms.api_key_env, replay=replay.replays)
