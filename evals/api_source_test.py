from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest
from django.test import Client

from evals import api_source, scenario_sources
from evals.models import EvalRun
from evals.scenario import Scenario, load_suite
from evals.services import start_trial
from releases import eval_hooks
from releases.models import Conversation, Release, RiskReport

pytestmark = pytest.mark.django_db

SUITE = load_suite()


def _trial(scenario_id: str) -> tuple[Conversation, str, Scenario]:
    scenario = SUITE.get(scenario_id)
    run = EvalRun.objects.create(suite_version=SUITE.version)
    conversation, token = start_trial(run, scenario, 1, provider="openai", model="m")
    return conversation, token, scenario


def _get(client: Client, token: str, version: str) -> Any:
    return client.get(
        f"/api/releases/{version}/summary", headers={"Authorization": f"Bearer {token}"}
    )


def _file(client: Client, token: str, **report: Any) -> Any:
    return client.post(
        "/api/risk-reports",
        data=json.dumps(report),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )


def test_a_trial_reads_its_scenario_not_the_real_release_of_that_version(client: Client) -> None:
    conversation, token, scenario = _trial("high_payment_failures")
    Release.objects.create(version=scenario.release_id, title="the real one", changes=["real"])
    response = _get(client, token, scenario.release_id)
    assert response.status_code == 200
    body = response.json()
    assert body.pop("policy")["severity_floor"] == "high"  # as a real release's summary
    assert body == scenario.release_payload()
    assert "real" not in response.json().get("changes", [])
    assert api_source.is_eval_trial(conversation)


def test_other_versions_and_missing_releases_are_not_found(client: Client) -> None:
    _, token, scenario = _trial("high_payment_failures")
    assert _get(client, token, "v0.0.1").status_code == 404
    _, token, scenario = _trial("release_not_found")
    response = _get(client, token, scenario.release_id)
    assert response.status_code == 404
    assert "error" in response.json()


def test_faults_are_injected(client: Client) -> None:
    _, token, scenario = _trial("summary_http_500")
    response = _get(client, token, scenario.release_id)
    assert response.status_code == 500
    _, token, scenario = _trial("summary_malformed_json")
    response = _get(client, token, scenario.release_id)
    assert response.status_code == 200
    with pytest.raises(ValueError):
        json.loads(response.content)


@pytest.mark.django_db(transaction=True)
async def test_a_timeout_hangs_until_the_client_gives_up() -> None:
    from asgiref.sync import sync_to_async

    from detective_site.asgi import application

    _, token, scenario = await sync_to_async(_trial)("summary_timeout")
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        started = asyncio.get_running_loop().time()
        with pytest.raises((TimeoutError, httpx.TimeoutException)):
            async with asyncio.timeout(0.5):
                await client.get(
                    f"/api/releases/{scenario.release_id}/summary",
                    headers={"Authorization": f"Bearer {token}"},
                )
        assert asyncio.get_running_loop().time() - started < 2


def test_under_wsgi_a_timeout_hangs_in_the_request_thread_without_a_warning(
    client: Client, recwarn: pytest.WarningsRecorder
) -> None:
    conversation, token, scenario = _trial("summary_timeout")
    conversation.metadata[api_source.EVAL_KEY]["fault"]["delay_s"] = 0.1
    conversation.save(update_fields=["metadata"])
    response = _get(client, token, scenario.release_id)
    started = time.monotonic()
    assert b"".join(response.streaming_content) == b"{}"
    assert time.monotonic() - started >= 0.09
    assert not [w for w in recwarn if "StreamingHttpResponse" in str(w.message)]


def test_a_timeout_hangs_a_little_longer_than_the_tools_wait_and_no_more() -> None:
    # The tools wait for one request through both attempts (the retry joins it): 2 x 3 s and
    # the pause between them.
    scenario = SUITE.get("summary_timeout")
    fault = scenario.tools.get_release_summary
    assert fault is not None and fault.delay_s == 60

    def hang(**options: Any) -> float:
        spec = api_source.trial_metadata(
            scenario, run_id=1, trial=1, suite_version=SUITE.version, **options
        )
        return spec[api_source.EVAL_KEY]["fault"]["delay_s"]

    assert hang() == 60  # nobody said how long the tools wait
    waited = 2 * 3.0 + api_source.SUMMARY_RETRY_DELAY_S
    assert hang(tool_timeout_s=3.0) == waited + api_source.HANG_MARGIN_S
    assert hang(tool_timeout_s=100.0) == 60
    other = api_source.trial_metadata(
        SUITE.get("summary_http_500"),
        run_id=1,
        trial=1,
        suite_version=SUITE.version,
        tool_timeout_s=3.0,
    )
    assert other[api_source.EVAL_KEY]["fault"]["mode"] == "http_error"


