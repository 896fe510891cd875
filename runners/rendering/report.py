"""`harness-bench report`: a report that decides — Markdown + self-contained HTML, read from DuckDB.

For a sweep: the recommendation and its rule first, then the per-configuration table with 95%
intervals over cases (each metric defined in one line), recall and wasted calls against the
first swept setting, the Pareto front (every Pareto point labelled, the recommendation marked),
and the per-family table of the recommended configuration — never pooled across grid points.
For bench runs: one per-family table and figure per bench run. Both documents are rendered from
one list of sections, so they always say the same thing.
"""

from __future__ import annotations

import functools
import io
from collections import Counter
from collections.abc import Mapping
from dataclasses import astuple, fields
from pathlib import Path

import duckdb
import matplotlib

matplotlib.use("Agg")  # headless: reports are files, never windows
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure as MplFigure

from runners.decisions.funnel import STAGE_DOCS, FunnelStage, confusion, funnel
from runners.decisions.recommend import (
    DEFAULT_MARGIN,
    METRIC_DEFINITIONS,
    ConfigStats,
    Objective,
    Recommendation,
    Rule,
    config_key,
    measure,
    recommend,
    table_rows,
)
from runners.domain.fallback_source import FallbackSource
from runners.plan.settings import SettingValue
from runners.rendering.report_document import Figure, Section, TableBlock, html_document, markdown_document
from runners.store.diagnosis_reads import funnel_rows, gain_tag_rows, sweep_points
from runners.store.report_reads import (
    BenchRunScope,
    CaseRunScope,
    FamilyCounts,
    SweepPointScope,
    ToolRequests,
    bench_run_summaries,
    family_counts,
    tool_requests,
)

MAX_BENCH_RUNS = 6
"""Bench runs shown one by one in a report that is not about a sweep."""
STOP_REASONS = {
    "INFORMATION_SATURATED": "saturated",
    "BUDGET_LIMIT_REACHED": "budget",
    "PROGRESS_PROTOCOL_VIOLATED": "protocol",
    None: "on its own",
}
"""stop_reason -> bar label; None is a run that finished without a Harness stop."""


def _png(fig: MplFigure) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


# -- per family ---------------------------------------------------------------------------------------
def family_frame(con: duckdb.DuckDBPyConnection, scope: CaseRunScope) -> pd.DataFrame:
    """Per family of one bench run or configuration: cases, pass rate, outcome mix, stop reasons, means."""
    columns = [f.name for f in fields(FamilyCounts)]
    return pd.DataFrame([astuple(r) for r in family_counts(con, scope)], columns=columns)


FAMILY_HEADER = [
    "family",
    "cases",
    "case runs",
    "pass rate",
    "outcome / trajectory",
    "outcomes S / F / X",
    "stops sat / budget / proto / own",
    "tools",
    "rejections",
    "wasted",
]
FAMILY_DEFINITIONS = {
    "pass rate": "share of case runs passing every verdict that applies to them",
    "outcome / trajectory": "the two verdicts apart: the outcome verdict (outcome, fallback kind, the root cause, "
    "the Harness's invariants; any agent) and the trajectory verdict (the reference trajectory's bounds; scripted runs "
    "at the default settings only, `-` where none was judged)",
    "outcomes S / F / X": "case runs released as SUCCESS / FALLBACK / FAILED or CANCELLED",
    "stops": "Harness stop reason: information saturated / budget / protocol violations / none (finished on its own)",
    "tools, rejections, wasted": "per case run: tool invocations, rejected tool requests, invocations after the "
    "first NO_GAIN on cases without evidence",
}


