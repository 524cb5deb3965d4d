from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User
from django.test import Client

from releases.models import Release, Service
from sources import services as sources_services
from sources.selectors import token_for
from tests.otlp_requests import request, span
from traces import services
from traces.otlp.grouping_test import stack
from traces.otlp.spans import read_spans

pytestmark = pytest.mark.django_db


def test_the_section_shows_the_new_group_first_and_needs_the_view_permission() -> None:
    shop = Service.objects.create(name="shop", slug="shop")
    now = time.time_ns() - 120 * 10**9
    release = Release.objects.create(
        service=shop, version="1.1.0", deployed_at=datetime.fromtimestamp(now / 1e9 - 1, UTC)
    )
    token = token_for(sources_services.create_token("otel", shop)[1])
    assert token is not None
    error = ("ZeroDivisionError", "float division by zero <script>", stack())
    spans = [span(n, now + n, exception=error if n % 2 else None) for n in range(4)]
    services.ingest(token, read_spans(request("shop", "1.1.0", spans)))
    client = Client()
    user = User.objects.create_user("viewer", password="x" * 12)
    client.force_login(user)
    assert client.get(f"/traces/releases/{release.pk}/").status_code == 403
    user.is_superuser = True
    user.save()
    page = client.get(release.get_absolute_url())
    assert f'hx-get="/traces/releases/{release.pk}/"' in page.content.decode()
    panel = client.get(f"/traces/releases/{release.pk}/").content.decode()
    assert 'data-status="new"' in panel and "ZeroDivisionError" in panel
    assert "&lt;script&gt;" in panel and "<script>" not in panel
    assert "GET /cart/{cart_id}/total</code> (2)" in panel
    # The group's sample trace, folded: its one span, failed.
    assert "<summary>Sample trace" in panel
    assert 'class="trc-span trc-span-error"' in panel
