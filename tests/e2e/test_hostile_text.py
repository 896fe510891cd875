"""A hostile case and a hostile endpoint through `cases`, `run`, `show`, `diff`, `gate`, `report` and `export`:
every command runs on a pseudo-terminal (rich believes it writes to a terminal) and writes no escape sequence,
control or bidi character a case or a model wrote; the Markdown it writes renders no HTML, link or image of
theirs (markdown-it); the HTML shows bidi controls; the Inspect logs say their content is not trusted."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest
import yaml
from markdown_it import MarkdownIt

from runners.cli import main
from tests._fake_endpoint import Endpoint, completion, serve

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = (
    "\x1b[2J\x1b]0;PWNED\x07\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\\x00\u202eevil\u202c\u2066x\u2069"
    "\u200f <img src=x onerror=alert(1)> [x](javascript:alert(1)) \x9b2J\x7f"
)
CASE = "hostile_pool_t1"
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
RICH_OWN = re.compile(r"\x1b\[[0-9;]*m|\x1b\[\?25[lh]|\x1b\[[0-9]*[AK]|\x1b\[2K|\r")
"""What rich itself writes on a terminal: SGR styles, the progress bar's cursor hiding, moves and line erasing."""


def raw_controls(out: str) -> list[str]:
    """Characters a case or a model could have made the terminal act on: anything left once rich's own styles and
    cursor moves are taken out, that is not printable, a space, a newline or a tab."""
    rest = RICH_OWN.sub("", out)
    return [ch for ch in rest if not (ch.isprintable() or ch in "\n\t" or ch == " " or ch == "\xa0")]


def _hostile_file(path: Path) -> Path:
    doc = yaml.safe_load((ROOT / "evalsets" / "diagnosable.yaml").read_text(encoding="utf-8"))
    case = dict(doc["cases"][0])
    case["id"] = CASE
    case["question"] = f"{HOSTILE} {case['question']}"
    case["context"] = {**case["context"], "service": f"gateway {HOSTILE}"}
    for line in case["fixtures"]["logs"]:
        line["message"] = f"{line['message']} {HOSTILE}"
    draft = case["trajectory"]["draft"]
    draft["conclusion"] = f"{HOSTILE} {draft['conclusion']}"
    draft["next_steps"] = [HOSTILE]
    for claim in draft["claims"]:
        claim["statement"] = HOSTILE + claim["statement"]
    path.write_text(yaml.safe_dump({"cases": [case]}, allow_unicode=True), encoding="utf-8")
    return path


def on_pty(argv: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 120) -> tuple[int, str]:
    """`harness-bench ARGV` with stdin, stdout and stderr on one pseudo-terminal of 120 columns."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    environ = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR", "TERM")}
    environ.update({"PYTHONPATH": str(ROOT), "TERM": "xterm-256color", **(env or {})})
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from runners.cli import main; sys.exit(main(sys.argv[1:]))", *argv],
        stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=environ, close_fds=True,
    )  # fmt: skip
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    exited = False
    while time.monotonic() < deadline:
        # once the child has gone, what it wrote last is read before stopping: it may have been written between a
        # select that found nothing and the poll that found the child gone
        ready, _, _ = select.select([master], [], [], 0 if exited else 0.5)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif exited:
            break
        else:
            exited = proc.poll() is not None
    code = proc.wait(timeout=10)
    os.close(master)
    return code, b"".join(chunks).decode("utf-8", errors="strict")


@dataclass(frozen=True)
class World:
    """The hostile case's runs: one scripted (`base`), one from the hostile endpoint (`cand`)."""

    tmp: Path
    """The working folder (cwd of every command)."""
    evalset: Path
    """The hostile evaluation file."""
    db: Path
    """Both runs' database."""
    outputs: dict[str, str]
    """Terminal output of each command run while building it."""


def _endpoint_replies(ep: Endpoint) -> None:
    args = json.dumps({"start": "2026-06-12T09:00:00Z", "end": "2026-06-12T09:30:00Z", "tenant": "t1",
                       "level": "ERROR", "query": HOSTILE})  # fmt: skip
    calls = [
        {"id": "call_1", "type": "function", "function": {"name": "log_search", "arguments": args}},
        {"id": f"call_2{HOSTILE}", "type": "function", "function": {"name": f"x{HOSTILE}", "arguments": args}},
    ]
    usage = {"prompt_tokens": 5, "completion_tokens": 5}
    ep.push(200, completion(f"{HOSTILE} looking", tool_calls=calls, usage=usage))
    draft = json.dumps({"conclusion": f"{HOSTILE} pool", "claims": [{"statement": HOSTILE, "citations": []}]})
    for _ in range(8):
        ep.push(200, completion(f"{HOSTILE}\n{draft}", usage=usage))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("hostile")
    evalset = _hostile_file(tmp / "hostile.yaml")
    db = tmp / "h.duckdb"
    outputs: dict[str, str] = {}
    code, outputs["cases"] = on_pty(["cases", "--evalset", str(evalset)], tmp)
    assert code == 0, outputs["cases"]
    code, outputs["run base"] = on_pty(["run", "--evalset", str(evalset), "--db", str(db), "--label", "base"], tmp)
    assert code == 0, outputs["run base"]
    with serve() as ep:
        _endpoint_replies(ep)
        code, outputs["run cand"] = on_pty(
            ["run", "--evalset", str(evalset), "--db", str(db), "--label", "cand", "--model", "openai:m",
             "--base-url", ep.base_url], tmp, env={"OPENAI_API_KEY": "sk-test-hostile-0000"},
        )  # fmt: skip
        assert ep.requests, outputs["run cand"]
    assert code in (0, 1, 2), outputs["run cand"]
    yield World(tmp, evalset, db, outputs)


