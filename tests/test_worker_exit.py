"""How a `make test` worker ends (tests/conftest.py `pytest_cmdline_main`): its exit handlers run, its interpreter is
not taken apart, and the run's outcome is still the controller's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests._durations import ROOT

SCRATCH = """
import atexit, os, pathlib

OUT = pathlib.Path(os.environ["WORKER_EXIT_PROBE"])


class TornDown:
    def __init__(self) -> None:  # the bound method, not the module's globals: those are gone by the time it runs
        self.touch = (OUT / "torn-down").touch

    def __del__(self) -> None:  # runs when the interpreter takes this module apart, and only then
        self.touch()


KEPT = TornDown()


def test_registers_an_exit_handler() -> None:
    atexit.register(lambda: (OUT / "exit-handler").write_text("x"))


def test_fails() -> None:
    assert False, "fails on purpose: the run's outcome must still be the controller's"
"""


def test_a_worker_runs_its_exit_handlers_and_leaves_without_tearing_its_interpreter_down(tmp_path: Path) -> None:
    """One xdist worker with this suite's conftest as a plugin, over a scratch module with a failing test: the run
    still fails, an exit handler a test registered ran, and the module's objects were never taken apart."""
    (tmp_path / "test_scratch.py").write_text(SCRATCH)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WORKER_EXIT_PROBE": str(tmp_path)}
    argv = [sys.executable, "-m", "pytest", "-q", "-n", "1", "-p", "tests.conftest", "-p", "no:cacheprovider",
            str(tmp_path / "test_scratch.py")]  # fmt: skip
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    out = done.stdout + done.stderr
    assert done.returncode == 1 and "1 failed, 1 passed" in done.stdout, out[-3000:]
    assert (tmp_path / "exit-handler").exists(), "an exit handler a test registered did not run"
    assert not (tmp_path / "torn-down").exists(), "the worker tore its interpreter down"
    assert "Traceback" not in done.stderr and "node down" not in out, out[-3000:]
