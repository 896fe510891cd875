"""What every command shares: exit codes, the consoles, the one-line error, argparse types and the parser that turns
a refused flag into one line, the checks made before anything is written, progress bars and the subparser factory."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO, cast

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from runners.decisions.choices import Objective, RecommendChoices, Rule
from runners.domain.redaction import redact
from runners.domain.suggest import did_you_mean
from runners.plan.flags import Flag, bounded_float, bounded_int, presented
from runners.plan.rules import UsageError
from runners.rendering import tables
from runners.rendering.safe_text import terminal
from runners.store.output_files import NamedPath, check_outputs

__all__ = [
    "EXIT_OK",
    "EXIT_REGRESSION",
    "EXIT_INPUT",
    "EXIT_INTERRUPTED",
    "EXIT_INCONCLUSIVE",
    "EXIT_STORAGE",
    "RecommendFlags",
    "out",
    "err",
    "_fail",
    "say",
    "error",
    "_say",
    "_error",
    "_int_in",
    "_float_in",
    "ArgumentError",
    "Parser",
    "_sub",
    "_add_selection",
    "_add_db",
    "_add_recommend_choices",
    "_check_db",
    "_check_outputs",
    "_load_with_progress",
    "_progress",
    "plug_closed_streams",
    "stdout_may_close",
]

EXIT_OK, EXIT_REGRESSION, EXIT_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_INCONCLUSIVE = 3
"""The gate had not the power to pass (too few cases, or an MDE above --max-mde)."""
EXIT_STORAGE = 74
"""The database could not be written (full disk, I/O error): the run stopped `interrupted` (sysexits EX_IOERR)."""

out = tables.deferred_console()
err = tables.deferred_console(stderr=True)


def _fail(message: str) -> NoReturn:
    raise UsageError(message)


def say(text: str, *, stderr: bool = False, wrap: bool = True) -> None:
    """Print plain text: never read as markup, control characters shown escaped, anything shaped like a secret
    redacted (a path or a trace's id may hold one); wrapped between words at the console width (`wrap=False`: a
    line never broken, e.g. a command to copy)."""
    (err if stderr else out).print(Text(terminal(redact(text))), soft_wrap=not wrap)


def error(text: str) -> None:
    """One line on stderr (control characters shown escaped, anything shaped like a secret redacted)."""
    err.print(Text.assemble(("error: ", "red"), " ".join(terminal(redact(text)).split())), soft_wrap=True)


# The commands' own spelling of the two (they sit beside this module); the CLI entry point, in another package,
# imports the public names.
_say = say
_error = error


# -- a closed stdout ----------------------------------------------------------------------------------
def plug_closed_streams() -> None:
    """A process started with stdout or stderr closed (`>&-`, `2>&-`: Python sets the stream to None) gets
    /dev/null in its place, at its descriptor when that is still free: what would be printed there is discarded,
    the exit code stays the command's, and no file the command opens later (a database) takes descriptor 1 or 2,
    where a stray write would land in it."""
    for fd, name in ((1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is not None:
            continue
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.fstat(fd)
        except OSError:  # still free: /dev/null takes it
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            null = fd
        setattr(sys, name, open(null, "w", encoding="utf-8", errors="replace", closefd=null != fd))


@contextlib.contextmanager
def stdout_may_close() -> Iterator[None]:
    """While a command runs, sys.stdout is a `_ReaderMayLeave` (the consoles look sys.stdout up at each write)."""
    real = sys.stdout
    if real is None:  # started with stdout closed (`>&-`): print() already discards
        yield
        return
    sys.stdout = cast(TextIO, _ReaderMayLeave(real))
    try:
        yield
    finally:
        sys.stdout = real


class _ReaderMayLeave:
    """sys.stdout while a command runs. When its reader closes the pipe (`| head -1`), the rest of the output is
    discarded and the command goes on to its verdict and its files: a closed stdout is no error and changes no
    exit code (without this, a BrokenPipeError traceback, or rich's exit 1 even on a gate's pass)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.gone = False
        """The reader closed the pipe: nothing more is written."""

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._leave()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._leave()

    def _leave(self) -> None:
        self.gone = True
        # The text still buffered would be flushed again at exit ("Exception ignored … BrokenPipeError", exit 120):
        # point the descriptor at /dev/null so that flush succeeds.
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self._stream.fileno())
            finally:
                os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


