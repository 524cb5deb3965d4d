from __future__ import annotations

import pytest

from agent.cancel import CancelToken
from agent.errors import ConfigurationError, StreamError
from agent.messages import Message
from agent.providers.protocol import ModelRequest, StreamEnd, StreamTextDelta
from agent.reasoning import (
    DirectStrategy,
    PlanThenInvestigate,
    ReasoningStrategy,
    SelfCheckStrategy,
    get_strategy,
)
from agent.testing.fakes import ScriptedProvider, call, reply

REQUEST = ModelRequest(system="sys", messages=[Message.user("Assess v1")])


async def run(strategy: ReasoningStrategy, provider: ScriptedProvider, cancel=None) -> list:
    return [e async for e in strategy.respond(provider, REQUEST, cancel)]


def ends(events: list) -> list:
    return [e.response for e in events if isinstance(e, StreamEnd)]


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("direct", DirectStrategy),
        ("self_check", SelfCheckStrategy),
        ("self-check", SelfCheckStrategy),
        ("plan", PlanThenInvestigate),
        ("plan_then_investigate", PlanThenInvestigate),
        (" Direct ", DirectStrategy),
    ],
)
def test_get_strategy_by_name(name: str, cls: type) -> None:
    strategy = get_strategy(name)
    assert isinstance(strategy, cls)
    assert isinstance(strategy, ReasoningStrategy)


def test_unknown_strategy_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="known: direct, plan, self_check"):
        get_strategy("tree_of_thoughts")


async def test_direct_makes_one_call_and_relays_its_stream() -> None:
    provider = ScriptedProvider([reply("Hello there")])
    events = await run(DirectStrategy(), provider)
    assert "".join(e.text for e in events if isinstance(e, StreamTextDelta)) == "Hello there"
    assert [r.message.content for r in ends(events)] == ["Hello there"]
    assert provider.requests == [REQUEST]


async def test_a_stream_without_end_is_an_error() -> None:
    provider = ScriptedProvider([[StreamTextDelta(text="cut")]])
    with pytest.raises(StreamError):
        await run(DirectStrategy(), provider)


async def test_self_check_leaves_non_filing_steps_alone() -> None:
    provider = ScriptedProvider([reply("", call("get_release_summary", release_id="v1"))])
    events = await run(SelfCheckStrategy(), provider)
    assert len(ends(events)) == 1
    assert provider.remaining == 0


async def test_self_check_revises_the_filing() -> None:
    draft = call("file_risk_report", "d", release_id="v1", severity="low", findings=["ok"])
    fixed = call("file_risk_report", "f", release_id="v1", severity="high", findings=["6%"])
    provider = ScriptedProvider([reply("Low risk.", draft), reply("Error rate is 6%.", fixed)])
    events = await run(SelfCheckStrategy(), provider)
    first, final = ends(events)
    assert first.message.tool_calls == [draft]
    assert final.message.tool_calls == [fixed]
    assert final.message.content == "Low risk.\n\nError rate is 6%."
    assert final.message.metadata["self_check"] == {
        "draft": {"release_id": "v1", "severity": "low", "findings": ["ok"]},
        "revised": True,
    }
    check = provider.requests[1]
    assert check.messages[:-1] == REQUEST.messages
    instruction = check.messages[-1]
    assert instruction.role == "user"
    assert '"severity": "low"' in instruction.content
    assert "5%" in instruction.content
    assert check.tools == REQUEST.tools


async def test_self_check_keeps_the_draft_when_the_checker_only_talks() -> None:
    draft = call("file_risk_report", "d", release_id="v1", severity="low", findings=["ok"])
    provider = ScriptedProvider([reply("", draft), reply("The severity is right.")])
    events = await run(SelfCheckStrategy(), provider)
    final = ends(events)[-1]
    assert final.message.tool_calls == [draft]
    assert final.message.content == "The severity is right."
    assert final.message.metadata["self_check"]["revised"] is False


async def test_self_check_confirmed_with_same_arguments_is_not_revised() -> None:
    draft = call("file_risk_report", "d", release_id="v1", severity="low", findings=["ok"])
    again = call("file_risk_report", "e", release_id="v1", severity="low", findings=["ok"])
    provider = ScriptedProvider([reply("", draft), reply("", again)])
    final = ends(await run(SelfCheckStrategy(), provider))[-1]
    assert final.message.tool_calls == [again]
    assert final.message.metadata["self_check"]["revised"] is False


async def test_self_check_skips_the_check_once_cancelled() -> None:
    token = CancelToken()
    token.set()
    draft = call("file_risk_report", "d", release_id="v1", severity="low", findings=[])
    provider = ScriptedProvider([reply("", draft), reply("never")])
    events = await run(SelfCheckStrategy(), provider, token)
    assert len(ends(events)) == 1
    assert provider.remaining == 1


async def test_plan_then_investigate_plans_first_then_acts() -> None:
    act = call("get_release_summary", "s", release_id="v1")
    provider = ScriptedProvider([reply("1. Fetch the summary."), reply("Fetching.", act)])
    events = await run(PlanThenInvestigate(), provider)
    plan, final = ends(events)
    assert plan.message.tool_calls == []
    assert final.message.tool_calls == [act]
    assert final.message.content == "1. Fetch the summary.\n\nFetching."
    assert final.message.metadata["plan"] == "1. Fetch the summary."
    plan_request, act_request = provider.requests
    assert "plan" in plan_request.messages[-1].content
    assert [m.role for m in act_request.messages] == ["user", "user", "assistant", "user"]
    assert act_request.tools == REQUEST.tools


async def test_plan_is_skipped_when_the_model_acts_at_once() -> None:
    act = call("get_release_summary", "s", release_id="v1")
    provider = ScriptedProvider([reply("", act)])
    events = await run(PlanThenInvestigate(), provider)
    assert ends(events)[-1].message.tool_calls == [act]
    assert provider.remaining == 0


async def test_plan_only_on_the_first_step_of_a_run() -> None:
    later = ModelRequest(
        messages=[
            Message.user("Assess v1"),
            Message.assistant("", [call("get_release_summary", "s", release_id="v1")]),
            Message(role="tool", content="{}", tool_call_id="s"),
        ]
    )
    provider = ScriptedProvider([reply("done")])
    events = [e async for e in PlanThenInvestigate().respond(provider, later)]
    assert len(ends(events)) == 1
    nudged = ModelRequest(messages=[Message.user("Call the tool.", nudge=True)])
    provider = ScriptedProvider([reply("done")])
    events = [e async for e in PlanThenInvestigate().respond(provider, nudged)]
    assert len(ends(events)) == 1
    provider = ScriptedProvider([reply("done")])
    empty = ModelRequest(messages=[])
    assert len(ends([e async for e in PlanThenInvestigate().respond(provider, empty)])) == 1
