"""Evaluation sets: YAML files of cases, validated by pydantic.

A file holds `cases: [...]`, each an `EvalCase` (the models are `case_model`'s, re-exported here). Every problem is
reported with the file, the case id and the field, all problems at once, and nothing is half-loaded. Beyond the
shapes, a case is checked the way a run would use it: the context's window is two ISO-8601 instants in order (its
model's check), and every trajectory step's input validates against its tool's input model (db_query's bound to the
case's tables), unless the step is marked `mistake: invalid_input` (`step_input_problems`).

A file is read and validated one case at a time (`_case_file`, over `_yaml_stream`): memory holds the current case,
never the file's whole YAML tree; a large file is parsed by a reader process while its cases are validated. Here
the files are selected (files, folders, families), duplicate ids refused across them, and `load_cases`
returns the list (what a run needs); `spool_cases` keeps it in a temporary file (what `cases` lists, for any
number of cases).
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import pickle
import tempfile
import zlib
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import overload

from runners.domain._case_file import (
    ProgressCallback,
    _FileCases,
    reporting_progress,
    step_input_problems,
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
    RecordedResult,
    TableName,
    ToolFault,
    ToolName,
    db_tables,
)
from runners.domain.input_files import MAX_EVALSET_BYTES, InputPathError, check_input_path, input_kind
from runners.domain.suggest import did_you_mean
from runners.domain.suite import SUITE_FILE

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
    "RecordedResult",
    "SpooledCases",
    "TableName",
    "ToolFault",
    "ToolName",
    "content_hash",
    "db_tables",
    "json_schema",
    "load_cases",
    "reporting_progress",
    "spool_cases",
    "step_input_problems",
]


def builtin_dir() -> Path:
    """The folder of the built-in evaluation sets: the `evalsets` package's, wherever it is installed (a wheel's
    site-packages, or a source checkout in development)."""
    found = importlib.resources.files("evalsets")
    if not isinstance(found, Path):  # a zip import: the cases are read as files, one at a time
        raise RuntimeError(f"the built-in evaluation sets are not files on disk ({found}); install the wheel unpacked")
    return found


BUILTIN_DIR = builtin_dir()
"""`builtin_dir()`, as this process found it."""


class EvalSetError(ValueError):
    """One or more evaluation files are malformed; `problems` lists each with its location."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("invalid evaluation set:\n" + "\n".join(f"  - {p}" for p in self.problems))


_PARSED: dict[tuple[str, int, int, str, tuple[int, ...]], tuple[list[EvalCase], list[str]]] = {}


def _suite_stamps(path: Path, root: Path | None) -> tuple[int, ...]:
    """The modification times of the `suite.yaml` files the file's cases may be read with (the cache's key)."""
    stamps: list[int] = []
    folder = path.parent
    for candidate in (folder, *folder.parents):
        suite = candidate / SUITE_FILE
        stamps.append(suite.stat().st_mtime_ns if suite.is_file() else 0)
        if root is None or candidate == root or len(stamps) > 64:
            break
    return tuple(stamps)


def _parse_file(path: Path, problems: list[str], root: Path | None = None) -> list[EvalCase]:
    """Parse one file, memoised by (path, mtime, size, its suite's): sweeps load the same set once per grid point."""
    try:
        st = path.stat()
        key = (str(path.resolve()), st.st_mtime_ns, st.st_size, str(root), _suite_stamps(path, root))
    except OSError:
        return _parse_file_uncached(path, problems, root)
    cached = _PARSED.get(key)
    if cached is None:
        found: list[str] = []
        cached = _PARSED[key] = (_parse_file_uncached(path, found, root), found)
    problems.extend(cached[1])
    return list(cached[0])


def _parse_file_uncached(path: Path, problems: list[str], root: Path | None = None) -> list[EvalCase]:
    read = _FileCases(path, root)
    cases = list(read)
    problems.extend(read.problems)
    return cases if read.readable else []


_FAMILIES = frozenset(f.value for f in Family)


