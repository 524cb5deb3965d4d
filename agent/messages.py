"""The conversation's data: messages, tool calls and results, usage.

Every model here round-trips through JSON without loss (`model_dump(mode="json")` then
`model_validate`), because the CLI saves conversations to files and the Django side stores
them in the database.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["user", "assistant", "system", "tool"]


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id(prefix: str = "") -> str:
    return f"{prefix}{uuid.uuid4().hex}"


class ToolCall(BaseModel):
    """The model asking for one tool to be run."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    timestamp: datetime = Field(default_factory=utcnow)


class ToolResult(BaseModel):
    """What running a tool produced. A failure is a result too, never an exception."""

    model_config = ConfigDict(frozen=True)

    tool_call_id: str
    name: str
    content: str
    success: bool
    duration_ms: float = 0.0
    # "ToolNotFoundError", "InvalidArgumentsError", "ToolExecutionError", "ToolTimeoutError"
    error_type: str | None = None
    # Structured outcome for the agent's own bookkeeping (e.g. the filed report).
    data: dict[str, Any] | None = None
    # True when this result ends the run (filing the risk report does).
    terminal: bool = False
    timestamp: datetime = Field(default_factory=utcnow)
    metadata: dict[str, Any] = Field(default_factory=dict)


class Usage(BaseModel):
    """Tokens of one model call, or a sum of several."""

    model_config = ConfigDict(frozen=True)

    input_tokens: int = 0
    output_tokens: int = 0
    # Prompt tokens served from the provider's cache, where the provider reports them.
    cached_input_tokens: int | None = None

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        cached: int | None = None
        if self.cached_input_tokens is not None or other.cached_input_tokens is not None:
            cached = (self.cached_input_tokens or 0) + (other.cached_input_tokens or 0)
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=cached,
        )


class Message(BaseModel):
    """One message of a conversation.

    - user / system: `content`.
    - assistant: `content` (may be empty) and `tool_calls`.
    - tool: `content` is the tool's output, `tool_call_id` links it to its call,
      `name` is the tool's name, `is_error` marks a failed tool run.
    """

    model_config = ConfigDict(frozen=True)

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    timestamp: datetime = Field(default_factory=utcnow)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def user(cls, content: str, **metadata: Any) -> Message:
        return cls(role="user", content=content, metadata=metadata)

    @classmethod
    def assistant(
        cls,
        content: str = "",
        tool_calls: list[ToolCall] | None = None,
        **metadata: Any,
    ) -> Message:
        return cls(
            role="assistant",
            content=content,
            tool_calls=tool_calls or [],
            metadata=metadata,
        )

    @classmethod
    def tool(cls, result: ToolResult) -> Message:
        return cls(
            role="tool",
            content=result.content,
            tool_call_id=result.tool_call_id,
            name=result.name,
            is_error=not result.success,
        )


class ToolDefinition(BaseModel):
    """A tool as the model sees it: name, description, JSON schema of the arguments.

    The handler lives in the tool registry, so that a definition stays plain data.
    """

    model_config = ConfigDict(frozen=True)

    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    description: str
    parameters: dict[str, Any]


class Conversation(BaseModel):
    """All the state needed to resume a dialogue."""

    id: str = Field(default_factory=lambda: new_id("conv_"))
    system_prompt: str = ""
    messages: list[Message] = Field(default_factory=list)
    created_at: datetime = Field(default_factory=utcnow)
    # provider, model, trace_id, release_id, totals...
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def trace_id(self) -> str | None:
        value = self.metadata.get("trace_id")
        return str(value) if value else None
