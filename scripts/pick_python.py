"""The interpreter `make` builds the project's venv from: of the CPython 3.11 builds on this machine that can make a
venv, the one that runs a fixed pure-Python loop fastest. Prints its path; `make PY=/path/to/python3.11` overrides it.

Why a choice at all: the test suite is CPU-bound (both cores busy from its first test to its last), and builds of
the same CPython differ in speed. A build without profile-guided and link-time optimisation, made as a shared
library (pyenv's default, for one), runs pure Python about a fifth slower than a distribution's optimised build:
on the development machine Debian's 3.11.2 ran a loop like the one below in 1.53 s against 1.96 s for pyenv's
3.11.7, and part of the test suite (the Harness library's and the store's tests, one process, the two venvs taking
turns five times) ran 0–12% faster on it, 9% in the median pair. Only 3.11 is a candidate: `constraints.txt` is
resolved and tested for it. When nothing qualifies, it prints `python3`, the previous default.

Standard library only: it runs before the venv exists, under whichever `python3` comes first on PATH.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

__all__ = ["FALLBACK", "Candidate", "candidates", "measure", "parse_probe", "pick"]

VERSION = (3, 11)
"""The CPython version `constraints.txt` is resolved for."""
FALLBACK = "python3"
"""Printed when no candidate qualifies."""
NAMES = ("python3.11", "python3")
"""The executable names looked for in every folder of PATH."""
EXTRA_FOLDERS = ("/usr/bin", "/usr/local/bin")
"""Where a distribution's interpreter lives when a version manager's shims come first on PATH."""
PROBE_TIMEOUT_S = 30.0
"""One candidate's probe (a start-up and three short loops; a broken shim fails fast)."""

_PROBE = """
import sys, time
import ensurepip, venv  # a build without them cannot make the venv (Debian's python3.11 without python3.11-venv)
best = float("inf")
for _ in range(3):
    start = time.perf_counter()
    x = 0
    for i in range(1_500_000):
        x += i * i
    best = min(best, time.perf_counter() - start)
print(sys.version_info[0], sys.version_info[1], best, sys.executable)
"""
"""Prints the major and minor version, the best of three timings of a fixed loop, the real executable."""


@dataclass(frozen=True)
class Candidate:
    """One interpreter that qualified, with its timing."""

    executable: str
    """Its real path (a version manager's shim resolved)."""
    seconds: float
    """The best of three timings of the fixed loop."""


def candidates(path: str | None = None) -> list[str]:
    """Every `python3.11` or `python3` on PATH and in the distribution's folders, in that order, each file once (a
    symlink counts as the file it points to)."""
    folders = [*(path if path is not None else os.environ.get("PATH", "")).split(os.pathsep), *EXTRA_FOLDERS]
    found: dict[str, str] = {}
    for folder in folders:
        for name in NAMES:
            exe = shutil.which(name, path=folder) if folder else None
            if exe:
                found.setdefault(os.path.realpath(exe), exe)
    return list(found.values())


def measure(exe: str) -> Candidate | None:
    """The candidate's timing, or None when it is not CPython 3.11 able to make a venv, or fails to start."""
    try:
        done = subprocess.run([exe, "-I", "-c", _PROBE], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_probe(done.stdout) if done.returncode == 0 else None


def parse_probe(stdout: str) -> Candidate | None:
    """The probe's line read back; None unless it names VERSION, a finite positive timing and an executable."""
    fields = stdout.strip().split(maxsplit=3)
    try:
        version, seconds = (int(fields[0]), int(fields[1])), float(fields[2])
    except (IndexError, ValueError):
        return None
    if version != VERSION or not 0.0 < seconds < float("inf") or len(fields) < 4:
        return None
    return Candidate(executable=fields[3], seconds=seconds)


def pick(found: list[Candidate]) -> str:
    """The fastest candidate's path; the fallback when there is none (the first listed wins a tie)."""
    best = min(found, key=lambda c: c.seconds, default=None)
    return best.executable if best is not None else FALLBACK


def main() -> int:
    """Print the chosen interpreter; with `-v`, every candidate's timing on stderr."""
    measured = [m for m in (measure(exe) for exe in candidates()) if m is not None]
    if "-v" in sys.argv[1:]:
        for m in measured:
            print(f"{m.seconds:.3f} s  {m.executable}", file=sys.stderr)
    print(pick(measured))
    return 0


if __name__ == "__main__":
    sys.exit(main())
