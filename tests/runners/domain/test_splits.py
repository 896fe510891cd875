"""The committed split (`evalsets/splits/`): every built-in case listed once, the 63/31 assignment of the earlier rule
kept exactly, the new held-out cases listed apart, a new case moving no other, and the files' parser (one line naming
the file, line and value; hypothesis over any text)."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runners.domain.evalset import BUILTIN_DIR, load_cases
from runners.domain.splits import (
    SPLITS_DIR,
    Split,
    SplitFileError,
    parse_split_file,
    read_split_files,
    split_of_cases,
)

CASES = load_cases([str(BUILTIN_DIR)])
SPLIT = split_of_cases(CASES)


def _earlier_rule(ids: list[str]) -> dict[str, Split]:
    """The rule the lists replaced: per family, the first third by the SHA-256 of the id is dev."""
    out: dict[str, Split] = {}
    for family in {c.family for c in CASES}:
        ranked = sorted((i for i in ids if next(c for c in CASES if c.id == i).family is family),
                        key=lambda i: hashlib.sha256(i.encode()).hexdigest())  # fmt: skip
        dev = round(len(ranked) / 3)
        out.update({i: Split.DEV if n < dev else Split.HELD_OUT for n, i in enumerate(ranked)})
    return out


def test_every_built_in_case_is_in_exactly_one_listed_split() -> None:
    listed = read_split_files()
    assert Split.UNASSIGNED not in SPLIT.values(), [i for i, s in SPLIT.items() if s is Split.UNASSIGNED]
    assert set(listed) == set(SPLIT), "a split file lists an id that is not a built-in case"


def test_the_older_cases_keep_the_assignment_they_had_when_the_split_was_a_rule() -> None:
    older = [i for i, s in SPLIT.items() if s is not Split.NEW_HELD_OUT]
    assert Counter(SPLIT[i] for i in older) == {Split.HELD_OUT: 63, Split.DEV: 31}
    assert {i: SPLIT[i] for i in older} == _earlier_rule(older)


def test_the_new_held_out_cases_are_listed_apart_and_diagnosable() -> None:
    new = [c for c in CASES if SPLIT[c.id] is Split.NEW_HELD_OUT]
    assert len(new) >= 12
    assert {c.family.value for c in new} == {"diagnosable"}
    assert {c.expect.outcome.value for c in new} == {"SUCCESS"}


def test_adding_a_case_moves_no_other_case() -> None:
    extra = CASES[0].model_copy(update={"id": "diagnosable_late_settlement_cutoff_t2x"})
    again = split_of_cases([*CASES, extra])
    assert again[extra.id] is Split.UNASSIGNED, "a case no file lists is unassigned, never placed by a rule"
    assert {i: again[i] for i in SPLIT} == SPLIT
    assert SPLIT["diagnosable_late_settlement_cutoff_t2"] is Split.HELD_OUT


@pytest.mark.parametrize(
    ("dev", "held", "message"),
    [
        ("ok_case_one\nBad Id\n", "", "dev.txt:2: 'Bad Id' is not a case id"),
        ("ok_case_one\n", "[new-held-out]\nok_case_one\n", "held-out.txt: ok_case_one is also listed in"),
        ("ok_case_one\nok_case_one  # again\n", "", "dev.txt:2: ok_case_one is listed twice (first on line 1)"),
        ("", "[later]\nok_case_two\n", "held-out.txt:1: '[later]' is not a group (allowed: [new-held-out])"),
        ("[new-held-out]\nok_case_two\n", "", "dev.txt:1: '[new-held-out]' is not a group (allowed: none in"),
    ],
)
def test_a_bad_split_file_is_one_line_naming_the_file_line_and_value(
    tmp_path: Path, dev: str, held: str, message: str
) -> None:
    (tmp_path / "dev.txt").write_text(dev)
    (tmp_path / "held-out.txt").write_text(held)
    with pytest.raises(SplitFileError) as err:
        read_split_files(tmp_path)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_missing_split_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "dev.txt").write_text("a_case\n")
    with pytest.raises(SplitFileError, match=r"held-out\.txt: cannot be read"):
        read_split_files(tmp_path)


def test_the_committed_files_parse_with_comments_and_the_group() -> None:
    text = (SPLITS_DIR / "held-out.txt").read_text()
    got = parse_split_file(text, "held-out.txt", Split.HELD_OUT, frozenset({Split.NEW_HELD_OUT}))
    assert Counter(got.values()) == Counter(s for s in SPLIT.values() if s is not Split.DEV)


_IDS = st.from_regex(r"[a-z0-9][a-z0-9_\-]{2,20}", fullmatch=True)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_IDS, st.booleans()), unique_by=lambda t: t[0], max_size=12),
       st.sampled_from(["", "  # note", "\t#x"]))  # fmt: skip
def test_listed_ids_read_back_with_their_group(entries: list[tuple[str, bool]], comment: str) -> None:
    first = [i for i, new in entries if not new]
    later = [i for i, new in entries if new]
    text = (
        "# head\n"
        + "".join(f"{i}{comment}\n" for i in first)
        + "\n[new-held-out]\n"
        + "".join(f"  {i}\n" for i in later)
    )
    got = parse_split_file(text, "f", Split.HELD_OUT, frozenset({Split.NEW_HELD_OUT}))
    assert got == {i: Split.NEW_HELD_OUT if new else Split.HELD_OUT for i, new in entries}


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_text_reads_as_ids_or_fails_with_one_line_naming_the_file(text: str) -> None:
    try:
        got = parse_split_file(text, "x.txt", Split.DEV)
    except SplitFileError as exc:
        assert str(exc).startswith("x.txt:") and "\n" not in str(exc)
    else:
        assert all(s is Split.DEV for s in got.values())
        assert all(i in text for i in got)
