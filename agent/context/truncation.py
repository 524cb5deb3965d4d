"""Truncation: keep the most recent messages that fit, without breaking the conversation.

What a model needs from a shortened history:

- its task: the first user message is kept (pinned) when there is room for it and for at
  least the last exchange after it, because a model that forgot what it was asked drifts;
- the most recent messages, as many as fit, as one contiguous run;
- well-formed tool exchanges: an assistant message that called tools and the results of
  those calls are one indivisible unit, kept or dropped together. Providers reject a tool
  result whose call is missing, so the kept run never starts with a tool message and
  never holds a result whose call was dropped.

When not even the last unit fits, it is kept anyway: a request that is too long fails
loudly at the provider, an empty one would fail with a message nobody could act on.

Messages are walked from the end and only until the budget runs out, so truncating a long
history costs what is kept, not what is dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

from agent.context.protocol import HistoryProcessor
from agent.context.tokens import estimate_message_tokens
from agent.messages import Message

# The token size of the message at an index: lets callers pass cached sizes.
SizeOf = Callable[[int], int]
Counter = Callable[[Message], int]


@dataclass(frozen=True, slots=True)
class Window:
    """Which messages to keep: the pinned task (if any), then everything from `start`."""

    pinned: int | None
    start: int
    tokens: int

    def select(self, messages: Sequence[Message]) -> list[Message]:
        kept = [messages[self.pinned]] if self.pinned is not None else []
        kept.extend(messages[self.start :])
        return kept


def truncate(messages: Sequence[Message], budget: int, count: Counter) -> list[Message]:
    """The messages to send: the task and the most recent messages within `budget` tokens."""
    size_of = cache(lambda index: count(messages[index]))
    return plan_truncation(messages, budget, size_of).select(messages)


def truncation(budget: int, count: Counter = estimate_message_tokens) -> HistoryProcessor:
    """Truncation as a history processor, `list[Message] -> list[Message]`."""

    def process(messages: list[Message]) -> list[Message]:
        return truncate(messages, budget, count)

    return process


def plan_truncation(messages: Sequence[Message], budget: int, size_of: SizeOf) -> Window:
    end = len(messages)
    start, tokens = recent_start(messages, budget, size_of, 0, end)
    if start == 0:
        return Window(None, 0, tokens)
    task = find_task(messages)
    if task is not None and task < start:
        task_tokens = size_of(task)
        if task_tokens <= budget:
            after_task, used = recent_start(messages, budget - task_tokens, size_of, task + 1, end)
            if after_task < end:
                return Window(task, after_task, task_tokens + used)
    if start < end:
        return Window(None, start, tokens)
    last = last_unit_start(messages, end, 0)
    return Window(None, last, sum(size_of(i) for i in range(last, end)))


def recent_start(
    messages: Sequence[Message], budget: int, size_of: SizeOf, low: int, end: int
) -> tuple[int, int]:
    """The earliest unit start `s >= low` such that `messages[s:end]` fits `budget`, and
    their tokens. `s == end` when not even the last unit fits."""
    start, used = end, 0
    while start > low:
        unit = unit_start(messages, start, low)
        if unit is None:
            break
        size = sum(size_of(i) for i in range(unit, start))
        if used + size > budget:
            break
        used += size
        start = unit
    return start, used


def unit_start(messages: Sequence[Message], end: int, low: int) -> int | None:
    """Where the indivisible unit ending just before `end` begins, or None when it cannot
    be kept whole because a call it answers is not in `messages[low:end]`.

    A message is its own unit, except tool results: they belong with the assistant
    message that made their calls, normally the one right before them (in a malformed
    history the unit stretches back to wherever the call is).
    """
    index = end - 1
    if messages[index].role != "tool":
        return index
    # A result without a call id is owned by the nearest assistant message with calls.
    pending: set[str] = set()
    while index >= low and messages[index].role == "tool":
        call_id = messages[index].tool_call_id
        if call_id:
            pending.add(call_id)
        index -= 1
    while index >= low:
        message = messages[index]
        if message.role == "assistant" and message.tool_calls:
            pending.difference_update(call.id for call in message.tool_calls)
            if not pending:
                return index
        elif message.role == "tool" and message.tool_call_id:
            # Stretched over another result: its call must be inside the unit too.
            pending.add(message.tool_call_id)
        index -= 1
    return None


def last_unit_start(messages: Sequence[Message], end: int, low: int) -> int:
    """The start of the last unit, kept even when it is over budget; `end` (keep
    nothing) when the last messages are results whose call is missing."""
    if end <= low:
        return end
    unit = unit_start(messages, end, low)
    return end if unit is None else unit


def find_task(messages: Sequence[Message]) -> int | None:
    """The index of the first user message that is not a summary: the task."""
    for index, message in enumerate(messages):
        if message.role == "user" and not message.metadata.get("summary"):
            return index
    return None
