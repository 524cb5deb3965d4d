"""Demo data: releases of a fictional payments web app and of a search API, across the range
of risk, made as a user's own releases are: from a git repository (made on the fly with the
`git` command), JUnit XML reports and OpenMetrics files (`sources.demo_files`), ingested
through `sources.services`. One release is typed in by hand, as the release managers' form
takes it.

Idempotent: releases are keyed by service and version and only created when missing; reports
and the demo run of a release are only added when that release has none.
"""

from __future__ import annotations

import json
import tempfile
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from assessments import filing
from assessments import services as run_services
from detective_client import git
from detective_client.head import with_hunks
from detective_client.hunks import read_hunks
from releases.models import Conversation, Message, Release, RiskReport, RunStatus, Severity
from sources import demo_files, services
from sources.demo_files import DemoFiles
from sources.demo_releases import DEMO_RELEASES, DemoRelease
from sources.parsers.openmetrics import parse_metrics_file
from sources.services import HandSummary, Origin, ReleaseFields

DEMO_RUN_VERSION = "v2.1.0"
ORIGIN = Origin("seed")


class Command(BaseCommand):
    help = (
        "Create demo releases (ingested from a git repository, JUnit XML and OpenMetrics files "
        "made on the fly), risk reports and one demo run. Safe to run repeatedly."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        now = timezone.now()
        missing = [demo for demo in DEMO_RELEASES if _existing(demo) is None]
        created = 0
        with tempfile.TemporaryDirectory(prefix="detective-demo-") as folder:
            files: dict[str, DemoFiles] = {}
            if missing:
                try:
                    files = demo_files.write_all(Path(folder), DEMO_RELEASES, now)
                except demo_files.GitMissing as exc:
                    raise CommandError(str(exc)) from None
            with transaction.atomic():
                # Oldest first, so that each release's previous one is there for its baseline.
                for demo in sorted(DEMO_RELEASES, key=lambda d: -d.days_ago):
                    release = _existing(demo)
                    if release is None:
                        release = _ingest(demo, files[demo_files.key(demo)])
                        created += 1
                    if demo.reports and not release.risk_reports.exists():
                        _file_reports(release, demo)
                self._demo_run(_existing_version(DEMO_RUN_VERSION))
        total = Release.objects.count()
        self.stdout.write(
            self.style.SUCCESS(f"Demo data ready: {created} releases created, {total} in all.")
        )

    def _demo_run(self, release: Release) -> None:
        """A finished run with its transcript and timeline, as a real run leaves them: the
        events have the agent's own JSON shapes (`agent.events`), so the run page shows the
        demo run as it shows any other."""
        demo = release.conversations.filter(metadata__demo=True).first()
        if demo is not None:
            if _current_shapes(demo):
                return
            demo.delete()  # written by an older seed_demo, in shapes the run page cannot show
        elif release.conversations.exists():
            return  # the release has real runs
        report = release.risk_reports.filter(severity=Severity.HIGH).order_by("filed_at").first()
        version = release.version
        # One story: the run ends as its report is filed (the report's time is the run's end).
        if report is not None:
            started = report.filed_at - timedelta(seconds=DEMO_SECONDS)
        else:
            started = release.created_at + timedelta(hours=4)
        conversation = Conversation.objects.create(
            release=release,
            status=RunStatus.SUCCEEDED,
            provider=DEMO_PROVIDER,
            model=DEMO_MODEL,
            system_prompt="You are the Detective, a release risk analyst. (Demo data.)",
            input_tokens=DEMO_TOTAL["input_tokens"],
            output_tokens=DEMO_TOTAL["output_tokens"],
            estimated_cost=Decimal("0.013110"),
            created_at=started - timedelta(seconds=2),
            started_at=started,
            finished_at=started + timedelta(seconds=DEMO_SECONDS),
            heartbeat_at=started + timedelta(seconds=DEMO_SECONDS),
            metadata={
                "demo": True,
                "provider": DEMO_PROVIDER,
                "model": DEMO_MODEL,
                "release_id": version,
                "usage": DEMO_TOTAL,
                "estimated_cost_usd": 0.01311,
            },
        )
        events, transcript = _demo_timeline(
            _Clock(started), str(conversation.pk), release.as_summary(), report
        )
        for event in events:
            run_services.append_event(
                conversation,
                kind=event["kind"],
                payload=event,
                created_at=datetime.fromisoformat(event["timestamp"]),
            )
        for step, message in enumerate(transcript):
            run_services.append_message(
                conversation, created_at=started + timedelta(seconds=step), **message
            )
        if report is not None:
            report.conversation = conversation
            report.save(update_fields=["conversation"])


DEMO_PROVIDER = "demo"
DEMO_MODEL = "demo-transcript"
DEMO_SECONDS = 6.1
DEMO_TOTAL = {"input_tokens": 2310, "output_tokens": 412, "cached_input_tokens": None}


def _demo_timeline(
    at: _Clock, run_id: str, summary: dict[str, Any], report: RiskReport | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The demo run's events (agent.events' JSON) and messages: two model calls, each asking
    for one tool; the second files the report."""
    version = summary["version"]
    findings = report.findings if report else []
    report_summary = report.summary if report else ""
    filed = f"Risk report {report.pk if report else '?'} filed for release {version!r} "
    filed += "with severity high"
    steps = [
        # step, start, seconds per text delta, text, usage, cost, tool, arguments, result
        (
            1,
            0.1,
            0.25,
            f"I'll read the summary of release {version} first.",
            {"input_tokens": 1030, "output_tokens": 52},
            0.00387,
            "get_release_summary",
            {"release_id": version},
            json.dumps(summary, indent=2),
        ),
        (
            2,
            2.0,
            0.6,
            "Payment processing is new and both failing tests sit in critical areas "
            "(refunds, authentication). Filing a high-risk report.",
            {"input_tokens": 1280, "output_tokens": 360},
            0.00924,
            "file_risk_report",
            {
                "release_id": version,
                "severity": "high",
                "findings": findings,
                "summary": report_summary,
            },
            filed,
        ),
    ]
    events: list[dict[str, Any]] = [
        {
            "kind": "run_started",
            "timestamp": at(0),
            "conversation_id": run_id,
            "provider": DEMO_PROVIDER,
            "model": DEMO_MODEL,
            "trace_id": None,
            "reasoning": "direct",
        }
    ]
    transcript: list[dict[str, Any]] = [
        {"role": Message.Role.USER, "content": f"Assess the risk of release {version}"}
    ]
    total = {"input_tokens": 0, "output_tokens": 0, "cached_input_tokens": None}
    for step, begin, pace, text, usage, cost, tool, arguments, content in steps:
        events.append(
            {
                "kind": "model_request_started",
                "timestamp": at(begin),
                "step": step,
                "message_count": len(transcript),
                "estimated_input_tokens": usage["input_tokens"] - 40,
            }
        )
        words = text.split(" ")
        for number, first in enumerate(range(0, len(words), 4)):
            chunk = " ".join(words[first : first + 4])
            events.append(
                {
                    "kind": "text_delta",
                    "timestamp": at(begin + pace * (number + 1)),
                    "step": step,
                    "text": chunk if number == 0 else f" {chunk}",
                }
            )
        answered = begin + pace * (len(words) // 4 + 2)
        total = {
            "input_tokens": total["input_tokens"] + usage["input_tokens"],
            "output_tokens": total["output_tokens"] + usage["output_tokens"],
            "cached_input_tokens": None,
        }
        call = {
            "id": f"call_{step}",
            "name": tool,
            "arguments": arguments,
            "timestamp": at(answered),
        }
        result = {
            "tool_call_id": call["id"],
            "name": tool,
            "content": content,
            "success": True,
            "duration_ms": 40.0,
            "error_type": None,
            "data": arguments if tool == "file_risk_report" else None,
            "terminal": tool == "file_risk_report",
            "timestamp": at(answered + 0.3),
            "metadata": {},
        }
        events += [
            {
                "kind": "model_responded",
                "timestamp": at(answered),
                "step": step,
                "text": text,
                "tool_call_count": 1,
                "finish_reason": "tool_calls",
                "response_model": DEMO_MODEL,
                "duration_ms": round((answered - begin) * 1000, 1),
            },
            {
                "kind": "usage",
                "timestamp": at(answered),
                "step": step,
                "usage": {**usage, "cached_input_tokens": None},
                "total": total,
                "estimated_cost_usd": cost,
            },
            {"kind": "tool_call", "timestamp": at(answered), "step": step, "tool_call": call},
            {
                "kind": "tool_result",
                "timestamp": result["timestamp"],
                "step": step,
                "result": result,
            },
        ]
        transcript += [
            {
                "role": Message.Role.ASSISTANT,
                "content": text,
                "tool_calls": [call],
                "metadata": {
                    "step": step,
                    "model": DEMO_MODEL,
                    "finish_reason": "tool_calls",
                    "usage": {**usage, "cached_input_tokens": None},
                },
            },
            {
                "role": Message.Role.TOOL,
                "content": content,
                "tool_call_id": call["id"],
                "metadata": {"tool_name": tool},
            },
        ]
    events += [
        {
            "kind": "report_filed",
            "timestamp": at(DEMO_SECONDS - 0.1),
            "release_id": version,
            "severity": "high",
            "findings": findings,
            "report_id": str(report.pk) if report else None,
            "summary": report_summary,
        },
        {
            "kind": "run_finished",
            "timestamp": at(DEMO_SECONDS),
            "reason": "report_filed",
            "final_text": steps[-1][3],
            "steps": len(steps),
            "usage": total,
        },
    ]
    return events, transcript


class _Clock:
    """ISO timestamps `seconds` after the start of the demo run."""

    def __init__(self, start: datetime) -> None:
        self.start = start

    def __call__(self, seconds: float) -> str:
        return (self.start + timedelta(seconds=seconds)).isoformat()


def _current_shapes(conversation: Conversation) -> bool:
    """Whether a demo run's events have the agent's shapes (each payload names its kind)."""
    return not conversation.events.exclude(payload__has_key="kind").exists()


def _existing(demo: DemoRelease) -> Release | None:
    slug = demo_files.service_slug(demo)
    return Release.objects.filter(service__slug=slug, version=demo.version).first()


def _existing_version(version: str) -> Release:
    return Release.objects.select_related("service").get(service__slug="default", version=version)


def _ingest(demo: DemoRelease, files: DemoFiles) -> Release:
    """The release as its pipeline would send it: the release, its git range, its JUnit XML,
    its metrics file; or typed in by hand."""
    commits = git.read_range(files.repo, files.git_range) if files.git_range else []
    if demo.shop_code and files.git_range:
        # The shop's pipeline runs the CI client, which sends each file's changed lines: an
        # exception's frames are matched to them for its suspect commit.
        commits = with_hunks(commits, read_hunks(files.repo, files.git_range))
    start, end = git.split_range(files.git_range) if files.git_range else (None, None)
    fields = ReleaseFields(
        version=demo.version,
        service=demo.service,
        title=demo.title,
        environment="production",
        git_from_ref=start,
        git_to_ref=end,
        head_sha=commits[0].sha if commits else None,  # newest first
        pipeline_url=f"https://ci.example.com/{demo_files.service_slug(demo)}/{demo.version}",
        deployed_at=files.deployed_at,
    )
    if demo.by_hand:
        typed = HandSummary(
            changes=demo.changes,
            test_results=demo.test_results,
            deployment_metrics=demo.deployment_metrics,
        )
        release = services.save_by_hand(fields, typed, ORIGIN)
    else:
        release, _ = services.upsert_release(fields, ORIGIN)
        if commits:
            services.ingest_commits(release, commits, ORIGIN, file_names=[str(files.git_range)])
        if files.junit is not None:
            with files.junit.open("rb") as stream:
                services.ingest_junit(release, stream, files.junit.name, ORIGIN)
        if files.metrics is not None:
            samples = parse_metrics_file(files.metrics)
            services.ingest_metrics_file(release, samples, ORIGIN, file_names=[files.metrics.name])
    # The demo's history spreads over two months: each release was cut on its day.
    Release.objects.filter(pk=release.pk).update(created_at=files.created_at)
    release.refresh_from_db()
    return release


def _file_reports(release: Release, demo: DemoRelease) -> None:
    for report in demo.reports:
        # Judged as the API judges a filing, so that the demo shows what a release manager
        # would see: some reports need a person.
        filing.file_checked_report(
            release=release,
            severity=report.severity,
            findings=report.findings,
            summary=report.summary,
            filed_at=release.created_at + timedelta(days=report.days_after_release),
        )
