"""The README's library examples run as written (the session loop, the events, both adapters)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from harness import ReleaseOutcome

README = Path(__file__).resolve().parents[2] / "README.md"
_BLOCK = re.compile(r"```python\n# README example: ([\w-]+)\n(.*?)```", re.S)


def _examples() -> dict[str, str]:
    return {name: code for name, code in _BLOCK.findall(README.read_text(encoding="utf-8"))}


def test_the_readme_has_each_example() -> None:
    assert set(_examples()) == {"session", "events", "pydantic-ai", "openai-agents"}


@pytest.mark.parametrize("adapter", [None, "pydantic-ai", "openai-agents"])
def test_the_examples_run_and_release_success(adapter: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    examples = _examples()
    namespace: dict[str, Any] = {"__name__": "readme_example"}
    exec(compile(examples["session"], "README:session", "exec"), namespace)
    assert namespace["result"].decision.outcome is ReleaseOutcome.SUCCESS
    assert namespace["result"].usage.model_calls == 2
    exec(compile(examples["events"], "README:events", "exec"), namespace)
    assert "ran lookup" in capsys.readouterr().out
    if adapter is not None:
        exec(compile(examples[adapter], f"README:{adapter}", "exec"), namespace)
        result = namespace["result"]
        assert result.decision.outcome is ReleaseOutcome.SUCCESS and result.usage.tool_invocations == 1
