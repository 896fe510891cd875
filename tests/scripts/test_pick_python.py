"""scripts/pick_python.py: the interpreter `make` builds the venv from — found on PATH, measured by running it, the
fastest CPython 3.11 that can make a venv, `python3` when none can."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from scripts.pick_python import EXTRA_FOLDERS, FALLBACK, Candidate, candidates, measure, parse_probe, pick
from tests._durations import ROOT


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


def test_candidates_follow_path_order_and_list_a_file_once(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    real = _script(second / "python3.11", "exit 1")
    (second / "python3").symlink_to(real)  # the same file under another name
    _script(first / "python3", "exit 1")
    (first / "python3.11").write_text("not executable")
    found = candidates(os.pathsep.join([str(first), "", str(second)]))
    assert found[:2] == [str(first / "python3"), str(second / "python3.11")]
    assert all(not f.startswith(str(tmp_path)) for f in found[2:])  # then the distribution's folders'
    assert all(Path(f).parent.as_posix() in EXTRA_FOLDERS for f in found[2:])


def test_this_interpreter_qualifies_and_others_do_not(tmp_path: Path) -> None:
    here = measure(sys.executable)
    assert here is not None and here.seconds > 0
    assert Path(here.executable).resolve() == Path(sys.executable).resolve()
    newer = _script(tmp_path / "python3.12", f'echo "3 12 0.01 {tmp_path}/python3.12"')
    broken = _script(tmp_path / "python3", "echo 'No module named ensurepip' >&2; exit 1")
    assert measure(str(newer)) is None
    assert measure(str(broken)) is None
    assert measure(str(tmp_path / "missing")) is None


def test_the_fastest_wins_and_none_falls_back() -> None:
    slow, fast = Candidate(executable="/slow/python3", seconds=0.2), Candidate(executable="/fast/python3", seconds=0.1)
    assert pick([slow, fast]) == "/fast/python3"
    assert pick([]) == FALLBACK


@given(st.text())
def test_any_probe_output_reads_as_a_candidate_or_none(text: str) -> None:
    read = parse_probe(text)
    assert read is None or (read.executable and 0 < read.seconds < math.inf)


@given(st.floats(min_value=1e-6, max_value=1e3), st.from_regex(r"/[a-z0-9/ ._-]*[a-z0-9]", fullmatch=True))
def test_a_well_formed_probe_line_reads_back(seconds: float, exe: str) -> None:
    assert parse_probe(f"3 11 {seconds!r} {exe}\n") == Candidate(executable=exe, seconds=seconds)
    assert parse_probe(f"3 12 {seconds!r} {exe}\n") is None


def test_the_command_prints_one_interpreter_that_makes_venvs() -> None:
    done = subprocess.run([sys.executable, "scripts/pick_python.py"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip
    chosen = done.stdout.strip()
    assert chosen == FALLBACK or measure(chosen) is not None
