"""The tool registry: the tools the model may call, and running them safely.

`execute` never raises for a tool's failure. An unknown tool, arguments that do not match
the schema (or were not even JSON), a handler that raises and a handler that runs past its
timeout all come back as a `ToolResult` with `success=False`, an `error_type` named after
the error tree (`ToolNotFoundError`, `InvalidArgumentsError`, `ToolExecutionError`,
`ToolTimeoutError`) and a message written for the model, so that it can correct itself.
Only cancellation of the run itself propagates.

A handler returns either a plain value (a string, or anything JSON-able, which becomes the
content) or a `ToolOutcome` when it needs to say more: a failure it detected itself,
structured `data` for the agent's bookkeeping, or `terminal=True` to end the run.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import logging
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import jsonschema
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator
from pydantic import BaseModel

from agent.errors import (
    AgentError,
    ConfigurationError,
    InvalidArgumentsError,
    ToolError,
    ToolExecutionError,
    ToolNotFoundError,
    ToolTimeoutError,
)
from agent.messages import ToolCall, ToolDefinition, ToolResult

logger = logging.getLogger("agent.tools")

DEFAULT_TIMEOUT_S = 30.0
TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# Where provider adapters put argument text they could not parse as JSON.
RAW_ARGUMENTS_KEY = "_raw_arguments"
# Enough for the model to find its mistakes, short enough not to flood the context.
MAX_REPORTED_ERRORS = 5
MAX_ECHOED_CHARS = 300

_ANTHROPIC = frozenset({"anthropic"})
_OPENAI_STYLE = frozenset({"openai", "openrouter", "local", "openai-compatible", "ollama"})


class ToolDefinitionError(AgentError, ValueError):
    """A tool was defined or registered wrongly: a programming error, raised at startup."""


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What a handler returns when a plain value is not enough."""

    content: str
    success: bool = True
    data: dict[str, Any] | None = None
    # Ends the run once the result is recorded (filing the risk report does).
    terminal: bool = False
    # Only for failures; defaults to ToolExecutionError.
    error_type: str | None = None

    @classmethod
    def failure(
        cls,
        content: str,
        *,
        error_type: str = ToolExecutionError.__name__,
        data: dict[str, Any] | None = None,
    ) -> ToolOutcome:
        return cls(content=content, success=False, error_type=error_type, data=data)


@runtime_checkable
class RegistrableTool(Protocol):
    """What `@tool` produces: a definition, the handler to run, its timeout."""

    @property
    def definition(self) -> ToolDefinition: ...

    @property
    def handler(self) -> Callable[..., Any]: ...

    @property
    def timeout_s(self) -> float: ...


@dataclass(frozen=True, slots=True)
class RegisteredTool:
    definition: ToolDefinition
    handler: Callable[..., Any]
    timeout_s: float
    is_async: bool
    validator: Validator


# Classes whose instances passed the RegistrableTool check.
_TOOL_TYPES: set[type] = set()
# id(schema) -> (schema, its validator); the schema kept alive, so that its id is not reused.
_validator_of_schema: dict[int, tuple[dict[str, Any], Validator]] = {}
_VALIDATORS_KEPT = 256
# id(definition) -> (definition, its validator): definitions that passed validate_definition.
_checked_definitions: dict[int, tuple[ToolDefinition, Validator]] = {}


