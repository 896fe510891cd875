"""The CLI's tables, readable at 80 and 100 columns and in pipes.

Vocabulary values are shown as short codes with a legend line, columns never fold a word (rich's
`fold` would break `budget_exhaustion` into `budget_exhaust/ion`), and every cell is a `Text`: a
case id, question or path is never read as rich markup.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, cast

from rich import box
from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from harness import FallbackKind, ReleaseOutcome, StopReason
from runners.rendering.safe_text import TerminalSafe, terminal

PIPE_WIDTH = 100
"""Width used when the output is not a terminal and COLUMNS is unset."""

OUTCOME_CODES = {
    ReleaseOutcome.SUCCESS.value: "S",
    f"{ReleaseOutcome.FALLBACK.value}/{FallbackKind.INSUFFICIENT_EVIDENCE.value}": "FI",
    f"{ReleaseOutcome.FALLBACK.value}/{FallbackKind.MISSING_REQUIRED_CONTEXT.value}": "FM",
    ReleaseOutcome.FALLBACK.value: "F",
    ReleaseOutcome.FAILED.value: "X",
    ReleaseOutcome.CANCELLED.value: "C",
}
STOP_CODES = {
    StopReason.INFORMATION_SATURATED.value: "SAT",
    StopReason.BUDGET_LIMIT_REACHED.value: "BUD",
    StopReason.PROGRESS_PROTOCOL_VIOLATED.value: "PROT",
    "NONE": "own",
    "ERROR": "err",
}
STOP_MEANINGS = {
    "own": "no stop reason (the agent finished on its own)",
    # an endpoint, cassette or unusable answer ended the case run: the agent did not finish at all
    "err": "no stop reason (the case run ended on a failed model call; see case_runs.error)",
}


def console_width(stream: Any) -> int | None:
    """COLUMNS when set, the terminal's width on a terminal (None: rich measures it), else PIPE_WIDTH (also for a
    closed stream: None, as Python sets it when the process started without it)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) >= 20:
        return int(columns)
    return None if stream is not None and stream.isatty() else PIPE_WIDTH


def make_console(*, stderr: bool = False) -> Console:
    """A console sized by `console_width` whose every text segment is `terminal`-safe (no escape sequence,
    control or bidi character a case or a model wrote reaches the terminal raw)."""
    stream = sys.stderr if stderr else sys.stdout
    console = Console(stderr=stderr, width=console_width(stream), highlight=False)
    console.push_render_hook(TerminalSafe())
    return console


class _Deferred:
    """A console built at its first use (`make_console`), never at import: importing a command touches neither
    stdout nor stderr (either may be closed, or replaced before the command runs)."""

    __slots__ = ("_console", "_stderr")

    def __init__(self, stderr: bool) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    def _built(self) -> Console:
        console = self._console
        if console is None:
            console = self._console = make_console(stderr=self._stderr)
        return console

    def __getattr__(self, name: str) -> Any:
        return getattr(self._built(), name)

    # a special method is looked up on the type, never through __getattr__: the one rich uses (`with console:`)
    def __enter__(self) -> Console:
        return self._built().__enter__()

    def __exit__(self, *exc: object) -> None:
        self._built().__exit__(*exc)


def deferred_console(*, stderr: bool = False) -> Console:
    """A `make_console` console built when first used (a module-level console is one of these)."""
    return cast(Console, _Deferred(stderr))


def _table(title: str | None = None) -> Table:
    return Table(
        title=Text(title) if title else None, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
        pad_edge=False, padding=(0, 1), collapse_padding=True,
    )  # fmt: skip


def rates_table(title: str, head: Sequence[str], rows: Sequence[Sequence[str]]) -> RenderableType:
    """A measured instrument's error rates (`judge-check`, `guard-check`): one row per judge or guard, its name
    whole; a rate cell wraps between its words when the terminal is narrow (each word shorter than the column's
    minimum width, so none is folded)."""
    table = _table(title)
    table.add_column(head[0], no_wrap=True)
    for name in head[1:]:
        table.add_column(name, overflow="fold", min_width=12)
    for row in rows:
        table.add_row(*(Text(c) for c in row))
    return table


