"""Parallel jobs of one matrix build: 8 threads send the same new release (of a new service),
the same JUnit report and the same metrics at one moment (behind a barrier), each through the
ingestion API with its own database connection. Every answer is a 2xx (or a 409, which the
client retries), never a 500, and each is stored once. Meant for PostgreSQL, where the
threads really run at once (`bash .ci/run`'s second pass); SQLite takes one writer at a time,
and is tested too."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

import pytest
from django.db import connection
from django.test import Client

from releases.models import Release, Service
from sources import services as sources_services
from sources.models import Ingestion, MetricSample, SourceKind, TestCase

pytestmark = pytest.mark.django_db(transaction=True)
JOBS = 8
JUNIT = (
    b'<?xml version="1.0"?>\n<testsuite name="unit" tests="2" failures="1">'
    b'<testcase classname="tests.cart" name="test_add" time="0.01"/>'
    b'<testcase classname="tests.pay" name="test_refund" time="0.5">'
    b'<failure message="refund is negative">-3 != 3</failure></testcase></testsuite>\n'
)
METRICS = b"detective_error_rate 0.012\ndetective_response_time_p95_ms 310\n# EOF\n"


def at_once(send: Callable[[Client], int]) -> Counter[int]:
    """`send` run by JOBS threads released together; the statuses they got."""
    barrier = threading.Barrier(JOBS)
    statuses: list[int] = []
    failures: list[BaseException] = []

    def job() -> None:
        client = Client()
        try:
            barrier.wait(timeout=30)
            statuses.append(send(client))
        except BaseException as error:  # a thread's exception would be lost otherwise
            failures.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=job) for _ in range(JOBS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not failures, failures
    return Counter(statuses)


def test_the_same_release_report_and_metrics_from_8_jobs_are_stored_once() -> None:
    _, token = sources_services.create_token("CI", None)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    query = "?service=matrix-shop"

    def release(client: Client) -> int:
        body = {"service": "matrix-shop", "version": "3.0.0", "environment": "production"}
        answer = client.post("/api/releases", body, content_type="application/json", **auth)
        return answer.status_code

    created = at_once(release)
    assert set(created) <= {200, 201, 409}, created
    assert created[201] == 1, created
    assert Service.objects.filter(slug="matrix-shop").count() == 1
    assert Release.objects.filter(service__slug="matrix-shop", version="3.0.0").count() == 1

    def junit(client: Client) -> int:
        return client.post(
            f"/api/releases/3.0.0/junit{query}&filename=unit.xml",
            JUNIT,
            content_type="application/xml",
            **auth,
        ).status_code

    reported = at_once(junit)
    assert set(reported) <= {200, 201, 409}, reported
    assert reported[201] == 1, reported
    assert Ingestion.objects.filter(kind=SourceKind.JUNIT).count() == 1
    assert TestCase.objects.count() == 2

    def metrics(client: Client) -> int:
        return client.post(
            f"/api/releases/3.0.0/metrics{query}", METRICS, content_type="text/plain", **auth
        ).status_code

    measured = at_once(metrics)
    assert set(measured) <= {200, 201, 409}, measured
    assert measured[201] == 1, measured
    assert Ingestion.objects.filter(kind=SourceKind.METRICS).count() == 1
    assert MetricSample.objects.count() == 2
    print(f"{connection.vendor}: release {created}, junit {reported}, metrics {measured}")
