"""The Python API holds its input to the command line's rules (runners/api.py): driven with wrong types and values —
text where a number goes, negative, huge and NaN numbers, None, lists of the wrong type, unknown names, labels with
escape sequences or a credential's shape, a database that is a folder or no DuckDB file — only `BenchInputError`
ever escapes, its message is one line naming the flag or argument, and nothing is written. In process; a refused
run never starts (a guard database that is no DuckDB file refuses whatever the options let through)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runners import api
from runners.api import BenchInputError, BenchOptions, GateThresholds, RecommendChoices
from runners.plan.labels import LABEL_PATTERN
from runners.plan.settings import declaration

CASE = "empty_logs_gateway_timeout_t1"

OPTION_NAMES = sorted(
    {d.name for concern in BenchOptions.concerns().values() for d in concern.declared()} | set(declaration().names())
)
"""Every name `BenchOptions.of` takes (but `settings`, `config`, `model_settings` and `resume`, driven apart)."""

FIELD = re.compile(
    r"--[a-z][a-z-]*|\b(grid|options|thresholds|choices|cancellation|on_progress|keep_runs|sequential|settings|config"
    r"|model_settings|unknown option)\b"
)
"""What names a flag or an argument in a refusal."""

ODD_TEXT = ["bad\x1b[2J", "a\x00b", "two\nlines", "sk-" + "a1" * 24, "AKIAIOSFODNN7EXAMPLE", "", " ", "/dev/null",
            "plain", "openai:m", "1,2", "-1", "nan"]  # fmt: skip
"""Text a user might pass: escape sequences, NUL, newlines, credentials' shapes, values of the wrong flag."""

