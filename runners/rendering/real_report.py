"""The real-models report: every committed recording (`cassettes/<model>/summary.json`) replayed offline into one
database, checked against its committed summary, then `recommend` per model, the gate on each real upgrade and
downgrade, and what the Harness did that a plain loop would not — as Markdown and HTML.

Every number in the report comes from the replay's database (or from the summary it was checked against), never
from the committed file alone: a report cannot show numbers the cassettes do not yield.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from harness import ReleaseOutcome
from runners.decisions.ablation import NewHeldOutLine, OneChange, new_held_out_lines, one_change
from runners.decisions.compare_stops import CompareStops
from runners.decisions.funnel import FunnelStage
from runners.decisions.gate import Verdict
from runners.decisions.loop_comparison import LoopComparison, compare_loops
from runners.decisions.real_models import RecordedSummary, summarize
from runners.domain.evalset import BUILTIN_DIR, load_cases
from runners.domain.model_spec import DEFAULT_API_KEY_ENV
from runners.domain.splits import Split, assigned_splits
from runners.plan.agent import AgentFramework
from runners.plan.bench_config import PlainPrompt
from runners.rendering.one_change import (
    NEW_HELD_OUT_HEADER,
    NEW_HELD_OUT_TEXT,
    ONE_CHANGE_HEADER,
    new_held_out_rows,
    one_change_rows,
    one_change_text,
)
from runners.rendering.safe_text import html, markdown, markdown_code
from runners.store.analysis_reads import label_case_runs_at, threshold_counts
from runners.store.connection import connect
from runners.store.recorded_sweeps import cassette_misses, read_recorded
from runners.store.runs import label_sweep_ids

__all__ = [
    "GATE_THRESHOLD",
    "GateLine",
    "ModelReport",
    "NativeAndText",
    "RealModelsReport",
    "Recording",
    "RecordingError",
    "RecordingSettings",
    "ReplayMismatch",
    "build",
    "differences",
    "find_recordings",
    "gate_pairs",
    "render_html",
    "render_markdown",
    "replay",
    "stop_rules",
    "stops_figures",
]

GATE_THRESHOLD = 2
"""The NO_GAIN threshold the gate compares models at: the one every recorded model ran."""


class RecordingError(ValueError):
    """A recording that cannot be used: no summary, an unreadable one, a replay that would not run."""


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


class Recording(BaseModel):
    """One committed recording: its folder and its summary."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    folder: Path
    """`cassettes/<model>/`."""
    summary: RecordedSummary
    """Its committed `summary.json`."""


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
    new_held_out: tuple[NewHeldOutLine, ...] = ()
    """Each recording's figures on the new held-out cases, at the gate's threshold."""
    one_change: tuple[OneChange, ...] = ()
    """Each recording that changed one thing (a control off, the plain loop with the Harness's prompt) against the
    Harness as it ships."""
    held_out_cases: int = 0
    """The older held-out cases (what a changed recording's coverage is counted against)."""


# -- recordings -----------------------------------------------------------------------------------
def find_recordings(cassettes: Path) -> list[Recording]:
    """Every `cassettes/*/summary.json`, validated; RecordingError names the first unusable one."""
    from runners.plan.labels import LABEL_PATTERN

    if not cassettes.is_dir():
        raise RecordingError(f"--cassettes {cassettes}: not a folder")
    found: list[Recording] = []
    for path in sorted(cassettes.glob("*/summary.json")):
        try:
            summary = RecordedSummary.model_validate_json(path.read_bytes())
        except OSError as exc:
            raise RecordingError(f"{path}: cannot be read ({exc.strerror or exc})") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "the file"
            raise RecordingError(f"{path}: not a recorded summary ({where}: {first['msg']})") from None
        try:
            label = summary.label
        except ValueError:
            raise RecordingError(f"{path}: sweep_args name an --agent the bench does not have") from None
        if not LABEL_PATTERN.fullmatch(label):  # it becomes the replay's label
            raise RecordingError(f"{path}: recording {label!r} is not a usable label (letters, digits, '._-:/+@=')")
        if any(r.summary.label == label for r in found):
            raise RecordingError(f"{path}: recording {label!r} (model and loop) is also another summary's")
        found.append(Recording(folder=path.parent, summary=summary))
    if not found:
        raise RecordingError(f"--cassettes {cassettes}: no recordings (no <model>/summary.json in it)")
    return found


