from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from agent.errors import AuthenticationError, RateLimitError
from agent.messages import ToolCall, ToolResult
from agent.telemetry.logging import (
    JsonFormatter,
    clear_secrets,
    configure_logging,
    conversation_scope,
    current_conversation_id,
    get_logger,
    log_context_trim,
    log_error,
    log_retry,
    log_tool_call,
    log_tool_result,
    register_env_secrets,
    register_secret,
    registered_secrets,
    scrub,
)

SECRET = "sk-ant-api03-abcdefghijklmnop"


@pytest.fixture(autouse=True)
def _no_secrets_left() -> Iterator[None]:
    clear_secrets()
    yield
    clear_secrets()


class JsonLog:
    def __init__(self, name: str) -> None:
        self.stream = io.StringIO()
        self.name = name
        self.handler = configure_logging(logging.DEBUG, self.stream, logger_name=name)
        self.logger = get_logger(name)

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stream.getvalue().splitlines()]

    def text(self) -> str:
        return self.stream.getvalue()


@pytest.fixture
def log(request: pytest.FixtureRequest) -> Iterator[JsonLog]:
    json_log = JsonLog(f"agent.test.{request.node.name}")
    yield json_log
    json_log.logger.removeHandler(json_log.handler)


@pytest.fixture
def tracer() -> Iterator[trace.Tracer]:
    provider = TracerProvider()
    yield provider.get_tracer("test")
    provider.shutdown()


def test_a_line_carries_the_trace_span_and_conversation(log: JsonLog, tracer: trace.Tracer) -> None:
    with (
        tracer.start_as_current_span("invoke_agent detective") as span,
        conversation_scope("conv_1"),
    ):
        log.logger.info("hello %s", "world", extra={"fields": {"event": "greeting", "n": 2}})

    [line] = log.lines()
    context = span.get_span_context()
    assert line["message"] == "hello world"
    assert line["level"] == "INFO"
    assert line["logger"] == log.name
    assert line["trace_id"] == trace.format_trace_id(context.trace_id)
    assert line["span_id"] == trace.format_span_id(context.span_id)
    assert line["conversation_id"] == "conv_1"
    assert line["event"] == "greeting"
    assert line["n"] == 2
    assert line["timestamp"].endswith("+00:00")


def test_outside_a_span_and_a_run_the_ids_are_null(log: JsonLog) -> None:
    log.logger.warning("idle")
    [line] = log.lines()
    assert line["trace_id"] is None
    assert line["span_id"] is None
    assert line["conversation_id"] is None


def test_conversation_scope_nests_and_restores() -> None:
    assert current_conversation_id() is None
    with conversation_scope("outer"):
        with conversation_scope("inner"):
            assert current_conversation_id() == "inner"
        assert current_conversation_id() == "outer"
    assert current_conversation_id() is None


def test_explicit_ids_on_a_record_win(log: JsonLog) -> None:
    with conversation_scope("from-scope"):
        log.logger.info("x", extra={"conversation_id": "explicit"})
    assert log.lines()[0]["conversation_id"] == "explicit"


def test_extra_attributes_are_fields_too(log: JsonLog) -> None:
    log.logger.info("x", extra={"provider": "ollama"})
    assert log.lines()[0]["provider"] == "ollama"


def test_reserved_keys_are_not_overwritten_by_fields(log: JsonLog) -> None:
    log.logger.info("real", extra={"fields": {"message": "fake", "level": "NONE"}})
    [line] = log.lines()
    assert (line["message"], line["level"]) == ("real", "INFO")


def test_exceptions_are_formatted(log: JsonLog) -> None:
    try:
        raise ValueError("broken")
    except ValueError:
        log.logger.exception("failed")
    [line] = log.lines()
    assert "ValueError: broken" in line["exception"]


# --- secrets -----------------------------------------------------------------------------


def test_secrets_never_reach_a_line(log: JsonLog) -> None:
    register_secret(SECRET)
    log.logger.info(f"key in the message {SECRET}")
    log.logger.info("key in the args %s", SECRET)
    log.logger.info("key in fields", extra={"fields": {"headers": {"x-api-key": SECRET}}})
    log.logger.info("key in extra", extra={"auth": f"Bearer {SECRET}", "calls": [SECRET]})
    try:
        raise AuthenticationError(f"rejected key {SECRET}")
    except AuthenticationError:
        log.logger.exception("key in a traceback")

    text = log.text()
    assert SECRET not in text
    assert text.count("[REDACTED]") >= 6
    lines = log.lines()
    assert lines[0]["message"] == "key in the message [REDACTED]"
    assert lines[2]["headers"] == {"x-api-key": "[REDACTED]"}
    assert lines[3]["auth"] == "Bearer [REDACTED]"
    assert lines[3]["calls"] == ["[REDACTED]"]


def test_secrets_are_scrubbed_for_any_handler(caplog: pytest.LogCaptureFixture) -> None:
    """The filters sit on the logger, so Django's or pytest's handlers see clean records."""
    register_secret(SECRET)
    logger = get_logger("agent.test.any_handler")
    with caplog.at_level(logging.INFO, "agent.test.any_handler"):
        logger.info("token=%s", SECRET)
    [record] = caplog.records
    assert record.getMessage() == "token=[REDACTED]"
    assert SECRET not in caplog.text
    assert hasattr(record, "trace_id")


