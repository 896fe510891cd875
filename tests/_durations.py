"""Each test module's measured cost, written by a real run and read back by `tests/conftest.py`.

`make durations` (`pytest -n 0 --durations-out tests/durations.json`) adds up, per module, the wall time of its
tests' setup, call and teardown (its module fixtures' build and teardown included), the CPU time the process and the
subprocesses it waited for spent meanwhile, and the subprocesses started; it writes them to the committed
`tests/durations.json`, heaviest first. conftest marks the modules whose CPU time is at or over its threshold `slow`
(CPU time hardly depends on how loaded the machine was) and hands the modules to `make test`'s workers longest
first. A run of some modules only (`pytest -n 0 tests/x.py --durations-out tests/durations.json`) replaces their
entries and keeps the others; a module that no longer exists is dropped.
"""

from __future__ import annotations

import json
import multiprocessing.forkserver
import os
import resource
import subprocess
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

ROOT = Path(__file__).resolve().parents[1]
_STARTED = pytest.StashKey[float]()
_SPAWNED = pytest.StashKey[int]()


class ModuleCost(BaseModel):
    """What one test module cost in the run that measured it."""

    model_config = ConfigDict(extra="forbid")

    seconds: float = Field(ge=0)
    """Wall time of its tests' setup, call and teardown, added up."""
    cpu_seconds: float = Field(ge=0)
    """CPU time (user + system) of the test process and the subprocesses it waited for, meanwhile."""
    tests: int = Field(ge=0)
    """How many of its tests ran."""
    subprocesses: int = Field(ge=0)
    """Processes its tests started through `subprocess` (a Python one costs about 0.6 CPU-s before it does anything)."""


class Durations(BaseModel):
    """The committed file: how it was measured, and each module's cost, heaviest first."""

    model_config = ConfigDict(extra="forbid")

    command: str
    """The command that wrote it."""
    measured: str
    """When the last run that wrote it ended (UTC, ISO 8601)."""
    modules: dict[str, ModuleCost]
    """Per module (its path from the repository's root, `/`-separated)."""


def load_durations(path: Path) -> dict[str, ModuleCost]:
    """Each measured module's cost; nothing when the file is missing."""
    if not path.is_file():
        return {}
    return Durations.model_validate_json(path.read_text()).modules


def add_durations_option(parser: pytest.Parser) -> None:
    """`--durations-out FILE`: write each module's measured cost into FILE (see this module's docstring)."""
    parser.addoption(
        "--durations-out",
        metavar="FILE",
        type=Path,
        default=None,
        help="add up each test module's wall and CPU time and write them to FILE (tests/durations.json)",
    )


def register_durations_writer(config: pytest.Config) -> None:
    """Measure this run when `--durations-out` is given (in an xdist worker: stamp the reports only)."""
    out: Path | None = config.getoption("durations_out")
    if out is not None:
        config.pluginmanager.register(_Writer(out, writes=not hasattr(config, "workerinput")), "durations-writer")


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + _fork_server_cpu()


def _fork_server_cpu() -> float:
    """The CPU time of this process's multiprocessing fork server and of the workers it forked and reaped (`--executor
    processes`): the server is never waited for while the tests run, so RUSAGE_CHILDREN holds none of it. Read from
    /proc (Linux); 0 elsewhere, or before a server runs. The fork server of a CLI subprocess goes uncounted (nothing
    waits for it either)."""
    pid = getattr(getattr(multiprocessing.forkserver, "_forkserver", None), "_forkserver_pid", None)
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split() if pid else []
    except OSError:
        return 0.0
    # utime, stime, cutime, cstime: fields 14-17 of stat(5), counted from the state field (index 0 here)
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK") if fields else 0.0


class _Writer:
    def __init__(self, out: Path, *, writes: bool) -> None:
        self.out = out
        self.writes = writes
        self.costs: dict[str, ModuleCost] = {}
        self.spawned = 0
        # counted where every subprocess.Popen (run, check_output, ...) starts its child, in this process only
        start = subprocess.Popen._execute_child  # type: ignore[attr-defined]

        def counted(popen: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
            self.spawned += 1
            start(popen, *args, **kwargs)

        subprocess.Popen._execute_child = counted  # type: ignore[attr-defined]

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, Any, None]:
        item.stash[_STARTED] = _cpu()
        item.stash[_SPAWNED] = self.spawned
        yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item) -> Generator[None, Any, None]:
        # the CPU of this phase travels on the report (an attribute survives xdist's serialisation of it)
        outcome = yield
        now, spawned = _cpu(), self.spawned
        report = outcome.get_result()
        report.cpu_seconds = now - item.stash.get(_STARTED, now)
        report.subprocesses = spawned - item.stash.get(_SPAWNED, spawned)
        item.stash[_STARTED], item.stash[_SPAWNED] = now, spawned

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not self.writes:
            return
        module = report.nodeid.split("::", 1)[0]
        cost = self.costs.setdefault(module, ModuleCost(seconds=0, cpu_seconds=0, tests=0, subprocesses=0))
        cost.seconds += report.duration
        cost.cpu_seconds += float(getattr(report, "cpu_seconds", 0.0))
        cost.subprocesses += int(getattr(report, "subprocesses", 0))
        cost.tests += report.when == "call" or (report.when == "setup" and report.skipped)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.writes or not self.costs:
            return
        old = Durations.model_validate_json(self.out.read_text()).modules if self.out.is_file() else {}
        merged = {name: cost for name, cost in {**old, **self.costs}.items() if (ROOT / name).is_file()}
        ranked = sorted(merged.items(), key=lambda kv: (-kv[1].seconds, kv[0]))
        doc = Durations(
            command="make durations",
            measured=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            modules={
                name: c.model_copy(update={"seconds": round(c.seconds, 2), "cpu_seconds": round(c.cpu_seconds, 2)})
                for name, c in ranked
            },
        )
        self.out.write_text(json.dumps(doc.model_dump(mode="json"), indent=1) + "\n", encoding="utf-8")
