"""Benchmark: an assessment on the local model, from `manage.py assess` to the stored report.

Ten releases of the eval suite (`RELEASES`: five made of ingested files with their history, five
of a summary alone, the 400-change one among them) are put into a throwaway site, then each is
assessed once by `manage.py assess <version>` in its own process, against the local model that
`manage.py local_model serve` runs (or `DETECTIVE_BENCH_MODEL_URL`). The figure is the wall
time of that command, Django's start included, and a run counts only when it stored a report.
One assessment before them is not timed: it compiles the bytecode and fills the model server's
prompt cache with the system prompt, as the assessment before any other has.

Target (#20): p95 <= 12 s on an idle 2-core machine. A machine that is busy with anything else
measures that load, not the assessment: run it alone. Without a model server it is skipped;
`--quick` assesses the first three releases.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from bench.harness import Context, Result, Skip, Stats
from bench.site import PROJECT_ROOT, SQLITE_FILE, environment, template_dir
from local_model.paths import LocalModelPaths
from local_model.serve import running_server
from local_model.spec import MODEL

NAME = "assessment"
CONTESTANT = "local model"
TARGET_P95_S = 12.0
MODEL_URL_ENV = "DETECTIVE_BENCH_MODEL_URL"
RELEASES = (
    "context_pressure_400_changes",
    "database_upgrade_postgres16",
    "high_payment_failures",
    "known_flaky_failures",
    "new_failure_after_payment_change",
    "large_diffuse_change",
    "low_clean_docs",
    "medium_latency_degradation",
    "too_little_metric_data",
    "injection_in_changes",
)
QUICK_RELEASES = 3
# A hidden service of its own for the releases of a summary alone, as the evals keep theirs.
SERVICE = "bench-assessment"
ASSESS_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class Target:
    scenario: str
    version: str
    service: str


def model_url() -> str:
    """The local model's base URL, or Skip when none is running."""
    if url := os.environ.get(MODEL_URL_ENV):
        return url
    server = running_server(LocalModelPaths.for_data_dir(settings.DATA_DIR))
    if server is None:
        raise Skip(
            "no local model runs: start one with `manage.py local_model serve` "
            f"or set {MODEL_URL_ENV}"
        )
    return server.url


def prepare(scenario_ids: list[str]) -> list[dict[str, str]]:
    """Put the scenarios' releases into this site's database (run inside the throwaway site)."""
    from evals.scenario import load_suite
    from evals.scenario_sources import ingest_scenario
    from releases.models import Release, Service

    scenarios = {scenario.id: scenario for scenario in load_suite().scenarios}
    service, _ = Service.objects.get_or_create(
        slug=SERVICE, defaults={"name": SERVICE, "hidden": True}
    )
    targets = []
    for scenario_id in scenario_ids:
        scenario = scenarios[scenario_id]
        if scenario.sources is not None:
            release = ingest_scenario(scenario)
        else:
            assert scenario.release is not None, f"{scenario_id} has no release"
            payload = scenario.release.payload()
            release = Release.objects.create(
                service=service,
                version=scenario.release.version,
                changes=payload.get("changes"),
                test_results=payload.get("tests"),
                deployment_metrics=payload.get("deployment_metrics"),
            )
        targets.append(
            {"scenario": scenario_id, "version": release.version, "service": release.service.slug}
        )
    return targets


def _manage(*args: str) -> list[str]:
    return [sys.executable, str(PROJECT_ROOT / "manage.py"), *args]


def _site(ctx: Context, url: str) -> dict[str, str]:
    directory = ctx.scratch / NAME
    directory.mkdir(parents=True, exist_ok=True)
    (directory / SQLITE_FILE).write_bytes((template_dir(ctx.scratch) / SQLITE_FILE).read_bytes())
    env = environment(
        directory,
        DETECTIVE_PROVIDER="local",
        DETECTIVE_MODEL=MODEL.alias,
        DETECTIVE_BASE_URL=url,
    )
    # A user's Python keeps the bytecode it compiled; a sandbox that says not to would have
    # every assessment compile some 3,000 modules again (2.1 s, measured).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _targets(env: dict[str, str], scenario_ids: list[str]) -> list[Target]:
    code = (
        "import json; from bench.assessment import prepare; "
        f"print('TARGETS', json.dumps(prepare({scenario_ids!r})))"
    )
    done = subprocess.run(
        _manage("shell", "-c", code),
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("TARGETS ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"preparing the releases failed: {done.stderr.strip()[-2000:]}")
    return [Target(**item) for item in json.loads(lines[-1].removeprefix("TARGETS "))]


def assess(env: dict[str, str], target: Target, log: Path) -> float:
    """Seconds from starting `manage.py assess` to its exit with a stored report."""
    begin = time.perf_counter()
    with log.open("w", encoding="utf-8") as out:
        done = subprocess.run(
            _manage("assess", target.version, "--service", target.service),
            cwd=PROJECT_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=ASSESS_TIMEOUT_S,
        )
    seconds = time.perf_counter() - begin
    if done.returncode != 0:
        raise RuntimeError(
            f"assessing {target.scenario} stored no report (exit {done.returncode}; see {log})"
        )
    return seconds


async def run(ctx: Context) -> list[Result]:
    url = model_url()
    scenario_ids = list(RELEASES[:QUICK_RELEASES] if ctx.quick else RELEASES)
    env = _site(ctx, url)
    targets = await asyncio.to_thread(_targets, env, scenario_ids)
    # Not timed: the first run compiles the bytecode and fills the model server's prompt cache
    # with the system prompt, as any earlier assessment has for the next one.
    ctx.say(f"{NAME}: warming up on {targets[0].scenario}")
    await asyncio.to_thread(assess, env, targets[0], ctx.scratch / NAME / "warm-up.log")
    seconds: dict[str, float] = {}
    for target in targets:
        ctx.say(f"{NAME}: {target.scenario} ({target.version})")
        log = ctx.scratch / NAME / f"{target.scenario}.log"
        seconds[target.scenario] = await asyncio.to_thread(assess, env, target, log)
        ctx.say(f"{NAME}: {target.scenario} took {seconds[target.scenario]:.1f} s")
    stats = Stats.of(list(seconds.values()))
    slowest = max(seconds, key=seconds.__getitem__)
    return [
        Result(
            benchmark=NAME,
            case=f"{len(seconds)} releases, one assessment each",
            contestant=CONTESTANT,
            unit="s",
            stats=stats,
            target=f"p95 <= {TARGET_P95_S:g} s (idle 2 cores)",
            met=stats.p95 <= TARGET_P95_S,
            note=f"slowest: {slowest} {seconds[slowest]:.1f} s",
            extra={"seconds": {name: round(value, 2) for name, value in seconds.items()}},
        )
    ]
