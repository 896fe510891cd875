"""A mistyped command, flag, case id or profile gets one line with the close match, exit 2; `show --case` alone shows
the only or the latest bench run that ran the case."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runners.cli import main
from runners.domain.suggest import did_you_mean


def _error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["reccomend"], "did you mean 'recommend'?"),
        (["comapre-stops"], "did you mean 'compare-stops'?"),
        (["run", "--no-gain-thresold", "2"], "did you mean '--no-gain-threshold'?"),
        (["sweep", "--epocsh", "2"], "did you mean '--epochs'?"),
        (["run", "--case", "empty_logs_gateway_timeot_t1"], "did you mean 'empty_logs_gateway_timeout_t1'?"),
        (["run", "--model", "scripted:rewritr"], "did you mean 'rewriter'?"),
    ],
)
def test_a_mistyped_name_gets_its_close_match(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], expected: str
) -> None:
    db = ["--db", str(tmp_path / "x.duckdb")] if argv[0] in ("run", "sweep") else []
    assert expected in _error(capsys, [*argv, *db])
    assert not (tmp_path / "x.duckdb").exists()


def test_a_flag_is_suggested_from_the_command_it_was_given_to(capsys: pytest.CaptureFixture[str]) -> None:
    # --policy is compare-stops' flag; given to run it is no close match of run's own options
    err = _error(capsys, ["run", "--polcy", "x"])
    assert "--policy" not in err


def test_nothing_close_suggests_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert "did you mean" not in _error(capsys, ["zzzzzz"])


@given(st.text(max_size=12), st.lists(st.text(max_size=12), max_size=8))
def test_a_suggestion_names_only_known_names(word: str, known: list[str]) -> None:
    hint = did_you_mean(word, known)
    assert hint == "" or all(f"{k!r}" in known_reprs(known) for k in _named(hint))


def known_reprs(known: list[str]) -> set[str]:
    return {repr(k) for k in known}


def _named(hint: str) -> list[str]:
    import ast

    inner = hint.removeprefix(" (did you mean ").removesuffix("?)")
    return [ast.literal_eval(part) for part in inner.split(" or ")]


def test_show_without_a_run_shows_the_latest(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = str(tmp_path / "t.duckdb")
    case = "empty_logs_gateway_timeout_t1"
    assert main(["run", "--case", case, "--db", db, "--label", "first"]) == 0
    assert main(["run", "--case", case, "--db", db, "--label", "second", "--no-gain-threshold", "3"]) == 0
    capsys.readouterr()
    assert main(["show", "--db", db, "--case", case]) == 0
    shown = capsys.readouterr()
    assert "label second" in " ".join(shown.out.split())
    assert "the latest of 2" in shown.err
    assert "did you mean" in _error(capsys, ["show", "--db", db, "--case", case[:-1]])


@pytest.mark.parametrize("flag", ["--max-tool-invocations", "--no-gain-threshold", "--epochs", "--deadline"])
def test_a_huge_number_is_one_short_line(flag: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    err = _error(capsys, ["run", flag, "9" * 4400, "--db", str(tmp_path / "x.duckdb")])
    assert len(err) < 400 and ("characters)" in err or "digits)" in err) and flag in err, err
    assert "Exceeds the limit" not in err and "Traceback" not in err


def test_recommend_points_at_the_database_that_holds_the_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    case = "empty_logs_gateway_timeout_t1"
    assert main(["sweep", "--case", case, "--no-gain-threshold", "1,2", "--db", "sweep.duckdb"]) == 0
    assert "this folder has --db sweep.duckdb (1 sweep)" in _error(capsys, ["recommend"])  # no bench.duckdb
    assert main(["run", "--case", case]) == 0  # bench.duckdb, without a sweep
    assert "this folder has --db sweep.duckdb (1 sweep)" in _error(capsys, ["recommend"])
