"""`@tool`: a tool definition from a plain function's signature and docstring.

```python
@tool
async def get_weather(city: str, unit: Literal["c", "f"] = "c") -> str:
    \"\"\"Current weather for a city.

    Args:
        city: The city's name, e.g. "Lisbon".
        unit: Celsius or Fahrenheit.
    \"\"\"
```

The JSON schema comes from the type hints through pydantic (a `Literal` becomes an `enum`,
a default makes a parameter optional), the description from the docstring's text before
its first section, and each parameter's description from its Google-style `Args:` entry.
When the tool runs, pydantic validates the arguments again and converts them to the
annotated types (nested models, enums...) before the function is called. The decorated
object still calls like the function, sync or async.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import re
import types
import typing
import weakref
from collections.abc import Callable
from typing import Any, Generic, ParamSpec, TypeVar, overload

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from agent.errors import InvalidArgumentsError
from agent.messages import ToolDefinition
from agent.tools.registry import DEFAULT_TIMEOUT_S, ToolDefinitionError

P = ParamSpec("P")
R = TypeVar("R")

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Returns?|Yields?|Raises|Examples?|"
    r"Notes?|Attributes|See Also|Warnings?|Todo):\s*$"
)
_ARGS_SECTIONS = frozenset({"Args", "Arguments", "Parameters", "Params", "Keyword Args"})
_LIST_ITEM = re.compile(r"^([-*•]|\d+[.)])\s")
_ARG_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


class Tool(Generic[P, R]):
    """A function made into a tool. Calling it calls the function unchanged."""

    def __init__(
        self,
        function: Callable[P, R],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        functools.update_wrapper(self, function)
        self._function = function
        self._timeout_s = timeout_s
        self._is_async = inspect.iscoroutinefunction(function)
        tool_name = name or getattr(function, "__name__", "")
        self._model, self._parameter_of_field, self._definition = _spec(
            function, tool_name, description
        )
        self._handler = self._make_handler()

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    @property
    def timeout_s(self) -> float:
        return self._timeout_s

    @property
    def handler_is_async(self) -> bool:
        """Whether `handler` is a coroutine function (it is when the function is)."""
        return self._is_async

    @property
    def handler(self) -> Callable[..., Any]:
        """What the registry runs: validates and converts the arguments, then calls."""
        return self._handler

    def _make_handler(self) -> Callable[..., Any]:
        function: Callable[..., Any] = self._function
        if self._is_async:

            async def run_async(**arguments: Any) -> Any:
                return await function(**self.convert_arguments(arguments))

            return run_async

        def run(**arguments: Any) -> Any:
            return function(**self.convert_arguments(arguments))

        return run

    def rebound(self, function: Callable[P, R]) -> Tool[P, R]:
        """This tool over `function`, the same function bound to another instance (another
        run's release tools): the arguments model, the definition and the wrapper's
        attributes are this tool's, not derived again."""
        mine = self._function
        if type(function) is not type(mine) or getattr(function, "__func__", function) is not (
            getattr(mine, "__func__", mine)
        ):
            raise ValueError(f"{function!r} is not the function of {self!r}")
        other: Tool[P, R] = object.__new__(Tool)
        other.__dict__.update(self.__dict__)
        other._function = function
        other.__wrapped__ = function  # type: ignore[attr-defined]
        other._handler = other._make_handler()
        return other

    def convert_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        try:
            validated = self._model.model_validate(arguments)
        except pydantic.ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in error.errors()
            )
            raise InvalidArgumentsError(
                f"Invalid arguments for {self._definition.name!r}: {problems}"
            ) from error
        return {
            parameter: getattr(validated, field)
            for field, parameter in self._parameter_of_field.items()
        }

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<tool {self._definition.name}>"


