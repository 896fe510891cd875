"""The tag probe's tables: per model, its tags per truth grade beside the trivial taggers, and the threshold they
imply (`harness-bench tag-probe`, `report`); and the same as Markdown for the real-models report."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from runners.decisions.tag_probe import BASELINES, ModelProbe, ProbeMeasure
from runners.domain.truth_grades import GRADE_DOCS, TruthGrade
from runners.rendering.tables import _table

if TYPE_CHECKING:
    import duckdb

__all__ = ["ProbeSection", "probe_markdown", "probe_sections", "probe_table"]


def _model_table(m: ModelProbe) -> Table:
    t = _table(f"{m.model}: {m.judged} of {m.probes} probes judged by a tag ({m.drafted} answered by a Draft)")
    for name in ("truth", "judged", "GAINED", "NO_GAIN", "right", "always GAINED", "always NO_GAIN", "Drafts"):
        t.add_column(name, justify="left" if name == "truth" else "right", no_wrap=True)
    for grade in TruthGrade:
        row = m.by_truth[grade]
        gained_right = row.judged if grade is not TruthGrade.NOTHING_NEW else 0
        no_gain_right = row.judged if grade in (TruthGrade.NOTHING_NEW, TruthGrade.SYMPTOM) else 0
        t.add_row(Text(grade.value), str(row.judged), str(row.gained), str(row.no_gain), f"{row.right}/{row.judged}",
                  f"{gained_right}/{row.judged}", f"{no_gain_right}/{row.judged}",
                  f"{row.drafted} ({row.concluded})")  # fmt: skip
    base = m.baselines
    t.add_row(Text("all", style="bold"), str(m.judged), "", "", Text(f"{m.right}/{m.judged}", style="bold"),
              f"{base[BASELINES[0]].right}/{m.judged}", f"{base[BASELINES[1]].right}/{m.judged}",
              str(m.drafted))  # fmt: skip
    return t


def probe_table(measure: ProbeMeasure) -> RenderableType:
    """Each model's confusion per truth grade, the baselines and the implied threshold, with a legend."""
    parts: list[RenderableType] = []
    for m in measure.models:
        parts.append(_model_table(m))
        parts.append(Text(f"optimistic (GAINED on nothing_new) {m.optimistic}, premature (NO_GAIN on root_cause /"
                          f" excludes) {m.premature}; not judged: "
                          + (", ".join(f"{k} {v}" for k, v in m.unjudged.items()) or "none")))  # fmt: skip
        parts.append(
            Text(
                f"accuracy {m.accuracy.fmt()}; always GAINED {m.baselines[BASELINES[0]].accuracy.fmt()},"
                f" always NO_GAIN {m.baselines[BASELINES[1]].accuracy.fmt()}, GAINED iff non-empty"
                f" {m.baselines[BASELINES[2]].accuracy.fmt()} (every probed observation is non-empty)"
            )
        )
        parts.append(Text(f"threshold: {m.threshold.reasoning}"))
    parts.append(Text("truth: " + "; ".join(f"{g.value} {doc}" for g, doc in GRADE_DOCS.items()), style="dim"))
    parts.append(
        Text(
            "Drafts: probes answered by a Draft instead of a call (with a conclusion); 95% intervals over"
            " cases (bootstrap resampling cases)",
            style="dim",
        )
    )
    return Group(*parts)


def probe_markdown(m: ModelProbe) -> list[str]:
    """One model's probe as Markdown lines: the table per truth grade, the errors and the implied threshold."""
    lines = [
        f"{m.judged} of {m.probes} probes judged by a tag (not judged: "
        + (", ".join(f"{k} {v}" for k, v in m.unjudged.items()) or "none")
        + ").",
        "",
        "| truth | judged | GAINED | NO_GAIN | right | always GAINED | always NO_GAIN | Drafts (with a conclusion) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for grade in TruthGrade:
        row = m.by_truth[grade]
        gained_right = row.judged if grade is not TruthGrade.NOTHING_NEW else 0
        no_gain_right = row.judged if grade in (TruthGrade.NOTHING_NEW, TruthGrade.SYMPTOM) else 0
        lines.append(f"| `{grade.value}` | {row.judged} | {row.gained} | {row.no_gain} | {row.accuracy.fmt()} |"
                     f" {gained_right}/{row.judged} | {no_gain_right}/{row.judged} |"
                     f" {row.drafted} ({row.concluded}) |")  # fmt: skip
    b = m.baselines
    lines.append(f"| **all** | {m.judged} | | | **{m.accuracy.fmt()}** | {b[BASELINES[0]].accuracy.fmt()} |"
                 f" {b[BASELINES[1]].accuracy.fmt()} | {m.drafted} |")  # fmt: skip
    lines += [
        "",
        f"Optimistic (GAINED on `nothing_new`): {m.optimistic}; premature (NO_GAIN on `root_cause` / `excludes`):"
        f" {m.premature}. GAINED-iff-non-empty scores {b[BASELINES[2]].accuracy.fmt()}, always-GAINED's score: every"
        " probed observation is non-empty.",
        "",
        f"Implied NO_GAIN threshold: {m.threshold.reasoning}.",
    ]
    return lines


@dataclass(frozen=True)
class ProbeSection:
    """One tag probe as the bench report shows it (the report makes it a section of its own)."""

    title: str
    """Heading."""
    paragraphs: list[str]
    """Text, one paragraph each."""
    header: list[str]
    """The table's columns."""
    rows: list[list[str]]
    """The table's cells."""
    definitions: dict[str, str]
    """term -> one-line definition."""


def probe_sections(con: duckdb.DuckDBPyConnection, bench_run_id: str | None) -> list[ProbeSection]:
    """The database's tag probes (`bench_run_id`: that one only, if it is a probe): per probe, the confusion per
    truth grade beside the trivial taggers, and the threshold it implies."""
    from runners.decisions.tag_probe import measure_probes
    from runners.store.tag_probes import probe_bench_runs, stored_probes

    sections = []
    for run_id, who in probe_bench_runs(con):
        if bench_run_id is not None and run_id != bench_run_id:
            continue
        m = measure_probes(who, stored_probes(con, run_id), bench_run_id=run_id)
        lines = probe_markdown(m)
        rows = [line for line in lines if line.startswith("|")]
        header = [c.strip() for c in rows[0].strip("|").split("|")]
        body = [[c.strip().strip("*`") for c in r.strip("|").split("|")] for r in rows[2:]]
        text = [line.replace("`", "") for line in lines if line.strip() and not line.startswith("|")]
        sections.append(ProbeSection(f"Tag probe {run_id} ({who})", text, header, body,
                                     {g.value: doc for g, doc in GRADE_DOCS.items()}))  # fmt: skip
    return sections
