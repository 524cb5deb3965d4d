"""An OTLP/HTTP traces or logs body, decoded: protobuf (`application/x-protobuf`) or OTLP/JSON
(`application/json`, trace and span ids written in hex, enums as integers), gzip or not, into
the `opentelemetry-proto` message (`ExportTraceServiceRequest`, `ExportLogsServiceRequest`);
never parsed by hand.

Every failure is a `BodyError` with the HTTP status the OTLP specification asks for (400 for a
body that cannot be read, 413 past a bound, 415 for a type it does not speak) and a sentence
saying why. Bounds: the body as sent, and the body once decompressed (a gzip bomb stops at the
bound, never fully inflated).
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from typing import Any, TypeVar

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_DECODED_BYTES",
    "BodyError",
    "decode_logs",
    "decode_traces",
    "decompress",
]

# An SDK's batch processor sends at most 512 spans a request by default: some hundreds of KB.
MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_DECODED_BYTES = 16 * 1024 * 1024
# protobuf's own default; JSON is held to the same depth (json.loads would otherwise recurse
# until Python's limit).
MAX_DEPTH = 64

Request = TypeVar("Request", ExportTraceServiceRequest, ExportLogsServiceRequest)

PROTOBUF = "application/x-protobuf"
JSON = "application/json"


class BodyError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def decompress(body: bytes, encoding: str) -> bytes:
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        if len(body) > MAX_DECODED_BYTES:
            raise BodyError(413, f"The body is larger than {MAX_DECODED_BYTES:,} bytes.")
        return body
    if encoding != "gzip":
        raise BodyError(415, f"Content-Encoding {encoding!r} is not supported: send gzip or none.")
    inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
    try:
        data = inflater.decompress(body, MAX_DECODED_BYTES + 1)
    except zlib.error as exc:
        raise BodyError(400, f"The gzip body cannot be read: {exc}.") from None
    if len(data) > MAX_DECODED_BYTES or inflater.unconsumed_tail:
        raise BodyError(
            413, f"The body is larger than {MAX_DECODED_BYTES:,} bytes once decompressed."
        )
    if not inflater.eof:
        raise BodyError(400, "The gzip body is cut short.")
    return data


def _depth_ok(value: Any, limit: int) -> bool:
    # Iterative: a hostile body must not cost the stack what it refuses.
    work = [(value, 1)]
    while work:
        item, depth = work.pop()
        if depth > limit:
            return False
        if isinstance(item, dict):
            work.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            work.extend((v, depth + 1) for v in item)
    return True


def _hex_to_base64(value: Any, where: str) -> Any:
    """OTLP/JSON writes ids in hex; protobuf's JSON mapping reads bytes as base64."""
    if not isinstance(value, str):
        raise BodyError(400, f"{where} is not a hex string.")
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raise BodyError(400, f"{where} is not a hex string.") from None
    return base64.b64encode(raw).decode("ascii")


_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def _span_ids_to_base64(document: dict[str, Any]) -> None:
    for r, resource in enumerate(_list(document.get("resourceSpans"))):
        for s, scope in enumerate(_list(_get(resource, "scopeSpans"))):
            for n, span in enumerate(_list(_get(scope, "spans"))):
                if not isinstance(span, dict):
                    continue
                where = f"resourceSpans[{r}].scopeSpans[{s}].spans[{n}]"
                for name in _ID_FIELDS:
                    if name in span and span[name] != "":
                        span[name] = _hex_to_base64(span[name], f"{where}.{name}")
                for k, link in enumerate(_list(span.get("links"))):
                    for name in ("traceId", "spanId"):
                        if isinstance(link, dict) and link.get(name):
                            link[name] = _hex_to_base64(link[name], f"{where}.links[{k}].{name}")


def _log_ids_to_base64(document: dict[str, Any]) -> None:
    for r, resource in enumerate(_list(document.get("resourceLogs"))):
        for s, scope in enumerate(_list(_get(resource, "scopeLogs"))):
            for n, record in enumerate(_list(_get(scope, "logRecords"))):
                if not isinstance(record, dict):
                    continue
                where = f"resourceLogs[{r}].scopeLogs[{s}].logRecords[{n}]"
                for name in ("traceId", "spanId"):
                    if name in record and record[name] != "":
                        record[name] = _hex_to_base64(record[name], f"{where}.{name}")


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _from_json(data: bytes, message: Request) -> Request:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyError(400, f"The JSON body is not UTF-8 (byte {exc.start}).") from None
    try:
        document = json.loads(text)
    except RecursionError:
        raise BodyError(400, f"The JSON body is nested deeper than {MAX_DEPTH} levels.") from None
    except ValueError as exc:
        raise BodyError(400, f"The JSON body cannot be read: {exc}.") from None
    if not _depth_ok(document, MAX_DEPTH):
        raise BodyError(400, f"The JSON body is nested deeper than {MAX_DEPTH} levels.")
    if not isinstance(document, dict):
        raise BodyError(400, "The JSON body is not an object.")
    if isinstance(message, ExportLogsServiceRequest):
        _log_ids_to_base64(document)
        signal = "logs"
    else:
        _span_ids_to_base64(document)
        signal = "traces"
    try:
        json_format.ParseDict(document, message, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError, RecursionError) as exc:
        raise BodyError(400, f"The JSON body is not an OTLP {signal} request: {exc}.") from None
    return message


def _from_protobuf(data: bytes, message: Request) -> Request:
    try:
        message.ParseFromString(data)
    except (DecodeError, RecursionError, ValueError) as exc:
        raise BodyError(400, f"The protobuf body cannot be read: {exc}.") from None
    return message


def _decode(body: bytes, content_type: str, encoding: str, message: Request) -> Request:
    if len(body) > MAX_BODY_BYTES:
        raise BodyError(413, f"The body is larger than {MAX_BODY_BYTES:,} bytes.")
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind not in (PROTOBUF, JSON):
        raise BodyError(
            415, f"Content-Type {kind or 'none'!r} is not OTLP: send {PROTOBUF} or {JSON}."
        )
    data = decompress(body, encoding)
    return _from_protobuf(data, message) if kind == PROTOBUF else _from_json(data, message)


def decode_traces(body: bytes, content_type: str, encoding: str = "") -> ExportTraceServiceRequest:
    """The traces request a body holds, or `BodyError`."""
    return _decode(body, content_type, encoding, ExportTraceServiceRequest())


def decode_logs(body: bytes, content_type: str, encoding: str = "") -> ExportLogsServiceRequest:
    """The logs request a body holds, or `BodyError`."""
    return _decode(body, content_type, encoding, ExportLogsServiceRequest())


def is_json(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == JSON


# A JSON caller gets its answer in JSON, a protobuf one in protobuf (the specification's rule).
def hex_id(raw: bytes) -> str:
    return binascii.hexlify(raw).decode("ascii")
