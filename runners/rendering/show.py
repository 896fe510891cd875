"""`harness-bench show` and `harness-bench diff`: a stored transcript as plain text (80 columns, no
colour, fit for a pipe) or as one self-contained HTML page.

One block per model call: what that call sent (prompts, observations), then what the model answered
(text, each tool call with its raw arguments and, beside it, the Harness's decision). The SemanticGuard's
isolated call and the guard verdicts follow; the outcome and stop reason end the transcript.
"""

from __future__ import annotations

import json
import re
import shlex
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness import EntryKind, InvocationStatus, ModelPurpose
from runners.decisions.funnel import stage_of
from runners.rendering.safe_text import html as safe_html
from runners.rendering.safe_text import terminal
from runners.store.transcripts import GUARD_VERDICT, CaseRunInfo, Message

__all__ = [
    "Block",
    "blocks",
    "diff_command",
    "first_divergence",
    "render_diff",
    "render_html",
    "render_text",
    "verdict",
]

WIDTH = 80
_SYSTEM_LINES = 3
"""Lines of the system prompt shown (it is the same for every case; `--full` prints it whole)."""


@dataclass(frozen=True, slots=True)
class Block:
    """One turn of a transcript: the messages one model call sent and what it answered."""

    title: str
    """`turn 2 (model call 2)`, `SemanticGuard (model call 5)`, `not sent`, `guard verdicts`."""
    messages: tuple[Message, ...]
    """Its rows, in order."""
    turn: int | None
    """The diagnosis turn number (None for the guard, unsent and verdict blocks)."""


def blocks(messages: Sequence[Message]) -> list[Block]:
    """Group a transcript into turns (by the model call that sent or produced each row)."""
    out: list[Block] = []
    current: list[Message] = []
    key: tuple[str, int | None] | None = None
    turn = 0

    def close() -> None:
        nonlocal turn
        if not current or key is None:
            return
        purpose, call = key
        if purpose == GUARD_VERDICT:
            out.append(Block("guard verdicts", tuple(current), None))
        elif purpose == ModelPurpose.SEMANTIC_GUARD:
            out.append(Block(f"SemanticGuard, isolated call (model call {call})", tuple(current), None))
        elif not call:
            out.append(Block("produced but never sent (the run ended first)", tuple(current), None))
        else:
            turn += 1
            out.append(Block(f"turn {turn} (model call {call})", tuple(current), turn))

    for m in messages:
        k = (GUARD_VERDICT, None) if m.kind == GUARD_VERDICT else (m.purpose, m.model_call)
        if k != key:
            close()
            current, key = [], k
        current.append(m)
    close()
    return out


def _wrap(text: str, indent: str, width: int) -> list[str]:
    # escaped before wrapping, so a line's width counts what the terminal shows
    lines: list[str] = []
    for raw in terminal(text).splitlines() or [""]:
        lines.extend(textwrap.wrap(raw, width, initial_indent=indent, subsequent_indent=indent,
                                   break_long_words=True, break_on_hyphens=False, replace_whitespace=False)
                     or [indent.rstrip()])  # fmt: skip
    return lines


def _decision(m: Message) -> str:
    """The Harness's decision on one tool call, in one line."""
    status = m.get("invocation_status")
    parts: list[str] = []
    if status == InvocationStatus.REJECTED:
        parts.append(f"REJECTED: {m.get('rejection')}")
        if m.get("violation"):
            parts.append(f"violation {m.get('violation')}")
    elif status is not None:
        parts.append(f"ADMITTED → {status}" + (f" {m.get('evidence_status')}" if m.get("evidence_status") else ""))
    else:
        parts.append("no decision recorded")
    if m.get("scope"):
        parts.append(f"scope {m.get('scope')}")
    if m.get("gain"):
        parts.append(f"gain {m.get('gain')} ({str(m.get('gain_producer')).lower()})")
    if m.get("stop_required"):
        parts.append("STOP_REQUIRED delivered")
    if m.get("budget_hit"):
        parts.append(f"budget {m.get('budget_hit')} reached")
    if m.get("used_model_calls") is not None:
        parts.append(f"used: {m.get('used_model_calls')} model calls, {m.get('used_tool_invocations')} tools,"
                     f" {m.get('used_tokens')} tokens")  # fmt: skip
    line = "; ".join(parts)
    if m.get("decision_detail"):
        line += f" — {m.get('decision_detail')}"
    return line


def _tools(text: str) -> list[tuple[str, str]]:
    """(name, description) of each tool a TOOLS entry lists (nothing when it is not that list)."""
    try:
        data = json.loads(text)
    except ValueError:
        return []
    items = data if isinstance(data, list) else []
    return [(str(t.get("name")), str(t.get("description"))) for t in items if isinstance(t, dict)]


