"""Unknown evidence is refused, not filed (issue 40, item 1), through both prompt profiles.

Real: the runner, the agent `build_agent` composes for the model's name (a 1.5B model gets the
small profile, which cites the policy's evidence by key; a large one the default profile), the
release API served in-process, the policy, the database. respx plays the model over OpenAI's
streaming wire format. Measured on the local model: it cited `E1` … `E18` where the summary
showed `E1` only, and 17 findings reading "E2" … "E18" were stored.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import respx
from asgiref.sync import SyncToAsync
from django.db import connections

from agent.providers.protocol import ModelResponse
from agent.testing.fakes import call, reply
from agent.testing.wire import mount
from assessments import runner, services
from releases.models import Conversation, Release, RiskReport, RunStatus
from sources import judging

pytestmark = pytest.mark.django_db(transaction=True)

VERSION = "v3.0.2"
BASE_URL = "http://openai.test/v1"
SMALL, LARGE = "qwen2.5-coder-1.5b-instruct", "gpt-4o"
UNKNOWN = [f"E{n}" for n in range(1, 19)]
BARE_KEY = re.compile(r"^\s*E\d+\s*$")


@pytest.fixture(autouse=True, scope="module")
def _close_thread_connections() -> Iterator[None]:
    yield
    SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=10)


@pytest.fixture(autouse=True)
def _key(settings: Any) -> None:
    from pydantic import SecretStr

    settings.CONFIG = settings.CONFIG.model_copy(
        update={"openai_api_key": SecretStr("sk-openai-test-key-123456")}
    )


@pytest.fixture
def risky(make_release: Callable[..., Release]) -> Release:
    return make_risky(make_release)


def make_risky(make_release: Callable[..., Release]) -> Release:
    """A release the policy calls high: 12 failed tests and a 9 % error rate."""
    return make_release(
        VERSION,
        changes=["Encrypt stored tokens", "Schema change for sessions"],
        test_results={"passed": 130, "failed": 12, "skipped": 0, "failing_tests": ["test_login"]},
        deployment_metrics={"error_rate": 0.09, "response_time_p95": 480},
    )


def assess(release: Release, model: str, turns: list[ModelResponse]) -> tuple[Conversation, Any]:
    from detective_site.asgi import application

    run = services.start_assessment(release, None, provider="openai", model=model)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=application))
    with respx.mock(assert_all_called=False) as router:
        server = mount(router, "openai", BASE_URL, turns, model=model)
        runner.run_assessment(
            str(run.pk), api_url="http://localhost", http_client=client, base_url=BASE_URL
        )
    run.refresh_from_db()
    return run, server


def brief_filing(call_id: str, evidence: list[str], severity: str = "high") -> ModelResponse:
    arguments = {"release_id": VERSION, "severity": severity, "evidence": evidence}
    return reply("Filing.", call("file_risk_report", call_id, **arguments))


def full_filing(call_id: str, findings: list[str]) -> ModelResponse:
    arguments = {"release_id": VERSION, "severity": "high", "findings": findings, "summary": ""}
    return reply("Filing.", call("file_risk_report", call_id, **arguments))


def summary_turn() -> ModelResponse:
    return reply("", call("get_release_summary", "call_summary", release_id=VERSION))


def tool_results(server: Any, request: int) -> list[str]:
    return [
        str(m.get("content"))
        for m in server.requests[request]["messages"]
        if m.get("role") == "tool"
    ]


def shown_keys(release: Release) -> dict[str, str]:
    evidence = judging.judge_release(release).for_agent(brief=True)["policy"]["evidence"]
    assert isinstance(evidence, dict)
    return evidence


def test_small_profile_unknown_keys_go_back_once_with_the_keys_it_may_use(
    risky: Release,
) -> None:
    keys = shown_keys(risky)
    assert 0 < len(keys) < len(UNKNOWN)
    turns = [
        brief_filing("call_1", UNKNOWN),
        brief_filing("call_2", list(keys)),
        reply("Filed."),
    ]
    run, server = assess(risky, SMALL, turns)

    assert run.status == RunStatus.SUCCEEDED, run.error
    refusal = tool_results(server, 1)[-1]
    assert "was not filed" in refusal
    assert f"it showed {', '.join(keys)}" in refusal
    report = RiskReport.objects.get(conversation=run)
    assert report.findings[: len(keys)] == list(keys.values())
    assert not any(BARE_KEY.match(f) for f in report.findings)
    assert not report.needs_review, report.review_reasons


def test_small_profile_unknown_keys_twice_go_to_a_person_and_are_never_stored(
    risky: Release,
) -> None:
    keys = shown_keys(risky)
    turns = [brief_filing("call_1", UNKNOWN), brief_filing("call_2", UNKNOWN), reply("Filed.")]
    run, _ = assess(risky, SMALL, turns)

    assert run.status == RunStatus.SUCCEEDED, run.error
    report = RiskReport.objects.get(conversation=run)
    assert not any(BARE_KEY.match(f) for f in report.findings), report.findings
    # The keys it may cite were its findings; the rest of the policy's evidence is added.
    assert set(keys.values()) <= set(report.findings)
    assert report.needs_review
    reasons = " ".join(report.review_reasons)
    unknown = ", ".join(k for k in UNKNOWN if k not in keys)
    assert f"never showed ({unknown})" in reasons
    assert "left out of the stored report" in reasons
    assert not any(BARE_KEY.match(p["text"]) for p in report.grounding)


@pytest.mark.parametrize(
    ("evidence", "problem"),
    [
        (["E1", "E1"], "finding 2 repeats finding 1"),
        (["E1", " "], "evidence item 2 is empty. List only the keys of the summary's evidence"),
    ],
)
def test_small_profile_empty_or_repeated_keys_are_refused(
    risky: Release, evidence: list[str], problem: str
) -> None:
    turns = [brief_filing("call_1", evidence), brief_filing("call_2", ["E1"]), reply("Filed.")]
    run, server = assess(risky, SMALL, turns)

    assert run.status == RunStatus.SUCCEEDED, run.error
    assert problem in tool_results(server, 1)[-1]
    report = RiskReport.objects.get(conversation=run)
    assert report.findings.count(shown_keys(risky)["E1"]) == 1


def test_default_profile_findings_without_content_are_refused_then_left_out(
    risky: Release,
) -> None:
    said = "12 failed tests, among them test_login, and an error rate of 9 %."
    bad = [said, "E17", said, "E2."]
    turns = [summary_turn(), full_filing("call_1", bad), full_filing("call_2", bad)]
    turns.append(reply("Filed."))
    run, server = assess(risky, LARGE, turns)

    assert run.status == RunStatus.SUCCEEDED, run.error
    refusal = tool_results(server, 2)[-1]
    assert "finding 3 repeats finding 1" in refusal
    assert "evidence keys the release's summary never showed" in refusal
    report = RiskReport.objects.get(conversation=run)
    assert report.model_findings == [said]
    assert report.needs_review
    assert any("finding 3 repeats finding 1" in r for r in report.review_reasons)
    assert any("left out of the stored report" in r for r in report.review_reasons)