JUNK: st.SearchStrategy[Any] = st.one_of(
    st.text(max_size=12),
    st.text(alphabet=st.characters(codec="utf-8", categories=["Cc", "Cf", "Zl"]), min_size=1, max_size=4),
    st.integers(-(10**6), 10**6),
    st.sampled_from([-1, 0, 2**63, 10**30, 10**5000]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.none(),
    st.booleans(),
    st.lists(st.one_of(st.integers(-5, 5), st.text(max_size=4), st.none()), max_size=3),
    st.tuples(st.floats(allow_nan=True)),
    st.binary(max_size=4),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.sampled_from(ODD_TEXT),
    st.builds(object),
)
"""Values of every wrong type and shape (some happen to be right for some argument: then the next rule refuses)."""


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database holding one case run labelled `base` (what the readers read); made once."""
    db = tmp_path_factory.mktemp("api-inputs") / "stored.duckdb"
    api.run(case_ids=[CASE], db=db, label="base")
    return db


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working folder (a default `bench.duckdb` would land here), a folder and a file that is no database."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder").mkdir()
    (tmp_path / "not-a-db.duckdb").write_text("not a database\n")
    return tmp_path


def bad_db(place: Path) -> st.SearchStrategy[object]:
    """A `--db` that is never a usable database."""
    return st.sampled_from([place / "folder", place / "not-a-db.duckdb", str(place / "missing" / "x.duckdb"), "",
                            3, None, b"x.duckdb", "x\x00.duckdb", 2.5, ["a.duckdb"], Path("/dev/null")])  # fmt: skip


def snapshot(*roots: Path) -> dict[str, bytes]:
    """Every file under `roots`, by path, with its bytes."""
    return {str(p): p.read_bytes() for root in roots for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def unchanged(place: Path, stored: Path) -> Iterator[Callable[[], None]]:
    """Asserts that nothing was written: the working folder and the stored database as they were."""
    before = snapshot(place, stored.parent)

    def check() -> None:
        assert snapshot(place, stored.parent) == before, "a refused call wrote something"

    yield check


def refused(call: Callable[[], object], *names: str) -> str:
    """The refusal of `call`: a `BenchInputError` of one line naming a flag or argument (one of `names` when
    given); any other exception fails the test."""
    with pytest.raises(BenchInputError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message and "\r" not in message, repr(message)
    assert FIELD.search(message), f"names no flag or argument: {message!r}"
    if names:
        assert any(n in message for n in names), f"names none of {names}: {message!r}"
    return message


def refused_or_answered(call: Callable[[], object], *names: str) -> None:
    """A reader either answers (the value was usable) or refuses as `refused` says."""
    try:
        call()
    except BenchInputError:
        refused(call, *names)


FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# -- the options -----------------------------------------------------------------------------------------------------
@FAST
@given(name=st.sampled_from([*OPTION_NAMES, "labels", "epoch", "thresholds"]), value=JUNK)
def test_an_option_is_taken_or_refused_naming_its_flag(name: str, value: object) -> None:
    """`BenchOptions.of` takes a value the flag's parser would take, or refuses it in one line naming the flag."""
    try:
        opts = BenchOptions.of(**{name: value})
    except BenchInputError as exc:
        message = str(exc)
        assert "\n" not in message and FIELD.search(message), repr(message)
        flag = next((d.flag for c in BenchOptions.concerns().values() for d in c.declared() if d.name == name), None)
        flag = flag or (declaration()[name].flag if name in declaration().names() else name)
        assert flag in message, f"{name}={value!r}: {message!r}"
        return
    if name == "label" and value is not None:  # a label taken is one the command line would take
        assert isinstance(opts.storage.label, str) and LABEL_PATTERN.fullmatch(opts.storage.label)
    if name in ("epochs", "concurrency"):
        assert type(getattr(opts.selection if name == "epochs" else opts.execution, name)) is int


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"label": "bad\x1b[2J"}, "--label 'bad\\x1b[2J': a label is"),
        ({"label": "x\x00y"}, "--label"),
        ({"label": "sk-" + "a1" * 24}, "--label '[REDACTED]': the label looks like a credential"),
        ({"epochs": "3"}, "--epochs '3': must be an integer"),
        ({"epochs": True}, "--epochs True: must be an integer"),
        ({"epochs": 2.0}, "--epochs 2: must be an integer"),
        ({"no_gain_threshold": float("nan")}, "--no-gain-threshold nan"),
        ({"no_gain_threshold": 10**5000}, "--no-gain-threshold <an integer of about 5001 digits>"),
        ({"transcripts": "no"}, "--no-transcripts 'no': must be True or False"),
        ({"case_ids": "one_case"}, "--case 'one_case': expected a list"),
        ({"db": 3}, "--db 3: expected a path"),
        ({"resume": 3}, "--resume 3: expected a bench run or sweep id"),
        ({"epoch": 3}, "unknown option(s) epoch"),
    ],
)  # fmt: skip
def test_what_the_command_line_refuses_the_options_refuse(values: dict[str, object], words: str) -> None:
    with pytest.raises(BenchInputError) as info:
        BenchOptions.of(**values)
    assert words in str(info.value) and "\n" not in str(info.value), str(info.value)


# -- the functions ---------------------------------------------------------------------------------------------------
def test_the_acceptance_cases(place: Path, stored: Path, unchanged: Callable[[], None]) -> None:
    refused(lambda: api.run(label="bad\x1b[2J"), "--label 'bad\\x1b[2J'")
    refused(lambda: api.whatif(stored, no_gain_thresholds=[-1], label="base"), "--no-gain-threshold -1")
    refused(lambda: api.whatif(stored, no_gain_thresholds=[1], label="base", tool_budgets=[-5]),
            "--max-tool-invocations -5")  # fmt: skip
    refused(lambda: api.run(BenchOptions.of(db=place / "folder")), "--db")
    refused(lambda: api.sweep({"no_gain_threshold": [1]}, db=place / "not-a-db.duckdb"), "--db")
    unchanged()


