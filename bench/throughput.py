"""Benchmark 4, throughput: runs at once, against a model that takes 300 ms per call.

1. Eval trials in one process, as `run_evals --concurrency N` runs them (`evals.runner.trials`,
   the release API served in-process): 20 trials of one scenario at concurrency 20, against
   1 trial alone. Target: at most 1.5x the wall time of one.
2. Web-triggered runs: N task workers (`run_worker`, as `up` starts them), and a burst of
   Reassess requests (real POSTs to the web server, one per release), until every run has
   finished; against one Reassess alone. Target: at most ceil(burst / N) x 1.2 x one run.

The model server answers every call after 300 ms (`/latency/300`); the web server and the
workers run with production settings on SQLite (`site.py`).
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

from bench.harness import Context, Result, Stats, interleave
from bench.memory import reassess
from bench.site import Site, session

NAME = "throughput"
LATENCY_MS = 300
SCENARIO = "boundary_one_failed_test"
EVAL_LIMIT = 1.5
BURST_SLACK = 1.2
FINISHED = ("succeeded", "failed", "cancelled")


def burst_limit(burst: int, workers: int, one_run_s: float) -> float:
    return math.ceil(burst / workers) * BURST_SLACK * one_run_s


def wait_finished(driver: Any, run_ids: list[str], timeout_s: float) -> float:
    """Block until every run has ended; the latest end (epoch seconds)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        states = driver.call("runs", ids=run_ids)["runs"]
        if len(states) == len(run_ids) and all(s["status"] in FINISHED for s in states.values()):
            failed = [pk for pk, s in states.items() if s["status"] != "succeeded"]
            if failed:
                raise RuntimeError(f"{len(failed)} run(s) did not succeed")
            return max(s["finished"] for s in states.values())
        time.sleep(0.1)
    raise TimeoutError(f"the runs did not end within {timeout_s:g} s")


async def eval_trials(ctx: Context, site: Site, driver: Any) -> list[Result]:
    base_url = f"{site.llm_url}/latency/{LATENCY_MS}/v1"

    def contestant(trials: int):  # type: ignore[no-untyped-def]
        async def run() -> list[float]:
            answer = await asyncio.to_thread(
                driver.call,
                "evals",
                120.0,
                scenarios=SCENARIO,
                trials=trials,
                concurrency=trials,
                base_url=base_url,
            )
            if answer["trials"] != trials or answer["errored"]:
                raise RuntimeError(f"eval run: {answer}")
            return [answer["seconds"]]

        return run

    rounds, many_trials = (1, 5) if ctx.quick else (4, 20)
    many_name = f"{many_trials} trials, concurrency {many_trials}"
    ctx.say(f"{NAME}: eval trials, 1 vs {many_trials} at once, {rounds} round(s)")
    measured = await interleave(
        {"1 trial": contestant(1), many_name: contestant(many_trials)},
        rounds=rounds,
        warmup=0 if ctx.quick else 1,
        time_budget_s=60,
    )
    one = Stats.of(measured.samples["1 trial"])
    many = Stats.of(measured.samples[many_name])
    ratio = many.median / one.median
    return [
        Result(NAME, "eval trials, 300 ms/call", "1 trial", "s", stats=one, ratio=1.0),
        Result(
            NAME,
            "eval trials, 300 ms/call",
            many_name,
            "s",
            stats=many,
            ratio=ratio,
            target=f"<= {EVAL_LIMIT:g}x 1 trial",
            met=ratio <= EVAL_LIMIT,
        ),
    ]


async def web_runs(ctx: Context, site: Site, driver: Any, sessionid: str) -> list[Result]:
    burst = 4 if ctx.quick else 20
    counts = (2,) if ctx.quick else (1, 2, 4)
    versions = driver.call("releases", count=burst, prefix="v6.")["versions"]
    rows = []
    for workers in counts:
        with site.workers(workers):
            if not ctx.quick:
                await asyncio.sleep(2.0)  # the workers' start-up

            def one_run() -> float:
                asked = time.time()
                run_id = reassess(site.web_url, sessionid, versions[0])
                return wait_finished(driver, [run_id], 60) - asked

            def burst_runs() -> float:
                asked = time.time()
                ids = [reassess(site.web_url, sessionid, version) for version in versions]
                return wait_finished(driver, ids, 300) - asked

            one_s = await asyncio.to_thread(one_run)
            if not ctx.quick:  # the first was a warm-up: imports, connections
                one_s = await asyncio.to_thread(one_run)
            ctx.say(f"{NAME}: {workers} worker(s), one run {one_s:.2f} s; burst of {burst}")
            burst_s = await asyncio.to_thread(burst_runs)
        limit = burst_limit(burst, workers, one_s)
        case = f"{burst} Reassess, {workers} worker(s)"
        rows.append(Result(NAME, case, "one run", "s", value=one_s))
        rows.append(
            Result(
                NAME,
                case,
                f"burst of {burst}",
                "s",
                value=burst_s,
                ratio=burst_s / one_s,
                target=f"<= ceil({burst}/{workers}) x {BURST_SLACK:g} x one = {limit:.1f} s",
                met=burst_s <= limit,
            )
        )
    return rows


async def run(ctx: Context) -> list[Result]:
    with session(ctx, "throughput") as running:
        site, driver = running.site, running.driver
        sessionid = driver.call("login")["sessionid"]
        rows = await eval_trials(ctx, site, driver)
        # The workers' model answers each call after 300 ms too.
        site.model_prefix = f"/latency/{LATENCY_MS}"
        try:
            rows += await web_runs(ctx, site, driver, sessionid)
        finally:
            site.model_prefix = ""
    return rows
