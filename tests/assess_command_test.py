"""`manage.py assess`: the pipeline in the foreground, without a web server or a worker.

It prints the timeline as it happens and the report, and exits 0 only if a report was filed.
"""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Callable

import pytest
from django.core.management import CommandError, call_command
from django_tasks_db.models import DBTaskResult

from detective_site.config import BASE_DIR
from releases.models import Conversation, Release, RiskReport, RunStatus
from tests.live_site import subprocess_environment
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)


def test_assess_prints_the_run_and_the_report_and_exits_0(
    make_release: Callable[..., Release],
) -> None:
    release = make_release(
        "v4.2.0",
        # A payments change and a failing payments test: high (the name alone would not be).
        changes=["Round refunds in payment capture"],
        test_results={
            "passed": 9,
            "failed": 1,
            "skipped": 0,
            "failing_tests": ["test_payment_refund"],
        },
    )
    with ScriptedLLM(narration=3) as llm:
        done = subprocess.run(
            [sys.executable, str(BASE_DIR / "manage.py"), "assess", release.version],
            cwd=BASE_DIR,
            env=subprocess_environment(llm.environment()),
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    run = Conversation.objects.get(release=release)
    assert run.status == RunStatus.SUCCEEDED
    report = RiskReport.objects.get(conversation=run)
    assert f"Assessing {release.version} (run {run.pk})" in out
    assert "I will start by reading the summary of release v4.2.0. step0 step1 step2" in out
    assert "→ get_release_summary" in out and "→ file_risk_report" in out
    assert f"HIGH risk · {release.version}" in out and report.findings[0] in out
    # It ran the assessment itself: no task was left for a worker to find.
    assert not DBTaskResult.objects.exists()

    # Again on the same data: the verdict stands (no new run); --force assesses anyway.
    with ScriptedLLM() as llm:

        def assess(*flags: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, str(BASE_DIR / "manage.py"), "assess", release.version, *flags],
                cwd=BASE_DIR,
                env=subprocess_environment(llm.environment()),
                capture_output=True,
                text=True,
                timeout=120,
            )

        kept = assess()
        assert kept.returncode == 0, kept.stdout + kept.stderr
        assert "The data has not changed since the verdict" in kept.stdout
        assert f"HIGH risk · {release.version}" in kept.stdout
        assert Conversation.objects.filter(release=release).count() == 1
        forced = assess("--force")
        assert forced.returncode == 0, forced.stdout + forced.stderr
    again = Conversation.objects.filter(release=release).exclude(pk=run.pk).get()
    assert again.metadata["forced"] is True
    assert again.metadata["asked_by"] == "manage.py assess --force"


def test_assess_exits_non_zero_when_no_report_was_filed(
    make_release: Callable[..., Release],
) -> None:
    release = make_release("v4.3.0")
    out = io.StringIO()
    with ScriptedLLM(mode="unauthorized") as llm, pytest.raises(CommandError) as failure:
        call_command(
            "assess",
            release.version,
            "--provider=openai-compatible",
            "--model=scripted",
            f"--base-url={llm.base_url}",
            stdout=out,
        )
    assert "No report was filed (the run failed)" in str(failure.value)
    assert "refused the credentials" in str(failure.value)
    assert Conversation.objects.get(release=release).status == RunStatus.FAILED
    assert "Incorrect API key" in out.getvalue()  # the timeline shows the failure too
