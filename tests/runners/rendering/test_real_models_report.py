"""`harness-bench real-models`: the committed recordings replayed, checked against their summaries, recommended and
gated into a report.

The fixture is a real recording: two "models" (serve-sim's reference and fabricator profiles, under two registry
names) recorded over HTTP into cassettes, each with the summary `runners.decisions.real_models` makes of it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from runners.cli import main
from runners.decisions.real_models import summarize
from runners.decisions.tag_probe import ProbeMeasure, RecordedProbe
from runners.domain.evalset import load_cases
from runners.domain.profiles import trajectory_for_model
from runners.endpoints.simulator import SimulatorServer
from runners.store.recorded_sweeps import read_recorded
from tests._browser import Layout, Page, chromium, lay_out
from tests._db import open_read_only

SMALL, LARGE = "gemma3-270m", "qwen2.5-coder-0.5b"
"""Registry names: the gate compares them as an upgrade (SMALL → LARGE) and a downgrade."""
PROFILES = {SMALL: "openai:scripted:fabricator?p=1", LARGE: "openai:scripted"}
"""The worse profile plays the smaller model."""
THRESHOLDS = {SMALL: "2", LARGE: "1,2"}


def _cases() -> list[str]:
    by_family: dict[str, list[str]] = {}
    for c in load_cases():
        by_family.setdefault(c.family.value, []).append(c.id)
    return by_family["diagnosable"][:8] + by_family["empty_logs"][:2] + by_family["duplicate_scopes"][:2]


def _sweep_args(model: str, cases: list[str], extra: tuple[str, ...] = ()) -> list[str]:
    args = [a for c in cases for a in ("--case", c)]
    # the plain loop has no threshold to sweep; an ablation is recorded at one, as the real ones are
    thresholds = "2" if "plain" in extra or "--ablate" in extra else THRESHOLDS[model]
    return [*args, "--model", PROFILES[model], "--no-gain-threshold", thresholds, "--epochs", "1",
            "--api-key-env", "HB_REAL_KEY", *extra]  # fmt: skip


def _record(root: Path, model: str, cases: list[str], base_url: str, extra: tuple[str, ...] = (),
            folder_name: str | None = None) -> None:  # fmt: skip
    folder = root / (folder_name or model)
    db = root.parent / f"{folder.name}.duckdb"
    flags = _sweep_args(model, cases, extra)
    code = main(["sweep", *flags, "--base-url", base_url, "--cassettes", str(folder), "--record-mode",
                 "new_episodes", "--db", str(db), "--label", "rec"])  # fmt: skip
    assert code == 0
    summary = summarize(model, read_recorded(db, "rec"), flags)
    (folder / "summary.json").write_text(summary.model_dump_json(indent=1) + "\n")


def _record_probe(root: Path, model: str, cases: list[str], base_url: str) -> None:
    """cassettes/<model>-probe/: the model's tag probe on `cases`, with the summary scripts/record_probe.py writes."""
    folder = root / f"{model}-probe"
    flags = [*(a for c in cases for a in ("--case", c)), "--model", PROFILES[model], "--api-key-env", "HB_REAL_KEY"]
    out = root.parent / "probe.json"
    assert main(["tag-probe", *flags, "--base-url", base_url, "--cassettes", str(folder), "--record-mode", "once",
                 "--db", str(root.parent / "probe.duckdb"), "--label", model, "--json", str(out)]) == 0  # fmt: skip
    measured = ProbeMeasure.model_validate_json(out.read_bytes()).models[0].model_copy(update={"bench_run_id": None})
    summary = RecordedProbe(model=model, probe_args=tuple(flags), cases=len(cases), measured=measured)
    (folder / "summary.json").write_text(summary.model_dump_json(indent=1) + "\n")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """cassettes/<model>/ for the two models, recorded through serve-sim (the larger with a hostile `--base-url`
    in its flags: a replay never contacts it, the report shows it)."""
    root = tmp_path_factory.mktemp("rec") / "cassettes"
    cases = _cases()
    mp = pytest.MonkeyPatch()
    mp.setenv("HB_REAL_KEY", "sk-real-models-test")
    try:
        with SimulatorServer(load_cases(), trajectory_for=trajectory_for_model) as sim:
            _record(root, SMALL, cases, sim.base_url)
            _record(root, LARGE, cases, sim.base_url)
            _record(root, LARGE, cases[:6], sim.base_url, ("--agent", "plain"), folder_name=f"{LARGE}-plain")
            _record(root, LARGE, cases[:6], sim.base_url, ("--ablate", "semantic-guard"),
                    folder_name=f"{LARGE}-no-semantic-guard")  # fmt: skip
            _record_probe(root, LARGE, cases[:4], sim.base_url)
    finally:
        mp.undo()
    return root


