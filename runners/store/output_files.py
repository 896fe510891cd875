"""Output files written whole or not at all, and only ever as regular files.

The one output-path rule (`check_output_path`), applied by every writer before it writes and again as it writes:
an output names a regular file or nothing yet. A device (`/dev/full`, `/dev/null`, a copy made with `mknod`), a
FIFO, a socket, a folder or a symbolic link named as an output is refused with one line naming the flag and what
the path is, and left exactly as it was (never written through, never replaced by a file). The few outputs whose
command documents a stream (`STREAM_PATH`, `/dev/stdout`) write to this process's stdout instead of opening it.

A full disk or a read-only folder leaves no half file (a temporary file renamed into place); and no output is ever
one of the command's inputs (its database, an evaluation file, a cassette), whatever name it is given."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import stat
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TextIO

__all__ = [
    "STREAM_PATH",
    "NamedPath",
    "OutputIsInputError",
    "OutputKind",
    "OutputPathError",
    "OutputWriteError",
    "check_output_path",
    "check_outputs",
    "opened_text",
    "path_kind",
    "replacing",
    "same_file",
    "write_bytes",
    "write_text",
]

STREAM_PATH = "/dev/stdout"
"""The name under which an output that may be a stream is written to stdout (exactly this spelling)."""


class OutputWriteError(Exception):
    """An output file could not be written (read-only folder, full disk, I/O error); names the path."""

    def __init__(self, path: Path, exc: OSError) -> None:
        super().__init__(f"cannot write {path}: {exc.strerror or exc}; choose another path or free some space")
        self.path = path
        self.exc = exc

    def __reduce__(self) -> tuple[type[OutputWriteError], tuple[Path, OSError]]:
        # raised in a worker process (a cassette saved there) and unpickled by the driver
        return type(self), (self.path, self.exc)


@dataclass(frozen=True)
class NamedPath:
    """A file a command reads or writes, with the flag (or role) that named it."""

    name: str
    """How the user named it: `--db`, `--html`, `OUT`, `SHARD`, `--out`."""
    path: Path
    """The path as given."""
    stream: bool = False
    """An output its command may write as a stream: named `STREAM_PATH`, it goes to stdout."""


class OutputKind(StrEnum):
    """What an output path names, once the output-path rule accepted it."""

    FILE = "file"
    """A regular file, or nothing yet: written through a temporary file renamed into place."""
    STREAM = "stream"
    """`STREAM_PATH` of an output that may be a stream: written to this process's stdout."""


class OutputPathError(ValueError):
    """An output path names something other than a regular file (exit 2, nothing written, the path left as it was)."""


def _what(mode: int) -> str | None:
    """What a non-regular file is, in the words the refusal uses (None: a regular file)."""
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket")):  # fmt: skip
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def check_output_path(output: NamedPath) -> OutputKind:
    """The one output-path rule: `output` names a regular file or nothing yet (in a folder that is, or can be,
    created) — else OutputPathError, one line naming the flag, the path and what it is. A symbolic link is refused
    whatever it points to (written through, it would change a file the command was never given; replaced, the
    link would be lost); `STREAM_PATH` of an output that may be a stream is the stream."""
    path = output.path
    if str(path) == STREAM_PATH:
        if output.stream:
            return OutputKind.STREAM
        raise OutputPathError(f"{output.name} {path}: this output is written as a file, never to stdout; name a file")
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    except NotADirectoryError:
        mode = None  # a parent is a file: named below
    except OSError as exc:
        raise OutputPathError(f"{output.name} {path}: cannot be checked ({exc.strerror or exc})") from None
    if mode is None:
        for parent in path.parents:
            try:
                parent_mode = os.stat(parent).st_mode
            except OSError:
                continue  # missing: created when the output is written
            if not stat.S_ISDIR(parent_mode):
                raise OutputPathError(f"{output.name} {path}: {parent} is a file, not a folder")
            break
        return OutputKind.FILE
    what = _what(mode)
    if what is None:
        return OutputKind.FILE
    if what == "a folder":
        raise OutputPathError(f"{output.name} {path} is a folder; give a file path")
    stream = f" (or {STREAM_PATH} to write to stdout)" if output.stream else ""
    if what == "a symbolic link":
        try:
            shown = f" (to {os.readlink(path)})"
        except OSError:
            shown = ""
        raise OutputPathError(f"{output.name} {path} is a symbolic link{shown}; name the file itself{stream}: an"
                              " output is never written through a link, nor over it")  # fmt: skip
    raise OutputPathError(f"{output.name} {path} is {what}, not a regular file; name a file{stream}: an output is"
                          " never written into one, nor over it")  # fmt: skip


def path_kind(path: Path) -> str | None:
    """What `path` is when not a regular file (`a FIFO (named pipe)`, `a character device`, …), following symbolic
    links; None for a regular file or nothing at all."""
    try:
        return _what(os.stat(path).st_mode)
    except OSError:
        return None


