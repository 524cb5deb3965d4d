"""Truncation: the rules one by one, then properties over many generated histories.

In these tests a message's token size is the length of its content, so that histories
can be written with exact sizes.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from agent.context.truncation import plan_truncation, truncate, truncation
from agent.messages import Message, ToolCall


def size(message: Message) -> int:
    return len(message.content)


def user(n: int = 10, *, summary: bool = False) -> Message:
    if summary:
        return Message.user("s" * n, summary=True)
    return Message.user("u" * n)


def say(n: int = 10) -> Message:
    return Message.assistant("a" * n)


def call(n: int, *ids: str) -> Message:
    return Message.assistant("c" * n, [ToolCall(id=i, name="tool") for i in ids])


def result(call_id: str | None, n: int = 10) -> Message:
    return Message(role="tool", content="r" * n, tool_call_id=call_id, name="tool")


def positions(kept: Sequence[Message], history: Sequence[Message]) -> list[int]:
    """Where each kept message sits in the history (by identity)."""
    index_of = {id(m): i for i, m in enumerate(history)}
    return [index_of[id(m)] for m in kept]


# -- the rules, one by one ------------------------------------------------------------------


def test_everything_is_kept_when_it_fits() -> None:
    history = [user(10), call(5, "a"), result("a", 10), say(5)]
    assert truncate(history, 30, size) == history


def test_the_empty_history_stays_empty() -> None:
    assert truncate([], 100, size) == []


def test_the_most_recent_messages_that_fit_are_kept() -> None:
    history = [say(10), say(10), say(10), say(10)]
    assert positions(truncate(history, 25, size), history) == [2, 3]


@pytest.mark.parametrize(
    ("budget", "expected"),
    [
        (55, [0, 1, 2, 3, 4, 5, 6]),  # everything fits
        (40, [0, 3, 4, 5, 6]),  # the last exchange fits beside the task, the first does not
        (25, [0, 6]),  # half an exchange would fit: none of it is kept
        (10, [6]),  # not even the task fits beside the last message
    ],
)
def test_a_call_and_its_results_are_kept_or_dropped_together(
    budget: int, expected: list[int]
) -> None:
    history = [
        user(10),
        call(5, "a"),
        result("a", 10),
        call(5, "b", "c"),  # parallel calls: one unit with both results
        result("b", 5),
        result("c", 5),
        say(5),
    ]
    assert positions(truncate(history, budget, size), history) == expected


def test_a_cut_that_lands_on_a_result_drops_the_whole_exchange() -> None:
    history = [say(1), call(20, "a"), result("a", 5), result("a2", 5), say(5)]
    history[1] = call(20, "a", "a2")
    kept = truncate(history, 15, size)
    assert positions(kept, history) == [4]
    assert all(m.role != "tool" for m in kept)


def test_the_task_is_pinned_when_there_is_room() -> None:
    history = [user(10), say(50), say(10), say(10)]
    assert positions(truncate(history, 30, size), history) == [0, 2, 3]


def test_the_task_is_not_pinned_when_it_is_too_big() -> None:
    history = [user(100), say(10), say(10)]
    assert positions(truncate(history, 30, size), history) == [1, 2]


def test_recent_messages_win_over_the_task() -> None:
    # With the task pinned, nothing after it would fit: the model needs the latest exchange.
    history = [user(15), say(50), call(5, "a"), result("a", 10)]
    assert positions(truncate(history, 20, size), history) == [2, 3]


def test_the_task_is_the_first_user_message_that_is_not_a_summary() -> None:
    history = [user(5, summary=True), user(5), say(50), say(5)]
    assert positions(truncate(history, 12, size), history) == [1, 3]


def test_the_last_exchange_is_kept_even_over_budget() -> None:
    history = [user(5), call(50, "a"), result("a", 50)]
    assert positions(truncate(history, 20, size), history) == [1, 2]


def test_a_leading_orphan_result_is_dropped_even_when_everything_fits() -> None:
    history = [result("ghost"), user(5), say(5)]
    assert positions(truncate(history, 1000, size), history) == [1, 2]


def test_an_orphan_result_in_the_middle_is_never_kept() -> None:
    history = [user(5), say(5), result("ghost"), say(5), say(5)]
    assert positions(truncate(history, 1000, size), history) == [0, 3, 4]


def test_only_an_orphan_at_the_end_leaves_nothing_to_keep() -> None:
    history = [say(50), result("ghost", 50)]
    assert truncate(history, 10, size) == []


def test_a_result_far_from_its_call_pulls_the_call_in() -> None:
    # Malformed (a message between the call and its result), but never made worse.
    history = [say(5), call(5, "a"), user(5), result("a", 5), say(5)]
    assert positions(truncate(history, 20, size), history) == [1, 2, 3, 4]
    # Without room for the call, the result cannot stay.
    assert positions(truncate(history, 10, size), history) == [2, 4]


def test_results_without_ids_belong_to_the_nearest_call() -> None:
    history = [user(5), say(50), call(5, "x"), result(None, 5)]
    assert positions(truncate(history, 20, size), history) == [0, 2, 3]


def test_the_processor_form_applies_the_same_rules() -> None:
    history = [user(10), say(50), say(10)]
    process = truncation(25, size)
    assert process(history) == truncate(history, 25, size)


def test_the_default_processor_counts_with_the_estimate() -> None:
    history = [Message.user("hello"), Message.assistant("x" * 10_000)]
    assert truncation(100)(history) == [history[1]]  # the last message, kept regardless


def test_truncation_costs_what_is_kept_not_what_is_dropped() -> None:
    history = [user(10)]
    for i in range(5_000):
        history += [call(5, f"c{i}"), result(f"c{i}", 20)]
    calls = 0

    def counting(message: Message) -> int:
        nonlocal calls
        calls += 1
        return size(message)

    kept = truncate(history, 300, counting)
    assert len(kept) == 23  # the task and 11 exchanges of 25 tokens
    assert calls < 3 * len(kept)


def test_the_plan_reports_the_tokens_it_keeps() -> None:
    history = [user(10), say(50), say(10), say(10)]
    plan = plan_truncation(history, 30, lambda i: size(history[i]))
    assert (plan.pinned, plan.start, plan.tokens) == (0, 2, 30)


# -- properties over generated histories ----------------------------------------------------


def random_history(rng: random.Random, *, malformed: bool = False) -> list[Message]:
    """A plausible agent conversation: a task, then replies, tool exchanges (some with
    parallel calls, results in any order, some results missing) and more user turns.
    `malformed` adds what real histories should not hold but stores sometimes do:
    orphan results, results moved away from their call, results without an id."""
    history: list[Message] = []
    if rng.random() < 0.9:
        history.append(user(rng.randint(1, 40)))
    counter = 0
    for _ in range(rng.randint(0, 25)):
        kind = rng.random()
        if kind < 0.5:
            ids = [f"c{counter + k}" for k in range(rng.choice([1, 1, 1, 2, 3]))]
            counter += len(ids)
            history.append(call(rng.randint(1, 20), *ids))
            answered = [i for i in ids if rng.random() < 0.95]
            rng.shuffle(answered)
            history.extend(result(i, rng.randint(1, 60)) for i in answered)
        elif kind < 0.75:
            history.append(say(rng.randint(1, 40)))
        elif kind < 0.95:
            history.append(user(rng.randint(1, 40)))
        else:
            history.append(user(rng.randint(1, 40), summary=True))
    if malformed and history:
        for _ in range(rng.randint(1, 3)):
            where = rng.randint(0, len(history))
            choice = rng.random()
            if choice < 0.4:
                history.insert(where, result(f"ghost{where}", rng.randint(1, 20)))
            elif choice < 0.7:
                tools = [i for i, m in enumerate(history) if m.role == "tool"]
                if tools:
                    moved = history.pop(rng.choice(tools))
                    history.insert(rng.randint(0, len(history)), moved)
            else:
                history.insert(where, result(None, rng.randint(1, 20)))
    return history


def owner(history: Sequence[Message], index: int) -> int | None:
    """The assistant message whose call the result at `index` answers."""
    call_id = history[index].tool_call_id
    for j in range(index - 1, -1, -1):
        message = history[j]
        if message.tool_calls and (
            call_id is None or any(c.id == call_id for c in message.tool_calls)
        ):
            return j
    return None


def reference_truncate(history: Sequence[Message], budget: int) -> list[int]:
    """The rules written as a brute-force search over every possible start."""
    end = len(history)
    owners = {j: owner(history, j) for j, m in enumerate(history) if m.role == "tool"}

    def safe(start: int) -> bool:
        return start == end or (
            history[start].role != "tool"
            and all(o is not None and o >= start for j, o in owners.items() if j >= start)
        )

    def tokens(start: int) -> int:
        return sum(size(m) for m in history[start:])

    def best(low: int, room: int) -> int:
        return next((s for s in range(low, end + 1) if safe(s) and tokens(s) <= room), end)

    first = best(0, budget)
    if first == 0:
        return list(range(end))
    task = next(
        (i for i, m in enumerate(history) if m.role == "user" and not m.metadata.get("summary")),
        None,
    )
    if task is not None and task < first and size(history[task]) <= budget:
        after = best(task + 1, budget - size(history[task]))
        if after < end:
            return [task, *range(after, end)]
    if first < end:
        return list(range(first, end))
    last = next((s for s in range(end - 1, -1, -1) if safe(s)), end)
    return list(range(last, end))


def check_invariants(history: Sequence[Message], kept: Sequence[Message], budget: int) -> None:
    where = positions(kept, history)
    assert where == sorted(where), "order is kept"
    assert len(set(where)) == len(where)
    if kept:
        assert kept[0].role != "tool", "never starts with a tool result"
    kept_set = set(where)
    for position, index in enumerate(where):
        if history[index].role == "tool":
            o = owner(history, index)
            assert o is not None, "a result whose call is missing was kept"
            assert o in kept_set, "a result whose call was dropped was kept"
            assert where.index(o) < position
    for index in where:
        message = history[index]
        if message.role == "assistant" and message.tool_calls:
            answers = [
                j for j, m in enumerate(history) if m.role == "tool" and owner(history, j) == index
            ]
            assert all(j in kept_set for j in answers), "a call was split from its results"
    if sum(size(m) for m in kept) > budget:
        # Only the last unit may exceed the budget, and only alone.
        assert where and where[-1] == len(history) - 1
        assert all(i in where for i in range(where[0], len(history)))


@pytest.mark.parametrize("malformed", [False, True], ids=["well-formed", "malformed"])
def test_truncation_matches_the_rules_on_many_histories(malformed: bool) -> None:
    rng = random.Random(20_240_601 + malformed)
    for _ in range(600):
        history = random_history(rng, malformed=malformed)
        total = sum(size(m) for m in history)
        budget = rng.randint(0, max(1, total + 10))
        kept = truncate(history, budget, size)
        check_invariants(history, kept, budget)
        assert positions(kept, history) == reference_truncate(history, budget)
