"""The library page's examples run as written (the session loop, the events, both adapters): docs/library.md."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from harness import ReleaseOutcome

PAGE = Path(__file__).resolve().parents[2] / "docs" / "library.md"
_BLOCK = re.compile(r"```python\n# example: ([\w-]+)\n(.*?)```", re.S)


def _examples() -> dict[str, str]:
    return {name: code for name, code in _BLOCK.findall(PAGE.read_text(encoding="utf-8"))}


def test_the_page_has_each_example() -> None:
    assert set(_examples()) == {"session", "events", "pydantic-ai", "openai-agents"}


@pytest.mark.parametrize("adapter", [None, "pydantic-ai", "openai-agents"])
def test_the_examples_run_and_release_success(adapter: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    examples = _examples()
    namespace: dict[str, Any] = {"__name__": "doc_example"}
    exec(compile(examples["session"], "library.md:session", "exec"), namespace)
    assert namespace["result"].decision.outcome is ReleaseOutcome.SUCCESS
    assert namespace["result"].usage.model_calls == 2
    exec(compile(examples["events"], "library.md:events", "exec"), namespace)
    assert "ran lookup" in capsys.readouterr().out
    if adapter is not None:
        exec(compile(examples[adapter], f"library.md:{adapter}", "exec"), namespace)
        result = namespace["result"]
        assert result.decision.outcome is ReleaseOutcome.SUCCESS and result.usage.tool_invocations == 1
