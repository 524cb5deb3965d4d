"""The one interface every model provider implements."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from agent.messages import Message, ToolDefinition, Usage


class ProviderCapabilities(BaseModel):
    model_config = ConfigDict(frozen=True)

    tools: bool = True
    streaming: bool = True
    vision: bool = False
    context_window: int = 8192
    max_output_tokens: int = 4096


class ModelRequest(BaseModel):
    """Everything one model call needs. The system prompt is kept apart from the messages
    because some APIs (Anthropic) take it separately."""

    model_config = ConfigDict(frozen=True)

    system: str = ""
    messages: list[Message]
    tools: list[ToolDefinition] = Field(default_factory=list)
    temperature: float | None = None
    max_tokens: int = 1024


class ModelResponse(BaseModel):
    """A finished model call: the assistant message and what it cost."""

    model_config = ConfigDict(frozen=True)

    message: Message
    usage: Usage = Field(default_factory=Usage)
    # Normalised: "stop", "tool_calls", "length", "error", or the provider's own word.
    finish_reason: str | None = None
    model: str | None = None
    request_id: str | None = None


# Stream events: what `Provider.stream` yields. Deltas first, then exactly one StreamEnd
# carrying the assembled response (tool calls complete, arguments parsed).


class StreamTextDelta(BaseModel):
    model_config = ConfigDict(frozen=True)

    type: Literal["text_delta"] = "text_delta"
    text: str


class StreamToolCallDelta(BaseModel):
    """A piece of a tool call as it arrives. `arguments_fragment` is raw JSON text."""

    model_config = ConfigDict(frozen=True)

    type: Literal["tool_call_delta"] = "tool_call_delta"
    index: int
    id: str | None = None
    name: str | None = None
    arguments_fragment: str = ""


class StreamRetry(BaseModel):
    """Yielded by the retrying wrapper between attempts, never by an adapter."""

    model_config = ConfigDict(frozen=True)

    type: Literal["retry"] = "retry"
    attempt: int
    max_attempts: int
    delay_s: float
    reason: str
    error_type: str
    partial_discarded: bool = False


class StreamEnd(BaseModel):
    model_config = ConfigDict(frozen=True)

    type: Literal["end"] = "end"
    response: ModelResponse


StreamEvent = StreamTextDelta | StreamToolCallDelta | StreamRetry | StreamEnd


@runtime_checkable
class Provider(Protocol):
    """A model provider. Adapters translate to and from their API's wire format and raise
    only errors from `agent.errors`."""

    @property
    def name(self) -> str:
        """ "anthropic", "openai", "openrouter", "ollama", "local"..."""
        ...

    @property
    def model(self) -> str: ...

    async def complete(self, request: ModelRequest) -> ModelResponse: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Yield text and tool-call deltas as they arrive, then one StreamEnd."""
        ...

    def estimate_tokens(self, messages: Sequence[Message], system: str = "") -> int: ...

    def capabilities(self) -> ProviderCapabilities: ...

    async def aclose(self) -> None: ...
