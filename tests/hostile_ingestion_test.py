"""Issue 37, item 7: no input makes ingestion answer 500. Each value the issue found, against the
JSON endpoints and the bundle: a 4xx with the reason, and nothing stored. Then a Hypothesis fuzz
of the ingestion API (releases, commits, metrics, the bundle): thousands of generated bodies,
none answered 5xx, none stored in part. Run on SQLite, and on PostgreSQL with DATABASE_URL."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from releases.models import Release, Service
from sources import services
from sources.models import Commit, CommitFile, Ingestion, MetricSample

pytestmark = pytest.mark.django_db

SHA = "a" * 40
DEPLOYED = "2026-11-20T10:00:00+00:00"
DEPLOYED_MS = 1795255200000  # DEPLOYED, in milliseconds
# The metrics are 10 minutes after the deploy: in the release's own window.
AFTER_MS = DEPLOYED_MS + 600_000


def commit(**changes: Any) -> dict[str, Any]:
    file = {"path": "pay.py", "old_path": None, "added": 3, "deleted": 1}
    file.update(changes.pop("file", {}))
    return {
        "sha": SHA,
        "author_name": "Ada",
        "author_email": "ada@example.com",
        "authored_at": DEPLOYED,
        "message": "fix: round refunds",
        "files": [file],
        "parents": [],
        **changes,
    }


STORED = (Service, Release, Ingestion, Commit, CommitFile, MetricSample)
# One statement for the six counts: the fuzz counts before and after each of its 2,400 requests,
# and six ORM counts were a third of its time (cProfile of test_fuzz_releases).
COUNTS = "SELECT " + ", ".join(f"(SELECT COUNT(*) FROM {m._meta.db_table})" for m in STORED)


def stored() -> tuple[int, ...]:
    """What ingestion writes, counted: a refused request must leave all of it as it was."""
    with connection.cursor() as cursor:
        cursor.execute(COUNTS)
        return tuple(cursor.fetchone())


@pytest.fixture
def token() -> str:
    return services.create_token("ci", None)[1]


def call(client: Client, token: str, path: str, body: Any, kind: str = "json") -> Any:
    headers = {"Authorization": f"Bearer {token}"}
    if kind == "json":
        data = body if isinstance(body, bytes) else json.dumps(body)
        return client.post(path, data=data, content_type="application/json", headers=headers)
    if kind == "text":
        return client.post(path, data=body, content_type="text/plain", headers=headers)
    parts = {name: json.dumps(value) for name, value in body.items() if name != "metrics"}
    if "metrics" in body:
        parts["metrics"] = SimpleUploadedFile("metrics.txt", body["metrics"])
    return client.post("/api/releases/bundle", data=parts, headers=headers)


YEAR_ONE = "0001-01-01T00:10:00Z"
# Each value the issue found answered 500 (or stored where the docs promise a 422).
RELEASE_VALUES = {
    "naive deploy time": {"version": "v1", "service": "shop", "deployed_at": "2026-11-20T10:00:00"},
    "deploy time at year 1": {"version": "v1", "service": "shop", "deployed_at": YEAR_ONE},
    "NUL in the service": {"version": "v1", "service": "sh\u0000op"},
    "lone surrogate in the service": {"version": "v1", "service": "sh\ud800op"},
    "U+202E in the service": {"version": "v1", "service": "shop\u202egnp.exe"},
    "NUL in the title": {"version": "v1", "service": "shop", "title": "a\u0000b"},
    "U+202E in the environment": {"version": "v1", "service": "shop", "environment": "prod\u202e"},
}  # fmt: skip
COMMIT_VALUES = {
    "line count 2**31": commit(file={"added": 2**31}),
    "hunk start 10**30": commit(file={"hunks": [[10**30, 1, 1, 1]]}),
    "generated 'true'": commit(file={"generated": "true"}),
    "vendored 'yes'": commit(file={"vendored": "yes"}),
    "removed 1": commit(file={"removed": 1}),
    "removed 1.0": commit(file={"removed": 1.0}),
    "added 1.0": commit(file={"added": 1.0}),
    "deleted '3'": commit(file={"deleted": "3"}),
    "NUL in the message": commit(message="fix\u0000"),
    "lone surrogate in the message": commit(message="fix \udc80"),
    "U+202E in a path": commit(file={"path": "pay\u202eyp.exe"}),
    "NUL in the author": commit(author_name="A\u0000da"),
    "authored in year 1 with +14:00": commit(authored_at="0001-01-01T00:00:00+14:00"),
}
HEAD_VALUES = {
    "NUL in a test file": {"sha": SHA, "tests": {"t\u0000.py": ["pay"]}, "blame": {}},
    "blame line 2**31": {"sha": SHA, "tests": {}, "blame": {"pay.py": [[1, 2**31, SHA]]}},
    "blame line 1.0": {"sha": SHA, "tests": {}, "blame": {"pay.py": [[1.0, 2, SHA]]}},
    "truncated 'yes'": {"sha": SHA, "tests": {}, "blame": {}, "truncated": "yes"},
}
METRICS_VALUES = {
    "p95 above an hour": f"detective_response_time_p95_ms 3600001 {AFTER_MS}\n",
    "p95 of 1e308": f"detective_response_time_p95_ms 1e308 {AFTER_MS}\n",
    "error rate 1e308": f"detective_error_rate 1e308 {AFTER_MS}\n",
    "a sample past year 9999": "detective_error_rate 0.01 300000000000000000\n",
    "a sample at -1e20": "detective_error_rate 0.01 -100000000000000000000\n",
}


@pytest.mark.parametrize("body", RELEASE_VALUES.values(), ids=RELEASE_VALUES.keys())
@pytest.mark.parametrize("kind", ["json", "bundle"])
def test_each_release_value_is_refused_with_its_reason(token: str, body: Any, kind: str) -> None:
    before = stored()
    answer = call(
        Client(), token, "/api/releases", body if kind == "json" else {"release": body}, kind
    )
    assert 400 <= answer.status_code < 500, answer.content
    assert answer.json()["error"] and stored() == before


@pytest.mark.parametrize("value", COMMIT_VALUES.values(), ids=COMMIT_VALUES.keys())
@pytest.mark.parametrize("kind", ["json", "bundle"])
def test_each_commit_value_is_refused_with_its_reason(token: str, value: Any, kind: str) -> None:
    client = Client()
    assert (
        call(client, token, "/api/releases", {"version": "v1", "service": "shop"}).status_code
        == 201
    )
    before = stored()
    if kind == "json":
        answer = call(client, token, "/api/releases/v1/commits?service=shop", {"commits": [value]})
    else:
        body = {"release": {"version": "v1", "service": "shop"}, "commits": {"commits": [value]}}
        answer = call(client, token, "", body, "bundle")
    assert answer.status_code == 422, answer.content
    assert answer.json()["error"] and stored() == before


@pytest.mark.parametrize("head", HEAD_VALUES.values(), ids=HEAD_VALUES.keys())
def test_each_head_value_is_refused_with_its_reason(token: str, head: Any) -> None:
    client = Client()
    call(client, token, "/api/releases", {"version": "v1", "service": "shop"})
    before = stored()
    body = {"commits": [commit()], "head": head}
    answer = call(client, token, "/api/releases/v1/commits?service=shop", body)
    assert answer.status_code == 422, answer.content
    assert stored() == before


@pytest.mark.parametrize("text", METRICS_VALUES.values(), ids=METRICS_VALUES.keys())
@pytest.mark.parametrize("kind", ["text", "bundle"])
def test_each_metrics_value_is_refused_with_its_reason(token: str, text: str, kind: str) -> None:
    client = Client()
    release = {"version": "v1", "service": "shop", "deployed_at": DEPLOYED}
    assert call(client, token, "/api/releases", release).status_code == 201
    before = stored()
    if kind == "text":
        answer = call(client, token, "/api/releases/v1/metrics?service=shop", text, "text")
    else:
        answer = call(client, token, "", {"release": release, "metrics": text.encode()}, "bundle")
    assert 400 <= answer.status_code < 500, answer.content
    assert answer.json()["error"] and stored() == before


def test_two_names_never_share_a_slug(token: str) -> None:
    client = Client()
    made = call(client, token, "/api/releases", {"version": "v1", "service": "a/b"})
    assert made.status_code == 201 and made.json()["service"] == "a-b"
    other = call(client, token, "/api/releases", {"version": "v1", "service": "ab"})
    assert other.status_code == 201 and other.json()["service"] == "ab"
    assert (
        call(client, token, "/api/releases", {"version": "v2", "service": "a-b"}).json()["service"]
        == "a-b"
    )  # its slug names it
    clash = call(client, token, "/api/releases", {"version": "v1", "service": "a b"})
    assert clash.status_code == 409 and "'a/b'" in clash.json()["error"]
    assert sorted(Service.objects.exclude(slug="default").values_list("slug", flat=True)) == [
        "a-b",
        "ab",
    ]


# ---- the fuzz ----------------------------------------------------------------------------------

HOSTILE_TEXT = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", "\x00", "\ud800", "\udfff", "\u202e", "\u2066", "a/b", "..", "-x", "é"]),
    st.text(alphabet=st.characters(codec=None, categories=["Cc", "Cf", "Cs", "Zs"]), max_size=4),
)
NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 2**31 - 1, 2**31, 2**63, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e308, -1e308, 3_600_001.0, 0.5, 1.0]),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, HOSTILE_TEXT)
ANY_JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(HOSTILE_TEXT, inner, max_size=3)
    ),
    max_leaves=6,
)


def maybe(valid: Any, hostile: st.SearchStrategy[Any] = ANY_JSON) -> st.SearchStrategy[Any]:
    return st.one_of(st.just(valid), st.just(valid), hostile)


def optional_fields(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries({}, optional=fields)


VERSIONS = st.one_of(st.sampled_from(["v1", "v2", "1.0.0"]), HOSTILE_TEXT)
RELEASES = st.one_of(
    ANY_JSON,
    st.fixed_dictionaries(
        {"version": VERSIONS},
        optional={
            "service": maybe("shop", st.one_of(HOSTILE_TEXT, ANY_JSON)),
            "title": maybe("Refunds"),
            "environment": maybe("production"),
            "deployed_at": maybe(
                DEPLOYED,
                st.one_of(
                    st.sampled_from(
                        ["2026-11-20T10:00", "0001-01-01T00:00+14:00", "9999-12-31T23:59-14:00"]
                    ),
                    st.datetimes().map(lambda moment: moment.isoformat()),
                    ANY_JSON,
                ),
            ),
            "git": maybe({"from_ref": "v0", "to_ref": "v1"}),
            "pipeline_url": maybe("https://ci.example.com/1"),
        },
    ),
)  # fmt: skip
FILES = optional_fields(
    {
        "path": maybe("pay.py", HOSTILE_TEXT),
        "old_path": maybe(None),
        "added": maybe(3, NUMBERS),
        "deleted": maybe(1, NUMBERS),
        "generated": maybe(False, SCALARS),
        "vendored": maybe(False, SCALARS),
        "removed": maybe(False, SCALARS),
        "hunks": maybe([[1, 1, 1, 2]], st.lists(st.lists(NUMBERS, max_size=5), max_size=2)),
    }
)
COMMITS = optional_fields(
    {
        "sha": maybe(SHA, HOSTILE_TEXT),
        "author_name": maybe("Ada", HOSTILE_TEXT),
        "author_email": maybe("ada@example.com"),
        "authored_at": maybe(DEPLOYED, st.one_of(HOSTILE_TEXT, st.datetimes().map(str))),
        "message": maybe("fix: refunds", HOSTILE_TEXT),
        "files": maybe([], st.lists(FILES, max_size=2)),
        "parents": maybe([]),
    }
)
HEADS = optional_fields(
    {
        "sha": maybe(SHA),
        "tests": maybe({}, st.dictionaries(HOSTILE_TEXT, st.lists(HOSTILE_TEXT, max_size=2))),
        "blame": maybe(
            {}, st.dictionaries(HOSTILE_TEXT, st.lists(st.tuples(NUMBERS, NUMBERS, st.just(SHA))))
        ),
        "truncated": maybe(False, SCALARS),
    }
)
COMMIT_BODIES = st.one_of(
    ANY_JSON,
    st.fixed_dictionaries(
        {"commits": st.lists(COMMITS, max_size=2)}, optional={"head": st.one_of(st.none(), HEADS)}
    ),
)
METRIC_NAMES = st.sampled_from(
    [
        "detective_error_rate",
        "detective_response_time_p95_ms",
        "detective_response_time_p95_seconds",
    ]
)
METRIC_VALUES = st.one_of(
    NUMBERS.map(repr), st.sampled_from(["NaN", "+Inf", "-Inf", "1e308", "3600001", "0x10", ""])
)
TIMESTAMPS = st.one_of(
    st.just(""),
    st.integers(min_value=-(10**22), max_value=10**22).map(str),
    st.integers(min_value=DEPLOYED_MS - 10**9, max_value=DEPLOYED_MS + 10**9).map(str),
)
METRICS_TEXT = st.lists(
    st.tuples(METRIC_NAMES, METRIC_VALUES, TIMESTAMPS).map(lambda parts: " ".join(parts).strip()),
    min_size=1,
    max_size=4,
).map(lambda lines: "\n".join(lines) + "\n")

FUZZ = settings(
    max_examples=600,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def refused_whole(answer: Any, before: tuple[int, ...]) -> None:
    assert answer.status_code < 500, answer.content
    if answer.status_code >= 400:
        assert stored() == before, answer.content


def ensure_release(client: Client, token: str, release: dict[str, str]) -> None:
    """The release the fuzzed request goes to, made through the API by the first example. The
    examples share the test's transaction and nothing removes it, so the later ones skip the
    repeated upsert (half of an example's time in test_fuzz_metrics)."""
    if not Release.objects.filter(version="v1", service__name="shop").exists():
        assert call(client, token, "/api/releases", release).status_code == 201


@FUZZ
@given(body=RELEASES)
def test_fuzz_releases(token: str, body: Any) -> None:
    before = stored()
    refused_whole(call(Client(), token, "/api/releases", body), before)


@FUZZ
@given(body=COMMIT_BODIES, version=st.sampled_from(["v1", "v9"]))
def test_fuzz_commits(token: str, body: Any, version: str) -> None:
    client = Client()
    ensure_release(client, token, {"version": "v1", "service": "shop"})
    before = stored()
    path = f"/api/releases/{version}/commits?service=shop"
    refused_whole(call(client, token, path, body), before)


@FUZZ
@given(text=METRICS_TEXT)
def test_fuzz_metrics(token: str, text: str) -> None:
    client = Client()
    ensure_release(client, token, {"version": "v1", "service": "shop", "deployed_at": DEPLOYED})
    before = stored()
    refused_whole(
        call(client, token, "/api/releases/v1/metrics?service=shop", text, "text"), before
    )


@FUZZ
@given(release=RELEASES, commits=COMMIT_BODIES, text=st.one_of(st.none(), METRICS_TEXT))
def test_fuzz_the_bundle(token: str, release: Any, commits: Any, text: str | None) -> None:
    body: dict[str, Any] = {"release": release, "commits": commits}
    if text is not None:
        body["metrics"] = text.encode()
    before = stored()
    refused_whole(call(Client(), token, "", body, "bundle"), before)
