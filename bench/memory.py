"""Benchmark 6, memory: resident memory of the web server and of a task worker.

On the page benchmark's seeded site (made here if that benchmark did not run):

- the web server (daphne, production settings) once started and idle;
- the same process while the pages are requested over HTTP, four at a time: its peak
  (VmHWM, the kernel's high-water mark of resident memory);
- a task worker (`run_worker`, as `up` starts it) while it runs an assessment that the
  Reassess button queued (a real POST, with its CSRF token): peak again.

Resident memory is read from /proc (VmRSS, VmHWM), in MiB. Target: 150 MiB each.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

import httpx

from bench import pages
from bench.harness import Context, Result
from bench.procs import peak_rss_mb, rss_mb
from bench.site import Site, secure_headers

NAME = "memory"
LIMIT_MB = 150.0
CONCURRENCY = 4


def row(case: str, contestant: str, value: float, note: str = "") -> Result:
    return Result(
        NAME,
        case,
        contestant,
        "MiB",
        value=value,
        target=f"<= {LIMIT_MB:g} MiB",
        met=value <= LIMIT_MB,
        note=note,
    )


async def load_pages(
    web_url: str, sessionid: str, paths: dict[str, str], rounds: int
) -> tuple[int, int]:
    """Every page `rounds` times, CONCURRENCY at a time; (responses, non-200 responses)."""
    headers = secure_headers(web_url)
    cookies = {"sessionid": sessionid}
    bad = 0
    done = 0
    queue: asyncio.Queue[str] = asyncio.Queue()
    for _ in range(rounds):
        for path in paths.values():
            queue.put_nowait(path)

    async def fetch(client: httpx.AsyncClient) -> None:
        nonlocal bad, done
        while not queue.empty():
            path = queue.get_nowait()
            response = await client.get(path)
            done += 1
            bad += response.status_code != 200

    async with httpx.AsyncClient(
        base_url=web_url, headers=headers, cookies=cookies, timeout=60
    ) as client:
        await asyncio.gather(*(fetch(client) for _ in range(CONCURRENCY)))
    return done, bad


def reassess(web_url: str, sessionid: str, version: str) -> str:
    """Press Reassess: a POST with the session and a CSRF token; the run's id."""
    token = secrets.token_hex(16)  # 32 characters, a valid CSRF secret
    headers = {**secure_headers(web_url), "X-CSRFToken": token}
    cookies = {"sessionid": sessionid, "csrftoken": token}
    response = httpx.post(
        f"{web_url}/releases/{version}/reassess",
        headers=headers,
        cookies=cookies,
        follow_redirects=False,
        timeout=30,
    )
    if response.status_code not in (302, 303):
        raise RuntimeError(f"Reassess answered {response.status_code}")
    return response.headers["location"].rstrip("/").rsplit("/", 1)[-1]


def watch_worker(driver: Any, run_id: str, pids: list[int], timeout_s: float) -> float:
    """Sample the workers' resident memory until the run ends; the highest seen (MiB)."""
    highest = 0.0
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for pid in pids:
            highest = max(highest, rss_mb(pid))
        state = driver.call("runs", ids=[run_id])["runs"].get(run_id, {})
        if state.get("status") in ("succeeded", "failed", "cancelled"):
            if state["status"] != "succeeded":
                raise RuntimeError(f"the worker's run ended {state['status']}")
            return max(highest, *(peak_rss_mb(pid) for pid in pids))
        time.sleep(0.05)
    raise TimeoutError(f"the worker's run did not end within {timeout_s:g} s")


async def run(ctx: Context) -> list[Result]:
    prepared = pages.prepare(ctx)
    site: Site = prepared["site"]
    driver = prepared["driver"]
    sessionid: str = prepared["sessionid"]
    paths: dict[str, str] = prepared["paths"]
    web = site.web_process
    assert web is not None
    rounds = 3 if ctx.quick else 15
    rows = [row("web server", "idle", prepared["web_idle_mb"], "after start-up and one page")]
    ctx.say(f"{NAME}: {len(paths)} pages x {rounds}, {CONCURRENCY} at a time, over HTTP")
    started = time.monotonic()
    done, bad = await load_pages(site.web_url, sessionid, paths, rounds)
    seconds = time.monotonic() - started
    rows.append(
        row(
            "web server",
            "under the page benchmark",
            peak_rss_mb(web.pid),
            f"peak; {done} pages in {seconds:.1f} s ({bad} not 200), now "
            f"{rss_mb(web.pid):.0f} MiB; {prepared['counts']['releases']:,} releases",
        )
    )
    if bad:
        rows[-1].met = False
    (version,) = driver.call("releases", count=1, prefix="v8.")["versions"]
    with site.workers(1) as workers:
        await asyncio.sleep(1.0)  # the worker's start-up, before it is watched
        idle_worker = rss_mb(workers[0].pid)
        run_id = reassess(site.web_url, sessionid, version)
        peak = await asyncio.to_thread(
            watch_worker, driver, run_id, [w.pid for w in workers], 120.0
        )
    rows.append(row("task worker", "during a run", peak, f"peak; {idle_worker:.0f} MiB idle"))
    return rows
