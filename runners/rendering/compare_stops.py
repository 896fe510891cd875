"""The stop-rule comparison as people read it: the terminal table of `harness-bench compare-stops`, the Pareto table
of the reports (Markdown/HTML cells) and the plot of recall kept against tool calls saved, one point per policy."""

from __future__ import annotations

import io

from pydantic import BaseModel, ConfigDict
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from runners.decisions.compare_stops import CompareStops, Interval, PolicyResult
from runners.rendering.safe_text import terminal

__all__ = ["LEGEND", "PlotPoint", "pareto_png", "pareto_table", "plot_points", "recorded_line", "render"]

LEGEND = (
    "cut: runs the policy stops earlier · cens(ored): runs it cannot answer · recall / honest: the share of cases"
    " expected to end in SUCCESS / an honest FALLBACK whose verdict is known to hold under the policy [95% t"
    " interval over cases], ≤ at most (unknown, at-risk and censored runs kept) · saved: per run against the run as"
    " recorded, mean over cases [95% t interval], censored runs left out; ≤ an upper bound (a Draft call after an"
    " earlier STOP_REQUIRED) · where: mean model calls and tool requests before the cut · ◆ on the Pareto front of"
    " recall kept and tool calls saved"
)
"""What the columns mean, printed under the table."""


def _num(value: float, *, rate: bool = False) -> str:
    if rate:
        return f"{value:.2f}"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.1f}"


def _interval(iv: Interval, sep: str, *, rate: bool = False) -> str:
    """`mean [low–high]` (`sep` between them: a space, or a line break in the terminal); a rate's interval is cut
    to [0, 1]."""
    if iv.mean is None:
        return "n/a"
    if iv.low is None or iv.high is None:
        return _num(iv.mean, rate=rate)
    low, high = (max(iv.low, 0.0), min(iv.high, 1.0)) if rate else (iv.low, iv.high)
    return f"{_num(iv.mean, rate=rate)}{sep}[{_num(low, rate=rate)}–{_num(high, rate=rate)}]"


def _rate(iv: Interval, at_most: float | None, cases: int, sep: str) -> str:
    if not cases or iv.mean is None:
        return "n/a"
    upper = f"{sep}≤{at_most:.2f}" if at_most is not None and at_most - iv.mean > 1e-9 else ""
    return f"{_interval(iv, sep, rate=True)}{upper}"


def _where(p: PolicyResult, sep: str) -> str:
    cut = [r.cut for r in p.runs if r.cut is not None]
    if not cut:
        return ""
    calls = sum(c.model_calls for c in cut) / len(cut)
    requests = sum(c.tool_requests for c in cut) / len(cut)
    return f"{calls:.1f} calls{sep}{requests:.1f} req"


def _saved(p: PolicyResult, sep: str) -> tuple[str, str, str]:
    mark = "" if p.predicted.tokens_exact else "≤"
    return (_interval(p.tool_invocations_saved, sep), mark + _interval(p.model_calls_saved, sep),
            mark + _interval(p.tokens_saved, sep))  # fmt: skip


def recorded_line(result: CompareStops) -> str:
    """The runs as recorded: the recall and honest fallback every policy is paired against."""
    first = result.policies[0]
    parts = []
    if first.success_cases and first.recall_recorded is not None:
        parts.append(f"recall {first.recall_recorded:.2f} over {first.success_cases} cases")
    if first.fallback_cases and first.honest_recorded is not None:
        parts.append(f"honest fallback {first.honest_recorded:.2f} over {first.fallback_cases} cases")
    return "as recorded: " + ("; ".join(parts) if parts else "no case with an expected outcome")


def _tally_line(p: PolicyResult) -> str:
    """`policy: recall 4 kept, 5 lost, 1 unknown; honest 8 unknown` — only the policies that change a verdict."""
    parts = []
    for name, t in (("recall", p.recall_runs), ("honest", p.honest_runs)):
        if t.lost or t.gained or t.unknown:
            counts = ((t.kept, "kept"), (t.lost, "lost"), (t.gained, "gained"), (t.unknown, "unknown"))
            parts.append(f"{name} " + ", ".join(f"{n} {what}" for n, what in counts if n))
    return f"{p.policy}: {'; '.join(parts)}" if parts else ""


def pareto_table(result: CompareStops) -> tuple[list[str], list[list[str]]]:
    """The comparison as a header and rows of plain text (one row per policy), for the reports."""
    header = ["policy", "runs cut", "censored", "recall kept", "honest fallback kept", "tool calls saved",
              "model calls saved", "tokens saved", "Pareto"]  # fmt: skip
    rows = []
    for p in result.policies:
        tools, calls, tokens = _saved(p, " ")
        rows.append([p.policy, f"{p.runs_cut}/{p.run_count}", str(p.runs_censored),
                     _rate(p.recall_kept, p.recall_at_most, p.success_cases, " "),
                     _rate(p.honest_kept, p.honest_at_most, p.fallback_cases, " "), tools, calls, tokens,
                     "◆" if p.policy in result.pareto else ""])  # fmt: skip
    return header, rows


