"""The settings of a bench run — what it measures — as a view on the one flag mechanism (runners/plan/flags.py).

A setting is a field of `HarnessConfig` (as the bench's `BenchHarnessConfig`, which adds the stop rule and carries
the bench's markers on the library's fields) or of `ModelSettings` (`model_settings.py`): the flag engine declares
it (`declare_field`: its type, default, bounds and docstring), its `BenchSetting` marker says what a setting is
beyond a flag (public name, sweep axis, an endpoint `--resume` may change), and `Setting` is the view the bench
reads (its refusals add the BIGINT limit of its column). Which classes declare them is the `Declarations` in effect
(runners/plan/declarations.py). From that come the CLI options of `run` and `sweep` (added by the flag engine's one
adder), the sweep's grid axes, the `bench_runs` and `case_runs` columns, `--resume` and the flags that reproduce a
run (`reproduce_flags`, also the command line of a recorded model). A new field in either model is the only edit a
new setting needs.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum, StrEnum
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from harness import HarnessConfig
from runners.domain.model_spec import DEFAULT_MODEL, ModelSpec
from runners.domain.redaction import safe_url
from runners.plan import declarations
from runners.plan.flags import Declared, Flag, FlagError, Kind, base_type, declare_field, field_bounds, group_of
from runners.plan.model_settings import TOOL_CHOICE_MODES as TOOL_CHOICE_MODES
from runners.plan.model_settings import WIRE_TOOL_CHOICES as WIRE_TOOL_CHOICES
from runners.plan.model_settings import BenchSetting as BenchSetting
from runners.plan.model_settings import ModelSettings as ModelSettings
from runners.plan.model_settings import ParallelToolCalls as ParallelToolCalls

SettingValue = int | float | str | None
"""A setting's value as the CLI, DuckDB and JSON see it (enums as their string value)."""

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


SettingsError = FlagError
"""A setting's value is unusable: the flag engine's one error, a line naming the flag, the value and what is
allowed."""


class SettingOwner(StrEnum):
    """Which model a setting belongs to."""

    HARNESS = "harness"
    MODEL = "model"


class ValueKind(StrEnum):
    """The value type of a setting."""

    INT = "int"
    FLOAT = "float"
    TEXT = "text"
    CHOICE = "choice"


