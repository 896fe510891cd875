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
import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runners.plan.agent import AgentFramework
from runners.plan.flags import bounded_int
from runners.plan.options import RecordMode, default_epochs
from runners.plan.rules import MAX_EPOCHS, RECORD_MODES

if TYPE_CHECKING:
    from runners.plan.options import BenchOptions

__all__ = [
    "LABEL_PATTERN",
    "RUN_OPTIONS",
    "RunOption",
    "add_argument",
    "add_arguments",
    "bench_run_columns",
    "bench_run_values",
    "declared",
    "given_flags",
    "label_arg",
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


LABEL_PATTERN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9 ._:/+@=-]{0,198}[A-Za-z0-9._:/+@=-])?")
"""A label: an allowlist like the run id's (it is shown in terminals, Markdown headings, HTML and JUnit names, and
quoted into printed commands), plus spaces inside and the `:/+@=` of model names and settings; 1-200 characters."""


def label_arg(text: str) -> str:
    """The argparse type of every flag that names a label (`--label`, the gate's `--baseline`/`--candidate`)."""
    if not LABEL_PATTERN.fullmatch(text):
        shown = repr(text) if len(text) <= 60 else f"{text[:60]!r}… ({len(text)} characters)"
        raise argparse.ArgumentTypeError(
            f"{shown}: a label is 1-200 letters, digits, spaces or '._-:/+@=', starting with a letter or digit and"
            " not ending with a space"
        )
    return text


_epochs = bounded_int(1, MAX_EPOCHS)


def _shard_flag(text: str) -> Any:
    from runners.plan.shard import ShardError, ShardSpec

    try:
        return ShardSpec.parse(text)
    except ShardError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--shard").strip()) from None


def _run_id_flag(text: str) -> str:
    from runners.plan.shard import ShardError, check_run_id

    try:
        return check_run_id(text)
    except ShardError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--run-id").strip()) from None


Argument = Mapping[str, Any] | Callable[[str], Mapping[str, Any]]
"""`add_argument` keywords of a run option's flag, or a function of the command (`run`, `sweep`, `cases`, ...)
giving them (a help text that names the command, a default that differs per command)."""


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
    argument: Argument | None = None
    """The flag's `add_argument` keywords: type (its bounds), metavar, help, ... (None: the option has no flag)."""
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

    def flag_keywords(self, command: str) -> dict[str, Any]:
        """The `add_argument` keywords of the flag in `command` (dest and default included)."""
        given = self.argument(command) if callable(self.argument) else dict(self.argument or {})
        return {"dest": self.dest, "default": None, **given}

    def column_value(self, opts: BenchOptions) -> Stored:
        """The value written to `bench_runs.<column>`."""
        value = self.stored_value(opts) if self.stored_value else self.encode(self.value(opts))
        return json.dumps(value) if self.column_json and value is not None else value

    def from_column(self, value: Stored) -> Any:
        """The field value restored from the column."""
        return self.decode(json.loads(value) if self.column_json and value is not None else value)