def _family_block(df: pd.DataFrame) -> TableBlock:
    rows = [
        [
            str(r.family),
            str(r.cases),
            str(r.case_runs),
            "n/a" if pd.isna(r.pass_rate) else f"{r.pass_rate:.0%}",  # observed runs have no verdict
            f"{_rate(r.outcome_pass_rate)} / {_rate(r.trajectory_pass_rate)}",
            f"{r.success} / {r.fallback} / {r.failed}",
            f"{r.saturated} / {r.budget} / {r.protocol} / {r.on_its_own}",
            f"{r.mean_tool_invocations:.2f}",
            f"{r.mean_rejections:.2f}",
            f"{r.mean_wasted:.2f}",
        ]
        for r in df.itertuples(index=False)
    ]
    return TableBlock(FAMILY_HEADER, rows)


def _rate(value: float | None) -> str:
    return "-" if value is None or pd.isna(value) else f"{value:.0%}"


def _diagnosis_section(con: duckdb.DuckDBPyConnection, groups: Mapping[str, str]) -> Section:
    """The diagnosis funnel of the runs expected to succeed and the agent's gain tags against the truth, per bench
    run (`groups`: bench run id -> how the report names it)."""
    rows = funnel_rows(con, list(groups))
    stages = funnel(rows, key=lambda r: groups[r.bench_run_id])
    funnel_table = TableBlock(
        ["bench run", "runs", *(s.value for s in FunnelStage)],
        [[g.group, str(g.runs), *(str(n) for _, n in g.stages)] for g in stages],
    )
    tags = confusion(gain_tag_rows(con, list(groups)), key=lambda r: groups[r.bench_run_id])
    tag_table = TableBlock(
        ["bench run", "GAINED on evidence", "GAINED on nothing (optimistic)", "NO_GAIN on evidence (premature)",
         "NO_GAIN on nothing", "accuracy"],
        [[c.group, str(c.gained_on_evidence), str(c.gained_on_nothing), str(c.no_gain_on_evidence),
          str(c.no_gain_on_nothing), _rate(c.accuracy)] for c in tags],
    )  # fmt: skip
    sources: dict[str, Counter[FallbackSource]] = {}
    for r in rows:
        if (source := r.fallback_source) is not None:
            sources.setdefault(groups[r.bench_run_id], Counter())[source] += 1
    fallback_table = TableBlock(
        ["bench run", "FALLBACK", "the model declined", "a guard blocked", "the Harness relabelled"],
        [[g, str(sum(c.values())), *(str(c[s]) for s in FallbackSource)] for g, c in sources.items()],
    )
    why = [f"{g.group}: citations rejected because {', '.join(f'{r} ({n})' for r, n in g.rejections)}"
           for g in stages if g.rejections]  # fmt: skip
    return Section(
        "Diagnosis funnel and gain tags",
        ["Every run of a case expected to end in SUCCESS, counted at the first stage it did not pass; then the "
         "agent's GAINED / NO_GAIN on the observations it evaluated, against whether their records carried the "
         "case's evidence (the Harness's own NO_GAIN on empty results and repeats is not counted); then where each "
         "FALLBACK came from: the model's valid Draft declined to conclude, a guard blocked its conclusion, or the "
         "Harness relabelled a reply that was no valid Draft (invalid, cut off, or none).", *why],
        [t for t, show in ((funnel_table, stages or tags), (tag_table, stages or tags), (fallback_table, sources))
         if show],
        FUNNEL_DEFINITIONS,
    )  # fmt: skip


FUNNEL_DEFINITIONS = {s.value: doc for s, doc in STAGE_DOCS.items()}


def _outcome_figure(df: pd.DataFrame, name: str, what: str) -> Figure:
    return Figure(name, f"Outcome and stop reason per family — {what}", functools.partial(_draw_outcomes, df))


def _draw_outcomes(df: pd.DataFrame) -> bytes:
    fig, axes = plt.subplots(1, 2, figsize=(10, 2.3 + 0.32 * len(df)), sharey=True)
    idx = df.set_index("family")
    idx[["success", "fallback", "failed"]].plot.barh(
        stacked=True, ax=axes[0], color=["tab:green", "tab:blue", "tab:red"]
    )
    axes[0].set(title="Outcome per family", xlabel="case runs", ylabel="family")
    stops = idx[["saturated", "budget", "protocol", "on_its_own"]].rename(columns={"on_its_own": "on its own"})
    stops.plot.barh(stacked=True, ax=axes[1], color=["tab:purple", "tab:orange", "tab:red", "tab:gray"])
    axes[1].set(title="Stop reason per family", xlabel="case runs", ylabel="")
    for ax in axes:
        ax.invert_yaxis()
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.32), ncol=4, frameon=False)
    return _png(fig)


