"""Evaluation sets: YAML files of cases, validated by pydantic.

A file holds `cases: [...]`, each an `EvalCase` (the models are `case_model`'s, re-exported here). Every problem is
reported with the file, the case id and the field, all problems at once, and nothing is half-loaded. Beyond the
shapes, a case is checked the way a run would use it: the context's window is two ISO-8601 instants in order (its
model's check), and every trajectory step's input validates against its tool's input model (db_query's bound to the
case's tables), unless the step is marked `mistake: invalid_input` (`step_input_problems`).

A file is read one case at a time (`_yaml_stream`): memory holds the current case, never the file's whole
YAML tree; a large file is parsed by a reader process while its cases are validated here. `load_cases`
returns the list (what a run needs); `spool_cases` keeps it in a temporary file (what `cases` lists, for any
number of cases).
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import pickle
import re
import tempfile
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, overload

import yaml
from pydantic import BaseModel, ValidationError

from runners.domain._yaml_stream import (
    CasesShapeError,
    count_block_items,
    count_cases,
    iter_raw_cases,
    iter_raw_cases_aside,
)
from runners.domain.case_model import (
    TOOL_NAMES,
    CaseContext,
    EvalCase,
    ExactCounts,
    Expectations,
    ExpectedStop,
    Family,
    FaultKind,
    Fixtures,
    ToolFault,
    ToolName,
)
from runners.domain.scripted import Mistake, RejectionReaction
from runners.domain.tools.db_query import case_input_model
from runners.domain.tools.kb_search import KbSearchInput
from runners.domain.tools.log_search import LogSearchInput

__all__ = [
    "BUILTIN_DIR",
    "TOOL_NAMES",
    "CaseContext",
    "EvalCase",
    "EvalSetError",
    "ExactCounts",
    "Expectations",
    "ExpectedStop",
    "Family",
    "FaultKind",
    "Fixtures",
    "ProgressCallback",
    "SpooledCases",
    "ToolFault",
    "ToolName",
    "content_hash",
    "json_schema",
    "load_cases",
    "reporting_progress",
    "spool_cases",
    "step_input_problems",
]

# libyaml parses ~10x faster than pure PyYAML: its events feed the case-at-a-time reader unless this is SafeLoader.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
BUILTIN_DIR = Path(__file__).resolve().parents[2] / "evalsets"


def step_input_problems(case: EvalCase) -> list[tuple[str, str]]:
    """(field, message) for every trajectory step whose input its tool would reject.

    The protocol mistakes break the envelope, not the business input, and the corrected retry sends the
    step's input as written, so it must validate; only `mistake: invalid_input` sends it invalid on
    purpose, and then it must really be invalid and cannot be "corrected" (there is no valid input).
    """
    models: dict[str, type[BaseModel]] = {
        "kb_search": KbSearchInput,
        "log_search": LogSearchInput,
        "db_query": case_input_model(tuple((t.name, t.columns) for t in case.fixtures.tables)),
    }
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


class EvalSetError(ValueError):
    """One or more evaluation files are malformed; `problems` lists each with its location."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("invalid evaluation set:\n" + "\n".join(f"  - {p}" for p in self.problems))


