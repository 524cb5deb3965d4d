"""What the agent loop needs from context-window management."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from agent.messages import Message

# A history processor: plain function from messages to messages (truncation, ...).
HistoryProcessor = Callable[[list[Message]], list[Message]]


# A plain frozen dataclass, not a pydantic model: made by the window manager on every step
# from messages that are validated already, and read by the loop; never parsed from outside.
# (pydantic's model_construct cost a tenth of a model call's own agent work.)
@dataclass(frozen=True, slots=True, kw_only=True)
class ContextFit:
    """The messages to send, and what fitting them cost."""

    messages: list[Message]
    tokens: int  # estimated prompt tokens of `messages` (system prompt included)
    budget: int  # tokens available for history: limit - system - response - 10% margin
    context_window: int
    strategy: str  # "none" when nothing had to go
    messages_before: int
    tokens_before: int

    @property
    def trimmed(self) -> bool:
        return len(self.messages) != self.messages_before or self.tokens != self.tokens_before

    @property
    def utilisation(self) -> float:
        return self.tokens / self.context_window if self.context_window else 0.0


@runtime_checkable
class ContextManager(Protocol):
    async def fit(self, system_prompt: str, messages: Sequence[Message]) -> ContextFit:
        """Return the messages that fit the budget (async: summarisation calls a model)."""
        ...

    def record_usage(self, prompt_tokens: int, messages_sent: int) -> None:
        """Cache the exact prompt token count the provider reported for the last request
        covering the first `messages_sent` messages of the history that was fitted."""
        ...