_SQL_TYPES = {
    ValueKind.INT: "BIGINT", ValueKind.FLOAT: "DOUBLE", ValueKind.TEXT: "VARCHAR", ValueKind.CHOICE: "VARCHAR",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Setting:
    """One declared setting: a field as the flag engine declares it, with its `BenchSetting` marker's meaning."""

    name: str
    """Public name: the DuckDB column, the key in stored settings and sweep labels, the argparse destination."""
    flag: str
    """The CLI flag (`--public-name` unless declared otherwise); messages name it."""
    aliases: tuple[str, ...]
    """Older flags that still work."""
    owner: SettingOwner
    """HarnessConfig or ModelSettings."""
    field: str
    """The field name in its owner model."""
    kind: ValueKind
    """Value type."""
    default: SettingValue
    """Default value."""
    help: str
    """One line for --help (the field's docstring)."""
    sweepable: bool
    """`sweep` takes a comma list and makes it a grid axis; `case_runs` has a column."""
    sweep_default: tuple[SettingValue, ...]
    """The sweep CLI's axis when the flag is not given (empty: the default alone)."""
    choices: tuple[str, ...]
    """Allowed values of a CHOICE setting."""
    nullable: bool
    """Whether the value may be unset (None)."""
    lower: float | None
    """Lower bound, if any."""
    lower_strict: bool
    """The lower bound is exclusive (`gt`)."""
    upper: float | None
    """Upper bound, if any (ints are always bounded by the BIGINT column)."""
    upper_strict: bool
    """The upper bound is exclusive (`lt`)."""
    metavar: str
    """Placeholder in --help."""
    endpoint: bool
    """Where the model is reached, not what is measured: `--resume` may take a new value."""
    examples: tuple[SettingValue, ...]
    """Declared example values (tests use them; derived when absent)."""
    enum_type: type[Enum] | None
    """The enum of a CHOICE setting (to rebuild the model value)."""

    @property
    def sql_type(self) -> str:
        """DuckDB column type."""
        return _SQL_TYPES[self.kind]

    def allowed(self, value: object = None) -> str:
        """What the setting accepts, for error messages (the BIGINT limit only when `value` passes it)."""
        if self.kind is ValueKind.CHOICE:
            return "one of " + ", ".join(self.choices)
        if self.kind is ValueKind.TEXT:
            return "a text value"
        noun = "an integer" if self.kind is ValueKind.INT else "a finite number"
        parts = []
        beyond_column = isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX
        if self.lower is not None and (self.lower != INT64_MIN or beyond_column):
            parts.append(f"{'>' if self.lower_strict else '≥'} {_num(self.lower)}")
        if self.upper is not None and (self.upper != INT64_MAX or beyond_column):
            parts.append(f"{'<' if self.upper_strict else '≤'} {_num(self.upper)}")
        return noun + (" " + " and ".join(parts) if parts else "")

    def check(self, value: SettingValue) -> SettingValue:
        """`value` if allowed, else SettingsError naming the flag and the allowed range."""
        if value is None:
            if self.nullable:
                return None
            raise SettingsError(f"{self.flag}: a value is required ({self.allowed()})")
        ok = True
        if self.kind is ValueKind.INT:
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif self.kind is ValueKind.FLOAT:
            ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        elif self.kind is ValueKind.CHOICE:
            ok = value in self.choices
        else:
            ok = isinstance(value, str)
        if ok and isinstance(value, int | float) and not isinstance(value, bool):
            lo_ok = self.lower is None or (value > self.lower if self.lower_strict else value >= self.lower)
            hi_ok = self.upper is None or (value < self.upper if self.upper_strict else value <= self.upper)
            ok = lo_ok and hi_ok
        if not ok:
            raise SettingsError(f"{self.flag} {_show(value)}: must be {self.allowed(value)}")
        return value

    def parse(self, text: str) -> SettingValue:
        """A command-line value, checked."""
        value: SettingValue
        if self.kind is ValueKind.INT:
            try:
                value = int(text.strip())
            except ValueError:
                raise SettingsError(f"{self.flag} {text!r}: must be {self.allowed()}") from None
        elif self.kind is ValueKind.FLOAT:
            try:
                value = float(text.strip())
            except ValueError:
                raise SettingsError(f"{self.flag} {text!r}: must be {self.allowed()}") from None
        else:
            value = text
        try:
            return self.check(value)
        except SettingsError:
            shown = text.strip() if isinstance(value, int | float) else repr(text)
            raise SettingsError(f"{self.flag} {shown}: must be {self.allowed(value)}") from None

    def parse_axis(self, text: str) -> tuple[SettingValue, ...]:
        """A comma-separated sweep axis, each value checked, duplicates dropped."""
        noun = {ValueKind.INT: "integers", ValueKind.FLOAT: "numbers"}.get(self.kind, "values")
        hint = ",".join(self.choices) if self.choices else "1,2,3"
        parts = [p.strip() for p in text.split(",")]
        if not any(parts):
            raise SettingsError(f"{self.flag} {text!r}: the grid is empty; expected comma-separated {noun} like {hint}")
        values = []
        for part in parts:
            try:
                values.append(self.parse(part))
            except SettingsError as exc:
                if len(parts) == 1:
                    raise
                reason = str(exc).removeprefix(self.flag).strip()
                expected = f"expected comma-separated {noun} like {hint}"
                raise SettingsError(f"{self.flag} {text!r}: {reason}; {expected}") from None
        return tuple(dict.fromkeys(values))

    def cli_text(self, value: SettingValue) -> str:
        """How `value` is written on the command line."""
        return _num(value) if isinstance(value, int | float) else str(value)

    def example(self) -> SettingValue:
        """A valid value other than the default (declared examples first)."""
        for v in self.examples:
            if v != self.default:
                return v
        if self.kind is ValueKind.CHOICE:
            return next(c for c in self.choices if c != self.default)
        if self.kind in (ValueKind.INT, ValueKind.FLOAT):
            base = self.default if isinstance(self.default, int | float) else (self.lower or 0)
            step = 1 if self.kind is ValueKind.INT else max(abs(float(base)), 1.0)
            for candidate in (base + step, base - step):
                try:
                    return self.check(candidate)
                except SettingsError:
                    continue
            raise ValueError(f"{self.name}: no example value inside its bounds")
        return f"{self.default or self.name}-example"


def _num(value: float | int) -> str:
    text = repr(value)
    return text.removesuffix(".0") if isinstance(value, float) else text


def _show(value: object) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _num(value)
    return repr(value) if isinstance(value, str) else str(value)


# -- the view on the flag engine --------------------------------------------------------------------
def _view(owner: SettingOwner, model: type[BaseModel], field: str, info: FieldInfo) -> Setting:
    """The setting the flag engine declares for `field` of `model`, with its `BenchSetting` marker's meaning."""
    d = declare_field(model, field, info, open_ended=True)
    marker = d.marker if isinstance(d.marker, BenchSetting) else BenchSetting()
    base, nullable = base_type(info.annotation)
    if d.kind is Kind.NUMBER:
        kind = ValueKind.INT if base is int else ValueKind.FLOAT
    elif d.kind is Kind.CHOICE:
        kind = ValueKind.CHOICE
    elif d.kind is Kind.TEXT and (base is str or base is ModelSpec):  # a model's spec: its text on the command line
        kind = ValueKind.TEXT
    elif d.kind is Kind.SWITCH:  # a flag would need its own spelling (true|false): an enum, as parallel_tool_calls
        raise TypeError(f"{model.__name__}.{field}: bool settings are not supported; use a StrEnum")
    else:
        raise TypeError(f"{model.__name__}.{field}: type {base!r} cannot be a bench setting (int, float, str, enum)")
    b = field_bounds(f"{model.__name__}.{field}", info)
    lower, lower_strict, upper, upper_strict = b.lower, b.lower_strict, b.upper, b.upper_strict
    if kind is ValueKind.INT:  # the column is BIGINT: a larger value must be refused, not overflow at insert
        lower = INT64_MIN if lower is None else max(lower, INT64_MIN)
        upper = INT64_MAX if upper is None else min(upper, INT64_MAX)
        lower, upper = int(lower), int(upper)
    name = marker.public_name or field
    return Setting(
        name=name, flag=marker.flag or "--" + name.replace("_", "-"), aliases=marker.aliases, owner=owner,
        field=field, kind=kind, default=_plain(d.default), help=d.doc, sweepable=marker.sweepable,
        sweep_default=tuple(_plain(v) for v in marker.sweep_default), choices=d.choices, nullable=nullable,
        lower=lower, lower_strict=lower_strict, upper=upper, upper_strict=upper_strict,
        metavar=marker.metavar if isinstance(marker.metavar, str) else _metavar(kind, d.choices),
        endpoint=marker.endpoint, examples=tuple(_plain(v) for v in info.examples or ()),
        enum_type=d.value_type if kind is ValueKind.CHOICE else None,
    )  # fmt: skip


def _metavar(kind: ValueKind, choices: tuple[str, ...]) -> str:
    return {ValueKind.INT: "N", ValueKind.FLOAT: "X", ValueKind.TEXT: "TEXT"}.get(kind) or choice_metavar(choices)


def choice_metavar(choices: Iterable[str]) -> str:
    """A choice list as every `--help` line shows it (argparse's own form: `{a,b,c}`)."""
    return "{" + ",".join(choices) + "}"


def _plain(value: object) -> SettingValue:
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, ModelSpec):
        return value.raw
    if value is None or isinstance(value, int | float | str):
        return value
    raise TypeError(f"setting value {value!r} is not an int, float, str or enum")


