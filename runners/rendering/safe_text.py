"""The one rendering rule per medium for text a case, a model or a user wrote: terminal, Markdown, HTML.

A case file, a model answer or a tool argument may hold escape sequences (`ESC[2J`, the window-title
`ESC]0;…BEL`, OSC 8 hyperlinks), NUL bytes, bidi overrides (U+202E) or Markdown and HTML (`<img
onerror=…>`). Every reader-facing output passes such text through one function of this module:

- `terminal`: every character that is not printable is shown as its Python escape (`\\x1b`, `\\u202e`),
  so nothing reaches the terminal that it would act on, and invisible reordering shows; `\\n` and `\\t` stay.
- `markdown` / `markdown_code`: text that CommonMark (and GitHub's extensions) renders as literal
  characters, never as HTML, a link, emphasis, a code span or a table cell break.
- `html`: `html.escape` of the `terminal` form, so a bidi override is visible on the page too.
- `xml`: the `terminal` form, XML-escaped (quotes too): every character XML 1.0 forbids (C0 controls but
  tab and newline, lone surrogates, U+FFFE/U+FFFF) is among those `terminal` shows as escapes, so the file parses.

`TerminalSafe` applies `terminal` to every text segment a rich console writes, so a command that prints
through the bench's consoles cannot bypass it.
"""

from __future__ import annotations

import html as _html
import re
import unicodedata
from xml.sax.saxutils import escape as _xml_escape

from rich.console import Console, ConsoleOptions, ConsoleRenderable, RenderableType, RenderHook, RenderResult
from rich.segment import Segment

__all__ = ["MarkdownText", "TerminalSafe", "html", "markdown", "markdown_code", "terminal", "xml"]

_KEPT = frozenset("\n\t")
"""Control characters a terminal lays out and never acts on beyond that."""


def _allowed(ch: str) -> bool:
    # An allowlist: printable characters and every kind of space separator (NBSP, thin space: glyphs
    # a terminal draws); the rest — C0, DEL, C1, bidi and other format characters, line/paragraph
    # separators, surrogates, private-use and unassigned code points — is shown escaped.
    return ch.isprintable() or ch in _KEPT or unicodedata.category(ch) == "Zs"


def _escaped(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def terminal(text: str) -> str:
    """`text` with every character a terminal could act on (or that reorders or hides text) shown as its
    escape; printable text, newlines and tabs are returned unchanged. A CRLF line end is a newline."""
    if text.isprintable():
        return text
    text = text.replace("\r\n", "\n")
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if not line.isprintable():
            lines[i] = "".join(ch if _allowed(ch) else _escaped(ch) for ch in line)
    return "\n".join(lines)


def html(text: object) -> str:
    """Text for an HTML page: the `terminal` form (bidi controls visible), escaped (quotes too)."""
    return _html.escape(terminal(str(text)))


def xml(text: object) -> str:
    """Text for an XML element or attribute (JUnit): the `terminal` form, escaped (quotes too)."""
    return _xml_escape(terminal(str(text)), {'"': "&quot;"})


class MarkdownText(str):
    """Markdown the bench wrote itself, its data already passed through `markdown` or `markdown_code`."""

    __slots__ = ()


_ALWAYS = frozenset("\\`*[]<>&|~$#")
"""Characters escaped wherever they are: HTML and autolinks (`<`, `&`), links and images (`[`, `]`),
emphasis and code (`*`, backtick), table cells (`|`), GitHub's strikethrough and math (`~`, `$`), a heading's
closing sequence (`#`), blockquotes (`>`) and the escape character itself."""
_BLOCK_START = re.compile(r"(?:[-+]|\d{1,9}[.)])(?= |$)|[-= ]+$")
"""A list item (`- `, `+ `, `1. `, `1) `), a thematic break or a setext underline (`---`, `===`): blocks that
open only at the start of a line (the text may be placed there)."""
_SPACES = re.compile(r"[ \t\r\n]+")


def markdown(text: str) -> str:
    """`text` as inline Markdown that renders as exactly its characters (on one line: a newline would end a
    heading or a table row). An `_` inside a word (`empty_logs`) is left as is: it cannot be emphasis."""
    text = terminal(_SPACES.sub(" ", text).strip())
    out: list[str] = []
    for i, ch in enumerate(text):
        if ch == "_":
            inner = 0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum()
            out.append(ch if inner else "\\_")
        elif ch in _ALWAYS:
            out.append("\\" + ch)
        else:
            out.append(ch)
    escaped = "".join(out)
    m = _BLOCK_START.match(escaped)  # the characters it matches are never escaped above: same place in both
    if m:  # `\1.` is no escape (a digit is not punctuation): an ordered item's `.` or `)` is escaped instead
        at = m.end() - 1 if escaped[0].isdigit() else 0
        escaped = escaped[:at] + "\\" + escaped[at:]
    return escaped


def markdown_code(text: str) -> str:
    """`text` as an inline code span (content shown verbatim): fenced by one backtick more than its longest
    run of backticks, padded with a space when it starts or ends with one, on one line."""
    text = terminal(_SPACES.sub(" ", text).strip())
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


class _Safe:
    """A renderable whose text segments pass through `terminal` (rich's own control codes and styles stay)."""

    def __init__(self, inner: RenderableType) -> None:
        self.inner = inner

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for seg in console.render(self.inner, options):
            if seg.control or seg.text.isprintable():
                yield seg
            else:
                yield Segment(terminal(seg.text), seg.style, seg.control)


class TerminalSafe(RenderHook):
    """The console boundary: whatever is printed through a console holding this hook is `terminal`-safe."""

    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        """Each renderable wrapped so its text segments are escaped as they are written."""
        return [_Safe(r) for r in renderables]