# -- argument types: refused by argparse with one line naming the flag, before anything runs ---------
# Every bounded numeric flag takes its type from one factory (runners/plan/flags.py), beside the run options'.
_int_in = bounded_int
_float_in = bounded_float


class ArgumentError(Exception):
    """A flag argparse refused: one line naming it, exit 2 (main prints it)."""


class Parser(argparse.ArgumentParser):
    """argparse whose errors reach `main` as one line (`--flag VALUE: what is allowed`), not a usage dump."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A value that starts with '-' and a digit is a value, never an option: `--no-gain-threshold -1,2`
        # reaches the flag's own check ("must be ≥ 1") instead of "expected one argument".
        self._negative_number_matcher = re.compile(r"^-\d[\d.,eE+-]*$")

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        # The words given, so that an unrecognised flag can be matched against the options of the command it was
        # given to (argparse reports it from the top-level parser, which knows no command's options).
        self._given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        hint = self._suggestion(message)
        if hint:  # the suggestion replaces the list of every choice
            message = re.sub(r" \(choose from .*\)$", "", message, flags=re.S)
        # a value is quoted as given, but a long one (a 4,300-digit number) is shortened to what names it
        message = re.sub(r"'([^']{80,})'", lambda v: f"'{v.group(1)[:40]}…' ({len(v.group(1)):,} characters)", message)
        message = re.sub(r"\b\d{80,}", lambda v: f"{v.group(0)[:40]}… ({len(v.group(0)):,} digits)", message)
        m = re.fullmatch(r"argument ([^:]+): (.*)", message, flags=re.S)
        if m:
            flag = m.group(1).split("/")[-1]
            message = f"{flag} {m.group(2)}"
        raise ArgumentError(f"{message}{hint} (see {self.prog} --help)")

    def _suggestion(self, message: str) -> str:
        """A "did you mean" for a mistyped command or flag (argparse only does so from Python 3.14)."""
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message, flags=re.S)
        if choice:
            return did_you_mean(choice.group(1), re.findall(r"'([^']*)'", choice.group(2)))
        unknown = re.fullmatch(r"unrecognized arguments: (.*)", message, flags=re.S)
        if not unknown:
            return ""
        first = next((w for w in unknown.group(1).split() if w.startswith("--")), None)
        if first is None:
            return ""
        return did_you_mean(first.split("=", 1)[0], self._options_of_command())

    def _options_of_command(self) -> list[str]:
        """The option strings of the command named among the words given (this parser's own when none is)."""
        parsers: list[argparse.ArgumentParser] = [self]
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                given = getattr(self, "_given", [])
                chosen = [action.choices[w] for w in given if w in action.choices]
                parsers = chosen[:1] or parsers
        return [o for p in parsers for a in p._actions for o in a.option_strings if o.startswith("--")]


# -- shared options -----------------------------------------------------------------------------
def _sub(sub: Any, name: str, summary: str, description: str | None = None) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=summary.replace("%", "%%"), description=description or summary + "."
    )
    return parser


def _add_selection(p: argparse.ArgumentParser, command: str) -> None:
    """--evalset and --case of a command that reads cases but runs none (declared with the run's selection:
    runners/plan/options.py)."""
    from runners.plan.options import Selection

    Selection.add_flags(p, command, only=("evalsets", "case_ids"))


def _add_db(p: argparse.ArgumentParser) -> None:
    """--db of a command that reads (or upgrades) one metrics database (declared where a run stores its results:
    runners/plan/options.py)."""
    from runners.plan.options import Storage

    Storage.add_flags(p, "", only=("db",), grouped=False)


class RecommendFlags(RecommendChoices):
    """`recommend`'s and `report`'s choices as their flags: each field of the decision's `RecommendChoices`
    (runners/decisions/choices.py: default, bounds, refusal) with its help and placeholder."""

    objective: Objective = presented(
        RecommendChoices, "objective", Flag(help="what 'cheapest' means (default {default})")
    )
    rule: Rule = presented(
        RecommendChoices, "rule",
        Flag(help="non-inferiority: the cheapest configuration shown within --margin of the best recall and honest"
                  " fallback (default); max-recall: the highest recall first"),
    )  # fmt: skip
    margin: float = presented(
        RecommendChoices,
        "margin",
        Flag(metavar="RATE", help="non-inferiority margin in [0, 1] (default {default:g} = {points:g} points)"),
    )


