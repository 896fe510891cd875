"""A stored run read back as plan inputs, and a plan written out as the command that reproduces it.

A bench run stores its settings and run options in its `bench_runs` row; a sweep stores what its points share in
`sweeps.options_json`. Both forms (and the forms written before schema v3: `config_json` + `model` + `base_url`
columns, or `model` + `base_url` keys) are read here, by one function, into the `BenchOptions` a resume is planned
from: every stored setting and every option the run keeps (a `Stored` field, runners/plan/flags.py) restored, the
endpoint settings given with `--resume` (base URL, key variable) over the stored ones, and the other options (where
and how this invocation executes: database, concurrency, executor) taken from the options given. The other
direction, `run_argv`, turns options into the `harness-bench run` arguments that reproduce them (the re-record
command and `show`'s command that runs a case again with its transcript, `rerun_argv`, are built from it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from runners.plan import shard
from runners.plan.flags import Declared, FlagModel, Kind
from runners.plan.options import BenchOptions
from runners.plan.rules import BenchInputError
from runners.plan.settings import (
    RunSettings,
    SettingsError,
    SettingValue,
    declaration,
    legacy_settings,
    reproduce_flags,
)

__all__ = [
    "StoredRuns",
    "StoredBenchRun",
    "StoredForm",
    "StoredSweep",
    "endpoint_overrides",
    "read_bench_run",
    "read_sweep",
    "restore_options",
    "rerun_argv",
    "run_argv",
    "saved_sweep_options",
]


class StoredForm(StrEnum):
    """Where a run's plan inputs are stored."""

    BENCH_RUN = "bench run"
    """A `bench_runs` row (columns)."""
    SWEEP = "sweep"
    """A sweep's `options_json` (what every point shares)."""


def endpoint_overrides(overrides: Mapping[str, SettingValue], what: str) -> dict[str, SettingValue]:
    """`overrides` if they are all endpoint settings (where the model is reached, not what is measured)."""
    decl = declaration()
    bad = [n for n in overrides if n not in decl.names() or not decl[n].endpoint]
    if bad:
        raise BenchInputError(f"{what} restores every stored setting; only endpoint settings may change, not {bad}")
    return dict(overrides)


def _stored_settings(stored: Mapping[str, Any], form: StoredForm) -> RunSettings:
    if form is StoredForm.BENCH_RUN:
        if stored.get("settings_json"):
            return RunSettings.from_json(stored["settings_json"])
        # written before schema v3 (a read-only look before the writer migrates it)
        return legacy_settings(stored.get("config_json"), stored.get("model"), stored.get("base_url"))
    if "settings" in stored:
        return RunSettings.from_values(stored["settings"])
    return RunSettings.from_values({"model": stored.get("model"), "base_url": stored.get("base_url")})  # pre-v3


def restore_options(stored: Mapping[str, Any], form: StoredForm, given: BenchOptions, what: str) -> BenchOptions:
    """The options of a stored run (`stored`: a `bench_runs` row by column, or a sweep's saved options by key):
    every setting and every option the run keeps restored, the endpoint settings of `given.resume` over the stored
    ones, and the other options (where and how this invocation executes) `given`'s. `what` names the run in errors
    (`--resume ID`)."""
    overrides = given.resume.overrides if given.resume is not None else {}
    try:
        restored = _stored_settings(stored, form)
        restored = restored.with_values(endpoint_overrides(overrides, what))
    except (SettingsError, ValueError) as exc:
        raise BenchInputError(f"{what}: its stored settings are unusable ({exc})") from None
    try:
        groups = {name: _restored(concern, getattr(given, name), stored, columns=form is StoredForm.BENCH_RUN)
                  for name, concern in BenchOptions.concerns().items()}  # fmt: skip
    except ValueError as exc:
        raise BenchInputError(f"{what}: its stored options are unusable ({exc})") from None
    return BenchOptions().replaced(settings=restored, resume=given.resume, **{
        k: v for group in groups.values() for k, v in group.items()
    })  # fmt: skip


def _restored(
    concern: type[FlagModel], given: FlagModel, stored: Mapping[str, Any], *, columns: bool
) -> dict[str, Any]:
    """One concern of a stored run: the options it keeps restored, the others `given`'s."""
    invocation = {d.name: getattr(given, d.name) for d in concern.declared() if d.stored is None}
    return invocation | concern.restored(stored, columns=columns)


@dataclass(frozen=True, slots=True)
class StoredBenchRun:
    """A stored `bench_runs` row as a resume reads it (read by runners/store/runs.py), and the shards its file holds
    of it."""

    bench_run_id: str
    """Its id."""
    status: str
    """running | completed | interrupted | failed."""
    sweep_id: str | None
    """The sweep it is a point of, if any."""
    columns: Mapping[str, object]
    """Every column of the row by name (its settings and run options are columns, declared in this package)."""
    shards: tuple[shard.ShardSpec, ...]
    """The shards of it this file holds (`shards` rows), by index; none: unsharded."""


@dataclass(frozen=True, slots=True)
class StoredSweep:
    """A stored `sweeps` row as a resume reads it (read by runners/store/runs.py)."""

    sweep_id: str
    """Its id."""
    grid_json: str | None
    """The grid axes as JSON."""
    options_json: str | None
    """What every point shares, as JSON (`saved_sweep_options`)."""
    status: str
    """running | completed | interrupted | failed."""


