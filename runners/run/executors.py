"""Where case runs execute: threads in this process, worker processes on this machine, or
Ray tasks on a cluster.

A live bench is I/O-bound per case run but CPU-bound per process: every case run costs the client
~25–45 ms of Python (SDK, Harness, tools, rows) under one GIL, so one process tops out near one core.
`processes` runs one worker process per CPU, each with its share of `--concurrency` threads, and
streams finished case runs back to the one DuckDB writer here.

The DuckDB writer stays in the driver either way: a Ray task runs one case run on some node and
returns the finished CaseRun; the driver yields each one as soon as it completes (`ray.wait`, one at a
time), so the writer's one-second batches land while the rest are still running. Ray is an optional
extra (`pip install 'harness-bench[ray]'`) and is imported only when `--executor ray` is used.

Nodes of an existing cluster need the same harness-bench installed (the tasks import `runners` and
`harness`), the cassette folder at the same path when `--cassettes` is used, and the API-key variable
set for a live model: the key is never shipped through Ray.
"""

from __future__ import annotations

import ctypes
import math
import multiprocessing
import multiprocessing.connection
import os
import queue
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from harness import CancellationToken
from runners.domain.case_setup import import_tool_backends
from runners.plan.executor import RAY_EXTRA, Executor, ExecutorError, check_available
from runners.plan.run_plan import RunPlan
from runners.run._execute import ModelFactory, execute_case

if TYPE_CHECKING:
    from runners.domain.evalset import EvalCase
    from runners.run.case_runner import CaseRun

__all__ = ["RAY_EXTRA", "Executor", "ExecutorError", "check_available", "iterate_processes", "iterate_ray"]

# A worker process keeps the model factory of the bench run it last served: building an OpenAI
# client per case run would open a new connection pool every time.
_WORKER_FACTORY: tuple[str, Any] | None = None


def _run_one(token: str, plan_in: list[Any], case: EvalCase, epoch: int) -> CaseRun:
    """Body of a Ray task: one case run, exactly as the local executor runs it (a task is cancelled by Ray, never
    by a flag of the driver's). `plan_in` holds the plan's object reference: inside a list Ray passes it unresolved,
    so a worker fetches and unpickles the plan once per bench run, not once per task."""
    global _WORKER_FACTORY
    if _WORKER_FACTORY is None or _WORKER_FACTORY[0] != token:
        import ray

        _WORKER_FACTORY = (token, ModelFactory(ray.get(plan_in[0])))
    return execute_case(case, epoch, _WORKER_FACTORY[1], CancellationToken())


def iterate_ray(
    todo: Sequence[tuple[EvalCase, int]], plan: RunPlan, cancellation: CancellationToken
) -> Iterator[tuple[CaseRun, int]]:
    """Run `todo` (of `plan`) as Ray tasks and yield each (CaseRun, epoch) as it finishes (completion order); once
    `cancellation` is set, no task is submitted and the queued ones are cancelled.

    Connects to `--ray-address`, or reuses an initialised Ray, or starts a local instance (shut down
    at the end). At most max(concurrency, cluster CPUs) × 2 tasks are submitted at a time, so a large
    run never floods the object store and an interrupt cancels little."""
    check_available(Executor.RAY)
    import ray

    address = plan.options.execution.ray_address
    started = False
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
        started = True
    elif address is not None:
        raise ExecutorError(f"--ray-address {address}: Ray is already initialised in this process")
    remote = ray.remote(num_cpus=1, max_retries=0)(_run_one)
    token = uuid.uuid4().hex
    plan_ref = ray.put(plan)
    concurrency = plan.options.execution.concurrency
    cluster_resources: Callable[[], dict[str, float]] = ray.cluster_resources  # Ray leaves it unannotated
    window = 2 * max(concurrency, int(cluster_resources().get("CPU", 1)))
    pending: dict[Any, int] = {}
    it = iter(todo)

    def submit() -> bool:
        if cancellation.cancelled:  # Ctrl-C/SIGTERM: no new case run starts (runners/run/interrupts.py)
            return False
        nxt = next(it, None)
        if nxt is None:
            return False
        pending[remote.remote(token, [plan_ref], nxt[0], nxt[1])] = nxt[1]
        return True

    try:
        while len(pending) < window and submit():
            pass
        while pending and not cancellation.cancelled:  # queued tasks are cancelled below
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


