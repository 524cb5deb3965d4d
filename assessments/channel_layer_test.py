"""The SQLite channel layer: groups, channels, order, and delivery across processes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from assessments.channel_layer import SQLiteChannelLayer
from detective_site.config import BASE_DIR


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "channels.sqlite3"


async def receive(layer: SQLiteChannelLayer, channel: str, timeout: float = 2.0) -> dict:
    return await asyncio.wait_for(layer.receive(channel), timeout)


async def test_a_group_message_reaches_members_in_the_same_process(path: Path) -> None:
    layer = SQLiteChannelLayer(str(path))
    first, second = await layer.new_channel(), await layer.new_channel()
    await layer.group_add("run-1", first)
    await layer.group_add("run-1", second)
    await layer.group_send("run-1", {"type": "run.event", "seq": 1})
    assert await receive(layer, first) == {"type": "run.event", "seq": 1}
    assert await receive(layer, second) == {"type": "run.event", "seq": 1}
    await layer.close()


async def test_group_messages_cross_layers_in_order_and_only_to_members(path: Path) -> None:
    # Two layer objects on one file are two processes as far as the layer can tell.
    web, worker = SQLiteChannelLayer(str(path)), SQLiteChannelLayer(str(path))
    member, outsider = await web.new_channel(), await web.new_channel()
    await web.group_add("run-1", member)
    await web.group_add("run-2", outsider)
    for seq in range(1, 51):
        await worker.group_send("run-1", {"type": "run.event", "seq": seq})
    received = [(await receive(web, member))["seq"] for _ in range(50)]
    assert received == list(range(1, 51))
    with pytest.raises(TimeoutError):
        await receive(web, outsider, timeout=0.2)
    await web.group_discard("run-1", member)
    await worker.group_send("run-1", {"type": "run.event", "seq": 51})
    with pytest.raises(TimeoutError):
        await receive(web, member, timeout=0.2)
    await web.close()


async def test_a_member_does_not_get_what_was_sent_before_it_joined(path: Path) -> None:
    web, worker = SQLiteChannelLayer(str(path)), SQLiteChannelLayer(str(path))
    await worker.group_send("run-1", {"type": "old"})
    channel = await web.new_channel()
    await web.group_add("run-1", channel)
    await worker.group_send("run-1", {"type": "new"})
    assert (await receive(web, channel))["type"] == "new"
    await web.close()


async def test_send_to_channels(path: Path) -> None:
    one, other = SQLiteChannelLayer(str(path)), SQLiteChannelLayer(str(path))
    # A normal channel: one receiver claims each message.
    await one.send("jobs", {"type": "job", "n": 1})
    assert await receive(other, "jobs") == {"type": "job", "n": 1}
    with pytest.raises(TimeoutError):
        await receive(one, "jobs", timeout=0.1)
    # A process-specific channel of another process.
    channel = await other.new_channel()
    receiving = asyncio.ensure_future(receive(other, channel))
    await asyncio.sleep(0.05)
    await one.send(channel, {"type": "direct"})
    assert await receiving == {"type": "direct"}
    await other.close()


async def test_foreign_channels_cannot_join_groups(path: Path) -> None:
    layer = SQLiteChannelLayer(str(path))
    with pytest.raises(ValueError, match="process-specific"):
        await layer.group_add("run-1", "jobs")


async def test_flush_forgets_everything(path: Path) -> None:
    layer = SQLiteChannelLayer(str(path))
    await layer.send("jobs", {"type": "job"})
    await layer.flush()
    with pytest.raises(TimeoutError):
        await receive(layer, "jobs", timeout=0.1)


PUBLISHER = textwrap.dedent(
    """
    import asyncio, sys, time
    from assessments.channel_layer import SQLiteChannelLayer

    async def main():
        layer = SQLiteChannelLayer(sys.argv[1])
        for seq in range(1, 21):
            await layer.group_send("run-x", {"type": "run.event", "seq": seq, "at": time.time()})
            await asyncio.sleep(0.02)

    asyncio.run(main())
    """
)


async def test_another_process_reaches_this_one_within_the_latency_target(path: Path) -> None:
    layer = SQLiteChannelLayer(str(path))
    channel = await layer.new_channel()
    await layer.group_add("run-x", channel)
    publisher = subprocess.Popen(
        [sys.executable, "-c", PUBLISHER, str(path)], cwd=BASE_DIR, env={"PYTHONPATH": "."}
    )
    try:
        latencies, seqs = [], []
        for _ in range(20):
            message = await receive(layer, channel, timeout=15)
            latencies.append(time.time() - message["at"])
            seqs.append(message["seq"])
    finally:
        publisher.wait(timeout=15)
    assert seqs == list(range(1, 21))
    latencies.sort()
    # The poll interval is 10 ms; leave room for a busy 2-core machine.
    assert latencies[len(latencies) // 2] < 0.1, latencies
    await layer.close()
