"""Pages laid out as a person would see them: headless Chromium, each page in a window of its width."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

MEASURE = """<script>
window.addEventListener('load', () => {
  const d = document.documentElement;
  let right = 0;
  for (const el of document.body.querySelectorAll('*')) {
    if (el.parentElement && el.parentElement.closest('.scroll')) continue;  // scrolls in its own box, not the page
    right = Math.max(right, el.getBoundingClientRect().right);
  }
  document.body.setAttribute('data-measure', d.scrollWidth + ' ' + d.clientWidth + ' ' + Math.ceil(right));
});
</script></body>"""


HEADERS = """<script>
window.addEventListener('load', () => {
  // a header word (the text between spaces, '_' and '/') laid out on more than one line is broken mid-word
  const broken = [];
  for (const th of document.querySelectorAll('th')) {
    const text = th.textContent;
    const walker = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
    let node;
    while ((node = walker.nextNode())) {
      const re = /[^\\s_\\/]+/g;
      let m;
      while ((m = re.exec(node.data))) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
        if (tops.size > 1) broken.push(text);
      }
    }
  }
  document.body.setAttribute('data-broken', JSON.stringify(broken));
});
</script></body>"""


def chromium() -> str | None:
    """The Chromium on PATH, if any."""
    return next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


@dataclass(frozen=True)
class Page:
    """A page to lay out, and the window it is seen in."""

    html: str
    """The page's HTML."""
    width: int = 1100
    """The window's width in pixels."""


@dataclass(frozen=True)
class Layout:
    """What Chromium laid out for one page."""

    scroll_width: int
    """The document's scrollWidth: over `client_width`, the page scrolls sideways."""
    client_width: int
    """The document's clientWidth: the window's width."""
    right: int
    """The right edge of the widest element (an element in a `.scroll` box scrolls in that box, not the page)."""
    broken_headers: tuple[str, ...]
    """The table headers with a word laid out on more than one line (broken mid-word)."""


_COLLECT = """<script>
window.addEventListener('load', () => {
  for (const frame of document.querySelectorAll('iframe')) {
    const body = frame.contentDocument.body;
    document.body.setAttribute('data-measure-' + frame.id, body.getAttribute('data-measure'));
    document.body.setAttribute('data-broken-' + frame.id, body.getAttribute('data-broken'));
  }
});
</script>"""
"""Copies each page's findings (set by `MEASURE` and `HEADERS` inside it, on its own load) onto the host page,
which `--dump-dom` prints; the host's load event waits for every frame's."""


def lay_out(pages: dict[str, Page], browser: str, folder: Path) -> dict[str, Layout]:
    """Each page laid out by headless Chromium in a window of its width, all in one Chromium: a start costs about
    1.5 CPU-seconds, a page a fraction of it. Each page is an iframe of its width (its viewport: the same numbers
    as a window of that width) holding both measuring scripts; `folder` gets the host page."""
    frames = "".join(  # each frame named by its place: the findings are read back by it
        f"<iframe id='p{i}' style='display:block;border:0;width:{page.width}px;height:2000px'"
        f' srcdoc="{html.escape(page.html.replace("</body>", MEASURE.replace("</body>", HEADERS)), quote=True)}">'
        "</iframe>"
        for i, page in enumerate(pages.values())
    )
    host = folder / "pages.html"
    host.write_text(f"<!doctype html><html><body style='margin:0'>{frames}{_COLLECT}</body></html>")
    widest = max(page.width for page in pages.values())
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
             f"--window-size={widest + 100},{2000 * len(pages)}", "--virtual-time-budget=5000", "--dump-dom",
             host.as_uri()],
            capture_output=True, text=True, timeout=120, check=True,
        ).stdout  # fmt: skip
    laid: dict[str, Layout] = {}
    for i, name in enumerate(pages):
        measured = re.search(rf'data-measure-p{i}="(\d+) (\d+) (\d+)"', dom)
        broken = re.search(rf'data-broken-p{i}="([^"]*)"', dom)
        assert measured and broken, f"the measuring scripts did not run in {name}"
        scroll, client, right = (int(x) for x in measured.groups())
        laid[name] = Layout(scroll, client, right, tuple(json.loads(html.unescape(broken.group(1)))))
    return laid
