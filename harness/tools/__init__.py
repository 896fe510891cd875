"""Business tools behind the Harness boundary: `base.py` (what a tool is and what it returns)."""

from harness.tools.base import BusinessTool, ToolExecutionError, ToolInputError, ToolResult

__all__ = ["BusinessTool", "ToolExecutionError", "ToolInputError", "ToolResult"]