class StoredRuns(Protocol):
    """What planning reads back from a metrics file, read only. The store implements it
    (`runners.store.resume.STORED_RUNS`) and the caller hands it in: the plan receives values and imports nothing
    of the store."""

    def check_file(self, db: Path, *, must_exist: bool) -> None:
        """Refuse, without opening it, a path that is not a DuckDB database (a missing one unless `must_exist`)."""
        ...

    def bench_run(self, db: Path, bench_run_id: str) -> StoredBenchRun | None:
        """The bench run stored in `db` under `bench_run_id`, or None."""
        ...

    def sweep(self, db: Path, sweep_id: str) -> StoredSweep | None:
        """The sweep stored in `db` under `sweep_id`, or None."""
        ...

    def taken(self, db: Path, table: str, ids: Sequence[str]) -> dict[str, str]:
        """The ids of `ids` already in `table` (`bench_runs` or `sweeps`) of `db`, to the status of each."""
        ...


def read_bench_run(bench_run_id: str, stored: StoredBenchRun | None, given: BenchOptions) -> BenchOptions:
    """The options of the stored bench run `bench_run_id` (`stored`: what the file holds of it, None: nothing), to
    resume it with `given`'s invocation options; a missing or completed bench run is an input error. Its shard comes
    from the shard rows (a shard's bench run keeps it in the `shards` table)."""
    what = f"--resume {bench_run_id}"
    if stored is None:
        raise BenchInputError(f"{what}: no such bench run in {given.storage.db}")
    if stored.status == "completed":
        raise BenchInputError(f"{what}: that bench run is already completed")
    options = restore_options(stored.columns, StoredForm.BENCH_RUN, given, what)
    return options.replaced(shard=shard.stored_shard(bench_run_id, stored.shards))


def read_sweep(
    sweep_id: str, stored: StoredSweep | None, given: BenchOptions
) -> tuple[dict[str, tuple[SettingValue, ...]], BenchOptions]:
    """The grid axes and the shared options of the stored sweep `sweep_id` (`stored`: what the file holds of it,
    None: nothing); a missing or completed sweep is an input error."""
    what = f"--resume {sweep_id}"
    if stored is None:
        raise BenchInputError(f"{what}: no such sweep in {given.storage.db}")
    if stored.status == "completed":  # like `run --resume` of a completed bench run: nothing to do, nothing rewritten
        raise BenchInputError(f"{what}: that sweep is already completed")
    try:
        axes = {str(k): tuple(v) for k, v in _json(stored.grid_json).items()}
        saved = _json(stored.options_json)
    except (ValueError, AttributeError, TypeError) as exc:
        raise BenchInputError(f"{what}: its stored grid or options are unusable ({exc})") from None
    return axes, restore_options(saved, StoredForm.SWEEP, given, what)


def _json(text: str | None) -> Any:
    """A stored JSON column; a NULL one fails as `json.loads(None)` does (the message a damaged row has always had)."""
    if text is None:
        raise TypeError("the JSON object must be str, bytes or bytearray, not NoneType")
    return json.loads(text)


def saved_sweep_options(base: BenchOptions) -> str:
    """What every point of a sweep shares, as stored in `sweeps.options_json` (read back by `read_sweep`)."""
    return json.dumps({**base.saved_values(), "settings": base.settings.stored_values()})


def _option_argv(d: Declared, value: object, command: str) -> list[str]:
    """The arguments that give option `d` the value `value` in `harness-bench COMMAND` (none for its default)."""
    if value is None or value == d.default_in(command):
        return []
    if d.kind is Kind.SWITCH:
        return [d.flag]
    if d.kind is Kind.LIST and isinstance(value, tuple | list):
        return [a for v in value for a in (d.flag, str(v))]
    return [d.flag, str(d.encode(value))]


def run_argv(
    opts: BenchOptions,
    *,
    always: Iterable[str] = (),
    skip: Iterable[str] = (),
    skip_options: Iterable[str] = (),
    command: str = "run",
) -> list[str]:
    """The `harness-bench run` (`command`) arguments that reproduce `opts`: the case selection, every setting that
    differs from its default (plus the settings named in `always`, minus `skip`), then every other option the run
    keeps that differs from its default in that command (minus `skip_options`), in declaration order. Where and how
    it executes (database, concurrency, executor) is not part of it."""
    dropped = set(skip_options)
    kept = [(name, d) for name, concern in BenchOptions.concerns().items() for d in concern.declared()
            if d.stored is not None and d.name not in dropped]  # fmt: skip
    argv = ["harness-bench", command]
    for name, d in kept:
        if name == "selection" and d.kind is Kind.LIST:
            argv += _option_argv(d, getattr(getattr(opts, name), d.name), command)
    argv += reproduce_flags(opts.settings, always=always, skip=skip)
    for name, d in kept:
        if not (name == "selection" and d.kind is Kind.LIST):
            argv += _option_argv(d, getattr(getattr(opts, name), d.name), command)
    return argv


def rerun_argv(stored: Mapping[str, Any], db: str, case_id: str, epoch: int) -> list[str] | None:
    """The `harness-bench run` arguments that run one case of the stored bench run `stored` (its `bench_runs`
    row) again into `db` with its transcript stored: its evaluation files, model, label, every other setting and
    run option, the case up to `epoch`; None when the row is too old or damaged to say (the caller falls back to
    naming the case). Where it executed (shard, run id) is not part of it."""
    try:
        opts = restore_options(stored, StoredForm.BENCH_RUN, BenchOptions.of(db=Path(db)), "show")
    except BenchInputError:
        return None
    again = opts.replaced(case_ids=(case_id,), epochs=max(1, epoch), transcripts=True, shard=None, run_id=None)
    return [*run_argv(again, always=("model",)), "--db", db]
