"""Benchmark 5, pages: server time and SQL queries of the main pages over a large history.

A site (`site.py`, production settings, SQLite) is seeded twice: small, then large (10,000
releases with 100,000 runs and reports, a few hundred eval runs; a tenth of that with
`--quick`). One real assessment runs through the seam first, so the run page shows a real
run (events, messages, trace). Each page is timed in the driver process (`page_timing`),
the pages interleaved round by round; its queries are counted at both sizes, which must
agree: a page whose query count grows with the rows has an N+1 somewhere.

The prepared site is kept for the memory benchmark (`ctx.shared["pages_site"]`).
"""

from __future__ import annotations

from typing import Any

from bench.harness import Context, Result, Stats
from bench.site import Site, session, sqlite_files

NAME = "pages"
TARGET_P95_MS = 100.0
# (releases small, large; eval runs small, large). The small eval history is already past
# the evals page's 30 recent runs, after which it reads the baseline with one query more.
SIZES = {"quick": (100, 1_000, 35, 50), "full": (100, 10_000, 40, 200)}


def page_paths(seeded: dict[str, Any], run_id: str) -> dict[str, str]:
    paths = {
        "home (not in the issue's five)": "/",
        "release list": "/releases/",
        "release list, page 40": "/releases/?page=40",
        "release detail": f"/releases/{seeded['release']}/",
        "run page": f"/runs/{run_id}/",
        "evals page": "/evals/",
    }
    if seeded.get("eval_run"):
        paths["eval run page"] = f"/evals/runs/{seeded['eval_run']}/"
        paths["compare page"] = f"/evals/compare/{seeded['eval_run']}/"
    return paths


def prepare(ctx: Context) -> dict[str, Any]:
    """The seeded site (small, measured for query counts, then large), made once a run; its
    processes stay up for the memory benchmark until the run ends."""
    prepared: dict[str, Any] | None = ctx.shared.get("pages_site")
    if prepared is not None:
        return prepared
    small, large, evals_small, evals_large = SIZES["quick" if ctx.quick else "full"]
    running = ctx.stack.enter_context(session(ctx, "pages", keep=True))
    site, driver = running.site, running.driver
    sessionid = driver.call("login")["sessionid"]
    seeded = driver.call("seed", releases=small, eval_runs=evals_small)
    queued = driver.call("queue", version=seeded["release"])
    assessed = driver.call(
        "assess", run=queued["run"], base_url=f"{site.llm_url}/v1", api_url=site.api_url
    )
    if assessed["status"] != "succeeded":
        raise RuntimeError(f"the run for the run page ended {assessed['status']}")
    paths = page_paths(seeded, queued["run"])
    ctx.say(f"{NAME}: {len(paths)} pages, query counts at {seeded['counts']}")
    at_small = driver.call("pages", pages=paths, rounds=2, warmup=1)["pages"]
    ctx.say(f"{NAME}: seeding {large:,} releases with {large * 10:,} runs and reports")
    seeded_large = driver.call("seed", releases=large, eval_runs=evals_large, timeout_s=900)
    prepared = {
        "site": site,
        "driver": driver,
        "sessionid": sessionid,
        "web_idle_mb": running.web_idle_mb,
        "paths": paths,
        "small": {"counts": seeded["counts"], "pages": at_small},
        "counts": seeded_large["counts"],
    }
    ctx.shared["pages_site"] = prepared
    return prepared


async def run(ctx: Context) -> list[Result]:
    prepared = prepare(ctx)
    site: Site = prepared["site"]
    paths: dict[str, str] = prepared["paths"]
    rounds = 8 if ctx.quick else 40
    counts = prepared["counts"]
    ctx.say(f"{NAME}: timing {len(paths)} pages at {counts}, {rounds} rounds")
    measured = prepared["driver"].call(
        "pages", pages=paths, rounds=rounds, warmup=2, time_budget_s=30 if ctx.quick else 180
    )["pages"]
    size = sum(path.stat().st_size for path in sqlite_files(site.data_dir)) / 2**20
    rows = []
    small_pages = prepared["small"]["pages"]
    for name in paths:
        entry = measured[name]
        if entry["status"] != 200 or not entry["ms"]:
            rows.append(
                Result(
                    NAME,
                    name,
                    "server time",
                    "ms",
                    note=f"HTTP {entry['status']}: not measured",
                    met=False,
                    target=f"p95 <= {TARGET_P95_MS:g} ms",
                )
            )
            continue
        stats = Stats.of(entry["ms"])
        queries_large = sorted(set(entry["queries"]))
        queries_small = sorted(set(small_pages[name]["queries"]))
        constant = queries_large == queries_small and len(queries_large) == 1
        rows.append(
            Result(
                NAME,
                name,
                "server time",
                "ms",
                stats=stats,
                target=f"p95 <= {TARGET_P95_MS:g} ms",
                met=stats.p95 <= TARGET_P95_MS,
                extra={"bytes": entry["bytes"]},
            )
        )
        rows.append(
            Result(
                NAME,
                name,
                "SQL queries",
                "queries",
                value=float(queries_large[-1]),
                target=f"same at {prepared['small']['counts']['releases']:,} and "
                f"{counts['releases']:,} releases",
                met=constant,
                note=""
                if constant
                else f"{queries_small} queries when small, {queries_large} when large",
            )
        )
    rows[0].note = (
        f"{counts['releases']:,} releases, {counts['runs']:,} runs, {counts['reports']:,} "
        f"reports, {counts['eval_runs']:,} eval runs ({counts['eval_results']:,} results); "
        f"SQLite {size:,.0f} MiB"
    )
    return rows
