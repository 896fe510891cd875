"""Several CLI commands in one fresh process: the CLI's imports, most of a short command's cost, paid once.

`BATCH` is a script (`python -c BATCH RESULTS ARGVS_JSON`) that runs the CLI's `main` on each argv of the JSON list in
turn, each with its own captured stdout and stderr (an exception `main` lets out is that command's traceback and exit
1, as `python -m runners.cli` would print and exit; the next command still runs), and writes them to RESULTS;
`read_batch` reads them back. A test that measures the process (its peak memory) measures every command in it: a peak
under a bound for the process is under it for each command.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

BATCH = """
import contextlib, io, json, sys, traceback
from runners.cli import main
results = []
for argv in json.loads(sys.argv[2]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except BaseException:
            traceback.print_exc()
            code = 1
    results.append({"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()})
with open(sys.argv[1], "w", encoding="utf-8") as f:
    json.dump(results, f)
"""


@dataclass(frozen=True)
class Ran:
    """One command of a batch."""

    code: int
    """Its exit code."""
    stdout: str
    """What it printed on stdout."""
    stderr: str
    """What it printed on stderr (a traceback included)."""


def batch_argv(python: str, results: Path, argvs: list[list[str]]) -> list[str]:
    """The command line running `argvs` in one process with `python`, writing to `results` (outside any folder a
    test watches for files)."""
    return [python, "-c", BATCH, str(results), json.dumps(argvs)]


def read_batch(results: Path) -> list[Ran]:
    """Each command's exit code and output, in order."""
    return [Ran(**r) for r in json.loads(results.read_text(encoding="utf-8"))]
