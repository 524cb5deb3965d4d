"""What the agent loop's tests share: release tools over a summary, the scripted turns of an
assessment, an agent on a scripted provider, and the events of one run."""

from __future__ import annotations

from collections.abc import Sequence

from agent.cancel import CancelToken
from agent.events import AgentEvent
from agent.loop import Agent, AgentConfig
from agent.store import InMemoryStore
from agent.testing.fakes import FakeTools, PassThroughContext, ScriptedProvider, call, reply

SUMMARY = {
    "version": "v2.1.0",
    "changes": ["Added payment processing"],
    "tests": {"passed": 142, "failed": 2, "skipped": 5},
    "deployment_metrics": {"error_rate": 0.06, "response_time_p95": 450},
}


def release_tools(summary: dict | Exception = SUMMARY) -> FakeTools:
    def get_release_summary(release_id: str) -> dict:
        """Fetch the release summary."""
        if isinstance(summary, Exception):
            raise summary
        return summary

    def file_risk_report(release_id: str, severity: str, findings: list[str]) -> dict:
        """File the report."""
        return {
            "report_id": "rep_1",
            "release_id": release_id,
            "severity": severity,
            "findings": findings,
        }

    return FakeTools(
        {"get_release_summary": get_release_summary, "file_risk_report": file_risk_report},
        terminal=["file_risk_report"],
    )


def assessment_turns() -> list:
    return [
        reply("Fetching.", call("get_release_summary", "c1", release_id="v2.1.0")),
        reply(
            "High risk.",
            call(
                "file_risk_report",
                "c2",
                release_id="v2.1.0",
                severity="high",
                findings=["error_rate 0.06"],
            ),
            input_tokens=300,
        ),
    ]


def make_agent(
    turns: Sequence,
    tools: FakeTools | None = None,
    *,
    store: InMemoryStore | None = None,
    context: PassThroughContext | None = None,
    **config: object,
) -> tuple[Agent, ScriptedProvider]:
    provider = ScriptedProvider(turns)
    agent = Agent(
        provider,
        tools if tools is not None else release_tools(),
        context=context or PassThroughContext(),
        store=store,
        config=AgentConfig(**config),  # type: ignore[arg-type]
    )
    return agent, provider


async def collect(agent: Agent, content: str, cancel: CancelToken | None = None) -> list:
    return [event async for event in agent.send_message(content, cancel)]


def kinds(events: list[AgentEvent]) -> list[str]:
    return [e.kind for e in events if e.kind != "text_delta"]
