"""The webhook tests' receiver: a real HTTP server on loopback (tests/webhook_receiver.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.webhook_receiver import Receiver, running_receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with running_receiver() as state:
        yield state