def test_child_loggers_are_scrubbed_by_the_handler() -> None:
    stream = io.StringIO()
    parent = "agent.test.parent_only"
    handler = configure_logging(logging.INFO, stream, logger_name=parent)
    try:
        register_secret(SECRET)
        # A child logger made without get_logger has no filters of its own.
        logging.getLogger(f"{parent}.child").info("leak %s?", SECRET)
    finally:
        logging.getLogger(parent).removeHandler(handler)
    [line] = [json.loads(text) for text in stream.getvalue().splitlines()]
    assert line["message"] == "leak [REDACTED]?"
    assert "trace_id" in line


def test_short_or_empty_values_are_not_secrets() -> None:
    register_secret(None)
    register_secret("")
    register_secret("abc")
    assert registered_secrets() == frozenset({"abc"})
    assert scrub("abc abc") == "abc abc"  # too short to redact without mangling text


def test_credentials_in_the_environment_are_secrets() -> None:
    register_env_secrets(
        {
            "ANTHROPIC_API_KEY": SECRET,
            "DETECTIVE_API_TOKEN": "token-1234567890",
            "DETECTIVE_MODEL": "claude-sonnet-4-20250514",
        }
    )
    assert registered_secrets() == frozenset({SECRET, "token-1234567890"})


def test_configure_logging_registers_the_environment_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-v1-0123456789")
    name = "agent.test.env_keys"
    handler = configure_logging(logging.INFO, io.StringIO(), logger_name=name)
    logging.getLogger(name).removeHandler(handler)
    assert "sk-or-v1-0123456789" in registered_secrets()


def test_scrub_without_secrets_is_identity() -> None:
    assert scrub(SECRET) == SECRET


def test_formatter_scrubs_even_without_the_filters() -> None:
    register_secret(SECRET)
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "k=%s", (SECRET,), None)
    assert SECRET not in JsonFormatter().format(record)


def test_configure_logging_is_idempotent() -> None:
    name = "agent.test.idempotent"
    configure_logging(logging.INFO, io.StringIO(), logger_name=name)
    handler = configure_logging(logging.INFO, io.StringIO(), logger_name=name)
    logger = logging.getLogger(name)
    try:
        assert logger.handlers == [handler]
        assert len([f for f in logger.filters if type(f).__name__ == "ContextFilter"]) == 1
    finally:
        logger.removeHandler(handler)


# --- helpers -----------------------------------------------------------------------------


def test_log_error_carries_the_provider_context(log: JsonLog) -> None:
    register_secret(SECRET)
    error = RateLimitError(
        f"slow down {SECRET}",
        provider="anthropic",
        status_code=429,
        request_id="req_9",
        retry_after=3.0,
    )
    log_error(log.logger, "model call failed", error, model="claude-sonnet-4")
    [line] = log.lines()
    assert line["level"] == "ERROR"
    assert line["event"] == "error"
    assert line["error_type"] == "RateLimitError"
    assert line["error"] == "slow down [REDACTED] | status 429 | request id req_9"
    assert line["provider"] == "anthropic"
    assert line["status_code"] == 429
    assert line["request_id"] == "req_9"
    assert line["model"] == "claude-sonnet-4"


def test_log_error_of_a_plain_exception(log: JsonLog) -> None:
    log_error(log.logger, "boom", RuntimeError("bad"), error_type="Overridden")
    [line] = log.lines()
    assert line["error_type"] == "Overridden"
    assert "status_code" not in line


def test_log_retry(log: JsonLog) -> None:
    log_retry(
        log.logger,
        attempt=2,
        max_attempts=5,
        delay_s=1.25,
        reason="rate limited (429), retry-after 1.25s",
        error_type="RateLimitError",
        provider="openai",
    )
    [line] = log.lines()
    assert line["level"] == "WARNING"
    assert line["message"].startswith("retrying after attempt 2/5 in 1.25s")
    assert line["event"] == "retry"
    assert line["reason"] == "rate limited (429), retry-after 1.25s"
    assert line["provider"] == "openai"


def test_log_context_trim(log: JsonLog) -> None:
    log_context_trim(
        log.logger,
        strategy="truncation",
        messages_before=40,
        messages_after=12,
        tokens_before=9000,
        tokens_after=3000,
        budget=3500,
        utilisation=0.37,
    )
    [line] = log.lines()
    assert line["event"] == "context_trimmed"
    assert (line["messages_before"], line["messages_after"]) == (40, 12)
    assert line["utilisation"] == 0.37


def test_tool_logs_keep_arguments_out_unless_asked(log: JsonLog) -> None:
    call = ToolCall(id="c1", name="file_risk_report", arguments={"severity": "high"})
    result = ToolResult(
        tool_call_id="c1",
        name="file_risk_report",
        content="filed",
        success=False,
        error_type="ToolTimeoutError",
        duration_ms=12.0,
    )
    log_tool_call(log.logger, call)
    log_tool_result(log.logger, result)
    log_tool_call(log.logger, call, capture_content=True)
    log_tool_result(log.logger, result, capture_content=True)

    quiet_call, quiet_result, loud_call, loud_result = log.lines()
    assert quiet_call["tool"] == "file_risk_report"
    assert "arguments" not in quiet_call
    assert "content" not in quiet_result
    assert quiet_result["level"] == "WARNING"
    assert quiet_result["success"] is False
    assert quiet_result["message"] == "tool file_risk_report failed (ToolTimeoutError) in 12 ms"
    assert loud_call["arguments"] == {"severity": "high"}
    assert loud_result["content"] == "filed"


def test_helpers_skip_work_below_the_level(log: JsonLog) -> None:
    log.logger.setLevel(logging.ERROR)
    log_retry(
        log.logger, attempt=1, max_attempts=2, delay_s=0, reason="r", error_type="ServerError"
    )
    assert log.lines() == []
