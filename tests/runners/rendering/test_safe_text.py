"""The one rendering rule per medium (runners/rendering/safe_text.py): terminal text never carries a character a
terminal acts on, Markdown renders as exactly its characters (markdown-it, CommonMark plus GitHub's tables and
strikethrough), HTML is escaped with bidi controls visible; and the places that write each medium use it."""

from __future__ import annotations

import dataclasses
import html
import io
import re
import unicodedata

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from rich.table import Table
from rich.text import Text

from runners.rendering import tables
from runners.rendering.safe_text import MarkdownText, markdown, markdown_code, terminal
from runners.rendering.safe_text import html as safe_html

HOSTILE = (
    "\x1b[2J\x1b]0;T\x07\x1b]8;;http://evil/\x1b\\link\x1b]8;;\x1b\\\x00\u202eevil\u202c\u2066x\u2069\u200f"
    " <img src=x onerror=alert(1)> [x](javascript:alert(1)) \x9b31m\r\x7f"
)
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"


def unsafe(text: str) -> list[str]:
    """Characters a terminal would act on or that reorder or hide text (everything but printable text, spaces,
    newline and tab)."""
    return [ch for ch in text if not (ch.isprintable() or ch in "\n\t" or unicodedata.category(ch) == "Zs")]


def _md() -> MarkdownIt:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


def rendered_text(source: str) -> tuple[str, set[str]]:
    """The text a Markdown paragraph renders to and the kinds of inline token it holds besides text."""
    tokens = _md().parse(source)
    inline = [t for t in tokens if t.type == "inline"]
    kinds = {t.type for t in tokens if t.type not in ("paragraph_open", "paragraph_close", "inline")}
    children = [c for t in inline for c in (t.children or [])]
    kinds |= {c.type for c in children if c.type != "text"}
    return "".join(c.content for c in children if c.type == "text"), kinds


# -- terminal -------------------------------------------------------------------------------------------------
@given(st.text())
@example(HOSTILE)
@example(BIDI)
def test_terminal_text_holds_no_control_escape_or_bidi_character(text: str) -> None:
    out = terminal(text)
    assert unsafe(out) == []
    assert terminal(out) == out, "idempotent: an escaped text is left as it is"


