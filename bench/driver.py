"""The benchmarks' hands inside a site: a Django process driven over stdin/stdout.

`python -m bench.driver`, with a site's environment (see `site.py`). Each
line in is one JSON request `{"op": ..., ...}`; each answer is one line out, `@@ ` then JSON
with `"ok"`. It prints `@@ {"ok": true, "ready": true}` once Django is set up.

Operations: `login` (a superuser and a session cookie for pages and websockets),
`releases` (small releases to assess), `queue` (a queued run, as Reassess makes it),
`assess` (run a queued run through the seam, `assessments.runner`, as the worker's task
does), `runs` (the state of runs), `seed` (the large dataset of the page benchmark) and
`pages` (time pages in-process: server time and SQL queries).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any


def _setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "detective_site.settings")
    import django

    django.setup()
    from assessments.runner.process import freeze_startup_heap

    # The driver stands for a process of the site (page timings): frozen like the web server.
    freeze_startup_heap()


def login(**_: Any) -> dict[str, Any]:
    from django.contrib.auth import (
        BACKEND_SESSION_KEY,
        HASH_SESSION_KEY,
        SESSION_KEY,
        get_user_model,
    )
    from django.contrib.sessions.backends.db import SessionStore

    user_model = get_user_model()
    user = user_model.objects.filter(username="bench").first()
    if user is None:
        user = user_model.objects.create_superuser("bench", "bench@example.invalid", None)
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    return {"sessionid": session.session_key, "user": user.pk}


SUMMARY: dict[str, Any] = {
    "changes": ["Added payment processing", "Fixed authentication bug"],
    "test_results": {"passed": 142, "failed": 2, "skipped": 5},
    "deployment_metrics": {"error_rate": 0.06, "response_time_p95": 450},
}


def releases(count: int, prefix: str = "v9.", **_: Any) -> dict[str, Any]:
    from releases.models import Release

    versions = [f"{prefix}{index}.0" for index in range(count)]
    existing = set(Release.objects.filter(version__in=versions).values_list("version", flat=True))
    Release.objects.bulk_create(
        Release(version=version, title="Benchmark", **SUMMARY)
        for version in versions
        if version not in existing
    )
    return {"versions": versions}


def queue(version: str, **_: Any) -> dict[str, Any]:
    from assessments import services, tasks
    from releases import selectors

    release = selectors.find_release(version)
    assert release is not None, f"no release {version}"
    run = services.start_assessment(release, None, enqueue=tasks.enqueue_assessment)
    return {"run": str(run.pk), "status": run.status}


def assess(run: str, base_url: str, api_url: str, **_: Any) -> dict[str, Any]:
    from assessments import runner

    started = time.monotonic()
    status = runner.run_assessment(run, api_url=api_url, base_url=base_url)
    return {"status": status, "seconds": time.monotonic() - started}


def runs(ids: list[str], **_: Any) -> dict[str, Any]:
    from releases.models import Conversation

    rows = Conversation.objects.filter(pk__in=ids).values_list(
        "pk", "status", "created_at", "started_at", "finished_at"
    )
    return {
        "runs": {
            str(pk): {
                "status": status,
                "created": created.timestamp(),
                "started": started.timestamp() if started else None,
                "finished": finished.timestamp() if finished else None,
            }
            for pk, status, created, started, finished in rows
        }
    }


def evals(scenarios: str, trials: int, concurrency: int, base_url: str, **_: Any) -> dict[str, Any]:
    """An eval run as `run_evals` makes it (the release API served in-process)."""
    from assessments.runner.process import freeze_startup_heap
    from evals.runner.trials import EvalOptions, run_suite
    from evals.scenario import load_suite

    options = EvalOptions(
        trials=trials,
        concurrency=concurrency,
        provider="openai-compatible",
        model="scripted",
        base_url=base_url,
    )
    suite = load_suite(pattern=scenarios)
    freeze_startup_heap()
    started = time.monotonic()
    run = run_suite(suite, options, notes="benchmark")
    return {
        "seconds": time.monotonic() - started,
        "status": run.status,
        "trials": run.results.count(),
        "errored": run.results.filter(passed__isnull=True).count(),
    }


def seed(**arguments: Any) -> dict[str, Any]:
    from bench.dataset import seed as make

    return make(**arguments)


def pages(**arguments: Any) -> dict[str, Any]:
    from bench.page_timing import measure

    return measure(**arguments)


OPERATIONS: dict[str, Callable[..., dict[str, Any]]] = {
    "login": login,
    "releases": releases,
    "queue": queue,
    "assess": assess,
    "runs": runs,
    "seed": seed,
    "evals": evals,
    "pages": pages,
}


def answer(payload: dict[str, Any]) -> None:
    sys.stdout.write("@@ " + json.dumps(payload) + "\n")
    sys.stdout.flush()


def main() -> None:
    _setup()
    from django.db import close_old_connections

    answer({"ok": True, "ready": True, "pid": os.getpid()})
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            operation = OPERATIONS[request.pop("op")]
            close_old_connections()
            answer({"ok": True, **operation(**request)})
        except Exception as error:
            answer({"ok": False, "error": f"{type(error).__name__}: {error}"})
            traceback.print_exc()


if __name__ == "__main__":
    main()
