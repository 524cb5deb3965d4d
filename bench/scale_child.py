"""The scale benchmark's child: `python -m bench.scale_child RELEASES CASES ROUNDS KEY`, in an
environment pointed at a migrated, empty database of its own (see `bench/scale.py`).

It loads the data (`scale_data.load`), then times each page through Django's test client
(production settings, the whole middleware stack, no network) as a logged-in superuser, the
pages interleaved round by round, counting each one's SQL queries; the API calls carry the
bearer key. It prints one JSON line: the counts, the load's seconds and each page's figures (server
time, and the process's CPU time, which a busy machine moves less).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any


def page_paths(key: str) -> dict[str, tuple[str, dict[str, str]]]:
    from bench.scale_data import PAGE_RELEASE
    from releases.models import Release
    from releases.selectors import SORTS

    release = Release.objects.select_related("service").get(version=PAGE_RELEASE)
    api = {"Authorization": f"Bearer {key}"}
    query = f"?service={release.service.slug}"
    paths: dict[str, tuple[str, dict[str, str]]] = {"release list": ("/releases/", {})}
    for sort in sorted(SORTS, key=lambda s: (s.lstrip("-"), s)):
        paths[f"release list, sort={sort}"] = (f"/releases/?sort={sort}", {})
    paths["release list, severity=high"] = ("/releases/?severity=high", {})
    paths["home"] = ("/", {})
    paths["review desk"] = ("/review/", {})
    paths["release page (1,000 test cases)"] = (release.get_absolute_url(), {})
    paths["summary API"] = (f"/api/releases/{PAGE_RELEASE}/summary{query}", api)
    paths["verdict API"] = (f"/api/releases/{PAGE_RELEASE}/verdict{query}", api)
    return paths


def time_pages(
    paths: dict[str, tuple[str, dict[str, str]]], rounds: int, warmup: int = 2
) -> dict[str, Any]:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    user = get_user_model().objects.create_superuser("bench", "bench@example.com", "bench-pw")
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    # The APIs are called as a CI job calls them: a bearer key, no session.
    api_client = Client(HTTP_HOST="127.0.0.1")
    results: dict[str, Any] = {
        name: {"ms": [], "cpu_ms": [], "queries": [], "status": None, "bytes": 0, "slowest": []}
        for name in paths
    }
    names = list(paths)
    for index in range(rounds + warmup):
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            path, headers = paths[name]
            with CaptureQueriesContext(connection) as queries:
                begin, begin_cpu = time.perf_counter(), time.process_time()
                caller = api_client if "Authorization" in headers else client
                response = caller.get(path, secure=True, headers=headers)
                elapsed = (time.perf_counter() - begin) * 1000
                cpu = (time.process_time() - begin_cpu) * 1000
            entry = results[name]
            entry["status"], entry["bytes"] = response.status_code, len(response.content)
            if index >= warmup:
                entry["ms"].append(elapsed)
                entry["cpu_ms"].append(cpu)
                entry["queries"].append(len(queries))
                slowest = sorted(queries.captured_queries, key=lambda q: -float(q["time"]))[:2]
                entry["slowest"] = [(float(q["time"]), q["sql"][:400]) for q in slowest]
    return results


def main(argv: list[str]) -> None:
    import django

    django.setup()
    from bench.scale_data import load

    releases, cases, rounds, key = int(argv[0]), int(argv[1]), int(argv[2]), argv[3]
    began = time.perf_counter()
    counts = load(releases, cases)
    load_s = time.perf_counter() - began
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    # A smoke run (--quick: 3 rounds) warms each page once; the full run twice.
    pages = time_pages(page_paths(key), rounds, warmup=1 if rounds <= 3 else 2) if rounds else {}
    print(json.dumps({"counts": counts, "load_s": load_s, "pages": pages}))


if __name__ == "__main__":
    main(sys.argv[1:])