def _tool_distribution(con: duckdb.DuckDBPyConnection, scope: CaseRunScope, what: str) -> Figure:
    columns = [f.name for f in fields(ToolRequests)]
    df = pd.DataFrame([astuple(r) for r in tool_requests(con, scope)], columns=columns)  # read while `con` is open
    return Figure("tool_call_distribution.png", f"Tool invocations and rejections per case run — {what}",
                  functools.partial(_draw_tool_requests, df))  # fmt: skip


def _draw_tool_requests(df: pd.DataFrame) -> bytes:
    fig, ax = plt.subplots(figsize=(7, 3.4))
    top = int(max(df["tool_invocations"].max(), df["tool_rejections"].max(), 1))
    bins = [x - 0.5 for x in range(top + 2)]
    ax.hist([df["tool_invocations"], df["tool_rejections"]], bins=bins, label=["invocations", "rejections"])
    ax.set_xticks(range(top + 1))
    ax.set(xlabel="tool requests per case run", ylabel="case runs", title="Tool invocations and rejections")
    ax.legend()
    return _png(fig)


# -- sweep figures -----------------------------------------------------------------------------------------
def _short(s: ConfigStats, cols: tuple[str, ...]) -> str:
    return "/".join(str(s.setting(c)) for c in cols)


def _curves(stats: list[ConfigStats], rec: Recommendation) -> Figure:
    return Figure("recall_wasted_vs_threshold.png", f"Recall and wasted invocations against {rec.columns[0]}",
                  functools.partial(_draw_curves, stats, rec))  # fmt: skip


def _draw_curves(stats: list[ConfigStats], rec: Recommendation) -> bytes:
    x_col, series_cols = rec.columns[0], rec.columns[1:]
    # x positions by rank, labelled with the values: integer ticks for thresholds, names for text settings
    xs = sorted({s.setting(x_col) for s in stats}, key=lambda v: config_key((v,)))
    pos = {v: i for i, v in enumerate(xs)}
    groups: dict[str, list[ConfigStats]] = {}
    for s in sorted(stats, key=lambda s: config_key(s.config)):
        key = ", ".join(f"{c}={s.setting(c)}" for c in series_cols) or "all"
        groups.setdefault(key, []).append(s)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    width = 0.3 / max(len(groups), 1)
    for gi, (key, group) in enumerate(groups.items()):
        dx = (gi - (len(groups) - 1) / 2) * width  # spread the series so intervals do not hide each other
        x = [pos[s.setting(x_col)] + dx for s in group]
        for ax, metric in ((axes[0], "recall"), (axes[1], "wasted")):
            bounds = [getattr(s, metric).bounds() for s in group]
            ax.errorbar(
                x,
                [v for v, _, _ in bounds],
                yerr=[[v - lo for v, lo, _ in bounds], [hi - v for v, _, hi in bounds]],
                marker="o",
                ms=4,
                capsize=3,
                label=key,
            )
    c = rec.chosen
    for ax, iv in ((axes[0], c.recall), (axes[1], c.wasted)):
        ax.scatter([pos[c.setting(x_col)]], [iv.value], marker="*", s=260, color="tab:red", zorder=5,
                   label="recommended" if rec.separable else "rule's pick (unresolved)")  # fmt: skip
        ax.set_xticks(range(len(xs)), [str(v) for v in xs])
        ax.set_xlabel(x_col)
        ax.legend(fontsize=7)
    axes[0].set(ylim=(-0.05, 1.05), ylabel="diagnosis recall (share of cases)", title="Recall, 95% interval over cases")
    axes[1].set(ylabel="wasted invocations per case run", title="Wasted invocations on no-evidence cases")
    return _png(fig)