def replay(recording: Recording, db: Path) -> RecordedSummary:
    """Replay the recorded sweep offline (`--record-mode none`) into `db` under the model's name; its summary."""
    summary = recording.summary
    argv = [sys.executable, "-m", "runners.cli", "sweep", *summary.sweep_args, "--cassettes", str(recording.folder),
            "--record-mode", "none", "--db", str(db), "--label", summary.label]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != DEFAULT_API_KEY_ENV}  # a replay needs no key: none is sent
    here = str(Path(__file__).resolve().parents[2])  # the replay runs this checkout's bench, whatever is installed
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()] or [f"exit {done.returncode}"]
        raise RecordingError(f"{recording.folder / 'summary.json'}: its sweep did not replay ({lines[-1].strip()})")
    _check_cassettes_present(recording, db)
    return summarize(summary.model, read_recorded(db, summary.label), summary.sweep_args)


_MISSED = re.compile(r"request not in cassette (?P<path>.+?) \(record mode")
"""How a replayed case run names the cassette it found no answer in (runners/run/_execute.py)."""


def _check_cassettes_present(recording: Recording, db: Path) -> None:
    """A replay whose case runs found no cassette file at all is a recording with its cassettes missing (a partial
    checkout, a deleted folder): said as such, not as the numbers that then differ from the summary."""
    misses = cassette_misses(db, recording.summary.label)
    absent = [m["path"] for e in misses.errors if (m := _MISSED.match(e)) and not Path(m["path"]).exists()]
    if absent:
        files = sorted(set(absent))
        raise RecordingError(
            f"{recording.folder}: the recording's cassettes are missing: {len(files)} cassette file(s) (e.g."
            f" {files[0]}), needed by {len(absent)} of {misses.case_runs} replayed case runs; restore them (git"
            " checkout -- cassettes) or record the model again"
        )


def _flat(value: object, path: str, into: dict[str, object]) -> None:
    """Numbers by a readable path: thresholds by their value, families by name."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            _flat(v, f"{path}.{k}" if path else str(k), into)
    elif isinstance(value, list | tuple) and value and isinstance(value[0], Mapping):
        for item in value:
            key = item.get("no_gain_threshold", item.get("family", "?"))
            name = "threshold" if "no_gain_threshold" in item else "family"
            _flat({k: v for k, v in item.items()}, f"{path}[{name} {key}]", into)
    else:
        into[path] = value


def differences(committed: RecordedSummary, replayed: RecordedSummary) -> list[str]:
    """Each number (or flag list) that differs, as `path: committed X, replayed Y`."""
    a: dict[str, object] = {}
    b: dict[str, object] = {}
    _flat(committed.model_dump(), "", a)
    _flat(replayed.model_dump(), "", b)
    return [f"{k}: committed {a.get(k, 'absent')}, replayed {b.get(k, 'absent')}"
            for k in sorted(a.keys() | b.keys()) if a.get(k) != b.get(k)]  # fmt: skip


# -- from the replay's database ---------------------------------------------------------------------
def native_and_text(db: Path, label: str) -> tuple[NativeAndText, ...]:
    """Per threshold: the calls requested and written as text, the runs with one, fallbacks, failures,
    saturations (newest case run per case, threshold and epoch, as the summary counts)."""
    con = connect(db, read_only=True)
    try:
        rows = threshold_counts(con, label)
    finally:
        con.close()
    return tuple(
        NativeAndText(no_gain_threshold=r.no_gain_threshold, requested=r.requested, text=r.text,
                      runs_with_text=r.runs_with_text, fallbacks=r.fallbacks, failed=r.failed,
                      saturations=r.saturations)
        for r in rows
    )  # fmt: skip


def recommended(db: Path, label: str) -> Recommended:
    """`recommend` (its defaults) on the label's sweep, or why nothing is recommended."""
    from runners.decisions.recommend import measure, recommend

    con = connect(db, read_only=True)
    try:
        sweeps = label_sweep_ids(con, label)
        stats = measure(con, sweeps[0]) if len(sweeps) == 1 else []
    finally:
        con.close()
    if not stats:
        return Recommended(threshold=None, paragraphs=("No recommendation: the replay holds no sweep of it.",))
    rec = recommend(stats)
    if len(stats) == 1:
        only = stats[0]
        return Recommended(threshold=None, paragraphs=(
            f"No recommendation: the sweep ran one configuration only ({only.label(rec.columns) or 'one threshold'})"
            f" — nothing to choose between. Its recall {only.recall.fmt(pct=True)}, honest fallback "
            f"{only.honest_fallback.fmt(pct=True)} ({only.cases} cases; intervals are 95% over cases).",
        ))  # fmt: skip
    picked = rec.chosen.label(rec.columns) if rec.separable else None
    return Recommended(threshold=picked, paragraphs=rec.paragraphs)