PRINTABLE = st.characters(blacklist_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")) | st.sampled_from("\n\t")


@given(st.text(PRINTABLE))
def test_printable_text_is_unchanged_on_the_terminal(text: str) -> None:
    assert terminal(text) == text


def test_each_control_is_shown_as_its_escape() -> None:
    assert terminal("a\x1b[2Jb\x07\x00\x9b\u202ec\U000e0041\r\n") == "a\\x1b[2Jb\\x07\\x00\\x9b\\u202ec\\U000e0041\n"


def test_the_console_boundary_escapes_what_a_renderable_holds() -> None:
    """Whatever reaches a bench console — a Text, a table cell, a plain string — is written escaped, styles
    kept; a command cannot print past it through the console."""
    console = tables.make_console()
    console.file = io.StringIO()
    table = Table()
    table.add_column("x")
    table.add_row(Text(HOSTILE, style="bold"))
    console.print(table)
    console.print(HOSTILE)
    console.print(Text(HOSTILE), soft_wrap=True)
    written = console.file.getvalue()
    assert unsafe(written) == [] and "\\x1b[2J" in written and "\\u202e" in written


def test_a_shortened_question_counts_the_escaped_width() -> None:
    line = tables.shorten("why \u202eevil\x1b[2J now", 40)
    assert line == "why \\u202eevil\\x1b[2J now"


# -- Markdown -------------------------------------------------------------------------------------------------
@settings(max_examples=400)
@given(st.text())
@example(HOSTILE)
@example("<img src=x onerror=alert(1)>")
@example("1. a")
@example("- a")
@example("a_b_c __init__ _x_ *y* `z` ~~s~~ $m$ a|b &amp; &#60; \\* [l]: /u ![i](s) <http://x>")
@example("# h #")
@example("===")
@example("- - -")
@example("+ a")
@example("1) a")
@example("12345. a")
def test_markdown_text_renders_as_exactly_its_characters(text: str) -> None:
    escaped = markdown(text)
    want = terminal(re.sub(r"[ \t\r\n]+", " ", text).strip())
    for source, prefix in ((f"A {escaped} Z", "A "), (escaped, "")):  # inside a line and at its start
        got, kinds = rendered_text(source)
        assert kinds == set(), (source, kinds)  # text tokens only: no HTML, link, emphasis, code, list, heading
        if want:
            assert got == (f"{prefix}{want} Z" if prefix else want), source


@given(st.text())
@example("a`b``c")
@example("`")
@example("<img src=x>")
def test_a_code_span_shows_its_text_verbatim(text: str) -> None:
    want = terminal(re.sub(r"[ \t\r\n]+", " ", text).strip())
    tokens = _md().parse(f"A {markdown_code(text)} Z")
    children = [c for t in tokens if t.type == "inline" for c in (t.children or [])]
    kinds = [c.type for c in children]
    assert "html_inline" not in kinds
    if want:
        code = [c.content for c in children if c.type == "code_inline"]
        assert code == [want], (markdown_code(text), kinds)


def test_words_with_underscores_stay_readable() -> None:
    for plain in ("missing_context gpt-4o-mini (all) 40% → 60%", "2.50", "-1.5 pts", "+31%", "1.2.3", "a - b"):
        assert markdown(plain) == plain
    assert markdown("<img src=x onerror=alert(1)>") == "\\<img src=x onerror=alert(1)\\>"


# -- HTML -----------------------------------------------------------------------------------------------------
@given(st.text())
@example(HOSTILE)
def test_html_text_is_escaped_and_shows_bidi_controls(text: str) -> None:
    out = safe_html(text)
    assert "<" not in out and ">" not in out and unsafe(out) == []
    assert html.unescape(out) == terminal(text)


# -- the writers ----------------------------------------------------------------------------------------------
def _gate_result(baseline: str, candidate: str):  # type: ignore[no-untyped-def]
    from runners.decisions.gate import Pair, evaluate

    pairs = [Pair(f"c{i}", "fam0", e, True, i % 3 != 0, (1.0, 2.0, 10.0), (1.0, 2.0, 10.0))
             for i in range(12) for e in (1, 2)]  # fmt: skip
    return evaluate(pairs, baseline, candidate, k=1, mde=False)


def test_the_gate_summary_renders_a_hostile_label_and_path_as_text(tmp_path: object) -> None:
    from runners.rendering.gate import markdown as gate_markdown

    label = "<img src=x onerror=alert(1)>"
    result = dataclasses.replace(_gate_result("base`x", label), db="we`ird <b>.duckdb")
    md = gate_markdown(result)
    html_out = _md().render(md)
    assert "<img" not in html_out and "<b>" not in html_out
    assert not [t for t in _md().parse(md) if t.type == "html_block"]
    assert "&lt;img src=x onerror=alert(1)&gt;" in html_out.splitlines()[0], html_out.splitlines()[0]


def test_report_markdown_escapes_titles_alt_text_and_keeps_its_own_markup() -> None:
    from runners.rendering.report_document import Figure, Section, markdown_document

    label = "<img src=x onerror=alert(1)>](javascript:alert(1))"
    sections = [Section(f"Bench run br-1 (openai:m, label {label})", [f"{label} paragraph",
                        MarkdownText(f"{markdown_code('case')} — {markdown_code('harness-bench show x')}")],
                        figures=[Figure("f.png", f"Outcome — {label}", lambda: b"")])]  # fmt: skip
    md = markdown_document(f"report — {label}", "x`y.duckdb", sections)
    out = _md().render(md)
    assert out.count("<img") == 1 and '<img src="f.png" alt="Outcome — &lt;img src=x' in out, out
    assert "href" not in out and not [t for t in _md().parse(md) if t.type == "html_block"]
    tokens = [c for t in _md().parse(md) if t.type == "inline" for c in (t.children or [])]
    images = [c for c in tokens if c.type == "image"]
    assert [i.attrs["src"] for i in images] == ["f.png"], "one image, its alt text the escaped title"
    assert [c.type for c in tokens].count("link_open") == 0
    assert [c.content for c in tokens if c.type == "code_inline"] == ["x`y.duckdb", "case", "harness-bench show x"]


def test_exported_inspect_logs_do_not_trust_their_content(tmp_path: object) -> None:
    from pathlib import Path

    from inspect_ai.log import read_eval_log

    from runners.interchange.inspect_export import export_inspect
    from runners.plan.options import BenchOptions
    from runners.run.bench import plan_run, run_bench

    assert isinstance(tmp_path, Path)
    db = tmp_path / "i.duckdb"
    run_bench(plan_run(BenchOptions.of(evalsets=["missing_context"], db=db, label="x")))
    written = export_inspect(db, tmp_path / "logs")
    assert written
    for path, _ in written:
        log = read_eval_log(str(path), header_only=True)
        assert log.eval.viewer is not None and log.eval.viewer.trust_content is False


@pytest.mark.parametrize("label", ["ci", "base", "cand", "gpt-4o-mini", "a label", "openai:gpt-4o", "v1.2_rc+3",
                                   "ngt=3", "br-20261202-075419-890c4f"])  # fmt: skip
def test_labels_of_the_readme_and_the_tests_are_accepted(label: str) -> None:
    from runners.plan.labels import label_arg

    assert label_arg(label) == label


@pytest.mark.parametrize("label", ["", " a", "a ", "<img>", "a\nb", "a\u202eb", "a\x1b[2J", "a`b", "[a](b)", "a|b",
                                   "a*b*", "&lt;", "x" * 201, "-a", "_a"])  # fmt: skip
def test_labels_outside_the_allowlist_are_refused(label: str) -> None:
    import argparse

    from runners.plan.labels import label_arg

    with pytest.raises(argparse.ArgumentTypeError, match="a label is 1-200 letters, digits, spaces"):
        label_arg(label)


def test_the_streamed_case_list_is_escaped_too(tmp_path: object) -> None:
    """Above `STREAM_CASES_ABOVE` cases `cases` writes plain rows past rich: each is escaped as well."""
    from pathlib import Path

    import yaml

    from runners.domain.evalset import spool_cases

    assert isinstance(tmp_path, Path)
    root = Path(__file__).resolve().parents[3]
    doc = yaml.safe_load((root / "evalsets" / "diagnosable.yaml").read_text(encoding="utf-8"))
    case = {**doc["cases"][0], "id": "hostile_stream_t1", "question": HOSTILE}
    path = tmp_path / "h.yaml"
    path.write_text(yaml.safe_dump({"cases": [case]}, allow_unicode=True), encoding="utf-8")
    for width in (60, 120):
        lines = list(tables.cases_lines(spool_cases([str(path)], []), width))
        assert all(unsafe(line) == [] for line in lines) and any("\\x1b[2J" in line for line in lines)