def _pareto(stats: list[ConfigStats], rec: Recommendation) -> Figure:
    return Figure("pareto_front.png", "Pareto front: recall against cost, every front point labelled",
                  functools.partial(_draw_pareto, stats, rec))  # fmt: skip


def _draw_pareto(stats: list[ConfigStats], rec: Recommendation) -> bytes:
    obj = rec.objective
    fig, ax = plt.subplots(figsize=(9, 4.6))
    for s in stats:
        on_front = s in rec.front
        value, low, high = s.recall.bounds()
        ax.errorbar(
            [s.cost(obj)],
            [value],
            yerr=[[value - low], [high - value]],
            fmt="o",
            ms=6 if on_front else 4,
            color="tab:orange" if on_front else "tab:gray",
            capsize=2,
            alpha=1.0 if on_front else 0.6,
        )
    front = sorted(rec.front, key=lambda s: s.cost(obj))
    ax.plot(
        [s.cost(obj) for s in front], [s.recall.value for s in front], color="tab:orange", lw=1, label="Pareto front"
    )
    ax.scatter(
        [rec.chosen.cost(obj)],
        [rec.chosen.recall.value],
        marker="*",
        s=320,
        color="tab:red",
        zorder=5,
        label=f"recommended ({_short(rec.chosen, rec.columns)})",
    )
    # every Pareto point labelled; points at the same place share one label
    spots: dict[tuple[float, float], list[str]] = {}
    for s in front:
        spots.setdefault((round(s.cost(obj), 1), round(s.recall.value, 4)), []).append(_short(s, rec.columns))
    for i, ((x, y), names) in enumerate(sorted(spots.items())):
        ax.annotate(", ".join(names), (x, y), textcoords="offset points", xytext=(8, -14 if i % 2 else 8), fontsize=8)
    ax.set(
        xlabel=f"{obj.value} per case run (mean over cases)",
        ylabel="diagnosis recall (share of cases)",
        ylim=(-0.05, 1.1),
        title=f"Recall against cost; labels are {'/'.join(rec.columns)}",
    )
    ax.plot([], [], "o", color="tab:gray", alpha=0.6, label="dominated")
    ax.legend(fontsize=8, loc="lower right")
    return _png(fig)


# -- which stop rule pays -------------------------------------------------------------------------
def _stops_section(con: duckdb.DuckDBPyConnection, db: str, bench_run_id: str, what: str) -> Section:
    """The stop policies a team would weigh (the contract's lower thresholds, caps, loop detectors, a combination),
    each counterfactual exact up to its cut on the bench run's stored runs: the Pareto table and its plot."""
    from runners.decisions.case_alternatives import with_alternatives
    from runners.decisions.compare_stops import CompareStopsInputError, compare_stops, default_policies
    from runners.rendering.compare_stops import LEGEND, pareto_png, pareto_table, recorded_line
    from runners.store.replayable_runs import runs_of_bench_run

    title = f"Which stop rule pays — {what}"
    runs = runs_of_bench_run(con, db, bench_run_id)
    policies = default_policies(runs)
    try:
        result = compare_stops(with_alternatives(runs), policies)
    except CompareStopsInputError as exc:
        return Section(title, [f"Not compared: {exc}."])
    header, rows = pareto_table(result)
    command = f"harness-bench compare-stops --db {db} --bench-run {bench_run_id} --policy SPEC"
    paragraphs = [
        f"Each policy applied to the {len(runs)} stored case runs of {bench_run_id}, exact up to the place it would"
        " have stopped each run (a stop rule changes nothing the model saw before it), paired per case against the"
        f" runs as recorded. {recorded_line(result)}. Any other policy: `{command}`.",
        LEGEND + ".",
        *(note[0].upper() + note[1:] + "." for note in result.notes),
    ]
    figure = Figure("stop_rules_pareto.png", f"Stop rules: recall kept against tool calls saved — {what}",
                    functools.partial(pareto_png, result, f"Stop rules on {bench_run_id}"))  # fmt: skip
    return Section(title, paragraphs, [TableBlock(header, rows)], {}, [figure])