def loop_name(bench: Mapping[str, object]) -> str:
    """Who decided each tool call of a run: the Harness, or the plain loop (`--agent plain`, no Harness), which
    admits every call it can parse."""
    return "plain loop" if bench.get("agent") == "plain" else "Harness"


def _message_lines(m: Message, width: int, *, full: bool, draft: bool, loop: str = "Harness") -> list[str]:
    text = m.content or ""
    kind = m.kind
    if kind == EntryKind.TOOLS:
        offered = _tools(text)
        if not full:
            return [f"  TOOLS {', '.join(name for name, _ in offered)} (descriptions: --full)"]
        return ["  TOOLS", *(line for name, what in offered for line in _wrap(f"{name}: {what}", "    ", width))]
    if kind == EntryKind.SYSTEM:
        body = text.splitlines()
        shown = body if full else body[:_SYSTEM_LINES]
        more = [] if full or len(body) <= _SYSTEM_LINES else [f"    … ({len(body) - _SYSTEM_LINES} more lines; --full)"]
        return ["  SYSTEM", *_wrap("\n".join(shown), "    ", width), *more]
    if kind == EntryKind.USER:
        return ["  USER", *_wrap(text, "    ", width)]
    if kind == EntryKind.OBSERVATION:
        head = f"  OBSERVATION for {m.get('tool_call_id')}"
        if "STOP_REQUIRED" in text:
            head += "  [STOP_REQUIRED]"
        if m.get("sent") is False:
            head += "  (never sent)"
        return [head, *_wrap(text, "    ", width)]
    if kind == EntryKind.ASSISTANT:
        tokens = f"{m.get('input_tokens') or 0} in / {m.get('output_tokens') or 0} out tokens"
        title = "  DRAFT" if draft else "  ASSISTANT"
        lines = [f"{title} ({tokens}" + (f", finish {m.get('finish_reason')})" if m.get("finish_reason") else ")")]
        return lines + (_wrap(text, "    ", width) if text else [])
    if kind == EntryKind.TOOL_CALL:
        return [
            f"  TOOL CALL {m.get('tool')}  id {m.get('tool_call_id') or '(none)'}",
            *_wrap(str(m.get("arguments") or ""), "    ", width),
            *_wrap(f"{loop}: " + _decision(m), "    ", width),
        ]
    if kind == EntryKind.MODEL_ERROR:
        return [f"  MODEL CALL FAILED ({m.get('error_kind')})", *_wrap(text, "    ", width)]
    if kind == GUARD_VERDICT:
        return [f"  {m.get('guard')}: {m.get('verdict')}", *(_wrap(text, "    ", width) if text else [])]
    return [f"  {kind}", *_wrap(text, "    ", width)]


def _draft_seq(messages: Sequence[Message]) -> int | None:
    """The Draft: the diagnosis loop's last assistant message, when no tool call follows it."""
    last: int | None = None
    for m in messages:
        if m.purpose == ModelPurpose.DIAGNOSIS and m.kind == EntryKind.ASSISTANT:
            last = m.seq
        elif (
            m.purpose == ModelPurpose.DIAGNOSIS and m.kind == EntryKind.TOOL_CALL and last is not None and m.seq > last
        ):
            last = None
    return last


def _block_lines(
    block: Block, width: int, *, full: bool, draft: int | None, mark: str = "", loop: str = "Harness"
) -> list[str]:
    title = f"── {block.title}{mark} "
    lines = [title + "─" * max(0, width - len(title))]
    for m in block.messages:
        lines.extend(_message_lines(m, width, full=full, draft=m.seq == draft, loop=loop))
    return lines


def _header(info: CaseRunInfo) -> list[str]:
    r, b = info.row, info.bench
    budget = (f"no_gain_threshold={r.get('no_gain_threshold')} max_tool_invocations={r.get('max_tool_invocations')}"
              f" max_model_calls={r.get('max_model_calls')} max_total_tokens={r.get('max_total_tokens')}")  # fmt: skip
    return [
        f"case run {info.case_run_id}",
        f"case {r['case_id']} ({r['family']}), epoch {r['epoch']}, model {r['model']}, label {b.get('label') or '-'}",
        *(
            ["loop: plain (--agent plain: no envelope, contract, duplicate rejection or guards)"]
            if loop_name(b) == "plain loop"
            else []
        ),
        budget,
        f"expected {r['expected_outcome']}"
        + (f"/{r['expected_fallback_kind']}" if r.get("expected_fallback_kind") else "")
        + f", stop {r.get('expected_stop_reason') or '-'}"
        if r["expected_outcome"] is not None
        else "expected nothing: an observed run (imported from its trace)",
    ]