# -- worker processes on this machine ------------------------------------------------------------------
_POLL_SECONDS = 0.5
"""How often the driver checks, while waiting for a result, that it was not cancelled and no worker died."""

TaskItem = tuple[int, "EvalCase", int] | None
"""(index, case, epoch), or None: no more work for the thread that takes it."""
ResultItem = tuple[int, int, "CaseRun | None", "BaseException | None"]
"""(index, epoch, the finished case run, or the exception it raised)."""


def _process_worker(plan: RunPlan, tasks: Any, results: Any, stop: Any, threads: int, environ: dict[str, str]) -> None:
    """Body of one worker process: `threads` threads take (case, epoch) items until a None, run each
    exactly as the local executor does and put the CaseRun (or its exception) on `results` (`environ`: the
    driver's environment, for a worker forked from a fork server started under an older one)."""
    from concurrent.futures import ThreadPoolExecutor

    os.environ.clear()
    os.environ.update(environ)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver owns Ctrl-C/SIGTERM and sets `stop`
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    token = CancellationToken()  # this process's own flag, set when the driver sets `stop`

    parent = multiprocessing.parent_process()  # a driver killed outright never sets `stop`

    def watch() -> None:
        # a lock-free shared flag, polled: a multiprocessing Event takes a shared lock even to read, and a
        # worker that exits while a daemon thread holds it would leave the driver's set() waiting forever
        while not stop.value and (parent is None or parent.is_alive()):
            time.sleep(_POLL_SECONDS / 5)
        # The driver stopped reading: results still unread need not be delivered (said before the cancel lets
        # the loops end and the process exit: a join of the pipe's feeder already under way cannot be cancelled).
        results.cancel_join_thread()
        token.cancel()  # case runs in flight end CANCELLED; the driver discards them

    watcher = threading.Thread(target=watch, name="stop-watch", daemon=True)
    watcher.start()
    factory = ModelFactory(plan)

    def loop() -> None:
        while not token.cancelled:
            item: TaskItem = tasks.get()
            if item is None:
                return
            index, case, epoch = item
            try:
                results.put((index, epoch, execute_case(case, epoch, factory, token), None))
            except BaseException as exc:  # reported to the driver, which raises it there
                results.put((index, epoch, None, exc))

    import_tool_backends()
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="case") as pool:
        for f in [pool.submit(loop) for _ in range(threads)]:
            f.result()
    # Done with its share, the worker exits only when the driver says so (the watcher has then given up the unread
    # results): the driver sets `stop` once it has read every result it wants. Exiting earlier would wait in the
    # queue's join for every result to cross the pipe, and a driver that stopped reading (a cancel) would have to
    # take and unpickle each of them first: hundreds after a run ahead, seconds each on a loaded machine.
    watcher.join()


