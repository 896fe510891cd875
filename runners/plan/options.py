"""The options of one bench run, by concern: which work it holds (`Selection`), where its results go (`Storage`),
where and how its case runs execute (`Execution`), whether the model's HTTP is recorded or replayed (`Replay`), and
what it measures (`RunSettings`, runners/plan/settings.py). Each option is one field of its concern's model (a
`FlagModel`, runners/plan/flags.py): its flag, type, bounds, default, help and, for the ones a run keeps, its stored
column all come from that field. `BenchOptions` holds the concerns, and `--resume`'s request when there is one.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Annotated, ClassVar, cast

from pydantic import BeforeValidator, Field, PlainSerializer

from harness import HarnessConfig
from runners.plan import declarations
from runners.plan.agent import AgentFramework
from runners.plan.executor import Executor
from runners.plan.flags import Flag, FlagError, FlagModel, Stored, StoredValue
from runners.plan.labels import label_arg
from runners.plan.settings import (
    ModelSettings,
    RunSettings,
    SettingValue,
    bench_run_columns,
    case_run_columns,
    declaration,
    swept_names,
)
from runners.plan.shard import ShardError, ShardSpec, check_run_id

__all__ = [
    "DEFAULT_DB",
    "MAX_CONCURRENCY",
    "MAX_EPOCHS",
    "SWEEP_EPOCHS",
    "BenchOptions",
    "DeclaredColumns",
    "Execution",
    "RecordMode",
    "Replay",
    "ResumeFlag",
    "ResumeRequest",
    "Selection",
    "Storage",
    "declared_columns",
]

DEFAULT_DB = Path("bench.duckdb")
"""The metrics database every command reads or writes unless `--db` names another."""
SWEEP_EPOCHS = 3
"""The epochs of `harness-bench sweep` unless `--epochs` is given (a grid point's pass rate over one epoch is
noise); `run`'s are `Selection.epochs`' default."""
MAX_EPOCHS = 10_000
"""Upper bound of `--epochs`."""
MAX_CONCURRENCY = 1_024
"""Upper bound of `--concurrency` and `--max-in-flight`."""

BENCH = "bench"
"""The `--help` group of where a run is stored and how much of it runs."""
CASSETTES = "cassettes"
"""The `--help` group of recording and replaying."""
EXECUTION = "execution (never part of a run's settings)"
"""The `--help` group of where and how the work runs: none of it changes what a run measures."""


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


# -- argparse types of the options whose text needs a parser of its own ----------------------------------------------
def _shard_flag(text: str) -> ShardSpec:
    try:
        return ShardSpec.parse(text)
    except ShardError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--shard").strip()) from None


def _run_id_flag(text: str) -> str:
    try:
        return check_run_id(text)
    except ShardError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--run-id").strip()) from None


def _shard_value(value: object) -> object:
    """A shard as stored (`I/N`) or given."""
    return ShardSpec.parse(value) if isinstance(value, str) else value


def _path_text(value: Path | None) -> str | None:
    return str(value) if value is not None else None


# -- the concerns ----------------------------------------------------------------------------------------------------
class Selection(FlagModel):
    """Which work a run holds: the evaluation cases, and how many times each runs."""

    evalsets: Annotated[
        tuple[str, ...],
        Flag("--evalset", metavar="PATH|FAMILY",
             help="evaluation file, folder or family name (repeatable; default: every built-in case)"),
        Stored(column="evalset_specs", json=True),
    ] = ()  # fmt: skip
    """Files, folders or family names (empty: every built-in case)."""
    case_ids: Annotated[
        tuple[str, ...],
        Flag("--case", metavar="ID", help="only this case id (repeatable)"),
        Stored(column="case_ids_json", json=True),
    ] = ()
    """Only these case ids (empty: all)."""
    epochs: Annotated[
        int,
        Flag(metavar="K", group=BENCH, command_defaults=(("sweep", SWEEP_EPOCHS),),
             help="repeat every case K times (default {default})"),
        Stored(sql_type="INTEGER"),
    ] = Field(default=1, ge=1, le=MAX_EPOCHS)  # fmt: skip
    """Repetitions of every case."""


class Storage(FlagModel):
    """Where a run's results go, and the names it is stored and compared under."""

    db: Annotated[Path, Flag(group=BENCH, help="DuckDB file (default {default})")] = DEFAULT_DB
    """The DuckDB file."""
    label: Annotated[
        str | None,
        Flag(group=BENCH, parse=label_arg,
             help="label stored with every case run (the gate pairs labels): 1-200 letters, digits, spaces or"
                  " ._-:/+@="),
        Stored(),
    ] = None  # fmt: skip
    """A label to compare runs by (the gate pairs labels)."""
    transcripts: Annotated[
        bool,
        Flag("--no-transcripts", group=BENCH,
             help="do not store each case run's conversation (the `messages` table that `show`, `diff` and `export"
                  " --inspect` read); for very large sweeps"),
        Stored(sql_type="BOOLEAN", decode=lambda v: v is not False),
    ] = True  # fmt: skip
    """Store every case run's conversation in `messages`."""
    run_id: Annotated[
        str | None,
        Flag(group=EXECUTION, parse=_run_id_flag, metavar="NAME",
             help=lambda command: f"name the {command}: its id becomes"
                                  f" {'sw-NAME' if command == 'sweep' else 'br-NAME'} on every machine (required with"
                                  " --shard; e.g. the CI run number)"),
        Stored(in_column=False),  # the bench run id derives from it
    ] = None  # fmt: skip
    """Name shared by every shard of one run; the bench run id derives from it."""


