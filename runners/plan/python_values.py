"""The command line's checks of values a Python caller gives (`runners.api`): what the parser's types hold a flag's
text to — a label's allowlist, a path, a list of one setting's values, a switch, an argument of the type it names —
applied to a value, each refusal a `BenchInputError` naming the flag or argument, on one line. The option models
check their own fields the same way (`FlagModel`, runners/plan/flags.py); these are the arguments of the API's
functions that are no option model's field."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from runners.plan._bounds import value_text
from runners.plan.flags import BenchInputError
from runners.plan.labels import label_arg
from runners.plan.settings import declaration

__all__ = ["given_label", "given_path", "given_setting_values", "given_text", "given_type", "optional"]

T = TypeVar("T")


def given_type(value: object, kind: type[T], name: str, what: str | None = None) -> T:
    """`value` if it is a `kind` (a bool is no int here), else one line naming argument `name` and the type."""
    if isinstance(value, kind) and not (isinstance(value, bool) and kind is not bool):
        return value
    expected = what or f"a {kind.__name__}"
    raise BenchInputError(f"{name} {value_text(value)}: expected {expected}, not {type(value).__name__}")


def optional(check: Callable[[object, str], T], value: object, name: str) -> T | None:
    """None, or `value` through `check`."""
    return None if value is None else check(value, name)


def given_text(value: object, flag: str) -> str:
    """Text a command line could give (no NUL)."""
    text = given_type(value, str, flag, "text")
    if "\x00" in text:
        raise BenchInputError(f"{flag} {value_text(text)}: holds a NUL character")
    return text


def given_label(value: object, flag: str) -> str:
    """A label, by the allowlist of every flag that names one (runners/plan/labels.py)."""
    text = given_text(value, flag)
    try:
        return label_arg(text)
    except argparse.ArgumentTypeError as exc:
        raise BenchInputError(f"{flag} {exc}") from None


def given_path(value: object, flag: str = "--db") -> Path:
    """A file path (text or an `os.PathLike` of text, no NUL)."""
    if not isinstance(value, str | os.PathLike) or not isinstance(os.fspath(value), str):
        raise BenchInputError(f"{flag} {value_text(value)}: expected a path (text or an os.PathLike)")
    return Path(given_text(os.fspath(value), flag))


def given_setting_values(values: object, name: str, *, at_least_one: bool = True) -> tuple[int | float | str, ...]:
    """A list of setting `name`'s values, each checked as its flag checks it (`--no-gain-threshold 1,2`)."""
    setting = declaration()[name]
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise BenchInputError(f"{setting.flag} {value_text(values)}: expected a list of values")
    if at_least_one and not values:
        raise BenchInputError(f"{setting.flag}: give at least one value")
    out: list[int | float | str] = []
    for value in values:  # a refusal is the flag's (a `SettingsError`, a `BenchInputError`)
        checked = setting.check(value)
        if checked is not None:
            out.append(checked)
    return tuple(dict.fromkeys(out))
