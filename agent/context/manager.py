"""The context manager the agent loop uses: fit the history to the budget before each call.

Counting (seed 003): after each model call the loop reports the exact prompt token count
the provider measured (`record_usage`). The next `fit` counts that exact figure plus an
estimate for the messages added since, so the estimation error is bounded by the new
messages, not by the whole conversation.

Cost: each message is estimated at most once and kept in prefix sums, along with what the
truncation rules need to know about it (who made the call a tool result answers). A fit
after new messages costs what is new, plus, when something must go, a binary search for
the new start: never a walk over the whole history. A first fit of a long history that
does not fit measures messages from the end only until the budget is spent; the older
ones are never estimated at all.

The window is sticky. Once messages have been dropped (or summarised), later fits start
from that window plus the new messages rather than from the whole history again: the
model is not shown messages it has already lost, a summary is not rewritten each step, and
providers' prompt caches keep hitting while nothing new has to go. A fit trims only when
that window no longer fits; `ContextFit.messages_before` / `tokens_before` describe the
window it started from, so `trimmed` is true exactly when this fit dropped something.

After a trim the exact count no longer describes what is sent; until the provider reports
again, estimates carry the part of the last exact count they did not explain (tool
definitions, the provider's message framing), never less than zero.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agent.context.budget import SAFETY_MARGIN, history_budget
from agent.context.limits import context_window_for
from agent.context.protocol import ContextFit
from agent.context.summarize import DEFAULT_KEEP_RATIO, Summariser, compact, is_summary
from agent.context.tokens import (
    MESSAGE_OVERHEAD_TOKENS,
    estimate_message_tokens,
    estimate_text_tokens,
)
from agent.context.truncation import plan_truncation
from agent.errors import ConfigurationError
from agent.messages import Message

logger = logging.getLogger("agent.context")

Strategy = Literal["truncation", "summarization"]
STRATEGIES: tuple[Strategy, ...] = ("truncation", "summarization")
DEFAULT_RESPONSE_TOKENS = 4096


@dataclass(frozen=True, slots=True, eq=False)
class _Window:
    """What is sent: `head` (the pinned task, a summary) then history[start:]."""

    head: tuple[Message, ...] = ()
    head_tokens: tuple[int, ...] = ()
    start: int = 0


@dataclass(frozen=True, slots=True)
class _Exact:
    """A provider's prompt count: system, tools, window.head and history[start:end]."""

    tokens: int
    window: _Window
    end: int
    system_prompt: str
    system_tokens: int