def test_a_filed_report_stays_on_the_trial(client: Client) -> None:
    conversation, token, scenario = _trial("low_clean_docs")
    real = Release.objects.create(version=scenario.release_id)
    report = {
        "release_id": scenario.release_id,
        "severity": "low",
        "findings": ["Docs only"],
        "summary": " fine ",
    }
    response = _file(client, token, **report)
    assert response.status_code == 201
    assert response.json()["report_id"].startswith("eval-")
    second = _file(client, token, **report)
    assert second.json()["report_id"].endswith("-2")
    conversation.refresh_from_db()
    stored = api_source.filed_report(conversation.metadata)
    assert stored is not None
    assert stored["severity"] == "low"
    assert stored["summary"] == "fine"
    assert len(conversation.metadata[api_source.REPORT_KEY]["all"]) == 2
    assert not RiskReport.objects.filter(release=real).exists()


def test_reports_are_validated_and_kept_to_the_scenarios_release(client: Client) -> None:
    _, token, scenario = _trial("low_clean_docs")
    bad = _file(client, token, release_id=scenario.release_id, severity="severe", findings=[])
    assert bad.status_code == 400
    other = _file(client, token, release_id="v0.0.1", severity="low", findings=["x"])
    assert other.status_code == 404
    _, token, scenario = _trial("release_not_found")
    missing = _file(client, token, release_id=scenario.release_id, severity="low", findings=["x"])
    assert missing.status_code == 404


def test_a_finished_trials_token_stops_working(client: Client) -> None:
    from assessments import services as release_services

    conversation, token, scenario = _trial("low_clean_docs")
    release_services.finish_run(conversation.pk, status="succeeded")
    assert _get(client, token, scenario.release_id).status_code == 401


def test_ordinary_runs_are_not_eval_trials() -> None:
    assert not api_source.is_eval_trial(None)
    assert not api_source.is_eval_trial(Conversation(metadata={"release_id": "v1"}))


def test_a_trial_of_a_scenario_made_of_files_reads_its_ingested_release(client: Client) -> None:
    ingested = scenario_sources.ingest_suite(load_suite(pattern="revert_brings_failure_back"))
    scenario = ingested.suite.scenarios[0]
    pk = ingested.releases[scenario.id]
    run = EvalRun.objects.create(suite_version=SUITE.version)
    conversation, token = start_trial(run, scenario, 1, provider="openai", model="m", release_pk=pk)
    # The same version in the default service is not what the trial reads.
    Release.objects.create(version=scenario.release_id, title="the real one", changes=["real"])

    body = _get(client, token, scenario.release_id).json()
    assert body["tests"]["failing_tests"] == [
        "billing.invoice_test::test_total_keeps_an_expired_coupon_applied_at_checkout"
    ]
    assert any(line.startswith('Revert "fix(billing)') for line in body["changes"])
    assert body["policy"]["severity_floor"] == "high"
    # The drill-downs find the release through the hook the evals app installs.
    assert eval_hooks.trial_release(conversation, scenario.release_id) == Release.objects.get(pk=pk)
    assert eval_hooks.trial_release(conversation, "v36.0.3") is None

    filed = _file(
        client,
        token,
        release_id=scenario.release_id,
        severity="high",
        findings=["The revert of the billing coupon fix brings its failing test back"],
        summary="High: a billing failure is back.",
    )
    assert filed.status_code == 201, filed.json()
    assert not RiskReport.objects.exists()


def test_a_trial_without_files_has_no_release_for_the_drill_downs() -> None:
    conversation, _, scenario = _trial("high_payment_failures")
    Release.objects.create(version=scenario.release_id)
    assert eval_hooks.trial_release(conversation, scenario.release_id) is None
