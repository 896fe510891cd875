"""The real-models report, rendered: what `runners.pipelines.real_models` built from the committed recordings (the
replayed summary per model, how it was asked, its calls, `recommend`, the stop rules, the gate, the plain-loop
comparison) as Markdown and HTML, and the stop-rule plots.

Every number comes from the report it is handed, which the pipeline took from the replay's database; this module
starts no process and reads no file: it only renders.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from runners.decisions.ablation import NewHeldOutLine, OneChange
from runners.decisions.compare_stops import CompareStops
from runners.decisions.funnel import FunnelStage
from runners.decisions.gate import Verdict
from runners.decisions.loop_comparison import LoopComparison
from runners.decisions.real_models import RecordedSummary
from runners.plan.agent import AgentFramework
from runners.rendering.one_change import (
    NEW_HELD_OUT_HEADER,
    NEW_HELD_OUT_TEXT,
    ONE_CHANGE_HEADER,
    new_held_out_rows,
    one_change_rows,
    one_change_text,
)
from runners.rendering.real_probes import PROBE_TEXT, ProbeReport, probe_lines
from runners.rendering.real_report_judging import (
    FALLBACK_HEADER,
    JUDGE_HEADER,
    JudgeOnSet,
    bench_failure_text,
    fallback_rows,
    guard_text,
    judge_rows,
    judge_text,
)
from runners.rendering.safe_text import html, markdown, markdown_code

__all__ = [
    "GATE_THRESHOLD",
    "GateLine",
    "ModelReport",
    "NativeAndText",
    "RealModelsReport",
    "Recommended",
    "RecordingSettings",
    "ReplayMismatch",
    "render_html",
    "render_markdown",
    "stops_figures",
]

GATE_THRESHOLD = 2
"""The NO_GAIN threshold the gate compares models at: the one every recorded model ran."""


class RecordingSettings(BaseModel):
    """How a model was asked, as its sweep flags say (defaults filled in)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    """`--model` of the sweep."""
    tool_call_format: str
    """`--tool-call-format`: native or json."""
    tool_choice: str
    """`--tool-choice`."""
    temperature: float
    """Sampling temperature."""
    deadline_seconds: float
    """The run's wall-clock deadline."""
    thresholds: tuple[int, ...]
    """The swept NO_GAIN thresholds."""
    epochs: int
    """Epochs per case."""


class ReplayMismatch(BaseModel):
    """A recording whose replay does not yield its committed summary."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    """The model."""
    differences: tuple[str, ...]
    """`path: committed X, replayed Y`, one per differing number."""


class NativeAndText(BaseModel):
    """A model's tool calls at one threshold, native and written as text, counted apart."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    no_gain_threshold: int
    """The threshold."""
    requested: int
    """Tool calls the model asked for (executed or rejected)."""
    text: int
    """Of those, calls written as text and read from the reply (`--tool-call-format json`)."""
    runs_with_text: int
    """Case runs with at least one call written as text."""
    fallbacks: int
    """Case runs released as FALLBACK (the honest answer instead of a failure)."""
    failed: int
    """Case runs released as FAILED."""
    saturations: int
    """Case runs the Harness stopped as INFORMATION_SATURATED."""

    @property
    def native(self) -> int:
        """Calls the server returned as tool calls."""
        return self.requested - self.text


class Recommended(BaseModel):
    """What `recommend` says about one model's sweep."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    threshold: str | None
    """The recommended configuration (`no_gain_threshold=2`), None when there is no recommendation."""
    paragraphs: tuple[str, ...]
    """`recommend`'s reasoning (intervals, resolution), or why nothing is recommended."""


class GateLine(BaseModel):
    """One gate comparison between two recorded models."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    baseline: str
    """The baseline model."""
    candidate: str
    """The candidate model."""
    downgrade: bool
    """Whether the candidate is the smaller model (a real downgrade: PASS would be a finding)."""
    verdict: Verdict | None
    """The gate's verdict; None when the comparison was skipped."""
    cases: int
    """Common cases compared."""
    mde: str
    """The overall test's MDE at 80% power ('—' when skipped)."""
    text: str
    """The gate's verdict line, or why the comparison was skipped."""

    @property
    def downgrade_passed(self) -> bool:
        """A smaller model passed the gate against a larger one: a finding, said loudly."""
        return self.downgrade and self.verdict is Verdict.PASS


