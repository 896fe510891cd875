"""One evaluation file's cases, read and validated one at a time (`_FileCases`), with every problem named.

The file is checked as UTF-8 a chunk at a time first; its YAML is read case by case (`_yaml_stream`), in a reader
process when it is large; each case is validated by its model and then the way a run would use it
(`step_input_problems`); the validation's progress goes to `reporting_progress`'s callback. `evalset` reads its
files through here (and re-exports the public names).
"""

from __future__ import annotations

import codecs
import os
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import yaml
from pydantic import BaseModel, ValidationError

from runners.domain._yaml_stream import (
    CasesShapeError,
    count_block_items,
    count_cases,
    iter_raw_cases,
    iter_raw_cases_aside,
)
from runners.domain.case_model import EvalCase, Family, db_tables
from runners.domain.scripted import Mistake, RejectionReaction
from runners.domain.suite import DeclaredTool, SuiteError, SuiteSpec, find_suite
from runners.domain.tools.db_query import case_input_model
from runners.domain.tools.declared import declared_input_model
from runners.domain.tools.kb_search import KbSearchInput
from runners.domain.tools.log_search import LogSearchInput

__all__ = ["ProgressCallback", "reporting_progress", "step_input_problems"]

# libyaml parses ~10x faster than pure PyYAML: its events feed the case-at-a-time reader unless this is SafeLoader.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def step_input_problems(case: EvalCase) -> list[tuple[str, str]]:
    """(field, message) for every trajectory step whose input its tool would reject.

    The protocol mistakes break the envelope, not the business input, and the corrected retry sends the
    step's input as written, so it must validate; only `mistake: invalid_input` sends it invalid on
    purpose, and then it must really be invalid and cannot be "corrected" (there is no valid input).
    """
    models: dict[str, type[BaseModel]] = {
        "kb_search": KbSearchInput,
        "log_search": LogSearchInput,
        "db_query": case_input_model(db_tables(case.fixtures)),
    }
    if case.suite is not None:
        models = {t.name: declared_input_model(t.name, t.parameters) if isinstance(t, DeclaredTool) else models[t.name]
                  for t in case.suite.tools if t.name in case.tool_names}  # fmt: skip
    out: list[tuple[str, str]] = []
    for i, step in enumerate(case.trajectory.steps):
        model = models.get(step.tool)
        if model is None:  # an unknown tool, legal only with mistake: unknown_tool (checked above)
            continue
        where = f"trajectory.steps[{i}]"
        try:
            model.model_validate(step.input)
        except ValidationError as exc:
            if step.mistake is not Mistake.INVALID_INPUT:
                for err in exc.errors():
                    field = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
                    out.append((f"{where}.input{field}", err["msg"].removeprefix("Value error, ")))
        else:
            if step.mistake is Mistake.INVALID_INPUT:
                out.append((f"{where}.mistake", f"invalid_input, but the input is valid for {step.tool}"))
        reaction = step.on_rejection or case.trajectory.on_rejection
        if step.mistake is Mistake.INVALID_INPUT and reaction is RejectionReaction.CORRECT:
            out.append(
                (f"{where}.on_rejection", "a step with mistake invalid_input has no valid input to correct to; "
                 "set on_rejection: skip or repeat")
            )  # fmt: skip
    return out


def _plain(suite: SuiteSpec) -> bool:
    """A suite of the built-in tools and families without a role of its own: its cases are the built-in kind."""
    return suite.builtin_only and {f.name for f in suite.families} <= {f.value for f in Family}