class Execution(FlagModel):
    """Where and how a run's case runs execute: threads here, worker processes or Ray tasks, how many at once, which
    shard of the work, through which agent loop."""

    concurrency: Annotated[int, Flag(metavar="N", group=BENCH, help="case runs in flight (default {default})")] = Field(
        default=1, ge=1, le=MAX_CONCURRENCY
    )
    """Case runs in flight."""
    max_in_flight: Annotated[
        int | None,
        Flag(metavar="N", group=BENCH,
             help="model requests in flight per endpoint over all runs (default: --concurrency)"),
    ] = Field(default=None, ge=1, le=MAX_CONCURRENCY)  # fmt: skip
    """Model requests in flight per endpoint (base URL), over all runs (None: `concurrency`)."""
    agent: Annotated[
        AgentFramework,
        # stored with the run and restored by --resume: listed beside the run options, not the execution flags
        Flag(group=BENCH,
             help="the agent loop each case run goes through: native (run_diagnosis, default), pydantic-ai or"
                  " openai-agents (that framework's agent over the case's model, the Harness through its adapter;"
                  " needs the `adapters` extra, which make venv installs), or plain (no Harness: plain tools, the"
                  " same budgets, no envelope, no information-gain contract, the answer published unguarded; to"
                  " measure what the protocol costs and buys)"),
        Stored(decode=lambda v: AgentFramework(v or AgentFramework.NATIVE.value)),
    ] = AgentFramework.NATIVE  # fmt: skip
    """The agent loop each case run goes through (native, an agent framework's adapter, or the plain loop)."""
    shard: Annotated[
        ShardSpec | None,
        BeforeValidator(_shard_value),
        PlainSerializer(lambda v: str(v) if v is not None else None),
        Flag(metavar="I/N", group=EXECUTION, parse=_shard_flag,
             help=lambda command: "run only shard I of N (1-based) of the (grid point, case, epoch) work into --db;"
                                  f" every shard of one {command} takes the same flags and --run-id;"
                                  " `harness-bench merge` joins the files"),
        # a shard's bench run keeps its shard in the `shards` table (runners/plan/shard.py), not in a column
        Stored(in_column=False, encode=lambda v: str(v) if v is not None else None,
               decode=lambda v: ShardSpec.parse(v) if isinstance(v, str) and v else None),
    ] = None  # fmt: skip
    """Run only this shard's share of the (case, epoch) work (`--shard I/N`, runners/plan/shard.py)."""
    executor: Annotated[
        Executor,
        Flag(group=EXECUTION,
             help="local: --concurrency threads in this process (default); processes: one worker process per CPU"
                  " sharing the --concurrency threads (past one process's GIL); ray: Ray tasks; finished case runs"
                  " stream back to this process's DuckDB writer (ray needs pip install 'harness-bench[ray]')"),
    ] = Executor.LOCAL  # fmt: skip
    """Where case runs execute: threads here, worker processes, or Ray tasks (runners/run/executors.py)."""
    ray_address: Annotated[
        str | None,
        Flag(metavar="ADDRESS", group=EXECUTION,
             help="with --executor ray: an existing cluster (e.g. ray://head:10001 or auto); default: start a local"
                  " instance"),
    ] = None  # fmt: skip
    """Address of an existing Ray cluster (None: start a local instance)."""