def verdict(passed: bool | None, expected: object = None) -> str:
    """A case run's verdict as shown: `yes`, `NO`, or, where `passed` is NULL, `no verdict (observed run)` for an
    imported run (no `expected` outcome: held to no expectation) and `no verdict (the bench's failure, not the
    model's)` for a bench run a failed model call ended (runners/run/verdict.py)."""
    if passed is None:
        return "no verdict (observed run)" if expected is None else "no verdict (the bench's failure, not the model's)"
    return "yes" if passed else "NO"


def _footer(info: CaseRunInfo, width: int) -> list[str]:
    r = info.row
    outcome = r["outcome"] + (f"/{r['fallback_kind']}" if r.get("fallback_kind") else "")
    lines = [
        "═" * width,
        *_wrap(f"OUTCOME {outcome}   stop reason {r.get('stop_reason') or 'NONE (finished on its own)'}", "", width),
    ]
    lines += _wrap(f"passed: {verdict(r['passed'], r.get('expected_outcome'))}   model calls {r['model_calls']},"
                   f" tool invocations {r['tool_invocations']}, rejections {r['tool_rejections']}, tokens"
                   f" {(r['input_tokens'] or 0) + (r['output_tokens'] or 0)}", "", width)  # fmt: skip
    if r["passed"] is not None and r.get("outcome_passed") is not None:
        trajectory = r.get("trajectory_passed")
        unjudged = "not judged (a real model, or off the settings its bounds were written for)"
        judged = unjudged if trajectory is None else "yes" if trajectory else "NO"
        lines += _wrap(f"verdicts: outcome {'yes' if r['outcome_passed'] else 'NO'}, trajectory {judged}", "", width)
    if info.funnel is not None and info.funnel.expected_outcome == "SUCCESS":
        lines += _wrap(f"diagnosis funnel: {stage_of(info.funnel).value}", "", width)
    if r.get("failures"):
        for failure in json.loads(r["failures"]):
            lines.extend(_wrap(f"- {failure}", "  ", width))
    if r.get("reason"):
        lines.extend(_wrap(f"release: {r['reason']}", "", width))
    if r.get("error"):
        lines.extend(_wrap(f"error: {r['error']}", "", width))
    return lines


def render_text(info: CaseRunInfo, *, width: int = WIDTH, full: bool = False) -> str:
    """The transcript as plain text: one block per turn, decisions inline, the outcome at the end; every
    character a terminal would act on (escape sequences, controls, bidi overrides) shown escaped."""
    draft = _draft_seq(info.messages)
    lines = [wrapped for line in _header(info) for wrapped in _wrap(line, "", width)]
    for block in blocks(info.messages):
        lines.extend(_block_lines(block, width, full=full, draft=draft, loop=loop_name(info.bench)))
    lines.extend(_footer(info, width))
    return terminal("\n".join(lines) + "\n")


# -- diff -----------------------------------------------------------------------------------------
_ID = re.compile(r"[A-Za-z0-9_\-]+")


def _signature(block: Block, ids: dict[str, str]) -> tuple[tuple[str, ...], ...]:
    """What a turn says, with call ids replaced by their order of appearance (ids differ between runs)."""

    def norm(text: str | None) -> str:
        text = text or ""
        for real, ordinal in ids.items():
            text = text.replace(real, ordinal)
        return text

    out = []
    for m in block.messages:
        for key in ("tool_call_id", "harness_call_id"):
            value = m.get(key)
            if value and value not in ids:
                ids[value] = f"#{len(ids) + 1}"
        out.append((m.kind, norm(m.content), norm(m.get("tool")), norm(m.get("arguments")),
                    str(m.get("invocation_status")), str(m.get("rejection")), str(m.get("gain"))))  # fmt: skip
    return tuple(out)


def first_divergence(a: Sequence[Block], b: Sequence[Block]) -> int | None:
    """Index of the first block that differs (None: the transcripts say the same)."""
    ids_a: dict[str, str] = {}
    ids_b: dict[str, str] = {}
    for i in range(max(len(a), len(b))):
        if i >= len(a) or i >= len(b):
            return i
        if _signature(a[i], ids_a) != _signature(b[i], ids_b):
            return i
    return None


