"""The ingestion API (under /api/), described by the OpenAPI document django-ninja generates
from these typed endpoints (/api/openapi.json, browsable at /api/docs).

Every endpoint takes an ingestion token (`Authorization: Bearer <token>`, made in the admin) and
calls the same services as the `ingest` command and the release managers' forms. Errors are
JSON, `{"error": "<why>"}`, with a 4xx status: 401 without a valid token, 403 for a token of
another service, 404 for an unknown service or release, 400/422 for what cannot be read or
stored, 413 for a body over the limit. A refused request stores nothing.
"""

from __future__ import annotations

import hmac
from datetime import datetime
from typing import Annotated, Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpRequest, HttpResponse
from ninja import Field, NinjaAPI, Query, Schema, Status
from ninja.errors import AuthenticationError
from ninja.errors import ValidationError as NinjaValidationError
from ninja.security import HttpBearer
from pydantic import AfterValidator, AwareDatetime, StrictBool, StrictInt

from detective_client.records import MAX_COUNT, CommitRecord, HeadRecord, RecordError, text_problem
from releases import selectors as releases_selectors
from releases.validation import VERSION_PATTERN
from sources import openapi_paths, selectors, services
from sources.models import IngestionToken, MetricWindow
from sources.parsers import junit
from sources.parsers.openmetrics import MAX_BYTES as METRICS_MAX_BYTES
from sources.parsers.openmetrics import MetricsFormatError, parse_metrics
from sources.services import IngestError, Origin, ReleaseFields

Version = Annotated[str, Field(pattern=rf"^{VERSION_PATTERN}$", examples=["v2.1.0"])]


def _plain_name(value: str) -> str:
    if problem := text_problem(value, name=True):
        raise ValueError(problem)
    return value


def _deploy_time(value: datetime) -> datetime:
    # Its UTC instant must exist too: 0001-01-01T00:00+01:00 is before the calendar's start.
    if not 1 < value.year < 9999:
        raise ValueError("out of range: years 2 to 9998")
    return value


# Every string a release or a commit names by: no NUL, lone surrogate or bidi control (issue 37).
Name = Annotated[str, AfterValidator(_plain_name)]
# Line counts and line numbers: whole numbers (1.0, "3" and true are refused), within the column.
Count = Annotated[StrictInt, Field(ge=0, le=MAX_COUNT)]
DeployTime = Annotated[AwareDatetime, AfterValidator(_deploy_time)]


class TokenAuth(HttpBearer):
    """An ingestion token. (HttpBearer's own reading would log a malformed header, with the
    secret in it, when DEBUG is on; this one logs nothing.)"""

    def __call__(self, request: HttpRequest) -> IngestionToken | None:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return self.authenticate(request, token.strip())

    def authenticate(self, request: HttpRequest, token: str) -> IngestionToken | None:
        return selectors.token_for(token)


class DocumentedApi(NinjaAPI):
    """The ingestion API, whose document also names the API's plain Django views."""

    def get_openapi_schema(self, *args: Any, **kwargs: Any) -> Any:
        schema = super().get_openapi_schema(*args, **kwargs)
        return openapi_paths.add_to(schema, self.get_root_path({}))


api = DocumentedApi(
    title="Detective ingestion API",
    version="1",
    description=(
        "Send a release's sources to Detective: the release itself, its commits (as the "
        "`detective_client` reads them from git), JUnit XML reports and metrics. Authenticate "
        "with an ingestion token made in the admin: `Authorization: Bearer <token>`."
    ),
    urls_namespace="ingest",
    auth=TokenAuth(),
    docs_url="/docs",
    openapi_url="/openapi.json",
)


class Error(Schema):
    error: str


ERRORS: dict[int, Any] = dict.fromkeys((400, 401, 403, 404, 413, 422), Error)


def _error(request: HttpRequest, status: int, message: str) -> HttpResponse:
    return api.create_response(request, {"error": message}, status=status)


@api.exception_handler(IngestError)
def _ingest_error(request: HttpRequest, exc: IngestError) -> HttpResponse:
    return _error(request, exc.status, exc.message)