def _copy(recorded: Path, tmp_path: Path, *models: str) -> Path:
    """A copy of the recordings to change: all of them, or only `models` (each one left out is a replay saved)."""
    root = tmp_path / "cassettes"
    if not models:
        shutil.copytree(recorded, root)
    for model in models:
        shutil.copytree(recorded / model, root / model)
    return root


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["real-models", *argv])
    got = capsys.readouterr()
    return code, got.out, got.err


@pytest.fixture(scope="module")
def report(recorded: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, int]:
    """The command run once on the recording: (OUT, the kept --db, exit code)."""
    tmp = tmp_path_factory.mktemp("report")
    out, db = tmp / "out", tmp / "replay.duckdb"
    code = main(["real-models", "--cassettes", str(recorded), "--db", str(db), "--out", str(out)])
    return out, db, code


def test_the_report_is_written_from_the_replay(report: tuple[Path, Path, int]) -> None:
    out, db, code = report
    assert code == 0
    assert (out / "report.md").is_file() and (out / "report.html").is_file()
    con = open_read_only(db)
    labels = {r[0] for r in con.execute("SELECT DISTINCT label FROM case_runs").fetchall()}
    con.close()
    assert labels == {SMALL, LARGE, f"{LARGE}-plain", f"{LARGE}-no-semantic-guard"}  # the tag probe is replayed apart


def test_the_tag_probe_is_replayed_and_set_beside_the_sweep(report: tuple[Path, Path, int]) -> None:
    out, _, code = report
    assert code == 0
    md = (out / "report.md").read_text()
    section = md.split("## Gain tags on every observation (the tag probe)", 1)[1].split("## Gate", 1)[0]
    assert f"### {LARGE} (4 cases, `cassettes/{LARGE}-probe`)" in section
    assert "| always GAINED | always NO_GAIN |" in section and "Implied NO_GAIN threshold:" in section
    # what the Harness as it ships recommends, never the one-threshold ablation recorded beside it ("nothing")
    swept = md.split(f"## {LARGE}\n", 1)[1].split("**Recommend:** ", 1)[1].split(".\n", 1)[0]
    assert swept.startswith("no_gain_threshold=") and f"the recorded sweep recommends {swept}." in section, swept
    assert "Gain tags on every observation" in (out / "report.html").read_text()


