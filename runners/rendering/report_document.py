"""The bench report's document: its sections (text, tables, definitions, figures) and the two media they are written
in, Markdown and one self-contained HTML page — one list of sections, so both always say the same thing
(`runners/rendering/report.py` reads the database and builds the sections)."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from runners.rendering.safe_text import MarkdownText, markdown, markdown_code
from runners.rendering.safe_text import html as safe_html

__all__ = ["Figure", "Section", "TableBlock", "html_document", "markdown_document"]


@dataclass(frozen=True)
class Figure:
    """One PNG figure, drawn when its bytes are first asked for: a report whose output is refused draws nothing."""

    name: str
    """File name (`recall_vs_threshold.png`)."""
    title: str
    """Caption."""
    draw: Callable[[], bytes]
    """Draws the image (its data already read: the database may be closed by then)."""

    @cached_property
    def png(self) -> bytes:
        """The image's bytes, drawn once."""
        return self.draw()


@dataclass(frozen=True)
class TableBlock:
    """A table with its header."""

    header: list[str]
    """Column names."""
    rows: list[list[str]]
    """Cells as text."""


@dataclass
class Section:
    """One heading of the report."""

    title: str
    """Heading."""
    paragraphs: list[str] = field(default_factory=list)
    """Text, one paragraph each."""
    tables: list[TableBlock] = field(default_factory=list)
    """Tables after the text."""
    definitions: dict[str, str] = field(default_factory=dict)
    """term -> one-line definition, after the tables."""
    figures: list[Figure] = field(default_factory=list)
    """Figures last."""


def _md(text: str) -> str:
    """A paragraph the bench wrote as Markdown stays; any other text is escaped (`_safe_text.markdown`)."""
    return text if isinstance(text, MarkdownText) else markdown(text)


def markdown_document(title: str, db: str, sections: list[Section]) -> str:
    """The report as Markdown: every text a case, a model or a user wrote escaped, the bench's own markup kept."""
    md = [f"# {_md(title)}", "", f"Source: {markdown_code(db)}.", ""]
    for s in sections:
        md += [f"## {_md(s.title)}", ""]
        for p in s.paragraphs:
            md += [_md(p), ""]
        for t in s.tables:
            md += ["| " + " | ".join(_md(h) or " " for h in t.header) + " |", "|" + "---|" * len(t.header)]
            md += ["| " + " | ".join(_md(c) for c in row) + " |" for row in t.rows]
            md.append("")
        for term, definition in s.definitions.items():
            md.append(f"- **{_md(term)}**: {_md(definition.split(' — ')[-1])}")
        if s.definitions:
            md.append("")
        for f in s.figures:
            md += [f"### {_md(f.title)}", "", f"![{_md(f.title)}]({f.name})", ""]
    return "\n".join(md)


_CSS = """
body{font-family:system-ui,sans-serif;max-width:1040px;margin:1.5rem auto;padding:0 1rem;line-height:1.45;color:#222}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
p{margin:.6rem 0}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;font-size:.8rem;margin:.8rem 0}
td,th{border:1px solid #ccc;padding:.2rem .35rem;text-align:right;vertical-align:top}
th{overflow-wrap:normal;word-break:normal}
th{background:#f3f3f3;font-weight:600}td:first-child,th:first-child{text-align:left}
dl{font-size:.85rem}dt{font-weight:600;display:inline}dd{display:inline;margin:0}dd::after{content:"";display:block}
img{max-width:100%;height:auto}figure{margin:1.2rem 0}figcaption{font-size:.85rem;color:#555}
code{overflow-wrap:anywhere}
"""


def _breakable(header: str) -> str:
    """A column header that wraps between words, and after the `_` or `/` inside one (`NEVER_RETRIEVED`, `S / F`),
    never inside a word ("case s" under a narrow column): a wide table scrolls in its own box instead."""
    return header.replace("_", "_<wbr>").replace("/", "/<wbr>")


def _cell(text: str) -> str:
    """Escaped; an interval `[a, b]` never breaks inside, so a narrow column wraps before it."""
    return re.sub(r"\[([^\]]*?), ([^\]]*?)\]", "[\\1,&nbsp;\\2]", safe_html(text))


def html_document(title: str, db: str, sections: list[Section]) -> str:
    """The report as one self-contained HTML page, its figures embedded."""
    parts = [f"<h1>{safe_html(title)}</h1>", f"<p>Source: <code>{safe_html(db)}</code></p>"]
    for s in sections:
        parts.append(f"<h2>{safe_html(s.title)}</h2>")
        parts += [f"<p>{safe_html(p)}</p>" for p in s.paragraphs]
        for t in s.tables:
            head = "".join(f"<th>{_breakable(safe_html(h))}</th>" for h in t.header)
            body = "".join("<tr>" + "".join(f"<td>{_cell(c)}</td>" for c in row) + "</tr>" for row in t.rows)
            parts.append(
                f"<div class='scroll'><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
            )
        if s.definitions:
            items = "".join(
                f"<dt>{safe_html(k)}:</dt> <dd>{safe_html(v.split(' — ')[-1])}</dd>" for k, v in s.definitions.items()
            )
            parts.append(f"<dl>{items}</dl>")
        for f in s.figures:
            data = base64.b64encode(f.png).decode()
            parts.append(
                f"<figure><img alt='{safe_html(f.title)}' src='data:image/png;base64,{data}'/>"
                f"<figcaption>{safe_html(f.title)}</figcaption></figure>"
            )
    body = "\n".join(parts)
    return (
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{safe_html(title)}</title><style>{_CSS}</style></head>\n<body>\n{body}\n</body></html>\n"
    )
