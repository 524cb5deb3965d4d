"""One warning per outage, and a publish that gives up quickly and for a while."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from assessments import layer_health
from assessments.layer_health import Outage, Publisher


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_an_outage_is_one_warning_and_its_end_one_more(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    outage = Outage(clock)
    for _ in range(50):
        outage.failed(ConnectionError("Error 111 connecting to 127.0.0.1:6390.\nmore"))
        clock.now += 0.5
    assert outage.down
    outage.recovered()
    outage.recovered()

    said = warnings(caplog)
    assert len(said) == 2, said
    assert "ConnectionError: Error 111 connecting to 127.0.0.1:6390." in said[0]
    assert "more" not in said[0]
    assert said[1] == "the channel layer answers again, after 25.0 s"
    assert not any(r.exc_info for r in caplog.records)  # no traceback


def test_an_attempt_begun_before_the_layer_came_back_opens_no_new_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    outage = Outage(clock)
    outage.failed(TimeoutError())
    begun = clock.now + 1
    clock.now += 2
    outage.recovered()
    outage.failed(TimeoutError(), started=begun)  # a slow attempt that failed meanwhile
    assert not outage.down
    outage.failed(TimeoutError(), started=clock.now)  # a new one: a new outage
    assert outage.down
    assert len(warnings(caplog)) == 3


def test_publishing_skips_the_layer_for_a_while_after_a_failure() -> None:
    clock = Clock()
    sent: list[str] = []
    failing = True

    def send(group: str, message: dict[str, Any]) -> None:
        clock.now += 1.0  # the time limit, waited out
        if failing:
            raise TimeoutError
        sent.append(group)

    outage = Outage(clock)
    publisher = Publisher(send, outage, retry_after=2.0, clock=clock)
    assert publisher.publish("run-1", {}) is False
    assert outage.down
    before = clock.now
    assert [publisher.publish("run-1", {}) for _ in range(100)] == [False] * 100
    assert clock.now == before  # none of them waited

    clock.now += 2.0
    failing = False
    assert publisher.publish("run-1", {}) is True
    assert sent == ["run-1"] and not outage.down


def test_a_slow_first_build_of_the_layer_is_no_outage(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:

    sent: list[str] = []

    class Layer:
        async def group_send(self, group: str, message: dict[str, Any]) -> None:
            sent.append(group)

    def build_slowly() -> Layer:
        time.sleep(0.3)  # channels_redis and redis.asyncio imported on a loaded machine
        return Layer()

    monkeypatch.setattr(layer_health, "PUBLISH_TIMEOUT_S", 0.1)
    monkeypatch.setattr(layer_health, "get_channel_layer", build_slowly)
    publisher = Publisher(layer_health._group_send, Outage())

    assert publisher.publish("run-1", {"type": "run.event"}) is True
    assert sent == ["run-1"]
    assert warnings(caplog) == []


def test_a_layer_that_does_not_answer_in_time_is_an_outage(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:

    class Paused:
        async def group_send(self, group: str, message: dict[str, Any]) -> None:
            await asyncio.sleep(5)

    monkeypatch.setattr(layer_health, "PUBLISH_TIMEOUT_S", 0.1)
    monkeypatch.setattr(layer_health, "get_channel_layer", Paused)
    publisher = Publisher(layer_health._group_send, Outage())

    assert publisher.publish("run-1", {"type": "run.event"}) is False
    assert [w.split(" (")[0] for w in warnings(caplog)] == ["the channel layer is not answering"]