class OutputIsInputError(ValueError):
    """An output path is one of the command's inputs, or another of its outputs (exit 2, nothing written)."""

    def __init__(self, output: NamedPath, other: NamedPath, *, is_output: bool = False) -> None:
        alias = "" if output.path == other.path else f" ({other.path})"
        if is_output:
            what = f"also the {other.name} file{alias}: one output would overwrite the other"
        else:
            what = f"the {other.name} file{alias} this command reads: an output never overwrites an input"
        super().__init__(f"{output.name} {output.path} is {what}; choose another path")
        self.output = output
        self.other = other


def same_file(a: Path, b: Path) -> bool:
    """One file under two names (a symlink, a hard link, `../x`): compared by identity (device and inode)."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): only the resolved names can be compared
        try:
            return a.resolve() == b.resolve()
        except (OSError, RuntimeError):  # a symlink loop: it cannot be an existing input
            return False


def check_outputs(outputs: Sequence[NamedPath], inputs: Sequence[NamedPath]) -> None:
    """Every output a command will write, checked before anything is written: each by the output-path rule
    (`check_output_path`), and none an input or named by another output (OutputIsInputError) — however named (a
    symlink to it, a hard link, another relative path)."""
    # an output that is an input is named as such first (a symlink to the database is refused as the database)
    files = [o for o in outputs if not (o.stream and str(o.path) == STREAM_PATH)]
    for i, output in enumerate(files):
        for named in inputs:
            if same_file(output.path, named.path):
                raise OutputIsInputError(output, named)
        for earlier in files[:i]:
            if same_file(output.path, earlier.path):
                raise OutputIsInputError(output, earlier, is_output=True)
    for output in outputs:
        check_output_path(output)


def _named(output: Path | NamedPath) -> NamedPath:
    return output if isinstance(output, NamedPath) else NamedPath("output", output)


@contextlib.contextmanager
def opened_text(output: Path | NamedPath) -> Iterator[TextIO]:
    """A text stream for `output`, by the output-path rule: stdout for a stream, else a temporary file beside it
    (its folder created if missing) renamed into place when the block completes — removed when it raises or is
    interrupted, so the file is absent, unchanged or complete. A write that fails is OutputWriteError."""
    named = _named(output)
    if check_output_path(named) is OutputKind.STREAM:
        stdout = sys.stdout
        if stdout is None:  # started with stdout closed (`>&-`): discarded, as print() discards
            with open(os.devnull, "w", encoding="utf-8") as sink:
                yield sink
            return
        try:
            yield stdout
            stdout.flush()
        except OSError as exc:
            raise OutputWriteError(named.path, exc) from None
        return
    with replacing(named) as tmp:
        try:
            with tmp.open("w", encoding="utf-8", newline="\n") as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:
            raise OutputWriteError(named.path, exc) from None


def write_bytes(output: Path | NamedPath, data: bytes) -> None:
    """Write `data` to `output` (a file: never a stream) through a temporary file in the same folder, renamed into
    place once complete; the folder is created if missing. The output-path rule is applied first: a device, FIFO,
    socket or symlink is refused (OutputPathError), left as it was. An interrupt leaves no temporary file."""
    named = _named(output)
    with replacing(dataclasses.replace(named, stream=False)) as tmp:
        try:
            with tmp.open("wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:
            raise OutputWriteError(named.path, exc) from None


def write_text(output: Path | NamedPath, text: str) -> None:
    """`text` written to `output` as UTF-8, whole (`opened_text`): a file, or stdout for a stream."""
    with opened_text(output) as f:
        f.write(text)


@contextlib.contextmanager
def replacing(output: Path | NamedPath, *, companions: Sequence[str] = ()) -> Iterator[Path]:
    """A fresh temporary path beside `output` (no file there yet) for a writer that needs a path of its own (Inspect
    AI's log writer, DuckDB); renamed onto `output` when the block completes, removed — with its `companions`
    (suffixes such as `.wal`) — when it raises or is interrupted, so the output is absent, unchanged or complete.
    The output-path rule is applied first (a file, never a stream)."""
    named = _named(output)
    path = named.path
    check_output_path(dataclasses.replace(named, stream=False))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        os.unlink(name)  # the writer creates it (DuckDB refuses an empty file)
    except OSError as exc:
        raise OutputWriteError(path, exc) from None
    tmp = Path(name)
    try:
        yield tmp
        try:
            check_output_path(dataclasses.replace(named, stream=False))  # still a file: nothing put there since
            with contextlib.suppress(FileNotFoundError):  # a replaced file keeps its mode (a 0600 stays private)
                os.chmod(tmp, stat.S_IMODE(path.stat().st_mode))
            os.replace(tmp, path)
        except OSError as exc:
            raise OutputWriteError(path, exc) from None
    except BaseException:
        for leftover in (tmp, *(Path(f"{tmp}{c}") for c in companions)):
            leftover.unlink(missing_ok=True)
        raise