class ModelReport(BaseModel):
    """Everything the report says about one model."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    summary: RecordedSummary
    """The replayed summary (equal to the committed one)."""
    folder: str
    """The recording's folder name under the cassettes folder."""
    settings: RecordingSettings
    """How the model was asked."""
    calls: tuple[NativeAndText, ...]
    """Per threshold: native and text calls, fallbacks, failures and saturations."""
    recommended: Recommended
    """`recommend` on its sweep."""
    stops: CompareStops | None = None
    """Stop rules compared on its runs at its highest recorded threshold (None: not compared, `stops_problem` says
    why)."""
    stops_problem: str | None = None
    """Why the stop rules were not compared."""


class RealModelsReport(BaseModel):
    """The whole report."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    models: tuple[ModelReport, ...]
    """The recorded models, in registry order."""
    gates: tuple[GateLine, ...]
    """Each upgrade and its reverse."""
    loops: tuple[LoopComparison, ...] = ()
    """Per model recorded through both loops: the Harness at the gate's threshold against the plain loop."""
    judge: tuple[JudgeOnSet, ...] = ()
    """The outcome judge's error rates on the committed labelled answers."""
    probes: tuple[ProbeReport, ...] = ()
    """Per model with a tag-probe recording: its tags on every observation, and the threshold they imply."""
    new_held_out: tuple[NewHeldOutLine, ...] = ()
    """Each recording's figures on the new held-out cases, at the gate's threshold."""
    one_change: tuple[OneChange, ...] = ()
    """Each recording that changed one thing (a control off, the plain loop with the Harness's prompt) against the
    Harness as it ships."""
    held_out_cases: int = 0
    """The older held-out cases (what a changed recording's coverage is counted against)."""


# -- rendering ------------------------------------------------------------------------------------
def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "none"


def _pct(n: int, d: int) -> str:
    return f"{n}/{d} ({n / d:.0%})" if d else "0/0"


def _settings_text(s: RecordingSettings) -> str:
    return (f"--model {s.model}; tool-call format {s.tool_call_format}; tool_choice {s.tool_choice}; temperature"
            f" {s.temperature:g}; deadline {s.deadline_seconds:g} s; NO_GAIN thresholds"
            f" {','.join(map(str, s.thresholds))}; {s.epochs} epoch(s)")  # fmt: skip


def _harness_rows(m: ModelReport) -> list[list[str]]:
    """Per threshold: what the Harness did that a plain loop would not, and the rates docs/real-models.md states."""
    rows = []
    calls = {c.no_gain_threshold: c for c in m.calls}
    for t in m.summary.thresholds:
        c = calls[t.no_gain_threshold]
        rows.append([
            str(t.no_gain_threshold), _pct(t.passed, t.runs), _pct(t.runs_reaching_backend, t.runs),
            f"{c.native} native, {c.text} as text ({c.runs_with_text} runs)", _pct(t.valid_drafts, t.runs),
            str(t.duplicate_scopes_stopped), str(c.saturations), str(sum(t.violations.values())),
            f"{c.fallbacks} / {c.failed}", f"{t.stop_required_ignored} of {t.stop_required_runs}",
            _counts(t.outcomes), _counts(t.stop_reasons), f"{t.model_calls} / {t.input_tokens + t.output_tokens:,}",
        ])  # fmt: skip
    return rows


HARNESS_HEADER = [
    "NO_GAIN", "passed", "reached a backend", "tool calls", "valid Draft", "duplicates stopped", "saturations",
    "violations contained", "FALLBACK / FAILED", "STOP_REQUIRED ignored", "outcomes", "stop reasons",
    "model calls / tokens",
]  # fmt: skip


VERDICT_HEADER = [
    "NO_GAIN", "outcome verdict", "SUCCESS reached, held-out", "SUCCESS reached, dev", "finished on its own Draft",
    "EvidenceGuard", "SemanticGuard",
]  # fmt: skip


