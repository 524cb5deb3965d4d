from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import agent


@pytest.mark.parametrize("name", agent.__all__)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(agent, name) is not None
    assert name in dir(agent)


def test_all_lists_exactly_the_exports() -> None:
    assert sorted(agent.__all__) == sorted(agent._EXPORTS)


def test_unknown_names_raise_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        agent.nope  # noqa: B018


def test_public_names_are_the_defining_modules_objects() -> None:
    assert agent.Agent is importlib.import_module("agent.loop").Agent
    assert agent.build_agent is importlib.import_module("agent.config").build_agent


def test_importing_a_small_module_stays_light() -> None:
    code = "import sys, agent.errors; print('opentelemetry' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