def _stops_point(con: duckdb.DuckDBPyConnection, sweep_id: str, chosen: tuple[SettingValue, ...]) -> str | None:
    """The sweep point stop rules are compared on: the highest NO_GAIN threshold among the points that share the
    recommended configuration's other settings (lower thresholds are then policies, compared exactly)."""
    points = sweep_points(con, sweep_id)
    names = [name for name, _ in points[0].settings] if points else []
    wanted = dict(zip(names, chosen, strict=False))
    same = [p for p in points if all(v == wanted.get(n) for n, v in p.settings if n != "no_gain_threshold")]
    if not same:
        return None
    best = max(same, key=lambda p: int(dict(p.settings).get("no_gain_threshold") or 0))
    return best.bench_run_id


# -- document -----------------------------------------------------------------------------------------------
def _sweep_sections(
    con: duckdb.DuckDBPyConnection, sweep_id: str, objective: Objective, rule: Rule, margin: float,
    db: str = "bench.duckdb",
) -> list[Section]:  # fmt: skip
    stats = measure(con, sweep_id)
    if not stats:
        raise ValueError(f"sweep {sweep_id} has no case runs")
    rec = recommend(stats, objective, rule=rule, margin=margin)
    header, rows = table_rows(rec, stats)
    per_config = Section(
        "Per configuration",
        [
            f"{len(stats)} configurations; ★ recommended, ◆ on the Pareto front. Intervals are 95% over cases "
            "(Wilson for rates, a bootstrap resampling cases for means); epochs are averaged within each case first."
            + (
                " The deficit bound is the one-sided 95% upper bound of the per-case recall / honest-fallback "
                "deficit to the best; ✓ = within the margin."
                if rec.checks
                else ""
            )
        ],
        [TableBlock(header, rows)],
        METRIC_DEFINITIONS,
        [_curves(stats, rec), _pareto(stats, rec)],
    )
    point = SweepPointScope(sweep_id, tuple(rec.chosen.config))
    fam = family_frame(con, point)
    label = rec.chosen.label(rec.columns)
    title = (
        f"Per family at the recommended configuration ({label})"
        if rec.separable
        else f"Per family at the rule's pick ({label}; not a recommendation: the sweep cannot separate it)"
    )
    per_family = Section(
        title,
        [f"Only the case runs of {label}; other grid points are not pooled in."],
        [_family_block(fam)],
        FAMILY_DEFINITIONS,
        [_outcome_figure(fam, "outcomes_per_family.png", label), _tool_distribution(con, point, label)],
    )
    from runners.rendering.gate import failing_case_lines
    from runners.store.gate_pairs import failing_case_runs

    failing = failing_case_lines(failing_case_runs(con, sweep_id=sweep_id, config=rec.chosen.config), db)
    cases = Section(
        f"Failing cases at the recommended configuration ({label})",
        [f"{len(failing)} listed; each command prints the case run's transcript.", *failing]
        if failing else ["Every case run of this configuration met its expectations."],
    )  # fmt: skip
    configs = {p.bench_run_id: " ".join(f"{c}={v}" for c, v in p.settings) for p in sweep_points(con, sweep_id)}
    sections = [Section("Recommendation", list(rec.paragraphs)), per_config, per_family, cases]
    stops_at = _stops_point(con, sweep_id, tuple(rec.chosen.config))
    if stops_at is not None:
        sections.append(_stops_section(con, db, stops_at, configs.get(stops_at) or stops_at))
    return [*sections, _diagnosis_section(con, configs)]


