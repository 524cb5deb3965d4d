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
from traces.selectors import release_traces

pytestmark = pytest.mark.django_db
ERROR = ("KeyError", "'sku'", stack())


def test_new_then_gone_then_back_is_new_then_nothing_then_regressed() -> None:
    shop = Service.objects.create(name="shop", slug="shop")
    token = token_for(sources_services.create_token("otel", shop)[1])
    now = time.time_ns() - 60 * 10**9
    start = datetime.fromtimestamp(now / 1e9, UTC)
    said, shown = {}, {}
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
        shown[version] = [g["status"] for g in release_traces(release)["error_groups"]]
    assert said == {
        "1.0.0": {"new_error_groups": "high"},
        "1.1.0": {},
        "1.2.0": {"regressed_error_groups": "medium"},
    }
    # The drill-down says what the policy judged.
    assert shown == {"1.0.0": ["new"], "1.1.0": [], "1.2.0": ["regressed"]}


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
    # A second after the deploy: `start` is `now` rounded through a float, and may be later.
    spans = [span(n, now + 10**9 + n, exception=("KeyError", "'sku'", charge) if n == 0 else None)
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
    said, shown = {}, {}
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
        shown[version] = [g["status"] for g in release_traces(release)["error_groups"]]
    # 1.1.0 sent nothing: its silence is no absence of the group, which is ongoing in 1.2.0.
    assert said == {"1.0.0": {"new_error_groups": "high"}, "1.1.0": {}, "1.2.0": {}}
    assert shown == {"1.0.0": ["new"], "1.1.0": [], "1.2.0": ["ongoing"]}


def _traffic(start_ns: int, minutes: int, slow: dict[str, int], per_minute: int = 6) -> list:
    """`per_minute` requests a minute of two routes from `start_ns`, taking 20 ms or, for a
    route in `slow`, its ms."""
    made = []
    for minute in range(minutes):
        for k in range(per_minute):
            for index, route in enumerate(("/cart/{cart_id}/total", "/products")):
                n = len(made)
                at = start_ns + (minute * 60 + k * 8 + index + 1) * 10**9
                made.append(span(n, at, route=route, ms=slow.get(route, 20) + (n % 7)))
    return made


def test_one_route_slower_than_in_the_previous_release_is_named_with_its_figures() -> None:
    shop = Service.objects.create(name="shop", slug="shop")
    token = token_for(sources_services.create_token("otel", shop)[1])
    day = 86_400 * 10**9
    # On a minute's edge: the 25 minutes of traffic fill 25 minutes, not parts of 26.
    now = (time.time_ns() - 3 * day) // (60 * 10**9) * 60 * 10**9
    said = {}
    for days, version, slow in ((0, "1.0.0", {}), (1, "1.1.0", {"/cart/{cart_id}/total": 400})):
        start = now + days * day
        release = Release.objects.create(
            service=shop, version=version, deployed_at=datetime.fromtimestamp(start / 1e9, UTC)
        )
        spans = _traffic(start, 25, slow)
        services.ingest(token, read_spans(request("shop", version, spans)))  # type: ignore[arg-type]
        said[version] = trace_signals(release, PolicySettings(), read_history(release))
    assert said["1.0.0"] == []
    [signal] = said["1.1.0"]
    assert (signal.name, signal.level, signal.figure) == (
        "route_regressions", "medium", "GET /cart/{cart_id}/total",
    )  # fmt: skip
    # Each minute's p95 is its sketch's (1 % relative accuracy): 400-406 ms, 20-26 ms.
    assert signal.detail.startswith(
        "GET /cart/{cart_id}/total: p95 408 ms over 25 minutes against 24.8 ms in the previous "
        "release (1.0.0), 16 times (per-minute medians; Mann-Whitney p < 0.001 among 4 route "
        "comparisons)"
    )


def test_the_baseline_window_comes_first_and_a_release_without_traces_costs_one_query(
    django_assert_num_queries: object,
) -> None:
    from traces.route_history import route_facts

    shop = Service.objects.create(name="shop", slug="shop")
    token = token_for(sources_services.create_token("otel", shop)[1])
    start = (time.time_ns() - 86_400 * 10**9) // (60 * 10**9) * 60 * 10**9
    deployed = start + 30 * 60 * 10**9
    release = Release.objects.create(
        service=shop, version="2.0.0", deployed_at=datetime.fromtimestamp(deployed / 1e9, UTC)
    )
    # Spans of 2.0.0 before its deploy time (a canary's) are its baseline window.
    spans = _traffic(start, 25, {}) + _traffic(deployed, 25, {"/products": 300})
    spans = [span(n, s.start_time_unix_nano, route=s.attributes[0].value.string_value,
                  ms=(s.end_time_unix_nano - s.start_time_unix_nano) // 10**6)
             for n, s in enumerate(spans)]  # fmt: skip
    services.ingest(token, read_spans(request("shop", "2.0.0", spans)))  # type: ignore[arg-type]
    facts = route_facts(release, PolicySettings(), [])
    assert facts is not None
    assert {(r.route, r.against, len(r.release), len(r.baseline)) for r in facts.routes} == {
        ("GET /cart/{cart_id}/total", "the baseline window", 25, 25),
        ("GET /products", "the baseline window", 25, 25),
    }
    [signal] = trace_signals(release, PolicySettings(), read_history(release))
    assert signal.figure == "GET /products" and "in the baseline window" in signal.detail
    quiet = Release.objects.create(service=shop, version="2.0.1")
    past = read_history(quiet)
    with django_assert_num_queries(1):  # type: ignore[operator]
        assert trace_signals(quiet, PolicySettings(), past) == []
