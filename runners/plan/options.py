"""The options of one bench run: which cases, how many epochs, which model, where it is stored and where it
executes. The settings (what a run measures) are `RunSettings`; everything else a run needs is declared here,
once, with its default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import CancellationToken, HarnessConfig
from runners.plan.agent import AgentFramework
from runners.plan.executor import Executor
from runners.plan.settings import ModelSettings, RunSettings, SettingValue

if TYPE_CHECKING:  # the shard module brings DuckDB: not imported when the command line is only parsed
    from runners.plan.shard import ShardSpec

__all__ = ["DEFAULT_DB", "SWEEP_EPOCHS", "BenchOptions", "RecordMode", "default_of", "default_epochs"]

DEFAULT_DB = Path("bench.duckdb")
"""The metrics database every command reads or writes unless `--db` names another."""
SWEEP_EPOCHS = 3
"""The epochs of `harness-bench sweep` unless `--epochs` is given (a grid point's pass rate over one epoch is
noise); `run`'s are `BenchOptions.epochs`' default."""


class RecordMode(StrEnum):
    """vcrpy's record modes, the values of `--record-mode`."""

    NONE = "none"
    """Replay only: a request not in the cassette fails, nothing reaches the network."""
    ONCE = "once"
    """Record a cassette that does not exist yet, replay one that does."""
    NEW_EPISODES = "new_episodes"
    """Replay what is recorded, record the requests that are not."""
    ALL = "all"
    """Re-record every request, replacing stale episodes."""


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
    record_mode: RecordMode | str | None = None
    """vcrpy record mode with `cassettes`, a `RecordMode` or its text (None: not given, a replay as `none`; the flag
    rules refuse a mode given without cassettes). Read it as `mode`."""
    sweep_id: str | None = None
    """Set when the run is one point of a sweep."""
    resume: str | None = None
    """Bench run id to finish."""
    resume_overrides: dict[str, SettingValue] = field(default_factory=dict)
    """On resume: endpoint settings (base URL, key variable) that replace the stored ones."""
    resume_refused: Mapping[str, object] = field(default_factory=dict)
    """On resume: the flags given that a resume would ignore (flag -> value, None: not given); the flag rules
    refuse them."""
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

    @property
    def mode(self) -> RecordMode:
        """The record mode that applies (`none` unless one is given)."""
        return RecordMode(self.record_mode or RecordMode.NONE)  # RecordMode(): the Python API may pass the text

    @property
    def replays(self) -> bool:
        """Cassettes in replay-only mode: no request reaches the network, so no key or preflight is needed."""
        return self.cassettes is not None and self.mode is RecordMode.NONE


def default_of(name: str) -> Any:
    """The declared default of `BenchOptions` field `name` (a flag's default and its help read it here)."""
    f = BenchOptions.__dataclass_fields__[name]
    return f.default_factory() if callable(f.default_factory) else f.default


def default_epochs(command: str) -> int:
    """The epochs of `command` (`run`, `sweep`, ...) when `--epochs` is not given."""
    return SWEEP_EPOCHS if command == "sweep" else int(default_of("epochs"))
