"""`harness-bench whatif`: what lower NO_GAIN thresholds (and tool budgets) would have saved on stored runs, replayed
exactly from their recorded gain evaluations; what cannot be known is printed as such."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from harness import StopReason
from runners.commands._common import EXIT_OK, _add_db, _check_outputs, _say, _sub, out
from runners.plan.flags import Flag, FlagModel
from runners.plan.settings import axis_type
from runners.rendering.safe_text import terminal
from runners.store.output_files import NamedPath

if TYPE_CHECKING:
    from runners.decisions.whatif import PointWhatIf, Saving, WhatIf

__all__ = ["register", "run"]


class _WhatIfFlags(FlagModel):
    """`whatif`'s flags: which stored case runs, which points to replay, where to write them."""

    exclusive_required: ClassVar[tuple[str, ...]] = ("runs",)

    label: Annotated[str | None, Flag(exclusive="runs")] = None
    """the case runs of this label (every bench run of it)"""
    bench_run: Annotated[str | None, Flag(exclusive="runs", metavar="BENCH_RUN_ID")] = None
    """the case runs of one bench run"""
    no_gain_threshold: Annotated[tuple[int, ...], Flag(parse=axis_type("no_gain_threshold"), metavar="T,...")]
    """the thresholds to replay, each below the one the runs used, e.g. 1,2,3"""
    max_tool_invocations: Annotated[
        tuple[int, ...],
        Flag(parse=axis_type("max_tool_invocations"), metavar="N,...",
             help="tool budgets to replay with each threshold, each below the runs' (default: each run's own)"),
    ] = ()  # fmt: skip
    """The tool budgets to replay with each threshold (none: each run's own)."""
    json_path: Annotated[Path | None, Flag("--json", metavar="PATH")] = None
    """also write, per point, the totals saved and every run's cut point as JSON"""


def register(sub: Any) -> None:
    p = _sub(sub, "whatif", "replay stored runs at lower NO_GAIN thresholds and tool budgets: what they would save",
             "Each stored case run's recorded gain evaluations, rejections and budget stops are replayed through the"
             " Harness's progress tracker at each lower threshold (and tool budget): the runs that would have"
             " stopped earlier and at which call, the tool calls, model calls and tokens saved (95% intervals over"
             " runs), and the published conclusions that cite a record obtained after the cut. What cannot be"
             " known is printed as such: the Draft written after an earlier STOP_REQUIRED (unknown), and a run"
             " that stopped where a point would let it go on (censored).")  # fmt: skip
    _add_db(p)
    _WhatIfFlags.add_flags(p, "whatif")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from runners.api import whatif
    from runners.store.output_files import write_text

    flags = _WhatIfFlags.from_args(args, "whatif")
    if flags.json_path is not None:
        _check_outputs([NamedPath("--json", flags.json_path)], [NamedPath("--db", args.db)])
    result = whatif(args.db, flags.no_gain_threshold, label=flags.label, bench_run=flags.bench_run,
                    tool_budgets=flags.max_tool_invocations)  # refuses before anything is written  # fmt: skip
    selection = f"bench run {flags.bench_run}" if flags.bench_run is not None else f"label {flags.label}"
    runs = result.points[0].runs if result.points else 0
    out.print(_render(f"what-if of {selection} in {args.db}: {runs} case runs", result))
    if flags.json_path is not None:
        write_text(NamedPath("--json", flags.json_path), result.model_dump_json(indent=2) + "\n")
        _say(f"wrote {flags.json_path}")
    return EXIT_OK


# -- rendering ----------------------------------------------------------------------------------------------------
def _saving(s: Saving) -> str:
    """`≤225` over `0.8 [0.6–1.0]`: the total (≤: an upper bound) and the mean per run with its interval."""
    from runners.decisions.whatif import Bound

    if s.mean is None:
        return "n/a"
    mark = "≤" if s.bound is Bound.AT_MOST else ""
    spread = f" [{s.low:.1f}–{s.high:.1f}]" if s.low is not None and s.high is not None else ""
    return f"{mark}{s.total}\n{s.mean:.1f}{spread}"


def _table(title: str) -> Table:
    from rich import box

    return Table(title=Text(title), title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                 padding=(0, 1), collapse_padding=True)  # fmt: skip


def _budget(point: PointWhatIf) -> str:
    return "own" if point.max_tool_invocations is None else str(point.max_tool_invocations)


def _render(title: str, result: WhatIf) -> RenderableType:
    summary = _table(title)
    for head in ("ngt", "mti", "runs", "cut", "censored", "tool calls saved", "model calls saved", "tokens saved",
                 "at risk"):  # fmt: skip
        summary.add_column(head, justify="right")
    for p in result.points:
        risk = f"{p.conclusions_at_risk}" + (f"\n+{p.conclusions_unknown} unknown" if p.conclusions_unknown else "")
        summary.add_row(str(p.no_gain_threshold), _budget(p), str(p.runs), str(p.runs_cut), str(p.runs_censored),
                        _saving(p.tool_invocations), _saving(p.model_calls), _saving(p.tokens), risk)  # fmt: skip
    parts: list[RenderableType] = [summary]
    for p in result.points:
        cuts = [r for r in p.per_run if r.cut is not None]
        if not cuts:
            continue
        table = _table(f"cut points at ngt={p.no_gain_threshold}, mti={_budget(p)} ({len(cuts)} case runs)")
        for head in ("case", "ep", "req", "call id", "tool", "cut", "saved t/m/tok", "conclusion"):
            table.add_column(head, justify="right" if head in ("ep", "req", "saved t/m/tok") else "left")
        for r in cuts:
            assert r.cut is not None and r.saved is not None
            c, s = r.cut, r.saved
            if c.stop_reason is StopReason.INFORMATION_SATURATED:
                how = "SR ran" if c.executed else "SR refused"
            else:
                how = "budget"
            saved = f"{s.tool_invocations}/{s.model_calls}/{s.tokens}"
            risk = r.conclusion.value if r.conclusion else ""
            table.add_row(Text(terminal(r.case_id)), str(r.epoch), str(c.request), Text(terminal(c.tool_call_id)),
                          Text(terminal(c.tool)), how, saved, risk)  # fmt: skip
        parts.append(table)
    legend = ("ngt = no_gain_threshold · mti = max_tool_invocations (own: each run's) · saved: the total over the"
              " runs not censored, and the mean per case run [95% t interval] · ≤ an upper bound · req: the"
              " request's position in the run · cut: SR ran = the call ran and its empty result delivered"
              " STOP_REQUIRED, SR refused = the call was refused with STOP_REQUIRED (the evaluation it carried"
              " saturated the run), budget = the tool budget refused it (no model call follows) · t/m/tok: tool"
              " calls, model calls, tokens · conclusion: AT_RISK = the published Draft cites a record obtained"
              " after the cut, KEPT = it cites none of them, NONE = nothing was published")  # fmt: skip
    parts.append(Text(legend, style="dim"))
    parts.extend(Text(f"- {note}", style="dim") for note in result.notes)
    return Group(*parts)