RUN_OPTIONS: tuple[RunOption, ...] = (
    RunOption("evalsets", "--evalset", "evalset", "evalsets", "evalset_specs", column_json=True,
              decode=lambda v: list(v or []), from_arg=lambda v: list(v or []),
              argument={"action": "append", "metavar": "PATH|FAMILY",
                        "help": "evaluation file, folder or family name (repeatable; default: every built-in case)"}),
    RunOption("case_ids", "--case", "case", "case_ids", "case_ids_json", column_json=True,
              decode=lambda v: list(v or []), from_arg=lambda v: list(v or []),
              argument={"action": "append", "metavar": "ID", "help": "only this case id (repeatable)"}),
    RunOption("label", "--label", "label", "label", "label",
              argument={"type": label_arg, "help": "label stored with every case run (the gate pairs labels): 1-200"
                                                   " letters, digits, spaces or ._-:/+@="}),
    RunOption("epochs", "--epochs", "epochs", "epochs", "epochs", sql_type="INTEGER",
              argument=lambda command: {
                  "type": _epochs, "metavar": "K",
                  "help": f"repeat every case K times (default {default_epochs(command)})"}),
    RunOption("cassettes", "--cassettes", "cassettes", "cassettes", "cassettes", encode=_path, decode=_to_path,
              argument={"type": Path, "metavar": "DIR",
                        "help": "record/replay the model's HTTP with vcrpy (openai:<model-name> only)"}),
    RunOption("record_mode", "--record-mode", "record_mode", "record_mode", "record_mode",
              # `none` is the default: stored and saved as such, restored as not given
              encode=lambda v: RecordMode(v or RecordMode.NONE).value,
              decode=lambda v: None if v in (None, RecordMode.NONE) else RecordMode(v),
              from_arg=lambda v: None if v is None else RecordMode(v),
              stored_value=lambda o: o.mode.value if o.cassettes else None,
              argument={"choices": RECORD_MODES,
                        "help": "vcrpy record mode with --cassettes (default none: replay only, no network; all:"
                                " re-record, replacing stale episodes)"}),
    # a shard's bench run keeps its shard in bench_run_shards (runners/plan/shard.py), not in a column
    RunOption("shard", "--shard", "shard", "shard", None, encode=_shard_text, decode=_shard_parse,
              argument=lambda command: {
                  "type": _shard_flag, "metavar": "I/N",
                  "help": "run only shard I of N (1-based) of the (grid point, case, epoch) work into --db; every"
                          f" shard of one {command} takes the same flags and --run-id; `harness-bench merge` joins"
                          " the files"}),
    RunOption("run_id", "--run-id", "run_id", "run_id", None,
              argument=lambda command: {
                  "type": _run_id_flag, "metavar": "NAME",
                  "help": f"name the {command}: its id becomes {'sw-NAME' if command == 'sweep' else 'br-NAME'} on"
                          " every machine (required with --shard; e.g. the CI run number)"}),
    RunOption("transcripts", "--no-transcripts", "transcripts", "transcripts", "transcripts", sql_type="BOOLEAN",
              decode=lambda v: v is not False, not_given=lambda v: v is not False,
              to_argv=lambda v: [] if v else ["--no-transcripts"],
              argument={"action": "store_false", "default": True,
                        "help": "do not store each case run's conversation (the `messages` table that `show`,"
                                " `diff` and `export --inspect` read); for very large sweeps"}),
    RunOption("agent", "--agent", "agent", "agent", "agent",
              encode=lambda v: AgentFramework(v).value,
              decode=lambda v: AgentFramework(v or AgentFramework.NATIVE.value),
              # no argparse default: `--agent native` given with --resume is refused like any other loop
              from_arg=lambda v: AgentFramework(v or AgentFramework.NATIVE.value),
              argument={"choices": [a.value for a in AgentFramework],
                        "help": "the agent loop each case run goes through: native (run_diagnosis, default),"
                                " pydantic-ai or openai-agents (that framework's agent over the case's model, the"
                                " Harness through its adapter; needs the `adapters` extra, which make venv"
                                " installs)"}),
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


def _option(name: str) -> RunOption:
    return next(o for o in declared() if o.name == name)


def add_argument(container: Any, name: str, command: str) -> None:
    """The flag of run option `name` in `command`, added to `container` (a parser or one of its help groups)."""
    option = _option(name)
    container.add_argument(option.flag, **option.flag_keywords(command))


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """The flags of the run options `parser` does not have yet, under "run options" (an option declared with no
    place of its own in the command line's help)."""
    rest = [o for o in declared() if o.argument is not None and o.flag not in parser._option_string_actions]
    if rest:
        group = parser.add_argument_group("run options")
        for o in rest:
            group.add_argument(o.flag, **o.flag_keywords(command))


def given_flags(args: argparse.Namespace) -> dict[str, object]:
    """Each run option's flag -> its argparse value, None where not given (what `--resume` refuses)."""
    return {o.flag: None if o.not_given(getattr(args, o.dest, None)) else getattr(args, o.dest) for o in declared()}


def options_from_args(args: argparse.Namespace, base: BenchOptions, defaults: Mapping[str, object]) -> BenchOptions:
    """`base` with the run options the flags give (`defaults`: per command, e.g. sweep's epochs)."""
    out: dict[str, Any] = {}
    for o in declared():
        value = o.from_arg(getattr(args, o.dest, None))
        if value is None:
            value = defaults.get(o.name)
        if value is not None:
            out[o.name] = value
    return dataclasses.replace(base, **_as_fields(out))


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
