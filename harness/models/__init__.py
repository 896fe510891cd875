"""Chat-model implementations behind one interface: `base.py` (the `ChatModel` interface the Diagnosis Agent loop
and SemanticGuard call) and `openai_model.py` (any OpenAI-compatible endpoint through the `openai` SDK)."""

from typing import TYPE_CHECKING, Any

from harness.models.base import (
    AssistantMessage,
    ChatMessage,
    ChatModel,
    ChatRequest,
    ModelCallError,
    ModelResponse,
    SystemMessage,
    ToolCallFormat,
    ToolCallRequest,
    ToolMessage,
    ToolSpec,
    Usage,
    UserMessage,
)

if TYPE_CHECKING:
    from harness.models.openai_model import OpenAIChatModel


def __getattr__(name: str) -> Any:
    # OpenAIChatModel is imported on first use: the openai SDK costs ~1 s of start-up that scripted runs
    # (and `harness.models.base`, which every module of the loop imports) never need.
    if name == "OpenAIChatModel":
        from harness.models.openai_model import OpenAIChatModel

        return OpenAIChatModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AssistantMessage",
    "ChatMessage",
    "ChatModel",
    "ChatRequest",
    "ModelCallError",
    "ModelResponse",
    "OpenAIChatModel",
    "SystemMessage",
    "ToolCallFormat",
    "ToolCallRequest",
    "ToolMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
]
