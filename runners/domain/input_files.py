"""The one input-path rule, beside the output rule (`runners/store/output_files.py`): every file a command reads is a
regular file of bounded size (or `-`, standard input, where a stream makes sense), refused with one line otherwise —
before it is opened, since opening a FIFO blocks and reading a device (`/dev/zero`, `/dev/urandom`) never ends.

It sits in the lowest layer because the evaluation files are read there; it imports nothing of the bench.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = [
    "MAX_EVALSET_BYTES",
    "MAX_TRACE_BYTES",
    "InputPathError",
    "check_input_path",
    "input_kind",
    "read_input_text",
    "what_is",
]

MAX_EVALSET_BYTES = 64 * 1024 * 1024
"""An evaluation file's largest size (the built-in files are under 100 KB each)."""
MAX_TRACE_BYTES = 4 * 1024 * 1024 * 1024
"""A trace file's largest size (read a line at a time: memory does not grow with it)."""


class InputPathError(ValueError):
    """A file a command reads is missing, not a regular file, or too large (exit 2, nothing read or written)."""


def input_kind(path: Path) -> str | None:
    """What `path` is when it is not a regular file (following links): `a FIFO (named pipe)`, `a character device`,
    `a folder`, …; None for a regular file; `missing` when nothing is there."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket")):  # fmt: skip
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def what_is(path: Path) -> str:
    """What an existing path is, in the words a refusal uses: `a file`, `a folder`, `a FIFO (named pipe)`, `a
    character device` (`/dev/full`), … — so a folder output given a device never says "is a file"."""
    return input_kind(path) or "a file"


def check_input_path(flag: str, path: Path, *, max_bytes: int, folder_ok: bool = False) -> None:
    """InputPathError, one line naming `flag` (when given), the path and what it is, unless `path` is a regular file
    of at most `max_bytes` (or, with `folder_ok`, a folder)."""
    named = f"{flag} {path}" if flag else str(path)
    kind = input_kind(path)
    if kind == "missing":
        raise InputPathError(f"{named}: no such file")
    if kind == "a folder" and folder_ok:
        return
    if kind is not None:
        raise InputPathError(f"{named} is {kind}, not a file; give a regular file")
    size = path.stat().st_size
    if size > max_bytes:
        raise InputPathError(f"{named} is {size:,} bytes, over the {max_bytes:,} an input may be")


def read_input_text(path: Path, *, max_bytes: int, flag: str = "") -> str:
    """The text of an input file read as UTF-8, the input-path rule applied first; InputPathError, one line naming
    the path, when it is not a regular file of at most `max_bytes`, cannot be read or is not UTF-8."""
    check_input_path(flag, path, max_bytes=max_bytes)
    named = f"{flag} {path}" if flag else str(path)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputPathError(f"{named}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise InputPathError(f"{named}: cannot read ({exc.strerror or exc})") from None
