"""One declaration of the run options a stored run fixes: which cases, label, epochs, cassettes, shard, run id,
transcripts, agent loop. Settings (what a run measures) are declared in runners/plan/settings.py; these are the
rest of what `--resume` restores (runners/plan/stored_plan.py reads both stored forms back).

Each `RunOption` names its `BenchOptions` field, its CLI flag and argparse destination, its key in a sweep's
`options_json` and its `bench_runs` column. From the table come: the flags `--resume` refuses, the options the
CLI builds, the JSON a sweep saves and reads back, the `bench_runs` columns written and restored, and the flags
that reproduce a run (the re-record command). A new run
option is one entry here (plus its `BenchOptions` field and its argparse flag).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runners.plan.agent import AgentFramework

if TYPE_CHECKING:
    from runners.plan.options import BenchOptions

__all__ = [
    "RUN_OPTIONS",
    "RunOption",
    "add_arguments",
    "bench_run_columns",
    "bench_run_values",
    "declared",
    "given_flags",
    "options_from_args",
    "restore_bench_run",
    "restore_saved",
    "saved_values",
]

Stored = Any
"""A value as JSON (a sweep's `options_json`) or a DuckDB column holds it."""


def _same(value: Any) -> Any:
    return value


def _path(value: Path | None) -> str | None:
    return str(value) if value is not None else None


def _to_path(value: str | None) -> Path | None:
    return Path(value) if value else None


def _shard_text(value: Any) -> str | None:
    return str(value) if value is not None else None


def _shard_parse(value: str | None) -> Any:
    from runners.plan.shard import ShardSpec

    return ShardSpec.parse(value) if value else None


@dataclass(frozen=True, slots=True)
class RunOption:
    """One declared run option."""

    name: str
    """The `BenchOptions` field."""
    flag: str
    """The CLI flag (`--resume` refuses it when given)."""
    dest: str
    """The argparse destination."""
    saved_key: str | None
    """Key in a sweep's `options_json` (None: not saved with a sweep)."""
    column: str | None
    """`bench_runs` column (None: not restored from it)."""
    sql_type: str = "VARCHAR"
    """The column's DuckDB type."""
    encode: Callable[[Any], Stored] = _same
    """Field value -> stored value."""
    decode: Callable[[Stored], Any] = _same
    """Stored value (None when absent: written before the option existed) -> field value."""
    column_json: bool = False
    """The column holds the stored value as JSON text."""
    from_arg: Callable[[Any], Any] = _same
    """argparse value -> field value (None: the field's default applies)."""
    not_given: Callable[[Any], bool] = lambda value: value is None
    """The argparse value means the flag was not given."""
    stored_value: Callable[[BenchOptions], Stored] | None = None
    """What the column holds, when not simply the encoded field (e.g. a record mode only with cassettes)."""
    argument: Mapping[str, Any] | None = None
    """`add_argument` keywords (help, metavar, type, ...) when the flag is added from here (None: runners/cli.py
    adds it by hand, with its group and per-command help)."""
    default: Any = None
    """The value when neither given nor stored (options without a `BenchOptions` field of their own)."""
    to_argv: Callable[[Any], list[str]] | None = None
    """Field value -> the CLI arguments that reproduce it (None: `flag value` unless the value is the default,
    once per item for a list; runners/plan/stored_plan.py)."""

    def value(self, opts: BenchOptions) -> Any:
        """The option's value in `opts`."""
        if _has_field(self.name):
            return getattr(opts, self.name)
        return opts.more_options.get(self.name, self.default)

    def column_value(self, opts: BenchOptions) -> Stored:
        """The value written to `bench_runs.<column>`."""
        value = self.stored_value(opts) if self.stored_value else self.encode(self.value(opts))
        return json.dumps(value) if self.column_json and value is not None else value

    def from_column(self, value: Stored) -> Any:
        """The field value restored from the column."""
        return self.decode(json.loads(value) if self.column_json and value is not None else value)


RUN_OPTIONS: tuple[RunOption, ...] = (
    RunOption("evalsets", "--evalset", "evalset", "evalsets", "evalset_specs", column_json=True,
              decode=lambda v: list(v or []), from_arg=lambda v: list(v or [])),
    RunOption("case_ids", "--case", "case", "case_ids", "case_ids_json", column_json=True,
              decode=lambda v: list(v or []), from_arg=lambda v: list(v or [])),
    RunOption("label", "--label", "label", "label", "label"),
    RunOption("epochs", "--epochs", "epochs", "epochs", "epochs", sql_type="INTEGER"),
    RunOption("cassettes", "--cassettes", "cassettes", "cassettes", "cassettes", encode=_path, decode=_to_path),
    RunOption("record_mode", "--record-mode", "record_mode", "record_mode", "record_mode",
              decode=lambda v: v or "none", from_arg=lambda v: v or "none",
              stored_value=lambda o: o.record_mode if o.cassettes else None),
    # a shard's bench run keeps its shard in bench_run_shards (runners/plan/shard.py), not in a column
    RunOption("shard", "--shard", "shard", "shard", None, encode=_shard_text, decode=_shard_parse),
    RunOption("run_id", "--run-id", "run_id", "run_id", None),
    RunOption("transcripts", "--no-transcripts", "transcripts", "transcripts", "transcripts", sql_type="BOOLEAN",
              decode=lambda v: v is not False, not_given=lambda v: v is not False,
              to_argv=lambda v: [] if v else ["--no-transcripts"]),
    RunOption("agent", "--agent", "agent", "agent", "agent",
              encode=lambda v: AgentFramework(v).value,
              decode=lambda v: AgentFramework(v or AgentFramework.NATIVE.value),
              from_arg=lambda v: AgentFramework(v or AgentFramework.NATIVE.value),
              not_given=lambda v: v in (None, AgentFramework.NATIVE.value)),
)  # fmt: skip
"""Every run option a stored run fixes."""


def declared() -> tuple[RunOption, ...]:
    """The declared run options (read at call time: a test may declare one more)."""
    return RUN_OPTIONS


def _has_field(name: str) -> bool:
    from runners.plan.options import BenchOptions

    return name in {f.name for f in fields(BenchOptions)}


def _as_fields(values: dict[str, Any]) -> dict[str, Any]:
    """`BenchOptions` keywords: options without a field of their own go into `more_options`."""
    more = {k: values.pop(k) for k in list(values) if not _has_field(k)}
    return values | {"more_options": more} if more else values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of the run options declared with `argument` keywords."""
    declared_here = [o for o in declared() if o.argument is not None]
    if declared_here:
        group = parser.add_argument_group("run options")
        for o in declared_here:
            group.add_argument(o.flag, dest=o.dest, default=None, **dict(o.argument or {}))


def given_flags(args: Any) -> dict[str, object]:
    """Each run option's flag -> its argparse value, None where not given (what `--resume` refuses)."""
    return {o.flag: None if o.not_given(getattr(args, o.dest, None)) else getattr(args, o.dest) for o in declared()}


def options_from_args(args: Any, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The `BenchOptions` fields given by the run-option flags (`defaults`: per command, e.g. sweep's epochs)."""
    out: dict[str, Any] = {}
    for o in declared():
        value = o.from_arg(getattr(args, o.dest, None))
        if value is None:
            value = defaults.get(o.name)
        if value is not None:
            out[o.name] = value
    return _as_fields(out)


def saved_values(opts: BenchOptions) -> dict[str, Stored]:
    """What a sweep saves of its shared run options (`sweeps.options_json`)."""
    return {o.saved_key: o.encode(o.value(opts)) for o in declared() if o.saved_key}


def restore_saved(saved: Mapping[str, Stored]) -> dict[str, Any]:
    """The `BenchOptions` fields of a sweep's saved options (absent keys: the option's old default)."""
    return _as_fields({o.name: o.decode(saved.get(o.saved_key)) for o in declared() if o.saved_key})


def bench_run_values(opts: BenchOptions) -> dict[str, Stored]:
    """Column -> value for every run option stored in `bench_runs`."""
    return {o.column: o.column_value(opts) for o in declared() if o.column}


def restore_bench_run(stored: Mapping[str, Stored]) -> dict[str, Any]:
    """The `BenchOptions` fields of a stored bench run row (absent columns: the option's old default)."""
    return _as_fields({o.name: o.from_column(stored.get(o.column)) for o in declared() if o.column})


def bench_run_columns() -> list[tuple[str, str]]:
    """(column, DuckDB type) of every run option stored in `bench_runs`."""
    return [(o.column, o.sql_type) for o in declared() if o.column]
