"""Data that arrives during a run (issue 37, item 5), for real: a CI job sends a release with
its unit tests (all passing) and asks for the verdict; while the scripted model is at work (it
has read the release's summary), a second job's JUnit shard with 5 failures arrives. The run's
report judged part of the data, so it is not the verdict: the worker marks the run stale and
queues a new assessment of all the data in the same transaction, and the job that was waiting
gets that one's verdict (the 5 failures counted), not the stale report's."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest

from detective_client import verdict as gate
from detective_client.api import DetectiveApi
from releases import data_fingerprint
from releases.models import AgentEvent, Conversation, Release, RiskReport, Service
from releases.selectors import release_verdict
from sources import services as sources_services
from tests.live_site import LiveSite
from tests.llm_server import ScriptedLLM
from tests.pipeline_test import client

pytestmark = pytest.mark.django_db(transaction=True)
PROJECT = Path(__file__).resolve().parents[1]

UNIT = (
    '<?xml version="1.0"?>\n<testsuite name="unit" tests="3">'
    '<testcase classname="tests.cart" name="test_add" time="0.01"/>'
    '<testcase classname="tests.cart" name="test_remove" time="0.01"/>'
    '<testcase classname="tests.pay" name="test_pay" time="0.01"/></testsuite>\n'
)


def failing_shard() -> bytes:
    cases = "".join(
        f'<testcase classname="e2e.checkout" name="test_step_{n}" time="1">'
        f'<failure message="step {n} timed out" type="TimeoutError">timed out</failure>'
        "</testcase>"
        for n in range(5)
    )
    return (
        f'<?xml version="1.0"?>\n<testsuite name="e2e" tests="5" failures="5">{cases}</testsuite>\n'
    ).encode()


def _summary_read(run: Conversation) -> bool:
    return AgentEvent.objects.filter(
        conversation=run, kind="tool_result", payload__result__name="get_release_summary"
    ).exists()


def _summary_of(run: Conversation) -> str:
    payload = (
        AgentEvent.objects.filter(
            conversation=run, kind="tool_result", payload__result__name="get_release_summary"
        )
        .values_list("payload", flat=True)
        .get()
    )
    return json.dumps(payload)


def test_a_shard_that_arrives_mid_run_is_assessed_and_the_waiting_job_gets_that_verdict(
    tmp_path: Path,
) -> None:
    (tmp_path / "unit.xml").write_text(UNIT)
    shop = Service.objects.create(name="Shop", slug="shop")
    _, token = sources_services.create_token("CI of shop", shop)
    # Slow enough that the filing reply is still streaming when the shard is in.
    with ScriptedLLM(delay=0.1) as llm, LiveSite(tmp_path / "logs", llm.environment()) as site:
        sent = client(
            site, token, "ingest", "1.0.0", "--service", "shop",
            "--junit", str(tmp_path / "unit.xml"), "--assess",
        )  # fmt: skip
        assert sent.returncode == 0, sent.stderr + site.log_text()
        release = Release.objects.get(service=shop, version="1.0.0")
        first = Conversation.objects.get(release=release)
        waited: dict[str, subprocess.CompletedProcess[str]] = {}
        verdict_argv = ["verdict", "1.0.0", "--service", "shop", "--wait", "240"]
        waiting = threading.Thread(
            target=lambda: waited.setdefault(
                "job", client(site, token, *verdict_argv, "--interval", "1", "--json")
            )
        )
        waiting.start()
        deadline = time.monotonic() + 120
        while not _summary_read(first) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _summary_read(first), site.log_text()
        with DetectiveApi(site.url, token) as api:
            api.send_bundle(
                {"service": "shop", "version": "1.0.0"}, [], [("e2e.xml", failing_shard())], None
            )
        shard_at = time.monotonic()
        first.refresh_from_db()
        assert first.is_active, "the run ended before the shard was in: nothing to test"
        waiting.join(timeout=300)
        job = waited["job"]
        logs = job.stdout + job.stderr + site.log_text()

    first.refresh_from_db()
    release.refresh_from_db()
    runs = list(Conversation.objects.filter(release=release).order_by("created_at"))
    assert len(runs) == 2, logs
    stale, follow = runs
    assert stale.pk == first.pk
    assert first.metadata["stale"] == {"followed_by": str(follow.pk)}, logs
    assert follow.metadata["asked_by"] == f"new data during run {first.pk}"
    # The stale run's report judged the data before the shard; the new one judged it all.
    stale_report = RiskReport.objects.get(conversation=stale)
    new_report = RiskReport.objects.get(conversation=follow)
    assert not data_fingerprint.report_is_current(stale_report, release)
    assert data_fingerprint.report_is_current(new_report, release)

    answer = json.loads(job.stdout)
    final = release_verdict(release).as_json()
    print(
        f"\nthe stale run's report: {stale_report.severity}; the new one's: "
        f"{new_report.severity}; the job exited {job.returncode} "
        f"{time.monotonic() - shard_at:.1f} s after the shard"
    )
    assert answer["report_id"] == new_report.pk == final["report_id"], logs
    assert answer["run_id"] == str(follow.pk)
    assert job.returncode == gate.exit_code(final, "high") != gate.NO_VERDICT, logs
    # What each model read: the stale run the unit tests alone, the new one the shard too.
    assert "test_step_0" not in _summary_of(stale)
    assert "test_step_0" in _summary_of(follow), _summary_of(follow)[:2000]
