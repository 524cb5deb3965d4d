"""What each pytest-xdist worker (`-n 2`, as .ci/run runs the suite) keeps to itself.

pytest-django already gives every worker its own test database (`_gw0`, `_gw1` ... after the
name). The rest of what the site's processes meet in is not in the database: the data dir (the
SQLite channel layer's file, traces, keys, static files) and, when REDIS_URL is set, the Redis
database of the channel layer. Two workers sharing them would see each other's messages, since
both number their runs from 1 ("run-1" is a group in each). So each worker gets a data dir under
the one given, and the Redis database numbered the given one plus its index.

These are environment variables, set before Django reads its settings, so the processes a test
starts (live sites, `manage.py` commands) inherit them as they are.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

# Redis has 16 databases by default; bench/site.py keeps 13 for the benchmarks.
REDIS_DATABASES = 13
WORKER = re.compile(r"gw(\d+)")


def worker_index(worker: str) -> int:
    """The number in xdist's worker id ("gw3" -> 3)."""
    matched = WORKER.fullmatch(worker)
    if matched is None:
        raise ValueError(f"not a pytest-xdist worker id: {worker!r}")
    return int(matched.group(1))


def worker_redis_url(url: str, index: int) -> str:
    """`url` on the Redis database `index` places after the one it names (0 when none)."""
    parts = urlsplit(url)
    if parts.scheme == "unix":  # unix:///path/redis.sock?db=2
        query = dict(parse_qsl(parts.query))
        query["db"] = str(int(query.get("db", "0")) + index)
        number = int(query["db"])
        url = f"{url.partition('?')[0]}?{urlencode(query)}"
    else:  # redis://host:port/2
        number = int(parts.path.strip("/") or "0") + index
        url = urlunsplit(parts._replace(path=f"/{number}"))
    if number >= REDIS_DATABASES:
        raise ValueError(
            f"Redis database {number} for worker {index}: use fewer workers or a lower "
            f"database in REDIS_URL ({REDIS_DATABASES} and up are the benchmarks')"
        )
    return url


def worker_environment(
    worker: str, environ: Mapping[str, str], default_data_dir: Path
) -> dict[str, str]:
    """The variables worker `worker` sets for itself and for the processes it starts."""
    index = worker_index(worker)
    data_dir = Path(environ.get("DETECTIVE_DATA_DIR") or default_data_dir)
    changed = {"DETECTIVE_DATA_DIR": str(data_dir / f"xdist-{worker}")}
    redis_url = environ.get("REDIS_URL")
    if redis_url:
        changed["REDIS_URL"] = worker_redis_url(redis_url, index)
    return changed


# What pytest-django's reordering of the tests (as Django's runner orders them) puts first:
# tests in a rolled-back transaction, then transactional ones, then those without a database.
IN_A_TRANSACTION, TRANSACTIONAL, NO_DATABASE = "db", "transactional_db", "no_db"
SHARED_SCOPES = {"class", "module", "package"}


def database_use(item: pytest.Item) -> str:
    """Which of pytest-django's three bands a test falls in (its own rule, for plain tests)."""
    marker = item.get_closest_marker("django_db")
    fixtures = set(getattr(item, "fixturenames", ()))
    transactional = bool(marker and marker.kwargs.get("transaction")) or bool(
        fixtures & {"transactional_db", "live_server"}
    )
    if transactional:
        return TRANSACTIONAL
    if marker is not None or "db" in fixtures:
        return IN_A_TRANSACTION
    return NO_DATABASE


def shared_fixture_group(item: pytest.Item) -> str | None:
    """The xdist group of a test that uses a fixture shared by its module or class (a live site,
    a Chromium, a model server): its module and its database band, so that the module's tests of
    one band run on one worker and the shared fixture starts once. None for the others, which
    go wherever a worker is free.

    The band is in the name because a worker runs a group where its first test stands in
    pytest-django's order: a transactional test placed among the rolled-back ones would flush
    the database (and the data its migrations made, such as the Release managers group) under
    the rolled-back tests that come after it on that worker."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    shared = any(
        definition.scope in SHARED_SCOPES
        for definitions in info.name2fixturedefs.values()
        for definition in definitions
    )
    if not shared:
        return None
    return f"{item.nodeid.split('::', 1)[0]}:{database_use(item)}"
