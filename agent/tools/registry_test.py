from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest
from pydantic import BaseModel

from agent.errors import ConfigurationError, InvalidArgumentsError
from agent.messages import ToolCall, ToolDefinition
from agent.tools import registry as registry_module
from agent.tools.decorator import tool
from agent.tools.protocol import ToolExecutor
from agent.tools.registry import (
    ToolDefinitionError,
    ToolOutcome,
    ToolRegistry,
    describe_parameters,
    format_tools,
)

SCHEMA = {
    "type": "object",
    "properties": {
        "release_id": {"type": "string"},
        "severity": {"type": "string", "enum": ["high", "medium", "low"]},
    },
    "required": ["release_id"],
}


def definition(name: str = "lookup", parameters: dict[str, Any] | None = None) -> ToolDefinition:
    return ToolDefinition(
        name=name, description="Look a release up.", parameters=parameters or SCHEMA
    )


def registry_with(handler: Any, *, timeout_s: float = 30.0, name: str = "lookup") -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(definition(name), handler, timeout_s=timeout_s)
    return registry


def call(arguments: dict[str, Any] | None = None, name: str = "lookup") -> ToolCall:
    return ToolCall(id="call_1", name=name, arguments=arguments or {"release_id": "v1"})


def test_the_registry_is_a_tool_executor() -> None:
    assert isinstance(ToolRegistry(), ToolExecutor)


def test_registered_tools_are_listed_in_order() -> None:
    registry = ToolRegistry()
    registry.register(definition("b"), str)
    registry.register(definition("a"), str)
    assert [t.name for t in registry.get_tools()] == ["b", "a"]
    assert registry.names() == ["b", "a"]
    assert "a" in registry and "c" not in registry
    assert len(registry) == 2


@pytest.mark.parametrize(
    ("tool_definition", "problem"),
    [
        (
            ToolDefinition.model_construct(name="bad name!", description="x", parameters=SCHEMA),
            "name",
        ),
        (definition(parameters={"type": "string"}), "type 'object'"),
        (
            definition(parameters={"type": "object", "properties": {"x": {"type": "nonsense"}}}),
            "not a valid JSON schema",
        ),
        (
            ToolDefinition(name="lookup", description="  ", parameters=SCHEMA),
            "needs a description",
        ),
    ],
)
def test_invalid_definitions_are_refused(tool_definition: ToolDefinition, problem: str) -> None:
    with pytest.raises(ToolDefinitionError, match=problem):
        ToolRegistry().register(tool_definition, str)


def test_names_are_unique() -> None:
    registry = registry_with(str)
    with pytest.raises(ToolDefinitionError, match="already registered"):
        registry.register(definition(), str)


@pytest.mark.parametrize(
    ("handler", "timeout_s", "problem"),
    [("not callable", 30.0, "not callable"), (str, 0.0, "positive")],
)
def test_handlers_and_timeouts_are_checked(handler: Any, timeout_s: float, problem: str) -> None:
    with pytest.raises(ToolDefinitionError, match=problem):
        ToolRegistry().register(definition(), handler, timeout_s=timeout_s)


@pytest.mark.parametrize("provider", ["anthropic", "Anthropic "])
def test_anthropic_tools_have_an_input_schema(provider: str) -> None:
    assert registry_with(str).format_for_provider(provider) == [
        {"name": "lookup", "description": "Look a release up.", "input_schema": SCHEMA}
    ]


@pytest.mark.parametrize(
    "provider", ["openai", "openrouter", "local", "openai-compatible", "ollama"]
)
def test_openai_style_tools_are_functions(provider: str) -> None:
    assert registry_with(str).format_for_provider(provider) == [
        {
            "type": "function",
            "function": {
                "name": "lookup",
                "description": "Look a release up.",
                "parameters": SCHEMA,
            },
        }
    ]


def test_an_unknown_provider_format_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="gemini"):
        format_tools([definition()], "gemini")


class Summary(BaseModel):
    version: str


@pytest.mark.parametrize(
    ("value", "content", "data"),
    [
        ("plain text", "plain text", None),
        ({"version": "v1"}, '{"version": "v1"}', {"version": "v1"}),
        ([1, 2], "[1, 2]", None),
        (None, "Done (the tool returned no output).", None),
        (Summary(version="v1"), '{"version":"v1"}', {"version": "v1"}),
    ],
)
async def test_a_handler_value_becomes_the_content(
    value: Any, content: str, data: dict[str, Any] | None
) -> None:
    result = await registry_with(lambda release_id: value).execute(call())
    assert (result.success, result.content, result.data) == (True, content, data)
    assert (result.tool_call_id, result.name, result.error_type) == ("call_1", "lookup", None)


