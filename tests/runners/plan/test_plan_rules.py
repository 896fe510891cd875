"""The flag rules (runners/plan/rules.py): a flag that would be ignored, or contradicts another, is refused
before anything is opened or written — one test per rule, on the rules themselves and through the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from runners.cli import main
from runners.plan import rules
from runners.plan.executor import Executor
from runners.plan.flags import BenchInputError, FlagError
from runners.plan.options import BenchOptions, ResumeRequest
from runners.plan.rules import PlanError, check_options
from runners.plan.settings import ModelSettings
from runners.plan.shard import ShardSpec

OPENAI = "openai:m"


def _opts(model: str = "scripted", base_url: str | None = None, api_key_env: str | None = None,
          **options: object) -> BenchOptions:  # fmt: skip
    """Options of a run of `model` (the endpoint settings given only when not None)."""
    endpoint = {k: v for k, v in {"base_url": base_url, "api_key_env": api_key_env}.items() if v is not None}
    return BenchOptions.of(model_settings=ModelSettings(model=model, **endpoint), **options)  # type: ignore[arg-type]


def _refused(opts: BenchOptions, *words: str) -> None:
    with pytest.raises(PlanError) as info:
        check_options(opts)
    assert all(w in str(info.value) for w in words), str(info.value)


def test_record_mode_needs_cassettes() -> None:
    _refused(_opts(OPENAI, record_mode="all"), "--record-mode all needs --cassettes")


def test_cassettes_need_an_openai_model(tmp_path: Path) -> None:
    _refused(_opts("scripted", cassettes=tmp_path), "--cassettes", "--model scripted makes none")


def test_cassettes_must_be_a_folder(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    _refused(_opts(OPENAI, cassettes=tmp_path / "f", record_mode="all"), "is a file, not a folder")


def test_a_replay_needs_an_existing_cassette_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _refused(_opts(OPENAI, cassettes=tmp_path / "none"), "no such folder", "--record-mode all")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-secret")
    check_options(_opts(OPENAI, cassettes=tmp_path / "none", record_mode="all"))  # recording: made


def test_the_openai_api_needs_its_key_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the OpenAI API itself needs the key: a replay is offline, a local server ignores the key."""
    monkeypatch.delenv("MY_KEY", raising=False)
    _refused(_opts(OPENAI, api_key_env="MY_KEY"), "MY_KEY is not set", "--api-key-env")
    _refused(_opts(OPENAI, api_key_env="MY_KEY", cassettes=tmp_path, record_mode="all"), "MY_KEY")
    check_options(_opts(OPENAI, api_key_env="MY_KEY", cassettes=tmp_path))  # a replay
    check_options(_opts(OPENAI, api_key_env="MY_KEY", base_url="http://127.0.0.1:9/v1"))
    # a resume's flags are checked before its stored model is known; the stored model is checked after
    check_options(_opts(resume="br-x"))
    _refused(_opts(OPENAI, api_key_env="MY_KEY", resume="br-x"), "MY_KEY is not set")
    monkeypatch.setenv("MY_KEY", "sk-test-not-a-secret")
    check_options(_opts(OPENAI, api_key_env="MY_KEY"))


def test_a_base_url_is_http_with_a_host(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    _refused(_opts(OPENAI, base_url="ftp://x", cassettes=tmp_path), "--base-url 'ftp://x'")
    monkeypatch.setenv("OPENAI_BASE_URL", "nonsense")
    _refused(_opts(OPENAI), "OPENAI_BASE_URL 'nonsense'")
    check_options(_opts("scripted"))  # a scripted model reaches no URL


def test_shard_needs_a_run_id() -> None:
    _refused(_opts("scripted", shard=ShardSpec.parse("1/2")), "--shard 1/2 needs --run-id")
    check_options(_opts("scripted", shard=ShardSpec.parse("1/2"), run_id="ci-1"))


def test_ray_address_needs_the_ray_executor() -> None:
    _refused(_opts("scripted", ray_address="auto"), "--ray-address auto applies to --executor ray")


def test_resume_refuses_flags_it_would_ignore() -> None:
    request = BenchOptions(resume=ResumeRequest("br-x", refused=("--epochs", "--case")))
    _refused(request, "--resume br-x restores the stored settings; remove --epochs, --case")
    check_options(BenchOptions(resume=ResumeRequest("br-x")))


def test_counts_are_in_range() -> None:
    """A count is refused by its declaration (runners/plan/options.py), one line naming the flag, before a rule."""
    for values, words in (({"epochs": 0}, "--epochs 0: must be an integer from 1 to 10000"),
                          ({"concurrency": rules.MAX_CONCURRENCY + 1}, "--concurrency 1025")):  # fmt: skip
        with pytest.raises(FlagError) as info:
            _opts("scripted", **values)
        assert words in str(info.value) and "\n" not in str(info.value), str(info.value)


def test_every_rule_is_applied_by_the_one_entry_point() -> None:
    """check_options applies each rule function of the module (none is left for a caller to forget)."""
    checks = {n for n in rules.__all__ if n.startswith("check_") and n != "check_options"}
    source = Path(rules.__file__).read_text().split("def check_options", 1)[1]
    assert checks and all(f"{c}(" in source for c in checks), checks


def test_the_rules_take_the_one_options_type() -> None:
    """No second description of a run: the rules declare no request type of their own, and the entry point takes
    the `BenchOptions` the command line, the Python API and a stored run all give."""
    import ast
    import inspect

    tree = ast.parse(Path(rules.__file__).read_text())
    assert not [n.name for n in tree.body if isinstance(n, ast.ClassDef) and not n.name.endswith("Error")]
    assert inspect.signature(check_options).parameters["opts"].annotation == "BenchOptions"
    assert not hasattr(rules, "RunRequest")


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["run", "--record-mode", "all"], "--record-mode all needs --cassettes"),
        (["sweep", "--record-mode", "none"], "--record-mode none needs --cassettes"),  # given, not the default
        (["run", "--shard", "1/2"], "--shard 1/2 needs --run-id"),
        (["run", "--ray-address", "auto"], "--ray-address auto applies to --executor ray only"),
        (["run", "--resume", "br-x", "--epochs", "2"], "remove --epochs"),
        (["sweep", "--resume", "sw-x", "--label", "a"], "remove --label"),
    ],
)
def test_the_cli_refuses_through_the_rules(
    argv: list[str], words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main([*argv, "--db", str(tmp_path / "x.duckdb")]) == 2
    assert words in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "x.duckdb").exists(), "nothing is written"


