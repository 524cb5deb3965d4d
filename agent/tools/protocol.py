"""What the agent loop needs from its tools."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from agent.messages import ToolCall, ToolDefinition, ToolResult


@runtime_checkable
class ToolExecutor(Protocol):
    """The registry as the loop sees it. `execute` never raises for a tool's failure:
    unknown tool, invalid arguments, a handler exception and a timeout all come back as a
    ToolResult with success=False and a message the model can act on."""

    def get_tools(self) -> list[ToolDefinition]: ...

    def format_for_provider(self, provider: str) -> list[dict[str, Any]]: ...

    async def execute(self, call: ToolCall) -> ToolResult: ...