def _verdict_rows(m: ModelReport) -> list[list[str]]:
    """Per threshold: the outcome verdict, SUCCESS per split, who ended the run, what the guards judged."""
    rows = []
    for t in m.summary.thresholds:
        held, dev = t.splits.get("held-out"), t.splits.get("dev")
        rows.append([
            str(t.no_gain_threshold), _pct(t.outcome_passed, t.runs),
            _pct(held.success_reached, held.success_expected) if held else "—",
            _pct(dev.success_reached, dev.success_expected) if dev else "—",
            _pct(t.finished_by_model, t.runs), _counts(t.evidence_checks), _counts(t.semantic_verdicts),
        ])  # fmt: skip
    return rows


def _funnel(report: RealModelsReport) -> tuple[list[str], list[list[str]]]:
    """Runs expected to succeed, per model and threshold, by the stage where they fell out."""
    stages = [s.value for s in FunnelStage]
    rows = [[m.summary.label, str(t.no_gain_threshold), str(sum(t.funnel.values())),
             *(str(t.funnel.get(s, 0)) for s in stages)]
            for m in report.models for t in m.summary.thresholds]  # fmt: skip
    return ["model", "NO_GAIN", "runs", *stages], rows


GAIN_HEADER = ["model", "NO_GAIN", "GAINED on evidence", "GAINED on nothing (optimistic)",
               "NO_GAIN on evidence (premature)", "NO_GAIN on nothing", "accuracy"]  # fmt: skip


def _gain_rows(report: RealModelsReport) -> list[list[str]]:
    rows = []
    for m in report.models:
        for t in m.summary.thresholds:
            g = t.gain_tags
            total = g.gained_on_evidence + g.gained_on_nothing + g.no_gain_on_evidence + g.no_gain_on_nothing
            right = g.gained_on_evidence + g.no_gain_on_nothing
            rows.append([m.summary.label, str(t.no_gain_threshold), str(g.gained_on_evidence),
                         str(g.gained_on_nothing), str(g.no_gain_on_evidence), str(g.no_gain_on_nothing),
                         _pct(right, total) if total else "no tag judged"])  # fmt: skip
    return rows


def _families(report: RealModelsReport) -> tuple[list[str], list[list[str]]]:
    names = sorted({f.family for m in report.models for t in m.summary.thresholds for f in t.families})
    rows = []
    for m in report.models:
        for t in m.summary.thresholds:
            by = {f.family: f for f in t.families}
            rows.append([m.summary.label, str(t.no_gain_threshold),
                         *(f"{by[n].passed}/{by[n].runs}" if n in by else "—" for n in names),
                         f"{t.passed}/{t.runs}"])  # fmt: skip
    return ["model", "NO_GAIN", *names, "all"], rows


def _gate_text(g: GateLine) -> str:
    arrow = f"{g.baseline} → {g.candidate} ({'downgrade' if g.downgrade else 'upgrade'})"
    if g.verdict is None:
        return f"{arrow}: {g.text}"
    loud = " — A DOWNGRADE PASSED: the gate did not tell the smaller model from the larger one" if (
        g.downgrade_passed) else ""  # fmt: skip
    return (f"{arrow}, {g.cases} common cases at NO_GAIN {GATE_THRESHOLD}, k=1: {g.verdict.name}, MDE"
            f" {g.mde}{loud}. {g.text}")  # fmt: skip


FUNNEL_TEXT = (
    "Every run of a case expected to end in SUCCESS, counted at the first stage it did not pass: the evidence never "
    "retrieved, retrieved but tagged NO_GAIN, no valid Draft (a stop, an invalid final message or an error), no "
    "conclusion, a citation EvidenceGuard rejected, a conclusion SemanticGuard judged UNSUPPORTED, SUCCESS whose "
    "conclusion does not state the root cause (the rule judge, rates below), SUCCESS."
)
GAIN_TEXT = (
    "The model's own judgment: its GAINED / NO_GAIN on each non-empty observation it evaluated, against whether the "
    "observation's records carried the case's evidence (the Harness's NO_GAIN on empty results and repeats is not "
    "counted)."
)


STOPS_TEXT = (
    "Each stop policy applied to the model's runs (through the Harness: at its highest recorded NO_GAIN threshold),"
    " exact up to the place it would have stopped each run (a stop rule changes nothing the model saw before it),"
    " paired per case against the runs as recorded; the NO_GAIN rows are the lower thresholds the recording also ran"
    " (the plain loop has no contract: its caps and loop detectors only)."
)


