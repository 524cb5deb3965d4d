"""The ingestion services' common ground: errors, origins, services, releases, tokens."""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import slugify

from detective_client.records import text_problem as name_problem
from releases.models import Release, Service
from releases.stored_verdict import refreshed_once
from releases.validation import service_name_problem, text_problem
from sources import release_hooks
from sources.models import (
    Ingestion,
    IngestionToken,
    SourceKind,
)
from sources.selectors import hash_token

BATCH = 2000
MAX_COMMITS = 20_000
MAX_SAMPLES = 200_000


class IngestError(Exception):
    """Refused; `status` is the HTTP status the API answers with, the message says why."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass(frozen=True)
class Origin:
    """Who sent it and how: `via` is api, command, admin or seed."""

    via: str
    token: IngestionToken | None = None
    user: Any = None


@dataclass(frozen=True)
class Ingested:
    ingestion: Ingestion
    created: bool

    @property
    def counts(self) -> dict[str, Any]:
        return self.ingestion.counts


@dataclass(frozen=True)
class ReleaseFields:
    """A release as a caller describes it; None leaves a stored field as it is."""

    version: str
    service: str | None = None
    title: str | None = None
    environment: str | None = None
    git_from_ref: str | None = None
    git_to_ref: str | None = None
    head_sha: str | None = None
    pipeline_url: str | None = None
    deployed_at: datetime | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def updates(self) -> dict[str, Any]:
        names = ("title", "environment", "git_from_ref", "git_to_ref", "head_sha")
        found = {name: getattr(self, name) for name in names if getattr(self, name) is not None}
        if self.pipeline_url is not None:
            found["pipeline_url"] = self.pipeline_url
        if self.deployed_at is not None:
            found["deployed_at"] = self.deployed_at
        return found


# ---- services, tokens, releases ----------------------------------------------------------------


def service_slug(name: str) -> str:
    """A service's slug: each run of letters and digits, as slugify gives it, joined by "-".
    One normalisation, so two names never share a slug by a character slugify drops: "a/b"
    is "a-b", never "ab" (issue 37)."""
    return "-".join(part for part in (slugify(word) for word in _WORDS.split(name)) if part)


_WORDS = re.compile(r"\W+")


def find_service(name: str | None) -> Service | None:
    """The service by name (any case) or slug; the default service for None. A name that
    cannot be one is refused before any query (PostgreSQL refuses a NUL in a query)."""
    if not name:
        return Service.default()
    if problem := service_name_problem(name):
        raise IngestError(f"{name[:40]!r} cannot name a service: it {problem}.", 422)
    return (
        Service.objects.filter(name__iexact=name).first()
        or Service.objects.filter(slug__iexact=name).first()
    )


def service_for(name: str | None, origin: Origin, *, create: bool = False) -> Service:
    """The service a caller names, checked against its token; made when `create` and new."""
    service = find_service(name)
    if service is None:
        if not create:
            raise IngestError(f"No service {name!r}.", 404)
        name = name or ""
        if problem := service_name_problem(name):
            raise IngestError(f"{name[:40]!r} cannot name a service: it {problem}.", 422)
        slug = service_slug(name)
        if not slug:
            raise IngestError(f"{name!r} cannot name a service: use letters or digits.", 422)
        if holder := Service.objects.filter(slug=slug).first():
            raise IngestError(
                f"{name!r} cannot name a new service: its address would be {slug!r}, the "
                f"service {holder.name!r}'s. Send {holder.name!r} or {slug!r} for that one, "
                "or choose a name that differs in its letters or digits.",
                409,
            )
        if origin.token is not None and origin.token.service_id is not None:
            raise IngestError(f"This token may ingest for {origin.token.service} only.", 403)
        service = _create_service(name, slug)
    check_token(origin, service)
    return service


def _create_service(name: str, slug: str) -> Service:
    """The new service, or the one another request made at the same moment: eight jobs of a
    matrix build naming a new service at once all get it (on PostgreSQL the second insert
    waits for the first to commit, then fails on `releases_service_name_key`)."""
    try:
        with transaction.atomic():
            return Service.objects.create(name=name, slug=slug)
    except IntegrityError:
        made = Service.objects.filter(name=name).first()
        if made is None:
            holder = Service.objects.filter(slug=slug).first()
            if holder is None:
                raise
            raise IngestError(
                f"{name!r} cannot name a new service: its address would be {slug!r}, the "
                f"service {holder.name!r}'s.",
                409,
            ) from None
        return made


def lock_release(release: Release) -> None:
    """Hold the release's row until the transaction ends, so that two requests ingesting into
    one release at once run one after the other: the second sees what the first stored (the
    same content is then stored once) instead of failing on a unique constraint."""
    list(Release.objects.select_for_update().filter(pk=release.pk).values_list("pk", flat=True))


def check_token(origin: Origin, service: Service) -> None:
    if origin.token is not None and not origin.token.may_ingest(service):
        raise IngestError(
            f"This token may ingest for {origin.token.service} only, not for {service}.", 403
        )


def release_for(version: str, service_name: str | None, origin: Origin) -> Release:
    service = service_for(service_name, origin)
    release = Release.objects.filter(service=service, version=version).first()
    if release is None:
        raise IngestError(
            f"No release {version!r} of {service}: create it first (POST /api/releases).", 404
        )
    return release


def _problems(error: ValidationError) -> str:
    if hasattr(error, "message_dict"):
        return "; ".join(
            f"{name}: {' '.join(messages)}" if name != "__all__" else " ".join(messages)
            for name, messages in error.message_dict.items()
        )
    return " ".join(error.messages)


def _digest(value: Any) -> str:
    return hashlib.sha256(
        json.dumps(value, sort_keys=True, default=str, ensure_ascii=False).encode()
    ).hexdigest()


@refreshed_once
def upsert_release(fields: ReleaseFields, origin: Origin) -> tuple[Release, bool]:
    """Create the release of this service and version, or update the fields given: (release,
    created). Validated by the model (the same checks as the admin's form)."""
    moment = fields.deployed_at
    if moment is not None and moment.tzinfo is None:
        # Compared with the samples' aware times later, a naive one is a 500 waiting to happen.
        raise IngestError(
            "Invalid release: deployed_at needs its UTC offset, e.g. 2026-11-20T10:00:00+00:00.",
            422,
        )
    if moment is not None and not 1 < moment.year < 9999:
        # Its UTC instant must exist too: 0001-01-01T00:00+14:00 is before the calendar's start.
        raise IngestError("Invalid release: deployed_at is out of range: years 2 to 9998.", 422)
    # The API's schema says the same; the form and `manage.py ingest` come here directly.
    for name in ("title", "environment", "git_from_ref", "git_to_ref", "head_sha", "pipeline_url"):
        value = getattr(fields, name)
        if isinstance(value, str) and (problem := name_problem(value, name=True)):
            raise IngestError(f"Invalid release: {name} {problem}.", 422)
    with transaction.atomic():
        service = service_for(fields.service, origin, create=True)
        release, created = _release_locked(service, fields.version)
        for name, value in fields.updates().items():
            setattr(release, name, value)
        try:
            release.full_clean()
        except ValidationError as exc:
            raise IngestError(f"Invalid release: {_problems(exc)}", 422) from None
        release.save()
        record = {"version": fields.version, "service": service.slug, **fields.updates()}
        _record(release, SourceKind.RELEASE, _digest(record), origin, (), {"created": created})
        if created:
            # Spans that arrived before the release (traces' held ones) become its own.
            release_hooks.made(release)
    return release, created


def _release_locked(service: Service, version: str) -> tuple[Release, bool]:
    """The release of this service and version, locked for this transaction; a new one is
    made (and validated by the caller) when there is none. Two requests making it at once:
    the second waits for the first, then takes its release."""
    for _ in range(2):
        found = Release.objects.select_for_update().filter(service=service, version=version)
        release = found.first()
        if release is not None:
            return release, False
        candidate = Release(service=service, version=version)
        try:
            # Uniqueness is the database's to say (below): a check here would race.
            candidate.full_clean(validate_unique=False, validate_constraints=False)
        except ValidationError as exc:
            raise IngestError(f"Invalid release: {_problems(exc)}", 422) from None
        try:
            with transaction.atomic():
                candidate.save()
        except IntegrityError:
            continue  # another request made it and committed: take that one
        return candidate, True
    raise IngestError(f"Release {version!r} of {service} is being created; try again.", 409)


def _record(
    release: Release,
    kind: str,
    content_hash: str,
    origin: Origin,
    file_names: Sequence[str],
    counts: dict[str, Any],
) -> tuple[Ingestion, bool]:
    lock_release(release)
    existing = Ingestion.objects.filter(
        release=release, kind=kind, content_hash=content_hash
    ).first()
    if existing is not None:
        return existing, False
    if origin.token is not None:
        IngestionToken.objects.filter(pk=origin.token.pk).update(last_used_at=timezone.now())
    ingestion = Ingestion.objects.create(
        release=release,
        kind=kind,
        content_hash=content_hash,
        token=origin.token,
        user=origin.user if getattr(origin.user, "is_authenticated", False) else None,
        origin=origin.via,
        file_names=list(file_names),
        counts=counts,
    )
    return ingestion, True


# ---- tokens ------------------------------------------------------------------------------------

TOKEN_PREFIX = "dtk_"


def create_token(
    name: str, service: Service | None, user: Any = None
) -> tuple[IngestionToken, str]:
    """A new ingestion token and its secret, which is returned once and never stored."""
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = IngestionToken.objects.create(
        name=name,
        service=service,
        token_hash=hash_token(secret),
        prefix=secret[:10],
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )
    return token, secret


def revoke_token(token: IngestionToken) -> None:
    IngestionToken.objects.filter(pk=token.pk).update(revoked=True)


def _check_text(where: str, value: str) -> str:
    if problem := text_problem(value):
        raise IngestError(f"{where} {problem}.", 422)
    return value
