"""The real-models pipeline: every committed recording (`cassettes/<model>/summary.json`) replayed offline into one
database through the bench's API, in this process (`runners.api.sweep`, `--record-mode none`: no server, no key),
checked against its committed summary; then per model the calls it made, `recommend`, the stop rules
(`compare-stops`' defaults), the gate on each real upgrade and downgrade, the Harness against the plain loop, what
each control costs and buys (`runners.decisions.ablation`) and the new held-out cases apart — the `RealModelsReport`
that `runners.rendering.real_report` renders.

Every number in the report comes from the replay's database (or from the summary it was checked against), never
from the committed file alone: a report cannot show numbers the cassettes do not yield. How a recording's flags
become a sweep is the sweep command's parser, so the caller hands it in (`SweepOf`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from harness import ReleaseOutcome
from runners.decisions.ablation import new_held_out_lines, one_change
from runners.decisions.compare_stops import CompareStops
from runners.decisions.judge_rates import judge_rates
from runners.decisions.loop_comparison import LoopComparison, compare_loops
from runners.decisions.real_models import RecordedSummary, summarize
from runners.domain.evalset import BUILTIN_DIR, load_cases
from runners.domain.labelled_answers import parse_labelled_answers
from runners.domain.splits import Split, assigned_splits
from runners.pipelines.real_probes import is_probe_summary
from runners.plan.agent import AgentFramework
from runners.plan.bench_config import PlainPrompt
from runners.plan.options import BenchOptions
from runners.plan.settings import SettingValue
from runners.rendering.real_report import (
    GATE_THRESHOLD,
    GateLine,
    ModelReport,
    NativeAndText,
    RealModelsReport,
    Recommended,
    RecordingSettings,
    ReplayMismatch,
)
from runners.rendering.real_report_judging import JudgeOnSet
from runners.run.rule_judge import RULE_JUDGE
from runners.store.connection import connect
from runners.store.recorded_sweeps import cassette_misses, read_recorded
from runners.store.report_reads import label_case_runs_at, threshold_counts
from runners.store.runs import label_sweep_ids

__all__ = [
    "Recording",
    "RecordingError",
    "ReplaySweep",
    "SweepOf",
    "build",
    "differences",
    "find_recordings",
    "gate_pairs",
    "loop_comparisons",
    "native_and_text",
    "recommended",
    "replay",
    "stop_rules",
]


class RecordingError(ValueError):
    """A recording that cannot be used: no summary, an unreadable one, a replay that would not run."""


class Recording(BaseModel):
    """One committed recording: its folder and its summary."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    folder: Path
    """`cassettes/<model>/`."""
    summary: RecordedSummary
    """Its committed `summary.json`."""


@dataclass(frozen=True, slots=True)
class ReplaySweep:
    """A recording's sweep as the bench runs it: its grid and the rest of its options (offline, into the replay's
    database, under the recording's label)."""

    grid: Mapping[str, Sequence[SettingValue]]
    """The swept settings by name, each with its values."""
    options: BenchOptions
    """Everything else the sweep's flags say, with the cassettes, `--record-mode none`, the database and label."""


SweepOf = Callable[["Recording", Path], ReplaySweep]
"""How a recording's `sweep_args` become the sweep that replays it into a database (the sweep command's parser)."""


# -- recordings -----------------------------------------------------------------------------------
def find_recordings(cassettes: Path) -> list[Recording]:
    """Every `cassettes/*/summary.json`, validated; RecordingError names the first unusable one."""
    from runners.plan.labels import LABEL_PATTERN

    if not cassettes.is_dir():
        raise RecordingError(f"--cassettes {cassettes}: not a folder")
    found: list[Recording] = []
    for path in sorted(cassettes.glob("*/summary.json")):
        if is_probe_summary(path):  # a tag probe's recording: replayed on its own (`real_probes`)
            continue
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


def replay(recording: Recording, db: Path, sweep_of: SweepOf) -> RecordedSummary:
    """Replay the recorded sweep offline (`--record-mode none`) into `db` under the model's name, in this process
    through the bench's API; its summary."""
    import duckdb

    from runners import api
    from runners.domain.evalset import EvalSetError
    from runners.plan.rules import UsageError
    from runners.store.errors import MetricsDbError, MetricsWriteError

    summary = recording.summary
    where = recording.folder / "summary.json"
    try:
        sweep = sweep_of(recording, db)
        done = api.sweep(sweep.grid, sweep.options)
    except EvalSetError as exc:
        raise RecordingError(f"{where}: its sweep did not replay ({exc.problems[0]})") from None
    except (UsageError, MetricsDbError, MetricsWriteError, duckdb.Error, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise RecordingError(f"{where}: its sweep did not replay ({first})") from None
    failed = next((b.storage_error for b in done.bench_runs if b.storage_error is not None), None)
    if failed is not None:
        raise RecordingError(f"{where}: its sweep did not replay (writing {db} failed: {failed})")
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
    from runners.store.replayable_runs import runs_of_label

    con = connect(db, read_only=True)
    try:
        every = runs_of_label(con, str(db), label)
    finally:
        con.close()
    top = max((r.no_gain_threshold for r in every if r.no_gain_threshold is not None), default=None)
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


LABELLED_SETS = (("held-out", "held-out.jsonl"), ("dev", "dev.jsonl"))
"""The committed labelled answers (`evalsets/judge/`): the held-out set first (never developed against)."""


def measure_judge(folder: Path = BUILTIN_DIR / "judge") -> tuple[JudgeOnSet, ...]:
    """The rule judge on each committed labelled set (offline, deterministic)."""
    cases = {c.id: c for c in load_cases([str(BUILTIN_DIR)])}
    out = []
    for name, file in LABELLED_SETS:
        path = folder / file
        answers = parse_labelled_answers(path.read_text(encoding="utf-8"), str(path), cases)
        out.append(JudgeOnSet(labelled_set=name, rates=judge_rates(RULE_JUDGE, answers, cases, default=True)))
    return tuple(out)


def build(
    recordings: Sequence[Recording], db: Path, settings: Mapping[str, RecordingSettings], order: Sequence[str],
    sweep_of: SweepOf,
) -> RealModelsReport | list[ReplayMismatch]:  # fmt: skip
    """Replay every recording into `db` (each recording's sweep as `sweep_of` says), check each against its summary;
    the report, or the mismatches."""
    mismatches: list[ReplayMismatch] = []
    replayed: dict[str, RecordedSummary] = {}
    folders = {rec.summary.label: rec.folder.name for rec in recordings}
    for rec in recordings:
        got = replay(rec, db, sweep_of)
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
                            judge=measure_judge(), new_held_out=new_held_out_lines(summaries, GATE_THRESHOLD),
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