def _stops_title(m: ModelReport) -> str:
    if m.summary.agent is AgentFramework.PLAIN:
        return f"Which stop rule pays — {m.summary.label} (the plain loop)"
    top = max((t.no_gain_threshold for t in m.summary.thresholds), default=None)
    return f"Which stop rule pays — {m.summary.label} at NO_GAIN {top}"


def stops_figures(report: RealModelsReport) -> dict[str, bytes]:
    """Per model whose stop rules were compared: its plot's file name and PNG bytes."""
    from runners.rendering.compare_stops import pareto_png

    return {f"stop-rules-{m.folder}.png": pareto_png(m.stops, _stops_title(m)) for m in report.models
            if m.stops is not None}  # fmt: skip


def _stops_lines(m: ModelReport) -> tuple[list[str], tuple[list[str], list[list[str]]] | None]:
    """The paragraphs and the Pareto table of a model's stop rules."""
    from runners.rendering.compare_stops import LEGEND, pareto_table, recorded_line

    if m.stops is None:
        return [f"Not compared: {m.stops_problem or 'no runs'}."], None
    notes = [note[0].upper() + note[1:] + "." for note in m.stops.notes]
    return [STOPS_TEXT + f" {recorded_line(m.stops)}.", LEGEND + ".", *notes], pareto_table(m.stops)


LOOP_TEXT = (
    "The same model, cases, tools and budgets through the Harness (at NO_GAIN threshold 2) and through the plain loop "
    "(`--agent plain`: no envelope, no information-gain contract, no duplicate-scope rejection, no guards on what it "
    "publishes), paired by case over the cases both ran: the difference is the plain loop's mean minus the Harness's, "
    "with its 95% bootstrap interval over cases."
)
LOOP_HEADER = ["model", "measure", "cases", "Harness", "plain loop", "plain − Harness [95%]"]


def _loop_number(share: bool, value: float) -> str:
    return f"{value:.0%}" if share else f"{value:,.1f}"


