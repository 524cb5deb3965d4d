"""Summarisation: older messages replaced by a summary a model wrote.

When the history no longer fits, the most recent messages are kept verbatim (filling
`keep_ratio` of the budget, so that the next few steps fit without summarising again), the
task stays pinned, and everything older goes to the summariser. Its text comes back as one
user message marked `metadata={"summary": True}`, placed after the task. The next
summarisation receives that summary among the older messages, so summaries roll up.

The split between summarised and kept messages follows the truncation rules, so a tool
call and its results are never separated. A summary longer than planned keeps fewer recent
messages beside it. If the summariser fails, returns nothing, or writes a summary too long
to leave room for even the last exchange, the history is truncated instead: a run must
not die because its context could not be condensed.

The summariser is any `async (messages) -> str`, so this module needs no provider. A
provider-backed one renders the messages with `render_transcript` and sends them after
`SUMMARY_INSTRUCTIONS`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import cache

from agent.context.tokens import estimate_message_tokens
from agent.context.truncation import (
    Counter,
    SizeOf,
    find_task,
    last_unit_start,
    recent_start,
    truncate,
)
from agent.messages import Message

logger = logging.getLogger("agent.context")

Summariser = Callable[[list[Message]], Awaitable[str]]
AsyncHistoryProcessor = Callable[[list[Message]], Awaitable[list[Message]]]

DEFAULT_KEEP_RATIO = 0.5
SUMMARY_HEADER = "Summary of the earlier conversation (condensed to fit the context window):"
SUMMARY_INSTRUCTIONS = (
    "Summarise the conversation below for an assistant that will continue the work without "
    "seeing it. Keep the task, every fact learned from tool results (identifiers, numbers, "
    "failures, errors), the decisions made and why, and what remains to be done. Be concise "
    "and factual; write no preamble."
)


@dataclass(frozen=True, slots=True)
class Compaction:
    """The new head (the task, then the summary) and where the verbatim messages start."""

    head: tuple[Message, ...]
    start: int
    tokens: int


def summary_message(text: str) -> Message:
    return Message.user(f"{SUMMARY_HEADER}\n{text.strip()}", summary=True)


def is_summary(message: Message) -> bool:
    return bool(message.metadata.get("summary"))


def render_transcript(messages: Sequence[Message]) -> str:
    """The messages as plain text, for a summariser's prompt."""
    lines: list[str] = []
    for message in messages:
        if message.role == "tool":
            label = "Tool error" if message.is_error else "Tool result"
            lines.append(f"{label} ({message.name or 'unknown tool'}): {message.content}")
            continue
        if message.content:
            lines.append(f"{message.role.capitalize()}: {message.content}")
        for call in message.tool_calls:
            arguments = json.dumps(call.arguments, ensure_ascii=False)
            lines.append(f"Assistant called {call.name} with {arguments}")
    return "\n".join(lines)


async def compact(
    messages: Sequence[Message],
    budget: int,
    size_of: SizeOf,
    count: Counter,
    summariser: Summariser,
    *,
    keep_ratio: float = DEFAULT_KEEP_RATIO,
    recent_from: int = 0,
) -> Compaction | None:
    """Summarise what is older than the recent messages; None when that cannot help.

    `recent_from` is the earliest index the verbatim part may start at. Exceptions from the
    summariser propagate: the caller decides what to fall back to.
    """
    end = len(messages)
    task = find_task(messages)
    task_tokens = size_of(task) if task is not None else 0
    low = max(recent_from, task + 1 if task is not None else 0)
    recent_budget = max(0, int(budget * keep_ratio) - task_tokens)
    keep_from, _ = recent_start(messages, recent_budget, size_of, low, end)
    if keep_from >= end:
        # Even the last exchange is bigger than the share meant for recent messages; it is
        # still what the model must see next, so it stays verbatim.
        keep_from = last_unit_start(messages, end, low)
    older = list(messages[:keep_from])
    if not any(i != task and not is_summary(m) for i, m in enumerate(older)):
        return None
    text = (await summariser(older)).strip()
    if not text:
        return None
    summary = summary_message(text)
    head = (messages[task], summary) if task is not None else (summary,)
    head_tokens = task_tokens + count(summary)
    start, used = recent_start(messages, budget - head_tokens, size_of, keep_from, end)
    if start >= end:
        return None
    return Compaction(head, start, head_tokens + used)


async def summarize(
    messages: Sequence[Message],
    budget: int,
    count: Counter,
    summariser: Summariser,
    *,
    keep_ratio: float = DEFAULT_KEEP_RATIO,
) -> list[Message]:
    """The messages to send: unchanged if they fit, else summarised (or truncated)."""
    size_of = cache(lambda index: count(messages[index]))
    if sum(size_of(i) for i in range(len(messages))) <= budget:
        return list(messages)
    try:
        compaction = await compact(
            messages, budget, size_of, count, summariser, keep_ratio=keep_ratio
        )
    except Exception:
        logger.warning("summarising the history failed; truncating instead", exc_info=True)
        compaction = None
    if compaction is None:
        return truncate(messages, budget, count)
    return [*compaction.head, *messages[compaction.start :]]


def summarization(
    budget: int,
    summariser: Summariser,
    count: Counter = estimate_message_tokens,
    *,
    keep_ratio: float = DEFAULT_KEEP_RATIO,
) -> AsyncHistoryProcessor:
    """Summarisation as an (async) history processor."""

    async def process(messages: list[Message]) -> list[Message]:
        return await summarize(messages, budget, count, summariser, keep_ratio=keep_ratio)

    return process
