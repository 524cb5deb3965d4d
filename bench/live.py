"""Benchmark 3, live latency: from the model emitting a text delta to a run page seeing it.

A whole site on loopback (`site.py`): the web server (daphne), the agent run through the
seam (`assessments.runner.run_assessment`, in the driver process, as the worker's task runs
it) and the model server streaming its text as one word every 20 ms, each word carrying the
`time.monotonic_ns()` at which it was written. Websocket clients on the run page
(`ws/runs/<id>/`, logged in, replaying from 0 as a fresh page does) note when each word
arrives; latency = arrival - emission, through everything between: the worker's HTTP
client and agent loop, saving the event (SQLite), rendering it, publishing it on the channel
layer, the web server's consumer relaying it.

Cases: the embedded default (SQLite channel layer) and Redis (the machine's, when it
answers). Contestants, interleaved run by run: 1 viewer, and 100 viewers of the same run.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from typing import Any

import httpx

from bench.harness import Context, Result, Stats, interleave
from bench.site import Site, redis_available, session
from bench.ws import WebSocket

NAME = "live"
DRIP_MS = 20
TARGET_P95_MS = {"embedded": 50.0, "redis": 20.0}
CROWD_LIMIT = 2.0  # 100 viewers: p95 at most twice one viewer's
_MARK = re.compile(r"\[t=(\d+)\]")


def latencies(messages: list[tuple[int, str]]) -> list[float]:
    """Milliseconds from emission to first arrival of each timestamped word one client saw."""
    seen: set[int] = set()
    found = []
    for arrived_ns, text in messages:
        for mark in _MARK.findall(text):
            emitted = int(mark)
            if emitted not in seen:
                seen.add(emitted)
                found.append((arrived_ns - emitted) / 1e6)
    return found


async def watch_run(
    site: Site, driver_call, run_id: str, viewers: int, cookie: str, timeout_s: float
) -> list[float]:
    """Open `viewers` sockets on the run, run it, and return every word's latency."""
    url = site.web_url.replace("http://", "ws://") + f"/ws/runs/{run_id}/"
    sockets = await asyncio.gather(
        *(
            WebSocket.connect(url, origin=site.web_url, cookie=f"sessionid={cookie}")
            for _ in range(viewers)
        )
    )
    listeners = [asyncio.ensure_future(socket.listen()) for socket in sockets]
    gate = uuid.uuid4().hex
    try:
        for socket in sockets:
            await socket.send_text(json.dumps({"last_seq": 0}))
        # The run starts, and its first model call waits at the gate: the timed words flow
        # once every page shows the run's first events, i.e. is relaying live.
        assessing = asyncio.ensure_future(
            asyncio.to_thread(
                driver_call,
                "assess",
                timeout_s,
                run=run_id,
                base_url=f"{site.llm_url}/gate/{gate}/drip/{DRIP_MS}/v1",
                api_url=site.api_url,
            )
        )
        async with asyncio.timeout(timeout_s):
            await _until_all_relaying(sockets, assessing, timeout_s / 2)
            async with httpx.AsyncClient() as client:
                await client.post(f"{site.llm_url}/gates/{gate}/open")
            answer = await assessing
            if answer["status"] != "succeeded":
                raise RuntimeError(f"the run ended {answer['status']}")
            await asyncio.gather(*listeners)
    finally:
        for socket in sockets:
            socket.close()
        for listener in listeners:
            listener.cancel()
        if "assessing" in locals() and not assessing.done():
            # The driver is stopped with the site; what its thread then raises is known.
            assessing.add_done_callback(lambda done: done.cancelled() or done.exception())
    samples: list[float] = []
    for socket in sockets:
        words = latencies([(m.at_ns, m.text) for m in socket.messages])
        if not words:
            raise RuntimeError(f"a viewer saw no words (close code {socket.close_code})")
        samples.extend(words)
    return samples


async def _until_all_relaying(
    sockets: list[WebSocket], assessing: asyncio.Future[Any], timeout_s: float
) -> None:
    """Wait until every socket has shown the run's first events (or the run ended)."""
    deadline = time.monotonic() + timeout_s
    while not all(socket.messages for socket in sockets):
        if assessing.done():
            return
        if time.monotonic() > deadline:
            silent = [s for s in sockets if not s.messages]
            codes = sorted({str(s.close_code) for s in silent})
            raise RuntimeError(
                f"{len(silent)} of {len(sockets)} viewers saw nothing of the run "
                f"(close codes: {', '.join(codes)})"
            )
        await asyncio.sleep(0.01)


async def measure_case(ctx: Context, case: str, redis: bool, rounds: int) -> list[Result]:
    with session(ctx, f"live-{case}", redis=redis) as running:
        site, driver = running.site, running.driver
        cookie = driver.call("login")["sessionid"]
        (version,) = driver.call("releases", count=1, prefix="v7.")["versions"]
        timeout_s = 60.0

        def contestant(viewers: int):  # type: ignore[no-untyped-def]
            async def run() -> list[float]:
                run_id = driver.call("queue", version=version)["run"]
                return await watch_run(site, driver.call, run_id, viewers, cookie, timeout_s)

            return run

        ctx.say(f"{NAME}: {case}, {rounds} runs each for 1 and 100 viewers")
        measured = await interleave(
            {"1 viewer": contestant(1), "100 viewers": contestant(100)},
            rounds=rounds,
            warmup=0 if ctx.quick else 1,
            time_budget_s=20 if ctx.quick else 120,
        )
    one = Stats.of(measured.samples["1 viewer"])
    crowd = Stats.of(measured.samples["100 viewers"])
    limit = TARGET_P95_MS[case]
    rows = [
        Result(
            NAME,
            f"delta -> page, {case}",
            "1 viewer",
            "ms",
            stats=one,
            target=f"p95 <= {limit:g} ms",
            met=one.p95 <= limit,
        ),
        Result(
            NAME,
            f"delta -> page, {case}",
            "100 viewers",
            "ms",
            stats=crowd,
            ratio=crowd.p95 / one.p95 if one.p95 > 0 else None,
            target=f"p95 <= {CROWD_LIMIT:g}x 1 viewer's",
            met=crowd.p95 <= CROWD_LIMIT * one.p95,
            note="ratio: of the p95s",
        ),
    ]
    return rows


async def run(ctx: Context) -> list[Result]:
    rounds = 1 if ctx.quick else 6
    rows = await measure_case(ctx, "embedded", False, rounds)
    if ctx.quick:
        # A site of its own costs seconds that --quick does not have; the full run has it.
        rows[0].note = "--quick: the Redis case runs only without --quick"
    elif redis_available():
        rows += await measure_case(ctx, "redis", True, rounds)
    else:
        ctx.say(f"{NAME}: no Redis at 127.0.0.1:6379, the Redis case is left out")
        rows[0].note = "no Redis at 127.0.0.1:6379: the Redis case did not run"
    return rows
