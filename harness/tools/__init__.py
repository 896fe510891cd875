"""Business tools behind the Harness boundary."""

from harness.tools.base import BusinessTool, ToolExecutionError, ToolInputError, ToolResult

__all__ = ["BusinessTool", "ToolExecutionError", "ToolInputError", "ToolResult"]
