"""Display helpers."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from releases.templatetags.release_format import ago


def test_ago_says_just_now_for_the_last_minute_and_the_largest_unit_after() -> None:
    now = timezone.now()
    assert ago(now - timedelta(seconds=20)) == "just now"
    assert ago(now - timedelta(minutes=3, seconds=5)) == "3\xa0minutes ago"
    assert ago(None) is None
