"""Chat-model implementations behind one interface."""

from harness.models.base import (
    AssistantMessage,
    ChatMessage,
    ChatModel,
    ChatRequest,
    ModelCallError,
    ModelResponse,
    SystemMessage,
    ToolCallRequest,
    ToolMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from harness.models.openai_model import OpenAIChatModel
from harness.models.scripted import ScriptedChatModel, Trajectory

__all__ = [
    "AssistantMessage",
    "ChatMessage",
    "ChatModel",
    "ChatRequest",
    "ModelCallError",
    "ModelResponse",
    "OpenAIChatModel",
    "ScriptedChatModel",
    "SystemMessage",
    "ToolCallRequest",
    "ToolMessage",
    "ToolSpec",
    "Trajectory",
    "Usage",
    "UserMessage",
]