def test_executor_choices_come_from_the_vocabulary() -> None:
    assert [e.value for e in Executor] == ["local", "processes", "ray"]


def test_the_python_api_is_refused_by_the_same_rules(tmp_path: Path) -> None:
    """run_bench applies the rules to BenchOptions before the database is opened."""
    from runners.plan.options import BenchOptions
    from runners.run.bench import plan_run, run_bench

    db = tmp_path / "api.duckdb"
    bad = [
        BenchOptions.of(db=db, ray_address="auto"),
        BenchOptions.of(db=db, shard=ShardSpec.parse("1/2")),
        BenchOptions.of(db=db, cassettes=tmp_path),
        BenchOptions.of(db=db, model=OPENAI, cassettes=tmp_path / "none"),
    ]
    for opts in bad:
        with pytest.raises(PlanError):
            run_bench(plan_run(opts))
    with pytest.raises(BenchInputError, match="--epochs 0"):  # refused by its declaration, before any plan
        run_bench(plan_run(BenchOptions.of(db=db, epochs=0)))
    assert not db.exists(), "nothing is written"


def test_a_plan_is_frozen_and_holds_what_the_runner_reads(tmp_path: Path) -> None:
    import dataclasses

    from runners.plan.options import BenchOptions
    from runners.run.bench import plan_run

    plan = plan_run(BenchOptions.of(db=tmp_path / "p.duckdb", evalsets=["empty_logs"], epochs=2))
    assert plan.model.kind == "scripted" and plan.cases and all(c.family.value == "empty_logs" for c in plan.cases)
    assert plan.options.storage.db == tmp_path / "p.duckdb" and plan.options.execution.executor is Executor.LOCAL
    assert plan.options.execution.shard is None and len(plan.work) == 2 * len(plan.cases), "every (case, epoch)"
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.cases = ()  # type: ignore[misc]
    assert not (tmp_path / "p.duckdb").exists()


def test_cli_choices_come_from_their_one_declaration() -> None:
    """--record-mode, --executor, --objective and --rule list the vocabularies they are checked against."""
    from runners.cli import build_parser
    from runners.decisions.choices import Objective, Rule

    def choices(command: str, dest: str) -> list[str]:
        sub = next(a for a in build_parser()._actions if a.dest == "command")
        parser = sub.choices[command]  # type: ignore[index]
        return list(next(a for a in parser._actions if a.dest == dest).choices)

    assert choices("run", "record_mode") == list(rules.RECORD_MODES)
    assert choices("sweep", "executor") == [e.value for e in Executor]
    for command in ("recommend", "report"):
        assert choices(command, "objective") == [o.value for o in Objective]
        assert choices(command, "rule") == [r.value for r in Rule]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpt-4o", "--model 'gpt-4o': expected 'scripted', 'scripted:<profile>' or 'openai:<model-name>'"),
        ("openai:", "--model 'openai:': expected 'scripted', 'scripted:<profile>' or 'openai:<model-name>'"),
        ("scripted:nope", "--model 'scripted:nope': unknown behaviour profile 'nope'; profiles are reference, rewriter,"
                          " sloppy, eager, fabricator, parallel, optimist, dismissive, mocked-path"),
    ],
)  # fmt: skip
def test_the_plan_parses_the_model_once_naming_the_flag(text: str, message: str) -> None:
    """The one parse of a model text, when the settings are made: the spec they hold, or one line naming `--model`,
    its value and the fix."""
    from runners.domain.model_spec import ModelKind
    from runners.plan.settings import RunSettings, SettingsError

    with pytest.raises(SettingsError) as info:
        RunSettings.from_values({"model": text})
    assert str(info.value) == message
    assert ModelSettings(model="scripted:sloppy?seed=2").model.name == "sloppy?seed=2"
    assert ModelSettings(model="openai:m").model.kind is ModelKind.OPENAI
