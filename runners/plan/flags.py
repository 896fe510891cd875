"""One declaration per flag: every flag of every command is a field of a typed model (a `FlagModel`).

The field gives the flag's name (its argparse destination), type, default, bounds (`Field(ge=..., le=...)`) and help
(the field's docstring); a `Flag` marker in its `Annotated` metadata gives what the field cannot say (the spelling
when it is not `--field-name`, a metavar, the `--help` group, a parser of its own, a default that differs per
command), and a `Stored` marker says that a run keeps it (its `bench_runs` column, its key in a sweep's saved
options: `--resume` restores it and refuses it when given again). From that one field come the argparse argument and
its check (a number's is a `Bounded`: one line naming the flag, the value and the allowed range, exit 2), the
`--help` line, the typed value a command reads back (`Model.from_args`), the flags given (what `--resume` refuses)
and the stored column. A new flag is one field of the model of its concern. The run settings
(runners/plan/settings.py) read their fields' bounds the same way (`field_bounds`).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum, StrEnum
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, Self, Union, cast, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.fields import FieldInfo

from runners.plan._bounds import Bounded, bounded_float, bounded_int, field_bounds, shown

__all__ = [
    "BenchInputError",
    "Bounded",
    "Declared",
    "Flag",
    "FlagError",
    "FlagModel",
    "Kind",
    "PerCommand",
    "Stored",
    "StoredValue",
    "add_version",
    "base_type",
    "bounded_float",
    "bounded_int",
    "declare_field",
    "field_bounds",
    "group_of",
    "presented",
]

StoredValue = int | float | str | bool | list[str] | None
"""A run option's value as a `bench_runs` column or a sweep's saved options hold it (JSON types)."""
PerCommand = Callable[[str], str]
"""A help text or metavar that names the command it is shown in (`run`, `sweep`, ...)."""


class BenchInputError(ValueError):
    """Unusable input for a bench run (exit code 2)."""


class FlagError(BenchInputError):
    """A flag's value is unusable; the message is one line naming the flag, the value and what is allowed."""


# -- the markers -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Flag:
    """How a field is a command-line flag, where its type, default and docstring do not say it (a field without one
    is the flag `--field-name`)."""

    flag: str | None = None
    """The option string (default `--field-name`); a positional argument's name in usage lines."""
    aliases: tuple[str, ...] = ()
    """Older spellings that still work, not listed in `--help` (a refusal names the one typed)."""
    metavar: str | PerCommand | None = None
    """The value's placeholder in `--help` (default: the choices, or none)."""
    help: str | PerCommand | None = None
    """The `--help` line (default: the field's docstring); `{default}` is the default in that command (with a
    format spec: `{default:.2f}`), `{points}` a rate's default in points."""
    group: str | None = None
    """The `--help` group (None: the command's own options)."""
    parse: Callable[[str], object] | None = None
    """The argparse type, when the field's type does not give it (a label's allowlist, a shard's I/N); raises
    `argparse.ArgumentTypeError` with what follows the flag in the refusal."""
    required: bool = False
    """The command refuses to run without it (with `exclusive`: without one flag of the group)."""
    positional: bool = False
    """A positional argument (`merge OUT INPUT...`), not an option."""
    exclusive: str | None = None
    """The mutually exclusive group the flag belongs to, by name (at most one flag of it given)."""
    command_defaults: tuple[tuple[str, object], ...] = ()
    """(command, default) where a command's default differs from the field's (`sweep`'s epochs)."""
    reason: str | None = None
    """What a number's refusal says after the value, when the range needs its meaning."""
    tell_given: bool = False
    """The command tells the flag given from its default (refused where it would be ignored)."""

    def default_in(self, command: str, default: object) -> object:
        """The default in `command`."""
        return dict(self.command_defaults).get(command, default)


@dataclass(frozen=True, slots=True)
class Stored:
    """A run option the run keeps: in its `bench_runs` row and in a sweep's saved options (under the field's name);
    `--resume` restores it and refuses it when given again."""

    column: str | None = None
    """The `bench_runs` column (None: the field's name), unless `in_column` is off."""
    in_column: bool = True
    """It has a `bench_runs` column (a shard's bench run keeps its shard in the `shards` table instead)."""
    json: bool = False
    """The column holds the value as JSON text (a list)."""
    sql_type: str | None = None
    """The column's DuckDB type (default: from the field's type)."""
    encode: Callable[[Any], StoredValue] | None = None
    """Field value -> stored value (default: the value as JSON has it: a path's text, an enum's value)."""
    decode: Callable[[StoredValue], Any] | None = None
    """Stored value (None: written before the option existed) -> field value (default: the stored value as is,
    checked by the model; None: the field's default)."""