def iterate_processes(
    todo: Sequence[tuple[EvalCase, int]], plan: RunPlan, cancellation: CancellationToken
) -> Iterator[tuple[CaseRun, int]]:
    """Run `todo` (of `plan`) in one worker process per CPU (each with its share of `--concurrency` threads) and
    yield each (CaseRun, epoch) as it finishes. The per-endpoint cap (`--max-in-flight`) is shared out too.

    Workers never fork the driver (it holds DuckDB and HTTP state that must not be copied): they are forked from
    this process's fork server (`_worker_context`) or spawned; once `cancellation` is set they stop taking work, and
    a worker that dies is an error."""
    if not todo:
        return
    execution = plan.options.execution
    concurrency = execution.concurrency
    workers = max(1, min(os.cpu_count() or 1, concurrency, len(todo)))
    threads = math.ceil(concurrency / workers)
    cap = math.ceil((execution.max_in_flight or concurrency) / workers)
    ctx = _worker_context()
    tasks: Any = ctx.Queue()
    results: Any = ctx.Queue()
    stop = ctx.RawValue(ctypes.c_bool, False)
    capped = execution.model_copy(update={"max_in_flight": cap})
    worker_plan = replace(plan, options=replace(plan.options, execution=capped))
    for index, (case, epoch) in enumerate(todo):
        tasks.put((index, case, epoch))
    for _ in range(workers * threads):
        tasks.put(None)
    procs = [
        ctx.Process(target=_process_worker, args=(worker_plan, tasks, results, stop, threads, dict(os.environ)),
                    daemon=True, name=f"harness-bench-worker-{i + 1}")
        for i in range(workers)
    ]  # fmt: skip
    for p in procs:
        p.start()
    received = _ResultReader(results)
    try:
        for _ in range(len(todo)):
            while True:
                if cancellation.cancelled:
                    return  # the finally stops the workers; runs in flight are discarded by the bench
                try:
                    item = received.get(timeout=_POLL_SECONDS)
                    break
                except queue.Empty:
                    # A worker exits only once the driver sets `stop`: before that, an exit is a death, whatever
                    # its code (one that exited 0 mid-message would otherwise be waited on for good).
                    dead = [p for p in procs if p.exitcode is not None]
                    if dead:
                        raise ExecutorError(
                            f"--executor processes: worker {dead[0].name} died (exit code {dead[0].exitcode})"
                        ) from None
            _, epoch, run, exc = item
            if exc is not None:
                raise exc
            assert run is not None
            yield run, epoch
    finally:
        stop.value = True
        # Nothing more is read: a worker gives up its unread results once `stop` is set (its watcher cancels the
        # pipe's join) and exits within a poll; one still alive at the deadline is killed.
        deadline = time.monotonic() + 10
        while (alive := [p.sentinel for p in procs if p.is_alive()]) and time.monotonic() < deadline:
            multiprocessing.connection.wait(alive, timeout=max(0.0, deadline - time.monotonic()))
        for p in procs:
            if p.is_alive():
                p.kill()  # workers ignore SIGTERM (the driver owns it), so terminate() would not end one
            p.join(timeout=5)
        received.close()
        tasks.cancel_join_thread()
        results.cancel_join_thread()


def _worker_context() -> Any:
    """Where the platform has one, a fork server: a clean interpreter started once per driver process, which has
    imported this module (and with it the Harness and the bench) and forks each worker from itself. A worker then
    costs a fork instead of an interpreter importing the bench again (about a CPU-second each, paid again at every
    grid point of a sweep). Elsewhere (Windows) workers are spawned. The server has started no thread: the tools'
    libraries (numpy's thread pools) are imported by each worker (`import_tool_backends`)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([__name__])
    return ctx


class _ResultReader:
    """The workers' results, taken off the pipe by a thread of its own.

    A worker that exits while its pipe feeder is half-way through a message (killed, or after `stop` with its join
    cancelled) leaves a header with no body: a read of the pipe then blocks for good, since the driver holds a write
    end itself and no end-of-file comes. Only this thread can be caught in that read; the driver waits on a queue
    with a timeout, so it still sees the worker die or the run end."""

    def __init__(self, results: Any) -> None:
        self._results = results
        self._items: queue.SimpleQueue[ResultItem | BaseException] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._read, name="harness-bench-results", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            try:
                item = self._results.get()
            except (EOFError, OSError):
                return  # the driver closed the pipe
            except BaseException as exc:  # a result that does not unpickle: the driver raises it
                self._items.put(exc)
                continue
            if item is None:
                return
            self._items.put(item)

    def get(self, timeout: float) -> ResultItem:
        """The next result, or `queue.Empty` after `timeout` seconds; a result that did not unpickle is raised."""
        item = self._items.get(timeout=timeout)
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        """Ends the thread once every worker has gone: a None after whatever they wrote. A thread caught in a
        half-written message stays so (a daemon, blocked on a pipe nobody writes to)."""
        self._results.put(None)
        self._thread.join(timeout=_POLL_SECONDS)