class ToolRegistry:
    """Implements `agent.tools.protocol.ToolExecutor`."""

    def __init__(self) -> None:
        self._tools: dict[str, RegisteredTool] = {}

    def register(
        self,
        definition: ToolDefinition,
        handler: Callable[..., Any],
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self._add(definition, handler, timeout_s, is_async=None)

    def _add(
        self,
        definition: ToolDefinition,
        handler: Callable[..., Any],
        timeout_s: float,
        *,
        is_async: bool | None,
    ) -> None:
        validator = _checked_definition(definition)
        if definition.name in self._tools:
            raise ToolDefinitionError(f"a tool named {definition.name!r} is already registered")
        if not callable(handler):
            raise ToolDefinitionError(f"the handler of {definition.name!r} is not callable")
        if not timeout_s > 0:
            raise ToolDefinitionError(f"the timeout of {definition.name!r} must be positive")
        self._tools[definition.name] = RegisteredTool(
            definition=definition,
            handler=handler,
            timeout_s=timeout_s,
            is_async=_handler_is_async(handler) if is_async is None else is_async,
            validator=validator,
        )

    def register_function(
        self, function: RegistrableTool, *, timeout_s: float | None = None
    ) -> None:
        """Register a function decorated with `@tool`."""
        if type(function) not in _TOOL_TYPES:
            if not isinstance(function, RegistrableTool):
                raise ToolDefinitionError(
                    f"{function!r} is not a tool: decorate it with @tool, or call register() "
                    "with a ToolDefinition"
                )
            # A protocol's isinstance walks the class's attributes every time (0.1 ms):
            # a class that passed once is remembered.
            _TOOL_TYPES.add(type(function))
        self._add(
            function.definition,
            function.handler,
            function.timeout_s if timeout_s is None else timeout_s,
            # `@tool` knows whether its handler is async; inspect would unwrap it to find out,
            # for each of a run's tools.
            is_async=getattr(function, "handler_is_async", None),
        )

    def get_tools(self) -> list[ToolDefinition]:
        return [tool.definition for tool in self._tools.values()]

    def names(self) -> list[str]:
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def format_for_provider(self, provider: str) -> list[dict[str, Any]]:
        return format_tools(self.get_tools(), provider)

    async def execute(self, call: ToolCall) -> ToolResult:
        started = time.perf_counter()
        outcome = await self._run(call)
        duration_ms = (time.perf_counter() - started) * 1000
        result = ToolResult(
            tool_call_id=call.id,
            name=call.name,
            content=outcome.content,
            success=outcome.success,
            duration_ms=duration_ms,
            error_type=None
            if outcome.success
            else outcome.error_type or ToolExecutionError.__name__,
            data=outcome.data,
            terminal=outcome.terminal,
        )
        log = logger.info if result.success else logger.warning
        log(
            "tool %s %s in %.1f ms",
            call.name,
            "succeeded" if result.success else f"failed ({result.error_type})",
            duration_ms,
            extra={
                "tool_name": call.name,
                "tool_call_id": call.id,
                "tool_success": result.success,
                "tool_error_type": result.error_type,
                "duration_ms": duration_ms,
            },
        )
        return result

    async def _run(self, call: ToolCall) -> ToolOutcome:
        tool = self._tools.get(call.name)
        if tool is None:
            return ToolOutcome.failure(
                f"There is no tool named {call.name!r}. Available tools: "
                f"{', '.join(self._tools) or '(none)'}. Call one of those instead.",
                error_type=ToolNotFoundError.__name__,
            )
        problem = self._argument_problem(tool, call.arguments)
        if problem is not None:
            return ToolOutcome.failure(problem, error_type=InvalidArgumentsError.__name__)
        try:
            async with asyncio.timeout(tool.timeout_s) as deadline:
                value = await _invoke(tool, call.arguments)
        except TimeoutError as error:
            # A TimeoutError raised by the handler itself is a failure like any other;
            # only our own deadline makes it a timeout.
            if not deadline.expired():
                return _failure_from_exception(call.name, error)
            return ToolOutcome.failure(
                f"Tool {call.name!r} did not finish within {tool.timeout_s:g} seconds and was "
                "stopped. Its result is unknown; do not assume it succeeded.",
                error_type=ToolTimeoutError.__name__,
            )
        except Exception as error:
            return _failure_from_exception(call.name, error)
        return to_outcome(value)

    def _argument_problem(self, tool: RegisteredTool, arguments: dict[str, Any]) -> str | None:
        name = tool.definition.name
        if RAW_ARGUMENTS_KEY in arguments:
            raw = str(arguments[RAW_ARGUMENTS_KEY])
            return (
                f"The arguments for {name!r} were not valid JSON, so the tool was not run. "
                f"Received: {_clip(raw)}\nCall {name!r} again with a JSON object. "
                f"{describe_parameters(tool.definition.parameters)}"
            )
        errors = sorted(tool.validator.iter_errors(arguments), key=lambda e: list(e.path))
        if not errors:
            return None
        lines = [f"- {_error_location(error)}{error.message}" for error in errors]
        shown = lines[:MAX_REPORTED_ERRORS]
        if len(lines) > len(shown):
            shown.append(f"- ... and {len(lines) - len(shown)} more")
        return (
            f"Invalid arguments for {name!r}, so the tool was not run:\n"
            + "\n".join(shown)
            + f"\nCall {name!r} again with corrected arguments. "
            + describe_parameters(tool.definition.parameters)
        )


def _handler_is_async(handler: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        type(handler).__call__
    )


def _checked_definition(definition: ToolDefinition) -> Validator:
    # `@tool` keeps one definition per function, registered anew for every run: a definition
    # object that passed once is not checked again (it is frozen; kept alive, so that its id
    # is not reused).
    known = _checked_definitions.get(id(definition))
    if known is not None and known[0] is definition:
        return known[1]
    validator = validate_definition(definition)
    _checked_definitions[id(definition)] = (definition, validator)
    if len(_checked_definitions) > _VALIDATORS_KEPT:
        _checked_definitions.pop(next(iter(_checked_definitions)))
    return validator


def validate_definition(definition: ToolDefinition) -> Validator:
    """Check what the providers will insist on: a valid name and an object schema; return
    the validator of the arguments."""
    if not TOOL_NAME_PATTERN.match(definition.name):
        raise ToolDefinitionError(
            f"tool name {definition.name!r} must be 1-64 letters, digits, '_' or '-'"
        )
    if not definition.description.strip():
        raise ToolDefinitionError(f"tool {definition.name!r} needs a description for the model")
    parameters = definition.parameters
    if not isinstance(parameters, dict) or parameters.get("type") != "object":
        raise ToolDefinitionError(
            f"the parameters of {definition.name!r} must be a JSON schema of type 'object'"
        )
    try:
        return _schema_validator(parameters)
    except SchemaError as error:
        raise ToolDefinitionError(
            f"the parameters of {definition.name!r} are not a valid JSON schema: {error.message}"
        ) from error


def _schema_validator(schema: dict[str, Any]) -> Validator:
    # `@tool` keeps one definition per function, registered anew for every run: its schema
    # is the same object each time, so its validator is found without encoding it again.
    known = _validator_of_schema.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    validator = _validator_by_content(schema)
    _validator_of_schema[id(schema)] = (schema, validator)
    if len(_validator_of_schema) > _VALIDATORS_KEPT:
        _validator_of_schema.pop(next(iter(_validator_of_schema)))
    return validator


def _validator_by_content(schema: dict[str, Any]) -> Validator:
    try:
        key = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError):
        return _checked_validator(schema)
    return _cached_validator(key)