async def test_a_value_that_cannot_be_json_is_written_as_text() -> None:
    circular: list[Any] = []
    circular.append(circular)
    result = await registry_with(lambda release_id: circular).execute(call())
    assert (result.success, result.content) == (True, "[[...]]")


async def test_an_outcome_can_end_the_run_and_carry_data() -> None:
    outcome = ToolOutcome("Filed.", data={"report_id": "r1"}, terminal=True)
    result = await registry_with(lambda release_id: outcome).execute(call())
    assert (result.content, result.data, result.terminal, result.success) == (
        "Filed.",
        {"report_id": "r1"},
        True,
        True,
    )


async def test_an_outcome_can_report_a_failure() -> None:
    result = await registry_with(lambda release_id: ToolOutcome.failure("No.")).execute(call())
    assert (result.success, result.error_type, result.content) == (
        False,
        "ToolExecutionError",
        "No.",
    )
    failed = ToolOutcome(content="odd", success=False)
    result = await registry_with(lambda release_id: failed).execute(call())
    assert result.error_type == "ToolExecutionError"


async def test_sync_handlers_run_in_a_thread_and_async_ones_are_awaited() -> None:
    loop_thread = threading.current_thread()

    def sync_handler(release_id: str) -> str:
        return "thread" if threading.current_thread() is not loop_thread else "loop"

    async def async_handler(release_id: str) -> str:
        return "loop" if threading.current_thread() is loop_thread else "thread"

    assert (await registry_with(sync_handler).execute(call())).content == "thread"
    assert (await registry_with(async_handler).execute(call())).content == "loop"


async def test_async_callable_objects_and_returned_awaitables_are_awaited() -> None:
    class Handler:
        async def __call__(self, release_id: str) -> str:
            return f"object {release_id}"

    async def later(release_id: str) -> str:
        return f"later {release_id}"

    assert (await registry_with(Handler()).execute(call())).content == "object v1"
    assert (await registry_with(lambda release_id: later(release_id)).execute(call())).content == (
        "later v1"
    )


async def test_an_unknown_tool_lists_the_available_ones() -> None:
    result = await registry_with(str).execute(call(name="get_weather"))
    assert (result.success, result.error_type) == (False, "ToolNotFoundError")
    assert "'get_weather'" in result.content
    assert "Available tools: lookup" in result.content


async def test_an_empty_registry_says_so() -> None:
    result = await ToolRegistry().execute(call())
    assert "(none)" in result.content


@pytest.mark.parametrize(
    ("arguments", "mentions"),
    [
        ({}, ["'release_id' is a required property"]),
        ({"release_id": 3}, ["release_id: 3 is not of type 'string'"]),
        (
            {"release_id": "v1", "severity": "critical"},
            ["severity: 'critical' is not one of ['high', 'medium', 'low']"],
        ),
    ],
)
async def test_invalid_arguments_are_explained(
    arguments: dict[str, Any], mentions: list[str]
) -> None:
    ran = False

    def handler(**_: Any) -> str:
        nonlocal ran
        ran = True
        return "ran"

    result = await registry_with(handler).execute(
        ToolCall(id="c", name="lookup", arguments=arguments)
    )
    assert (result.success, result.error_type) == (False, "InvalidArgumentsError")
    for mention in mentions:
        assert mention in result.content
    assert "Expected parameters: release_id (string, required); severity (one of" in result.content
    assert not ran


async def test_many_argument_errors_are_summarised() -> None:
    schema = {
        "type": "object",
        "properties": {f"p{i}": {"type": "integer"} for i in range(8)},
    }
    registry = ToolRegistry()
    registry.register(definition(parameters=schema), lambda **_: "ran")
    arguments = {f"p{i}": "x" for i in range(8)}
    result = await registry.execute(ToolCall(id="c", name="lookup", arguments=arguments))
    assert "... and 3 more" in result.content


async def test_arguments_that_were_not_json_are_refused_with_what_was_received() -> None:
    raw = '{"release_id": "v1"' + "x" * 1000
    result = await registry_with(str).execute(call({"_raw_arguments": raw}))
    assert (result.success, result.error_type) == (False, "InvalidArgumentsError")
    assert "not valid JSON" in result.content
    assert '{"release_id": "v1"' in result.content
    assert "more characters" in result.content
    assert len(result.content) < 600


