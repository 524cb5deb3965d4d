"""A run always ends with the verdict it reached (issue 21, item 1), through each provider's
wire format.

Real: the runner, the agent (built by `build_agent`, with its adapter parsing the provider's
streaming format), the release API served in-process, the policy, the database. respx plays
the model at the HTTP level (`agent.testing.wire`), in Anthropic's, OpenAI's and Ollama's
formats.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import respx
from asgiref.sync import SyncToAsync
from django.db import connections
from pydantic import SecretStr

from agent.messages import Message, ToolCall, Usage
from agent.providers.protocol import ModelResponse
from agent.providers.wire import RAW_ARGUMENTS_KEY
from agent.testing.fakes import call, reply
from agent.testing.wire import ANTHROPIC_MODEL, OLLAMA_MODEL, OPENAI_MODEL, mount
from assessments import runner, services
from releases.models import Conversation, Release, ReportOrigin, RiskReport, RunStatus
from releases.selectors import release_verdict, with_severity_shown

pytestmark = pytest.mark.django_db(transaction=True)

VERSION = "v2.4.1"
PROVIDERS: dict[str, dict[str, str]] = {
    "anthropic": {"base_url": "http://anthropic.test", "model": ANTHROPIC_MODEL},
    "openai": {"base_url": "http://openai.test/v1", "model": OPENAI_MODEL},
    "ollama": {"base_url": "http://ollama.test", "model": OLLAMA_MODEL},
}


@pytest.fixture(autouse=True, scope="module")
def _close_thread_connections() -> Iterator[None]:
    yield
    SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=10)


@pytest.fixture(autouse=True)
def _keys(settings: Any) -> None:
    settings.CONFIG = settings.CONFIG.model_copy(
        update={
            "anthropic_api_key": SecretStr("sk-ant-test-key-123456"),
            "openai_api_key": SecretStr("sk-openai-test-key-123456"),
        }
    )


@pytest.fixture
def risky(make_release: Callable[..., Release]) -> Release:
    """A release the policy calls high: 12 failed tests and a 9 % error rate."""
    return make_release(
        VERSION,
        changes=["Encrypt stored tokens", "Schema change for sessions"],
        test_results={"passed": 130, "failed": 12, "skipped": 0, "failing_tests": ["test_login"]},
        deployment_metrics={"error_rate": 0.09, "response_time_p95": 480},
    )


def assess(release: Release, kind: str, turns: list[ModelResponse]) -> tuple[Conversation, Any]:
    from detective_site.asgi import application

    provider = PROVIDERS[kind]
    run = services.start_assessment(release, None, provider=kind, model=provider["model"])
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=application))
    with respx.mock(assert_all_called=False) as router:
        model = mount(router, kind, provider["base_url"], turns, model=provider["model"])
        runner.run_assessment(
            str(run.pk),
            api_url="http://localhost",
            http_client=client,
            base_url=provider["base_url"],
        )
    run.refresh_from_db()
    return run, model


def summary_turn() -> ModelResponse:
    return reply("", call("get_release_summary", "call_summary", release_id=VERSION))


def cut_off_turn(call_id: str) -> ModelResponse:
    """The free text repeats itself up to the output limit; the tool call's JSON is cut."""
    cut = ToolCall(
        id=call_id,
        name="file_risk_report",
        arguments={RAW_ARGUMENTS_KEY: '{"release_id":"v2.4.1","severity":"high","findings":["'},
    )
    return ModelResponse(
        message=Message.assistant("The release is risky. " * 20, [cut]),
        usage=Usage(input_tokens=900, output_tokens=1024),
        finish_reason="length",
    )


@pytest.mark.parametrize("kind", sorted(PROVIDERS))
def test_a_low_filing_refused_then_given_up_is_kept_for_a_person_showing_high(
    risky: Release, kind: str
) -> None:
    turns = [
        summary_turn(),
        reply(
            "Filing.",
            call(
                "file_risk_report",
                "call_report",
                release_id=VERSION,
                severity="low",
                findings=["The release looks fine."],
                summary="Low risk.",
            ),
        ),
        reply("The risk report has been filed."),
    ]
    run, model = assess(risky, kind, turns)

    assert len(model.requests) == 3
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.outcome == "kept_refused"
    assert run.headline == "Stored for review: the model did not correct its filing"
    report = RiskReport.objects.get(conversation=run)
    assert (report.severity, report.policy_severity) == ("low", "high")
    assert report.origin == ReportOrigin.REFUSED_FILING
    assert report.needs_review
    assert "did not file a corrected one" in report.review_reasons[0]
    assert any("below the policy's high" in reason for reason in report.review_reasons)
    # The model's words, then the policy's evidence it left out, marked as the policy's.
    assert report.model_findings == ["The release looks fine."]
    assert report.policy_findings and report.findings[1:] == report.policy_findings
    verdict = release_verdict(risky)
    assert (verdict.state, verdict.severity) == ("needs_person", "high")
    listed = with_severity_shown(Release.objects.filter(pk=risky.pk)).get()
    assert listed.effective_severity == "high"