def render_diff(a: CaseRunInfo, b: CaseRunInfo, name_a: str, name_b: str, *, width: int = WIDTH) -> str:
    """Two transcripts of one case: the common turns once, then each side from the first divergent turn."""
    ba, bb = blocks(a.messages), blocks(b.messages)
    at = first_divergence(ba, bb)
    head = [f"A = {name_a}: {a.case_run_id}", f"B = {name_b}: {b.case_run_id}"]
    for tag, info in (("A", a), ("B", b)):
        r = info.row
        head.append(f"{tag}: {r['outcome']}{'/' + r['fallback_kind'] if r.get('fallback_kind') else ''}, stop"
                    f" {r.get('stop_reason') or 'NONE'},"
                    f" passed {verdict(r['passed'], r.get('expected_outcome'))}")  # fmt: skip
    lines = [wrapped for line in head for wrapped in _wrap(line, "", width)]
    if at is None:
        lines.append("the two transcripts are the same turn for turn")
        at = len(ba)
    else:
        where = ba[at].title if at < len(ba) else bb[at].title
        lines.append(f">>> first divergence at block {at + 1} ({where})")
    lines.append(f"common: {at} block(s), shown once" if at else "common: none")
    da, db = _draft_seq(a.messages), _draft_seq(b.messages)
    for block in ba[:at]:
        lines.extend(_block_lines(block, width, full=False, draft=da))
    for tag, name, info, bs, draft in (("A", name_a, a, ba, da), ("B", name_b, b, bb, db)):
        lines.append("━" * width)
        lines.append(f"{tag} = {name} from block {at + 1}")
        for i, block in enumerate(bs[at:]):
            lines.extend(_block_lines(block, width, full=False, draft=draft, mark="  <<< DIVERGES" if i == 0 else ""))
        lines.extend(_footer(info, width))
    return terminal("\n".join(lines) + "\n")


def diff_command(db: str | Path, baseline: str, candidate: str, case: str, epoch: int | None = None) -> str:
    """The exact command that opens the diff of one case between two labels (or bench runs)."""
    parts = ["harness-bench", "diff", "--db", str(db), baseline, candidate, "--case", case]
    if epoch is not None:
        parts += ["--epoch", str(epoch)]
    return " ".join(shlex.quote(p) for p in parts)


# -- HTML -----------------------------------------------------------------------------------------
_CSS = """body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
h1{font-size:1.2rem}h2{font-size:1rem;border-bottom:1px solid #ccc;margin-top:1.5rem}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f6f6;padding:.5rem;margin:.2rem 0 .6rem}
.k{font-weight:600;font-size:.85rem;color:#555}.stop{background:#fff3cd}.rej{color:#a40000}.ok{color:#155724}
.decision{font-size:.85rem;margin:-.3rem 0 .6rem 1rem}.outcome{border-top:3px double #444;padding-top:.5rem}"""


def _h(text: object) -> str:
    return safe_html(text)


def render_html(info: CaseRunInfo, *, title: str | None = None) -> str:
    """One self-contained page (inline CSS, no script, no external resource)."""
    draft = _draft_seq(info.messages)
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{_h(title or info.case_run_id)}</title>"
             f"<style>{_CSS}</style></head><body><h1>{_h(info.case_run_id)}</h1>"]  # fmt: skip
    parts.append("<p>" + "<br>".join(_h(line) for line in _header(info)[1:]) + "</p>")
    for block in blocks(info.messages):
        parts.append(f"<h2>{_h(block.title)}</h2>")
        for m in block.messages:
            parts.extend(_html_message(m, draft, loop_name(info.bench)))
    parts.append("<div class='outcome'><pre>" + _h("\n".join(_footer(info, WIDTH)[1:])) + "</pre></div>")
    parts.append("</body></html>\n")
    return "".join(parts)


def _html_message(m: Message, draft: int | None, loop: str = "Harness") -> Iterable[str]:
    text = m.content or ""
    label = "DRAFT" if m.seq == draft else m.kind.replace("_", " ")
    if m.kind == EntryKind.TOOL_CALL:
        yield f"<div class='k'>TOOL CALL {_h(m.get('tool'))} <code>{_h(m.get('tool_call_id') or '')}</code></div>"
        yield f"<pre>{_h(m.get('arguments') or '')}</pre>"
        cls = "rej" if m.get("invocation_status") == InvocationStatus.REJECTED else "ok"
        yield f"<div class='decision {cls}'>{_h(loop)}: {_h(_decision(m))}</div>"
        return
    if m.kind == EntryKind.OBSERVATION:
        label += f" for {m.get('tool_call_id')}" + (" (never sent)" if m.get("sent") is False else "")
    if m.kind == GUARD_VERDICT:
        label = f"{m.get('guard')}: {m.get('verdict')}"
    cls = " class='stop'" if "STOP_REQUIRED" in text else ""
    yield f"<div class='k'>{_h(label)}</div><pre{cls}>{_h(text)}</pre>"
