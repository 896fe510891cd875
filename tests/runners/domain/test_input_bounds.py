"""Bounded work for any input: an alias bomb or deep nesting in an evaluation file is one line naming the file and
the line, exit 2, in flat memory, on every path the file can take (libyaml's batches, the event reader, pure
PyYAML, the reader process of a large file)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from runners.domain import _case_file, _yaml_bounds, evalset
from runners.domain._yaml_stream import LimitError, iter_raw_cases, iter_raw_cases_aside
from runners.domain.evalset import BUILTIN_DIR, EvalSetError, load_cases, spool_cases

ROOT = Path(__file__).resolve().parents[3]
PEAK_MB = 300
"""The acceptance bound on a refused input's peak memory."""
ADDRESS_SPACE = 1 << 30
"""A child's address space: a bound that held would never come near it; a bomb that went through fails fast
(MemoryError) instead of taking the shared machine's memory."""


@pytest.fixture(autouse=True)
def _fresh_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(evalset, "_PARSED", {})


def _anchors(levels: int, indent: str = "", sep: str = "\n", a: str = "a") -> str:
    """Nine-fold anchors: `{a}{levels-1}` stands for 9**levels scalars."""
    lines = [f'{indent}{a}0: &{a}0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"{indent}{a}{i}: &{a}{i} [{', '.join([f'*{a}{i - 1}'] * 9)}]" for i in range(1, levels)]
    return sep.join(lines)


def _first_case(extra: str) -> str:
    """The first built-in empty_logs case, with `extra` added to its first step's input."""
    text = (BUILTIN_DIR / "empty_logs.yaml").read_text(encoding="utf-8")
    cases = text[text.index("cases:\n") + len("cases:\n") :]
    first = cases[: cases.index("\n  - id:", 5) + 1]
    marker = "tenant: t1, keyword: timeout}"
    assert marker in first
    return first.replace(marker, f"tenant: t1, keyword: timeout, extra: {extra}}}", 1)


def _bomb_outside() -> str:
    return _anchors(9) + "\ncases:\n" + _first_case("*a8")


def _bomb_inside() -> str:
    return "cases:\n" + _first_case("{" + _anchors(9, sep=", ") + "}")


def _bomb_unused() -> str:
    return "shared:\n" + _anchors(9, indent="  ") + "\ncases:\n" + _first_case("1")


def _bomb_big() -> str:
    # past the reader-process threshold, the bomb in the first case
    padding = ("# " + "x" * 98 + "\n") * ((_case_file._ASIDE_ABOVE // 100) + 10)
    return _bomb_inside() + padding


_MEASURE = """
import os, resource, subprocess, sys
limit = int(sys.argv[1])
def cap():
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
proc = subprocess.Popen(sys.argv[2:], stdout=subprocess.DEVNULL, preexec_fn=cap)
_, status, usage = os.wait4(proc.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss, file=sys.stdout, flush=True)
"""
"""Runs the command from a small launcher: Linux counts the RSS a process had before exec (the forking process's)
in its peak, so a child forked straight from a grown pytest worker would report the worker's size."""


def _run_cases(path: Path) -> tuple[int, str, float]:
    """(exit code, stderr, peak RSS in MB of the child and its reader process) of `harness-bench cases`."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "runners.cli", "cases", "--evalset", str(path)]
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(ADDRESS_SPACE), *argv], cwd=ROOT, env=env, capture_output=True,
        text=True, errors="replace", timeout=300,
    )  # fmt: skip
    code, maxrss_kb = done.stdout.split()
    return int(code), done.stderr, int(maxrss_kb) / 1024


@pytest.mark.parametrize(
    ("make", "line"),
    [(_bomb_outside, 6), (_bomb_inside, 25), (_bomb_unused, 7), (_bomb_big, 25)],
    ids=["aliased-from-a-case", "inside-a-case", "outside-cases-unused", "reader-process"],
)
def test_an_alias_bomb_is_one_line_naming_the_file_and_line_in_flat_memory(
    tmp_path: Path, make: object, line: int
) -> None:
    path = tmp_path / "bomb.yaml"
    assert callable(make)
    path.write_text(make(), encoding="utf-8")
    code, stderr, peak = _run_cases(path)
    assert code == 2, stderr[-2000:]
    assert stderr.count("\n") == 1, stderr[-2000:]
    assert stderr.startswith(f"error: {path}: line {line}, column "), stderr
    assert "alias *a" in stderr and "nodes (an alias bomb?)" in stderr
    assert peak < PEAK_MB


@pytest.mark.parametrize("use_c", [True, False], ids=["libyaml", "pure"])
@pytest.mark.parametrize("fast", [True, False], ids=["batches", "events"])
@pytest.mark.parametrize("make", [_bomb_outside, _bomb_inside, _bomb_unused])
def test_every_reader_refuses_the_bomb_at_the_same_mark(make: object, use_c: bool, fast: bool) -> None:
    assert callable(make)
    text = make()
    with pytest.raises(LimitError) as err:
        list(iter_raw_cases(text.encode(), use_c=use_c, fast=fast))
    with pytest.raises(LimitError) as ref:
        list(iter_raw_cases(text.encode(), use_c=False, fast=False))
    assert err.value.problem_mark is not None and ref.value.problem_mark is not None
    got, want = err.value.problem_mark, ref.value.problem_mark
    assert (err.value.problem, got.line, got.column) == (ref.value.problem, want.line, want.column)


def test_the_reader_process_sends_the_bound_back_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(_bomb_big(), encoding="utf-8")
    with pytest.raises(yaml.MarkedYAMLError) as err:
        list(iter_raw_cases_aside(str(path)))
    assert err.value.problem_mark is not None and err.value.problem_mark.line + 1 == 25
    assert "an alias bomb?" in str(err.value.problem)


def test_a_file_whose_cases_each_stay_within_the_case_bound_is_bounded_as_a_whole(tmp_path: Path) -> None:
    # 59,049 nodes per case is allowed; thirty such cases in a file of a few KB are not
    block = _first_case("*a4")
    many = "".join(block.replace("gateway_timeout_t1", f"gateway_timeout_t{n}") for n in range(30))
    path = tmp_path / "many.yaml"
    path.write_text(_anchors(5) + "\ncases:\n" + many, encoding="utf-8")
    for load in (load_cases, spool_cases):
        with pytest.raises(EvalSetError) as err:
            load([str(path)])
        (problem,) = err.value.problems
        assert problem.startswith(f"{path}: line ") and "file's aliases stand for more than" in problem


def test_deep_nesting_is_one_line_not_a_recursion_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("cases:\n" + _first_case("[" * 900 + "]" * 900), encoding="utf-8")
    for load in (load_cases, spool_cases):
        with pytest.raises(EvalSetError) as err:
            load([str(path)])
        (problem,) = err.value.problems
        assert problem.startswith(f"{path}: line 25, column ") and "nested more than 100 deep" in problem


def test_aliases_within_the_bounds_load_as_yaml_load_gives() -> None:
    # a case whose aliases stand for 59,049 scalars: under the case bound, on every path
    text = _anchors(5) + "\ncases:\n" + _first_case("*a4") + "  - {inner: {" + _anchors(5, sep=", ", a="b") + "}}\n"
    want = yaml.safe_load(text)["cases"]
    for use_c, fast in ((True, True), (True, False), (False, False)):
        assert list(iter_raw_cases(text.encode(), use_c=use_c, fast=fast)) == want


# Generated documents, with the bounds made small: the batches (whose walk counts what libyaml composed) and the
# event reader (which counts as it composes) refuse the same documents at the same mark, or give the same data.


def _node(data: st.DataObject, anchors: list[str], depth: int, names: list[str]) -> str:
    kind = data.draw(st.sampled_from(["scalar", "list", "alias", "anchored"] if depth < 4 else ["scalar", "alias"]))
    if kind == "alias" and anchors:
        return f"*{data.draw(st.sampled_from(anchors))}"
    if kind in ("scalar", "alias"):
        return data.draw(st.sampled_from(["x", "1", "'*q'", "a **b**"]))
    prefix = ""
    if kind == "anchored":
        name = f"n{len(names)}"  # unique, as PyYAML wants
        names.append(name)
        prefix = f"&{name} "
    items = [_node(data, anchors, depth + 1, names) for _ in range(data.draw(st.integers(0, 4)))]
    if kind == "anchored":
        anchors.append(name)  # defined: only what follows may alias it
    return f"{prefix}[{', '.join(items)}]"


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_batches_and_events_agree_on_every_bound(data: st.DataObject) -> None:
    anchors: list[str] = []
    names: list[str] = []
    top = _node(data, anchors, 0, names)
    items = [_node(data, anchors, 1, names) for _ in range(data.draw(st.integers(1, 5)))]
    text = f"top: {top}\ncases:\n" + "".join(f"  - {item}\n" for item in items)
    free = data.draw(st.integers(0, 40)) - len(text.encode())  # the file's allowance: 0 to 40 nodes
    patch = pytest.MonkeyPatch()
    try:
        patch.setattr(_yaml_bounds, "MAX_ALIASES_PER_UNIT", data.draw(st.integers(1, 6)))
        patch.setattr(_yaml_bounds, "MAX_ALIAS_NODES_PER_UNIT", data.draw(st.integers(1, 40)))
        patch.setattr(_yaml_bounds, "MAX_DEPTH", data.draw(st.integers(3, 7)))
        patch.setattr(_yaml_bounds, "_ALIAS_NODES_FREE", free)
        outcomes = []
        for use_c, fast in ((True, True), (True, False), (False, False)):
            try:
                outcomes.append(("items", list(iter_raw_cases(text.encode(), use_c=use_c, fast=fast))))
            except LimitError as exc:
                mark = exc.problem_mark
                assert mark is not None
                outcomes.append(("refused", (exc.problem, mark.line, mark.column)))
    finally:
        patch.undo()
    assert outcomes[0] == outcomes[1] == outcomes[2], text
    if outcomes[0][0] == "items":
        assert outcomes[0][1] == yaml.safe_load(text)["cases"]