def _add_recommend_choices(p: argparse.ArgumentParser, command: str) -> None:
    """--objective, --rule and --margin of `recommend` and `report`, from their one declaration."""
    RecommendFlags.add_flags(p, command)


# -- checks before any file is created ----------------------------------------------------------
def _check_db(path: Path, *, must_exist: bool) -> None:
    from runners.store.connection import check_database_file

    check_database_file(path, must_exist=must_exist)


def _check_outputs(outputs: Sequence[NamedPath], inputs: Sequence[NamedPath]) -> None:
    """Every output file a command will write, by the one output-path rule (runners/store/output_files.py): a regular
    file or nothing yet (never a device, FIFO, socket, folder or symlink; `/dev/stdout` only where the output is a
    stream), never one of the command's `inputs` nor another output, however named — all checked before anything
    is written."""
    check_outputs(outputs, inputs)


# -- progress ---------------------------------------------------------------------------------------
def _load_with_progress(load: Callable[[], Sequence[Any]]) -> Sequence[Any]:
    """`load()` with a progress bar on stderr for the cases being validated, when stderr is a terminal and the
    load lasts more than a second (rich shows nothing before then: `transient`, drawn once a file reports);
    in a pipe nothing is drawn."""
    if not sys.stderr.isatty():
        return load()
    import time

    from runners.domain.evalset import reporting_progress

    started = time.monotonic()
    progress = Progress(
        TextColumn("validating {task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
        console=tables.make_console(stderr=True), transient=True,
    )  # fmt: skip
    tasks: dict[Path, Any] = {}

    def report(path: Path, done: int, total: int) -> None:
        if path not in tasks:
            if time.monotonic() - started < 1.0 and done == total:
                return  # a small file: no bar at all
            if not progress.live.is_started:
                progress.start()
            tasks[path] = progress.add_task(path.name, total=total)
        progress.update(tasks[path], completed=done)

    try:
        with reporting_progress(report):
            return load()
    finally:
        progress.stop()


def _progress() -> Progress | LineProgress:
    """The progress of a bench run or sweep on stderr: a bar on a terminal (done of planned, passed, times), plain
    lines elsewhere (a CI log), so a long run is never silent."""
    if not err.is_terminal:
        return LineProgress()
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[passed]}"),
        TimeElapsedColumn(), TimeRemainingColumn(), console=err,
    )  # fmt: skip


class LineProgress:
    """Progress as plain lines on stderr where no bar can be drawn (a pipe, a CI log): nothing for a run shorter
    than `quiet_seconds`, then a line per tenth done (at most one every `min_seconds`) or every `max_seconds`, and a
    last line when it ends — the same interface as rich's `Progress` for the one task a command shows."""

    def __init__(self, *, quiet_seconds: float = 10.0, min_seconds: float = 5.0, max_seconds: float = 60.0,
                 clock: Callable[[], float] | None = None) -> None:  # fmt: skip
        import time

        self._clock = clock or time.monotonic
        self._quiet, self._min, self._max = quiet_seconds, min_seconds, max_seconds
        self._started = self._clock()
        self._last: float | None = None
        self._step = -1
        self._state: dict[str, Any] = {"description": "", "completed": 0, "total": None, "passed": ""}

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._last is not None:  # a line was printed: say where it ended
            self._line()

    def add_task(self, description: str, *, total: int | None = None, **fields: Any) -> TaskID:
        self._state.update(description=description, total=total, **fields)
        return TaskID(0)

    def update(self, task: TaskID, **fields: Any) -> None:
        self._state.update(fields)
        now = self._clock()
        if now - self._started < self._quiet:
            return
        total, done = self._state["total"], self._state["completed"]
        step = int(10 * done / total) if total else -1
        since = now - self._last if self._last is not None else None
        if since is None or (step > self._step and since >= self._min) or since >= self._max:
            self._step = step
            self._line()

    def _line(self) -> None:
        self._last = self._clock()
        s = self._state
        total = s["total"]
        of = f"{s['completed']}/{total} ({s['completed'] / total:.0%})" if total else f"{s['completed']}"
        passed = f", {s['passed']}" if s.get("passed") else ""
        elapsed = int(self._last - self._started)
        say(f"{s['description']}: {of} case runs{passed}, {elapsed // 60}m{elapsed % 60:02d}s", stderr=True)
