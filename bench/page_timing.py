"""Server time and SQL queries of the site's pages, measured in the driver process.

Each page is requested through Django's test client (the whole middleware stack, the view,
the templates; no network), as a logged-in superuser, over "HTTPS" (production settings
redirect plain HTTP). Pages are interleaved round by round; the queries of each request
are counted with `CaptureQueriesContext`.
"""

from __future__ import annotations

import time
from typing import Any


def measure(
    pages: dict[str, str],
    rounds: int,
    warmup: int = 1,
    time_budget_s: float = 60.0,
    slowest: int = 0,
) -> dict[str, Any]:
    """Time `pages` (name -> path); with `slowest`, also keep each page's slowest queries
    of its last request (SQL and seconds), to show where a slow page spends its time."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    user = get_user_model().objects.get(username="bench")
    # A host the production settings allow (the test client's default is "testserver").
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    names = list(pages)
    results: dict[str, dict[str, Any]] = {
        name: {"ms": [], "queries": [], "status": None, "bytes": 0, "slowest": []} for name in names
    }
    started = time.monotonic()
    for index in range(warmup + rounds):
        if index > warmup and time.monotonic() - started > time_budget_s:
            break
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            with CaptureQueriesContext(connection) as queries:
                begin = time.perf_counter()
                response = client.get(pages[name], secure=True)
                elapsed = (time.perf_counter() - begin) * 1000
            entry = results[name]
            entry["status"] = response.status_code
            entry["bytes"] = len(response.content)
            if index >= warmup:
                entry["ms"].append(elapsed)
                entry["queries"].append(len(queries))
                if slowest:
                    ranked = sorted(queries.captured_queries, key=lambda q: -float(q["time"]))
                    entry["slowest"] = [
                        {"seconds": float(q["time"]), "sql": q["sql"][:400]}
                        for q in ranked[:slowest]
                    ]
    return {"pages": results}
