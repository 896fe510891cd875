"""Where case runs execute (issue 13): threads in this process, or Ray tasks on a cluster.

The DuckDB writer stays in the driver either way: a Ray task runs one case run on some node and
returns the finished CaseRun; the driver yields each one as soon as it completes (`ray.wait`, one at a
time), so the writer's one-second batches land while the rest are still running. Ray is an optional
extra (`pip install 'harness-bench[ray]'`) and is imported only when `--executor ray` is used.

Nodes of an existing cluster need the same harness-bench installed (the tasks import `runners` and
`harness`), the cassette folder at the same path when `--cassettes` is used, and the API-key variable
set for a live model: the key is never shipped through Ray.
"""

from __future__ import annotations

import importlib.util
import uuid
from collections.abc import Iterator, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runners.bench import BenchOptions
    from runners.case_runner import CaseRun
    from runners.evalset import EvalCase

RAY_EXTRA = "pip install 'harness-bench[ray]'"


class Executor(StrEnum):
    """Where case runs execute."""

    LOCAL = "local"
    """Threads in this process (`--concurrency` of them)."""
    RAY = "ray"
    """Ray tasks: a local instance, or an existing cluster with `--ray-address`."""


class ExecutorError(ValueError):
    """The executor cannot be used (exit 2); the message names the flag and the fix."""


def check_available(executor: Executor) -> None:
    """Refuse `--executor ray` before anything is written when Ray is not installed."""
    if executor is Executor.RAY and importlib.util.find_spec("ray") is None:
        raise ExecutorError(f"--executor ray: Ray is not installed in this environment; {RAY_EXTRA}")


# A worker process keeps the model factory of the bench run it last served: building an OpenAI
# client per case run would open a new connection pool every time.
_WORKER_FACTORY: tuple[str, Any] | None = None


def _run_one(token: str, opts: BenchOptions, case: EvalCase, epoch: int) -> CaseRun:
    """Body of a Ray task: one case run, exactly as the local executor runs it."""
    global _WORKER_FACTORY
    from runners.bench import ModelSpec, _execute, _ModelFactory

    if _WORKER_FACTORY is None or _WORKER_FACTORY[0] != token:
        _WORKER_FACTORY = (token, _ModelFactory(ModelSpec.parse(opts.model_settings.model), opts))
    return _execute(case, epoch, _WORKER_FACTORY[1], opts)


def iterate_ray(
    todo: Sequence[tuple[EvalCase, int]], opts: BenchOptions, concurrency: int
) -> Iterator[tuple[CaseRun, int]]:
    """Run `todo` as Ray tasks and yield each (CaseRun, epoch) as it finishes (completion order).

    Connects to `opts.ray_address`, or reuses an initialised Ray, or starts a local instance (shut down
    at the end). At most max(concurrency, cluster CPUs) × 2 tasks are submitted at a time, so a large
    run never floods the object store and an interrupt cancels little."""
    check_available(Executor.RAY)
    import ray

    started = False
    if not ray.is_initialized():
        ray.init(address=opts.ray_address, include_dashboard=False, log_to_driver=False)
        started = True
    elif opts.ray_address is not None:
        raise ExecutorError(f"--ray-address {opts.ray_address}: Ray is already initialised in this process")
    remote = ray.remote(num_cpus=1, max_retries=0)(_run_one)
    token = uuid.uuid4().hex
    opts_ref = ray.put(opts)
    window = 2 * max(concurrency, int(ray.cluster_resources().get("CPU", 1)))  # type: ignore[no-untyped-call]
    pending: dict[Any, int] = {}
    it = iter(todo)

    def submit() -> bool:
        if opts.cancellation.cancelled:  # Ctrl-C/SIGTERM: no new case run starts (runners/interrupts.py)
            return False
        nxt = next(it, None)
        if nxt is None:
            return False
        pending[remote.remote(token, opts_ref, nxt[0], nxt[1])] = nxt[1]
        return True

    try:
        while len(pending) < window and submit():
            pass
        while pending and not opts.cancellation.cancelled:  # queued tasks are cancelled below
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                epoch = pending.pop(ref)
                try:
                    run: CaseRun = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:
                    # the task's own exception (e.g. a corrupted cassette's BenchInputError), not Ray's wrapper
                    cause = getattr(exc, "cause", None)
                    if isinstance(cause, BaseException):
                        raise cause from None
                    raise
                yield run, epoch
                submit()
    finally:
        for ref in pending:
            ray.cancel(ref, force=False)
        if started:
            ray.shutdown()