class _History:
    """What the manager remembers about each message of the history, from `base` on.

    Messages before `base` were dropped by a first fit before they ever had to be counted.
    """

    def __init__(self, base: int = 0) -> None:
        self.base = base
        self.prefix: list[int] = [0]  # prefix[i]: estimated tokens of messages[base:base + i]
        self.first: Message | None = None
        self.last: Message | None = None
        self.users: list[int] = []  # indices of the user messages, for the task
        # Tool-pair bookkeeping. In a well-formed history a result follows its call's
        # assistant message, and any non-tool message is a safe place to start. A result
        # far from its call (or with no call at all) makes every start between the two
        # unsafe: those stretches are kept in `unsafe`, usually empty.
        self.caller_of: dict[str, int] = {}
        self.last_caller: int | None = None
        self.last_non_tool = base - 1
        self.unsafe: list[tuple[int, int]] = []

    @property
    def end(self) -> int:
        return self.base + len(self.prefix) - 1

    @property
    def empty(self) -> bool:
        return len(self.prefix) == 1

    def matches(self, messages: Sequence[Message]) -> bool:
        return self.empty or (
            len(messages) >= self.end
            and _same(messages[self.base], self.first)
            and _same(messages[self.end - 1], self.last)
        )

    def extend(
        self,
        messages: Sequence[Message],
        estimate: Callable[[Message], int],
        known: dict[int, int] | None = None,
    ) -> None:
        """Learn messages[self.end:], using the sizes already `known` by index."""
        prefix = self.prefix
        total = prefix[-1]
        known = known or {}
        for index in range(self.end, len(messages)):
            message = messages[index]
            size = known.get(index)
            total += estimate(message) if size is None else size
            prefix.append(total)
            role = message.role
            if role == "tool":
                self._note_result(index, message.tool_call_id)
                continue
            self.last_non_tool = index
            if role == "user" and not is_summary(message):
                self.users.append(index)
            elif role == "assistant" and message.tool_calls:
                self.last_caller = index
                for call in message.tool_calls:
                    self.caller_of[call.id] = index
        if not self.empty:
            self.first = messages[self.base]
            self.last = messages[self.end - 1]

    def _note_result(self, index: int, call_id: str | None) -> None:
        caller = self.caller_of.get(call_id, -1) if call_id else self.last_caller
        if caller is None:
            caller = -1
        if caller != self.last_non_tool:
            self.unsafe.append((caller, index))

    def tokens(self, start: int, end: int) -> int:
        return self.prefix[end - self.base] - self.prefix[start - self.base]

    def size(self, index: int) -> int:
        return self.tokens(index, index + 1)

    def fit_start(self, messages: Sequence[Message], low: int, end: int, budget: int) -> int:
        """The earliest safe start >= low whose messages up to `end` fit the budget."""
        if budget < 0:
            return end
        base, prefix = self.base, self.prefix
        target = prefix[end - base] - budget
        start = base + bisect.bisect_left(prefix, target, low - base, end - base + 1)
        return self.safe_start(messages, start, end)

    def safe_start(self, messages: Sequence[Message], start: int, end: int) -> int:
        """The first index >= start that does not separate a tool result from its call."""
        while start < end:
            if messages[start].role == "tool":
                start += 1
                continue
            moved = False
            for caller, result in self.unsafe:
                if caller < start <= result:
                    start, moved = result + 1, True
            if not moved:
                return start
        return end

    def last_unit_start(self, messages: Sequence[Message], end: int, low: int) -> int:
        """Where the last unit begins (kept even when over budget): the last message, or
        the call that the trailing results answer. `end` when a call is missing."""
        start = end - 1
        while start >= low and messages[start].role == "tool":
            start -= 1
        moved = True
        while moved and start >= low:
            moved = False
            for caller, result in self.unsafe:
                if caller < start <= result:
                    start, moved = caller, True
        return end if start < low else start

    def task_from(self, low: int) -> int | None:
        position = bisect.bisect_left(self.users, low)
        return self.users[position] if position < len(self.users) else None


