"""What the browser tests share: Debian's Chromium through Playwright's sync API (never a
downloaded browser), the two widths pages are looked at, logging in, and screenshots.

Set DETECTIVE_SCREENSHOTS=<dir> to keep screenshots of the pages the tests visit.

Without Chromium the browser tests are skipped with one line saying why, so `uv run pytest`
passes on a fresh clone; with CI set (`CI=true`, as CI services and .ci/run set it) they fail
instead, since CI must run them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from playwright.sync_api import Browser, Page, sync_playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
PASSWORD = "browser-test-password"


def ci_is_set(environ: Mapping[str, str]) -> bool:
    return environ.get("CI", "").strip().lower() in {"1", "true", "yes", "on"}


def without_chromium(
    executable: str, environ: Mapping[str, str]
) -> tuple[Literal["run", "skip", "fail"], str]:
    """What a browser test does on this machine: run, or skip or fail with the reason."""
    if os.access(executable, os.X_OK):
        return "run", ""
    reason = f"Chromium is not installed at {executable} (Debian: apt-get install chromium)"
    if ci_is_set(environ):
        return "fail", f"{reason}; CI is set, and CI must run the browser tests"
    return "skip", f"{reason}: browser tests skipped"


@contextmanager
def chromium() -> Iterator[Browser]:
    # Between two calls, Playwright's sync API leaves its event loop marked as running in this
    # thread, where Django then refuses the ORM; the tests' ORM calls are plain sync code.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield browser
            browser.close()


def password_hash(password: str = PASSWORD) -> str:
    """A hash the live site's hashers accept (the test process only knows the fast MD5 one);
    few iterations, since the site checks it on every login."""
    hasher = PBKDF2PasswordHasher()
    return hasher.encode(password, hasher.salt(), iterations=1000)


def log_in(page: Page, username: str, next_path: str, password: str = PASSWORD) -> None:
    """Through the login form, to `next_path`."""
    page.goto(next_path)
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"**{next_path}")


def screenshots(page: Page, name: str) -> None:
    """The page at desktop and phone widths, when DETECTIVE_SCREENSHOTS names a directory."""
    directory = os.environ.get("DETECTIVE_SCREENSHOTS")
    if not directory:
        return
    Path(directory).mkdir(parents=True, exist_ok=True)
    for label, size in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(size)
        page.screenshot(path=str(Path(directory) / f"{name}-{label}.png"), full_page=True)
    page.set_viewport_size(DESKTOP)
