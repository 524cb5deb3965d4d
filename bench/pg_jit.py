"""PostgreSQL's JIT on the pages' statements (issue 39, item 7): `python -m bench.pg_jit`.

In a Django process pointed at a PostgreSQL database holding the scale benchmark's data
(`scale_data.load`), each page of `scale_child.page_paths` is requested once through the test
client and its SELECT statements captured; each is then run under `EXPLAIN (ANALYZE, FORMAT
JSON)` with `jit` on and off (best of three), printing per page the statements' execution
time, the planner's highest cost and the time JIT took (generation, inlining, optimisation,
emission). A measurement to decide by, not a benchmark of the suite.
"""

from __future__ import annotations

import json
import sys
from typing import Any

ROUNDS = 3


def explain(cursor: Any, sql: str, jit: bool) -> tuple[float, float, float]:
    """(execution ms, JIT ms, total cost) of the statement's best run of ROUNDS."""
    cursor.execute(f"SET jit = {'on' if jit else 'off'}")
    best: tuple[float, float, float] | None = None
    for _ in range(ROUNDS):
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}")
        plan = cursor.fetchone()[0]
        plan = json.loads(plan) if isinstance(plan, str) else plan
        top = plan[0]
        timing = (top.get("JIT") or {}).get("Timing") or {}
        jit_ms = (
            float(timing.get("Total", 0.0))
            if isinstance(timing.get("Total"), int | float)
            else (sum(float(v) for v in timing.values() if isinstance(v, int | float)))
        )
        found = (float(top["Execution Time"]), jit_ms, float(top["Plan"]["Total Cost"]))
        best = found if best is None or found[0] < best[0] else best
    assert best is not None
    return best


def main(key: str) -> None:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from bench.scale_child import page_paths

    user_model = get_user_model()
    user = user_model.objects.filter(username="jit").first() or user_model.objects.create_superuser(
        "jit", "jit@example.com", "jit-pw"
    )
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        default = cursor.fetchone()[0]
        cursor.execute("SHOW jit_above_cost")
        above = cursor.fetchone()[0]
    print(f"jit={default} jit_above_cost={above} ({connection.pg_version})")
    for name, (path, headers) in page_paths(key).items():
        if "Authorization" in headers:
            continue  # the APIs' statements are the release's own rows: far below any JIT cost
        client.get(path, secure=True)
        with CaptureQueriesContext(connection) as captured:
            client.get(path, secure=True)
        statements = [q["sql"] for q in captured.captured_queries if q["sql"].startswith("SELECT")]
        on = off = jit_ms = 0.0
        cost = 0.0
        with connection.cursor() as cursor:
            for sql in statements:
                ms_on, jit_spent, plan_cost = explain(cursor, sql, True)
                ms_off, _, _ = explain(cursor, sql, False)
                on, off, jit_ms = on + ms_on, off + ms_off, jit_ms + jit_spent
                cost = max(cost, plan_cost)
            cursor.execute("RESET jit")
        print(
            f"{name}: {len(statements)} SELECTs, highest cost {cost:,.0f}; "
            f"jit on {on:.1f} ms (JIT {jit_ms:.1f} ms), jit off {off:.1f} ms"
        )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "unused")
