"""The API's endpoints that are plain Django views, described for the OpenAPI document
(issue 37): django-ninja documents only its own operations (sources/api.py), yet a CI job or a
curl user also calls the bundle, the verdict, the pipeline's wait and the drill-downs, and a
run's tools file their report. `sources/openapi_paths_test.py` checks every route under /api/
against the document."""

from __future__ import annotations

from typing import Any

_ERROR = {
    "description": 'JSON `{"error": "<why>"}`',
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
}
_JSON = {"content": {"application/json": {"schema": {"type": "object"}}}}
_VERSION = {"name": "version", "in": "path", "required": True, "schema": {"type": "string"}}
_SERVICE = {
    "name": "service",
    "in": "query",
    "required": False,
    "schema": {"type": "string"},
    "description": "The service's slug or name; none: the default service.",
}
_READERS = (
    "A bearer token: a run's own (for its release), the site's API key (`DETECTIVE_API_TOKEN`)"
)


def _operation(
    summary: str, description: str, *, params: tuple[dict[str, Any], ...] = (), body: Any = None
) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "summary": summary,
        "description": description,
        "parameters": [*params],
        "responses": {
            "200": {"description": "The answer.", **_JSON},
            **{str(code): _ERROR for code in (400, 401, 403, 404)},
        },
        "security": [{"TokenAuth": []}],
    }
    if body is not None:
        operation["requestBody"] = body
    return operation


def _query(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": {"type": "string"},
        "description": description,
    }


PATHS: dict[str, dict[str, Any]] = {
    "releases/bundle": {
        "post": _operation(
            "Send a release and its sources in one request, stored whole or not at all",
            "What `detective ingest` sends (sources/bundle.py): multipart with `release` (JSON as "
            "POST /api/releases takes it), optional `commits` (JSON as POST .../commits takes "
            "it), any number of `junit` files and one `metrics` file. 201 with `stored: all` "
            "and each part's counts; a refused part stores nothing (`stored: nothing`, the "
            "reason, 4xx). An ingestion token.",
            body={
                "required": True,
                "content": {
                    "multipart/form-data": {
                        "schema": {
                            "type": "object",
                            "required": ["release"],
                            "properties": {
                                "release": {"type": "string", "description": "JSON"},
                                "commits": {"type": "string", "description": "JSON"},
                                "junit": {
                                    "type": "array",
                                    "items": {"type": "string", "format": "binary"},
                                },
                                "metrics": {"type": "string", "format": "binary"},
                            },
                        }
                    }
                },
            },
        )
    },
    "releases/{version}/verdict": {
        "get": _operation(
            "The release's verdict: what a pipeline gates on",
            "Severity that counts, state, whose verdict it is (`source`: model, person or "
            "policy, the policy's when no model filed on the data now), findings, suspects, "
            "decision, `why` (one sentence), the page's `url` and the report's `review_url`. "
            "An ingestion token (a CI job's), the API key, a "
            "run's token, or a signed-in user who may view releases.",
            params=(_VERSION, _SERVICE),
        )
    },
    "releases/{version}/waiting": {
        "post": _operation(
            "A pipeline waits for a person's decision on the release's report",
            "Marks the report (the review page shows `Pipeline waiting`) and answers the "
            "verdict with `review_url`. An ingestion token.",
            params=(_VERSION, _SERVICE),
        )
    },
    "releases/{version}/summary": {
        "get": _operation(
            "The release's summary as the agent reads it, with the policy's signals",
            f"{_READERS}; `view=brief` for the short form.",
            params=(_VERSION, _SERVICE, _query("view", "`brief` for the short form")),
        )
    },
    "releases/{version}/tests": {
        "get": _operation(
            "Drill-down: the release's test cases with their history",
            f"{_READERS}. Pages of at most 100 with `next_offset`.",
            params=(
                _VERSION,
                _SERVICE,
                _query("status", "passed, failed, error, skipped"),
                _query("name_contains", "part of the test's name"),
                _query("offset", "where the page starts"),
            ),
        )
    },
    "releases/{version}/changes": {
        "get": _operation(
            "Drill-down: the release's commits with their files, lines and areas",
            f"{_READERS}. Pages of at most 100 with `next_offset`.",
            params=(
                _VERSION,
                _SERVICE,
                _query("path_prefix", "only files under this path"),
                _query("area", "a critical area's name"),
                _query("offset", "where the page starts"),
            ),
        )
    },
    "releases/{version}/suspects": {
        "get": _operation(
            "Drill-down: one failed test's frames, suspect commits and their changed lines",
            f"{_READERS}.",
            params=(_VERSION, _SERVICE, _query("test", "the failed test's name")),
        )
    },
    "releases/{version}/metrics/{metric}/history": {
        "get": _operation(
            "Drill-down: a metric's windows and the earlier releases' readings",
            f"{_READERS}. A metric the release has no samples of is a 404 listing those it has.",
            params=(
                _VERSION,
                {"name": "metric", "in": "path", "required": True, "schema": {"type": "string"}},
                _SERVICE,
            ),
        )
    },
    "releases/{version}/traces": {
        "get": _operation(
            "Drill-down: the release's error groups (new, regressed, ongoing) and its routes "
            "against their baseline, from the OTLP traces sent to /otlp/v1/traces",
            f"{_READERS}. `sample_trace`: one trace of the first group listed that has one, "
            "with its spans (`span_id`, `parent_span_id`, `name`, `kind`, `start_ms`, "
            "`duration_ms`, `status`, `error`, `exception`; at most 30) and `spans_seen`; "
            "null without one.",
            params=(_VERSION, _SERVICE),
        )
    },
    "risk-reports": {
        "post": _operation(
            "File a run's risk report (the agent's tool)",
            "A run's own token, for its release. The report's findings are grounded against "
            "the data; the answer says what was stored.",
            body={"required": True, **_JSON},
        )
    },
}


def add_to(schema: dict[str, Any], prefix: str) -> dict[str, Any]:
    """The document with these paths under `prefix` (the API's root, "/api/")."""
    paths = schema.setdefault("paths", {})
    for route, operations in PATHS.items():
        paths.setdefault(f"{prefix}{route}", {}).update(operations)
    return schema
