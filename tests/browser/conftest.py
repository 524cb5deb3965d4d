"""Fixtures of the browser tests (helpers: tests/browser/chromium.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser

from tests.browser import chromium as helpers
from tests.browser.chromium import chromium


def pytest_runtest_setup(item: pytest.Item) -> None:
    # Before any fixture: no live site is started for a test that cannot run.
    if item.get_closest_marker("browser") is None:
        return
    verdict, reason = helpers.without_chromium(helpers.CHROMIUM, os.environ)
    if verdict == "fail":
        pytest.fail(reason, pytrace=False)
    if verdict == "skip":
        pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched
