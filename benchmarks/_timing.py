"""Medians of several runs with min and max, so figures are robust to machine noise."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Timing:
    """Seconds per repeat."""

    median: float
    low: float
    high: float

    def fmt(self, scale: float = 1.0, unit: str = "s", digits: int = 2) -> str:
        """`12.3 µs (min 11.9, max 13.0)`."""
        return (
            f"{self.median * scale:.{digits}f} {unit} "
            f"(min {self.low * scale:.{digits}f}, max {self.high * scale:.{digits}f})"
        )


def measure(fn: Callable[[], object], repeats: int = 5, warmup: int = 1) -> Timing:
    """Run `fn` warmup + repeats times; time each repeat."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return Timing(statistics.median(times), min(times), max(times))