def _loc(loc: Iterable[int | str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<case>"


ProgressCallback = Callable[[Path, int, int], None]
"""Called as (file, cases validated so far, cases in the file) while a file's cases are validated."""
_progress: list[ProgressCallback] = []


@contextmanager
def reporting_progress(callback: ProgressCallback) -> Iterator[None]:
    """Within the block, every file parsed reports its validation progress to `callback` (the `cases`
    command draws a progress bar with it); the first call, with 0 done, comes once the file's cases are counted
    (from the YAML events alone, before any is built)."""
    _progress.append(callback)
    try:
        yield
    finally:
        _progress.remove(callback)


_PROGRESS_EVERY = 500
"""Cases validated between two progress reports."""


def _utf8_problem(path: Path) -> str | None:
    """The file's one read problem (not UTF-8, unreadable), checked a chunk at a time before parsing."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    try:
        with path.open("rb") as f:
            while chunk := f.read(1 << 20):
                try:
                    decoder.decode(chunk)
                except UnicodeDecodeError as exc:
                    return f"{path}: not valid UTF-8 (byte offset {offset + exc.start - len(exc.object) + len(chunk)})"
                offset += len(chunk)
            decoder.decode(b"", final=True)
    except UnicodeDecodeError as exc:
        return f"{path}: not valid UTF-8 (byte offset {offset + exc.start - len(exc.object)})"
    except OSError as exc:
        return f"{path}: cannot read ({exc.strerror})"
    return None


_ASIDE_ABOVE = 4 << 20
"""Files larger than this (about 1,200 cases) are parsed by a reader process while this process validates."""


def _read_aside(f: IO[bytes]) -> bool:
    """Whether `f`'s YAML is parsed in another process: a large file, on a machine with a second core."""
    try:
        size = os.fstat(f.fileno()).st_size
    except OSError:
        return False
    return size > _ASIDE_ABOVE and (os.cpu_count() or 1) > 1


class _FileCases:
    """One file's valid cases, in order, one at a time: only the current case's YAML is in memory.

    After the iteration, `problems` holds the file's problems; when `readable` is false (not UTF-8, not
    YAML, not a mapping with a `cases` list) it is that one problem and the cases yielded do not count.
    """

    def __init__(self, path: Path, root: Path | None = None) -> None:
        self.path = path
        self.problems: list[str] = []
        self.readable = True
        self.root = root
        """The folder the file was selected from: its suite's `suite.yaml` is looked for up to there."""
        self.suite: dict[str, object] | None = None
        """The suite's declaration each case is given (None: the built-in tools and families)."""

    def _fail(self, problem: str) -> None:
        self.problems, self.readable = [problem], False

    def __iter__(self) -> Iterator[EvalCase]:
        path = self.path
        bad = _utf8_problem(path)
        if bad is not None:
            self._fail(bad)
            return
        try:
            found = find_suite(path, self.root)
        except SuiteError as exc:
            self._fail(str(exc))
            return
        if found is not None and not _plain(found[1]):
            self.suite = found[1].model_dump(mode="json", exclude_none=True)
        use_c = _Loader is not yaml.SafeLoader
        report = _progress[-1] if _progress else None
        total = 0
        if report is not None:
            with path.open("rb") as f:
                by_lines = count_block_items(f) if use_c else None  # the bar's length, from the lines
            if by_lines is None:
                with path.open("rb") as f:
                    by_lines = count_cases(f, use_c=use_c)  # or from the events alone
            total = by_lines
            report(path, 0, total)
        i = 0
        try:
            with path.open("rb") as f:
                aside = use_c and _read_aside(f)
                raws = iter_raw_cases_aside(str(path)) if aside else iter_raw_cases(f, use_c=use_c)
                for i, raw in enumerate(raws, start=1):
                    if report is not None and i > 1 and (i - 1) % _PROGRESS_EVERY == 0:
                        report(path, i - 1, max(total, i - 1))
                    case = self._validate(raw, i)
                    del raw
                    if case is not None:
                        yield case
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            self._fail(f"{path}:{where}: invalid YAML: {getattr(exc, 'problem', None) or exc}")
            return
        except CasesShapeError:
            self._fail(f"{path}: top level must be a mapping with a 'cases' list")
            return
        except OSError as exc:
            self._fail(f"{path}: cannot read ({exc.strerror})")
            return
        if report is not None:
            report(path, i, i)

    def _validate(self, raw: object, n: int) -> EvalCase | None:
        """The case, or None with its problems recorded (`n`: its place in the file, from 1)."""
        path = self.path
        case_id = raw.get("id") if isinstance(raw, dict) else None
        label = f"case {case_id!r}" if case_id else f"case #{n}"
        if isinstance(raw, dict) and "suite" in raw:
            self.problems.append(f"{path}: {label}: field suite: set by the folder's suite.yaml, not by a case")
            return None
        if isinstance(raw, dict) and self.suite is not None:
            raw = {"suite": self.suite, **raw}
        try:
            case = EvalCase.model_validate(raw)
        except ValidationError as exc:
            for err in exc.errors():
                msg = err["msg"].removeprefix("Value error, ")
                where = _loc(err["loc"])
                named = re.match(r"^([\w.\[\]]+): (.*)$", msg, re.DOTALL)
                if named and (where == "<case>" or err["loc"] == ("context",)):
                    # a model-level check that names its own field, relative to the model it checks
                    where = named.group(1) if where == "<case>" else f"{where}.{named.group(1)}"
                    msg = named.group(2)
                self.problems.append(f"{path}: {label}: field {where}: {msg}")
            return None
        step_problems = step_input_problems(case)
        self.problems.extend(f"{path}: {label}: field {where}: {msg}" for where, msg in step_problems)
        return None if step_problems else case
