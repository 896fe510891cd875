"""Whether the bench runs from a clone of its repository or from an installed wheel: a few commands read the
repository's committed recordings (`cassettes/`), which a wheel does not carry, and say so instead of "no such
folder"."""

from __future__ import annotations

from pathlib import Path

__all__ = ["REPOSITORY_ONLY", "hint_for_missing", "repository_root"]

REPOSITORY_ONLY = (
    "the committed recordings (cassettes/) are in harness-bench's repository, not in the installed package: run this"
    " in a clone of the repository"
)
"""What a command that needs the repository's recordings says when run from an installed wheel."""


def repository_root() -> Path | None:
    """The repository the running code belongs to (the folder holding `pyproject.toml` and `cassettes/` above the
    package), or None when the code runs from an installed wheel."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() and (root / "cassettes").is_dir() else None


def hint_for_missing(path: Path) -> str:
    """`; <REPOSITORY_ONLY>` when `path` (a missing folder) is the repository's `cassettes` asked for from a wheel."""
    if repository_root() is None and path.parts[:1] == ("cassettes",):
        return f"; {REPOSITORY_ONLY}"
    return ""
