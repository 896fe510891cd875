"""Output files written whole or not at all: a full disk or a read-only folder leaves no half file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["OutputWriteError", "write_bytes", "write_text"]


class OutputWriteError(Exception):
    """An output file could not be written (read-only folder, full disk, I/O error); names the path."""

    def __init__(self, path: Path, exc: OSError) -> None:
        super().__init__(f"cannot write {path}: {exc.strerror or exc}; choose another path or free some space")
        self.path = path


def write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same folder, renamed into place once complete
    (a special file such as /dev/full is written directly: it cannot be renamed over)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and not path.is_file():
            with path.open("wb") as f:
                f.write(data)
            return
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(tmp, 0o666 & ~mask)  # what a plain open() would have created
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise OutputWriteError(path, exc) from None


def write_text(path: Path, text: str) -> None:
    """`write_bytes` of UTF-8 text."""
    write_bytes(path, text.encode("utf-8"))
