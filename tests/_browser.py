"""A page measured as a person would see it: headless Chromium at a 1,100-pixel window."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import tempfile
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


def measure(page: Path, browser: str) -> tuple[int, int, int]:
    """scrollWidth, clientWidth and the right edge of the widest element at a 1,100-pixel window."""
    probe = page.with_name("probe.html")
    probe.write_text(page.read_text().replace("</body>", MEASURE))
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
             "--window-size=1100,2000", "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()],
            capture_output=True, text=True, timeout=120, check=True,
        ).stdout  # fmt: skip
    probe.unlink()
    found = re.search(r'data-measure="(\d+) (\d+) (\d+)"', dom)
    assert found, "the measuring script did not run"
    scroll, client, right = (int(x) for x in found.groups())
    return scroll, client, right


def broken_headers(page: Path, browser: str, *, width: int = 1100) -> list[str]:
    """The table headers of `page` whose words Chromium lays out on more than one line (broken mid-word) at a
    `width`-pixel window."""
    probe = page.with_name("probe-headers.html")
    probe.write_text(page.read_text().replace("</body>", HEADERS))
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
             f"--window-size={width},2000", "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()],
            capture_output=True, text=True, timeout=120, check=True,
        ).stdout  # fmt: skip
    probe.unlink()
    found = re.search(r"data-broken=\"([^\"]*)\"", dom)
    assert found, "the measuring script did not run"
    return list(json.loads(html.unescape(found.group(1))))