# Checking a schema against its metaschema takes milliseconds, and the same tools are
# registered anew for every run: a schema is checked once per process.
@functools.lru_cache(maxsize=256)
def _cached_validator(schema_json: str) -> Validator:
    return _checked_validator(json.loads(schema_json))


def _checked_validator(schema: dict[str, Any]) -> Validator:
    validator_class = jsonschema.validators.validator_for(
        schema, default=jsonschema.Draft202012Validator
    )
    validator_class.check_schema(schema)
    return validator_class(schema)


def format_tools(tools: Iterable[ToolDefinition], provider: str) -> list[dict[str, Any]]:
    """The tool list in the wire shape a provider's API expects."""
    key = provider.strip().lower()
    if key in _ANTHROPIC:
        return [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in tools
        ]
    if key in _OPENAI_STYLE:
        return [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in tools
        ]
    known = ", ".join(sorted(_ANTHROPIC | _OPENAI_STYLE))
    raise ConfigurationError(f"no tool format for provider {provider!r} (known: {known})")


def describe_parameters(schema: dict[str, Any]) -> str:
    """One line naming each parameter, its type and whether it is required."""
    properties: dict[str, Any] = schema.get("properties") or {}
    if not properties:
        return "It takes no arguments."
    required = set(schema.get("required") or ())
    parts = []
    for name, spec in properties.items():
        kind = _describe_type(spec if isinstance(spec, dict) else {})
        parts.append(f"{name} ({kind}, {'required' if name in required else 'optional'})")
    return "Expected parameters: " + "; ".join(parts) + "."


def to_outcome(value: Any) -> ToolOutcome:
    """Turn whatever a handler returned into an outcome."""
    if isinstance(value, ToolOutcome):
        return value
    if isinstance(value, str):
        return ToolOutcome(content=value)
    if value is None:
        return ToolOutcome(content="Done (the tool returned no output).")
    if isinstance(value, BaseModel):
        return ToolOutcome(content=value.model_dump_json(), data=value.model_dump(mode="json"))
    try:
        content = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        content = str(value)
    data = value if isinstance(value, dict) else None
    return ToolOutcome(content=content, data=data)


async def _invoke(tool: RegisteredTool, arguments: dict[str, Any]) -> Any:
    if tool.is_async:
        value = await tool.handler(**arguments)
    else:
        # The thread cannot be stopped at the deadline; it runs on, its result ignored.
        value = await asyncio.to_thread(tool.handler, **arguments)
    if inspect.isawaitable(value):
        value = await value
    return value


def _failure_from_exception(name: str, error: Exception) -> ToolOutcome:
    if isinstance(error, ToolError):
        # A handler raising from the tool error tree chose its words for the model.
        return ToolOutcome.failure(str(error), error_type=type(error).__name__)
    logger.exception("tool %s raised", name, extra={"tool_name": name})
    detail = str(error) or "no details"
    return ToolOutcome.failure(
        f"Tool {name!r} failed with {type(error).__name__}: {_clip(detail)}",
        error_type=ToolExecutionError.__name__,
    )


def _describe_type(spec: dict[str, Any]) -> str:
    if "enum" in spec:
        return "one of " + ", ".join(json.dumps(v) for v in spec["enum"])
    kind = spec.get("type")
    if kind == "array":
        items = spec.get("items")
        return f"list of {_describe_type(items) if isinstance(items, dict) else 'values'}"
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    if kind:
        return str(kind)
    if "$ref" in spec:
        return "object"
    for combinator in ("anyOf", "oneOf"):
        if combinator in spec:
            return " or ".join(_describe_type(s) for s in spec[combinator] if isinstance(s, dict))
    return "any"


def _error_location(error: jsonschema.ValidationError) -> str:
    path = ".".join(str(part) for part in error.absolute_path)
    return f"{path}: " if path else ""


def _clip(text: str) -> str:
    if len(text) <= MAX_ECHOED_CHARS:
        return text
    return text[:MAX_ECHOED_CHARS] + f"... ({len(text) - MAX_ECHOED_CHARS} more characters)"
