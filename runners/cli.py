"""harness-bench: run diagnosis-agent evaluation cases through the Harness and
record metrics.

Exit codes: 0 ok · 1 regression (gate) or failing cases with --strict · 2
unusable input · 3 inconclusive (gate without the power to pass;
--allow-inconclusive makes it 0) · 74 the database could not be written (full
disk, I/O error) · 130 interrupted (Ctrl-C) · 143 terminated (SIGTERM);
interrupted runs and sweeps continue with --resume.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from rich.text import Text

from harness import __version__
from runners.commands._common import (
    EXIT_INCONCLUSIVE,
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_STORAGE,
    ArgumentError,
    Parser,
    err,
    error,
    plug_closed_streams,
    say,
    stdout_may_close,
)
from runners.plan.declarations import Declarations, declaring
from runners.plan.flags import add_version
from runners.plan.rules import UsageError
from runners.run import interrupts

__all__ = [
    "EXIT_OK",
    "EXIT_REGRESSION",
    "EXIT_INPUT",
    "EXIT_INTERRUPTED",
    "EXIT_INCONCLUSIVE",
    "EXIT_STORAGE",
    "COMMANDS",
    "build_parser",
    "main",
]


# -- parser ---------------------------------------------------------------------------------------
COMMANDS: dict[str, str] = {
    "cases": "cases", "run": "run", "serve-sim": "serve_sim", "serve-model": "serve_model", "sweep": "sweep",
    "recommend": "recommend", "whatif": "whatif", "compare-stops": "compare_stops", "gate": "gate",
    "report": "report", "real-models": "real_models", "judge-check": "judge_check", "guard-check": "guard_check",
    "merge": "merge", "migrate": "migrate", "show": "transcripts", "diff": "transcripts", "export": "transcripts",
    "schema": "schema", "tag-probe": "tag_probe", "capture": "capture", "import": "import_traces",
    "import-suite": "import_suite",
}  # fmt: skip
"""Each command's name and the module of `runners/commands/` that registers it, in the order `--help` lists them
(`transcripts` registers show, diff and export)."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every command's parser, in the order `--help` lists them; each command module adds its own. Given the
    `command` a command line names, only its module is imported and registered: a command starts without importing
    and declaring the twenty others (the parser a command parses with is the same either way)."""
    parser = Parser(prog="harness-bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_version(parser, f"harness-bench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    modules = [COMMANDS[command]] if command in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for name in modules:
        importlib.import_module(f"runners.commands.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None, *, declarations: Declarations | None = None) -> int:
    """Run one command; `declarations`: the models that declare the run settings and options (default the bench's
    own), in effect for the whole command — its parser, its runs and the databases it opens."""
    plug_closed_streams()  # started with stdout or stderr closed: the command runs, and exits, as with them
    for stream in (sys.stdout, sys.stderr):  # an ASCII-only terminal gets '?' for '…', never an exit 2
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", "strict") == "strict":
            reconfigure(errors="replace")
    with declaring(declarations), stdout_may_close():
        words = list(sys.argv[1:] if argv is None else argv)
        parser = build_parser(words[0] if words else None)
        try:
            args = parser.parse_args(argv)
        except ArgumentError as exc:
            error(str(exc))
            return EXIT_INPUT
        if not getattr(args, "command", None):
            parser.print_help()
            return EXIT_OK
        if args.command in ("run", "sweep", "merge"):
            # They write metrics: Ctrl-C and SIGTERM set one flag and never raise (runners/run/interrupts.py); the
            # command stops between DuckDB statements, keeps what is whole and exits 130 or 143 (run and sweep
            # with the resume command, merge with OUT as it was).
            with interrupts.installed() as args.interrupts:
                return _dispatch(args)
        if args.command == "serve-sim":  # a server: Ctrl-C stops it, SIGTERM ends it, as for any process
            return _dispatch(args)
        with interrupts.raising() as signals:  # the others write nothing or whole files: a signal raises
            return _dispatch(args, signals)


def _dispatch(args: argparse.Namespace, signals: interrupts.Interrupts | None = None) -> int:
    """Run the command; unusable input is one line and exit 2; an interrupt `signals` recorded is 130 or 143."""
    import duckdb

    from runners.domain.evalset import EvalSetError
    from runners.plan.rules import BenchInputError
    from runners.store.errors import MetricsDbError, MetricsWriteError
    from runners.store.output_files import OutputWriteError

    try:
        try:
            result: int = args.func(args)
        except Exception:  # inside a DuckDB statement a KeyboardInterrupt comes back as RuntimeError or duckdb.Error
            if signals is not None and signals.received is not None:
                raise KeyboardInterrupt from None
            raise
        if signals is not None and signals.received is not None:  # a handler swallowed the KeyboardInterrupt
            raise KeyboardInterrupt
        return result
    except KeyboardInterrupt:
        say("interrupted", stderr=True)
        return (signals.exit_code if signals is not None else None) or EXIT_INTERRUPTED
    except EvalSetError as exc:
        if len(exc.problems) == 1:
            error(exc.problems[0])
            return EXIT_INPUT
        err.print(Text.assemble(("error: ", "red"), f"{len(exc.problems)} problem(s) in the evaluation set:"))
        for problem in exc.problems:
            err.print(Text(f"  - {problem}"), soft_wrap=True)
        return EXIT_INPUT
    except (UsageError, BenchInputError, MetricsDbError, OutputWriteError, ValueError) as exc:
        error(str(exc))
        return EXIT_INPUT
    except MetricsWriteError as exc:  # before a bench run or sweep started: nothing of it is stored
        where = getattr(args, "db", None) or "the database"
        error(f"writing {where} failed ({exc}): nothing was started; {exc.fix}")
        return EXIT_STORAGE
    except duckdb.Error as exc:  # a file DuckDB opened but cannot read or write (truncated, damaged)
        where = getattr(args, "db", None) or getattr(args, "out", None) or "the database"
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        error(f"{where}: DuckDB cannot read or write it ({first}); use another --db or restore the file")
        return EXIT_INPUT


if __name__ == "__main__":
    sys.exit(main())