def test_a_probe_summary_the_replay_does_not_yield_is_exit_1(
    recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the probes are replayed and checked after every sweep recording replayed to its summary, whichever they are:
    # the smallest one (six cases at one threshold) is enough to reach them
    root = _copy(recorded, tmp_path, f"{LARGE}-plain", f"{LARGE}-probe")
    path = root / f"{LARGE}-probe" / "summary.json"
    data = json.loads(path.read_text())
    data["measured"]["right"] += 1
    path.write_text(json.dumps(data))
    code, _, err = _run(capsys, "--cassettes", str(root), "--out", str(tmp_path / "out"))
    assert code == 1 and "the probe's replay does not yield the committed summary" in err


def test_each_model_says_which_stop_rule_pays(report: tuple[Path, Path, int]) -> None:
    """Per recording: compare-stops' Pareto table on its runs at its highest threshold (the lower one it ran is a
    NO_GAIN row), its plot beside the report and inside the page; the plain loop's caps and detectors only."""
    out, _, _ = report
    md = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    for label, title, contract in ((SMALL, f"{SMALL} at NO_GAIN 2", True), (LARGE, f"{LARGE} at NO_GAIN 2", True),
                                   (f"{LARGE}-plain", f"{LARGE}-plain (the plain loop)", False)):  # fmt: skip
        section = md.split(f"### Which stop rule pays — {title}")[1].split("\n## ")[0]
        assert "| policy | runs cut |" in section and "tool-cap:4" in section and "repeat:k=3,w=10" in section
        assert ("| no-gain:2 |" in section) is contract and ("| no-gain:1 |" in section) is contract, label
        assert f"(stop-rules-{label}.png)" in section
        assert (out / f"stop-rules-{label}.png").read_bytes().startswith(b"\x89PNG")
        assert f"Which stop rule pays — {title}" in html
    assert html.count("<img style='max-width:100%' alt='Which stop rule pays") == 4  # the ablation's too


def _db(db: Path, sql: str, *params: object) -> list[tuple[object, ...]]:
    con = open_read_only(db)
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


def test_the_family_table_equals_the_database(report: tuple[Path, Path, int]) -> None:
    out, db, _ = report
    md = (out / "report.md").read_text()
    rows = _db(db, "SELECT label, no_gain_threshold, family, count(*) FILTER (WHERE passed), count(*) FROM case_runs"
                   " GROUP BY ALL")  # fmt: skip
    # two thresholds of one model, one of the other, three families; the plain loop's and the ablation's one
    # diagnosable row each (their six cases)
    assert len(rows) == 3 * 3 + 2
    header = next(line for line in md.splitlines() if line.startswith("| model |"))
    families = [c.strip().replace("\\_", "_") for c in header.strip("|").split("|")][2:-1]
    for label, threshold, family, passed, runs in rows:
        line = next(ln for ln in md.splitlines() if ln.startswith(f"| {label} | {threshold} |"))
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[2 + families.index(str(family))] == f"{passed}/{runs}"
    totals = _db(db, "SELECT label, no_gain_threshold, count(*) FILTER (WHERE passed), count(*) FROM case_runs"
                     " GROUP BY ALL")  # fmt: skip
    for label, threshold, passed, runs in totals:
        assert re.search(rf"^\| {re.escape(str(label))} \| {threshold} \|.* \| {passed}/{runs} \|$", md, re.M)


def test_the_harness_rows_equal_the_database(report: tuple[Path, Path, int]) -> None:
    out, db, _ = report
    md = (out / "report.md").read_text()
    for label, threshold, runs, reached, dup, sat, fallback, failed in _db(db, """
            SELECT label, no_gain_threshold, count(*), count(*) FILTER (WHERE tool_invocations > 0),
                   sum(duplicate_scope_rejections), count(*) FILTER (WHERE stop_reason = 'INFORMATION_SATURATED'),
                   count(*) FILTER (WHERE outcome = 'FALLBACK'), count(*) FILTER (WHERE outcome = 'FAILED')
            FROM case_runs GROUP BY ALL"""):  # fmt: skip
        section = md.split(f"## {label}\n", 1)[1].split("\n## ", 1)[0]
        row = next(ln for ln in section.splitlines() if ln.startswith(f"| {threshold} |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[2].startswith(f"{reached}/{runs} ")
        assert cells[5] == str(dup) and cells[6] == str(sat) and cells[8] == f"{fallback} / {failed}"
        (asked,) = _db(db, "SELECT count(*) FROM tool_calls t JOIN case_runs c USING (case_run_id)"
                           " WHERE c.label = ? AND c.no_gain_threshold = ?", label, threshold)  # fmt: skip
        assert cells[3].startswith(f"{asked[0]} native, 0 as text")  # serve-sim returns native tool calls
    assert "tool-call format native; tool_choice auto; temperature 0; deadline" in md


def test_recommend_and_the_gate_are_in_the_report(report: tuple[Path, Path, int]) -> None:
    out, _, _ = report
    md = (out / "report.md").read_text()
    small = md.split(f"## {SMALL}\n", 1)[1].split("\n## ", 1)[0]
    assert "**Recommend:** no recommendation." in small and "one configuration only" in small
    large = md.split(f"## {LARGE}\n", 1)[1].split("\n## ", 1)[0]
    assert "**Recommend:**" in large and "Resolution:" in large
    gate = md.split("## Gate\n", 1)[1]
    lines = [ln for ln in gate.splitlines() if ln.startswith("- ")]
    assert len(lines) == 2  # only recorded models are paired, and only through the Harness's own loop
    assert lines[0].startswith(f"- {SMALL} → {LARGE} (upgrade), 12 common cases at NO_GAIN 2, k=1: ")
    down = lines[1]
    assert down.startswith(f"- {LARGE} → {SMALL} (downgrade), 12 common cases")
    assert ": REGRESSION, MDE " in down or ": INCONCLUSIVE, MDE " in down
    assert "PASS" not in down.split("MDE", 1)[0]
    assert "qwen2.5-coder-1.5b" not in gate and "plain" not in gate


def test_a_model_recorded_through_the_plain_loop_is_its_own_recording_and_compared(
    report: tuple[Path, Path, int],
) -> None:
    """The plain loop's recording of a model is a recording of its own (label MODEL-plain), never gated, and compared
    with the Harness's runs of the same model, paired over the cases both ran."""
    out, db, _ = report
    md = (out / "report.md").read_text()
    assert f"## {LARGE}-plain\n" in md
    loops = md.split("## The Harness against a plain loop\n", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in loops.splitlines() if ln.startswith(f"| {LARGE} |")]
    by = {r.split(" | ")[1]: r.split(" | ") for r in rows}
    assert by["tokens per run"][2] == "6"  # the cases both loops ran
    assert "recall (SUCCESS with the root cause)" in by and "protocol violations" in by
    with open_read_only(db) as con:
        labels = {r[0] for r in con.execute("SELECT DISTINCT label FROM case_runs").fetchall()}
    assert labels == {SMALL, LARGE, f"{LARGE}-plain", f"{LARGE}-no-semantic-guard"}


def test_the_gate_verdict_is_the_gate_command_s(report: tuple[Path, Path, int], capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:  # fmt: skip
    """The downgrade's verdict equals `harness-bench gate` on the same bench runs (all cases are common)."""
    out, db, _ = report
    runs = {label: str(r) for label, r in _db(db, "SELECT DISTINCT label, bench_run_id FROM case_runs"
                                                   " WHERE no_gain_threshold = 2")}  # fmt: skip
    code = main(["gate", "--db", str(db), "--baseline", LARGE, "--candidate", SMALL, "--k", "1",
                 "--bench-run", runs[LARGE], "--bench-run", runs[SMALL],
                 "--summary", str(tmp_path / "s.md"), "--junit", str(tmp_path / "j.xml")])  # fmt: skip
    printed = capsys.readouterr().out
    verdict = {1: "REGRESSION", 3: "INCONCLUSIVE", 0: "PASS"}[code]
    md = (out / "report.md").read_text()
    assert f"{LARGE} → {SMALL} (downgrade), 12 common cases at NO_GAIN 2, k=1: {verdict}," in md
    assert verdict in printed


def test_a_summary_the_replay_does_not_yield_is_exit_1_naming_the_number(
    recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _copy(recorded, tmp_path, LARGE)
    path = root / LARGE / "summary.json"
    data = json.loads(path.read_text())
    data["thresholds"][1]["passed"] += 1
    path.write_text(json.dumps(data))
    code, _, err = _run(capsys, "--cassettes", str(root), "--out", str(tmp_path / "out"))
    assert code == 1
    passed = data["thresholds"][1]["passed"]
    assert f"{LARGE}: the replay does not yield the committed summary" in err
    assert f"thresholds[threshold 2].passed: committed {passed}, replayed {passed - 1}" in " ".join(err.split())
    assert not (tmp_path / "out").exists()


def test_a_changed_cassette_is_exit_1(recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The replay reads the cassettes: an answer changed in one is a mismatch, never a report."""
    root = _copy(recorded, tmp_path, LARGE)
    cassette = next(iter(sorted((root / LARGE).rglob("epoch1.json"))))
    data = json.loads(cassette.read_text())
    last = data["interactions"][-1]
    body = json.loads(last["response"]["body"]["string"])
    body["choices"][0]["message"]["content"] = json.dumps({"conclusion": None})
    last["response"]["body"]["string"] = json.dumps(body)
    cassette.write_text(json.dumps(data))
    code, _, err = _run(capsys, "--cassettes", str(root), "--out", str(tmp_path / "out"))
    assert code == 1 and "the replay does not yield the committed summary" in err


@pytest.mark.parametrize("removed", ["one", "all"])
def test_a_recording_whose_cassettes_are_missing_says_so(
    recorded: Path, tmp_path: Path, removed: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A summary without its cassettes (a partial checkout): one line naming the missing cassettes, exit 2 — not
    a replay that "does not yield the committed summary" with every number listed."""
    root = _copy(recorded, tmp_path, LARGE)
    cassettes = sorted((root / LARGE).rglob("epoch1.json"))
    for cassette in cassettes if removed == "all" else cassettes[:1]:
        cassette.unlink()
    code, _, err = _run(capsys, "--cassettes", str(root), "--out", str(tmp_path / "out"))
    (line,) = err.strip().splitlines()
    gone = len(cassettes) if removed == "all" else 1
    assert code == 2 and "cassettes are missing" in line and f": {gone} cassette file(s)" in line, err
    assert "does not yield" not in err and not (tmp_path / "out").exists()


def test_no_recordings_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    code, _, err = _run(capsys, "--cassettes", str(tmp_path / "empty"), "--out", str(tmp_path / "out"))
    assert code == 2 and "no recordings" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_an_unreadable_summary_is_exit_2_naming_the_file(
    recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _copy(recorded, tmp_path)
    (root / SMALL / "summary.json").write_text('{"model": "x"')
    code, _, err = _run(capsys, "--cassettes", str(root), "--out", str(tmp_path / "out"))
    assert code == 2 and f"{SMALL}/summary.json: not a recorded summary" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_an_out_that_is_an_input_is_refused(recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _copy(recorded, tmp_path)
    code, _, err = _run(capsys, "--cassettes", str(root), "--out", str(root / LARGE))
    assert code == 2 and "inside --cassettes" in err
    assert not (root / LARGE / "report.md").exists()


HOSTILE = "openai:<img src=x onerror=alert(1)>|*x*\u202e"
"""A model name as a recording's flags may hold it (serve-sim plays its reference profile for it)."""


def test_hostile_text_in_the_flags_is_escaped(recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The sweep flags are the file's text, shown in the settings line and the replay command."""
    root = tmp_path / "cassettes"
    PROFILES["hostile"], THRESHOLDS["hostile"] = HOSTILE, "2"
    monkeypatch.setenv("HB_REAL_KEY", "sk-real-models-test")
    try:
        with SimulatorServer(load_cases(), trajectory_for=trajectory_for_model) as sim:
            _record(root, "hostile", _cases()[:2], sim.base_url)
    finally:
        del PROFILES["hostile"], THRESHOLDS["hostile"]
    capsys.readouterr()
    code, _, err = _run(capsys, "--cassettes", str(root), "--out", str(tmp_path / "out"))
    assert code == 0, err
    page = (tmp_path / "out" / "report.html").read_text()
    md = (tmp_path / "out" / "report.md").read_text()
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;|*x*\\u202e" in page
    assert all(tag.startswith("<img style='max-width:100%' alt='Which stop rule pays") for tag in
               re.findall(r"<img[^>]{0,80}", page)), "the only images are the report's own plots"  # fmt: skip
    assert "\u202e" not in md and "\u202e" not in page
    settings = next(ln for ln in md.splitlines() if ln.startswith("Recorded with: --model openai:") and "img" in ln)
    assert "\\<img src=x onerror=alert(1)\\>\\|\\*x\\*\\\\u202e" in settings
    replay = next(ln for ln in md.splitlines() if ln.startswith("Replay: `") and "img" in ln)
    assert "'openai:<img src=x onerror=alert(1)>|*x*\\u202e'" in replay.split("`")[1]  # a code span: verbatim


def test_the_gate_pairs_only_the_common_cases(report: tuple[Path, Path, int]) -> None:
    from runners.decisions.gate import load_pairs

    _, db, _ = report
    runs = {label: str(r) for label, r in _db(db, "SELECT DISTINCT label, bench_run_id FROM case_runs"
                                                   " WHERE no_gain_threshold = 2")}  # fmt: skip
    some = set(_cases()[:5])
    con = open_read_only(db)
    try:
        picked = load_pairs(con, LARGE, SMALL, baseline_run=runs[LARGE], candidate_run=runs[SMALL], cases=some)
        every = load_pairs(con, LARGE, SMALL, baseline_run=runs[LARGE], candidate_run=runs[SMALL])
    finally:
        con.close()
    assert {p.case_id for p in picked} == some and len(every) == 12


def test_a_downgrade_that_passes_is_said_loudly() -> None:
    from runners.decisions.gate import Verdict
    from runners.rendering.real_report import GateLine, RealModelsReport, render_html, render_markdown

    line = GateLine(baseline=LARGE, candidate=SMALL, downgrade=True, verdict=Verdict.PASS, cases=88, mde="4.0 pts",
                    text="✅ PASS — no test is significant")  # fmt: skip
    up = line.model_copy(update={"baseline": SMALL, "candidate": LARGE, "downgrade": False})
    report = RealModelsReport(models=(), gates=(line, up))
    md = render_markdown(report, "harness-bench real-models")
    assert md.count("A DOWNGRADE PASSED") == 1 and f"{LARGE} → {SMALL} (downgrade)" in md
    assert render_html(report, "x").count("<li class='loud'>") == 1


def test_flags_the_sweep_refuses_are_exit_2_naming_the_summary(
    recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _copy(recorded, tmp_path, LARGE)
    path = root / LARGE / "summary.json"
    data = json.loads(path.read_text())
    data["sweep_args"] += ["--no-gain-threshold", "0"]
    path.write_text(json.dumps(data))
    code, _, err = _run(capsys, "--cassettes", str(root), "--out", str(tmp_path / "out"))
    assert code == 2 and f"{LARGE}/summary.json: sweep_args are not `harness-bench sweep` flags" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_a_sweep_the_bench_refuses_is_exit_2_naming_the_summary(
    recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Flags the parser takes but the bench's plan refuses (an unknown case): the in-process replay's refusal is one
    line naming the summary, and nothing is written."""
    root = _copy(recorded, tmp_path, LARGE)
    path = root / LARGE / "summary.json"
    data = json.loads(path.read_text())
    data["sweep_args"] += ["--case", "no_such_case"]
    path.write_text(json.dumps(data))
    code, _, err = _run(capsys, "--cassettes", str(root), "--out", str(tmp_path / "out"))
    assert code == 2
    assert f"{LARGE}/summary.json: its sweep did not replay (--case: unknown case id(s): no_such_case" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_an_out_that_is_a_file_or_an_existing_db_is_refused(
    recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "f").write_text("kept")
    code, _, err = _run(capsys, "--cassettes", str(recorded), "--out", str(tmp_path / "f"))
    assert code == 2 and "is a file" in err and (tmp_path / "f").read_text() == "kept"
    code, _, err = _run(capsys, "--cassettes", str(recorded), "--db", str(tmp_path / "f"), "--out", str(tmp_path / "o"))
    assert code == 2 and "exists" in err and (tmp_path / "f").read_text() == "kept" and not (tmp_path / "o").exists()


ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def layouts(report: tuple[Path, Path, int], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Layout]:
    """The committed report, the committed report without the break points of its cells (`<wbr>` after each
    underscore) and the fixture's, laid out in one headless Chromium at 1,100 pixels."""
    browser = chromium()
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install chromium): cannot measure the page in a real browser")
    committed = (ROOT / "reports" / "real-models" / "report.html").read_text()
    pages = {"committed": Page(committed), "wide": Page(committed.replace("<wbr>", "")),
             "fixture": Page((report[0] / "report.html").read_text())}  # fmt: skip
    return lay_out(pages, browser, tmp_path_factory.mktemp("pages"))


@pytest.mark.parametrize("page", ["committed", "fixture"])
def test_the_page_fits_a_1100_pixel_window_in_chromium(page: str, layouts: dict[str, Layout]) -> None:
    """The committed report (eleven families, four thresholds, the long replay commands) and the fixture's, seen in
    headless Chromium at 1,100 pixels: no horizontal scroll. The committed page without the break points of its
    cells (`<wbr>` after each underscore) overflows: the check bites."""
    laid = layouts[page]
    client = laid.client_width
    assert client > 1000 and laid.scroll_width <= client and laid.right <= client, laid
    if page == "committed":
        assert layouts["wide"].scroll_width > client, "without the break points the family table overflows"
