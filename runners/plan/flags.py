"""The argparse type of every bounded numeric flag: one factory, so that each bound is declared where its flag is
(with what it sizes) and checked here, and a test can read every flag's range off the parser."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

__all__ = ["Bounded", "bounded_float", "bounded_int"]


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
            raise argparse.ArgumentTypeError(f"{_shown(repr(text))}: {self.refusal()}") from None
        if not self.inside(value):
            raise argparse.ArgumentTypeError(f"{_shown(text)}: {self.refusal()}")
        return value


def _shown(text: str) -> str:
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
