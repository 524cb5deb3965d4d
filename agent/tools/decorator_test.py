from __future__ import annotations

import threading
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from agent.errors import InvalidArgumentsError
from agent.messages import ToolCall
from agent.tools.decorator import Tool, method_tool, parse_docstring, tool
from agent.tools.registry import ToolDefinitionError, ToolRegistry


class Window(BaseModel):
    start: str
    end: str = "now"


@tool
def compare_releases(
    release_id: str,
    baseline: Literal["previous", "last-week"],
    metrics: list[str],
    limit: int = 10,
    window: Window | None = None,
    note: Annotated[str, Field(description="Free text.")] = "",
) -> str:
    """Compare a release with a baseline.

    Use it after the summary, when
    a metric looks off.

    - one line
    - another

    Args:
        release_id (str): The release under assessment,
            e.g. "v2.1.0".
        baseline: Which baseline to compare with.
        metrics: Metric names.

    Returns:
        A comparison table.
    """
    return f"{release_id} {baseline} {metrics} {limit} {window!r}"


def schema() -> dict[str, Any]:
    return compare_releases.definition.parameters


def test_the_name_and_description_come_from_the_function() -> None:
    definition = compare_releases.definition
    assert definition.name == "compare_releases"
    assert definition.description == (
        "Compare a release with a baseline.\n\n"
        "Use it after the summary, when a metric looks off.\n\n"
        "- one line\n- another"
    )


def test_types_become_a_json_schema() -> None:
    properties = schema()["properties"]
    assert schema()["type"] == "object"
    assert schema()["required"] == ["release_id", "baseline", "metrics"]
    assert properties["release_id"]["type"] == "string"
    assert properties["metrics"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": "Metric names.",
    }
    assert properties["limit"] == {"type": "integer", "default": 10}
    assert "$ref" in str(properties["window"]) and "Window" in schema()["$defs"]


def test_literals_become_enums() -> None:
    assert schema()["properties"]["baseline"] == {
        "type": "string",
        "enum": ["previous", "last-week"],
        "description": "Which baseline to compare with.",
    }


def test_parameter_descriptions_come_from_the_args_section_or_field() -> None:
    properties = schema()["properties"]
    assert properties["release_id"]["description"] == 'The release under assessment, e.g. "v2.1.0".'
    assert properties["note"]["description"] == "Free text."


def test_generated_titles_are_dropped() -> None:
    assert "title" not in str(schema())


def test_the_decorated_function_still_calls_like_itself() -> None:
    assert compare_releases("v1", "previous", ["p95"]) == "v1 previous ['p95'] 10 None"
    assert isinstance(compare_releases, Tool)
    assert compare_releases.__name__ == "compare_releases"
    assert repr(compare_releases) == "<tool compare_releases>"


async def test_async_functions_stay_async() -> None:
    @tool
    async def fetch(release_id: str) -> str:
        """Fetch a release."""
        return release_id

    assert await fetch("v1") == "v1"


def test_options_override_name_description_and_timeout() -> None:
    @tool(name="lookup", description="Look it up.", timeout_s=3.0)
    def find(query: str) -> str:
        """Ignored here."""
        return query

    assert (find.definition.name, find.definition.description, find.timeout_s) == (
        "lookup",
        "Look it up.",
        3.0,
    )


def test_unannotated_parameters_are_strings() -> None:
    @tool
    def echo(text) -> str:  # type: ignore[no-untyped-def]
        """Echo."""
        return str(text)

    assert echo.definition.parameters["properties"]["text"]["type"] == "string"


def test_parameters_may_share_names_with_model_attributes() -> None:
    @tool
    def dump(json: str, schema: int = 1) -> str:
        """Dump."""
        return f"{json}{schema}"

    assert list(dump.definition.parameters["properties"]) == ["json", "schema"]
    assert dump.convert_arguments({"json": "x"}) == {"json": "x", "schema": 1}


def no_doc(x: str) -> str:
    return x


def star_args(*values: str) -> str:
    """Star."""
    return ""


def star_kwargs(**values: str) -> str:
    """Star."""
    return ""


def positional_only(x: str, /) -> str:
    """Positional."""
    return x


def unresolvable(x: NoSuchType) -> str:  # type: ignore[name-defined]  # noqa: F821
    """Broken hint."""
    return ""


@pytest.mark.parametrize(
    ("function", "options", "problem"),
    [
        (no_doc, {}, "needs a description"),
        (star_args, {}, "passable by keyword"),
        (star_kwargs, {}, "passable by keyword"),
        (positional_only, {}, "passable by keyword"),
        (unresolvable, {}, "type hints"),
        (no_doc, {"name": "bad name", "description": "d"}, "invalid tool"),
    ],
)
def test_badly_defined_tools_are_refused(
    function: Any, options: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ToolDefinitionError, match=problem):
        tool(**options)(function)


