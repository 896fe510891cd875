"""The options of one bench run: which cases, how many epochs, which model, where it is stored and where it
executes. The settings (what a run measures) are `RunSettings`; everything else a run needs is declared here,
once, with its default.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.config import HarnessConfig
from harness.context import CancellationToken
from runners.domain import profiles
from runners.plan.agent import AgentFramework
from runners.plan.executor import Executor
from runners.plan.rules import DEFAULT_DB, BenchInputError, RunRequest
from runners.plan.settings import ModelSettings, RunSettings, SettingValue
from runners.plan.shard import ShardSpec

__all__ = ["BenchOptions", "ModelSpec", "request_of"]


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """`scripted`, `scripted:<profile>[?seed=N]` or `openai:<model-name>`."""

    kind: str
    """`scripted` or `openai`."""
    name: str
    """Profile (scripted) or model name (openai)."""
    raw: str
    """As given on the command line."""

    @classmethod
    def parse(cls, text: str) -> ModelSpec:
        """Parse a --model value, naming what is wrong."""
        if text == "scripted" or text.startswith("scripted:"):
            profile = text.partition(":")[2] or "reference"
            try:
                profiles.parse_profile(profile)
            except profiles.UnknownProfileError as exc:
                raise BenchInputError(f"--model {text!r}: {exc}") from None
            return cls("scripted", profile, text)
        if text.startswith("openai:") and len(text) > len("openai:"):
            return cls("openai", text.partition(":")[2], text)
        raise BenchInputError(f"--model {text!r}: expected 'scripted', 'scripted:<profile>' or 'openai:<model-name>'")


@dataclass
class BenchOptions:
    """Everything one bench run needs."""

    evalsets: list[str] = field(default_factory=list)
    """Files, folders or family names (empty = all built-in cases)."""
    case_ids: list[str] = field(default_factory=list)
    """Only these case ids (empty = all)."""
    db: Path = DEFAULT_DB
    """DuckDB file."""
    label: str | None = None
    """A label to compare runs by (the gate pairs labels)."""
    epochs: int = 1
    """Repetitions of every case."""
    concurrency: int = 1
    """Case runs in flight."""
    max_in_flight: int | None = None
    """Model requests in flight per endpoint (base URL), over all runs (None = `concurrency`)."""
    config: HarnessConfig = field(default_factory=HarnessConfig)
    """Thresholds and budgets."""
    model_settings: ModelSettings = field(default_factory=ModelSettings)
    """The model under test and how it is asked (model, base URL, tool_choice, ...)."""
    cassettes: Path | None = None
    """Cassette folder (openai models only)."""
    record_mode: str = "none"
    """vcrpy record mode."""
    sweep_id: str | None = None
    """Set when the run is one point of a sweep."""
    resume: str | None = None
    """Bench run id to finish."""
    resume_overrides: dict[str, SettingValue] = field(default_factory=dict)
    """On resume: endpoint settings (base URL, key variable) that replace the stored ones."""
    keep_runs: bool = True
    """Keep every CaseRun in the summary (off for large runs: memory stays flat)."""
    cancellation: CancellationToken = field(default_factory=CancellationToken)
    """Shared by every case run (the CLI's one Ctrl-C/SIGTERM flag, runners/run/interrupts.py): once set, no
    case run starts, the ones in flight are discarded, the bench run ends `interrupted`."""
    shard: ShardSpec | None = None
    """Run only this shard's share of the (case, epoch) work (`--shard I/N`, runners/plan/shard.py)."""
    run_id: str | None = None
    """Name shared by every shard of one run; the bench run id derives from it (`--run-id`)."""
    executor: Executor = Executor.LOCAL
    """Where case runs execute: threads here, or Ray tasks (runners/run/executors.py)."""
    ray_address: str | None = None
    """Address of an existing Ray cluster (None: start a local instance)."""
    transcripts: bool = True
    """Store every case run's conversation in `messages` (`--no-transcripts` turns it off)."""
    agent: AgentFramework = AgentFramework.NATIVE
    """The agent loop each case run goes through (`--agent`: native, or an agent framework's adapter)."""
    more_options: dict[str, Any] = field(default_factory=dict)
    """Declared run options without a field of their own (runners/plan/run_options.py), by name."""

    @property
    def settings(self) -> RunSettings:
        """Every setting of the run."""
        return RunSettings.of(self.config, self.model_settings)


def request_of(opts: BenchOptions) -> RunRequest:
    """What `opts` asks for, as the flag rules see it (a resume's stored run was checked when it was planned;
    record mode `none` is the default, not a flag given)."""
    ms = opts.model_settings
    return RunRequest(
        model=ms.model, base_url=ms.base_url, api_key_env=ms.api_key_env, epochs=opts.epochs,
        concurrency=opts.concurrency, cassettes=opts.cassettes,
        record_mode=None if opts.record_mode == "none" else opts.record_mode,
        shard=opts.shard, run_id=opts.run_id, executor=opts.executor, ray_address=opts.ray_address,
        resume=opts.resume,
    )  # fmt: skip
