"""Evaluation files read one case at a time: the same data as `yaml.load`, the same problems, and memory that
does not grow with the file (the parse holds one case, `cases` holds none)."""

from __future__ import annotations

import functools
import io
import json
import re
import tempfile
import tracemalloc
from pathlib import Path

import pytest
import yaml

from runners.domain import _case_file, evalset
from runners.domain._yaml_stream import CasesShapeError, count_cases, iter_raw_cases
from runners.domain.evalset import BUILTIN_DIR, EvalSetError, load_cases, spool_cases
from scripts.big_evalset import run_cases, write_big_file

BUILTIN = sorted(p for p in BUILTIN_DIR.glob("*.yaml") if p.name != "suite.yaml")
LOADERS = [True, False] if yaml.__with_libyaml__ else [False]
BIG = 1_500
"""Cases in the largest generated file (5 MB: over the size a reader process parses aside)."""


@functools.cache
def _whole(path: Path) -> list[object]:
    """`yaml.safe_load`'s cases of a built-in file (the pure-Python loader, a few tenths of a second a file: read once
    for the module, the tests only compare with it)."""
    cases: list[object] = yaml.safe_load(path.read_text(encoding="utf-8"))["cases"]
    return cases


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`write_big_file` of BIG cases, written once (most of its cost is dumping each built-in case, whatever the
    number): the smaller files are its first cases (`_first_cases`)."""
    path = tmp_path_factory.mktemp("big") / "big.yaml"
    write_big_file(path, BIG)
    return path


@functools.cache
def _items(big: Path) -> tuple[str, tuple[int, ...]]:
    """`big`'s text and where each top-level item starts (5 MB read and scanned once for the module: every smaller
    file is cut from it)."""
    text = big.read_text(encoding="utf-8")
    return text, tuple(m.start() for m in re.finditer(r"^  - ", text, flags=re.M))


def _first_cases(big: Path, n: int, path: Path) -> Path:
    """The first `n` cases of `big`: the file `write_big_file(path, n)` writes (its case i depends on i alone), cut
    before the (n+1)-th top-level item."""
    text, starts = _items(big)
    assert len(starts) == BIG and n < BIG
    path.write_text(text[: starts[n]], encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def _fresh_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(evalset, "_PARSED", {})


_Memo = dict[tuple[str, int, int, str, tuple[int, ...]], tuple[list[evalset.EvalCase], list[str]]]
"""`evalset._PARSED`: each file's cases and problems, by its path, modification time, size and suite."""


@pytest.fixture(scope="module")
def builtin_memo() -> _Memo:
    """`load_cases`' memo filled with every built-in file, once for the module: where `load_cases` is only the
    reference `spool_cases` is compared with, each case of the test would otherwise parse every built-in file again
    (a family is picked from all of them). `spool_cases` never reads the memo: it parses every file each time."""
    memo: _Memo = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(evalset, "_PARSED", memo)
        load_cases()
    return memo


@pytest.mark.parametrize("use_c", LOADERS, ids=lambda c: "libyaml" if c else "pure")
@pytest.mark.parametrize("path", BUILTIN, ids=lambda p: p.stem)
def test_each_case_is_what_yaml_load_gives(path: Path, use_c: bool) -> None:
    whole = _whole(path)
    with path.open("rb") as f:
        streamed = list(iter_raw_cases(f, use_c=use_c))
    assert streamed == whole  # aliases of fixtures anchored under another top-level key included
    with path.open("rb") as f:
        assert count_cases(f, use_c=use_c) == len(whole)


@pytest.mark.parametrize(
    ("text", "items"),
    [
        ("cases: [1, [2], {a: 1}]\n", [1, [2], {"a": 1}]),
        ("before: &l [x, y]\ncases: *l\nafter: {z: 1}\n", ["x", "y"]),  # a list anchored elsewhere
        ('"cases":\n  - a\nother: [1, 2]\n', ["a"]),
        ("{cases: [], more: 1}", []),
    ],
)
def test_shapes_yaml_load_accepts(text: str, items: list[object]) -> None:
    assert list(iter_raw_cases(text)) == items == yaml.safe_load(text)["cases"]


@pytest.mark.parametrize(
    ("text", "n"),
    [
        ("cases: [1, 2]", 2),
        ("a: {cases: [1]}\ncases: [[1], {b: [2]}, 3]\nz: [4]\n", 3),  # only the top-level list, only its items
        ("- cases\n- [1, 2]\n", 0),
        ("cases: *undefined\n", 0),
        ("cases: [1, [2\n", 0),
    ],
)
def test_the_progress_total_counts_the_top_level_list(text: str, n: int) -> None:
    assert count_cases(text) == n