@api.exception_handler(AuthenticationError)
def _unauthorized(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    if kind := _other_token_kind(request):
        # A real token of another kind: say what it is for, not "authentication required".
        return _error(
            request,
            403,
            f"{kind} cannot send a release's data: use an ingestion token (made in the "
            "admin); this one reads releases (/api/releases/<version>/summary, the "
            "drill-downs and the verdict).",
        )
    response = _error(
        request, 401, "Authentication required: send Authorization: Bearer <ingestion token>."
    )
    response["WWW-Authenticate"] = 'Bearer realm="detective"'
    return response


@api.exception_handler(NinjaValidationError)
def _invalid(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    problems = [
        f"{'.'.join(str(part) for part in error.get('loc', ()))}: {error.get('msg')}"
        for error in exc.errors
    ]
    return _error(request, 422, "Invalid request: " + "; ".join(problems) + ".")


@api.exception_handler(DjangoValidationError)
def _unstorable(request: HttpRequest, exc: DjangoValidationError) -> HttpResponse:
    # A value the release's own rules refuse (releases/schemas.py: a p95 past an hour, 1e308)
    # that no check before them caught: the caller's mistake, said as one, never a 500.
    return _error(request, 422, f"Refused: {' '.join(exc.messages)}")


@api.exception_handler(RequestDataTooBig)
def _too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    return _error(request, 413, "The body is too large; send the commits in several requests.")


def _other_token_kind(request: HttpRequest) -> str:
    """ "The site's API key" or "A run's token" when the bearer is one; "" otherwise."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return ""
    key = settings.DETECTIVE_API_KEY
    if key and hmac.compare_digest(token.encode(), key.encode()):
        return "The site's API key"
    if releases_selectors.run_for_api_token(token) is not None:
        return "A run's token"
    return ""


def origin_of(request: HttpRequest) -> Origin:
    """Who sent this call: the ingestion token the API authenticated (the assess endpoint
    records it too, assessments/assess_api.py)."""
    return Origin("api", token=request.auth)  # type: ignore[attr-defined]


# ---- releases ----------------------------------------------------------------------------------


class GitIn(Schema):
    from_ref: Name = Field("", max_length=255, examples=["v2.0.0"])
    to_ref: Name = Field("", max_length=255, examples=["v2.1.0"])
    head_sha: Name = Field("", max_length=64, examples=["3f2c1e9a7b"])


class ReleaseIn(Schema):
    service: Name | None = Field(None, description="The service's name or slug; none: default.")
    version: Version
    title: Name | None = Field(None, max_length=200)
    environment: Name | None = Field(None, max_length=64, examples=["production"])
    git: GitIn | None = None
    pipeline_url: Name | None = Field(None, max_length=500)
    deployed_at: DeployTime | None = Field(
        None, description="ISO 8601 with its offset (a time without one is refused: 422)."
    )

    def fields(self) -> ReleaseFields:
        """What the ingestion services take: the same for one call and for a bundle."""
        return ReleaseFields(
            version=self.version,
            service=self.service,
            title=self.title,
            environment=self.environment,
            git_from_ref=self.git.from_ref if self.git else None,
            git_to_ref=self.git.to_ref if self.git else None,
            head_sha=self.git.head_sha if self.git else None,
            pipeline_url=self.pipeline_url,
            deployed_at=self.deployed_at,
        )


class ReleaseOut(Schema):
    service: str
    version: str
    created: bool
    url: str


@api.post(
    "/releases",
    response={200: ReleaseOut, 201: ReleaseOut, **ERRORS},
    summary="Create or update a release (idempotent by service and version)",
)
def put_release(request: HttpRequest, body: ReleaseIn) -> Status[dict[str, Any]]:
    fields = body.fields()
    release, created = services.upsert_release(fields, origin_of(request))
    out = {
        "service": release.service.slug,
        "version": release.version,
        "created": created,
        "url": request.build_absolute_uri(release.get_absolute_url()),
    }
    return Status(201 if created else 200, out)


class IngestedOut(Schema):
    created: bool = Field(description="False: the same content was already ingested.")
    ingestion: int
    counts: dict[str, Any]
    summary: dict[str, Any] = Field(description="The release's summary, as the agent reads it.")


def _ingested(result: services.Ingested) -> Status[dict[str, Any]]:
    release = result.ingestion.release
    release.refresh_from_db()
    body = {
        "created": result.created,
        "ingestion": result.ingestion.pk,
        "counts": result.counts,
        "summary": release.as_summary(),
    }
    return Status(201 if result.created else 200, body)


class ReleaseQuery(Schema):
    service: Name | None = Field(None, description="The service's name or slug; none: default.")


# ---- commits -----------------------------------------------------------------------------------


class FileChangeIn(Schema):
    path: str
    old_path: str | None = None
    added: Count | None = Field(None, description="None for a binary file.")
    deleted: Count | None = None
    # Optional: a client older than these flags sends none, and the path alone then decides.
    # Strict: "true", "yes" and 1 are refused (422), never read as true.
    generated: StrictBool = Field(
        False, description="A generated file (its header, .gitattributes)."
    )
    vendored: StrictBool = Field(False, description="A vendored file (.gitattributes).")
    removed: StrictBool = Field(False, description="The commit deleted the file (git status D).")
    hunks: list[list[Count]] | None = Field(
        None,
        description=(
            "The line ranges the commit changed in the file: `git diff -U0` hunk headers as "
            "[old_start, old_count, new_start, new_count]. Optional; with them (and `head`) "
            "the release's failures get suspect commits. At most 50,000 a request."
        ),
    )


class CommitIn(Schema):
    sha: str = Field(pattern=r"^([0-9a-f]{40}|[0-9a-f]{64})$")
    author_name: str
    author_email: str
    authored_at: str = Field(description="ISO 8601 with its offset.")
    message: str
    files: list[FileChangeIn]
    parents: list[str]


class HeadIn(Schema):
    sha: str = Field(description="The commit the range ends at.")
    tests: dict[str, list[str]] = Field(
        description="Test file at the head -> the names it imports, as written (at most 2,000 "
        "files, 200 names each)."
    )
    blame: dict[str, list[tuple[Count, Count, str]]] = Field(
        description="Path the range changed -> [start, end, sha]: the commit of the range that "
        "last wrote those lines at the head (`git blame`; at most 300 paths)."
    )
    scopes: dict[str, list[tuple[Count, Count, list[str]]]] = Field(
        default_factory=dict,
        description="Python path the range changed -> [start, end, [words]]: each function's "
        "lines and the identifiers of its text (at most 2,000 functions, 300 words each).",
    )
    truncated: StrictBool = False


class CommitsIn(Schema):
    commits: list[CommitIn] = Field(description="As detective_client.git.read_range gives them.")
    head: HeadIn | None = Field(
        None, description="The head's facts for ranking suspects (detective_client.head)."
    )

    def records(self) -> tuple[list[CommitRecord], HeadRecord | None]:
        """The commits and the head as records, checked strictly (`RecordError` says where)."""
        commits = [
            CommitRecord.from_json(commit.dict(), f"commits[{index}]")
            for index, commit in enumerate(self.commits)
        ]
        head = None if self.head is None else HeadRecord.from_json(self.head.dict())
        return commits, head


@api.post(
    "/releases/{version}/commits",
    response={200: IngestedOut, 201: IngestedOut, **ERRORS},
    summary="Send the commits of the release's git range",
)
def post_commits(
    request: HttpRequest, version: Version, body: CommitsIn, query: Query[ReleaseQuery]
) -> Status[dict[str, Any]]:
    release = services.release_for(version, query.service, origin_of(request))
    try:
        commits, head = body.records()
    except RecordError as exc:
        raise IngestError(f"Invalid commit: {exc}.", 422) from None
    result = services.ingest_commits(release, commits, origin_of(request), head=head)
    return _ingested(result)


# ---- JUnit XML and metrics: the file as the body -----------------------------------------------


def _raw_body(request: HttpRequest, limit: int) -> bytes:
    """The body as sent, refused (413) before it is read when it says it is over the limit."""
    declared = int(request.META.get("CONTENT_LENGTH") or 0)
    if declared > limit:
        raise IngestError(f"The body is larger than {limit:,} bytes.", 413)
    data = request.read(limit + 1)
    if len(data) > limit:
        raise IngestError(f"The body is larger than {limit:,} bytes.", 413)
    return data


class FileQuery(ReleaseQuery):
    filename: Name = Field("report.xml", max_length=255, description="Recorded with it.")


XML_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/xml": {"schema": {"type": "string", "format": "binary"}}},
    }
}
TEXT_BODY = {
    "requestBody": {
        "required": True,
        "content": {"text/plain": {"schema": {"type": "string"}}},
    }
}


@api.post(
    "/releases/{version}/junit",
    response={200: IngestedOut, 201: IngestedOut, **ERRORS},
    summary="Upload one JUnit XML report (the file as the body)",
    description=(
        "pytest (xunit1, xunit2), Maven Surefire (reruns as attempts), jest-junit, TestNG and "
        "nested suites. A test is its suite, class and name; each <testcase> is an invocation "
        "(the same test twice in one report counts twice). Several reports: one call each, all "
        f"kept. At most {junit.MAX_BYTES:,} bytes; DTDs and entities are refused, malformed XML "
        "is a 400 naming the line, and nothing is stored then. The same report twice is stored "
        "once; a rerun's report makes new attempts of its tests."
    ),
    openapi_extra=XML_BODY,
)
def post_junit(
    request: HttpRequest, version: Version, query: Query[FileQuery]
) -> Status[dict[str, Any]]:
    release = services.release_for(version, query.service, origin_of(request))
    declared = int(request.META.get("CONTENT_LENGTH") or 0)
    if declared > junit.MAX_BYTES:
        raise IngestError(f"The body is larger than {junit.MAX_BYTES:,} bytes.", 413)
    result = services.ingest_junit(release, request, query.filename, origin_of(request))
    return _ingested(result)


class MetricsQuery(ReleaseQuery):
    window: MetricWindow | None = Field(
        None,
        description="Whose window all the samples measure. Omitted: a release with a deploy "
        "time has each sample counted in the window its timestamp lies in (release or "
        "baseline); one without, in its own.",
    )
    filename: Name = Field("metrics.txt", max_length=255)


@api.post(
    "/releases/{version}/metrics",
    response={200: IngestedOut, 201: IngestedOut, **ERRORS},
    summary="Send metrics as OpenMetrics or Prometheus text (the file as the body)",
    description=(
        "NaN and Inf are stored as missing, never zero. The error rate and p95 come from "
        "`detective_error_rate`, `detective_response_time_p95_ms` (or `_seconds`), or the "
        "request counters and latency histograms of prometheus_client, django-prometheus, "
        "Micrometer, OpenTelemetry and ingress-nginx (docs/using/metrics.md), or a service's "
        "own names (the policy's `metric_names`). An error rate outside 0..1, a negative p95 "
        "or a deploy time at the calendar's ends is 422. Without a deploy time (or without "
        "samples in the baseline window) the answer's `counts.note` says so."
    ),
    openapi_extra=TEXT_BODY,
)
def post_metrics(
    request: HttpRequest, version: Version, query: Query[MetricsQuery]
) -> Status[dict[str, Any]]:
    release = services.release_for(version, query.service, origin_of(request))
    data = _raw_body(request, METRICS_MAX_BYTES)
    try:
        samples = parse_metrics(data, source=query.filename)
    except MetricsFormatError as exc:
        raise IngestError(f"Refused: {exc}.", 400) from None
    results = services.ingest_metrics_file(
        release, samples, origin_of(request), window=query.window, file_names=[query.filename]
    )
    # The release window's ingestion (or the only one) answers; its counts name the window.
    return _ingested(results[0])