@dataclass(frozen=True, slots=True)
class Declaration:
    """Every setting, model ones first, in field order."""

    harness_class: type[HarnessConfig]
    """The HarnessConfig class the harness settings come from."""
    model_class: type[ModelSettings]
    """The ModelSettings class the model settings come from."""
    settings: tuple[Setting, ...]
    """The settings."""

    def __getitem__(self, name: str) -> Setting:
        for s in self.settings:
            if s.name == name:
                return s
        raise KeyError(name)

    def names(self) -> list[str]:
        """Public names."""
        return [s.name for s in self.settings]

    @property
    def sweepable(self) -> tuple[Setting, ...]:
        """The settings that can be grid axes."""
        return tuple(s for s in self.settings if s.sweepable)


@lru_cache(maxsize=8)
def _declare(harness_class: type[HarnessConfig], model_class: type[ModelSettings]) -> Declaration:
    settings = [_view(SettingOwner.MODEL, model_class, n, f) for n, f in model_class.model_fields.items()]
    settings += [_view(SettingOwner.HARNESS, harness_class, n, f) for n, f in harness_class.model_fields.items()]
    names = [s.name for s in settings]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"settings declared twice: {duplicates}")
    return Declaration(harness_class, model_class, tuple(settings))


def declaration() -> Declaration:
    """The declaration of every run setting, from the `Declarations` in effect."""
    d = declarations.current()
    return _declare(d.harness_config, d.model_settings)


