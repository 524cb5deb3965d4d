"""Issue 37, item 1: with no model configured, a release whose tests fail is still gated: the
policy's verdict (no model assessment), with its severity, evidence and the failure's suspect,
is what the verdict API, `manage.py verdict`, the CI client's exit code and Markdown, and the
release page say."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from assessments import services as run_services
from detective_client import summary
from detective_client import verdict as client_verdict
from releases.models import Conversation, Release, RunStatus
from releases.views_test import viewer_with_view_permissions
from tests.ingest_test import git, ingest
from tests.suspects_test import REPORT, TEST, TIMED

pytestmark = pytest.mark.django_db

API_KEY = "k" * 40
LABEL = "the policy's verdict (no model assessment)"


def make_repository(repo: Path) -> str:
    """A catalog service (no critical area in its paths) whose last commit breaks a function."""
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "catalog").mkdir()
    (repo / "tests").mkdir()
    (repo / "catalog" / "__init__.py").write_text("")
    (repo / "catalog" / "timed.py").write_text(TIMED)
    (repo / "tests" / "test_timed.py").write_text(TEST.replace("payments.", "catalog."))
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "chore: initial")
    git(repo, "tag", "v1.0.0")
    broken = TIMED.replace("age > max_age:", "age > max_age + 1:")
    (repo / "catalog" / "timed.py").write_text(broken)
    git(repo, "commit", "-q", "-am", "Add a second of grace to max_age")
    git(repo, "tag", "v1.1.0")
    return git(repo, "rev-parse", "v1.1.0")


def verdict_command(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with pytest.raises(SystemExit) as ended:
        call_command("verdict", *args, stdout=out, stderr=out)
    return int(ended.value.code or 0), out.getvalue()


def test_no_model_the_gate_says_the_policys_medium_with_the_suspect(
    tmp_path: Path, settings: Any
) -> None:
    settings.DETECTIVE_API_KEY = API_KEY
    culprit = make_repository(tmp_path / "catalog")
    junit = tmp_path / "junit.xml"
    junit.write_text(REPORT)
    ingest(
        "v1.1.0", "--service", "catalog", "--git-repo", str(tmp_path / "catalog"),
        "--git-range", "v1.0.0..v1.1.0", "--junit", str(junit),
    )  # fmt: skip
    release = Release.objects.get(version="v1.1.0", service__slug="catalog")

    # Never assessed (no model configured): the policy's medium counts, with its suspect.
    code, out = verdict_command("v1.1.0", "--service", "catalog", "--fail-on", "medium")
    assert code == 1, out
    assert f"Medium risk, {LABEL} (not assessed)" in out and culprit[:7] in out
    assert verdict_command("v1.1.0", "--service", "catalog")[0] == 0  # below high

    # The run fails for want of a model: the same verdict, and the API says whose it is.
    run = run_services.start_assessment(release, None)
    Conversation.objects.filter(pk=run.pk).update(
        status=RunStatus.FAILED, error="no model configured"
    )
    answer = Client().get(
        "/api/releases/v1.1.0/verdict",
        {"service": "catalog"},
        headers={"Authorization": f"Bearer {API_KEY}"},
    )
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert (body["state"], body["severity"], body["source"]) == ("failed", "medium", "policy")
    assert body["source_label"] == LABEL and body["model_severity"] is None
    assert any(culprit[:7] in sentence for sentence in body["suspects"])
    assert body["findings"] and all(f["from_policy"] for f in body["findings"])
    assert any("test_max_age" in f["text"] for f in body["findings"])

    # The CI client exits by it and its Markdown says whose verdict it is, naming the suspect.
    assert client_verdict.exit_code(body, "medium") == 1
    assert client_verdict.exit_code(body, "high") == 0
    text = summary.markdown(body, "catalog", 1, "medium")
    assert f"Medium risk, {LABEL}" in text.splitlines()[0] and "(exit 1)" in text
    assert culprit[:7] in text and "*(from the policy)*" not in text
    line = client_verdict.one_line(body, "catalog", "medium")
    assert line.startswith(f"catalog v1.1.0: severity medium, {LABEL} (assessment failed)")

    code, out = verdict_command("v1.1.0", "--service", "catalog", "--json")
    assert (code, json.loads(out)["source"]) == (0, "policy")

    # The release page says it too.
    client = Client()
    client.force_login(viewer_with_view_permissions())
    page = client.get(release.get_absolute_url()).content.decode()
    assert 'id="policy-verdict"' in page and "Medium risk" in page
    assert "(no model assessment)" in page and culprit[:7] in page