def _yaml_files(folder: Path, problems: list[str] | None = None) -> list[Path]:
    """The evaluation files under `folder`; a YAML name that is not a readable regular file (a FIFO, a
    socket, a dangling link or a symlink loop) is a problem, never skipped in silence (nor opened: a FIFO
    would block)."""
    found: list[Path] = []
    for p in sorted(folder.rglob("*")):
        if p.suffix not in (".yaml", ".yml") or p.name == SUITE_FILE:
            continue
        if p.is_file():
            if p.stat().st_size > MAX_EVALSET_BYTES and problems is not None:
                problems.append(f"{p} is {p.stat().st_size:,} bytes, over the {MAX_EVALSET_BYTES:,} an input may be")
                continue
            found.append(p)
        elif problems is not None and not p.is_dir():
            try:
                p.stat()
                what = "not a regular file (a FIFO, socket or device)"
            except OSError as exc:
                what = f"unreadable ({exc.strerror or exc}: a dangling link or a symlink loop?)"
            problems.append(f"{p}: {what}; remove it from {folder} or move it out")
    return found


def _selections(specs: Sequence[str], problems: list[str]) -> list[tuple[list[Path], str | None, Path | None]]:
    """(files, family or None for all, the folder they were selected from) per spec: a file, a folder (a suite's
    too) or a built-in family's name (default: the built-in set)."""
    selections: list[tuple[list[Path], str | None, Path | None]] = []
    for spec in list(specs) or [str(BUILTIN_DIR)]:
        path = Path(spec)
        kind = input_kind(path)
        if kind == "a folder":
            selections.append((_yaml_files(path, problems), None, path))
        elif kind is None:
            try:
                check_input_path("--evalset", path, max_bytes=MAX_EVALSET_BYTES)
            except InputPathError as exc:
                problems.append(str(exc))
                continue
            selections.append(([path], None, None))
        elif spec in _FAMILIES:
            selections.append((_yaml_files(BUILTIN_DIR), spec, BUILTIN_DIR))
        elif kind != "missing":  # a FIFO would block the read, a device never end it
            problems.append(f"--evalset {spec} is {kind}, not an evaluation file or folder")
        else:
            hint = did_you_mean(spec, _FAMILIES)
            problems.append(f"{spec}: no such file, folder or family{hint} (families: {', '.join(sorted(_FAMILIES))})")
    return selections


def load_cases(specs: Sequence[str] = ()) -> list[EvalCase]:
    """Load cases from files, folders or family names (default: every built-in case).

    Raises EvalSetError listing every problem (file, case id, field) when anything is malformed.
    """
    problems: list[str] = []
    selections = _selections(specs, problems)
    parsed: dict[Path, list[EvalCase]] = {}
    seen: dict[str, tuple[Path, int]] = {}
    for files, _, root in selections:
        for f in files:
            key = f.resolve()
            if key in parsed:
                continue
            parsed[key] = []
            for n, case in enumerate(_parse_file(f, problems, root), start=1):
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
    for files, family, _ in selections:
        for f in files:
            for case in parsed[f.resolve()]:
                if family is None or case.family == family:
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

    for file_list, _, root in selections:
        for f in file_list:
            key = f.resolve()
            if key in files:
                continue
            read, first = _FileCases(f, root), len(spool._ends)
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
    for file_list, family, _ in selections:
        for f in file_list:
            _, first, count = files[f.resolve()]
            for stored in range(first, first + count):
                if taken[stored]:
                    continue
                if family is not None or wanted:
                    case = spool._load(stored)
                    if (family is not None and case.family != family) or (wanted and case.id not in wanted):
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
        h.update(json.dumps(_hashed(case), sort_keys=True, ensure_ascii=False).encode())
    return h.hexdigest()[:16]


def _hashed(case: EvalCase) -> dict[str, object]:
    """The case's content as hashed: the fields a suite adds are left out where a built-in case has them empty,
    so the built-in cases hash as they did before suites existed."""
    data = case.model_dump(mode="json")
    for key in ("suite", "tools"):
        if data.get(key) is None:
            data.pop(key, None)
    if not data["fixtures"].get("results"):
        data["fixtures"].pop("results", None)
    nested = [data["expect"].get(k) or {} for k in ("without_mistake", "after_a_call")]
    for expect in (data["expect"], *nested):
        if expect.get("root_cause_statement") is None:
            expect.pop("root_cause_statement", None)
    return data


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
    case_schema["properties"].pop("suite", None)  # set from the folder's suite.yaml, never written in a case
    defs = case_schema.pop("$defs", {})
    for name in ("SuiteSpec", "SuiteFamily", "DeclaredTool", "BuiltinTool", "ToolParameters", "ToolParameter",
                 "ParameterType"):  # fmt: skip
        defs.pop(name, None)
    schema["$defs"] = {**defs, "EvalCase": case_schema}
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