@pytest.mark.parametrize("text", ["", "- 1\n- 2\n", "cases: 3\n", "other: [1]\n", "just text"])
def test_other_shapes_are_refused(text: str) -> None:
    with pytest.raises(CasesShapeError):
        list(iter_raw_cases(text))


def _case_block(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    return text[text.index("cases:\n") + len("cases:\n") :]


def test_a_yaml_error_after_good_cases_is_the_files_only_problem(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    good = BUILTIN_DIR / "empty_logs.yaml"
    invalid_case = "  - id: Not An Id\n    family: nope\n"
    unclosed = "  - id: x\n    bad: [unclosed\n"
    bad.write_text(good.read_text(encoding="utf-8") + invalid_case + unclosed, encoding="utf-8")
    line = bad.read_text(encoding="utf-8").count("\n") + 1
    for load in (load_cases, spool_cases):
        with pytest.raises(EvalSetError) as err:
            load([str(bad)])
        assert err.value.problems == [f"{bad}: line {line}, column 1: invalid YAML: did not find expected ',' or ']'"]


def test_a_second_document_is_refused_with_its_line(tmp_path: Path) -> None:
    two = tmp_path / "two.yaml"
    two.write_text("cases: []\n---\ncases: []\n", encoding="utf-8")
    with pytest.raises(EvalSetError) as err:
        spool_cases([str(two)])
    assert err.value.problems == [f"{two}: line 2, column 1: invalid YAML: but found another document"]


def test_a_second_cases_key_is_refused_not_silently_preferred(tmp_path: Path) -> None:
    # two files concatenated: yaml.load kept the last list only, and half the cases went missing in silence
    good = BUILTIN_DIR / "empty_logs.yaml"
    both = tmp_path / "both.yaml"
    text = good.read_text(encoding="utf-8")
    both.write_text(text + text, encoding="utf-8")
    line = text.count("\n") + text.splitlines().index("cases:") + 1
    for load in (load_cases, spool_cases):
        with pytest.raises(EvalSetError) as err:
            load([str(both)])
        twice = "the top-level key 'cases' appears twice; keep one 'cases' list"
        assert err.value.problems == [f"{both}: line {line}, column 1: invalid YAML: {twice}"]


def test_not_utf8_names_the_byte_offset_across_read_chunks(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    head = b"cases:\n" + b"# " + b"x" * ((1 << 20) + 5) + b"\n"
    path.write_bytes(head + b"  - caf\xe9\n")
    with pytest.raises(EvalSetError) as err:
        spool_cases([str(path)])
    assert err.value.problems == [f"{path}: not valid UTF-8 (byte offset {len(head) + 7})"]
    path.write_bytes(head + b"  - \xe4\xb8")  # cut inside the file's last character
    with pytest.raises(EvalSetError) as err:
        load_cases([str(path)])
    assert err.value.problems == [f"{path}: not valid UTF-8 (byte offset {len(head) + 4})"]


@pytest.mark.parametrize(
    ("specs", "ids"),
    [
        ((), ()),
        (("diagnosable", "empty_logs"), ()),
        ((str(BUILTIN_DIR), "empty_logs"), ()),  # a file selected twice: listed once, where first selected
        (("empty_logs", str(BUILTIN_DIR)), ()),
        ((), ("empty_logs_gateway_timeout_t1", "diagnosable_late_order_deadlock_t4")),
    ],
)
def test_spooled_cases_are_the_loaded_cases_in_order(
    specs: tuple[str, ...],
    ids: tuple[str, ...],
    monkeypatch: pytest.MonkeyPatch,
    builtin_memo: _Memo,
) -> None:
    monkeypatch.setattr(evalset, "_PARSED", dict(builtin_memo))  # a copy: the module's memo is never written to
    loaded = load_cases(specs)
    if ids:
        loaded = [c for c in loaded if c.id in ids]
    spooled = spool_cases(specs, ids)
    assert len(spooled) == len(loaded)
    assert list(spooled) == loaded
    assert list(spooled) == loaded  # read again: the sequence can be walked more than once
    assert spooled[0] == loaded[0] and spooled[-1] == loaded[-1] and spooled[1:3] == loaded[1:3]
    spooled.close()


def test_spooled_duplicates_name_both_places(tmp_path: Path) -> None:
    good = BUILTIN_DIR / "empty_logs.yaml"
    twice = tmp_path / "twice.yaml"
    twice.write_text(good.read_text(encoding="utf-8") + _case_block(good), encoding="utf-8")
    for specs in ([str(twice)], [str(good), str(twice)]):
        with pytest.raises(EvalSetError) as list_err:
            load_cases(specs)
        with pytest.raises(EvalSetError) as spool_err:
            spool_cases(specs)
        assert spool_err.value.problems == list_err.value.problems
        assert any("(its #1; here #9)" in p for p in spool_err.value.problems)


def test_unknown_case_id_and_empty_selection(tmp_path: Path) -> None:
    with pytest.raises(EvalSetError) as err:
        spool_cases([], ["nope", "empty_logs_gateway_timeout_t1", "nada"])
    assert err.value.problems == ["unknown case id(s): nope, nada"]
    empty = tmp_path / "empty.yaml"
    empty.write_text("cases: []\n", encoding="utf-8")
    with pytest.raises(EvalSetError) as err:
        spool_cases([str(empty)])
    assert err.value.problems == ["no cases selected"]


def _peak_while_reading(path: Path) -> int:
    tracemalloc.start()
    try:
        with path.open("rb") as f:
            for _ in iter_raw_cases(f):
                pass
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_reading_holds_one_case_whatever_the_file_size(tmp_path: Path, big: Path) -> None:
    small, larger = _first_cases(big, 50, tmp_path / "small.yaml"), _first_cases(big, 250, tmp_path / "larger.yaml")
    # yaml.load's node tree made this x5 (about 0.1 MB a case); one case's tree is the same for both
    assert _peak_while_reading(larger) < 1.5 * _peak_while_reading(small)


def test_cases_command_peak_memory_does_not_grow_with_the_file(tmp_path: Path, big: Path) -> None:
    small = _first_cases(big, 50, tmp_path / "small.yaml")
    # 5 MB: 150 MB more than the small one when the whole file's tree was built; over the size a reader process
    # parses aside (the small file is read in the command's own process). The small command's peak is the
    # interpreter's and its imports' (the same for 20, 50 or 150 cases): fewer cases only cost less time
    assert big.stat().st_size > _case_file._ASIDE_ABOVE
    _, small_mb, small_rc = run_cases(small)
    _, big_mb, big_rc = run_cases(big)
    assert small_rc == big_rc == 0
    assert big_mb < 1.3 * small_mb, (small_mb, big_mb)


def test_a_json_file_loads_like_its_yaml(tmp_path: Path) -> None:
    source = BUILTIN_DIR / "multi_call_turns.yaml"  # its aliases become plain copies in JSON
    as_json = tmp_path / "multi_call_turns.json"
    as_json.write_text(json.dumps(yaml.safe_load(source.read_text(encoding="utf-8")), default=str), encoding="utf-8")
    assert list(spool_cases([str(as_json)])) == load_cases([str(as_json)]) == load_cases([str(source)])


def test_no_room_for_the_temporary_list_is_one_problem_naming_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = tmp_path / "no-such-folder"
    monkeypatch.setattr(tempfile, "tempdir", str(gone))
    with pytest.raises(EvalSetError) as err:
        spool_cases(["empty_logs"])
    assert err.value.problems == [
        f"cannot write the case list to a temporary file in {gone} (No such file or directory); free some "
        "space there or point TMPDIR at a folder with room"
    ]


def _read(text: str, fast: bool) -> tuple[list[object], str | None]:
    items: list[object] = []
    try:
        for item in iter_raw_cases(text, fast=fast):
            items.append(item)
    except (yaml.YAMLError, CasesShapeError) as exc:
        return items, f"{type(exc).__name__}: {exc}"
    return items, None


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML built without libyaml")
@pytest.mark.parametrize("path", BUILTIN, ids=lambda p: p.stem)
def test_the_fast_path_and_the_event_path_give_identical_cases(path: Path) -> None:
    with path.open("rb") as f:
        fast = list(iter_raw_cases(f))
    with path.open("rb") as f:
        events = list(iter_raw_cases(f, fast=False))
    assert fast == events == _whole(path)
    assert len(load_cases([str(path)])) == len(fast)


def test_the_fast_path_reads_the_generated_file_by_batches(tmp_path: Path, big: Path) -> None:
    if not yaml.__with_libyaml__:
        pytest.skip("PyYAML built without libyaml")
    from runners.domain import _yaml_fast

    hundred = _first_cases(big, 100, tmp_path / "hundred.yaml")  # about 90 batches
    with hundred.open("rb") as f:
        fast = list(_yaml_fast._fast_items(f))  # raises when it would hand the file to the event path
    with hundred.open("rb") as f:
        assert fast == list(iter_raw_cases(f, fast=False))
    assert len(fast) == 100


_GOOD = "  - id: a\n    q: [1, 2]\n  - id: b\n    q: {x: y}\n"


@pytest.mark.parametrize(
    "text",
    [
        "cases:\n" + _GOOD,
        "cases:  # the list\n" + _GOOD + "other: 1\n",
        "top: &t {x: 1}\ncases:\n  - id: a\n    f: *t\n",  # an alias of a fixture outside the list
        "cases:\n  - id: a\n    f: &t {x: 1}\n  - id: b\n    f: *t\n",  # an anchor of one case used by the next
        "cases:\n  - id: a\n    m: {<<: {x: 1}, y: 2}\n",  # a merge key
        "cases:\n  -\n    id: a\n  -\n    id: b\n",  # the dash alone on its line
        "cases:\n- id: a\n- id: b\nz: 1\n",  # an indentless list
        "cases:\n  - id: a\n    d: |\n      text\n  - x\n      more\n",
        'cases:\n  - q: "two\n  - lines"\n  - id: b\n',  # a quoted scalar whose next line looks like an item
        "cases:\r\n  - id: a\r\n  - id: b\r\n",
        "cases:\n  - id: a\u2028  - id: b\n",
        "%YAML 1.1\n---\ncases:\n  - !!str 1\n",
        "cases:\n  - id: a\n    t: 2026-01-01\n    n: ~\n    b: yes\n    i: 0x1f\n    f: .5\n",
        "cases:\n  - 1\n  - [a, b]\n",
        "cases:\n  - id: a\n  cases: 2\n",
    ],
)
def test_the_fast_path_agrees_with_the_event_path(text: str) -> None:
    fast, events = _read(text, True), _read(text, False)
    assert fast == events
    if events[1] is None:
        assert events[0] == yaml.safe_load(text)["cases"]


@pytest.mark.parametrize(
    "text",
    [
        "cases:\n" + _GOOD + "cases:\n  - id: c\n",  # a second list: refused after the first one's items
        "cases:\n" + _GOOD + "---\ncases: []\n",
        "cases:\n" + _GOOD + "  - id: c\n    bad: [unclosed\n",
        "cases:\n" + _GOOD + "  - *nowhere\n",
        "cases:\n" + _GOOD + "after: *nowhere\n",
        "cases:\n" + _GOOD + "\tx: 1\n",
        "x: 1\ncases:\n" + _GOOD + "x: [\n",
        "{a: 1,\ncases:\n" + _GOOD + "}\n",  # a block list inside a flow mapping
    ],
)
def test_errors_after_fast_cases_are_the_event_paths_with_its_marks(text: str) -> None:
    fast, events = _read(text, True), _read(text, False)
    assert events[1] is not None
    assert fast == events


def test_the_bar_length_from_the_lines_is_the_event_count(tmp_path: Path, big: Path) -> None:
    from runners.domain._yaml_stream import count_block_items

    for path in [*BUILTIN, _first_cases(big, 200, tmp_path / "two_hundred.yaml")]:
        with path.open("rb") as f:
            by_lines = count_block_items(f)
        with path.open("rb") as f:
            assert by_lines == count_cases(f), path
    assert count_block_items(io.BytesIO(b"cases: [1, 2]\n")) is None  # not a block list: the events count it
    assert count_block_items(io.BytesIO(b"cases:\n  - 1\n  - - 2\n  - 3\nnext: 1\n")) == 3


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML built without libyaml")
def test_a_file_parsed_by_the_reader_process_gives_the_same_cases_and_problems(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = BUILTIN_DIR / "empty_logs.yaml"
    bad_yaml, bad_case, shared = tmp_path / "bad_yaml.yaml", tmp_path / "bad_case.yaml", tmp_path / "shared.yaml"
    bad_yaml.write_text(good.read_text(encoding="utf-8") + "  - id: x\n    bad: [unclosed\n", encoding="utf-8")
    bad_case.write_text(good.read_text(encoding="utf-8") + "  - id: Not An Id\n    family: nope\n", encoding="utf-8")
    shared.write_text("top: &t {x: 1}\ncases:\n  - *t\n", encoding="utf-8")
    paths = [*BUILTIN, bad_yaml, bad_case, shared, tmp_path / "missing.yaml"]

    def parse(above: int) -> list[tuple[list[evalset.EvalCase], list[str]]]:
        monkeypatch.setattr(_case_file, "_ASIDE_ABOVE", above)
        out = []
        for path in paths:
            read = _case_file._FileCases(path)
            cases = list(read)  # an unreadable file's cases do not count (nor do as many come before its error)
            out.append((cases if read.readable else [], read.problems))
        return out

    aside = parse(-1)
    assert aside == parse(1 << 60)
    assert aside[-4][1] == [f"{bad_yaml}: line {len(good.read_text().splitlines()) + 3}, column 1: invalid YAML: "
                            "did not find expected ',' or ']'"]  # fmt: skip
    assert len(aside[0][0]) > 0
