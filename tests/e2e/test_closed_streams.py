"""A command started with stdout or stderr closed (`>&-`, `2>&-`) keeps its exit code, and no command touches
either stream while it is imported.

Real processes, started with descriptor 1, 2 or both closed: `cases`, `run`, `import` (good, and a bad file),
`whatif` and `gate` exit as they do with both open, and what they write is whole (a database opened while
descriptor 1 was free must not take it: a stray write there would land in the file).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from runners.cli import main
from tests._db import open_read_only

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
CASE = "empty_logs_gateway_timeout_t1"
TIMEOUT = 120.0

IMPORT_TOUCHES_NOTHING = """
import importlib, pkgutil, sys

class Untouchable:
    def __getattr__(self, name):
        raise AssertionError(f"sys.{self.name}.{name} touched at import time")

out, err = Untouchable(), Untouchable()
out.__dict__["name"], err.__dict__["name"] = "stdout", "stderr"
real = sys.stdout, sys.stderr
sys.stdout, sys.stderr = out, err
try:
    import runners.cli
    import runners.commands
    for info in pkgutil.iter_modules(runners.commands.__path__, "runners.commands."):
        importlib.import_module(info.name)
finally:
    sys.stdout, sys.stderr = real
print("imported")
"""


def test_importing_every_command_touches_neither_stdout_nor_stderr() -> None:
    done = subprocess.run([sys.executable, "-c", IMPORT_TOUCHES_NOTHING], capture_output=True, text=True, cwd=ROOT,
                          env=ENV, timeout=TIMEOUT)  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "imported", done.stderr


def _closing(fds: tuple[int, ...]) -> Callable[[], None]:
    def close() -> None:  # in the child, after its descriptors are set up, before harness-bench starts
        for fd in fds:
            os.close(fd)

    return close


def _run(argv: list[str], cwd: Path, closed: tuple[int, ...]) -> subprocess.CompletedProcess[str]:
    """`harness-bench ARGV` started with the descriptors `closed` closed (the others piped)."""
    return subprocess.run([sys.executable, "-m", "runners.cli", *argv], capture_output=True, text=True, cwd=cwd,
                          env=ENV, timeout=TIMEOUT, preexec_fn=_closing(closed))  # fmt: skip


@pytest.fixture(scope="module")
def labelled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A database with labels `base` and `cand` (one case each), and `base` exported as spans."""
    folder = tmp_path_factory.mktemp("closed")
    db, spans = folder / "g.duckdb", folder / "spans.jsonl"
    assert main(["run", "--db", str(db), "--case", CASE, "--label", "base"]) == 0
    assert main(["run", "--db", str(db), "--case", CASE, "--label", "cand", "--model", "scripted:eager"]) == 0
    assert main(["export", "--db", str(db), "--label", "base", "--otel", str(spans)]) == 0
    return db, spans


COMMANDS: dict[str, tuple[Callable[[Path, Path, Path], list[str]], int]] = {
    "cases": (lambda db, spans, tmp: ["cases"], 0),
    "run": (lambda db, spans, tmp: ["run", "--db", str(tmp / "new.duckdb"), "--case", CASE], 0),
    "import": (lambda db, spans, tmp: ["import", str(spans), "--db", str(tmp / "imp.duckdb"), "--label", "i"], 0),
    "import of a bad file": (lambda db, spans, tmp: ["import", str(tmp / "bad.jsonl"), "--db", str(tmp / "x.duckdb"),
                                                     "--label", "i"], 2),
    "whatif": (lambda db, spans, tmp: ["whatif", "--db", str(db), "--label", "base", "--no-gain-threshold", "1"], 0),
    "show": (lambda db, spans, tmp: ["show", "--db", str(db), "--label", "base", "--case", CASE], 0),
    "export --otel /dev/stdout": (lambda db, spans, tmp: ["export", "--db", str(db), "--otel", "/dev/stdout"], 0),
    "gate (inconclusive)": (lambda db, spans, tmp: ["gate", "--db", str(db), "--baseline", "base", "--candidate",
                                                    "cand", "--k", "1"], 3),
}  # fmt: skip


@pytest.mark.parametrize("closed", [(1,), (2,)], ids=["stdout", "stderr"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_closed_stream_keeps_the_exit_code_and_what_is_written(
    command: str, closed: tuple[int, ...], labelled: tuple[Path, Path], tmp_path: Path
) -> None:
    argv, expected = COMMANDS[command]
    (tmp_path / "bad.jsonl").write_text("not json\n")
    done = _run(argv(*labelled, tmp_path), tmp_path, closed)
    assert done.returncode == expected, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout
    for written in ("new.duckdb", "imp.duckdb"):  # whole: readable, its case run there
        if (tmp_path / written).exists():
            con = open_read_only(tmp_path / written)
            assert con.execute("SELECT count(*) FROM case_runs").fetchone() == (1,)
            con.close()
    if command == "gate (inconclusive)":
        assert (tmp_path / "gate-summary.md").read_text().startswith("#")


def test_a_run_with_both_streams_closed_writes_a_whole_database(tmp_path: Path) -> None:
    db = tmp_path / "new.duckdb"
    done = _run(["run", "--db", str(db), "--case", CASE], tmp_path, (1, 2))
    assert done.returncode == 0, done
    con = open_read_only(db)
    assert con.execute("SELECT count(*) FROM case_runs").fetchone() == (1,)
    con.close()
