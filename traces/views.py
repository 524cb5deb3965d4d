"""`POST /otlp/v1/traces` and `POST /otlp/v1/logs`: what an OpenTelemetry SDK's or Collector's
OTLP/HTTP exporter sends
(`OTEL_EXPORTER_OTLP_ENDPOINT=https://detective.example.com/otlp`, the ingestion token in
`OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer …`).

Answers as the OTLP specification says, in the request's own encoding (protobuf or JSON): 200
with an `ExportTraceServiceResponse` or `ExportLogsServiceResponse` whose `partial_success`
counts the refused spans or log records and says why (or, with 0 refused, that spans of a
version with no release yet are held for it); 400 for a body it cannot read, 401/403
for the token, 413 past a bound, 415 for another type, 429 with `Retry-After` when the process
sheds load (`traces.shedding`), 503 with `Retry-After` while the database is away; a failure's
body is a `google.rpc.Status` with the reason. A token API: no session, no CSRF.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsPartialSuccess,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceResponse,
)

from sources import api as ingestion_api
from sources import selectors as sources_selectors
from traces import services
from traces.otlp.logs import read_logs
from traces.otlp.reading import MAX_BODY_BYTES, BodyError, decode_logs, decode_traces, is_json
from traces.otlp.spans import Read, read_spans
from traces.shedding import RETRY_AFTER_S, in_flight

# google.rpc.Code: what each HTTP status means to a gRPC-minded client.
_CODES = {400: 3, 401: 16, 403: 7, 413: 8, 415: 3, 429: 8, 503: 14}


def _answer(request: HttpRequest, message: Message, status: int) -> HttpResponse:
    if is_json(request.content_type or ""):
        body = json_format.MessageToJson(message, indent=None).encode()
        return HttpResponse(body, status=status, content_type="application/json")
    return HttpResponse(
        message.SerializeToString(), status=status, content_type="application/x-protobuf"
    )


def _refused(request: HttpRequest, status: int, reason: str) -> HttpResponse:
    response = _answer(request, Status(code=_CODES.get(status, 2), message=reason), status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="detective"'
    if status in (429, 503):
        response["Retry-After"] = str(RETRY_AFTER_S)
    return response


def _body(request: HttpRequest) -> bytes:
    length = request.META.get("CONTENT_LENGTH") or "0"
    if length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise BodyError(413, f"The body is larger than {MAX_BODY_BYTES:,} bytes.")
    # Read past Django's in-memory bound for form data, but never past ours.
    data = request.read(MAX_BODY_BYTES + 1)
    if len(data) > MAX_BODY_BYTES:
        raise BodyError(413, f"The body is larger than {MAX_BODY_BYTES:,} bytes.")
    return data


def _export(
    request: HttpRequest,
    decode: Callable[[bytes, str, str], Message],
    read_of: Callable[[Any], Read],
    answer: Callable[[Read], Message],
) -> HttpResponse:
    scheme, _, secret = request.headers.get("Authorization", "").partition(" ")
    token = sources_selectors.token_for(secret.strip()) if scheme.lower() == "bearer" else None
    if token is None:
        if kind := ingestion_api._other_token_kind(request):
            return _refused(request, 403, f"{kind} cannot send OTLP data: use an ingestion token.")
        return _refused(
            request, 401, "Authentication required: send Authorization: Bearer <ingestion token>."
        )
    with in_flight.slot() as taken:
        if not taken:
            return _refused(
                request, 429, "Too many OTLP requests at once here; send again after Retry-After."
            )
        try:
            decoded = decode(
                _body(request),
                request.content_type or "",
                request.headers.get("Content-Encoding", ""),
            )
        except BodyError as exc:
            return _refused(request, exc.status, f"{exc.message} Nothing of it was stored.")
        read = read_of(decoded)
        try:
            services.ingest(token, read)
        except (OperationalError, InterfaceError):
            # The database is restarting or locked past its timeout: the exporter retries after
            # Retry-After, as the specification asks of a 503; nothing of the request was kept
            # (its merge is one transaction).
            return _refused(request, 503, "The database is unavailable; send again later.")
    return _answer(request, answer(read), 200)


def _traces_answer(read: Read) -> Message:
    response = ExportTraceServiceResponse()
    # Spans held for a release not sent yet: accepted (0 rejected), with a warning.
    if read.rejected_count or read.notes:
        response.partial_success.CopyFrom(
            ExportTracePartialSuccess(
                rejected_spans=read.rejected_count, error_message=read.message()
            )
        )
    return response


def _logs_answer(read: Read) -> Message:
    response = ExportLogsServiceResponse()
    if read.rejected_count or read.notes:
        response.partial_success.CopyFrom(
            ExportLogsPartialSuccess(
                rejected_log_records=read.rejected_count, error_message=read.message()
            )
        )
    return response


@login_not_required
@csrf_exempt
@require_POST
def export_traces(request: HttpRequest) -> HttpResponse:
    return _export(request, decode_traces, read_spans, _traces_answer)


@login_not_required
@csrf_exempt
@require_POST
def export_logs(request: HttpRequest) -> HttpResponse:
    """Log records with `exception.*` attributes: occurrences of the same error groups."""
    return _export(request, decode_logs, read_logs, _logs_answer)