@FAST
@given(data=st.data())
def test_run_and_sweep_refuse_in_one_line_and_write_nothing(
    data: st.DataObject, place: Path, unchanged: Callable[[], None]
) -> None:
    """One argument of `run` or `sweep` wrong (an option by name, the options, the grid, a hook), the database a
    file that is no DuckDB one (whatever the wrong value lets through is refused there): refused, nothing written."""
    guard = place / "not-a-db.duckdb"
    function = data.draw(st.sampled_from([api.run, api.sweep]), "function")
    which = data.draw(
        st.sampled_from(["option", "options", "hook", "db"] + (["grid"] if function is api.sweep else []))
    )
    kwargs: dict[str, Any] = {"db": guard}
    args: tuple[Any, ...] = ()
    expected: tuple[str, ...] = ()
    if which == "option":
        name = data.draw(st.sampled_from([n for n in [*OPTION_NAMES, "labels", "resume"] if n != "db"]), "name")
        value = data.draw(JUNK, "value")
        kwargs[name] = value
        try:
            BenchOptions.of(**{name: value})
        except BenchInputError as exc:  # the option's own refusal, word for word
            expected = (str(exc),)
    elif which == "options":
        options = data.draw(JUNK, "options")
        args = (options,) if function is api.run else ({}, options)
        expected = ("options", "--db") if options is None else ("options",)
    elif which == "hook":
        name = data.draw(st.sampled_from(["cancellation", "on_progress"] + (["keep_runs"] if function is api.run
                                                                              else [])), "hook")  # fmt: skip
        kwargs[name] = data.draw(JUNK, "value")
        expected = (name, "--db")
    elif which == "grid":
        grid = data.draw(st.one_of(JUNK, st.dictionaries(st.sampled_from([*declaration().names(), "nope"]), JUNK,
                                                         max_size=2)), "grid")  # fmt: skip
        args = (grid,)
        expected = ("grid", "--db")
    else:
        kwargs["db"] = data.draw(bad_db(place), "db")
        expected = ("--db",)
    refused(lambda: function(*args, **kwargs), *expected)
    unchanged()


@FAST
@given(data=st.data())
def test_the_readers_refuse_in_one_line_and_write_nothing(
    data: st.DataObject, place: Path, stored: Path, unchanged: Callable[[], None]
) -> None:
    """One argument of `recommend`, `gate`, `whatif` or `sweeps` wrong, the others right: an answer, or one line
    naming the flag or argument; the database is never changed."""
    which = data.draw(st.sampled_from(["recommend", "gate", "whatif", "sweeps"]), "function")
    junk = data.draw(JUNK, "junk")
    if which == "sweeps":
        refused(lambda: api.sweeps(data.draw(bad_db(place), "db")), "--db")
    elif which == "recommend":
        arg = data.draw(st.sampled_from(["db", "sweep_id", "choices"]), "argument")
        call: dict[str, Any] = {"db": stored, "sweep_id": None, "choices": RecommendChoices()}
        call[arg] = data.draw(bad_db(place), "db") if arg == "db" else junk
        # the stored database holds no sweep: every call is refused
        refused(lambda: api.recommend(**call), {"db": "--db", "sweep_id": "--sweep", "choices": "choices"}[arg],
                "--db", "--sweep")  # fmt: skip
    elif which == "gate":
        arg = data.draw(st.sampled_from(["db", "baseline", "candidate", "thresholds", "bench_runs", "sequential"]))
        call = {"db": stored, "baseline": "base", "candidate": "nobody", "thresholds": GateThresholds(),
                "bench_runs": (), "sequential": False}  # fmt: skip
        call[arg] = data.draw(bad_db(place), "db") if arg == "db" else junk
        # `nobody` holds no case run: every call is refused
        refused(lambda: api.gate(**call), "--db", "--baseline", "--candidate", "thresholds", "--bench-run",
                "sequential")  # fmt: skip
    else:
        arg = data.draw(st.sampled_from(["db", "no_gain_thresholds", "label", "bench_run", "tool_budgets"]))
        call = {"db": stored, "no_gain_thresholds": [1], "label": "base", "bench_run": None, "tool_budgets": ()}
        call[arg] = data.draw(bad_db(place), "db") if arg == "db" else junk
        names = {"db": "--db", "no_gain_thresholds": "--no-gain-threshold", "label": "--label",
                 "bench_run": "--bench-run", "tool_budgets": "--max-tool-invocations"}  # fmt: skip
        refused_or_answered(lambda: api.whatif(**call), names[arg], "--label", "--bench-run")
    unchanged()
