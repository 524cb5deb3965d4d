"""Structured logs: one JSON object a line, each carrying the trace and conversation ids.

Records get their ids from where the work happens: `trace_id` and `span_id` from the
current OpenTelemetry span, `conversation_id` from a context variable that the traced agent
sets while a run is going. Both filters sit on every logger `get_logger` hands out, so the
ids and the redaction hold whatever handlers the host application (the CLI, Django)
attaches.

API keys never reach a log line: secrets registered at start-up (`register_secret`) are
scrubbed from the message, its arguments, the structured fields and any traceback.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from datetime import UTC, datetime
from typing import IO, Any

from opentelemetry import trace

from agent.errors import ProviderError, redact
from agent.messages import ToolCall, ToolResult

ROOT_LOGGER = "agent"

_conversation_id: ContextVar[str | None] = ContextVar("detective_conversation_id", default=None)
_secrets: set[str] = set()
_SECRET_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET", "_SECRET_KEY", "_PASSWORD")

# Attributes every LogRecord has; anything else on a record came in through `extra`.
_RESERVED = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys()
    | {"message", "asctime", "trace_id", "span_id", "conversation_id", "fields"}
)


# --- secrets -----------------------------------------------------------------------------


def register_secret(value: str | None) -> None:
    """Make sure `value` (an API key, a token) never appears in a log line."""
    if value:
        _secrets.add(value)


def register_env_secrets(environ: Mapping[str, str] | None = None) -> None:
    """Register the values of variables that by their name hold credentials
    (ANTHROPIC_API_KEY, OPENROUTER_API_KEY, DETECTIVE_API_TOKEN...): a safety net for keys
    nobody remembered to register."""
    for name, value in (os.environ if environ is None else environ).items():
        if name.upper().endswith(_SECRET_SUFFIXES):
            register_secret(value)


def registered_secrets() -> frozenset[str]:
    return frozenset(_secrets)


def clear_secrets() -> None:
    _secrets.clear()


def scrub(text: str) -> str:
    return redact(text, _secrets) if _secrets else text


def _scrub_value(value: Any) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {key: _scrub_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub_value(item) for item in value]
    return value


# --- conversation id ---------------------------------------------------------------------


def current_conversation_id() -> str | None:
    return _conversation_id.get()


def enter_conversation(conversation_id: str | None) -> Token[str | None]:
    """`conversation_scope` without a context manager, for code that runs very often."""
    return _conversation_id.set(conversation_id)


def leave_conversation(token: Token[str | None]) -> None:
    _conversation_id.reset(token)


@contextmanager
def conversation_scope(conversation_id: str | None) -> Iterator[None]:
    """Tag every record logged inside the block with `conversation_id`."""
    token = _conversation_id.set(conversation_id)
    try:
        yield
    finally:
        _conversation_id.reset(token)


# --- filters and formatter ---------------------------------------------------------------


class ContextFilter(logging.Filter):
    """Adds trace_id, span_id and conversation_id to each record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "trace_id", None) is None:
            context = trace.get_current_span().get_span_context()
            if context.is_valid:
                record.trace_id = trace.format_trace_id(context.trace_id)
                record.span_id = trace.format_span_id(context.span_id)
            else:
                record.trace_id = None
                record.span_id = None
        if getattr(record, "conversation_id", None) is None:
            record.conversation_id = _conversation_id.get()
        return True


class RedactingFilter(logging.Filter):
    """Scrubs registered secrets from a record before any handler formats it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _secrets:
            return True
        message = record.getMessage()
        record.msg = scrub(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = scrub(record.exc_text)
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            record.fields = _scrub_value(fields)
        for key, value in list(vars(record).items()):
            if key not in _RESERVED and isinstance(value, str | dict | list | tuple):
                setattr(record, key, _scrub_value(value))
        return True


_context_filter = ContextFilter()
_redacting_filter = RedactingFilter()


class JsonFormatter(logging.Formatter):
    """One JSON object a line: timestamp, level, logger, message, the ids, then the
    record's structured fields."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "timestamp": datetime.fromtimestamp(record.created, tz=UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "trace_id": getattr(record, "trace_id", None),
            "span_id": getattr(record, "span_id", None),
            "conversation_id": getattr(record, "conversation_id", None),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            for key, value in fields.items():
                payload.setdefault(key, value)
        for key, value in vars(record).items():
            if key not in _RESERVED and not key.startswith("_"):
                payload.setdefault(key, value)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            payload["exception"] = record.exc_text
        # Formatting a traceback or a repr'd field is the last chance for a key to slip
        # through, so the finished line is scrubbed too.
        return scrub(json.dumps(payload, default=str, ensure_ascii=False))


