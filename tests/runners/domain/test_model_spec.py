"""The model text is parsed in one place (runners/domain/model_spec.py): the parser round-trips every spelling,
refuses the rest, and no other module of `runners` splits a model text, writes the API key's default variable
or compares a model kind or a record mode as text."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runners.domain import model_spec
from runners.domain.model_spec import (
    DEFAULT_PROFILE,
    ModelKind,
    ModelSpec,
    ModelSpecError,
    model_kind,
    parse_model,
)

RUNNERS = Path(__file__).resolve().parents[3] / "runners"
PARSER = RUNNERS / "domain" / "model_spec.py"

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=40)


@given(names)
def test_an_openai_spec_round_trips(name: str) -> None:
    spec = parse_model(f"openai:{name}")
    assert spec == ModelSpec(ModelKind.OPENAI, name, f"openai:{name}")
    assert spec.is_openai and str(spec) == spec.raw
    assert parse_model(str(spec)) == spec and model_kind(spec.raw) is ModelKind.OPENAI


@given(st.one_of(st.just(""), names))
def test_a_scripted_spec_round_trips(profile: str) -> None:
    text = f"scripted:{profile}"
    spec = parse_model(text)
    assert spec == ModelSpec(ModelKind.SCRIPTED, profile or DEFAULT_PROFILE, text)
    assert not spec.is_openai and parse_model(str(spec)) == spec


def test_plain_scripted_is_the_reference_profile() -> None:
    assert parse_model("scripted") == ModelSpec(ModelKind.SCRIPTED, DEFAULT_PROFILE, "scripted")
    assert parse_model(model_spec.DEFAULT_MODEL).kind is ModelKind.SCRIPTED


@given(names.filter(lambda t: t != "scripted" and not t.startswith(("scripted:", "openai:"))))
def test_any_other_text_is_refused_naming_the_spellings(text: str) -> None:
    with pytest.raises(ModelSpecError, match="expected 'scripted', 'scripted:<profile>' or 'openai:<model-name>'"):
        parse_model(text)
    assert model_kind(text) is None


@pytest.mark.parametrize("text", ["openai:", "openai", "scripted?seed=1", "Scripted", " scripted", "gpt-4o"])
def test_near_misses_are_refused(text: str) -> None:
    assert model_kind(text) is None


# -- one place: the parser, the key variable, the vocabularies ------------------------------------------------
_MODEL_WORDS = {"openai", "openai:", "scripted", "scripted:"}
_SPLITTERS = {"startswith", "endswith", "removeprefix", "partition", "rpartition", "split", "rsplit"}
_RECORD_MODES = {"none", "once", "new_episodes", "all"}


def _text_compares(tree: ast.AST, source: str) -> list[str]:
    """Where `tree` splits a model text or compares a model kind or a record mode as text (line: source)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _SPLITTERS:
            words = {a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
            # a source segment costs a pass over the file: taken only where the words already matter
            if words & _MODEL_WORDS or (
                ":" in words and "model" in (ast.get_source_segment(source, node.func.value) or "").lower()
            ):
                found.append(f"{node.lineno}: {ast.get_source_segment(source, node)}")
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            texts = {s.value for s in sides if isinstance(s, ast.Constant) and isinstance(s.value, str)}
            if not texts & ({"openai", "scripted"} | _RECORD_MODES):
                continue
            others = " ".join(ast.get_source_segment(source, s) or "" for s in sides).lower()
            if texts & {"openai", "scripted"} and ("model" in others or "kind" in others):
                found.append(f"{node.lineno}: {ast.get_source_segment(source, node)}")
            elif texts & _RECORD_MODES and "mode" in others:
                found.append(f"{node.lineno}: {ast.get_source_segment(source, node)}")
    return found


def test_the_check_sees_the_old_spellings() -> None:
    """The check bites: each way the bench used to read a model text or a record mode is found."""
    old = (
        'a = model.startswith("openai:")\n'
        'b = model == "scripted" or model.startswith("scripted:")\n'
        'c = ms.model.partition(":")[2]\n'
        'd = spec.kind == "openai"\n'
        'e = opts.record_mode == "none"\n'
        'f = (record_mode or "none") == "none"\n'
    )
    assert {int(hit.split(":")[0]) for hit in _text_compares(ast.parse(old), old)} == {1, 2, 3, 4, 5, 6}
    fine = 'host, _, port = upstream.partition(":")\nx = status == "none"\n'
    assert _text_compares(ast.parse(fine), fine) == []


def test_no_module_but_the_parser_reads_a_model_text() -> None:
    found = {}
    for path in sorted(RUNNERS.rglob("*.py")):
        if path == PARSER:
            continue
        source = path.read_text()
        if hits := _text_compares(ast.parse(source), source):
            found[str(path.relative_to(RUNNERS.parent))] = hits
    assert found == {}, found


def test_the_default_key_variable_is_written_once() -> None:
    """`OPENAI_API_KEY` is a text in one place, `DEFAULT_API_KEY_ENV`; every other module names the constant."""
    where = []
    for path in sorted(RUNNERS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "OPENAI_API_KEY" in node.value:
                where.append(f"{path.relative_to(RUNNERS.parent)}:{node.lineno}")
    assert where == [f"runners/domain/model_spec.py:{_line_of('DEFAULT_API_KEY_ENV = ')}"], where


def _line_of(prefix: str) -> int:
    return next(i for i, line in enumerate(PARSER.read_text().splitlines(), 1) if line.startswith(prefix))