# -- the settings of one run --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RunSettings:
    """Every setting of one run: the Harness config and the model settings."""

    config: HarnessConfig
    """Thresholds and budgets (an instance of the declared HarnessConfig class)."""
    model_settings: ModelSettings
    """The model under test and how it is asked."""

    @classmethod
    def of(cls, config: HarnessConfig | None = None, model_settings: ModelSettings | None = None) -> RunSettings:
        """Settings from the two models (each lifted to the declared class: a base HarnessConfig, ModelSettings)."""
        decl = declaration()
        if config is None:
            config = decl.harness_class()
        elif type(config) is not decl.harness_class:
            given_config = config
            config = _validated(
                lambda: decl.harness_class.model_validate(given_config.model_dump()), SettingOwner.HARNESS
            )
        if model_settings is None:
            model_settings = decl.model_class()
        elif type(model_settings) is not decl.model_class:
            given = model_settings
            model_settings = _validated(lambda: decl.model_class.model_validate(given.model_dump()), SettingOwner.MODEL)
        return cls(config, model_settings)

    @classmethod
    def from_values(cls, values: Mapping[str, SettingValue], base: RunSettings | None = None) -> RunSettings:
        """Settings from public-name values over `base` (default: every default); errors name the flag."""
        decl = declaration()
        known = set(decl.names())
        unknown = [n for n in values if n not in known]
        if unknown:
            raise SettingsError(f"unknown setting(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(known))}")
        base = base or cls.of()
        harness: dict[str, Any] = base.config.model_dump()
        model: dict[str, Any] = base.model_settings.model_dump()
        for name, value in values.items():
            s = decl[name]
            (harness if s.owner is SettingOwner.HARNESS else model)[s.field] = s.check(value)
        config = _validated(lambda: decl.harness_class.model_validate(harness), SettingOwner.HARNESS)
        return cls(config, _validated(lambda: decl.model_class.model_validate(model), SettingOwner.MODEL))

    @classmethod
    def from_json(cls, text: str) -> RunSettings:
        """Settings stored by `to_json` (a setting added since then takes its default)."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise SettingsError("stored settings are not a JSON object")
        return cls.from_values(data)

    def values(self) -> dict[str, SettingValue]:
        """Every setting by public name, in declaration order."""
        out: dict[str, SettingValue] = {}
        for s in declaration().settings:
            source: BaseModel = self.config if s.owner is SettingOwner.HARNESS else self.model_settings
            out[s.name] = _plain(getattr(source, s.field))
        return out

    def value(self, name: str) -> SettingValue:
        """One setting by public name."""
        return self.values()[name]

    def stored_values(self) -> dict[str, SettingValue]:
        """Every setting as stored: the base URL without user info, query or fragment (`safe_url`)."""
        values = self.values()
        url = values.get("base_url")
        if isinstance(url, str):
            values["base_url"] = safe_url(url)
        return values

    def to_json(self) -> str:
        """Canonical JSON of every setting as stored (sorted keys): stored in bench_runs and compared by sweeps."""
        return json.dumps(self.stored_values(), sort_keys=True, separators=(",", ":"))

    def with_values(self, values: Mapping[str, SettingValue]) -> RunSettings:
        """A copy with some settings changed (validated)."""
        return RunSettings.from_values(values, base=self)


def legacy_settings(config_json: str | None, model: str | None, base_url: str | None) -> RunSettings:
    """The settings of a bench run written before schema v3 (config_json + model + base_url columns);
    fields unknown today are dropped, settings unknown then take their defaults."""
    harness_class = declaration().harness_class
    config = {k: v for k, v in json.loads(config_json or "{}").items() if k in harness_class.model_fields}
    harness = _validated(lambda: harness_class.model_validate(config), SettingOwner.HARNESS)
    return RunSettings.of(harness).with_values({"model": model or DEFAULT_MODEL, "base_url": base_url})


def _validated(build: Any, owner: SettingOwner) -> Any:
    """Run a pydantic constructor; a ValidationError becomes one SettingsError line naming the flags."""
    try:
        return build()
    except ValidationError as exc:
        raise SettingsError(_describe(exc, owner)) from None


def _describe(exc: ValidationError, owner: SettingOwner) -> str:
    by_field = {s.field: s for s in declaration().settings if s.owner is owner}
    problems = []
    for e in exc.errors():
        msg = str(e["msg"]).removeprefix("Value error, ")
        field = str(e["loc"][0]) if e["loc"] else ""
        s = by_field.get(field)
        if s is None:
            problems.append(msg)
        else:
            problems.append(f"{s.flag} {_show(_plain_or_text(e.get('input')))}: {msg}")
    return "; ".join(problems)


def _plain_or_text(value: object) -> object:
    try:
        return _plain(value)
    except TypeError:
        return str(value)


# -- the command line ---------------------------------------------------------------------------------
GROUPS = {
    SettingOwner.MODEL: "model",
    SettingOwner.HARNESS: "harness config (never shown to the model)",
}
"""The `--help` group of each owner's settings."""