# -- what a field declares -------------------------------------------------------------------------------------------
class Kind(StrEnum):
    """The shape of a flag's value on the command line."""

    NUMBER = "number"
    """An int or float with bounds (a `Bounded` type)."""
    TEXT = "text"
    """Text (a path, a name), parsed by the marker's `parse` when it has one."""
    CHOICE = "choice"
    """One value of an enum."""
    SWITCH = "switch"
    """A bool: the flag given sets it to the opposite of its default (`--plan`, `--no-transcripts`)."""
    LIST = "list"
    """Repeatable: each occurrence adds one value (`--case A --case B`)."""


@dataclass(frozen=True, slots=True)
class Declared:
    """One field of a `FlagModel`, as the command line and the store see it."""

    name: str
    """The field and the argparse destination."""
    model: str
    """The model that declares it (for errors)."""
    flag: str
    """The option string (messages name it)."""
    kind: Kind
    """The value's shape."""
    default: object
    """The field's default (None for a required field)."""
    required: bool
    """The command refuses to run without it."""
    doc: str
    """The field's docstring, on one line."""
    marker: Flag
    """The `Flag` marker (an empty one when the field has none)."""
    stored: Stored | None
    """The `Stored` marker of a run option the run keeps, or None."""
    bounds: Bounded | None
    """A number's range."""
    choices: tuple[str, ...]
    """A CHOICE's values."""
    value_type: Any
    """The type one value is converted to (an enum, `Path`, `int`, ...)."""
    column: str | None
    """The `bench_runs` column of an option the run keeps there (None: not a column)."""
    sql_type: str
    """The column's DuckDB type."""
    tells_given: bool
    """The command must tell the flag given from its default (`--resume` refuses a kept option given again; a
    command's own default applies when not given; a flag refused where it would be ignored): argparse's default is
    None."""

    def default_in(self, command: str) -> object:
        """The default in `command`."""
        return self.marker.default_in(command, self.default)

    def help_in(self, command: str) -> str:
        """The `--help` line in `command` (argparse's `%` escaped)."""
        text = self.marker.help(command) if callable(self.marker.help) else self.marker.help or self.doc
        if "{" in text:
            default = self.default_in(command)
            points = default * 100 if isinstance(default, int | float) else None
            text = text.format(default=_Shown(default), points=points)
        return text.replace("%", "%%")

    def metavar_in(self, command: str) -> str | None:
        """The placeholder in `command`."""
        m = self.marker.metavar
        return m(command) if callable(m) else m

    def arg_type(self) -> Callable[[str], object] | None:
        """The argparse type (its refusal is one line: argparse names the flag before it)."""
        if self.marker.parse is not None:
            return self.marker.parse
        if self.bounds is not None:
            return self.bounds
        if self.value_type is Path:
            return Path
        return None

    def add_to(self, container: Any, command: str) -> None:
        """The argparse argument of this field in `command`, added to `container` (a parser, a group)."""
        keywords: dict[str, Any] = {"help": self.help_in(command)}
        if self.kind is Kind.SWITCH:
            keywords["action"] = "store_false" if self.default is True else "store_true"
        else:
            if self.kind is Kind.LIST and self.marker.positional:
                keywords["nargs"] = "+" if self.required else "*"
            elif self.kind is Kind.LIST:
                keywords["action"] = "append"
            if self.kind is Kind.CHOICE:
                keywords["choices"] = list(self.choices)
            elif (parse := self.arg_type()) is not None:
                keywords["type"] = parse
            elif self.kind is Kind.LIST and self.value_type is Path:
                keywords["type"] = Path
            metavar = self.metavar_in(command)
            if metavar is not None:
                keywords["metavar"] = metavar
        if self.marker.positional:
            if not self.required and self.kind is not Kind.LIST:
                keywords |= {"nargs": "?", "default": self.arg_default(command)}
            container.add_argument(self.name, **keywords)
            return
        if self.required and self.marker.exclusive is None:
            keywords["required"] = True
        if self.kind is not Kind.SWITCH:
            given_apart = self.tells_given or self.kind is Kind.LIST  # argparse appends to a list default
            keywords["default"] = None if given_apart else self.arg_default(command)
        container.add_argument(self.flag, dest=self.name, **keywords)
        for alias in self.marker.aliases:  # its own action, so that a refusal names the flag as it was typed
            container.add_argument(alias, dest=self.name, **{**keywords, "help": argparse.SUPPRESS})

    def arg_default(self, command: str) -> object:
        """The default as argparse holds it (a choice as its text)."""
        default = self.default_in(command)
        return default.value if isinstance(default, Enum) else default

    def given(self, args: argparse.Namespace) -> bool:
        """The flag was given on the command line (for a flag whose argparse default is its own: not None and not
        that default)."""
        value = getattr(args, self.name, None)
        if self.kind is Kind.SWITCH or not (self.tells_given or self.kind is Kind.LIST):
            return value is not None and value != self.arg_default("")
        return value is not None

    def from_arg(self, value: object) -> object:
        """An argparse value as the field's value (a choice's text as its enum, a list as a tuple)."""
        if self.kind is Kind.CHOICE and isinstance(value, str):
            return self.value_type(value)
        if self.kind is Kind.LIST and isinstance(value, list):
            return tuple(value)
        return value

    def encode(self, value: object) -> StoredValue:
        """The field's value as stored."""
        if self.stored is not None and self.stored.encode is not None:
            return self.stored.encode(value)
        return _plain(value)

    def decode(self, value: StoredValue) -> object:
        """A stored value as the field's (None: written before the option existed, the field's default)."""
        if self.stored is not None and self.stored.decode is not None:
            return self.stored.decode(value)
        if value is None:
            return self.default
        if self.kind is Kind.LIST and isinstance(value, list):
            return tuple(value)
        return value


