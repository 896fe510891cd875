"""The live check's progress lines on stdout (`[live] …`), and the time each phase took."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["log", "phase"]


def log(msg: str) -> None:
    """One progress line, flushed at once (the check runs for minutes)."""
    print(f"[live] {msg}", flush=True)


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Log how long the body took, under `name`."""
    t0 = time.perf_counter()
    yield
    log(f"{name}: {time.perf_counter() - t0:.1f} s")
