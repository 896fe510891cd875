"""Output files written whole or not at all: a full disk or a read-only folder leaves no half file; and no output
is ever one of the command's inputs (its database, an evaluation file, a cassette), whatever name it is given."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "NamedPath",
    "OutputIsInputError",
    "OutputWriteError",
    "check_outputs",
    "replacing",
    "same_file",
    "write_bytes",
    "write_text",
]


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
    """Refuse (OutputIsInputError) an output that is an input, or that another output also names; checked
    before anything is written."""
    for i, output in enumerate(outputs):
        for named in inputs:
            if same_file(output.path, named.path):
                raise OutputIsInputError(output, named)
        for earlier in outputs[:i]:
            if same_file(output.path, earlier.path):
                raise OutputIsInputError(output, earlier, is_output=True)


def write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same folder, renamed into place once complete
    (a special file such as /dev/full is written directly: it cannot be renamed over; a symlink is written
    through, its target replaced). The folder is created if missing. An interrupt leaves no temporary file."""
    target = path
    try:
        if path.is_symlink():
            try:
                target = path.resolve()
            except RuntimeError:  # a symlink loop (Python before 3.13 raises RuntimeError for it)
                raise OSError(40, "too many levels of symbolic links") from None
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists() and not target.is_file():
            with target.open("wb") as f:
                f.write(data)
            return
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        try:
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(tmp, 0o666 & ~mask)  # what a plain open() would have created
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise OutputWriteError(path, exc) from None


def write_text(path: Path, text: str) -> None:
    """`write_bytes` of UTF-8 text."""
    write_bytes(path, text.encode("utf-8"))


@contextlib.contextmanager
def replacing(path: Path, *, companions: Sequence[str] = ()) -> Iterator[Path]:
    """A fresh temporary path beside `path` (no file there yet) for a writer that needs a path of its own (Inspect
    AI's log writer, DuckDB); renamed onto `path` when the block completes, removed — with its `companions`
    (suffixes such as `.wal`) — when it raises or is interrupted, so `path` is absent, unchanged or complete."""
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
            os.replace(tmp, path)
        except OSError as exc:
            raise OutputWriteError(path, exc) from None
    except BaseException:
        for leftover in (tmp, *(Path(f"{tmp}{c}") for c in companions)):
            leftover.unlink(missing_ok=True)
        raise