class Replay(FlagModel):
    """Whether the model's HTTP is recorded to or replayed from vcrpy cassettes (an openai:<model-name> only)."""

    cassettes: Annotated[
        Path | None,
        Flag(metavar="DIR", group=CASSETTES,
             help="record/replay the model's HTTP with vcrpy (openai:<model-name> only)"),
        Stored(encode=_path_text, decode=lambda v: Path(v) if isinstance(v, str) and v else None),
    ] = None  # fmt: skip
    """Cassette folder (openai models only)."""
    record_mode: Annotated[
        RecordMode | None,
        Flag(group=CASSETTES,
             help="vcrpy record mode with --cassettes (default none: replay only, no network; all: re-record,"
                  " replacing stale episodes)"),
        # `none` is the default: stored and saved as such, restored as not given
        Stored(encode=lambda v: RecordMode(v or RecordMode.NONE).value,
               decode=lambda v: None if v in (None, RecordMode.NONE) else RecordMode(str(v))),
    ] = None  # fmt: skip
    """vcrpy record mode with `cassettes` (None: not given, a replay as `none`; the flag rules refuse a mode given
    without cassettes). Read it as `mode`."""

    @property
    def mode(self) -> RecordMode:
        """The record mode that applies (`none` unless one is given)."""
        return self.record_mode or RecordMode.NONE

    @property
    def replays(self) -> bool:
        """Cassettes in replay-only mode: no request reaches the network, so no key or preflight is needed."""
        return self.cassettes is not None and self.mode is RecordMode.NONE

    def column_values(self) -> dict[str, StoredValue]:
        """A record mode is stored only with cassettes (a run without them records nothing)."""
        values = super().column_values()
        if self.cassettes is None:
            values["record_mode"] = None
        return values


class ResumeFlag(FlagModel):
    """`--resume ID` of `run` and `sweep`."""

    resume: Annotated[
        str | None,
        Flag(group=BENCH, metavar=lambda command: "SWEEP_ID" if command == "sweep" else "BENCH_RUN_ID",
             help=lambda command: "finish an interrupted " + ("sweep" if command == "sweep" else "bench run")
                                  + " with its stored settings (only --db, --concurrency, --executor, --ray-address,"
                                  " --base-url and --api-key-env may be given with it)"),
    ] = None  # fmt: skip
    """The bench run (or sweep) to finish."""


@dataclass(frozen=True, slots=True)
class ResumeRequest:
    """`--resume ID`: finish a stored bench run (or sweep) with what it stored; only where and how it executes, and
    where the model is reached, come from this invocation."""

    run_id: str
    """The bench run (or sweep) id."""
    overrides: Mapping[str, SettingValue] = field(default_factory=dict)
    """Endpoint settings given (base URL, key variable), by public name: they replace the stored ones."""
    refused: tuple[str, ...] = ()
    """The flags given that a resume would ignore (the rules refuse them)."""


