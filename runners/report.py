"""`harness-bench report`: Markdown + self-contained HTML with matplotlib figures, read from DuckDB.

Figures: recall and wasted calls against the NO_GAIN threshold (one line per tool budget), the
Pareto front with the recommendation marked, outcome mix and stop reasons per family, and
tool-call distributions. Every number in the tables comes from SQL over `case_runs`.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import matplotlib

matplotlib.use("Agg")  # headless: reports are files, never windows
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure as MplFigure
from matplotlib.ticker import MaxNLocator

from runners.recommend import Objective, measure, recommend, swept_columns


@dataclass(frozen=True)
class Figure:
    """One PNG figure."""

    name: str
    """File name (`recall_vs_threshold.png`)."""
    title: str
    """Caption."""
    png: bytes
    """Image bytes."""


def _png(fig: MplFigure) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def family_table(con: duckdb.DuckDBPyConnection, where: str, params: Sequence[object]) -> pd.DataFrame:
    """Pass rate, outcome mix, stop reasons and means per family (the report's first table)."""
    return con.execute(
        f"""
        SELECT family, count(*) AS case_runs, round(avg(passed::INT), 3) AS pass_rate,
               count(*) FILTER (WHERE outcome = 'SUCCESS') AS success,
               count(*) FILTER (WHERE outcome = 'FALLBACK') AS fallback,
               count(*) FILTER (WHERE outcome = 'FAILED') AS failed,
               count(*) FILTER (WHERE stop_reason = 'INFORMATION_SATURATED') AS saturated,
               count(*) FILTER (WHERE stop_reason = 'BUDGET_LIMIT_REACHED') AS budget,
               count(*) FILTER (WHERE stop_reason = 'PROGRESS_PROTOCOL_VIOLATED') AS protocol,
               round(avg(tool_invocations), 2) AS mean_tool_invocations,
               round(avg(tool_rejections), 2) AS mean_rejections,
               round(avg(wasted_invocations), 2) AS mean_wasted
        FROM case_runs c JOIN bench_runs b USING (bench_run_id)
        WHERE {where}
        GROUP BY family ORDER BY family
        """,
        params,
    ).df()


def _outcome_figure(df: pd.DataFrame) -> Figure:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    df.set_index("family")[["success", "fallback", "failed"]].plot.barh(stacked=True, ax=axes[0])
    axes[0].set_title("Outcome mix per family")
    axes[0].set_xlabel("case runs")
    df.set_index("family")[["saturated", "budget", "protocol"]].plot.barh(stacked=True, ax=axes[1])
    axes[1].set_title("Stop reasons per family")
    axes[1].set_xlabel("case runs")
    axes[1].set_ylabel("")
    return Figure("outcomes_per_family.png", "Outcome mix and stop reasons per family", _png(fig))


def _tool_distribution(con: duckdb.DuckDBPyConnection, where: str, params: Sequence[object]) -> Figure:
    df = con.execute(
        "SELECT tool_invocations, tool_rejections FROM case_runs c JOIN bench_runs b USING (bench_run_id) "
        f"WHERE {where}",
        params,
    ).df()
    fig, ax = plt.subplots(figsize=(7, 3.8))
    top = int(max(df["tool_invocations"].max(), df["tool_rejections"].max(), 1))
    bins = [x - 0.5 for x in range(top + 2)]
    ax.hist([df["tool_invocations"], df["tool_rejections"]], bins=bins, label=["invocations", "rejections"])
    ax.set_xlabel("per case run")
    ax.set_ylabel("case runs")
    ax.set_title("Tool-call distribution")
    ax.legend()
    return Figure("tool_call_distribution.png", "Tool invocations and rejections per case run", _png(fig))


def _sweep_figures(con: duckdb.DuckDBPyConnection, sweep_id: str, objective: Objective) -> tuple[list[Figure], str]:
    stats = measure(con, sweep_id)
    rec = recommend(stats, objective)
    rows = pd.DataFrame(
        [
            {"threshold": s.config[0], "budget": s.config[2], "recall": s.recall.value, "wasted": s.wasted.value,
             "cost": s.cost(objective), "chosen": s is rec.chosen, "front": s in rec.front,
             "label": s.label(swept_columns(stats))}
            for s in stats
        ]
    )  # fmt: skip
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for budget, group in rows.groupby("budget"):
        g = group.groupby("threshold")[["recall", "wasted"]].mean().reset_index()
        axes[0].plot(g["threshold"], g["recall"], marker="o", label=f"max tool calls {budget}")
        axes[1].plot(g["threshold"], g["wasted"], marker="o", label=f"max tool calls {budget}")
    axes[0].set_title("Diagnosis recall vs NO_GAIN threshold")
    axes[0].set_ylim(-0.05, 1.05)
    axes[1].set_title("Wasted invocations (no-evidence cases) vs threshold")
    for ax in axes:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("no_gain_threshold")
        ax.legend(fontsize=8)
    curves = Figure("recall_wasted_vs_threshold.png", "Recall and wasted calls against the threshold", _png(fig))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.scatter(rows["cost"], rows["recall"], c=["tab:orange" if f else "tab:gray" for f in rows["front"]], s=36)
    front = rows[rows["front"]].sort_values("cost")
    ax.plot(front["cost"], front["recall"], color="tab:orange", lw=1, label="Pareto front")
    chosen = rows[rows["chosen"]]
    ax.scatter(chosen["cost"], chosen["recall"], marker="*", s=300, color="tab:red", label="recommended", zorder=3)
    for _, r in chosen.iterrows():
        ax.annotate(r["label"], (r["cost"], r["recall"]), textcoords="offset points", xytext=(6, -12), fontsize=8)
    ax.set_xlabel(f"{objective.value} per case run")
    ax.set_ylabel("diagnosis recall")
    ax.set_title("Pareto front")
    ax.legend(fontsize=8)
    pareto = Figure("pareto_front.png", "Pareto front with the recommendation marked", _png(fig))
    text = f"**Recommendation:** `{rec.chosen.label(swept_columns(stats))}`\n\n{rec.reasoning}\n"
    return [curves, pareto], text


def build_report(
    db: Path, out: Path, *, sweep_id: str | None = None, bench_run_id: str | None = None,
    objective: Objective = Objective.TOKENS,
) -> tuple[Path, Path]:  # fmt: skip
    """Write `report.md`, `report.html` and the PNGs into `out`; returns the two document paths."""
    from runners.metrics_db import connect

    con = connect(db, read_only=True)
    try:
        if sweep_id:
            where, params, scope = "b.sweep_id = ?", [sweep_id], f"sweep `{sweep_id}`"
        elif bench_run_id:
            where, params, scope = "b.bench_run_id = ?", [bench_run_id], f"bench run `{bench_run_id}`"
        else:
            where, params, scope = "TRUE", [], "all runs"
        fam = family_table(con, where, params)
        if fam.empty:
            raise ValueError(f"{db}: no case runs for {scope}")
        figures = [_outcome_figure(fam), _tool_distribution(con, where, params)]
        rec_text = ""
        if sweep_id:
            sweep_figs, rec_text = _sweep_figures(con, sweep_id, objective)
            figures = sweep_figs + figures
    finally:
        con.close()
    out.mkdir(parents=True, exist_ok=True)
    for f in figures:
        (out / f.name).write_bytes(f.png)
    table_md = fam.to_markdown(index=False) if _has_tabulate() else _md_table(fam)
    md = [f"# harness-bench report — {scope}", "", f"Source: `{db}`.", ""]
    if rec_text:
        md += ["## Recommendation", "", rec_text, ""]
    md += ["## Per family", "", table_md, ""]
    for f in figures:
        md += [f"### {f.title}", "", f"![{f.title}]({f.name})", ""]
    md_path = out / "report.md"
    md_path.write_text("\n".join(md), encoding="utf-8")
    html_path = out / "report.html"
    html_path.write_text(_html(scope, str(db), rec_text, fam, figures), encoding="utf-8")
    return md_path, html_path


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401
    except ImportError:
        return False
    return True


def _md_table(df: pd.DataFrame) -> str:
    head = "| " + " | ".join(str(c) for c in df.columns) + " |"
    sep = "|" + "---|" * len(df.columns)
    rows = ["| " + " | ".join(str(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, sep, *rows])


def _html(scope: str, db: str, rec_text: str, fam: pd.DataFrame, figures: list[Figure]) -> str:
    imgs = "\n".join(
        f"<figure><img alt='{html.escape(f.title)}' src='data:image/png;base64,{base64.b64encode(f.png).decode()}'/>"
        f"<figcaption>{html.escape(f.title)}</figcaption></figure>"
        for f in figures
    )
    rec = (
        f"<h2>Recommendation</h2><p>{html.escape(rec_text.replace('**', '').replace('`', ''))}</p>" if rec_text else ""
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>harness-bench report — {html.escape(scope)}</title>
<style>body{{font-family:system-ui,sans-serif;max-width:1100px;margin:2rem auto;padding:0 1rem}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:.25rem .5rem;text-align:right}}
th{{background:#f3f3f3}}img{{max-width:100%}}figure{{margin:1.5rem 0}}</style></head>
<body><h1>harness-bench report — {html.escape(scope)}</h1><p>Source: <code>{html.escape(db)}</code></p>
{rec}<h2>Per family</h2>{fam.to_html(index=False, border=0)}
{imgs}
</body></html>
"""