def _code(codes: dict[str, str], key: str) -> str:
    return codes.get(key, key)


def _counts(codes: dict[str, str], counts: dict[str, int]) -> str:
    return " ".join(f"{_code(codes, k)}:{n}" for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def legend(codes: dict[str, str], used: Iterable[str], meanings: dict[str, str] | None = None) -> str:
    """`FI=FALLBACK/INSUFFICIENT_EVIDENCE · X=FAILED` for the codes in use (a code never wraps away from its
    meaning)."""
    inverse = {v: k for k, v in codes.items()}
    meanings = meanings or {}
    shown = [c for c in codes.values() if c in set(used)]
    return " · ".join(f"{c}={meanings.get(c, inverse[c])}" for c in shown)


def family_table(title: str, rows: Sequence[Any]) -> RenderableType:
    """The end-of-run per-family table (rows: `runners.run.bench.FamilyRow`) with its legend."""
    table = _table(title)
    table.add_column("family", no_wrap=True, overflow="ellipsis", min_width=10)
    table.add_column("runs", justify="right", no_wrap=True)
    table.add_column("pass", justify="right", no_wrap=True)
    table.add_column("outcomes", overflow="ellipsis")
    table.add_column("stops", overflow="ellipsis")
    for col in ("tools", "rej", "wasted"):
        table.add_column(col, justify="right", no_wrap=True)
    bench = any(r.bench_failures for r in rows)
    if bench:
        table.add_column("bench", justify="right", no_wrap=True)
    used_outcomes: set[str] = set()
    used_stops: set[str] = set()
    for r in rows:
        used_outcomes |= {_code(OUTCOME_CODES, k) for k in r.outcomes}
        used_stops |= {_code(STOP_CODES, k) for k in r.stop_reasons}
        table.add_row(
            Text(r.family), str(r.runs), "—" if r.pass_rate is None else f"{r.pass_rate:.0%}",
            Text(_counts(OUTCOME_CODES, r.outcomes)), Text(_counts(STOP_CODES, r.stop_reasons)),
            f"{r.mean_tools:.1f}", f"{r.mean_rejections:.1f}", f"{r.mean_wasted:.1f}",
            *((str(r.bench_failures),) if bench else ()),
        )  # fmt: skip
    notes = Text(
        f"outcomes: {legend(OUTCOME_CODES, used_outcomes)}\nstops: {legend(STOP_CODES, used_stops, STOP_MEANINGS)}"
        "\ntools, rej, wasted: mean tool invocations, rejected requests, wasted invocations per case run"
        + (
            "\nbench: case runs that ended on the bench's failure, not the model's (a model call timed out, was refused"
            " or failed on the endpoint after the Harness's retries): unjudged, left out of pass"
            if bench
            else ""
        ),
        style="dim",
    )
    return Group(table, notes)


def shorten(text: str, width: int) -> str:
    """`text` in at most `width` cells, cut at a word boundary with `…` (never inside a word, except a
    single first word longer than the width, e.g. a run of CJK characters, which is cut by character). Control and
    bidi characters are shown escaped (`terminal`) before the cells are counted."""
    text = " ".join(terminal(text).split())
    if cell_len(text) <= width:
        return text
    out = ""
    for word in text.split(" "):
        candidate = f"{out} {word}" if out else word
        if cell_len(candidate) + 1 > width:
            break
        out = candidate
    if not out:
        for ch in text:
            if cell_len(out + ch) + 1 > width:
                break
            out += ch
    return out + "…"


GAP = 2
"""Cells between two columns of these tables."""


STREAM_CASES_ABOVE = 1_000
"""Above this many cases the case list is printed as plain aligned rows, one written at a time (a rich table
holds every row, and measures each, before it prints the first)."""


def _expect_code(c: Any) -> str:
    e = c.expect
    key = e.outcome.value + (f"/{e.fallback_kind.value}" if e.fallback_kind else "")
    stop = f"/{_code(STOP_CODES, e.stop_reason.value)}" if e.stop_reason else ""
    return _code(OUTCOME_CODES, key) + stop


class _CasesLayout:
    """Column widths of the case list for `width` cells."""

    def __init__(self, cases: Iterable[Any], expect: Iterable[str] | None, width: int) -> None:
        """`expect`: the cases' expectation codes, when already made."""
        id_w, exp_w = 2, len("expect")
        pairs = zip(cases, expect, strict=True) if expect is not None else ((c, _expect_code(c)) for c in cases)
        for c, x in pairs:  # one pass: the cases may be read back from a file
            id_w, exp_w = max(id_w, cell_len(c.id)), max(exp_w, len(x))
        self.id_w = min(id_w, max(width - 8 - GAP, 10))
        self.exp_w = exp_w
        left = width - self.id_w - GAP - self.exp_w
        self.show_steps = left >= GAP + len("steps")
        left -= (GAP + len("steps")) if self.show_steps else 0
        self.question_w = left - GAP
        self.own_column = self.question_w >= 30


def _cases_legend(expect: Iterable[str]) -> str:
    expect = list(expect)
    used_o = {x.split("/")[0] for x in expect}
    used_s = {x.split("/")[1] for x in expect if "/" in x}
    return "expect: " + legend(OUTCOME_CODES, used_o) + (" / " + legend(STOP_CODES, used_s) if used_s else "")


def cases_table(cases: Sequence[Any], width: int) -> RenderableType:
    """The case list (cases: `runners.domain.evalset.EvalCase`), grouped by family. The question gets its own
    column when at least 30 cells are left, else a second line under the id; either way it is shortened
    at a word boundary. `steps` is dropped when even id and expectation barely fit."""
    expect = [_expect_code(c) for c in cases]
    lay = _CasesLayout(cases, expect, width)
    id_w, question_w, own_column, show_steps = lay.id_w, lay.question_w, lay.own_column, lay.show_steps
    table = _table(f"{len(cases)} evaluation cases")
    table.add_column("id" if own_column else "id / question", no_wrap=True, overflow="ellipsis", max_width=id_w)
    table.add_column("expect", no_wrap=True)
    if show_steps:
        table.add_column("steps", justify="right", no_wrap=True)
    if own_column:
        table.add_column("question", no_wrap=True, overflow="ellipsis", max_width=question_w)
    family = None
    for c, x in zip(cases, expect, strict=True):
        if c.family != family:
            family = c.family
            if table.row_count:
                table.add_section()
            table.add_row(Text(family, style="bold"), *([""] * (len(table.columns) - 1)))
        first = Text(c.id)
        if not own_column:
            first.append("\n  " + shorten(c.question, id_w - 2), style="dim")
        cells: list[RenderableType] = [first, Text(x)]
        if show_steps:
            cells.append(str(len(c.trajectory.steps)))
        if own_column:
            cells.append(Text(shorten(c.question, question_w)))
        table.add_row(*cells)
    return Group(table, Text(_cases_legend(expect), style="dim"))


def _pad(text: str, width: int) -> str:
    text = text if cell_len(text) <= width else shorten(text, width)
    return text + " " * max(width - cell_len(text), 0)


def cases_lines(cases: Sequence[Any], width: int) -> Iterator[str]:
    """The same case list as plain aligned rows (no newline), one at a time: what `cases` prints for more than
    `STREAM_CASES_ABOVE` cases, so the first row shows at once and memory stays that of one row. Same
    columns, widths and legend as `cases_table`; a family name is a line of its own before its cases."""
    lay = _CasesLayout(cases, None, width)
    sep = " " * GAP
    head = [_pad("id" if lay.own_column else "id / question", lay.id_w), _pad("expect", lay.exp_w)]
    if lay.show_steps:
        head.append("steps")
    if lay.own_column:
        head.append("question")
    yield f"{len(cases)} evaluation cases"
    yield sep.join(head).rstrip()
    family = None
    used: set[str] = set()
    for c in cases:
        if c.family != family:
            family = c.family
            yield ""
            yield family
        x = _expect_code(c)
        used.add(x)
        cells = [_pad(c.id, lay.id_w), _pad(x, lay.exp_w)]
        if lay.show_steps:
            cells.append(f"{len(c.trajectory.steps):>5}")
        if lay.own_column:
            cells.append(shorten(c.question, lay.question_w))
        yield sep.join(cells).rstrip()
        if not lay.own_column:
            yield "  " + shorten(c.question, lay.id_w - 2)
    yield ""
    line = ""
    for part in _cases_legend(used).split(" · "):  # the legend wraps between two meanings, never inside one
        if line and cell_len(f"{line} · {part}") > width:
            yield line + " ·"
            line = part
        else:
            line = f"{line} · {part}" if line else part
    yield line


def abbreviation(name: str) -> str:
    """`no_gain_threshold` -> `ngt` (column headers that fit; a legend gives the full names)."""
    return "".join(part[0] for part in name.split("_") if part)


def interval(iv: Any, *, pct: bool = False) -> Text:
    """`40% [25–58]` or `2.2 [2.1–2.4]` (an interval of one point shows the point alone)."""
    if not getattr(iv, "n", 0):
        return Text("n/a")
    value, low, high = iv.bounds()
    if pct:
        point, lo, hi = f"{value:.0%}", f"{low * 100:.0f}", f"{high * 100:.0f}"
    else:
        point, lo, hi = f"{value:.1f}", f"{low:.1f}", f"{high:.1f}"
    return Text(point if lo == hi == point.rstrip("%") else f"{point} [{lo}–{hi}]")


def stats_table(title: str, rec: Any, stats: Sequence[Any]) -> RenderableType:
    """`recommend`'s table: one row per configuration (`rec`: a `runners.decisions.recommend.Recommendation`, stats its
    `ConfigStats`), the swept settings abbreviated with a legend, intervals wrapping only between words."""
    table = _table(title)
    table.add_column("", no_wrap=True)
    columns = list(rec.columns)
    short = [abbreviation(c) for c in columns]
    for h in short:
        table.add_column(h, justify="right", no_wrap=True)
    for h in ("recall", "honest fb", "wasted", "tokens", "calls", "pass"):
        table.add_column(h, justify="right", no_wrap=h in ("tokens", "pass"))
    if rec.checks:
        table.add_column("deficit", justify="right")
    for s in sorted(stats, key=lambda s: s.config):
        mark = "★" if s is rec.chosen else ("◆" if s in rec.front else "")
        row: list[RenderableType] = [
            mark, *(Text(str(s.setting(c))) for c in columns), interval(s.recall, pct=True),
            interval(s.honest_fallback, pct=True), interval(s.wasted), f"{s.tokens.value:.0f}",
            interval(s.model_calls), f"{s.pass_rate:.0%}",
        ]  # fmt: skip
        if rec.checks:
            ch = rec.checks[s.config]
            row.append(f"{ch.recall_deficit * 100:.1f}/{ch.honest_deficit * 100:.1f}{' ✓' if ch.eligible else ''}")
        table.add_row(*row)
    notes = (
        " · ".join(f"{a} = {c}" for a, c in zip(short, columns, strict=True))
        + "\n★ recommended · ◆ Pareto front · intervals are 95% over cases"
        + (" · deficit: one-sided 95% upper bound (points) of recall / honest-fallback below the best; ✓ within"
           " the margin" if rec.checks else "")
    )  # fmt: skip
    return Group(table, Text(notes, style="dim"))