@pytest.mark.parametrize("kind", sorted(PROVIDERS))
def test_a_tool_call_cut_off_at_the_output_limit_ends_with_the_policys_verdict(
    risky: Release, kind: str
) -> None:
    turns = [summary_turn(), cut_off_turn("cut_1"), cut_off_turn("cut_2"), cut_off_turn("cut_3")]
    run, model = assess(risky, kind, turns)

    # Asked once more with a short instruction, not retried identically a third time.
    assert len(model.requests) == 3
    assert "cut off at the output limit" in str(model.requests[2])
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.outcome == "policy_verdict"
    assert run.headline == (
        "Stored for review: the model filed nothing (its answer was cut off at the output limit)"
    )
    report = RiskReport.objects.get(conversation=run)
    assert report.origin == ReportOrigin.POLICY
    assert (report.severity, report.policy_severity) == ("high", "high")
    assert report.needs_review
    assert report.review_reasons[0].startswith("The model filed no report (its answer was cut")
    assert "The model filed no report" in report.summary
    assert report.findings  # the policy's evidence
    assert release_verdict(risky).state == "needs_person"


def test_a_run_that_never_read_its_release_stores_nothing_and_fails(
    make_release: Callable[..., Release],
) -> None:
    release = make_release("v9.9.9")
    # Nudged once to call a tool (issue 40), it answers in words again.
    turns = [reply("I cannot assess this release."), reply("I cannot assess this release.")]
    run, model = assess(release, "openai", turns)
    assert len(model.requests) == 2
    assert run.status == RunStatus.FAILED
    assert run.outcome == "no_report"
    assert run.headline == "No report: the model never read the release"
    assert not RiskReport.objects.filter(release=release).exists()
    assert release_verdict(release).state == "failed"


@pytest.mark.parametrize("mode", ["assess", "always-low"])
def test_every_demo_release_assessed_by_the_scripted_model_ends_with_a_stored_report(
    mode: str,
) -> None:
    from django.core.management import call_command

    from detective_site.asgi import application
    from sources.demo_releases import DEMO_RELEASES
    from tests.llm_server import MODEL, ScriptedLLM

    call_command("seed_demo", stdout=io.StringIO())
    releases = list(Release.objects.filter(version__in=[d.version for d in DEMO_RELEASES]))
    assert len(releases) == len(DEMO_RELEASES)
    with ScriptedLLM(mode=mode) as llm:
        for release in releases:
            run = services.start_assessment(
                release, None, provider="openai-compatible", model=MODEL
            )
            runner.run_assessment(
                str(run.pk),
                api_url="http://localhost",
                http_client=httpx.AsyncClient(transport=httpx.ASGITransport(app=application)),
                base_url=llm.base_url,
            )
            run.refresh_from_db()
            assert RiskReport.objects.filter(conversation=run).exists(), (release, run.error)
            assert run.outcome == "filed", (release, run.headline)
            verdict = release_verdict(release)
            assert verdict.severity is not None
            assert verdict.state in ("assessed", "needs_person"), (release, verdict.state)
            if mode == "always-low" and verdict.policy_severity != "low":
                assert verdict.state == "needs_person"
                assert verdict.severity == verdict.policy_severity


def test_a_failure_to_store_the_verdict_still_ends_the_run_failed(
    risky: Release, monkeypatch: pytest.MonkeyPatch
) -> None:
    from assessments import outcomes

    def broken(*args: Any, **kwargs: Any) -> outcomes.Concluded:
        raise RuntimeError("a bug")

    monkeypatch.setattr(outcomes, "conclude", broken)
    run, _ = assess(risky, "openai", [summary_turn(), reply("I give up."), reply("I give up.")])
    assert run.status == RunStatus.FAILED
    assert run.outcome == "no_report"
    assert "Storing the run's verdict failed" in run.error
