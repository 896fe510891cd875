"""The declared split of the evaluation cases, so that model-facing text and tool behaviour are tuned on some cases and
real-model figures are reported on the others.

The split is a committed list, not a rule: `evalsets/splits/dev.txt` and `evalsets/splits/held-out.txt` name the case
ids, one a line (`#` starts a comment). A `[new-held-out]` line in the held-out file starts the cases written after the
model-facing text froze, reported apart from the older held-out cases (which were held out from tuning, not from
reading). A case is in the split whose file lists it; a case no file lists is `unassigned` (a user's own evaluation
set, or a built-in case nobody placed yet: a test refuses the latter), never put somewhere by a rule; an id listed
twice, in one file or in both, is an error. Adding a case therefore moves no other case.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from enum import StrEnum
from functools import cache
from pathlib import Path

from runners.domain.case_model import EvalCase
from runners.domain.evalset import BUILTIN_DIR

__all__ = [
    "SPLITS_DIR",
    "Split",
    "SplitFileError",
    "assigned_splits",
    "parse_split_file",
    "read_split_files",
    "split_of_cases",
]

SPLITS_DIR = BUILTIN_DIR / "splits"
"""The folder of the committed split lists (`dev.txt`, `held-out.txt`)."""


class Split(StrEnum):
    """Where a case sits for measuring real models."""

    DEV = "dev"
    """Model-facing text and tool behaviour may be developed on it."""
    HELD_OUT = "held-out"
    """Reported on, never tuned on (written before the model-facing text froze)."""
    NEW_HELD_OUT = "new-held-out"
    """Reported on, never tuned on, and written after the model-facing text froze: reported apart."""
    UNASSIGNED = "unassigned"
    """Listed in no split file."""


_FILES: dict[str, tuple[Split, frozenset[Split]]] = {
    "dev.txt": (Split.DEV, frozenset()),
    "held-out.txt": (Split.HELD_OUT, frozenset({Split.NEW_HELD_OUT})),
}
"""Each split file: the split of the ids it lists before any `[group]` line, and the groups it may start."""

_CASE_ID = re.compile(r"^[a-z0-9][a-z0-9_\-]{2,80}$")
"""A case id, as `EvalCase.id` declares it."""


class SplitFileError(ValueError):
    """A split file that cannot be read, or two that disagree: one line naming the file, the line and the value."""


def parse_split_file(text: str, where: str, first: Split, groups: frozenset[Split] = frozenset()) -> dict[str, Split]:
    """The ids of one split file's `text` and their split (`first` until a `[group]` line names one of `groups`);
    SplitFileError names `where`, the line and the value."""
    out: dict[str, Split] = {}
    lines: dict[str, int] = {}
    current = first
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("["):
            name = line[1:-1].strip() if line.endswith("]") else None
            found = next((g for g in groups if g.value == name), None)
            if found is None:
                allowed = ", ".join(f"[{g.value}]" for g in sorted(groups)) or "none in this file"
                raise SplitFileError(f"{where}:{n}: {line[:80]!r} is not a group (allowed: {allowed})")
            current = found
            continue
        if not _CASE_ID.fullmatch(line):
            raise SplitFileError(f"{where}:{n}: {line[:80]!r} is not a case id (lower-case letters, digits, '_', '-')")
        if line in out:
            raise SplitFileError(f"{where}:{n}: {line} is listed twice (first on line {lines[line]})")
        out[line] = current
        lines[line] = n
    return out


def read_split_files(folder: Path = SPLITS_DIR) -> dict[str, Split]:
    """Every id the split files in `folder` list, with its split; SplitFileError when one is unreadable or malformed,
    or an id is in two files."""
    out: dict[str, Split] = {}
    seen_in: dict[str, str] = {}
    for name, (first, groups) in _FILES.items():
        path = folder / name
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SplitFileError(f"{path}: cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
        for case_id, split in parse_split_file(text, str(path), first, groups).items():
            if case_id in out:
                raise SplitFileError(f"{path}: {case_id} is also listed in {seen_in[case_id]}")
            out[case_id] = split
            seen_in[case_id] = str(path)
    return out


@cache
def assigned_splits() -> Mapping[str, Split]:
    """The committed split files' assignment (read once per process)."""
    return read_split_files()


def split_of_cases(cases: Iterable[EvalCase], assignment: Mapping[str, Split] | None = None) -> dict[str, Split]:
    """Each case's split as `assignment` (default: the committed split files) lists it; UNASSIGNED when it does
    not."""
    given = assigned_splits() if assignment is None else assignment
    return {case.id: given.get(case.id, Split.UNASSIGNED) for case in cases}
