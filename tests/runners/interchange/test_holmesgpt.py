"""`import-suite --from holmesgpt`: small hand-written folders in HolmesGPT's two layouts become a suite the bench runs
(the mocked path through the Harness), every folder left out is listed with its reason; and, where it is present,
HolmesGPT's own suite (../shared/external/holmesgpt)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import EvidenceStatus, InvocationStatus, ReleaseOutcome, ToolInvocation
from runners.cli import main
from runners.domain.evalset import load_cases
from runners.domain.profiles import trajectory_for
from runners.domain.scripted import ScriptedChatModel
from runners.interchange.holmesgpt import convert
from runners.run.case_runner import run_case

EXTERNAL = (
    Path(__file__).resolve().parents[3].parent / "shared" / "external" / "holmesgpt" / "tests" / "llm" / "fixtures"
)


def _mock(folder: Path, name: str, tool: str, match: dict[str, object] | None, status: str, body: str,
          toolset: str = "kubernetes/core", error: str | None = None) -> None:  # fmt: skip
    header = {"toolset_name": toolset, "tool_name": tool, "match_params": match}
    meta = {"schema_version": "robusta:v1.0.0", "status": status, "error": error, "params": match or {}}
    (folder / name).write_text(f"{json.dumps(header)}\n{json.dumps(meta)}\n{body}", encoding="utf-8")


def _case(root: Path, layout: str, name: str, spec: str) -> Path:
    folder = root / layout / name
    folder.mkdir(parents=True)
    (folder / "test_case.yaml").write_text(spec, encoding="utf-8")
    return folder


@pytest.fixture
def fixtures(tmp_path: Path) -> Path:
    root = tmp_path / "fixtures"
    ask = _case(root, "test_ask_holmes", "01_crashing_pod", "user_prompt: 'Why is web-1 crashing?'\n"
                "expected_output:\n  - web-1 crashes because the config map app-config is missing\n"
                "before_test: kubectl apply -f manifest.yaml\ntags: [logs, easy]\n")  # fmt: skip
    _mock(
        ask,
        "kubectl_describe_web.txt",
        "kubectl_describe",
        {"kind": "pod", "name": "web-1", "namespace": None},
        "success",
        'stdout:\nName: web-1\nWarning  FailedMount  configmap "app-config" not found\n',
    )
    _mock(
        ask,
        "fetch_pod_logs_web.txt",
        "fetch_pod_logs",
        {"pod_name": "web-1", "namespace": "shop"},
        "no_data",
        "",
        toolset="kubernetes/logs",
    )
    _mock(
        ask,
        "kubectl_events.txt",
        "kubectl_events",
        {"resource_type": "pod", "resource_name": "web-1"},
        "error",
        "",
        error="events API unavailable",
    )
    (ask / "notes.txt").write_text("not a mock, just notes\n", encoding="utf-8")
    _case(root, "test_ask_holmes", "02_skipped", "user_prompt: q?\nexpected_output: x\nskip: true\n"
          "skip_reason: still a WIP\n")  # fmt: skip
    _case(root, "test_ask_holmes", "03_live_only", "user_prompt: how many pods?\nexpected_output: 3\n"
          "before_test: kubectl apply -f m.yaml\n")  # fmt: skip
    never = _case(root, "test_ask_holmes", "04_never_mock", "user_prompt: q?\nexpected_output: x\n"
                  "mock_policy: never_mock\n")  # fmt: skip
    _mock(never, "kubectl_describe.txt", "kubectl_describe", {"kind": "pod"}, "success", "x\n")
    cut = _case(root, "test_ask_holmes", "05_cut_mock", "user_prompt: q?\nexpected_output: x\n")
    (cut / "kubectl_describe.txt").write_text('{"toolset_name": "k", "tool_name": "kubectl_describe"}\n{"stat',
                                              encoding="utf-8")  # fmt: skip
    gone = _case(root, "test_ask_holmes", "06_mock_missing", "user_prompt: q?\nexpected_output: x\n")
    (gone / "fetch_pod_logs_big.txt").symlink_to(gone / "absent.txt")
    (root / "test_ask_holmes" / "07_no_case_file").mkdir()
    inv = _case(root, "test_investigate", "01_oom_kill", "expected_output:\n  - The pod is OOM killed\n")
    (inv / "investigate_request.json").write_text(
        json.dumps(
            {
                "title": "Pod is crash looping.",
                "description": "Crashing pod api-7 in namespace default",
                "subject": {"name": "api-7", "subject_type": "deployment", "namespace": "default"},
            }
        ),
        encoding="utf-8",
    )
    _mock(inv, "kubectl_logs_all_containers.txt", "kubectl_logs_all_containers",
          {"pod_name": "api-7", "namespace": "default"}, "success", "allocating 512Mi\nOOMKilled: memory limit 256Mi\n",
          toolset="kubernetes/logs")  # fmt: skip
    return root


def test_each_runnable_folder_becomes_a_case_and_every_other_is_listed_with_its_reason(fixtures: Path) -> None:
    conversion = convert(fixtures)
    assert conversion.converted == 2
    reasons = {s.folder: s.reason for s in conversion.skipped}
    assert reasons == {
        "test_ask_holmes/02_skipped": "skipped upstream: still a WIP",
        "test_ask_holmes/03_live_only": "no mocks: needs a live cluster (before_test sets it up)",
        "test_ask_holmes/04_never_mock": "needs a live cluster (mock_policy: never_mock)",
        "test_ask_holmes/05_cut_mock": "a mock file cut short: kubectl_describe.txt (line 2 is not its JSON metadata)",
        "test_ask_holmes/06_mock_missing": "a mock file missing: fetch_pod_logs_big.txt",
        "test_ask_holmes/07_no_case_file": "no test_case.yaml",
    }
    ask = conversion.cases["ask"][0]
    assert ask.id == "ask_01_crashing_pod" and ask.family == "logs" and ask.question == "Why is web-1 crashing?"
    assert ask.expect.root_cause_statement == "web-1 crashes because the config map app-config is missing"
    assert [(f.tool, f.match, f.status.value) for f in ask.fixtures.results] == [
        ("fetch_pod_logs", {"pod_name": "web-1", "namespace": "shop"}, "no_data"),  # in file-name order
        ("kubectl_describe", {"kind": "pod", "name": "web-1", "namespace": "*"}, "results"),  # null: any value
        ("kubectl_events", {"resource_type": "pod", "resource_name": "web-1"}, "error"),
    ]
    (inv,) = conversion.cases["investigate"]
    assert inv.question == ("Investigate this alert: Pod is crash looping. Crashing pod api-7 in namespace default"
                            " (subject_type deployment name api-7 namespace default).")  # fmt: skip
    assert inv.family == "investigate" and inv.tool_names == ("fetch_pod_logs", "kubectl_logs_all_containers")


def test_the_written_suite_runs_its_mocked_path_through_the_harness(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "suite"
    assert main(["import-suite", "--from", "holmesgpt", str(fixtures), "--out", str(out)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert (
        "converted 2 case folders" in printed and "test_ask_holmes/02_skipped: skipped upstream: still a WIP" in printed
    )
    assert sorted(p.name for p in out.iterdir()) == ["ask.yaml", "investigate.yaml", "not_converted.json", "suite.yaml"]
    assert len(json.loads((out / "not_converted.json").read_text(encoding="utf-8"))) == 6
    cases = {c.id: c for c in load_cases([str(out)])}
    ask = cases["ask_01_crashing_pod"]
    assert trajectory_for(ask, "mocked-path", 1) == ask.trajectory  # the file's trajectory is the mocked path
    run = run_case(ask, model=ScriptedChatModel(trajectory_for(ask, "mocked-path", 1)))
    calls = [(e.tool, e.invocation_status, e.evidence_status) for e in run.result.events
             if isinstance(e, ToolInvocation)]  # fmt: skip
    assert calls == [("fetch_pod_logs", InvocationStatus.COMPLETED, EvidenceStatus.NO_EVIDENCE),
                     ("kubectl_describe", InvocationStatus.COMPLETED, EvidenceStatus.EVIDENCE),
                     ("kubectl_events", InvocationStatus.FAILED, None)]  # fmt: skip
    assert run.result.decision.outcome is ReleaseOutcome.SUCCESS and run.passed, run.failures
    inv = cases["investigate_01_oom_kill"]
    assert run_case(inv, model=ScriptedChatModel(inv.trajectory)).result.decision.outcome is ReleaseOutcome.SUCCESS


def test_an_unusable_path_or_output_is_one_line_and_exit_2(fixtures: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine", encoding="utf-8")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere")
    for argv, said in (
        ([str(tmp_path / "nowhere"), "--out", str(tmp_path / "o1")], "no such folder"),
        ([str(fixtures), "--out", str(full)], "not empty"),
        ([str(fixtures), "--out", str(link)], "a symbolic link"),
        ([str(fixtures), "--out", str(fixtures / "test_ask_holmes" / "out")], "inside or around PATH"),
        ([str(tmp_path / "full"), "--out", str(tmp_path / "o2")], "no HolmesGPT case folder"),
    ):
        assert main(["import-suite", "--from", "holmesgpt", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert said in " ".join(err.split()) and len(err.splitlines()) <= 2, err
    assert (full / "keep.txt").read_text(encoding="utf-8") == "mine" and not (tmp_path / "o1").exists()


@pytest.mark.skipif(not EXTERNAL.is_dir(), reason="HolmesGPT's fixtures are not in ../shared/external")
def test_holmesgpts_own_suite_converts_at_least_60_folders_and_lists_every_other() -> None:
    conversion = convert(EXTERNAL)
    folders = [p for layout in EXTERNAL.iterdir() if layout.name.startswith("test_") for p in layout.iterdir()
               if p.is_dir()]  # fmt: skip
    assert conversion.converted >= 60
    assert conversion.converted + len(conversion.skipped) == len(folders)
    assert all(s.reason for s in conversion.skipped)