def stop_rules(db: Path, label: str) -> tuple[CompareStops | None, str | None]:
    """The stop policies (`compare-stops`' defaults) on the model's runs at its highest recorded threshold, each
    exact up to its cut; or why they were not compared."""
    from runners.decisions.case_alternatives import with_alternatives
    from runners.decisions.compare_stops import CompareStopsInputError, compare_stops, default_policies
    from runners.store.whatif_runs import runs_of_label

    con = connect(db, read_only=True)
    try:
        every = runs_of_label(con, str(db), label)
    finally:
        con.close()
    top = max((r.no_gain_threshold for r in every), default=None)
    runs = [r for r in every if r.no_gain_threshold == top]
    try:
        return compare_stops(with_alternatives(runs), default_policies(runs)), None
    except CompareStopsInputError as exc:
        return None, str(exc)


def gate_pairs(models: Sequence[str]) -> list[tuple[str, str, bool]]:
    """(baseline, candidate, downgrade): each step up the registry's order (smallest model first), then its
    reverse."""
    pairs: list[tuple[str, str, bool]] = []
    for small, large in itertools.pairwise(models):
        pairs += [(small, large, False), (large, small, True)]
    return pairs


def _gate(db: Path, baseline: str, candidate: str, downgrade: bool, recorded: set[str]) -> GateLine:
    from runners.decisions.gate import evaluate, load_pairs
    from runners.rendering.gate import verdict_line_with_power

    def skipped(why: str) -> GateLine:
        return GateLine(baseline=baseline, candidate=candidate, downgrade=downgrade, verdict=None, cases=0, mde="—",
                        text=f"skipped: {why}")  # fmt: skip

    missing = [m for m in (baseline, candidate) if m not in recorded]
    if missing:
        return skipped(f"{' and '.join(missing)} not recorded")
    con = connect(db, read_only=True)
    try:
        runs: dict[str, str] = {}
        cases: dict[str, set[str]] = {}
        for label in (baseline, candidate):
            rows = label_case_runs_at(con, label, GATE_THRESHOLD)
            if not rows:
                return skipped(f"{label} has no case runs at NO_GAIN threshold {GATE_THRESHOLD}")
            runs[label] = rows[0].bench_run_id
            cases[label] = {r.case_id for r in rows}
        common = cases[baseline] & cases[candidate]
        if not common:
            return skipped("no case in common")
        pairs = load_pairs(con, baseline, candidate, baseline_run=runs[baseline], candidate_run=runs[candidate],
                           cases=common)  # fmt: skip
    finally:
        con.close()
    result = evaluate(pairs, baseline, candidate, k=1)
    return GateLine(baseline=baseline, candidate=candidate, downgrade=downgrade, verdict=result.verdict,
                    cases=result.overall.cases, mde=result.overall.test.mde_text(),
                    text=verdict_line_with_power(result).replace("**", ""))  # fmt: skip


