"""A numeric flag's range (`Bounded`: its text parsed, then refused in one line outside the range) and the bounds a
pydantic field declares (`field_bounds`); runners/plan/flags.py re-exports them."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

import annotated_types
from pydantic.fields import FieldInfo

__all__ = ["Bounded", "FieldBounds", "bounded_float", "bounded_int", "field_bounds", "shown"]


@dataclass(frozen=True, slots=True)
class Bounded:
    """A numeric flag's type: its text parsed, then refused (one line naming the value and the range) outside it."""

    lo: int | float
    """The smallest value allowed (or, with `lo_open`, the bound it must exceed)."""
    hi: int | float
    """The largest value allowed (or, with `hi_open`, the bound it must stay below)."""
    integer: bool
    """An integer flag (else a finite number)."""
    lo_open: bool = False
    """`lo` itself is refused."""
    hi_open: bool = False
    """`hi` itself is refused."""
    reason: str | None = None
    """What the refusal says after the value, when the range needs its meaning (default: `must be <the range>`)."""

    @property
    def __name__(self) -> str:  # argparse names the type in "invalid <name> value" messages
        return "integer" if self.integer else "number"

    def allowed(self) -> str:
        """The range, as the refusal says it."""
        if self.integer:
            return f"an integer from {int(self.lo)} to {int(self.hi)}"
        if not (self.lo_open or self.hi_open):
            return f"a number from {self.lo:g} to {self.hi:g}"
        return f"a number in {'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}{')' if self.hi_open else ']'}"

    def refusal(self) -> str:
        """What follows the value in the refusal: the allowed range."""
        return self.reason or f"must be {self.allowed()}"

    def inside(self, value: int | float) -> bool:
        """`value` is within the range (never NaN or an infinity)."""
        if isinstance(value, float) and not math.isfinite(value):
            return False
        above = value > self.lo if self.lo_open else value >= self.lo
        below = value < self.hi if self.hi_open else value <= self.hi
        return above and below

    def __call__(self, text: str) -> int | float:
        try:
            value: int | float = int(text) if self.integer else float(text)
        except ValueError:  # not a number, or an integer of more digits than Python converts
            raise argparse.ArgumentTypeError(f"{shown(repr(text))}: {self.refusal()}") from None
        if not self.inside(value):
            raise argparse.ArgumentTypeError(f"{shown(text)}: {self.refusal()}")
        return value


def shown(text: str) -> str:
    """A value as the refusal quotes it: a long one cut, with its length (the line stays one screen line)."""
    return text if len(text) <= 60 else f"{text[:60]}… ({len(text)} characters)"


def bounded_int(lo: int, hi: int, *, reason: str | None = None) -> Bounded:
    """An integer flag from `lo` to `hi` (both allowed)."""
    return Bounded(lo, hi, integer=True, reason=reason)


def bounded_float(
    lo: float, hi: float, *, lo_open: bool = False, hi_open: bool = False, reason: str | None = None
) -> Bounded:
    """A finite-number flag from `lo` to `hi` (an open end excludes its bound)."""
    return Bounded(lo, hi, integer=False, lo_open=lo_open, hi_open=hi_open, reason=reason)


@dataclass(frozen=True, slots=True)
class FieldBounds:
    """A numeric field's `ge`/`gt`/`le`/`lt` bounds, as `Field(...)` declares them."""

    lower: float | None
    """Lower bound, if any."""
    lower_strict: bool
    """The lower bound is exclusive (`gt`)."""
    upper: float | None
    """Upper bound, if any."""
    upper_strict: bool
    """The upper bound is exclusive (`lt`)."""


def field_bounds(owner: str, info: FieldInfo) -> FieldBounds:
    """The bounds `Field(ge=..., gt=..., le=..., lt=...)` declares on a field (`owner`: its model, for errors)."""
    lower = upper = None
    lower_strict = upper_strict = False
    for m in info.metadata:
        if isinstance(m, annotated_types.Ge):
            lower, lower_strict = _number(owner, m.ge), False
        elif isinstance(m, annotated_types.Gt):
            lower, lower_strict = _number(owner, m.gt), True
        elif isinstance(m, annotated_types.Le):
            upper, upper_strict = _number(owner, m.le), False
        elif isinstance(m, annotated_types.Lt):
            upper, upper_strict = _number(owner, m.lt), True
    return FieldBounds(lower, lower_strict, upper, upper_strict)


def _number(owner: str, value: object) -> float:
    """A bound as a number (annotated_types types it only as comparable)."""
    if isinstance(value, int | float):
        return float(value)
    raise TypeError(f"{owner}: bound {value!r} is not a number")
