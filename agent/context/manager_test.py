"""The window manager: budget, exact-count caching, sticky trimming, both strategies.

Most tests size messages by the length of their content (the `size` estimator) and use
no margin, no reserved response and no system prompt, so that the budget is the window.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from agent.context.budget import history_budget
from agent.context.manager import WindowManager
from agent.context.protocol import ContextManager
from agent.context.summarize import summary_message
from agent.context.tokens import estimate_message_tokens, estimate_text_tokens
from agent.context.truncation import truncate
from agent.context.truncation_test import (
    call,
    check_invariants,
    positions,
    random_history,
    result,
    say,
    size,
    user,
)
from agent.errors import ConfigurationError
from agent.messages import Message


class CountingEstimator:
    """The `size` estimator, remembering which messages it was asked about."""

    def __init__(self) -> None:
        self.seen: list[Message] = []

    def __call__(self, message: Message) -> int:
        self.seen.append(message)
        return size(message)


def manager(window: int, **options: object) -> WindowManager:
    options = {"response_tokens": 0, "margin": 0.0, "estimator": size, **options}
    return WindowManager(window, **options)  # type: ignore[arg-type]


def exchanges(count: int, *, result_size: int = 20) -> list[Message]:
    history = [user(10)]
    for i in range(count):
        history += [call(5, f"c{i}"), result(f"c{i}", result_size)]
    return history


def test_it_is_a_context_manager() -> None:
    assert isinstance(WindowManager(8192), ContextManager)


async def test_a_history_that_fits_is_sent_whole() -> None:
    history = [user(10), call(5, "a"), result("a", 10)]
    fit = await manager(100).fit("", history)
    assert fit.messages == history
    assert (fit.tokens, fit.budget, fit.strategy, fit.trimmed) == (25, 100, "none", False)
    assert fit.messages_before == 3
    assert fit.utilisation == pytest.approx(0.25)


async def test_the_budget_sets_aside_system_prompt_response_and_margin() -> None:
    system = "You are a careful release reviewer." * 10
    fit = await WindowManager(8192, response_tokens=1000).fit(system, [Message.user("hi")])
    system_tokens = estimate_text_tokens(system) + 4
    assert fit.budget == history_budget(8192, system_tokens, 1000)
    assert fit.tokens == system_tokens + estimate_message_tokens(Message.user("hi"))
    assert fit.context_window == 8192


async def test_the_exact_count_is_used_plus_an_estimate_for_new_messages() -> None:
    context = manager(10_000)
    history = [user(10), say(20)]
    first = await context.fit("", history)
    context.record_usage(500, len(first.messages))
    history.append(user(7))
    fit = await context.fit("", history)
    assert fit.tokens == 500 + 7


async def test_without_new_messages_the_exact_count_is_the_count() -> None:
    context = manager(10_000)
    history = [user(10)]
    await context.fit("", history)
    context.record_usage(321, 1)
    assert (await context.fit("", history)).tokens == 321


@pytest.mark.parametrize(
    ("prompt_tokens", "messages_sent", "expected"),
    [
        (0, 2, 30 + 7),  # a provider that reports nothing: keep estimating
        (-5, 2, 30 + 7),
        (500, 3, 30 + 7),  # more messages than were sent: not this fit's count
        (500, 1, 500 + 20 + 7),  # part of the request: the rest is estimated
    ],
)
async def test_reported_counts_that_do_not_describe_the_request_are_handled(
    prompt_tokens: int, messages_sent: int, expected: int
) -> None:
    context = manager(10_000)
    history = [user(10), say(20)]
    await context.fit("", history)
    context.record_usage(prompt_tokens, messages_sent)
    history.append(user(7))
    assert (await context.fit("", history)).tokens == expected


def test_usage_before_any_fit_is_ignored() -> None:
    context = manager(100)
    context.record_usage(50, 1)  # nothing to attach it to, and no error


async def test_a_new_system_prompt_voids_the_exact_count() -> None:
    context = WindowManager(10_000, estimator=size)
    history = [user(10)]
    first = await context.fit("first prompt", history)
    context.record_usage(first.tokens + 20, 1)  # 20 tokens of tool definitions
    fit = await context.fit("a different prompt", history)
    # The new prompt is estimated; what the estimate missed last time is still counted.
    assert fit.tokens == estimate_text_tokens("a different prompt") + 4 + 20 + 10


async def test_only_new_messages_are_ever_estimated() -> None:
    estimator = CountingEstimator()
    context = manager(1_000, estimator=estimator)
    history = exchanges(5_000)
    fit = await context.fit("", history)
    # A first fit measures from the end, and only as far back as it must.
    assert len(estimator.seen) < 2 * len(fit.messages)
    assert len({id(m) for m in estimator.seen}) == len(estimator.seen)
    assert fit.strategy == "truncation"
    context.record_usage(fit.tokens, len(fit.messages))

    for step in range(3):
        estimator.seen.clear()
        new = [call(5, f"n{step}"), result(f"n{step}", 20)]
        history += new
        fit = await context.fit("", history)
        # The new messages, once each: not the 10,000 before them, trim or no trim.
        assert estimator.seen == new
        context.record_usage(fit.tokens, len(fit.messages))


async def test_a_changed_history_is_counted_afresh() -> None:
    estimator = CountingEstimator()
    context = manager(1_000, estimator=estimator)
    await context.fit("", [user(10), say(10)])
    other = [user(12), say(10), say(3)]
    fit = await context.fit("", other)
    assert sorted(map(id, estimator.seen[2:])) == sorted(map(id, other))
    assert fit.tokens == 25


async def test_equal_but_rebuilt_messages_are_still_recognised() -> None:
    estimator = CountingEstimator()
    context = manager(1_000, estimator=estimator)
    history = [user(10), say(10)]
    await context.fit("", history)
    copies = [m.model_copy() for m in history]
    await context.fit("", [*copies, say(1)])
    assert len(estimator.seen) == 3


@pytest.mark.parametrize("seed", range(4))
async def test_a_first_fit_trims_exactly_as_truncate_does(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(150):
        history = random_history(rng, malformed=seed % 2 == 1)
        total = sum(size(m) for m in history)
        budget = rng.randint(1, max(1, total + 10))
        fit = await manager(budget).fit("", history)
        if total <= budget:
            assert fit.messages == history
        else:
            assert positions(fit.messages, history) == positions(
                truncate(history, budget, size), history
            )


async def test_the_task_stays_pinned_while_the_conversation_grows() -> None:
    context = manager(200)
    history = exchanges(3)
    for i in range(30):
        history += [call(5, f"x{i}"), result(f"x{i}", 20)]
        fit = await context.fit("", history)
        context.record_usage(fit.tokens, len(fit.messages))
        assert fit.messages[0] is history[0]
        assert fit.tokens <= 200


async def test_a_trimmed_window_is_kept_and_only_new_messages_are_added() -> None:
    context = manager(100)
    history = [user(10), say(40), say(40), say(30)]
    first = await context.fit("", history)
    assert positions(first.messages, history) == [0, 2, 3]
    assert first.trimmed
    history.append(say(5))
    fit = await context.fit("", history)
    assert positions(fit.messages, history) == [0, 2, 3, 4]
    assert (fit.strategy, fit.trimmed, fit.messages_before) == ("none", False, 4)


async def test_a_first_fit_extrapolates_the_size_of_what_it_never_measured() -> None:
    estimator = CountingEstimator()
    history = [say(10) for _ in range(1_000)]
    fit = await manager(100, estimator=estimator).fit("", history)
    assert len(fit.messages) == 10
    assert len(estimator.seen) == 11
    assert (fit.messages_before, fit.tokens_before, fit.tokens) == (1_000, 10_000, 100)


async def test_a_trim_reports_what_it_dropped() -> None:
    context = manager(100)
    history = [user(10), say(40), say(40), say(30)]
    fit = await context.fit("", history)
    assert (fit.messages_before, len(fit.messages)) == (4, 3)
    assert (fit.tokens_before, fit.tokens) == (120, 80)
    assert fit.strategy == "truncation"


async def test_tokens_the_estimate_missed_are_carried_after_a_trim() -> None:
    context = manager(1_000)
    history = [user(10), say(400)]
    fit = await context.fit("", history)
    # The provider counted 90 more than the estimate: tool definitions, framing.
    context.record_usage(fit.tokens + 90, len(fit.messages))
    history += [say(400), say(150)]
    fit = await context.fit("", history)
    assert fit.tokens_before == 500 + 400 + 150
    assert positions(fit.messages, history) == [0, 2, 3]
    assert fit.tokens == 90 + 10 + 400 + 150
    assert fit.tokens <= fit.budget


async def test_a_pinned_task_gives_way_when_the_last_exchange_needs_its_room() -> None:
    context = manager(100)
    history = [user(30), say(80), say(30)]
    fit = await context.fit("", history)
    assert positions(fit.messages, history) == [0, 2]
    history.append(call(10, "a"))
    history.append(result("a", 70))
    fit = await context.fit("", history)
    assert positions(fit.messages, history) == [3, 4]


async def test_the_last_exchange_is_sent_even_when_it_alone_is_too_big() -> None:
    context = manager(50)
    history = [user(10), call(5, "a"), result("a", 200)]
    fit = await context.fit("", history)
    assert positions(fit.messages, history) == [1, 2]


async def test_the_last_exchange_is_found_behind_a_malformed_result() -> None:
    context = manager(10)
    # A user message between a call and its result: the unit stretches back to the call.
    history = [say(5), call(5, "a"), user(5), result("a", 50)]
    fit = await context.fit("", history)
    assert positions(fit.messages, history) == positions(truncate(history, 10, size), history)


async def test_growing_histories_keep_every_tool_pair_rule() -> None:
    rng = random.Random(7)
    for _ in range(40):
        malformed = rng.random() < 0.3
        full = random_history(rng, malformed=malformed)
        budget = rng.randint(20, 200)
        context = manager(budget)
        for end in range(1, len(full) + 1):
            history = full[:end]
            fit = await context.fit("", history)
            # A window that fits is sent as it is: only trimming is held to the rules
            # for malformed histories, and it must never make them worse.
            if fit.strategy != "none" or not malformed:
                check_invariants(history, fit.messages, budget)
            if rng.random() < 0.7:
                context.record_usage(fit.tokens + rng.randint(0, 5), len(fit.messages))


# -- summarisation --------------------------------------------------------------------------


class FakeSummariser:
    def __init__(self, text: str = "the gist", *, fail: bool = False) -> None:
        self.text = text
        self.fail = fail
        self.calls: list[list[Message]] = []

    async def __call__(self, messages: list[Message]) -> str:
        self.calls.append(messages)
        if self.fail:
            raise RuntimeError("model unavailable")
        return self.text


SUMMARY = summary_message("g" * 10)


def summarising(summariser: FakeSummariser) -> WindowManager:
    return manager(200, strategy="summarization", summariser=summariser)


def long_history() -> list[Message]:
    """225 tokens for a 200 budget: the last two messages fill the recent half."""
    return [user(10), call(5, "a"), result("a", 40), say(60), say(40), say(40), say(30)]


async def test_summarisation_replaces_older_messages_with_a_summary() -> None:
    summariser = FakeSummariser("g" * 10)
    history = long_history()
    fit = await summarising(summariser).fit("", history)
    task, summary, *rest = fit.messages
    assert task is history[0]
    assert summary.role == "user" and summary.metadata == {"summary": True}
    assert summary.content == SUMMARY.content
    assert positions(rest, history) == [5, 6]
    assert summariser.calls == [history[:5]]
    assert fit.strategy == "summarization"
    assert fit.tokens == 10 + size(SUMMARY) + 70


async def test_summaries_roll_up_and_are_not_rewritten_while_they_fit() -> None:
    summariser = FakeSummariser("g" * 10)
    context = summarising(summariser)
    history = long_history()
    first = await context.fit("", history)
    history.append(say(20))
    second = await context.fit("", history)
    assert len(summariser.calls) == 1
    assert second.messages == [*first.messages, history[-1]]
    history.append(say(60))
    third = await context.fit("", history)
    assert len(summariser.calls) == 2
    # The earlier summary is summarised again with what followed it.
    assert summariser.calls[1] == [*first.messages[:2], history[5], history[6]]
    assert positions(third.messages[2:], history) == [7, 8]


@pytest.mark.parametrize(
    "summariser",
    [FakeSummariser(fail=True), FakeSummariser(""), FakeSummariser("g" * 500)],
    ids=["fails", "empty", "too long"],
)
async def test_summarisation_falls_back_to_truncation(summariser: FakeSummariser) -> None:
    history = long_history()
    fit = await summarising(summariser).fit("", history)
    assert positions(fit.messages, history) == positions(truncate(history, 200, size), history)


async def test_a_summary_gives_way_to_recent_messages_when_truncating() -> None:
    summariser = FakeSummariser("g" * 10)
    context = summarising(summariser)
    history = long_history()
    await context.fit("", history)
    summariser.fail = True
    history.append(say(150))
    fit = await context.fit("", history)
    assert positions(fit.messages, history) == [0, 6, 7]


async def test_summarisation_never_splits_a_tool_pair() -> None:
    rng = random.Random(11)
    for _ in range(60):
        full = random_history(rng)
        budget = rng.randint(40, 200)
        context = manager(budget, strategy="summarization", summariser=FakeSummariser("g"))
        for end in range(1, len(full) + 1):
            history = full[:end]
            fit = await context.fit("", history)
            sent = [m for m in fit.messages if not m.metadata.get("summary")]
            check_invariants(history, sent, budget)


# -- construction ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {"context_window": 0},
        {"strategy": "importance"},
        {"strategy": "summarization"},
    ],
)
def test_bad_configurations_are_refused(options: dict[str, object]) -> None:
    arguments: dict[str, object] = {"context_window": 8192, **options}
    with pytest.raises(ConfigurationError):
        WindowManager(**arguments)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("model", "override", "window"),
    [("claude-sonnet-4-5", None, 200_000), ("qwen2.5:7b", None, 32_768), ("x", 4096, 4096)],
)
def test_a_manager_can_be_sized_by_model(model: str, override: int | None, window: int) -> None:
    assert WindowManager.for_model(model, context_window=override).context_window == window


async def test_reset_forgets_the_window() -> None:
    context = manager(100)
    history: Sequence[Message] = [user(10), say(95)]
    await context.fit("", history)
    context.reset()
    fit = await manager(1_000).fit("", history)
    assert fit.messages == list(history)


async def test_a_pinned_task_is_dropped_when_measured_overhead_leaves_no_room() -> None:
    context = manager(100)
    history = [user(30), say(80), say(30)]
    fit = await context.fit("", history)
    assert positions(fit.messages, history) == [0, 2]
    context.record_usage(fit.tokens + 75, len(fit.messages))  # big tool definitions
    history.append(say(5))
    fit = await context.fit("", history)
    assert positions(fit.messages, history) == [3]
    assert fit.tokens == 75 + 5