def build(
    recordings: Sequence[Recording], db: Path, settings: Mapping[str, RecordingSettings], order: Sequence[str]
) -> RealModelsReport | list[ReplayMismatch]:
    """Replay every recording into `db`, check each against its summary; the report, or the mismatches."""
    mismatches: list[ReplayMismatch] = []
    replayed: dict[str, RecordedSummary] = {}
    folders = {rec.summary.label: rec.folder.name for rec in recordings}
    for rec in recordings:
        got = replay(rec, db)
        diff = differences(rec.summary, got)
        if diff:
            mismatches.append(ReplayMismatch(model=rec.summary.label, differences=tuple(diff)))
        replayed[rec.summary.label] = got
    if mismatches:
        return mismatches
    rank = {name: i for i, name in enumerate(order)}
    names = sorted(
        replayed, key=lambda m: (rank.get(replayed[m].model, len(rank)), replayed[m].agent.value != "native", m)
    )
    reports = []
    for m in names:
        stops, problem = stop_rules(db, m)
        reports.append(ModelReport(summary=replayed[m], folder=folders[m], settings=settings[m],
                                   calls=native_and_text(db, m), recommended=recommended(db, m), stops=stops,
                                   stops_problem=problem))  # fmt: skip
    models = tuple(reports)
    # The gate compares models through the Harness's own loop: the registry's models that have such a recording.
    natives = [m for m in order if m in replayed and replayed[m].agent is AgentFramework.NATIVE]
    gates = tuple(_gate(db, b, c, down, set(replayed)) for b, c, down in gate_pairs(natives))
    summaries = list(replayed.values())
    expected = {c.id: c.expect.outcome is ReleaseOutcome.SUCCESS for c in load_cases([str(BUILTIN_DIR)])}
    runs_of = {label: read_recorded(db, label).runs for label in replayed}
    held = sum(s is Split.HELD_OUT for s in assigned_splits().values())
    return RealModelsReport(models=models, gates=gates, loops=loop_comparisons(db, summaries),
                            new_held_out=new_held_out_lines(summaries, GATE_THRESHOLD),
                            one_change=one_change(summaries, runs_of, expected, GATE_THRESHOLD),
                            held_out_cases=held)  # fmt: skip


def loop_comparisons(db: Path, summaries: Sequence[RecordedSummary]) -> tuple[LoopComparison, ...]:
    """The Harness against the plain loop, for every model recorded through both."""
    expected = {c.id: c.expect.outcome is ReleaseOutcome.SUCCESS for c in load_cases([str(BUILTIN_DIR)])}
    natives = {s.model: s for s in summaries if s.baseline}
    out = []
    for s in summaries:
        native = natives.get(s.model)
        if s.agent is not AgentFramework.PLAIN or native is None or s.new_held_out:
            continue
        harness_runs, plain_runs = read_recorded(db, native.label).runs, read_recorded(db, s.label).runs
        name = s.model if s.plain_prompt is PlainPrompt.PLAIN else s.label  # the plain loop with its own prompt
        out.append(compare_loops(name, harness_runs, plain_runs, expected, GATE_THRESHOLD))
    return tuple(out)


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
    "conclusion, a citation EvidenceGuard rejected, a conclusion SemanticGuard judged UNSUPPORTED, SUCCESS without the "
    "root cause's words, SUCCESS."
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
            d = m.difference
            diff = (f"{d.value * 100:+.0f} pts [{d.low * 100:+.0f}, {d.high * 100:+.0f}]" if m.share
                    else f"{d.value:+,.1f} [{d.low:+,.1f}, {d.high:+,.1f}]")  # fmt: skip
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
             " and checked against each `summary.json`).", "", "## Pass rate per family", ""]  # fmt: skip
    lines += _md_table(*_families(report))
    for m in report.models:
        lines += ["", f"## {markdown(m.summary.label)}", "",
                  f"Recorded with: {markdown(_settings_text(m.settings))}.", "",
                  f"Replay: {markdown_code(_replay_command(m))}.", ""]  # fmt: skip
        lines += _md_table(HARNESS_HEADER, _harness_rows(m))
        lines += ["", "Verdicts and guards:", ""]
        lines += _md_table(VERDICT_HEADER, _verdict_rows(m))
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
             " against each <code>summary.json</code>).</p><h2>Pass rate per family</h2>",
             _html_table(*_families(report))]  # fmt: skip
    for m in report.models:
        verdict = m.recommended.threshold
        parts += [f"<h2>{html(m.summary.label)}</h2>", f"<p>Recorded with: {html(_settings_text(m.settings))}.</p>",
                  f"<p>Replay: <code>{html(_replay_command(m))}</code>.</p>",
                  _html_table(HARNESS_HEADER, _harness_rows(m)), "<p>Verdicts and guards:</p>",
                  _html_table(VERDICT_HEADER, _verdict_rows(m)),
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
    parts.append("<h2>Gate</h2><ul>")
    for g in report.gates:
        cls = " class='loud'" if g.downgrade_passed else ""
        parts.append(f"<li{cls}>{html(_gate_text(g))}</li>")
    parts.append("</ul></body></html>")
    return "\n".join(parts) + "\n"
