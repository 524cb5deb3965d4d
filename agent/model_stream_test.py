"""The model's answer as a stream whatever the configuration (agent/model_stream.py): with
streaming off, one `complete()` call per model call, its retries reported, its answer counted
whole against the caps."""

from __future__ import annotations

from agent.errors import ServerError
from agent.loop import Agent, AgentConfig
from agent.providers.protocol import (
    ModelRequest,
    ModelResponse,
)
from agent.retry import RetryingProvider
from agent.testing.fakes import PassThroughContext, ScriptedProvider, reply
from agent.testing.runs import assessment_turns, collect, kinds, make_agent, release_tools


async def test_non_streaming_mode_uses_complete() -> None:
    agent, _ = make_agent(assessment_turns(), stream=False)
    events = await collect(agent, "Assess v2.1.0")
    assert "text_delta" not in [e.kind for e in events]
    assert events[-1].reason == "report_filed"


async def test_non_streaming_mode_reports_the_retries_of_each_call() -> None:
    failures = [ServerError("overloaded", status_code=529)]

    class FlakyOnce(ScriptedProvider):
        async def complete(self, request: ModelRequest) -> ModelResponse:
            if failures:
                raise failures.pop()
            return await super().complete(request)

    async def no_sleep(_: float) -> None:
        return None

    provider = RetryingProvider(FlakyOnce(assessment_turns()), sleep=no_sleep)
    agent = Agent(
        provider, release_tools(), context=PassThroughContext(), config=AgentConfig(stream=False)
    )
    events = await collect(agent, "Assess v2.1.0")
    [retry] = [e for e in events if e.kind == "retry_scheduled"]
    assert retry.attempt == 1 and retry.error_type == "ServerError"
    # Reported before the response of the call it belongs to.
    assert kinds(events).index("retry_scheduled") < kinds(events).index("model_responded")
    assert events[-1].reason == "report_filed"


async def test_a_non_streaming_answer_counts_against_the_output_cap() -> None:
    agent, _ = make_agent([reply("x" * 2_000)], stream=False, max_output_chars=1_000)
    events = await collect(agent, "hi")
    assert events[-1].kind == "run_failed" and "OUTPUT_CHARS" in events[-1].message
