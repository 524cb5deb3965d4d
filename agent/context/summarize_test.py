"""Summarisation as a pure (async) function; sizes are content lengths, as in truncation."""

from __future__ import annotations

import pytest

from agent.context.summarize import (
    SUMMARY_HEADER,
    compact,
    is_summary,
    render_transcript,
    summarization,
    summarize,
    summary_message,
)
from agent.context.truncation import truncate
from agent.context.truncation_test import call, positions, result, say, size, user
from agent.messages import Message, ToolCall


class Summariser:
    def __init__(self, text: str = "gist", *, error: Exception | None = None) -> None:
        self.text = text
        self.error = error
        self.calls: list[list[Message]] = []

    async def __call__(self, messages: list[Message]) -> str:
        self.calls.append(messages)
        if self.error is not None:
            raise self.error
        return self.text


def history() -> list[Message]:
    # 225 tokens; the last two (70) fill the recent half of a 200 budget.
    return [user(10), call(5, "a"), result("a", 40), say(60), say(40), say(40), say(30)]


async def test_a_history_that_fits_is_not_summarised() -> None:
    summariser = Summariser()
    messages = history()
    assert await summarize(messages, 225, size, summariser) == messages
    assert summariser.calls == []


async def test_older_messages_become_one_summary_after_the_task() -> None:
    summariser = Summariser("g" * 10)
    messages = history()
    kept = await summarize(messages, 200, size, summariser)
    assert kept[0] is messages[0]
    assert kept[1] == summary_message("g" * 10).model_copy(update={"timestamp": kept[1].timestamp})
    assert is_summary(kept[1])
    assert positions(kept[2:], messages) == [5, 6]
    assert summariser.calls == [messages[:5]]


@pytest.mark.parametrize("keep_ratio", [0.2, 0.5, 0.9])
async def test_the_split_never_separates_a_call_from_its_results(keep_ratio: float) -> None:
    messages = [user(10), say(30), call(5, "a", "b"), result("a", 30), result("b", 30), say(5)]
    summariser = Summariser("g")
    kept = await summarize(messages, 100, size, summariser, keep_ratio=keep_ratio)
    older, verbatim = summariser.calls[0], kept[2:]
    assert older == messages[: len(older)]
    assert verbatim == messages[len(messages) - len(verbatim) :]
    assert len(older) + len(verbatim) <= len(messages)
    assert not verbatim or verbatim[0].role != "tool"
    assert older[-1].role != "assistant" or not older[-1].tool_calls


async def test_without_a_task_the_summary_comes_first() -> None:
    messages = [say(60), say(60), say(60), say(30)]
    kept = await summarize(messages, 150, size, Summariser("g"))
    assert is_summary(kept[0])
    assert positions(kept[1:], messages) == [3]


async def test_an_oversized_last_exchange_is_kept_verbatim() -> None:
    # Bigger than the recent half of the budget, but it fits beside the summary.
    messages = [user(10), say(50), say(50), call(5, "a"), result("a", 100)]
    summariser = Summariser("g")
    kept = await summarize(messages, 200, size, summariser)
    assert summariser.calls == [messages[:3]]
    assert positions(kept[2:], messages) == [3, 4]


@pytest.mark.parametrize(
    "summariser",
    [Summariser(error=RuntimeError("down")), Summariser("   "), Summariser("g" * 500)],
    ids=["raises", "blank", "too long"],
)
async def test_when_summarising_cannot_help_the_history_is_truncated(
    summariser: Summariser,
) -> None:
    messages = history()
    assert await summarize(messages, 200, size, summariser) == truncate(messages, 200, size)


async def test_nothing_but_the_task_and_a_summary_is_not_summarised_again() -> None:
    messages = [user(10), summary_message("s" * 100), say(150)]
    summariser = Summariser()
    kept = await summarize(messages, 180, size, summariser)
    assert summariser.calls == []
    assert kept == truncate(messages, 180, size)


async def test_compact_returns_where_the_verbatim_part_starts() -> None:
    messages = history()
    compaction = await compact(
        messages, 200, lambda i: size(messages[i]), size, Summariser("g" * 10)
    )
    assert compaction is not None
    assert compaction.start == 5
    assert compaction.tokens == 10 + len(SUMMARY_HEADER) + 11 + 70


async def test_the_processor_form_summarises_too() -> None:
    messages = history()
    process = summarization(200, Summariser("g"), size)
    kept = await process(messages)
    assert is_summary(kept[1])


def test_a_transcript_shows_calls_results_and_errors() -> None:
    messages = [
        Message.user("Assess v1"),
        Message.assistant("Looking.", [ToolCall(id="c1", name="get", arguments={"id": "v1"})]),
        Message(role="tool", content="{}", tool_call_id="c1", name="get"),
        Message(role="tool", content="boom", tool_call_id="c2", is_error=True),
    ]
    assert render_transcript(messages).splitlines() == [
        "User: Assess v1",
        "Assistant: Looking.",
        'Assistant called get with {"id": "v1"}',
        "Tool result (get): {}",
        "Tool error (unknown tool): boom",
    ]
