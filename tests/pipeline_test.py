"""A CI job's path, for real: the client (`python -m detective_client`, its own process, Python
and httpx alone) sends a release from a git repository made here and two JUnit files to the
live site (web server and task worker, as `up` runs them), with an ingestion token; the release
is assessed by the worker against the scripted model; `verdict --wait` exits with the code the
verdict calls for; the worker delivers the signed webhook to a receiver started here. A token
of another service is refused with its reason."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from detective_client import verdict as gate
from releases.models import Release, Service
from releases.selectors import release_verdict
from sources import services as sources_services
from sources.models import Commit, TestCase
from tests.live_site import LiveSite
from tests.llm_server import ScriptedLLM
from tests.webhook_receiver import running_receiver
from webhooks.models import WebhookDelivery, WebhookEndpoint
from webhooks.signing import HEADER, verify

pytestmark = pytest.mark.django_db(transaction=True)
PROJECT = Path(__file__).resolve().parents[1]
HOOK_SECRET = "whsec-pipeline-test-secret"


def git(repo: Path, *args: str) -> str:
    command = ["git", "-C", str(repo), "-c", "user.name=CI", "-c", "user.email=ci@example.com"]
    done = subprocess.run([*command, *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def checkout(root: Path) -> Path:
    """v1.0.0, then a feature branch (a rename, a binary file) merged, a fix: v1.1.0."""
    repo = root / "shop"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "cart.py").write_text("".join(f"line {n}\n" for n in range(30)))
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "feat: the cart")
    git(repo, "tag", "v1.0.0")
    git(repo, "switch", "-q", "-c", "payments")
    git(repo, "mv", "cart.py", "basket.py")
    git(repo, "commit", "-q", "-m", "refactor(cart): call it a basket")
    (repo / "logo.png").write_bytes(bytes(range(256)))
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "feat(ui)!: a new logo")
    git(repo, "switch", "-q", "main")
    (repo / "pay.py").write_text("def pay():\n    return True\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "fix(pay): pay at last")
    git(repo, "merge", "-q", "--no-ff", "-m", "Merge payments", "payments")
    git(repo, "tag", "v1.1.0")
    return repo


def junit_reports(root: Path) -> Path:
    folder = root / "reports"
    folder.mkdir()
    (folder / "unit.xml").write_text(
        '<?xml version="1.0"?>\n<testsuites><testsuite name="unit" tests="3" failures="1">'
        '<testcase classname="tests.cart" name="test_add" time="0.01"/>'
        '<testcase classname="tests.cart" name="test_remove" time="0.02"/>'
        '<testcase classname="tests.pay" name="test_refund" time="0.5">'
        '<failure message="refund is negative" type="AssertionError">-3 != 3</failure>'
        "</testcase></testsuite></testsuites>\n"
    )
    (folder / "e2e.xml").write_text(
        '<?xml version="1.0"?>\n<testsuite name="e2e" tests="2">'
        '<testcase classname="e2e.checkout" name="test_buy" time="3.2"/>'
        '<testcase classname="e2e.checkout" name="test_skip" time="0"><skipped/></testcase>'
        "</testsuite>\n"
    )
    return folder


def client(site: LiveSite, token: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """The client as a CI job runs it: its own process, a bare environment."""
    environment = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "PYTHONPATH": str(PROJECT),
        "DETECTIVE_URL": site.url,
        "DETECTIVE_TOKEN": token,
    }
    return subprocess.run(
        [sys.executable, "-m", "detective_client", *argv],
        capture_output=True,
        text=True,
        env=environment,
        cwd=PROJECT,
        timeout=300,
    )


def test_a_ci_job_sends_a_release_and_gates_on_its_verdict(tmp_path: Path, settings: Any) -> None:
    # The receiver is on loopback: allowed here as an on-premises receiver would be.
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    repo = checkout(tmp_path)
    reports = junit_reports(tmp_path)
    shop = Service.objects.create(name="Shop", slug="shop")
    billing = Service.objects.create(name="Billing", slug="billing")
    _, token = sources_services.create_token("CI of shop", shop)
    _, other = sources_services.create_token("CI of billing", billing)
    WebhookEndpoint.objects.create(
        name="chat", url="http://127.0.0.1:1/unused", secret=HOOK_SECRET, service="shop"
    )
    with (
        ScriptedLLM() as llm,
        running_receiver() as receiver,
        LiveSite(
            tmp_path / "logs",
            {**llm.environment(), "DETECTIVE_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.1/32"},
        ) as site,
    ):
        WebhookEndpoint.objects.update(url=receiver.url)
        sent = client(
            site, token, "ingest", "1.1.0", "--service", "shop", "--environment", "production",
            "--git-repo", str(repo), "--git-range", "v1.0.0..v1.1.0", "--junit", str(reports),
        )  # fmt: skip
        assert sent.returncode == 0, sent.stderr + site.log_text()
        release = Release.objects.get(service=shop, version="1.1.0")
        assert release.head_sha == git(repo, "rev-parse", "v1.1.0")
        commits = {c.subject: c for c in Commit.objects.filter(release=release)}
        assert sorted(commits) == [
            "Merge payments",
            "feat(ui)!: a new logo",
            "fix(pay): pay at last",
            "refactor(cart): call it a basket",
        ]
        assert commits["Merge payments"].is_merge
        assert not commits["Merge payments"].files.exists()
        [renamed] = commits["refactor(cart): call it a basket"].files.all()
        assert (renamed.old_path, renamed.path) == ("cart.py", "basket.py")
        [logo] = commits["feat(ui)!: a new logo"].files.all()
        assert logo.binary and logo.added is None
        assert commits["feat(ui)!: a new logo"].breaking
        assert TestCase.objects.filter(release=release).count() == 5

        # The same report again is counted once.
        again = client(
            site,
            token,
            "ingest",
            "1.1.0",
            "--service",
            "shop",
            "--junit",
            str(reports / "unit.xml"),
        )
        assert again.returncode == 0, again.stderr
        assert TestCase.objects.filter(release=release).count() == 5

        # Not assessed yet: the policy's verdict is the gate's, said as such (issue 37).
        before = client(site, token, "verdict", "1.1.0", "--service", "shop")
        assert before.returncode == gate.BELOW, before.stdout + before.stderr
        assert "the policy's verdict (no model assessment)" in before.stdout

        # The job starts the assessment; the worker runs it against the scripted model.
        started = client(site, token, "ingest", "1.1.0", "--service", "shop", "--assess")
        assert started.returncode == 0, started.stderr
        assert "assessment queued: http" in started.stderr
        summary = tmp_path / "verdict.md"
        asked = client(
            site, token, "verdict", "1.1.0", "--service", "shop", "--wait", "180",
            "--interval", "0.5", "--fail-on", "high", "--json", "--markdown", str(summary),
        )  # fmt: skip
        answer = json.loads(asked.stdout)
        verdict = release_verdict(release)
        assert answer["state"] == verdict.state and answer["severity"] == verdict.severity
        assert verdict.state in ("assessed", "needs_person"), site.log_text()
        assert asked.returncode == gate.exit_code(verdict.as_json(), "high") != gate.NO_VERDICT
        assert "Detective: shop 1.1.0" in summary.read_text()
        assert f"(exit {asked.returncode})" in summary.read_text()

        # The worker delivers the filed verdict to the receiver, signed.
        delivered = WebhookDelivery.objects.filter(succeeded=True, status_code=200)
        deadline = time.monotonic() + 60
        # The worker logs the attempt once the receiver has answered.
        while not delivered.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert receiver.received, site.log_text()
        got = receiver.received[0]
        verify(got.headers[HEADER], HOOK_SECRET, got.body)
        body = json.loads(got.body)
        assert (body["event"], body["service"], body["version"]) == (
            "verdict.filed",
            "shop",
            "1.1.0",
        )
        # Sent once the run had ended: the verdict's final state, as the API gave it.
        assert (body["state"], body["severity"]) == (answer["state"], answer["severity"])
        assert delivered.get().attempt == 1

        # A token of another service sends nothing and says why.
        refused = client(
            site, other, "ingest", "1.1.0", "--service", "shop", "--junit", str(reports)
        )
        assert refused.returncode == 1
        assert "answered 403" in refused.stderr
