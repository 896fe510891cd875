"""A command imports what it uses: `cases`, `show` and `merge` read cases and stored runs and never load pandas,
bm25s or scipy (together about a second of CPU per process, which every command and every CLI subprocess of the
suite would pay); `run` loads bm25s and scipy when it builds a knowledge-base index, and writes its rows without
pandas."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runners.cli import main

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("pandas", "bm25s", "scipy")
CASE = "generic_kb_gateway_runbook_timeout_t3"

_PROBE = """
import contextlib, io, json, sys
from runners.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    code = main(sys.argv[2:])
print(json.dumps([code, sorted(m for m in {heavy} if m in sys.modules)]))
"""


def _loaded(*argv: str) -> tuple[int, list[str]]:
    """Run `harness-bench ARGV` in a fresh interpreter; its exit code and which of HEAVY it imported."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(heavy=HEAVY), "-", *argv],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    code, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    return int(code), list(loaded)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cost") / "m.duckdb"
    assert main(["run", "--db", str(path), "--case", CASE, "--label", "cost"]) == 0
    return path


@pytest.mark.parametrize(
    "argv",
    [
        ["cases"],
        ["show", "--db", "{db}", "--label", "cost", "--case", CASE],
        ["merge", "{out}", "{db}"],
    ],
    ids=["cases", "show", "merge"],
)
def test_reading_commands_load_no_heavy_library(argv: list[str], db: Path, tmp_path: Path) -> None:
    code, loaded = _loaded(*(a.format(db=db, out=tmp_path / "out.duckdb") for a in argv))
    assert code == 0
    assert loaded == [], f"`harness-bench {argv[0]}` imported {loaded}"


def test_run_writes_without_pandas_and_the_probe_sees_what_it_loads(tmp_path: Path) -> None:
    """`run` of a knowledge-base case builds an index (bm25s, scipy: the check bites) and writes its rows (no
    pandas)."""
    code, loaded = _loaded("run", "--db", str(tmp_path / "r.duckdb"), "--case", CASE)
    assert code == 0
    assert loaded == ["bm25s", "scipy"]
