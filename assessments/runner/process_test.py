from __future__ import annotations

import gc

import pytest
from opentelemetry.util.http import parse_excluded_urls

from assessments.runner.process import DEFAULT_EXCLUDED_URLS, excluded_urls, freeze_startup_heap

HOST = "http://127.0.0.1:8000"
RUN = "6de67372-e5cb-4bf3-a8fc-b03854186fb9"


@pytest.mark.parametrize(
    ("path", "traced"),
    [
        ("/", False),
        ("/releases/", False),
        ("/releases/v2.1.0/", False),
        (f"/runs/{RUN}/", False),
        ("/evals/", False),
        ("/accounts/login/", False),
        ("/admin/releases/release/", False),
        ("/static/releases/app.css", False),
        ("/favicon.ico", False),
        ("/releases/v2.1.0/reassess", True),
        (f"/runs/{RUN}/cancel", True),
        ("/api/releases/v2.1.0/summary", True),
        ("/api/risk-reports", True),
    ],
)
def test_only_what_does_something_is_traced_by_default(path: str, traced: bool) -> None:
    excluded = parse_excluded_urls(DEFAULT_EXCLUDED_URLS)
    assert excluded.url_disabled(HOST + path) is not traced
    assert (
        parse_excluded_urls(DEFAULT_EXCLUDED_URLS).url_disabled(
            "https://detective.example.com" + path
        )
        is not traced
    )


def test_the_switches() -> None:
    assert excluded_urls({}) == DEFAULT_EXCLUDED_URLS
    assert excluded_urls({"DETECTIVE_TRACE_PAGES": "true"}) == ""
    # The instrumentor's own variables replace our list (None: it reads them itself).
    assert excluded_urls({"OTEL_PYTHON_DJANGO_EXCLUDED_URLS": "static"}) is None
    assert excluded_urls({"OTEL_PYTHON_EXCLUDED_URLS": "static"}) is None


def test_what_is_alive_is_frozen_and_garbage_is_not() -> None:
    gc.unfreeze()
    kept = [object() for _ in range(1000)]
    cycle: list[object] = []
    cycle.append(cycle)
    del cycle  # garbage: collected first, never frozen
    try:
        freeze_startup_heap()
        assert gc.get_freeze_count() >= len(kept)
        assert gc.collect() == 0  # nothing was left to find
    finally:
        gc.unfreeze()
