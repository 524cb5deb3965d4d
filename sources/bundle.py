"""`POST /api/releases/bundle`: one ingestion from a CI job, stored whole or not at all.

The client (`detective ingest`) sends the release and its sources in one multipart request:

- `release`: JSON, as `POST /api/releases` takes it (service, version, title, git ...);
- `commits`: JSON, `{"commits": [...], "head": {...}}` as `POST /api/releases/<v>/commits`
  takes it (optional; a field or a file part; each file's `hunks` and the `head` optional);
- `junit`: JUnit XML files, any number, each with its file name;
- `metrics`: one OpenMetrics / Prometheus text file (optional).

Everything runs in one transaction through the same services as the separate endpoints, so a
part refused (a malformed report, a token of another service, a bad commit) leaves nothing of
the others: the answer says `"stored": "nothing"` with the reason, or `"stored": "all"` with
what each part stored. Once every part is stored, the failures' suspect commits are ranked
(`sources.services.suspects.rank_stored`) when commits with hunks and failures are both there,
whichever ingestion brought them. The token is an ingestion token, as for every ingestion call.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import RequestDataTooBig
from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from pydantic import ValidationError

from detective_client.records import CommitRecord, HeadRecord, RecordError
from sources import selectors, services
from sources.api import CommitsIn, ReleaseIn
from sources.parsers import junit
from sources.parsers.openmetrics import MAX_BYTES as METRICS_MAX_BYTES
from sources.parsers.openmetrics import MetricsFormatError, parse_metrics
from sources.services import IngestError, Origin, ReleaseFields
from sources.services.suspects import rank_stored


def _refused(status: int, message: str) -> JsonResponse:
    response = JsonResponse({"error": message, "stored": "nothing"}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="detective"'
    return response


def _json_field(request: HttpRequest, name: str) -> Any:
    # A field, or a file part (the client's commits: a file part is not held to the form's
    # in-memory limit, DATA_UPLOAD_MAX_MEMORY_SIZE, which a long range's JSON can pass).
    upload = request.FILES.get(name)
    text = upload.read() if upload is not None else request.POST.get(name)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        raise IngestError(f"The part {name!r} is not JSON.", 400) from None


def _release_fields(data: Any) -> ReleaseFields:
    if data is None:
        raise IngestError("The part 'release' is required: the release as JSON.", 400)
    try:
        body = ReleaseIn.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"release.{'.'.join(str(p) for p in error['loc'])}: {error['msg']}"
            for error in exc.errors()
        )
        raise IngestError(f"Invalid request: {problems}.", 422) from None
    return body.fields()


def _commits(data: Any) -> tuple[list[CommitRecord], HeadRecord | None]:
    try:
        return CommitsIn.model_validate(data).records()
    except ValidationError as exc:
        raise IngestError(f"Invalid commits: {exc.errors()[0]['msg']}.", 422) from None
    except RecordError as exc:
        raise IngestError(f"Invalid commit: {exc}.", 422) from None


def _part(kind: str, name: str, result: services.Ingested) -> dict[str, Any]:
    return {"kind": kind, "name": name, "created": result.created, "counts": result.counts}


def store_bundle(request: HttpRequest, origin: Origin) -> dict[str, Any]:
    """Every part, in one transaction; an IngestError from any of them stores nothing."""
    fields = _release_fields(_json_field(request, "release"))
    commits_data = _json_field(request, "commits")
    commits, head = _commits(commits_data) if commits_data is not None else ([], None)
    parts: list[dict[str, Any]] = []
    with transaction.atomic():
        release, created = services.upsert_release(fields, origin)
        stored = False  # a part stored anew: the suspects are ranked once, at the end
        if commits:
            result = services.ingest_commits(release, commits, origin, head=head, rank=False)
            parts.append(_part("commits", f"{len(commits)} commits", result))
            stored |= result.created
        for upload in request.FILES.getlist("junit"):
            if upload.size and upload.size > junit.MAX_BYTES:
                raise IngestError(f"{upload.name} is larger than {junit.MAX_BYTES:,} bytes.", 413)
            name = upload.name or "report.xml"
            result = services.ingest_junit(release, upload, name, origin, rank=False)
            parts.append(_part("junit", name, result))
            stored |= result.created
        ranked = rank_stored(release) if stored else None
        metrics = request.FILES.get("metrics")
        if metrics is not None:
            name = metrics.name or "metrics.txt"
            data = metrics.read(METRICS_MAX_BYTES + 1)
            if len(data) > METRICS_MAX_BYTES:
                raise IngestError(f"{name} is larger than {METRICS_MAX_BYTES:,} bytes.", 413)
            try:
                samples = parse_metrics(data, source=name)
            except MetricsFormatError as exc:
                raise IngestError(f"Refused: {exc}.", 400) from None
            results = services.ingest_metrics_file(release, samples, origin, file_names=[name])
            parts.append(_part("metrics", name, results[0]))
    return {
        "stored": "all",
        "service": release.service.slug,
        "version": release.version,
        "created": created,
        "url": request.build_absolute_uri(release.get_absolute_url()),
        "parts": parts,
        **({"failures_with_suspects": ranked} if ranked is not None else {}),
    }


@login_not_required
@csrf_exempt
@require_POST
def post_bundle(request: HttpRequest) -> JsonResponse:
    scheme, _, secret = request.headers.get("Authorization", "").partition(" ")
    token = selectors.token_for(secret.strip()) if scheme.lower() == "bearer" else None
    if token is None:
        return _refused(
            401, "Authentication required: send Authorization: Bearer <ingestion token>."
        )
    try:
        return JsonResponse(store_bundle(request, Origin("api", token=token)), status=201)
    except IngestError as exc:
        return _refused(exc.status, f"{exc.message} Nothing of this ingestion was stored.")
    except RequestDataTooBig:
        return _refused(413, "The body is too large. Nothing of this ingestion was stored.")