def _loop_rows(report: RealModelsReport) -> list[list[str]]:
    rows = []
    for c in report.loops:
        for m in c.metrics:
            value, low, high = m.difference.bounds()
            diff = (f"{value * 100:+.0f} pts [{low * 100:+.0f}, {high * 100:+.0f}]" if m.share
                    else f"{value:+,.1f} [{low:+,.1f}, {high:+,.1f}]")  # fmt: skip
            rows.append([c.model, m.name, str(m.cases), _loop_number(m.share, m.harness),
                         _loop_number(m.share, m.plain), diff])  # fmt: skip
        rows.append([c.model, "FAILED releases", str(c.cases), str(c.harness_failed), str(c.plain_failed), "—"])
        rows.append([c.model, "conclusions with rejected citations: blocked / published", str(c.cases),
                     f"{c.harness_blocked} blocked", f"{c.plain_published_rejected} published", "—"])  # fmt: skip
        rows.append([c.model, "protocol violations", str(c.cases), str(c.harness_violations), "— (no protocol)", "—"])
    return rows


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(markdown(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(markdown(c) for c in row) + " |" for row in rows]
    return lines


def render_markdown(report: RealModelsReport, command: str) -> str:
    """The report as Markdown; every text from a file passes through `markdown`."""
    lines = ["# Real models", "", f"Made by {markdown_code(command)} from the committed cassettes (replayed offline"
             " and checked against each `summary.json`).", "", "## The judge", "", judge_text(), ""]  # fmt: skip
    lines += [*_md_table(JUDGE_HEADER, judge_rows(report.judge)), "", "## Pass rate per family", ""]
    lines += _md_table(*_families(report))
    for m in report.models:
        lines += ["", f"## {markdown(m.summary.label)}", "",
                  f"Recorded with: {markdown(_settings_text(m.settings))}.", "",
                  f"Replay: {markdown_code(_replay_command(m))}.", ""]  # fmt: skip
        lines += _md_table(HARNESS_HEADER, _harness_rows(m))
        lines += ["", markdown(left_out)] if (left_out := bench_failure_text(m.summary)) else []
        lines += ["", "Verdicts and guards:", ""]
        lines += _md_table(VERDICT_HEADER, _verdict_rows(m))
        lines += ["", markdown(guard_text(m.summary)), "", "Where each FALLBACK came from:", ""]
        lines += _md_table(FALLBACK_HEADER, fallback_rows(m.summary))
        verdict = m.recommended.threshold
        lines += ["", f"**Recommend:** {markdown(verdict) if verdict else 'no recommendation'}.", ""]
        for paragraph in m.recommended.paragraphs:
            lines += [markdown(paragraph), ""]
        paragraphs, table = _stops_lines(m)
        lines += [f"### {markdown(_stops_title(m))}", ""]
        for paragraph in paragraphs:
            lines += [markdown(paragraph), ""]
        if table is not None:
            lines += [*_md_table(*table), "", f"![{markdown(_stops_title(m))}](stop-rules-{m.folder}.png)", ""]
    lines += ["## Diagnosis funnel", "", FUNNEL_TEXT, ""]
    lines += _md_table(*_funnel(report))
    lines += ["", "## Gain tags", "", GAIN_TEXT, ""]
    lines += _md_table(GAIN_HEADER, _gain_rows(report))
    if report.loops:
        lines += ["", "## The Harness against a plain loop", "", LOOP_TEXT, ""]
        lines += _md_table(LOOP_HEADER, _loop_rows(report))
    if report.one_change:
        lines += ["", "## What each control costs and buys", "",
                  one_change_text(report.one_change, report.held_out_cases), ""]  # fmt: skip
        lines += _md_table(ONE_CHANGE_HEADER, one_change_rows(report.one_change))
    if report.new_held_out:
        lines += ["", "## New held-out cases", "", NEW_HELD_OUT_TEXT, ""]
        lines += _md_table(NEW_HELD_OUT_HEADER, new_held_out_rows(report.new_held_out))
    if report.probes:
        lines += ["", "## Gain tags on every observation (the tag probe)", "", PROBE_TEXT, ""]
        for p in report.probes:
            lines += probe_lines(p)
    lines += ["", "## Gate", ""]
    lines += [f"- {markdown(_gate_text(g))}" for g in report.gates]
    return "\n".join(lines).rstrip("\n") + "\n"


def _replay_command(m: ModelReport) -> str:
    """The offline replay of a model's sweep, as docs/real-models.md shows it; a long list of cases is named, not
    spelled out (it is in `summary.json`'s `sweep_args`)."""
    given = list(m.summary.sweep_args)
    cases = [given[i + 1] for i, a in enumerate(given[:-1]) if a == "--case"]
    rest = [a for i, a in enumerate(given) if a != "--case" and (i == 0 or given[i - 1] != "--case")]
    shown = [a for c in cases for a in ("--case", c)] if len(cases) <= 5 else ["--case", "…"]
    args = [*shown, *rest, "--cassettes", f"cassettes/{m.folder}", "--record-mode", "none"]
    text = "harness-bench sweep " + " ".join(a if a == "…" else shlex.quote(a) for a in args)
    return text if len(cases) <= 5 else f"{text} (the {len(cases)} cases: summary.json's sweep_args)"


def _cell(text: str) -> str:
    """A cell's escaped text, breakable after each underscore (family names, stop reasons), so a table of eleven
    families fits a 1,100-pixel page."""
    return html(text).replace("_", "_<wbr>")


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{_cell(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_cell(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(report: RealModelsReport, command: str, figures: Mapping[str, bytes] | None = None) -> str:
    """The report as one HTML page, its figures embedded (`figures`: `stops_figures`, drawn here when not given);
    every text from a file passes through `html`."""
    import base64

    drawn = stops_figures(report) if figures is None else figures
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>Real models</title>",
             "<style>body{font-family:sans-serif;max-width:80em;margin:auto}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:2px 4px;font-size:80%}code{overflow-wrap:anywhere}"
             ".loud{color:#b00;font-weight:bold}</style>",
             "</head><body><h1>Real models</h1>",
             f"<p>Made by <code>{html(command)}</code> from the committed cassettes (replayed offline and checked"
             " against each <code>summary.json</code>).</p><h2>The judge</h2>", f"<p>{html(judge_text())}</p>",
             _html_table(JUDGE_HEADER, judge_rows(report.judge)), "<h2>Pass rate per family</h2>",
             _html_table(*_families(report))]  # fmt: skip
    for m in report.models:
        verdict = m.recommended.threshold
        parts += [f"<h2>{html(m.summary.label)}</h2>", f"<p>Recorded with: {html(_settings_text(m.settings))}.</p>",
                  f"<p>Replay: <code>{html(_replay_command(m))}</code>.</p>",
                  _html_table(HARNESS_HEADER, _harness_rows(m)),
                  *(f"<p>{html(t)}</p>" for t in (bench_failure_text(m.summary),) if t), "<p>Verdicts and guards:</p>",
                  _html_table(VERDICT_HEADER, _verdict_rows(m)), f"<p>{html(guard_text(m.summary))}</p>",
                  "<p>Where each FALLBACK came from:</p>", _html_table(FALLBACK_HEADER, fallback_rows(m.summary)),
                  f"<p><b>Recommend:</b> {html(verdict) if verdict else 'no recommendation'}.</p>",
                  *(f"<p>{html(p)}</p>" for p in m.recommended.paragraphs)]  # fmt: skip
        paragraphs, table = _stops_lines(m)
        parts += [f"<h3>{html(_stops_title(m))}</h3>", *(f"<p>{html(p)}</p>" for p in paragraphs)]
        png = drawn.get(f"stop-rules-{m.folder}.png")
        if table is not None:
            parts.append(_html_table(*table))
        if png is not None:
            parts.append(f"<figure><img style='max-width:100%' alt='{html(_stops_title(m))}'"
                         f" src='data:image/png;base64,{base64.b64encode(png).decode()}'/></figure>")  # fmt: skip
    parts += [
        "<h2>Diagnosis funnel</h2>",
        f"<p>{html(FUNNEL_TEXT)}</p>",
        _html_table(*_funnel(report)),
        "<h2>Gain tags</h2>",
        f"<p>{html(GAIN_TEXT)}</p>",
        _html_table(GAIN_HEADER, _gain_rows(report)),
    ]
    if report.loops:
        parts += ["<h2>The Harness against a plain loop</h2>", f"<p>{html(LOOP_TEXT)}</p>",
                  _html_table(LOOP_HEADER, _loop_rows(report))]  # fmt: skip
    if report.one_change:
        parts += ["<h2>What each control costs and buys</h2>",
                  f"<p>{html(one_change_text(report.one_change, report.held_out_cases))}</p>",
                  _html_table(ONE_CHANGE_HEADER, one_change_rows(report.one_change))]  # fmt: skip
    if report.new_held_out:
        parts += ["<h2>New held-out cases</h2>", f"<p>{html(NEW_HELD_OUT_TEXT)}</p>",
                  _html_table(NEW_HELD_OUT_HEADER, new_held_out_rows(report.new_held_out))]  # fmt: skip
    if report.probes:
        parts += ["<h2>Gain tags on every observation (the tag probe)</h2>", f"<p>{html(PROBE_TEXT)}</p>"]
        for p in report.probes:
            parts += _probe_html(p)
    parts.append("<h2>Gate</h2><ul>")
    for g in report.gates:
        cls = " class='loud'" if g.downgrade_passed else ""
        parts.append(f"<li{cls}>{html(_gate_text(g))}</li>")
    parts.append("</ul></body></html>")
    return "\n".join(parts) + "\n"


def _probe_html(p: ProbeReport) -> list[str]:
    """One model's probe section: its Markdown lines, each table as a table and each paragraph as one."""
    out: list[str] = []
    lines = probe_lines(p)
    rows = [line for line in lines if line.startswith("|")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    body = [[c.strip().strip("*`") for c in r.strip("|").split("|")] for r in rows[2:]]
    out.append(f"<h3>{html(lines[0].removeprefix('### '))}</h3>")
    placed = False
    for line in lines[1:]:
        if line.startswith("|"):
            if not placed:
                out.append(_html_table(header, body))
                placed = True
        elif line.strip():
            out.append(f"<p>{html(line.replace('`', ''))}</p>")
    return out