async def test_a_handler_exception_becomes_a_failed_result(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def handler(release_id: str) -> str:
        raise KeyError("tests")

    with caplog.at_level(logging.WARNING, logger="agent.tools"):
        result = await registry_with(handler).execute(call())
    assert (result.success, result.error_type) == (False, "ToolExecutionError")
    assert result.content == "Tool 'lookup' failed with KeyError: 'tests'"
    assert any("lookup" in record.getMessage() for record in caplog.records)


async def test_an_exception_without_a_message_still_says_what_failed() -> None:
    def handler(release_id: str) -> str:
        raise RuntimeError

    result = await registry_with(handler).execute(call())
    assert result.content == "Tool 'lookup' failed with RuntimeError: no details"


async def test_a_tool_error_raised_by_the_handler_keeps_its_type_and_words() -> None:
    def handler(release_id: str) -> str:
        raise InvalidArgumentsError("release ids look like v1.2.3")

    result = await registry_with(handler).execute(call())
    assert (result.error_type, result.content) == (
        "InvalidArgumentsError",
        "release ids look like v1.2.3",
    )


async def test_an_async_handler_past_its_timeout_is_stopped() -> None:
    stopped = asyncio.Event()

    async def handler(release_id: str) -> str:
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()
        return "never"

    result = await registry_with(handler, timeout_s=0.01).execute(call())
    assert (result.success, result.error_type) == (False, "ToolTimeoutError")
    assert "did not finish within 0.01 seconds" in result.content
    assert stopped.is_set()


async def test_a_sync_handler_past_its_timeout_is_abandoned() -> None:
    release = threading.Event()

    def handler(release_id: str) -> str:
        release.wait(5)
        return "late"

    result = await registry_with(handler, timeout_s=0.01).execute(call())
    release.set()
    assert result.error_type == "ToolTimeoutError"


async def test_a_timeout_error_from_the_handler_itself_is_an_execution_error() -> None:
    async def handler(release_id: str) -> str:
        raise TimeoutError("upstream timed out")

    result = await registry_with(handler).execute(call())
    assert result.error_type == "ToolExecutionError"
    assert "upstream timed out" in result.content


async def test_cancelling_the_run_cancels_the_tool() -> None:
    started = asyncio.Event()

    async def handler(release_id: str) -> str:
        started.set()
        await asyncio.Event().wait()
        return "never"

    task = asyncio.create_task(registry_with(handler).execute(call()))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_the_duration_is_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    ticks = iter([10.0, 10.25])
    monkeypatch.setattr(registry_module.time, "perf_counter", lambda: next(ticks))
    result = await registry_with(lambda release_id: "ok").execute(call())
    assert result.duration_ms == pytest.approx(250.0)


async def test_decorated_functions_register_with_their_own_definition() -> None:
    @tool(timeout_s=2.0)
    def shout(text: str) -> str:
        """Repeat the text in capitals."""
        return text.upper()

    registry = ToolRegistry()
    registry.register_function(shout)
    assert registry.get_tools() == [shout.definition]
    result = await registry.execute(ToolCall(id="c", name="shout", arguments={"text": "hi"}))
    assert result.content == "HI"
    assert registry._tools["shout"].timeout_s == 2.0

    other = ToolRegistry()
    other.register_function(shout, timeout_s=9.0)
    assert other._tools["shout"].timeout_s == 9.0


def test_undecorated_functions_are_refused() -> None:
    def plain(text: str) -> str:
        return text

    with pytest.raises(ToolDefinitionError, match="@tool"):
        ToolRegistry().register_function(plain)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("schema", "description"),
    [
        ({"type": "object"}, "It takes no arguments."),
        (
            {
                "type": "object",
                "properties": {
                    "tags": {"type": "array"},
                    "ids": {"type": "array", "items": {"type": "integer"}},
                    "limit": {"type": ["integer", "null"]},
                    "mode": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                    "ref": {"$ref": "#/$defs/X"},
                    "anything": {},
                },
                "required": ["ids"],
            },
            "Expected parameters: tags (list of values, optional); ids (list of integer, "
            "required); limit (integer or null, optional); mode (string or null, optional); "
            "ref (object, optional); anything (any, optional).",
        ),
    ],
)
def test_parameters_are_described_for_the_model(schema: dict[str, Any], description: str) -> None:
    assert describe_parameters(schema) == description


def test_a_schema_is_checked_once_and_a_bad_one_every_time() -> None:
    first, second = ToolRegistry(), ToolRegistry()
    first.register(definition(), str)
    second.register(definition(), str)
    assert first._tools["lookup"].validator is second._tools["lookup"].validator
    bad = definition(parameters={"type": "object", "properties": {"x": {"type": "nonsense"}}})
    for _ in range(2):
        with pytest.raises(ToolDefinitionError, match="not a valid JSON schema"):
            ToolRegistry().register(bad, str)