@overload
def tool(function: Callable[P, R], /) -> Tool[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> Callable[[Callable[P, R]], Tool[P, R]]: ...


def tool(
    function: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> Tool[P, R] | Callable[[Callable[P, R]], Tool[P, R]]:
    """Make a function a tool: `@tool`, or `@tool(name=..., description=..., timeout_s=...)`."""

    def decorate(f: Callable[P, R]) -> Tool[P, R]:
        return Tool(f, name=name, description=description, timeout_s=timeout_s)

    return decorate if function is None else decorate(function)


# Bound to no instance: the template of a method's tool is never run, only rebound.
_NO_INSTANCE = object()
# (function, name, timeout) -> the template of a method's tool (`method_tool`).
_method_tools: dict[tuple[Any, ...], Tool[..., Any]] = {}
_METHOD_TOOLS_KEPT = 256


def method_tool(method: Callable[P, R], *, name: str, timeout_s: float) -> Tool[P, R]:
    """`tool(name=name, timeout_s=timeout_s)(method)` for a bound method, made once a process
    for its function and rebound to each instance: the release tools are made for every run,
    and making a tool (its wrapper's attributes, its definition found again) was most of
    building a run's agent. The template is bound to no instance, so it keeps none alive."""
    function = getattr(method, "__func__", None)
    if function is None:
        raise ValueError(f"{method!r} is not a bound method")
    key = (function, name, timeout_s)
    template = _method_tools.get(key)
    if template is None:
        if len(_method_tools) >= _METHOD_TOOLS_KEPT:
            _method_tools.clear()
        template = _method_tools[key] = Tool(
            types.MethodType(function, _NO_INSTANCE), name=name, timeout_s=timeout_s
        )
    return template.rebound(method)


_Spec = tuple[type[BaseModel], dict[str, str], ToolDefinition]
# Deriving a tool from its signature (pydantic's create_model, then the JSON schema) costs
# milliseconds, and the release tools are made anew for every run from the same methods:
# what a function yields is kept for as long as the function lives.
_specs: weakref.WeakKeyDictionary[Callable[..., Any], dict[tuple[Any, ...], _Spec]] = (
    weakref.WeakKeyDictionary()
)


def _spec(function: Callable[..., Any], tool_name: str, description: str | None) -> _Spec:
    """The arguments model, field-to-parameter map and definition of a tool."""
    # A bound method is keyed by its function: every instance has the same signature.
    target = getattr(function, "__func__", function)
    key = (target is not function, tool_name, description, getattr(function, "__doc__", None))
    try:
        cached = _specs.get(target)
    except TypeError:  # neither hashable nor weakly referenceable: not cached
        cached = None
    if cached is not None and key in cached:
        return cached[key]
    spec = _derive_spec(function, tool_name, description)
    with contextlib.suppress(TypeError):
        _specs.setdefault(target, {})[key] = spec
    return spec


def _derive_spec(function: Callable[..., Any], tool_name: str, description: str | None) -> _Spec:
    summary, argument_docs = parse_docstring(inspect.getdoc(function) or "")
    tool_description = (description or summary).strip()
    if not tool_description:
        raise ToolDefinitionError(
            f"tool {tool_name!r} needs a description: write a docstring or pass description=..."
        )
    model, parameter_of_field = _arguments_model(function, tool_name, argument_docs)
    try:
        definition = ToolDefinition(
            name=tool_name,
            description=tool_description,
            parameters=_clean_schema(model.model_json_schema()),
        )
    except pydantic.ValidationError as error:
        raise ToolDefinitionError(f"invalid tool {tool_name!r}: {error}") from error
    return model, parameter_of_field, definition


def parse_docstring(docstring: str) -> tuple[str, dict[str, str]]:
    """The text before the first section, and the descriptions of the `Args:` entries."""
    description: list[str] = []
    arguments: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    entry_indent: int | None = None
    for line in inspect.cleandoc(docstring).splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        header = _SECTION.match(stripped) if indent == 0 else None
        if header:
            section, current, entry_indent = header.group(1), None, None
            continue
        if section is None:
            description.append(line)
            continue
        if section not in _ARGS_SECTIONS or not stripped:
            continue
        entry = _ARG_ENTRY.match(stripped)
        if entry and (entry_indent is None or indent <= entry_indent):
            entry_indent = indent
            current = entry.group(1)
            arguments[current] = entry.group(2).strip()
        elif current is not None:
            arguments[current] = f"{arguments[current]} {stripped}".strip()
    return _reflow(description), arguments


def _reflow(lines: list[str]) -> str:
    """Join the hard-wrapped lines of each paragraph; keep paragraphs and list items."""
    paragraphs: list[list[str]] = [[]]
    for line in lines:
        stripped = line.strip()
        if not stripped:
            if paragraphs[-1]:
                paragraphs.append([])
        elif not paragraphs[-1] or _LIST_ITEM.match(stripped):
            paragraphs[-1].append(stripped)
        else:
            paragraphs[-1][-1] += " " + stripped
    return "\n\n".join("\n".join(p) for p in paragraphs if p)


def _arguments_model(
    function: Callable[..., Any], tool_name: str, argument_docs: dict[str, str]
) -> tuple[type[BaseModel], dict[str, str]]:
    try:
        hints = typing.get_type_hints(function, include_extras=True)
    except (NameError, TypeError) as error:
        raise ToolDefinitionError(
            f"cannot resolve the type hints of tool {tool_name!r}: {error}"
        ) from error
    fields: dict[str, Any] = {}
    parameter_of_field: dict[str, str] = {}
    for index, parameter in enumerate(inspect.signature(function).parameters.values()):
        if parameter.kind not in (
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            inspect.Parameter.KEYWORD_ONLY,
        ):
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameter {parameter.name!r} must be passable by "
                "keyword (no *args, **kwargs or positional-only parameters)"
            )
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        options: dict[str, Any] = {"alias": parameter.name}
        if parameter.name in argument_docs:
            options["description"] = argument_docs[parameter.name]
        # Aliased field names, so that parameters called `json` or `schema` do not
        # collide with BaseModel's own attributes.
        field = f"p{index}"
        fields[field] = (hints.get(parameter.name, str), Field(default, **options))
        parameter_of_field[field] = parameter.name
    model = pydantic.create_model(
        f"{tool_name}_arguments",
        __config__=ConfigDict(extra="ignore", arbitrary_types_allowed=False),
        **fields,
    )
    return model, parameter_of_field


def _clean_schema(schema: Any) -> Any:
    """Drop pydantic's generated titles: noise the model would pay tokens for."""
    if not isinstance(schema, dict):
        return schema
    cleaned = {k: v for k, v in schema.items() if not (k == "title" and isinstance(v, str))}
    for key in ("properties", "$defs", "patternProperties"):
        if isinstance(cleaned.get(key), dict):
            cleaned[key] = {name: _clean_schema(s) for name, s in cleaned[key].items()}
    for key in ("items", "additionalProperties", "not"):
        if isinstance(cleaned.get(key), dict):
            cleaned[key] = _clean_schema(cleaned[key])
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        if isinstance(cleaned.get(key), list):
            cleaned[key] = [_clean_schema(s) for s in cleaned[key]]
    return cleaned
