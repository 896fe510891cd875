"""`harness-bench import-suite --from holmesgpt PATH --out DIR`: another project's evaluation cases as a suite the
bench runs (`run --evalset DIR`), written whole or not at all, with every folder it leaves out and why."""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

from runners.commands._common import EXIT_OK, _fail, _sub, say
from runners.plan.flags import Flag, FlagModel

__all__ = ["register", "run"]


class SuiteSource(StrEnum):
    """Whose evaluation cases are read."""

    HOLMESGPT = "holmesgpt"
    """HolmesGPT's `tests/llm/fixtures` (test_ask_holmes, test_investigate, test_workload_health)."""


class _ImportSuiteFlags(FlagModel):
    """`import-suite`'s arguments: what is read, from where, and the folder the suite is written to."""

    source: Annotated[SuiteSource, Flag(flag="--from", metavar="SOURCE", required=True)]
    """whose cases PATH holds: holmesgpt (its tests/llm/fixtures folder, a layout folder or one case folder)"""
    path: Annotated[Path, Flag(positional=True, metavar="PATH")]
    """the folder of cases to convert"""
    out: Annotated[Path, Flag(metavar="DIR", required=True)]
    """the suite's folder (new or empty): suite.yaml, one file of cases per layout, not_converted.json"""


def register(sub: Any) -> None:
    p = _sub(sub, "import-suite", "convert another project's evaluation cases into a suite (`run --evalset DIR`)",
             "Reads HolmesGPT's LLM evaluation fixtures (PATH: its tests/llm/fixtures folder, one of its layout"
             " folders, or one case folder) and writes a suite to DIR: suite.yaml (the tools declared from the mocks,"
             " the families, the agent's role), one file of cases per layout (each runnable folder a case: its"
             " question, expected_output as the root-cause statement, its mocks as fixtures, the mocked path as its"
             " trajectory) and not_converted.json (every folder left out, with the reason). DIR must be new or empty"
             " and outside PATH; nothing is written when the conversion fails. docs/your-agent.md walks through"
             " it.")  # fmt: skip
    _ImportSuiteFlags.add_flags(p, "import-suite")
    p.set_defaults(func=run)


def _check_out(out: Path, source: Path) -> None:
    if out.is_symlink():
        _fail(f"--out {out}: a symbolic link; give a new folder")
    if out.exists() and not out.is_dir():
        _fail(f"--out {out}: not a folder (a file, device or FIFO); give a new folder")
    if out.is_dir() and any(out.iterdir()):
        _fail(f"--out {out}: not empty; give a new or empty folder")
    resolved, src = out.resolve(), source.resolve()
    if resolved == src or src in resolved.parents or resolved in src.parents:
        _fail(f"--out {out}: inside or around PATH {source}; give a folder outside what is read")


def run(args: argparse.Namespace) -> int:
    from runners.interchange.holmesgpt import convert, suite_files

    flags = _ImportSuiteFlags.from_args(args, "import-suite")
    if not flags.path.is_dir():
        _fail(f"{flags.path}: no such folder" if not flags.path.exists() else f"{flags.path}: not a folder")
    _check_out(flags.out, flags.path)
    try:
        conversion = convert(flags.path)
    except ValueError as exc:
        _fail(str(exc))
    if not conversion.converted:
        _fail(f"{flags.path}: no case folder could be converted ({len(conversion.skipped)} left out; the first:"
              f" {conversion.skipped[0].folder}: {conversion.skipped[0].reason})")  # fmt: skip
    files = suite_files(conversion)
    parent = flags.out.absolute().parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{flags.out.name}-", dir=parent))
    try:
        for name, text in files.items():
            (staging / name).write_text(text, encoding="utf-8")
        if flags.out.is_dir():
            flags.out.rmdir()  # empty, checked above
        os.replace(staging, flags.out)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        _fail(f"cannot write {flags.out}: {exc.strerror or exc}")
    by_family: dict[str, int] = {}
    for cases in conversion.cases.values():
        for case in cases:
            by_family[case.family] = by_family.get(case.family, 0) + 1
    families = ", ".join(f"{n} {k}" for k, n in sorted(by_family.items()))
    say(f"converted {conversion.converted} case folders into {flags.out} ({len(conversion.suite.tools)} tools;"
        f" families: {families})")  # fmt: skip
    say(f"not converted: {len(conversion.skipped)} (in {flags.out / 'not_converted.json'})", wrap=False)
    for s in conversion.skipped:
        say(f"  {s.folder}: {s.reason}", wrap=False)
    return EXIT_OK