def test_cases_and_run_write_no_raw_control(world: World) -> None:
    for name, out in world.outputs.items():
        assert raw_controls(out) == [], (name, out)
    assert "\\x1b[2J" in world.outputs["cases"] and "\\u202e" in world.outputs["cases"], "shown, escaped"


def test_a_hostile_case_id_is_echoed_escaped(world: World) -> None:
    code, out = on_pty(["run", "--evalset", str(world.evalset), "--db", str(world.db), "--case", "\x1b]0;T\x07"],
                       world.tmp)  # fmt: skip
    assert code == 2 and raw_controls(out) == [], out
    assert "\\x1b]0;T\\x07" in out


@pytest.mark.parametrize("label", ["base", "cand"])
def test_show_writes_no_raw_control_and_the_page_shows_bidi(world: World, label: str) -> None:
    code, out = on_pty(["show", "--db", str(world.db), "--label", label, "--case", CASE], world.tmp)
    assert code == 0 and raw_controls(out) == [], out
    assert "\\x1b]0;PWNED\\x07" in out and "\\u202e" in out and "<img src=x onerror=alert(1)>" in out
    page = world.tmp / f"{label}.html"  # the page is what is read: written in process (no terminal to check)
    assert main(["show", "--db", str(world.db), "--label", label, "--case", CASE, "--html", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    assert raw_controls(html) == [] and "<img" not in html and "\\u202e" in html


def test_diff_writes_no_raw_control(world: World) -> None:
    code, out = on_pty(["diff", "--db", str(world.db), "base", "cand", "--case", CASE], world.tmp)
    assert code == 0 and raw_controls(out) == [], out
    assert "\\u202e" in out


def _live_markup(md: str, own_images: set[str]) -> list[str]:
    """HTML, links and images of someone else's in a Markdown document, as markdown-it renders it."""
    parser = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    found = []
    for token in parser.parse(md):
        if token.type == "html_block":
            found.append(token.content)
        for child in token.children or []:
            if child.type in ("html_inline", "link_open"):
                found.append(str(child))
            if child.type == "image" and child.attrs.get("src") not in own_images:
                found.append(str(child.attrs))
    rendered = parser.render(md)
    found += [m for m in re.findall(r"<img[^>]*>", rendered) if not any(f'src="{s}"' in m for s in own_images)]
    return found


def test_gate_and_report_markdown_render_no_live_html(world: World) -> None:
    summary, junit = world.tmp / "gate-summary.md", world.tmp / "gate-junit.xml"
    code, out = on_pty(["gate", "--db", str(world.db), "--baseline", "base", "--candidate", "cand", "--k", "1",
                        "--summary", str(summary), "--junit", str(junit)], world.tmp)  # fmt: skip
    assert code in (0, 1, 3) and raw_controls(out) == [], out
    assert _live_markup(summary.read_text(encoding="utf-8"), set()) == []
    # a label stored by an older version, before labels were an allowlist: the report escapes it in its
    # headings, paragraphs and image alt text
    old = world.tmp / "old.duckdb"
    old.write_bytes(world.db.read_bytes())
    con = duckdb.connect(str(old))
    con.execute("UPDATE bench_runs SET label = ? WHERE label = 'cand'", [HOSTILE])
    con.execute("UPDATE case_runs SET label = ? WHERE label = 'cand'", [HOSTILE])
    con.close()
    code, out = on_pty(["report", "--db", str(old), "--out", str(world.tmp / "rep")], world.tmp)
    assert code == 0 and raw_controls(out) == [], out
    md = (world.tmp / "rep" / "report.md").read_text(encoding="utf-8")
    pngs = {p.name for p in (world.tmp / "rep").glob("*.png")}
    assert "onerror" in md and _live_markup(md, pngs) == []
    assert raw_controls(md) == [] and raw_controls((world.tmp / "rep" / "report.html").read_text()) == []


def test_exported_inspect_logs_are_not_trusted(world: World) -> None:
    from inspect_ai.log import read_eval_log

    code, out = on_pty(["export", "--db", str(world.db), "--inspect", str(world.tmp / "logs")], world.tmp)
    assert code == 0 and raw_controls(out) == [], out
    logs = sorted((world.tmp / "logs").glob("*.eval"))
    assert len(logs) == 2
    for path in logs:
        log = read_eval_log(str(path))
        assert log.eval.viewer is not None and log.eval.viewer.trust_content is False
        assert any("onerror" in json.dumps(s.model_dump(mode="json")) for s in log.samples or [])