def _table(title: str) -> Table:
    from rich import box

    return Table(title=Text(title), title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                 padding=(0, 1), collapse_padding=True)  # fmt: skip


def _cut_points(p: PolicyResult) -> Table | None:
    cut = [r for r in p.runs if r.cut is not None]
    if not cut:
        return None
    table = _table(f"cut points of {p.policy} ({len(cut)} case runs)")
    for head in ("case", "ep", "rule", "at", "call id", "saved t/m/tok", "outcome", "effect"):
        table.add_column(head, justify="right" if head in ("ep", "saved t/m/tok") else "left")
    for r in cut:
        assert r.cut is not None and r.saved is not None
        c, s = r.cut, r.saved
        at = {"TOOL_REQUEST": f"req {c.tool_requests + (0 if c.executed else 1)}" + (" ran" if c.executed else ""),
              "MODEL_CALL": f"call {c.model_calls + 1}", "GUARD_CALL": "guard call"}[c.at.value]  # fmt: skip
        outcome = r.outcome.value if r.outcome is not None else ("Draft unknown" if c.draft_call else "")
        table.add_row(Text(terminal(r.case_id)), str(r.epoch), c.rule, at, Text(terminal(c.tool_call_id or "")),
                      f"{s.tool_invocations}/{s.model_calls}/{s.tokens}", outcome, r.effect.value)  # fmt: skip
    return table


class _Fitting:
    """The table where the terminal is wide enough for every column of it, else one block of lines per policy (a
    squeezed table would drop the policy's name before any number)."""

    def __init__(self, table: Table, blocks: RenderableType) -> None:
        self.table, self.blocks = table, blocks

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        natural = Measurement.get(console, options.update(width=10_000), self.table).maximum
        yield self.table if natural <= options.max_width else self.blocks


def _blocks(title: str, result: CompareStops) -> RenderableType:
    """Each policy as three lines: the runs cut (and where) and censored, the verdicts kept, the savings."""
    lines: list[RenderableType] = [Text(title)]
    for p in result.policies:
        tools, calls, tokens = _saved(p, " ")
        mark = " ◆" if p.policy in result.pareto else ""
        where = _where(p, ", ")
        after = f" (after {where})" if where else ""
        lines.append(Text.assemble((p.policy, "bold"), f"  cut {p.runs_cut}/{p.run_count}{after} · censored"
                                   f" {p.runs_censored}{mark}"))  # fmt: skip
        lines.append(Text(f"  recall kept {_rate(p.recall_kept, p.recall_at_most, p.success_cases, ' ')} · honest"
                          f" kept {_rate(p.honest_kept, p.honest_at_most, p.fallback_cases, ' ')}"))  # fmt: skip
        lines.append(Text(f"  saved per run: tool calls {tools} · model calls {calls} · tokens {tokens}"))
    return Group(*lines)


def render(title: str, result: CompareStops, *, cut_points: bool = False) -> RenderableType:
    """The terminal table: one row per policy (one block per policy on a terminal too narrow for it), the notes
    under it (`cut_points`: every cut run too)."""
    summary = _table(title)
    for head in ("policy", "cut", "cens", "recall\nkept", "honest\nkept", "tool calls\nsaved", "model calls\nsaved",
                 "tokens\nsaved", "where", ""):  # fmt: skip
        wraps = head in ("policy", "where")  # the numbers never wrap: a narrow terminal folds the policy's name
        summary.add_column(head, justify="left" if wraps else "right", no_wrap=not wraps,
                           overflow="fold" if wraps else "ellipsis",
                           min_width=12 if head == "policy" else None)  # fmt: skip
    for p in result.policies:
        tools, calls, tokens = _saved(p, "\n")
        summary.add_row(p.policy, f"{p.runs_cut}/{p.run_count}", str(p.runs_censored),
                        _rate(p.recall_kept, p.recall_at_most, p.success_cases, "\n"),
                        _rate(p.honest_kept, p.honest_at_most, p.fallback_cases, "\n"), tools, calls, tokens,
                        _where(p, "\n"), "◆" if p.policy in result.pareto else "")  # fmt: skip
    parts: list[RenderableType] = [_Fitting(summary, _blocks(title, result)), Text(recorded_line(result), style="dim")]
    changed = [line for line in (_tally_line(p) for p in result.policies) if line]
    if changed:
        parts.append(Text("verdicts under the policy — " + "; ".join(changed), style="dim"))
    if cut_points:
        parts.extend(t for t in (_cut_points(p) for p in result.policies) if t is not None)
    parts.append(Text(LEGEND, style="dim"))
    parts.extend(Text(f"- {note}", style="dim") for note in result.notes)
    return Group(*parts)


