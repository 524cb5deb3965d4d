from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from releases.models import Release, Service
from risk.settings import PolicySettings
from sources import services as sources_services
from sources.history import read_history
from sources.selectors import token_for
from tests.otlp_requests import request, span
from traces import services
from traces.history import trace_signals
from traces.otlp.grouping_test import stack
from traces.otlp.spans import read_spans

pytestmark = pytest.mark.django_db
ERROR = ("KeyError", "'sku'", stack())


def test_new_then_gone_then_back_is_new_then_nothing_then_regressed() -> None:
    shop = Service.objects.create(name="shop", slug="shop")
    token = token_for(sources_services.create_token("otel", shop)[1])
    now = time.time_ns() - 60 * 10**9
    start = datetime.fromtimestamp(now / 1e9, UTC)
    said = {}
    for days_ago, version, failing in ((3, "1.0.0", True), (2, "1.1.0", False), (1, "1.2.0", True)):
        release = Release.objects.create(
            service=shop, version=version, deployed_at=start - timedelta(days=days_ago)
        )
        spans = [
            span(n, now + n, exception=ERROR if failing and n == 0 else None) for n in range(3)
        ]
        services.ingest(token, read_spans(request("shop", version, spans)))  # type: ignore[arg-type]
        said[version] = {
            s.name: s.level for s in trace_signals(release, PolicySettings(), read_history(release))
        }
    assert said == {
        "1.0.0": {"new_error_groups": "high"},
        "1.1.0": {},
        "1.2.0": {"regressed_error_groups": "medium"},
    }


def test_a_new_group_whose_frames_run_through_payments_is_high_with_the_repository_path() -> None:
    from detective_client.records import CommitRecord, FileChangeRecord
    from sources.services import Origin, ingest_commits
    from traces.history import trace_facts

    shop = Service.objects.create(name="shop", slug="shop")
    token = token_for(sources_services.create_token("otel", shop)[1])
    now = time.time_ns() - 60 * 10**9
    start = datetime.fromtimestamp(now / 1e9, UTC)
    release = Release.objects.create(service=shop, version="2.0.0", deployed_at=start)
    touched = FileChangeRecord(path="src/payments/charge.py", added=3, deleted=1, old_path=None)
    made = CommitRecord(sha="a" * 40, author_name="Ada", author_email="ada@example.com",
                        authored_at=start, message="Capture in one step", files=(touched,),
                        parents=("b" * 40,))  # fmt: skip
    ingest_commits(release, [made], Origin("api"))
    charge = stack().replace("shop/pricing.py", "payments/charge.py")
    spans = [span(n, now + n, exception=("KeyError", "'sku'", charge) if n == 0 else None)
             for n in range(100)]  # fmt: skip
    services.ingest(token, read_spans(request("shop", "2.0.0", spans)))  # type: ignore[arg-type]
    facts = trace_facts(release)
    assert facts is not None
    [group] = facts.groups
    # The deployed /srv/app/payments/charge.py is the repository's src/payments/charge.py.
    assert group.frame_paths == ("/srv/app/shop/views.py", "src/payments/charge.py")
    [signal] = trace_signals(release, PolicySettings(), read_history(release))
    assert (signal.name, signal.level, signal.areas) == ("new_error_groups", "high", ("payments",))
    assert "its frames run through src/payments/charge.py: payments, a critical area" in (
        signal.detail
    )


def test_a_group_is_not_regressed_after_a_release_that_sent_no_traces() -> None:
    shop = Service.objects.create(name="shop", slug="shop")
    token = token_for(sources_services.create_token("otel", shop)[1])
    now = time.time_ns() - 60 * 10**9
    start = datetime.fromtimestamp(now / 1e9, UTC)
    said = {}
    for days_ago, version, sent in ((3, "1.0.0", True), (2, "1.1.0", False), (1, "1.2.0", True)):
        release = Release.objects.create(
            service=shop, version=version, deployed_at=start - timedelta(days=days_ago)
        )
        if sent:
            spans = [span(n, now + n, exception=ERROR if n == 0 else None) for n in range(3)]
            services.ingest(token, read_spans(request("shop", version, spans)))  # type: ignore[arg-type]
        said[version] = {
            s.name: s.level for s in trace_signals(release, PolicySettings(), read_history(release))
        }
    # 1.1.0 sent nothing: its silence is no absence of the group, which is ongoing in 1.2.0.
    assert said == {"1.0.0": {"new_error_groups": "high"}, "1.1.0": {}, "1.2.0": {}}
