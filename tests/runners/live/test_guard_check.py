"""`harness-bench guard-check`: each labelled conclusion is put to the guard as Release would put it (the guard's own
request, the case's reference evidence); per guard, the share of unsupported conclusions passed and of supported ones
blocked, with counts and 95% intervals; a model guard's calls are recorded against a scripted endpoint on 127.0.0.1
and replayed offline (record mode none: no server, no key); a bad line is one line naming the file and line, exit 2."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness import GUARD_MARKER
from runners.cli import main
from runners.domain.evalset import BUILTIN_DIR, load_cases
from runners.domain.labelled_conclusions import LabelledConclusionsError, parse_labelled_conclusions
from runners.run.guard_evidence import guard_evidence
from tests._fake_endpoint import completion, serve

CASE = "diagnosable_webhook_cert_expired_acme_pay"
CASES = {c.id: c for c in load_cases([str(BUILTIN_DIR)])}
ROOT = Path(__file__).resolve().parents[3]


def _line(conclusion: str, label: str, case: str = CASE) -> str:
    return json.dumps({"case_id": case, "conclusion": conclusion, "label": label}, ensure_ascii=False)


def _conclusions(tmp_path: Path) -> Path:
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join([
        _line("The endpoint's certificate expired on June 19.", "supported"),
        _line("Our signing secret was rotated.", "unsupported"),
        _line("The certificate is valid.", "unsupported"),
    ]) + "\n")  # fmt: skip
    return path


def test_the_guard_is_shown_the_reference_runs_verified_evidence() -> None:
    found = guard_evidence(CASES[CASE])
    assert found is not None and found.question == CASES[CASE].question
    assert [e.tool for e in found.evidence] == ["log_search", "kb_search"]
    assert "certificate has expired" in found.evidence[0].excerpt
    assert guard_evidence(CASES["missing_context_nothing_given_zh"]) is None  # no conclusion: the guard is never asked


def test_a_model_guard_is_recorded_then_replayed_offline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conclusions, cassettes = _conclusions(tmp_path), tmp_path / "cassettes"
    with serve() as ep:  # a scripted guard: right on the first two, wrong (passes) on the contradicted one
        ep.push(200, completion('{"verdict": "SUPPORTED", "reason": "the log says the certificate expired"}'))
        ep.push(200, completion('{"verdict": "UNSUPPORTED", "reason": "no secret in the evidence"}'))
        ep.push(200, completion("SUPPORTED"))
        live = tmp_path / "live.json"
        assert main(["guard-check", "--conclusions", str(conclusions), "--guard", "off", "--guard", "model",
                     "--guard-model", "openai:m", "--guard-base-url", ep.base_url, "--guard-cassettes", str(cassettes),
                     "--record-mode", "new_episodes", "--json", str(live)]) == 0  # fmt: skip
        sent = ep.requests
    # the guard's own request: its frozen prompt, the case's question and verified evidence, the labelled conclusion
    assert len(sent) == 3 and GUARD_MARKER in sent[0]["messages"][0]["content"]
    payload = json.loads(sent[0]["messages"][1]["content"])
    assert payload["question"] == CASES[CASE].question and payload["claims"] == []
    assert payload["conclusion"] == "The endpoint's certificate expired on June 19."
    assert "certificate has expired" in payload["verified_evidence"][0]["excerpt"]
    rates = json.loads(live.read_text())
    off, model = rates["guards"]
    assert rates["conclusions"] == 3 and off["guard"] == "off" and model["guard"] == "model:m"
    assert (off["by_label"]["unsupported"]["error"], off["by_label"]["supported"]["error"]) == (2, 0)
    unsupported = model["by_label"]["unsupported"]
    assert (unsupported["n"], unsupported["passed"], unsupported["error"]) == (2, 1, 1)
    assert unsupported["error_share"]["low"] < 0.5 < unsupported["error_share"]["high"]
    assert model["by_label"]["supported"]["error"] == 0
    assert model["mistakes"] == [
        {"case_id": CASE, "conclusion": "The certificate is valid.", "label": "unsupported", "reason": "SUPPORTED"}
    ]
    assert [m["conclusion"] for m in off["mistakes"]] == [
        "Our signing secret was rotated.",
        "The certificate is valid.",
    ]
    assert "1/2 = 50%" in capsys.readouterr().out
    # the server is gone and no key is set: the same verdicts replay from the cassettes
    replayed = tmp_path / "replayed.json"
    assert main(["guard-check", "--conclusions", str(conclusions), "--guard", "off", "--guard", "model",
                 "--guard-model", "m", "--guard-cassettes", str(cassettes), "--json", str(replayed)]) == 0  # fmt: skip
    assert json.loads(replayed.read_text()) == rates
    # a conclusion never recorded is one line, exit 2, never a verdict
    conclusions.write_text(conclusions.read_text() + _line("Something else.", "unsupported") + "\n")
    capsys.readouterr()
    assert main(["guard-check", "--conclusions", str(conclusions), "--guard-model", "m",
                 "--guard-cassettes", str(cassettes)]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert "model:m" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        (_line("x", "supported", case="no_such_case"), "c.jsonl:2: case_id 'no_such_case' is not a case"),
        (_line("x", "maybe"), "c.jsonl:2: label 'maybe' is not one of"),
        (_line("x", "supported", case="missing_context_nothing_given_zh"), "c.jsonl:2: case_id "
         "'missing_context_nothing_given_zh' shows the SemanticGuard nothing"),
        ("[1, 2]", "c.jsonl:2: not a JSON object"),
        ('{"case_id": "x", "label": "supported"}', "c.jsonl:2: conclusion: Field required"),
    ],
)  # fmt: skip
def test_a_bad_line_is_one_line_exit_2(
    line: str, needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conclusions = tmp_path / "c.jsonl"
    conclusions.write_text(_line("ok", "supported") + "\n" + line + "\n")
    out = tmp_path / "rates.json"
    assert main(["guard-check", "--conclusions", str(conclusions), "--json", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_the_model_guard_needs_its_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["guard-check", "--conclusions", str(_conclusions(tmp_path)), "--guard", "model"]) == 2
    assert "--guard-model" in capsys.readouterr().err


@pytest.mark.parametrize("labelled_set", ["dev", "held-out"])
def test_the_committed_sets_parse_and_cover_their_split(labelled_set: str) -> None:
    """Each committed set is usable (every case shows the guard evidence), and each of its cases has a supported and
    at least two unsupported conclusions."""
    from runners.domain.splits import Split, split_of_cases
    from runners.run.guard_evidence import unusable_for_guard

    text = (ROOT / "evalsets" / "guard" / f"{labelled_set}.jsonl").read_text(encoding="utf-8")
    items = parse_labelled_conclusions(text, labelled_set, CASES, lambda c: unusable_for_guard(guard_evidence(c)))
    splits = split_of_cases(CASES.values())
    wanted = {Split.DEV} if labelled_set == "dev" else {Split.HELD_OUT, Split.NEW_HELD_OUT}
    assert {splits[i.case_id] for i in items} <= wanted
    for case in {i.case_id for i in items}:
        labels = sorted(i.label.value for i in items if i.case_id == case)
        assert labels.count("supported") >= 1 and labels.count("unsupported") >= 2, case


@given(st.lists(st.one_of(st.text(max_size=60), st.builds(_line, st.text(max_size=20), st.sampled_from(
    ["supported", "unsupported", "other"]), st.sampled_from([CASE, "nope"]))), max_size=5))  # fmt: skip
def test_any_text_parses_or_is_refused_by_line(lines: list[str]) -> None:
    text = "\n".join(lines)
    try:
        items = parse_labelled_conclusions(text, "f.jsonl", CASES, lambda case: None)
    except LabelledConclusionsError as exc:
        assert str(exc).startswith("f.jsonl:") and "\n" not in str(exc)
    else:
        assert len(items) == sum(1 for line in text.splitlines() if line.strip())


def test_the_share_interval_is_exact_and_refuses_impossible_counts() -> None:
    from runners.decisions.intervals import share_interval

    none = share_interval(0, 0)
    assert none.mean is None and none.cases == 0
    all_ = share_interval(20, 20)
    assert all_.mean == 1.0 and all_.high == 1.0 and all_.low is not None and 0.83 < all_.low < 0.84  # 0.05 ** (1/20)
    with pytest.raises(ValueError):
        share_interval(3, 2)


RECORDED = sorted((ROOT / "reports" / "guards").glob("*.json"))
"""The committed rates of the real guards (`scripts/record_guard.py`): each replays from its cassettes."""


@pytest.mark.parametrize("rates", RECORDED, ids=[p.stem for p in RECORDED])
def test_a_recorded_guard_replays_offline_to_its_committed_rates(rates: Path, tmp_path: Path) -> None:
    committed = json.loads(rates.read_text(encoding="utf-8"))
    models = [g["guard"].removeprefix("model:") for g in committed["guards"] if g["guard"].startswith("model:")]
    labelled_set = next(s for s in ("held-out", "dev") if rates.stem.startswith(f"{s}-"))
    out = tmp_path / "rates.json"
    assert main(["guard-check", "--conclusions", str(ROOT / "evalsets" / "guard" / f"{labelled_set}.jsonl"),
                 "--guard", "off", "--guard", "model", *(a for m in models for a in ("--guard-model", m)),
                 "--guard-cassettes", str(ROOT / "cassettes" / "guards"), "--json", str(out)]) == 0  # fmt: skip
    assert json.loads(out.read_text()) == committed


def test_the_json_output_never_replaces_an_input_or_a_symlink(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conclusions = _conclusions(tmp_path)
    before = conclusions.read_bytes()
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "elsewhere.json")
    for out in (conclusions, link):
        assert main(["guard-check", "--conclusions", str(conclusions), "--json", str(out)]) == 2
        assert "--json" in capsys.readouterr().err
    assert conclusions.read_bytes() == before and link.is_symlink() and not (tmp_path / "elsewhere.json").exists()


@given(st.lists(st.tuples(st.sampled_from(["supported", "unsupported"]), st.booleans()), max_size=30))
def test_the_rates_count_every_verdict_once(judged: list[tuple[str, bool]]) -> None:
    from harness import SemanticGuardResult, SemanticVerdict
    from runners.decisions.guard_rates import guard_rates
    from runners.domain.labelled_conclusions import LabelledConclusion

    items = [
        (LabelledConclusion.model_validate({"case_id": CASE, "conclusion": f"c{i}", "label": label}),
         SemanticGuardResult(SemanticVerdict.SUPPORTED if ok else SemanticVerdict.UNSUPPORTED, "r"))
        for i, (label, ok) in enumerate(judged)
    ]  # fmt: skip
    rates = guard_rates("g", items)
    wrong = [c for (label, ok), (c, _) in zip(judged, items, strict=True) if ok != (label == "supported")]
    assert sum(r.n for r in rates.by_label.values()) == len(judged)
    assert sum(r.error for r in rates.by_label.values()) == len(rates.mistakes) == len(wrong)
    assert [m.conclusion for m in rates.mistakes] == [c.conclusion for c in wrong]
    for rate in rates.by_label.values():
        share = rate.error_share
        assert (share.mean is None) == (rate.n == 0)
        if share.mean is not None:
            assert share.low is not None and share.high is not None and share.low <= share.mean <= share.high


@pytest.mark.parametrize("columns", [60, 100])
def test_the_table_fits_the_terminal_and_keeps_each_guard_whole(columns: int, tmp_path: Path) -> None:
    """Both committed real guards side by side: at 60 columns the rates wrap inside their own column, a line is never
    wider than the terminal and a guard's name is never cut."""
    from rich.console import Console

    from runners.decisions.guard_rates import GuardRates
    from runners.rendering.guard_rates import render

    models = ["qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"]
    rates = tmp_path / "rates.json"
    conclusions = ROOT / "evalsets" / "guard" / "dev.jsonl"
    assert main(["guard-check", "--conclusions", str(conclusions), "--guard", "off", "--guard", "model",
                 *(a for m in models for a in ("--guard-model", m)),
                 "--guard-cassettes", str(ROOT / "cassettes" / "guards"), "--json", str(rates)]) == 0  # fmt: skip
    results = [GuardRates.model_validate(g) for g in json.loads(rates.read_text())["guards"]]
    console = Console(width=columns, record=True, file=io.StringIO())  # the width the command's console is given
    console.print(render(f"guards on {conclusions}: 30 labelled conclusions", results))
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= columns, lines
    for model in models:
        assert any(line.startswith(f"model:{model} ") for line in lines), lines
    assert any("10/10 = 100%" in line for line in lines), "the 0.5B's dev row"
