"""The context window: a fit that trims the history, or fails, is a `context.fit` span; one
that leaves it as it is, an event on the current span."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

from agent.context.protocol import ContextFit, ContextManager
from agent.messages import Message
from agent.telemetry.logging import get_logger, log_context_trim, log_error
from agent.telemetry.metrics import AgentMetrics
from agent.telemetry.wrapping import Delegating, component_defaults, record_error

_context_log = get_logger("agent.context")


class TracedContextManager(Delegating):
    """A ContextManager whose fits are traced.

    A fit that trims the history, or fails, is a `context.fit` span; one that leaves the
    history as it is (nearly every call of an ordinary run) is a `context.fit` event on the
    current span, with the same attributes: a span per model call cost more than the fit
    itself and drew an empty row on the trace page.

    With `calls_model` (the summarisation strategy: its summariser is a model call) every
    fit is a span from the start, so that the summariser's chat span nests under it.
    Otherwise the span is made once the fit is done, from the times taken around it.
    """

    def __init__(
        self,
        inner: ContextManager,
        *,
        calls_model: bool = True,
        tracer: trace.Tracer | None = None,
        metrics: AgentMetrics | None = None,
    ) -> None:
        self._inner = inner
        self._calls_model = calls_model
        self._tracer, self._metrics, _ = component_defaults(tracer, metrics, False)

    async def fit(self, system_prompt: str, messages: Sequence[Message]) -> ContextFit:
        if self._calls_model:
            return await self._fit_in_span(system_prompt, messages)
        started_ns = time.time_ns()
        try:
            fit = await self._inner.fit(system_prompt, messages)
        except BaseException as error:
            span = self._start_span(len(messages), started_ns)
            self._failed(span, error)
            span.end()
            raise
        if fit.trimmed:
            span = self._start_span(len(messages), started_ns)
            span.set_attributes(_fit_attributes(fit))
            span.end()
        else:
            trace.get_current_span().add_event(
                "context.fit", _untouched_fit_attributes(fit), timestamp=started_ns
            )
        self._observe(fit)
        return fit

    async def _fit_in_span(self, system_prompt: str, messages: Sequence[Message]) -> ContextFit:
        span = self._start_span(len(messages))
        with trace.use_span(
            span, end_on_exit=True, record_exception=False, set_status_on_exception=False
        ):
            try:
                fit = await self._inner.fit(system_prompt, messages)
            except BaseException as error:
                self._failed(span, error)
                raise
            span.set_attributes(_fit_attributes(fit))
        self._observe(fit)
        return fit

    def _start_span(self, message_count: int, start_time: int | None = None) -> Span:
        return self._tracer.start_span(
            "context.fit",
            kind=SpanKind.INTERNAL,
            attributes={"detective.context.messages_before": message_count},
            start_time=start_time,
        )

    @staticmethod
    def _failed(span: Span, error: BaseException) -> None:
        record_error(span, error)
        if isinstance(error, Exception):
            log_error(_context_log, "fitting the context failed", error)

    def _observe(self, fit: ContextFit) -> None:
        self._metrics.record_context(utilisation=fit.utilisation, strategy=fit.strategy)
        if fit.trimmed:
            log_context_trim(
                _context_log,
                strategy=fit.strategy,
                messages_before=fit.messages_before,
                messages_after=len(fit.messages),
                tokens_before=fit.tokens_before,
                tokens_after=fit.tokens,
                budget=fit.budget,
                utilisation=fit.utilisation,
            )

    def record_usage(self, prompt_tokens: int, messages_sent: int) -> None:
        self._inner.record_usage(prompt_tokens, messages_sent)


def _untouched_fit_attributes(fit: ContextFit) -> dict[str, Any]:
    # What is left when nothing was trimmed: the rest would repeat these (after = before).
    return {
        "detective.context.messages_before": fit.messages_before,
        "detective.context.tokens_before": fit.tokens_before,
        "detective.context.budget": fit.budget,
        "detective.context.window": fit.context_window,
        "detective.context.utilisation": fit.utilisation,
        "detective.context.strategy": fit.strategy,
        "detective.context.trimmed": False,
    }


def _fit_attributes(fit: ContextFit) -> dict[str, Any]:
    return {
        "detective.context.messages_before": fit.messages_before,
        "detective.context.messages_after": len(fit.messages),
        "detective.context.messages_dropped": max(fit.messages_before - len(fit.messages), 0),
        "detective.context.tokens_before": fit.tokens_before,
        "detective.context.tokens_after": fit.tokens,
        "detective.context.budget": fit.budget,
        "detective.context.window": fit.context_window,
        "detective.context.utilisation": fit.utilisation,
        "detective.context.strategy": fit.strategy,
        "detective.context.trimmed": fit.trimmed,
    }
