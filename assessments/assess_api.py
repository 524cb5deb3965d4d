"""`POST /api/releases/<version>/assess`: a CI job asks for its release's assessment with the
ingestion token it sent the release with.

The endpoint is part of the ingestion API (sources/api.py: the same token, errors, OpenAPI
document and `ingest:` names), but starting a run is this app's: the router is mounted on
that API by the site's URLs (detective_site/urls.py), so sources need not import assessments.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.urls import reverse
from ninja import Field, Query, Router, Schema, Status

from assessments import assessing, tasks
from sources import services
from sources.api import ERRORS, ReleaseQuery, Version, origin_of

router = Router()


class AssessmentOut(Schema):
    run: str
    status: str = Field(
        description="queued or running: a worker does it; ask for the verdict. When `kept`, "
        "the status of the run whose verdict stands."
    )
    url: str = Field(description="The run's page.")
    kept: bool = Field(
        False,
        description="True: the release's data has not changed since the verdict that stands "
        "(same commits, reports and metrics), so it stands, a person's decision included; "
        "nothing was queued. Send force=true to assess again anyway.",
    )
    message: str = Field("", description="When kept, why, in one sentence.")


class AssessQuery(ReleaseQuery):
    force: bool = Field(
        False,
        description="Assess even when the data has not changed since the verdict that stands "
        "(recorded on the run with the token that asked).",
    )


@router.post(
    "/releases/{version}/assess",
    response={200: AssessmentOut, 202: AssessmentOut, **ERRORS},
    summary="Assess the release (queued for a worker; the run already queued or running, if "
    "any; 200 with `kept` when the verdict stands on unchanged data)",
    # The id the OpenAPI document gave it when it was written in sources/api.py: a client
    # generated from the document keeps its method name.
    operation_id="sources_api_assess_release",
)
def assess_release(
    request: HttpRequest, version: Version, query: Query[AssessQuery]
) -> Status[dict[str, Any]]:
    origin = origin_of(request)
    release = services.release_for(version, query.service, origin)
    asked_by = f"token {origin.token.name}" if origin.token is not None else "the API"
    outcome = assessing.assess_unless_unchanged(
        release,
        None,
        force=query.force,
        asked_by=asked_by,
        enqueue=tasks.enqueue_assessment,
    )
    run = outcome.run
    page = request.build_absolute_uri(reverse("releases:run", args=[run.pk]))
    body = {
        "run": str(run.pk),
        "status": run.status,
        "url": page,
        "kept": outcome.kept,
        "message": outcome.message,
    }
    return Status(200 if outcome.kept else 202, body)