# -- the options of one run ------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class BenchOptions:
    """Everything one bench run needs, by concern."""

    selection: Selection = field(default_factory=Selection)
    """Which cases, how many epochs."""
    settings: RunSettings = field(default_factory=RunSettings.of)
    """What the run measures: thresholds, budgets, the model and how it is asked."""
    storage: Storage = field(default_factory=Storage)
    """The database, the label, transcripts, the run's name."""
    execution: Execution = field(default_factory=Execution)
    """Concurrency, executor, shard, agent loop."""
    replay: Replay = field(default_factory=Replay)
    """Cassettes and record mode."""
    resume: ResumeRequest | None = None
    """The stored run to finish, when resuming (the rest is then the stored run's)."""

    CONCERNS: ClassVar[dict[str, type[FlagModel]]] = {
        "selection": Selection, "storage": Storage, "execution": Execution, "replay": Replay,
    }  # fmt: skip
    """The option models by the field that holds each, in the order their flags are listed (`concerns()`: with the
    ones the `Declarations` in effect give instead)."""

    @classmethod
    def concerns(cls) -> dict[str, type[FlagModel]]:
        """The option models in effect by the field that holds each: `CONCERNS`, with those the `Declarations` in
        effect (runners/plan/declarations.py) put in their place."""
        return {**cls.CONCERNS, **declarations.current().concerns}

    @classmethod
    def of(cls, **values: object) -> BenchOptions:
        """Options from values by name — an option's field name (`case_ids`, `epochs`, `db`, ...), a setting's public
        name (`model`, `no_gain_threshold`, ...), `settings` (a `RunSettings` the named settings go over, or its two
        models `config` and `model_settings`) and `resume` (a run id) — each in its concern, the rest their
        defaults. A value refused is one line naming the flag (`FlagError`, `SettingsError`)."""
        return cls().replaced(**values)

    def replaced(self, **values: object) -> BenchOptions:
        """These options with the values by name changed (the names of `of`)."""
        values = dict(values)
        resume = values.pop("resume", self.resume)
        base = values.pop("settings", self.settings)
        if not isinstance(base, RunSettings):
            raise FlagError(f"settings: expected RunSettings, not {type(base).__name__}")
        config, model_settings = values.pop("config", None), values.pop("model_settings", None)
        if config is not None or model_settings is not None:  # the two models a RunSettings is made of
            if not isinstance(config, HarnessConfig | None) or not isinstance(model_settings, ModelSettings | None):
                raise FlagError("config and model_settings: expected a HarnessConfig and a ModelSettings")
            base = RunSettings.of(config or base.config, model_settings or base.model_settings)
        owners = _owners()
        names = set(declaration().names())
        unknown = sorted(k for k in values if k not in owners and k not in names)
        if unknown:
            known = sorted(set(owners) | names)
            raise FlagError(f"unknown option(s) {', '.join(unknown)}; known: {', '.join(known)}")
        groups: dict[str, FlagModel] = {}
        for attribute, concern in self.concerns().items():
            mine = {k: v for k, v in values.items() if owners.get(k) is concern}
            current: FlagModel = getattr(self, attribute)
            changed = mine or type(current) is not concern
            groups[attribute] = concern.checked(dict(current) | mine) if changed else current
        settings = base.with_values(cast("dict[str, SettingValue]", {k: v for k, v in values.items() if k in names}))
        if resume is not None and not isinstance(resume, ResumeRequest):
            resume = ResumeRequest(str(resume))
        return BenchOptions.of_concerns(groups, settings, resume)

    @classmethod
    def of_concerns(
        cls, concerns: Mapping[str, FlagModel], settings: RunSettings, resume: ResumeRequest | None = None
    ) -> BenchOptions:
        """Options of one model per concern, by the field that holds it (each as `CONCERNS` declares it)."""
        return BenchOptions(
            selection=cast(Selection, concerns["selection"]), settings=settings,
            storage=cast(Storage, concerns["storage"]), execution=cast(Execution, concerns["execution"]),
            replay=cast(Replay, concerns["replay"]), resume=resume,
        )  # fmt: skip

    def column_values(self) -> dict[str, StoredValue]:
        """`bench_runs` column -> value of every option the run keeps in a column."""
        out: dict[str, StoredValue] = {}
        for attribute in self.concerns():
            out |= getattr(self, attribute).column_values()
        return out

    def saved_values(self) -> dict[str, StoredValue]:
        """Name -> value of every option a sweep saves with its shared options (`sweeps.options_json`)."""
        out: dict[str, StoredValue] = {}
        for attribute in self.concerns():
            out |= getattr(self, attribute).stored_values()
        return out

    @classmethod
    def column_types(cls) -> list[tuple[str, str]]:
        """(column, DuckDB type) of every option a run keeps in `bench_runs`."""
        return [(d.column, d.sql_type) for c in cls.concerns().values() for d in c.declared() if d.column]


@dataclass(frozen=True, slots=True)
class DeclaredColumns:
    """What the declared settings and options ask of a writer's database: the columns `connect` adds to a file made
    before one of them was declared (runners/store/migrations.py), and the names the views group by."""

    bench_columns: tuple[tuple[str, str], ...]
    """(column, DuckDB type) of `bench_runs`: every setting and every option a run keeps in a column."""
    case_columns: tuple[tuple[str, str], ...]
    """(column, DuckDB type) of `case_runs`: every sweepable setting."""
    swept: tuple[str, ...]
    """The sweepable settings' names, which the views group by."""


def declared_columns() -> DeclaredColumns:
    """The columns of today's declaration (read at call time: a test may declare one more setting or option)."""
    return DeclaredColumns(tuple(bench_run_columns() + BenchOptions.column_types()), tuple(case_run_columns()),
                           tuple(swept_names()))  # fmt: skip


def _owners() -> dict[str, type[FlagModel]]:
    """Option name -> the concern that declares it."""
    return {d.name: concern for concern in BenchOptions.concerns().values() for d in concern.declared()}