def add_arguments(parser: argparse.ArgumentParser, command: str, *, sweep: bool = False) -> None:
    """One option per declared setting, added by the flag engine. With `sweep`, sweepable settings take comma lists
    (grid axes)."""
    for owner, title in GROUPS.items():
        for s in declaration().settings:
            if s.owner is owner:
                as_flag(s, title, axis=sweep and s.sweepable).add_to(group_of(parser, title), command)


def as_flag(s: Setting, group: str, *, axis: bool) -> Declared:
    """Setting `s` as the flag engine adds it (`axis`: a sweep's comma list): its value parsed and checked by the
    setting, argparse's default None (the settings given are told from the others)."""
    default = s.sweep_default if axis and s.sweep_default else (s.default,)
    shown = ",".join(s.cli_text(v) for v in default) if default != (None,) else "unset"
    suffix = f" [grid axis: comma list, default {shown}]" if axis else f" (default {shown})"
    text = (s.help.rstrip(".") + suffix).replace("{", "{{").replace("}", "}}")  # the engine formats `{default}`
    marker = Flag(flag=s.flag, aliases=s.aliases, metavar=f"{s.metavar}[,…]" if axis else s.metavar, help=text,
                  group=group, parse=_arg_type(s, axis))  # fmt: skip
    return Declared(name=s.name, model=s.owner.value, flag=s.flag, kind=Kind.TEXT, default=None, required=False,
                    doc=s.help, marker=marker, stored=None, bounds=None, choices=(), value_type=str, column=None,
                    sql_type=s.sql_type, tells_given=True)  # fmt: skip