def _loc(loc: Iterable[int | str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<case>"


_PARSED: dict[tuple[str, int, int], tuple[list[EvalCase], list[str]]] = {}

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


def _parse_file(path: Path, problems: list[str]) -> list[EvalCase]:
    """Parse one file, memoised by (path, mtime, size): sweeps load the same set once per grid point."""
    try:
        st = path.stat()
        key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    except OSError:
        return _parse_file_uncached(path, problems)
    cached = _PARSED.get(key)
    if cached is None:
        found: list[str] = []
        cached = _PARSED[key] = (_parse_file_uncached(path, found), found)
    problems.extend(cached[1])
    return list(cached[0])


def _parse_file_uncached(path: Path, problems: list[str]) -> list[EvalCase]:
    read = _FileCases(path)
    cases = list(read)
    problems.extend(read.problems)
    return cases if read.readable else []


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

    def __init__(self, path: Path) -> None:
        self.path = path
        self.problems: list[str] = []
        self.readable = True

    def _fail(self, problem: str) -> None:
        self.problems, self.readable = [problem], False

    def __iter__(self) -> Iterator[EvalCase]:
        path = self.path
        bad = _utf8_problem(path)
        if bad is not None:
            self._fail(bad)
            return
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


_FAMILIES = frozenset(f.value for f in Family)


def _yaml_files(folder: Path, problems: list[str] | None = None) -> list[Path]:
    """The evaluation files under `folder`; a YAML name that is not a readable regular file (a FIFO, a
    socket, a dangling link or a symlink loop) is a problem, never skipped in silence (nor opened: a FIFO
    would block)."""
    found: list[Path] = []
    for p in sorted(folder.rglob("*")):
        if p.suffix not in (".yaml", ".yml"):
            continue
        if p.is_file():
            found.append(p)
        elif problems is not None and not p.is_dir():
            try:
                p.stat()
                what = "not a regular file (a FIFO, socket or device)"
            except OSError as exc:
                what = f"unreadable ({exc.strerror or exc}: a dangling link or a symlink loop?)"
            problems.append(f"{p}: {what}; remove it from {folder} or move it out")
    return found


def _selections(specs: Sequence[str], problems: list[str]) -> list[tuple[list[Path], str | None]]:
    """(files, family or None for all) per spec: a file, a folder or a family name (default: the built-in set)."""
    selections: list[tuple[list[Path], str | None]] = []
    for spec in list(specs) or [str(BUILTIN_DIR)]:
        path = Path(spec)
        if path.is_dir():
            selections.append((_yaml_files(path, problems), None))
        elif path.is_file():
            selections.append(([path], None))
        elif spec in _FAMILIES:
            selections.append((_yaml_files(BUILTIN_DIR), spec))
        else:
            problems.append(f"{spec}: no such file, folder or family (families: {', '.join(sorted(_FAMILIES))})")
    return selections


def load_cases(specs: Sequence[str] = ()) -> list[EvalCase]:
    """Load cases from files, folders or family names (default: every built-in case).

    Raises EvalSetError listing every problem (file, case id, field) when anything is malformed.
    """
    problems: list[str] = []
    selections = _selections(specs, problems)
    parsed: dict[Path, list[EvalCase]] = {}
    seen: dict[str, tuple[Path, int]] = {}
    for files, _ in selections:
        for f in files:
            key = f.resolve()
            if key in parsed:
                continue
            parsed[key] = []
            for n, case in enumerate(_parse_file(f, problems), start=1):
                if case.id in seen:  # in another file or the same one: both places named, none kept
                    where, m = seen[case.id]
                    problems.append(
                        f"{f}: case {case.id!r}: field id: duplicate of a case in {where} (its #{m}; here #{n})"
                    )
                    continue
                seen[case.id] = (f, n)
                parsed[key].append(case)
    if problems:
        raise EvalSetError(problems)
    out: dict[str, EvalCase] = {}
    for files, family in selections:
        for f in files:
            for case in parsed[f.resolve()]:
                if family is None or case.family.value == family:
                    out.setdefault(case.id, case)
    return list(out.values())


class SpooledCases(Sequence[EvalCase]):
    """Validated cases kept in a temporary file and read back one at a time (each read builds the case
    anew): the sequence of a 100,000-case file without 100,000 cases in memory. What `cases` lists."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(prefix="harness-bench-cases-")
        self._ends = array("q")
        """Where each stored case's record ends in the file."""
        self._order = array("q")
        """The selection: stored cases by their place in the file, in the order they are listed."""

    def _store(self, case: EvalCase) -> int:
        record = zlib.compress(pickle.dumps(case, protocol=pickle.HIGHEST_PROTOCOL), 1)
        self._file.write(record)
        self._ends.append((self._ends[-1] if self._ends else 0) + len(record))
        return len(self._ends) - 1

    def _load(self, stored: int) -> EvalCase:
        start = self._ends[stored - 1] if stored else 0
        self._file.seek(start)
        case: EvalCase = pickle.loads(zlib.decompress(self._file.read(self._ends[stored] - start)))
        return case

    def __len__(self) -> int:
        return len(self._order)

    @overload
    def __getitem__(self, index: int) -> EvalCase: ...
    @overload
    def __getitem__(self, index: slice) -> list[EvalCase]: ...
    def __getitem__(self, index: int | slice) -> EvalCase | list[EvalCase]:
        if isinstance(index, slice):
            return [self._load(k) for k in self._order[index]]
        return self._load(self._order[index])

    def __iter__(self) -> Iterator[EvalCase]:
        self._file.flush()
        for k in self._order:
            yield self._load(k)

    def close(self) -> None:
        """Delete the temporary file now (it goes anyway when the sequence is collected)."""
        self._file.close()


def _no_room(exc: OSError) -> EvalSetError:
    return EvalSetError(
        [f"cannot write the case list to a temporary file in {tempfile.gettempdir()} ({exc.strerror or exc}); "
         "free some space there or point TMPDIR at a folder with room"]
    )  # fmt: skip


def _open_spool() -> SpooledCases:
    try:
        return SpooledCases()
    except OSError as exc:
        raise _no_room(exc) from exc


def _store_or_say(spool: SpooledCases, case: EvalCase) -> int:
    try:
        return spool._store(case)
    except OSError as exc:
        spool.close()
        raise _no_room(exc) from exc


def spool_cases(specs: Sequence[str] = (), case_ids: Sequence[str] = ()) -> SpooledCases:
    """`load_cases(specs)` restricted to `case_ids` (when given), the same checks and problems, but each case is
    validated, stored in a temporary file and dropped: memory holds one case and every id's place (duplicate
    ids are still refused across all the files), not the cases. Raises EvalSetError (also for an unknown id
    in `case_ids`, or when nothing is selected)."""
    problems: list[str] = []
    selections = _selections(specs, problems)
    spool = _open_spool()
    files: dict[Path, tuple[Path, int, int]] = {}  # resolved path -> (path, first stored, stored count)
    seen: dict[str, int] = {}  # id -> its stored place; the file and its number there follow from `files`

    def where(stored: int) -> tuple[Path, int]:
        for f, first, count in files.values():
            if first <= stored < first + count:
                return f, stored - first + 1
        raise LookupError(stored)

    for file_list, _ in selections:
        for f in file_list:
            key = f.resolve()
            if key in files:
                continue
            read, first = _FileCases(f), len(spool._ends)
            mine: dict[str, int] = {}
            duplicates: list[str] = []
            for n, case in enumerate(read, start=1):
                stored = _store_or_say(spool, case)
                if case.id in mine or case.id in seen:  # in the same file or another one: both places named
                    other, m = (f, mine[case.id] - first + 1) if case.id in mine else where(seen[case.id])
                    duplicates.append(
                        f"{f}: case {case.id!r}: field id: duplicate of a case in {other} (its #{m}; here #{n})"
                    )
                else:
                    mine[case.id] = stored
            problems.extend(read.problems)
            files[key] = (f, first, len(spool._ends) - first if read.readable else 0)
            if read.readable:
                problems.extend(duplicates)
                seen.update(mine)
    if problems:
        spool.close()
        raise EvalSetError(problems)
    wanted = set(case_ids)
    unknown = [c for c in case_ids if c not in seen]
    if unknown:
        spool.close()
        raise EvalSetError([f"unknown case id(s): {', '.join(unknown)}"])
    taken = bytearray(len(spool._ends))
    for file_list, family in selections:
        for f in file_list:
            _, first, count = files[f.resolve()]
            for stored in range(first, first + count):
                if taken[stored]:
                    continue
                if family is not None or wanted:
                    case = spool._load(stored)
                    if (family is not None and case.family.value != family) or (wanted and case.id not in wanted):
                        continue
                taken[stored] = 1
                spool._order.append(stored)
    if not spool._order:
        spool.close()
        raise EvalSetError(["no cases selected"])
    return spool


def content_hash(cases: Sequence[EvalCase]) -> str:
    """A stable hash of the cases' content (recorded with every bench run)."""
    h = hashlib.sha256()
    for case in sorted(cases, key=lambda c: c.id):
        h.update(json.dumps(case.model_dump(mode="json"), sort_keys=True, ensure_ascii=False).encode())
    return h.hexdigest()[:16]


def json_schema() -> str:
    """The JSON Schema of an evaluation file, for editors."""
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "harness-bench evaluation set",
        "type": "object",
        "properties": {"cases": {"type": "array", "items": {"$ref": "#/$defs/EvalCase"}}},
        "required": ["cases"],
        "$defs": {},
    }
    case_schema = EvalCase.model_json_schema(ref_template="#/$defs/{model}")
    defs = case_schema.pop("$defs", {})
    schema["$defs"] = {**defs, "EvalCase": case_schema}
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