def get_logger(name: str) -> logging.Logger:
    """A logger whose records carry the ids and never carry a registered secret."""
    logger = logging.getLogger(name)
    if _context_filter not in logger.filters:
        logger.addFilter(_context_filter)
    if _redacting_filter not in logger.filters:
        logger.addFilter(_redacting_filter)
    return logger


def configure_logging(
    level: int | str = logging.INFO,
    stream: IO[str] | None = None,
    logger_name: str = ROOT_LOGGER,
) -> logging.Handler:
    """Send `logger_name`'s records to `stream` (stderr) as JSON lines, with the
    credentials found in the environment registered as secrets. Idempotent: a second call
    replaces the handler the first one installed."""
    register_env_secrets()
    logger = get_logger(logger_name)
    for handler in list(logger.handlers):
        if getattr(handler, "_detective_json", False):
            logger.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler._detective_json = True  # type: ignore[attr-defined]
    handler.setFormatter(JsonFormatter())
    # Handler-level filters also cover records propagated from child loggers that were
    # not created through get_logger.
    handler.addFilter(_context_filter)
    handler.addFilter(_redacting_filter)
    logger.addHandler(handler)
    logger.setLevel(level)
    return handler


# --- what the wrappers log ---------------------------------------------------------------


def _log(logger: logging.Logger, level: int, event: str, message: str, **fields: Any) -> None:
    if logger.isEnabledFor(level):
        logger.log(level, message, extra={"fields": {"event": event, **fields}})


def log_error(
    logger: logging.Logger,
    message: str,
    error: BaseException,
    **context: Any,
) -> None:
    """An error with whatever context locates it (provider, model, tool...)."""
    fields: dict[str, Any] = {"error_type": type(error).__name__, "error": str(error)}
    if isinstance(error, ProviderError):
        fields.update(
            provider=error.provider or None,
            status_code=error.status_code,
            request_id=error.request_id,
        )
    _log(logger, logging.ERROR, "error", message, **{**fields, **context})


def log_retry(
    logger: logging.Logger,
    *,
    attempt: int,
    max_attempts: int,
    delay_s: float,
    reason: str,
    error_type: str,
    **context: Any,
) -> None:
    _log(
        logger,
        logging.WARNING,
        "retry",
        f"retrying after attempt {attempt}/{max_attempts} in {delay_s:.2f}s: {reason}",
        attempt=attempt,
        max_attempts=max_attempts,
        delay_s=delay_s,
        reason=reason,
        error_type=error_type,
        **context,
    )


def log_context_trim(
    logger: logging.Logger,
    *,
    strategy: str,
    messages_before: int,
    messages_after: int,
    tokens_before: int,
    tokens_after: int,
    budget: int,
    utilisation: float,
) -> None:
    _log(
        logger,
        logging.INFO,
        "context_trimmed",
        f"context trimmed by {strategy}: {messages_before} -> {messages_after} "
        f"messages, {tokens_before} -> {tokens_after} tokens (budget {budget})",
        strategy=strategy,
        messages_before=messages_before,
        messages_after=messages_after,
        tokens_before=tokens_before,
        tokens_after=tokens_after,
        budget=budget,
        utilisation=utilisation,
    )


def log_tool_call(logger: logging.Logger, call: ToolCall, *, capture_content: bool = False) -> None:
    fields: dict[str, Any] = {"tool": call.name, "tool_call_id": call.id}
    if capture_content:
        fields["arguments"] = call.arguments
    _log(logger, logging.INFO, "tool_call", f"calling tool {call.name}", **fields)


def log_tool_result(
    logger: logging.Logger, result: ToolResult, *, capture_content: bool = False
) -> None:
    fields: dict[str, Any] = {
        "tool": result.name,
        "tool_call_id": result.tool_call_id,
        "success": result.success,
        "duration_ms": result.duration_ms,
        "error_type": result.error_type,
    }
    if capture_content:
        fields["content"] = result.content
    level = logging.INFO if result.success else logging.WARNING
    outcome = "succeeded" if result.success else f"failed ({result.error_type})"
    _log(
        logger,
        level,
        "tool_result",
        f"tool {result.name} {outcome} in {result.duration_ms:.0f} ms",
        **fields,
    )