def _arg_type(s: Setting, axis: bool) -> Any:
    def parse(text: str) -> object:
        try:
            return s.parse_axis(text) if axis else s.parse(text)
        except SettingsError as exc:
            # argparse prefixes "argument --flag:"; keep only what follows the flag in our message
            raise argparse.ArgumentTypeError(str(exc).removeprefix(s.flag).strip()) from None

    parse.__name__ = s.name
    return parse


def axis_type(name: str) -> Any:
    """The argparse type of setting `name`'s comma list (as `sweep` parses it: each value checked against the
    setting's declared bounds, duplicates dropped), for a command that takes a list of one setting's values."""
    return _arg_type(declaration()[name], axis=True)


def given(args: argparse.Namespace) -> dict[str, Any]:
    """The settings passed explicitly on the command line (values, or tuples for sweep axes)."""
    return {s.name: getattr(args, s.name) for s in declaration().settings if getattr(args, s.name, None) is not None}


def settings_from_args(args: argparse.Namespace, base: RunSettings | None = None) -> RunSettings:
    """The run's settings: the flags given over `base` (default: every default)."""
    scalars = {k: v for k, v in given(args).items() if not isinstance(v, tuple)}
    return RunSettings.from_values(scalars, base)


def axes_from_args(args: argparse.Namespace) -> dict[str, tuple[SettingValue, ...]]:
    """The sweep's grid axes: the comma lists given, and the declared sweep defaults of the others."""
    axes: dict[str, tuple[SettingValue, ...]] = {}
    for s in declaration().sweepable:
        value = getattr(args, s.name, None)
        if value is not None:
            axes[s.name] = tuple(value)
        elif s.sweep_default:
            axes[s.name] = s.sweep_default
    return axes


def reproduce_flags(settings: RunSettings, *, always: Iterable[str] = (), skip: Iterable[str] = ()) -> list[str]:
    """The CLI arguments that reproduce `settings`: every setting that differs from its default, plus
    `always`, minus `skip`, in declaration order (join with `shlex.join`); the values as stored (printed: a base
    URL's credentials are the user's to give again)."""
    keep, drop = set(always), set(skip)
    values = settings.stored_values()
    out: list[str] = []
    for s in declaration().settings:
        value = values[s.name]
        if s.name in drop or value is None or (value == s.default and s.name not in keep):
            continue
        out += [s.flag, s.cli_text(value)]
    return out


def axis_flags(axes: Mapping[str, Iterable[SettingValue]]) -> list[str]:
    """The `sweep` arguments that give each named setting its grid axis (a comma list), in declaration order."""
    decl = declaration()
    unknown = sorted(n for n in axes if n not in decl.names())
    if unknown:
        raise SettingsError(f"unknown setting(s) {', '.join(unknown)}")
    out: list[str] = []
    for s in decl.sweepable:
        if s.name in axes:
            out += [s.flag, ",".join(s.cli_text(s.check(v)) for v in axes[s.name])]
    return out


# -- storage ------------------------------------------------------------------------------------------
def bench_run_columns() -> list[tuple[str, str]]:
    """(column, DuckDB type) of `bench_runs`: one per declared setting."""
    return [(s.name, s.sql_type) for s in declaration().settings]


def case_run_columns() -> list[tuple[str, str]]:
    """(column, DuckDB type) of `case_runs`: one per sweepable setting (the grid coordinates)."""
    return [(s.name, s.sql_type) for s in declaration().sweepable]


def swept_names() -> list[str]:
    """Public names of the sweepable settings (the views group by them)."""
    return [s.name for s in declaration().sweepable]
