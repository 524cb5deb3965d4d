"""The webhook tests' receiver: a real HTTP server on loopback (tests/webhook_receiver.py),
which these tests allow as an on-premises receiver would be (DETECTIVE_WEBHOOK_ALLOWED_NETWORKS)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.webhook_receiver import Receiver, running_receiver


@pytest.fixture(autouse=True)
def _loopback_allowed(settings: Any) -> None:
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with running_receiver() as state:
        yield state