def _bench_sections(
    con: duckdb.DuckDBPyConnection, bench_run_id: str | None, db: str = "bench.duckdb"
) -> list[Section]:
    from runners.store.tag_probes import probe_bench_runs

    probes = {run_id for run_id, _ in probe_bench_runs(con)}  # reported on their own (a probe is not a run)
    if bench_run_id in probes:
        return [Section("Summary", [f"Bench run {bench_run_id} is a tag probe (`harness-bench tag-probe`)."])]
    runs = [r for r in bench_run_summaries(con, bench_run_id) if r.bench_run_id not in probes]
    if not runs and probes:
        return [Section("Summary", ["The database holds tag probes only (`harness-bench tag-probe`)."])]
    if not runs:
        raise ValueError(f"no case runs for {'bench run ' + bench_run_id if bench_run_id else 'any bench run'}")
    sections = [
        Section(
            "Summary",
            [
                f"{len(runs)} bench run(s), each reported on its own (configurations are never pooled)"
                + (f"; the newest {MAX_BENCH_RUNS} are shown." if len(runs) > MAX_BENCH_RUNS else ".")
            ],
        )
    ]
    shown = runs[:MAX_BENCH_RUNS]
    for i, run in enumerate(shown):
        run_id, model, label, n = run.bench_run_id, run.model, run.label, run.case_runs
        scope = BenchRunScope(run_id)
        fam = family_frame(con, scope)
        what = f"{run_id} ({model}{', label ' + label if label else ''})"
        figs = [_outcome_figure(fam, f"outcomes_per_family_{i + 1}.png", what)]
        if i == 0:
            figs.append(_tool_distribution(con, scope, what))
        sections.append(
            Section(
                f"Bench run {what}",
                [f"{n} case runs."],
                [_family_block(fam)],
                FAMILY_DEFINITIONS if i == 0 else {},
                figs,
            )
        )
    names = {r.bench_run_id: f"{r.bench_run_id} ({r.model}{', label ' + r.label if r.label else ''})" for r in shown}
    sections.append(_stops_section(con, db, shown[0].bench_run_id, names[shown[0].bench_run_id]))
    sections.append(_diagnosis_section(con, names))
    return sections


def build_report(
    db: Path,
    out: Path,
    *,
    sweep_id: str | None = None,
    bench_run_id: str | None = None,
    objective: Objective = Objective.TOKENS,
    rule: Rule = Rule.NON_INFERIORITY,
    margin: float = DEFAULT_MARGIN,
) -> tuple[Path, Path]:
    """Write `report.md`, `report.html` and the PNGs into `out`; returns the two document paths."""
    from runners.rendering.tag_probe import probe_sections
    from runners.store.connection import connect
    from runners.store.runs import sweep_ids

    con = connect(db, read_only=True)
    try:
        if sweep_id:
            known = set(sweep_ids(con))
            if sweep_id not in known:
                raise ValueError(f"unknown sweep {sweep_id!r}; known: {', '.join(sorted(known)[:5]) or 'none'}")
            scope = f"sweep {sweep_id}"
            sections = _sweep_sections(con, sweep_id, objective, rule, margin, str(db))
        else:
            scope = f"bench run {bench_run_id}" if bench_run_id else "all bench runs"
            sections = _bench_sections(con, bench_run_id, str(db))
            sections += [
                Section(p.title, p.paragraphs, [TableBlock(p.header, p.rows)], p.definitions)
                for p in probe_sections(con, bench_run_id)
            ]  # the tag probes among them
    finally:
        con.close()
    from runners.store.output_files import NamedPath, check_outputs, write_bytes, write_text

    md_path, html_path = out / "report.md", out / "report.html"
    figures = [(out / f.name, f) for s in sections for f in s.figures]
    written = dict.fromkeys([*(p for p, _ in figures), md_path, html_path])  # a figure name may repeat
    check_outputs([NamedPath("--out", p) for p in written], [NamedPath("--db", Path(db))])
    for path, figure in figures:  # drawn now; each file complete or not written (no 0-byte PNG on a full disk)
        write_bytes(NamedPath("--out", path), figure.png)
    title = f"harness-bench report — {scope}"
    write_text(NamedPath("--out", md_path), markdown_document(title, str(db), sections))
    write_text(NamedPath("--out", html_path), html_document(title, str(db), sections))
    return md_path, html_path