class WindowManager:
    """Implements `agent.context.protocol.ContextManager`."""

    def __init__(
        self,
        context_window: int,
        *,
        response_tokens: int = DEFAULT_RESPONSE_TOKENS,
        strategy: Strategy = "truncation",
        summariser: Summariser | None = None,
        margin: float = SAFETY_MARGIN,
        keep_ratio: float = DEFAULT_KEEP_RATIO,
        estimator: Callable[[Message], int] = estimate_message_tokens,
    ) -> None:
        if context_window <= 0:
            raise ConfigurationError(f"context window must be positive, not {context_window}")
        if strategy not in STRATEGIES:
            raise ConfigurationError(
                f"unknown context strategy {strategy!r} (use 'truncation' or 'summarization')"
            )
        if strategy == "summarization" and summariser is None:
            raise ConfigurationError("the summarization strategy needs a summariser")
        self.context_window = context_window
        self.response_tokens = response_tokens
        self.strategy: Strategy = strategy
        self.margin = margin
        self.keep_ratio = keep_ratio
        self._summariser = summariser
        self._estimate = estimator
        self.reset()

    @classmethod
    def for_model(
        cls, model: str, *, context_window: int | None = None, **options: Any
    ) -> WindowManager:
        """A manager sized from the model's entry in the limits table, or the override."""
        return cls(context_window_for(model, context_window), **options)

    def reset(self) -> None:
        """Forget everything: the next fit starts from a new history."""
        self._history = _History()
        self._window = _Window()
        self._exact: _Exact | None = None
        self._last_fit: tuple[_Window, int, str] | None = None
        self._system: tuple[str, int] | None = None

    async def fit(self, system_prompt: str, messages: Sequence[Message]) -> ContextFit:
        end = len(messages)
        system_tokens = self._system_tokens(system_prompt)
        budget = history_budget(
            self.context_window, system_tokens, self.response_tokens, self.margin
        )
        if not self._history.matches(messages):
            logger.debug("the history changed; counting it afresh")
            self.reset()
        if self._history.empty and end:
            first = self._first_fit(messages, budget)
            if first is not None:
                window, tokens_before = first
                return self._fitted(
                    messages, window, system_tokens, budget, system_prompt,
                    strategy=self.strategy,
                    messages_before=end,
                    tokens_before=system_tokens + tokens_before,
                    tokens=system_tokens + self._estimate_window(window, end),
                )  # fmt: skip
        if end > self._history.end:
            self._history.extend(messages, self._estimate)
        window = self._window
        tokens_before = self._tokens(window, end, system_prompt, system_tokens)
        messages_before = len(window.head) + end - window.start
        if tokens_before - system_tokens <= budget:
            return self._fitted(
                messages, window, system_tokens, budget, system_prompt,
                strategy="none",
                messages_before=messages_before,
                tokens_before=tokens_before,
                tokens=tokens_before,
            )  # fmt: skip
        overhead = self._unexplained_tokens()
        window = await self._trim(window, messages, max(0, budget - overhead))
        return self._fitted(
            messages, window, system_tokens, budget, system_prompt,
            strategy=self.strategy,
            messages_before=messages_before,
            tokens_before=tokens_before,
            tokens=system_tokens + overhead + self._estimate_window(window, end),
        )  # fmt: skip

    def _fitted(
        self,
        messages: Sequence[Message],
        window: _Window,
        system_tokens: int,
        budget: int,
        system_prompt: str,
        *,
        strategy: str,
        messages_before: int,
        tokens_before: int,
        tokens: int,
    ) -> ContextFit:
        end = len(messages)
        self._window = window
        self._last_fit = (window, end, system_prompt)
        sent = [*window.head, *messages[window.start :]]
        if strategy != "none":
            logger.info(
                "context trimmed (%s): %d -> %d messages, %d -> %d tokens, budget %d",
                strategy,
                messages_before,
                len(sent),
                tokens_before,
                tokens,
                budget,
                extra={"context_strategy": strategy, "context_budget": budget},
            )
        # No validation: these are validated Message objects already, and validating
        # thousands of them again on every step would be the slowest part of a fit.
        return ContextFit(
            messages=sent,
            tokens=tokens,
            budget=budget,
            context_window=self.context_window,
            strategy=strategy,
            messages_before=messages_before,
            tokens_before=tokens_before,
        )

    def _first_fit(self, messages: Sequence[Message], budget: int) -> tuple[_Window, int] | None:
        """Truncate a history never seen before, counting only what it has to.

        Messages are measured from the end until the budget is exceeded. If they all fit,
        or the strategy is summarisation (which reads everything older anyway), they are
        learnt as usual and None is returned. Otherwise the truncation plan is made on
        the measured sizes and only the kept messages are learnt. The tokens of the
        whole history are then extrapolated from those measured: estimating thousands of
        messages that will never be sent would cost more than the fit itself.
        """
        sizes: dict[int, int] = {}
        index, used = len(messages), 0
        while index > 0 and used <= budget:
            index -= 1
            sizes[index] = self._estimate(messages[index])
            used += sizes[index]
        if used <= budget or self.strategy == "summarization":
            self._history.extend(messages, self._estimate, sizes)
            return None

        def size_of(position: int) -> int:
            if position not in sizes:
                sizes[position] = self._estimate(messages[position])
            return sizes[position]

        plan = plan_truncation(messages, budget, size_of)
        self._history = _History(base=plan.start)
        self._history.extend(messages, self._estimate, sizes)
        head = () if plan.pinned is None else (messages[plan.pinned],)
        head_tokens = () if plan.pinned is None else (size_of(plan.pinned),)
        window = _Window(head, head_tokens, plan.start)
        measured = sum(sizes.values())
        unmeasured = len(messages) - len(sizes)
        return window, measured + round(measured / len(sizes) * unmeasured)

    def record_usage(self, prompt_tokens: int, messages_sent: int) -> None:
        if self._last_fit is None or prompt_tokens <= 0:
            # Some servers report no usage when streaming (Ollama through its OpenAI
            # layer sends zeros): keep estimating rather than trust a zero.
            return
        window, end, system_prompt = self._last_fit
        covered = window.start + messages_sent - len(window.head)
        if messages_sent < len(window.head) or covered > end:
            logger.debug("usage for %d messages does not match the last fit", messages_sent)
            return
        self._exact = _Exact(
            prompt_tokens, window, covered, system_prompt, self._system_tokens(system_prompt)
        )

    # -- counting -------------------------------------------------------------------------

    def _system_tokens(self, system_prompt: str) -> int:
        if self._system is not None and self._system[0] == system_prompt:
            return self._system[1]
        tokens = estimate_text_tokens(system_prompt)
        tokens += MESSAGE_OVERHEAD_TOKENS if system_prompt else 0
        self._system = (system_prompt, tokens)
        return tokens

    def _estimate_window(self, window: _Window, end: int) -> int:
        return sum(window.head_tokens) + self._history.tokens(window.start, end)

    def _tokens(self, window: _Window, end: int, system_prompt: str, system_tokens: int) -> int:
        exact = self._exact
        if (
            exact is not None
            and exact.window is window
            and exact.end <= end
            and exact.system_prompt == system_prompt
        ):
            return exact.tokens + self._history.tokens(exact.end, end)
        return system_tokens + self._unexplained_tokens() + self._estimate_window(window, end)

    def _unexplained_tokens(self) -> int:
        """What the last exact count held beyond our estimate of the same messages."""
        exact = self._exact
        if exact is None:
            return 0
        estimated = exact.system_tokens + self._estimate_window(exact.window, exact.end)
        return max(0, exact.tokens - estimated)

    # -- trimming -------------------------------------------------------------------------

    async def _trim(self, window: _Window, messages: Sequence[Message], budget: int) -> _Window:
        if self.strategy == "summarization":
            summarised = await self._summarise(window, messages, budget)
            if summarised is not None:
                return summarised
            if window.head and is_summary(window.head[-1]):
                return self._truncate_visible(window, messages, budget)
        return self._truncate(window, messages, budget)

    def _truncate(self, window: _Window, messages: Sequence[Message], budget: int) -> _Window:
        """The truncation rules (see truncation.py) on the cached sizes, by binary search."""
        history, end = self._history, len(messages)
        if window.head:
            # The head is the pinned task: keep it while the latest messages fit beside it.
            start = history.fit_start(messages, window.start, end, budget - window.head_tokens[0])
            if start < end:
                return _Window(window.head, window.head_tokens, start)
        else:
            start = history.fit_start(messages, window.start, end, budget)
            task = history.task_from(window.start)
            if task is not None and task < start and history.size(task) <= budget:
                task_tokens = history.size(task)
                after = history.fit_start(messages, task + 1, end, budget - task_tokens)
                if after < end:
                    return _Window((messages[task],), (task_tokens,), after)
            if start < end:
                return _Window((), (), start)
        start = history.fit_start(messages, window.start, end, budget)
        if start >= end:
            start = history.last_unit_start(messages, end, window.start)
        return _Window((), (), start)

    async def _summarise(
        self, window: _Window, messages: Sequence[Message], budget: int
    ) -> _Window | None:
        assert self._summariser is not None
        visible, size_of, offset = self._visible(window, messages)
        try:
            compaction = await compact(
                visible,
                budget,
                size_of,
                self._estimate,
                self._summariser,
                keep_ratio=self.keep_ratio,
                recent_from=len(window.head),
            )
        except Exception:
            logger.warning("summarising the history failed; truncating instead", exc_info=True)
            return None
        if compaction is None:
            return None
        head_tokens = tuple(self._estimate(message) for message in compaction.head)
        return _Window(compaction.head, head_tokens, compaction.start + offset)

    def _truncate_visible(
        self, window: _Window, messages: Sequence[Message], budget: int
    ) -> _Window:
        """Truncation of a window whose head holds a summary: the task stays pinned, the
        summary goes when the recent messages need its room."""
        visible, size_of, offset = self._visible(window, messages)
        plan = plan_truncation(visible, budget, size_of)
        heads = len(window.head)
        head = [plan.pinned] if plan.pinned is not None else []
        head.extend(range(plan.start, heads))
        return _Window(
            tuple(visible[i] for i in head),
            tuple(size_of(i) for i in head),
            max(plan.start, heads) + offset,
        )

    def _visible(
        self, window: _Window, messages: Sequence[Message]
    ) -> tuple[list[Message], Callable[[int], int], int]:
        """The window as one list, a size lookup for it, and its offset into the history."""
        heads = len(window.head)
        offset = window.start - heads
        history = self._history

        def size_of(index: int) -> int:
            return window.head_tokens[index] if index < heads else history.size(index + offset)

        return [*window.head, *messages[window.start :]], size_of, offset


def _same(message: Message, other: Message | None) -> bool:
    return message is other or message == other
