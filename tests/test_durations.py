"""The measured timing file `tests/conftest.py` orders and marks the suite by (`make durations` writes it)."""

from __future__ import annotations

import pytest

from tests._durations import ROOT, Durations, ModuleCost
from tests.conftest import DURATIONS_FILE, SLOW_CPU_SECONDS, module_name, module_order, module_rank, waits


def _measured() -> Durations:
    return Durations.model_validate_json(DURATIONS_FILE.read_text())


def test_the_file_names_existing_test_modules_only() -> None:
    """A module renamed or removed since the last measurement is named here: re-measure it (`make durations`)."""
    gone = [name for name in _measured().modules if not (ROOT / name).is_file()]
    assert gone == [], f"{DURATIONS_FILE.name} names modules that do not exist (run make durations): {gone}"
    assert all(name.startswith("tests/") and name.endswith(".py") for name in _measured().modules)


def test_the_file_is_a_measurement_of_most_of_the_suite() -> None:
    """Heaviest first, and most modules measured: a module added since is ordered, not measured, until the next
    `make durations`."""
    measured = _measured().modules
    seconds = [cost.seconds for cost in measured.values()]
    assert seconds == sorted(seconds, reverse=True)
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py")}
    assert len(modules & set(measured)) >= 0.8 * len(modules), sorted(modules - set(measured))


def test_slow_marks_and_order_come_from_the_measurement(request: pytest.FixtureRequest) -> None:
    """This session's items: each module's `slow` mark is its measured CPU seconds against the threshold, and the
    modules come in `module_order`: slow first, then unmeasured, then quick, each group longest first, with the
    waiting modules set among the others."""
    measured = _measured().modules
    order: list[str] = []
    for item in request.session.items:
        name = module_name(item.path)
        slow = name in measured and measured[name].cpu_seconds >= SLOW_CPU_SECONDS
        assert (item.get_closest_marker("slow") is not None) == slow, name
        if not order or order[-1] != name:
            order.append(name)
    assert len(order) == len(set(order)), "a module's tests run together"
    assert order == module_order(sorted(order))
    busy = [name for name in order if name not in measured or not waits(measured[name])]
    ranks = [module_rank(name) for name in busy]
    assert ranks == sorted(ranks)
    known = [measured[name] for name in busy if name in measured]
    groups = [cost.cpu_seconds < SLOW_CPU_SECONDS for cost in known]
    assert groups == sorted(groups), "the slow modules first"


def _cost(seconds: float, cpu_seconds: float) -> ModuleCost:
    return ModuleCost(seconds=seconds, cpu_seconds=cpu_seconds, tests=1, subprocesses=0)


def test_a_waiting_module_runs_beside_two_that_compute_never_beside_another_waiting_one() -> None:
    """Ranked by wall time alone, the modules that mostly sleep (deadlines, backoffs, servers) came out together and
    every worker waited at once; each is set after two that compute, the longest wait first, the rest at the end."""
    measured = {
        "slow_a": _cost(20, 19), "slow_b": _cost(12, 11), "quick_c": _cost(2.5, 2.4), "quick_d": _cost(1, 1),
        "wait_short": _cost(3.2, 0.1), "wait_long": _cost(9, 2), "wait_last": _cost(4, 1),
        "computes_more_than_it_waits": _cost(9, 6),
    }  # fmt: skip
    assert [n for n in measured if waits(measured[n])] == ["wait_short", "wait_long", "wait_last"]
    order = module_order(["quick_d", "wait_short", "slow_b", "new", *measured], measured)
    assert order == ["slow_a", "slow_b", "wait_long", "computes_more_than_it_waits", "new", "wait_short",
                     "quick_c", "quick_d", "wait_last"]  # fmt: skip