def _plain(value: object) -> StoredValue:
    """A value as JSON and DuckDB hold it: an enum's value, a path's or a spec's text, a tuple as a list."""
    if isinstance(value, Enum):  # before str: a StrEnum is one
        return str(value.value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tuple | list):
        return [str(_plain(v)) for v in value]
    return str(value)


@dataclass(frozen=True, slots=True)
class _Shown:
    """A default as a help text formats it: `{default}` as `--help` says a value, `{default:.2f}` by the spec."""

    value: object

    def __format__(self, spec: str) -> str:
        return format(self.value, spec) if spec else _cli_text(self.value)


def _cli_text(value: object) -> str:
    """A default as `--help` says it."""
    if value is None:
        return "unset"
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def base_type(annotation: Any) -> tuple[Any, bool]:
    """(type, nullable) of `T` or `T | None`."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return annotation, False


def declare_field(model: type[BaseModel], name: str, info: FieldInfo, *, open_ended: bool = False) -> Declared:
    """One field as a flag (`open_ended`: a number may leave a bound to its column's range, as a setting does)."""
    owner = f"{model.__name__}.{name}"
    marker = next((m for m in info.metadata if isinstance(m, Flag)), Flag())
    stored = next((m for m in info.metadata if isinstance(m, Stored)), None)
    base, _ = base_type(info.annotation)
    bounds: Bounded | None = None
    choices: tuple[str, ...] = ()
    value_type: Any = base
    if marker.parse is not None:  # one argument, the marker's parser gives the value (a comma list, a label, ...)
        kind = Kind.TEXT
    elif get_origin(base) in (tuple, list):
        kind, value_type = Kind.LIST, get_args(base)[0]
    elif base is bool:
        kind = Kind.SWITCH
    elif isinstance(base, type) and issubclass(base, Enum):
        kind, choices = Kind.CHOICE, tuple(str(m.value) for m in base)
    elif base in (int, float):
        kind = Kind.NUMBER
    else:
        kind = Kind.TEXT
    required = info.is_required()
    default = None if required else info.get_default(call_default_factory=True)
    b = field_bounds(owner, info)
    if kind is Kind.NUMBER and not (open_ended and (b.lower is None or b.upper is None)):
        if b.lower is None or b.upper is None:
            raise TypeError(f"{owner}: a numeric flag declares both bounds (Field(ge=..., le=...))")
        reason = marker.reason
        if reason is not None and "{" in reason:
            reason = reason.format(default=_Shown(default), points=default * 100 if default is not None else None)
        bounds = Bounded(int(b.lower) if base is int else b.lower, int(b.upper) if base is int else b.upper,
                         integer=base is int, lo_open=b.lower_strict, hi_open=b.upper_strict,
                         reason=reason)  # fmt: skip
    doc = " ".join((info.description or name.replace("_", " ")).split())
    flag = marker.flag or ("--" + name.replace("_", "-") if not marker.positional else name)
    column = None if stored is None or not stored.in_column else stored.column or name
    tells_given = stored is not None or bool(marker.command_defaults) or marker.tell_given
    return Declared(name, model.__name__, flag, kind, default, required or marker.required, doc, marker, stored,
                    bounds, choices, value_type, column, _sql_type(kind, bounds, stored), tells_given)  # fmt: skip


def _sql_type(kind: Kind, bounds: Bounded | None, stored: Stored | None) -> str:
    """The DuckDB type of a kept option's column."""
    if stored is not None and stored.sql_type:
        return stored.sql_type
    if kind is Kind.SWITCH:
        return "BOOLEAN"
    if kind is Kind.NUMBER:
        return "INTEGER" if bounds is not None and bounds.integer else "DOUBLE"
    return "VARCHAR"


# -- the models ------------------------------------------------------------------------------------------------------
class FlagModel(BaseModel):
    """A model whose fields are flags (one concern of a command: which cases, where the run is stored, ...)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True, arbitrary_types_allowed=True)

    exclusive_required: ClassVar[tuple[str, ...]] = ()
    """The mutually exclusive groups (by `Flag.exclusive` name) of which one flag must be given."""

    def __init__(self, /, **data: Any) -> None:
        """A value refused is one line naming its flag (`FlagError`), from the Python API as on the command line."""
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise FlagError(describe(exc, type(self))) from None

    @classmethod
    def declared(cls) -> tuple[Declared, ...]:
        """Every field, in declaration order (read at call time: a test may declare a subclass with one more)."""
        return _declared(cls)

    @classmethod
    def field(cls, name: str) -> Declared:
        """One field's declaration."""
        return next(d for d in cls.declared() if d.name == name)

    @classmethod
    def add_flags(
        cls, parser: argparse.ArgumentParser, command: str, *, only: Sequence[str] | None = None, grouped: bool = True
    ) -> None:
        """The flags of the model's fields (`only`: these, in this order) in `command`'s parser, each in its
        `--help` group (not `grouped`: among the command's own options)."""
        wanted = [cls.field(n) for n in only] if only is not None else list(cls.declared())
        exclusive: dict[str, Any] = {}
        for d in wanted:
            container: Any = group_of(parser, d.marker.group if grouped else None)
            if d.marker.exclusive is not None:
                if d.marker.exclusive not in exclusive:
                    required = d.marker.exclusive in cls.exclusive_required
                    exclusive[d.marker.exclusive] = container.add_mutually_exclusive_group(required=required)
                container = exclusive[d.marker.exclusive]
            d.add_to(container, command)

    @classmethod
    def from_args(cls, args: argparse.Namespace, command: str) -> Self:
        """The model of the flags given in `command` (the others: their defaults in that command)."""
        values: dict[str, object] = {}
        for d in cls.declared():
            if not hasattr(args, d.name):
                continue
            if d.given(args):
                values[d.name] = d.from_arg(getattr(args, d.name))
            elif d.marker.command_defaults:
                values[d.name] = d.default_in(command)
        return cls.checked(values)

    @classmethod
    def checked(cls, values: Mapping[str, object]) -> Self:
        """The model of `values` by field name; a value it refuses is a `FlagError` naming the flag."""
        return cls(**values)

    @classmethod
    def given(cls, args: argparse.Namespace) -> dict[str, object]:
        """Field name -> argparse value of each flag given on the command line."""
        return {d.name: getattr(args, d.name) for d in cls.declared() if hasattr(args, d.name) and d.given(args)}

    def stored_values(self) -> dict[str, StoredValue]:
        """Field name -> stored value of each option the run keeps (a sweep's saved options)."""
        return {d.name: d.encode(getattr(self, d.name)) for d in self.declared() if d.stored is not None}

    def column_values(self) -> dict[str, StoredValue]:
        """`bench_runs` column -> value of each option the run keeps in a column (a list as JSON text)."""
        out: dict[str, StoredValue] = {}
        for d in self.declared():
            if d.column is not None:
                value = d.encode(getattr(self, d.name))
                as_json = d.stored is not None and d.stored.json and value is not None
                out[d.column] = json.dumps(value) if as_json else value
        return out

    def argv(self, command: str = "", *, every: bool = False) -> list[str]:
        """The command-line arguments that give this model's values in `command` (a value at its default left out
        unless `every`): a command line rendered from its flags' declaration, never written by hand."""
        out: list[str] = []
        for d in self.declared():
            value = getattr(self, d.name)
            if value is None or (value == d.default_in(command) and not (every and d.kind is not Kind.SWITCH)):
                continue
            if d.kind is Kind.SWITCH:
                out.append(d.flag)
            elif d.kind is Kind.LIST:
                out += [
                    a for v in value for a in ((str(_plain(v)),) if d.marker.positional else (d.flag, str(_plain(v))))
                ]
            else:
                out += [str(_plain(value))] if d.marker.positional else [d.flag, str(_plain(value))]
        return out

    @classmethod
    def restored(cls, stored: Mapping[str, object], *, columns: bool) -> dict[str, object]:
        """The fields of a stored run (by column when `columns`, else by a sweep's saved key): each option it keeps,
        its default where the run was stored before the option existed."""
        out: dict[str, object] = {}
        for d in cls.declared():
            if d.stored is None or (columns and d.column is None):
                continue
            value = stored.get(d.column if columns and d.column else d.name)
            if columns and d.stored.json and isinstance(value, str):
                value = json.loads(value)
            out[d.name] = d.decode(cast(StoredValue, value))
        return out


def group_of(parser: argparse.ArgumentParser, title: str | None) -> Any:
    """The `--help` group titled `title` (created on first use), or the parser itself."""
    if title is None:
        return parser
    for group in parser._action_groups:
        if group.title == title:
            return group
    return parser.add_argument_group(title)


def presented(model: type[BaseModel], name: str, marker: Flag) -> Any:
    """Field `name` of `model` as it is (type, bounds, default, docstring), shown on the command line as `marker`
    says: a subclass redeclares the field with it (`x: int = presented(Base, "x", Flag(...))`), so that the model
    that decides a value (a library's config, a decision's thresholds) carries no presentation. A refusal's
    `reason` the field declares is kept unless `marker` gives its own."""
    info = copy.copy(model.model_fields[name])
    own = next((m for m in info.metadata if isinstance(m, Flag)), None)
    if own is not None and own.reason is not None and marker.reason is None:
        marker = dataclasses.replace(marker, reason=own.reason)
    info.metadata = [*(m for m in info.metadata if not isinstance(m, Flag)), marker]
    return info


def add_version(parser: argparse.ArgumentParser, text: str) -> None:
    """`--version`: prints `text` and exits 0."""
    parser.add_argument("--version", action="version", version=text)


@cache
def _declared(model: type[BaseModel]) -> tuple[Declared, ...]:
    return tuple(declare_field(model, n, f) for n, f in model.model_fields.items())


def describe(exc: ValidationError, model: type[FlagModel]) -> str:
    """A model's refusal as one line naming each flag, its value and what is allowed."""
    by_name = {d.name: d for d in model.declared()}
    problems = []
    for e in exc.errors():
        name = str(e["loc"][0]) if e["loc"] else ""
        d = by_name.get(name)
        value = e.get("input")
        if d is None:
            problems.append(str(e["msg"]).removeprefix("Value error, "))
        elif d.bounds is not None and isinstance(value, int | float) and not isinstance(value, bool):
            problems.append(f"{d.flag} {_cli_text(value)}: {d.bounds.refusal()}")
        else:
            text = repr(value) if isinstance(value, str) else _cli_text(value)
            problems.append(f"{d.flag} {shown(text)}: {str(e['msg']).removeprefix('Value error, ')}")
    return "; ".join(problems)


def declared_fields(*models: type[FlagModel]) -> Iterator[Declared]:
    """Every field of `models`, in order."""
    for model in models:
        yield from model.declared()