def test_arguments_are_converted_to_the_annotated_types() -> None:
    converted = compare_releases.convert_arguments(
        {
            "release_id": "v1",
            "baseline": "previous",
            "metrics": ["p95"],
            "window": {"start": "monday"},
            "unexpected": True,
        }
    )
    assert converted["window"] == Window(start="monday")
    assert "unexpected" not in converted
    assert converted["limit"] == 10


def test_arguments_pydantic_refuses_are_invalid_arguments() -> None:
    with pytest.raises(InvalidArgumentsError, match=r"window\.start: Field required"):
        compare_releases.convert_arguments(
            {"release_id": "v1", "baseline": "previous", "metrics": [], "window": {}}
        )


async def test_the_registry_runs_decorated_tools_sync_in_a_thread_and_async_awaited() -> None:
    loop_thread = threading.current_thread()

    @tool
    def where() -> str:
        """Where am I."""
        return "thread" if threading.current_thread() is not loop_thread else "loop"

    @tool
    async def where_async() -> str:
        """Where am I."""
        return "loop" if threading.current_thread() is loop_thread else "thread"

    registry = ToolRegistry()
    registry.register_function(where)
    registry.register_function(where_async)
    assert (await registry.execute(ToolCall(id="1", name="where"))).content == "thread"
    assert (await registry.execute(ToolCall(id="2", name="where_async"))).content == "loop"


async def test_the_registry_reports_conversion_failures_to_the_model() -> None:
    registry = ToolRegistry()
    registry.register_function(compare_releases)
    result = await registry.execute(
        ToolCall(
            id="1",
            name="compare_releases",
            arguments={"release_id": "v1", "baseline": "previous", "metrics": [], "window": {}},
        )
    )
    assert (result.success, result.error_type) == (False, "InvalidArgumentsError")


@pytest.mark.parametrize(
    ("docstring", "description", "arguments"),
    [
        ("", "", {}),
        ("One line.", "One line.", {}),
        (
            """Summary.

            Arguments:
                a: First.
                b (int, optional): Second,
                    continued.

                c: After a blank line.
            Raises:
                ValueError: never an argument.
            """,
            "Summary.",
            {"a": "First.", "b": "Second, continued.", "c": "After a blank line."},
        ),
        (
            """Summary.

            Args:
                *values: Stars are stripped.
                **options: So are these.
            """,
            "Summary.",
            {"values": "Stars are stripped.", "options": "So are these."},
        ),
        ("Text.\n\n1. first\n2. second", "Text.\n\n1. first\n2. second", {}),
    ],
)
def test_docstrings_are_parsed(docstring: str, description: str, arguments: dict[str, str]) -> None:
    assert parse_docstring(docstring) == (description, arguments)


class _Lookup:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def lookup(self, release_id: str) -> str:
        """Look a release up.

        Args:
            release_id: The release.
        """
        return self.prefix + release_id


def test_tools_made_again_from_one_function_reuse_its_schema() -> None:
    # The release tools are made anew for every run, from the same methods.
    first, second = _Lookup("a:"), _Lookup("b:")
    one, other = tool(first.lookup), tool(second.lookup)
    assert one.definition is other.definition
    assert one.handler(release_id="v1") == "a:v1"
    assert other.handler(release_id="v1") == "b:v1"
    renamed = tool(name="find")(first.lookup)
    assert renamed.definition.name == "find"
    assert renamed.definition is not one.definition


def test_a_tool_that_cannot_be_derived_fails_every_time() -> None:
    def undocumented(x: int) -> int:
        return x

    for _ in range(2):
        with pytest.raises(ToolDefinitionError, match="needs a description"):
            tool(undocumented)


class _Counter:
    def __init__(self, start: int) -> None:
        self.start = start

    async def add(self, amount: int) -> int:
        """Add to the counter's start.

        Args:
            amount: How much to add.
        """
        return self.start + amount


async def test_a_method_tool_is_made_once_and_runs_on_each_instance_its_own_way() -> None:
    one, two = _Counter(1), _Counter(100)
    first = method_tool(one.add, name="add", timeout_s=5)
    second = method_tool(two.add, name="add", timeout_s=5)
    assert first.definition is second.definition
    assert second.definition == tool(name="add", timeout_s=5)(two.add).definition
    assert (second.__name__, second.__doc__, second.__wrapped__) == (
        "add",
        two.add.__doc__,
        two.add,
    )
    assert await first.handler(amount=2) == 3
    assert await second.handler(amount=2) == 102
    assert await second(5) == 105


def test_a_tool_is_rebound_only_to_its_own_function() -> None:
    counter = _Counter(1)
    with pytest.raises(ValueError, match="not the function"):
        method_tool(counter.add, name="add", timeout_s=5).rebound(counter.__init__)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a bound method"):
        method_tool(compare_releases, name="compare", timeout_s=5)  # type: ignore[arg-type]
