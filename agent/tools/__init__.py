"""Tools the model can call: the registry, the `@tool` decorator, the release tools."""

from agent.tools.decorator import Tool, tool
from agent.tools.drilldown import DrillDownTools, register_drill_down_tools
from agent.tools.protocol import ToolExecutor
from agent.tools.registry import (
    ToolDefinitionError,
    ToolOutcome,
    ToolRegistry,
    format_tools,
)
from agent.tools.release_tools import ReleaseTools, register_release_tools

__all__ = [
    "DrillDownTools",
    "ReleaseTools",
    "Tool",
    "ToolDefinitionError",
    "ToolExecutor",
    "ToolOutcome",
    "ToolRegistry",
    "format_tools",
    "register_drill_down_tools",
    "register_release_tools",
    "tool",
]
