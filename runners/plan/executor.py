"""Where case runs execute, as a run option: the vocabulary and the check that the chosen executor can run here
(the executors themselves are in `runners.run.executors`)."""

from __future__ import annotations

import importlib.util
from enum import StrEnum

__all__ = ["RAY_EXTRA", "Executor", "ExecutorError", "check_available"]

RAY_EXTRA = "pip install 'harness-bench[ray]'"


class Executor(StrEnum):
    """Where case runs execute."""

    LOCAL = "local"
    """Threads in this process (`--concurrency` of them)."""
    PROCESSES = "processes"
    """One worker process per CPU, `--concurrency` threads spread over them (past one process's GIL)."""
    RAY = "ray"
    """Ray tasks: a local instance, or an existing cluster with `--ray-address`."""


class ExecutorError(ValueError):
    """The executor cannot be used (exit 2); the message names the flag and the fix."""


def check_available(executor: Executor) -> None:
    """Refuse `--executor ray` before anything is written when Ray is not installed."""
    if executor is Executor.RAY and importlib.util.find_spec("ray") is None:
        raise ExecutorError(f"--executor ray: Ray is not installed in this environment; {RAY_EXTRA}")
