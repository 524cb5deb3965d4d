"""Benchmark 2, context management: fitting long histories to the model's budget.

Histories of 100, 1,000 and 10,000 messages made of tool exchanges (an assistant message
calling a tool, the tool's JSON result), with a user message now and then, go through the
agent's context manager (`agent.context.manager.WindowManager`) under a 32k-token window:
100 messages fit, 1,000 and 10,000 must be cut.

- first fit: a manager that has never seen the history fits it (it estimates every
  message once);
- +1 message: after a fit, one message is appended and the history fitted again, which is
  what the loop does before every model call. This must not grow with the history.

Contestants: the `window manager`, and for scale a `stateless truncate` that keeps no
state between calls (`agent.context.truncation.truncate`, re-estimating what it keeps).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence

from agent.context.budget import history_budget
from agent.context.manager import WindowManager
from agent.context.tokens import estimate_message_tokens
from agent.context.truncation import truncate
from agent.messages import Message, ToolCall, ToolResult
from agent.prompts import DEFAULT_SYSTEM_PROMPT
from bench.harness import Context, Result, Stats, interleave

NAME = "context"
CONTEXT_WINDOW = 32_000
RESPONSE_TOKENS = 1024
FIRST_FIT_LIMIT_MS = 5.0
INCREMENTAL_GROWTH_LIMIT = 2.0  # +1 message at the largest size vs the smallest
MANAGER = "window manager"
STATELESS = "stateless truncate"


def history(size: int) -> list[Message]:
    """`size` messages: a task, then tool exchanges, with a user message every 50."""
    messages = [Message.user("Assess the risk of release v2.1.0")]
    index = 0
    while len(messages) < size:
        index += 1
        if index % 25 == 0:
            messages.append(Message.user(f"Also compare with release v2.0.{index}."))
            continue
        call = ToolCall(
            id=f"call_{index}",
            name="get_release_summary",
            arguments={"release_id": f"v2.0.{index}"},
        )
        messages.append(Message.assistant(f"Checking release v2.0.{index}.", [call]))
        if len(messages) == size:
            # A history never ends on a call without its result.
            messages[-1] = Message.assistant(f"Release v2.0.{index} looks fine.")
            break
        summary = {
            "version": f"v2.0.{index}",
            "changes": [f"Change {index}.{n}: adjusted a payment flow" for n in range(4)],
            "tests": {"passed": 140 + index % 7, "failed": index % 3, "skipped": 5},
            "deployment_metrics": {"error_rate": 0.01 * (index % 6), "response_time_p95": 450},
        }
        result = ToolResult(
            tool_call_id=call.id,
            name=call.name,
            content=json.dumps(summary, indent=2),
            success=True,
        )
        messages.append(Message.tool(result))
    return messages[:size]


def _manager() -> WindowManager:
    return WindowManager(CONTEXT_WINDOW, response_tokens=RESPONSE_TOKENS)


def _stateless_budget() -> int:
    """The history budget the manager computes, for the stateless contestant."""
    manager = _manager()
    system = estimate_message_tokens(Message.user(DEFAULT_SYSTEM_PROMPT))
    return history_budget(manager.context_window, system, RESPONSE_TOKENS, manager.margin)


def _timed(action: Callable[[], object]) -> float:
    begin = time.perf_counter()
    action()
    return (time.perf_counter() - begin) * 1000


def _fit(manager: WindowManager, messages: Sequence[Message]) -> None:
    # fit is async only because summarisation calls a model; truncation never awaits, so
    # the coroutine runs to completion in one send.
    coroutine = manager.fit(DEFAULT_SYSTEM_PROMPT, messages)
    try:
        coroutine.send(None)
    except StopIteration:
        return
    coroutine.close()
    raise RuntimeError("the window manager awaited something while truncating")


def first_fit_manager(messages: Sequence[Message], samples: int) -> list[float]:
    return [_timed(lambda: _fit(_manager(), messages)) for _ in range(samples)]


def first_fit_stateless(messages: Sequence[Message], samples: int, budget: int) -> list[float]:
    return [
        _timed(lambda: truncate(messages, budget, estimate_message_tokens)) for _ in range(samples)
    ]


def _extra(index: int) -> Message:
    return Message.assistant(f"Noted finding {index}: the error rate is within bounds.")


def incremental_manager(base: Sequence[Message], samples: int) -> list[float]:
    messages = list(base)
    manager = _manager()
    _fit(manager, messages)
    timings = []
    for index in range(samples):
        messages.append(_extra(index))
        timings.append(_timed(lambda: _fit(manager, messages)))
    return timings


def incremental_stateless(base: Sequence[Message], samples: int, budget: int) -> list[float]:
    messages = list(base)
    truncate(messages, budget, estimate_message_tokens)
    timings = []
    for index in range(samples):
        messages.append(_extra(index))
        timings.append(_timed(lambda: truncate(messages, budget, estimate_message_tokens)))
    return timings


async def run(ctx: Context) -> list[Result]:
    sizes = (100, 1_000, 10_000)
    rounds, warmup, per_round = (4, 1, 5) if ctx.quick else (30, 3, 10)
    budget_s = 5.0 if ctx.quick else 30.0
    budget = _stateless_budget()
    rows: list[Result] = []
    incremental: dict[int, float] = {}
    for size in sizes:
        messages = history(size)
        kept = len(truncate(messages, budget, estimate_message_tokens))

        async def manager_first(messages: list[Message] = messages) -> list[float]:
            return first_fit_manager(messages, per_round)

        async def stateless_first(messages: list[Message] = messages) -> list[float]:
            return first_fit_stateless(messages, per_round, budget)

        async def manager_next(messages: list[Message] = messages) -> list[float]:
            return incremental_manager(messages, per_round)

        async def stateless_next(messages: list[Message] = messages) -> list[float]:
            return incremental_stateless(messages, per_round, budget)

        ctx.say(f"{NAME}: {size:,} messages ({kept} kept), {rounds} interleaved rounds")
        first = await interleave(
            {STATELESS: stateless_first, MANAGER: manager_first},
            rounds=rounds,
            warmup=warmup,
            time_budget_s=budget_s,
            collect_garbage=not ctx.quick,
        )
        following = await interleave(
            {STATELESS: stateless_next, MANAGER: manager_next},
            rounds=rounds,
            warmup=warmup,
            time_budget_s=budget_s,
            collect_garbage=not ctx.quick,
        )
        for label, measured in (("first fit", first), ("+1 message", following)):
            reference = Stats.of(measured.samples[STATELESS]).median
            for name in (STATELESS, MANAGER):
                stats = Stats.of(measured.samples[name])
                row = Result(
                    benchmark=NAME,
                    case=f"{size:,} msgs, {label}",
                    contestant=name,
                    unit="ms",
                    stats=stats,
                    ratio=stats.median / reference if reference > 0 else None,
                )
                if name == MANAGER and label == "first fit":
                    row.extra["messages_kept"] = kept
                if name == MANAGER and label == "first fit" and size == sizes[-1]:
                    row.target = f"<= {FIRST_FIT_LIMIT_MS:g} ms"
                    row.met = stats.median <= FIRST_FIT_LIMIT_MS
                if name == MANAGER and label == "+1 message":
                    incremental[size] = stats.median
                    if size != sizes[0]:
                        growth = stats.median / incremental[sizes[0]]
                        row.target = f"<= {INCREMENTAL_GROWTH_LIMIT:g}x the {sizes[0]}-msg figure"
                        row.met = growth <= INCREMENTAL_GROWTH_LIMIT
                        row.extra["growth_vs_smallest"] = growth
                rows.append(row)
    return rows