class PlotPoint(BaseModel):
    """One policy as the plot draws it: both its figures known."""

    model_config = ConfigDict(frozen=True)

    policy: PolicyResult
    """The policy."""
    saved: float
    """Tool calls saved per run (mean over cases)."""
    recall: float
    """Recall kept (mean over cases)."""


def plot_points(result: CompareStops) -> tuple[tuple[PlotPoint, ...], tuple[str, ...]]:
    """The policies the plot draws, and those it only names: a policy whose recall or saving is not known (no run
    judged, every run censored) is never drawn as a number."""
    points, unknown = [], []
    for p in result.policies:
        saved, recall = p.tool_invocations_saved.mean, p.recall_kept.mean
        if saved is None or recall is None:
            unknown.append(p.policy)
        else:
            points.append(PlotPoint(policy=p, saved=saved, recall=recall))
    return tuple(points), tuple(unknown)


def pareto_png(result: CompareStops, title: str) -> bytes:
    """Recall kept against tool calls saved, one point per policy (its 95% intervals as error bars), the Pareto
    front joined and every point labelled; the policies whose figures are not known named under the axes."""
    import matplotlib

    matplotlib.use("Agg")  # headless: reports are files, never windows
    import matplotlib.pyplot as plt

    shown, unknown = plot_points(result)
    fig, ax = plt.subplots(figsize=(11, 5))
    for pt in shown:
        on = pt.policy.policy in result.pareto
        xerr = _err(pt.policy.tool_invocations_saved, pt.saved)
        yerr = _err(pt.policy.recall_kept, pt.recall, rate=True)
        ax.errorbar([pt.saved], [pt.recall], xerr=xerr, yerr=yerr, fmt="D" if on else "o", ms=6 if on else 4,
                    capsize=2, color="tab:orange" if on else "tab:gray", alpha=1.0 if on else 0.6)  # fmt: skip
    front = sorted((pt for pt in shown if pt.policy.policy in result.pareto), key=lambda pt: pt.saved)
    ax.plot([pt.saved for pt in front], [pt.recall for pt in front], color="tab:orange", lw=1, label="Pareto front")
    spots: dict[tuple[float, float], list[str]] = {}
    for pt in shown:
        spots.setdefault((round(pt.saved, 2), round(pt.recall, 3)), []).append(pt.policy.policy)
    # Points are numbered and the numbers keyed beside the axes: policy names written at their points overlap
    # wherever policies land close together (caps and detectors that cut nothing all sit at the origin).
    key: list[str] = []
    for i, ((x, y), names) in enumerate(sorted(spots.items()), start=1):
        ax.annotate(str(i), (x, y), textcoords="offset points", xytext=(5, 5 if i % 2 else -10), fontsize=8,
                    fontweight="bold")  # fmt: skip
        key.append(f"{i}  {', '.join(names)}")
    fig.text(0.70, 0.93, "\n".join(_wrapped(key, 44)), fontsize=7.5, va="top", family="monospace")
    ax.set(xlabel="tool calls saved per run (mean over cases)", ylabel="recall kept (share of cases, known to pass)",
           ylim=(-0.05, 1.1), title=title)  # fmt: skip
    if unknown:
        shown_names = ", ".join(unknown)
        fig.text(0.01, 0.01, f"not drawn (recall or saving not known: no run judged): {shown_names}"[:200], fontsize=7)
    ax.plot([], [], "o", color="tab:gray", alpha=0.6, label="dominated")
    ax.legend(fontsize=8, loc="lower left")
    buf = io.BytesIO()
    fig.tight_layout(rect=(0, 0.04 if unknown else 0, 0.68, 1))
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def _wrapped(lines: list[str], width: int) -> list[str]:
    """Key lines wrapped at `width` characters, a continued line indented under its text."""
    import textwrap

    return [part for line in lines for part in textwrap.wrap(line, width, subsequent_indent="    ") or [line]]


def _err(iv: Interval, at: float, *, rate: bool = False) -> list[list[float]] | None:
    """Error bars from an interval (a rate's cut to [0, 1], as the table prints it)."""
    if iv.low is None or iv.high is None:
        return None
    low, high = (max(iv.low, 0.0), min(iv.high, 1.0)) if rate else (iv.low, iv.high)
    return [[max(at - low, 0.0)], [max(high - at, 0.0)]]
