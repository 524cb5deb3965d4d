from __future__ import annotations

import json
import time

from google.protobuf import json_format

from tests.otlp_requests import attributes, log_record, log_request, request, span
from traces.otlp.aggregate import aggregate
from traces.otlp.grouping_test import stack
from traces.otlp.logs import read_logs
from traces.otlp.reading import decode_logs
from traces.otlp.spans import read_spans

NOW = time.time_ns() - 60 * 10**9
ERROR = ("ZeroDivisionError", "division by zero", stack())


def test_a_record_with_an_exception_is_an_occurrence_and_no_request() -> None:
    read = read_logs(
        log_request("shop", "1.1.0", [log_record(NOW, exception=ERROR, route="/cart", trace=4)])
    )
    [facts] = read.spans
    assert (facts.service, facts.version, facts.route) == ("shop", "1.1.0", "GET /cart")
    assert facts.log and not facts.request and facts.trace_id == (5).to_bytes(16, "big").hex()
    assert facts.exceptions[0].type == "ZeroDivisionError"
    folded = aggregate(read.spans, None)
    assert (folded.spans, folded.log_records, folded.routes) == (0, 1, {})


def test_a_log_records_exception_falls_in_the_same_group_as_a_span_events() -> None:
    from_log = aggregate(
        read_logs(log_request("shop", "1", [log_record(NOW, exception=ERROR)])).spans, None
    )
    from_span = aggregate(
        read_spans(request("shop", "1", [span(1, NOW, exception=ERROR)])).spans, None
    )
    assert from_log.errors.keys() == from_span.errors.keys() and len(from_log.errors) == 1
    # Outside a trace there is no exemplar to show.
    assert next(iter(from_log.errors.values())).exemplars == []


def test_records_without_an_exception_are_accepted_and_not_kept() -> None:
    read = read_logs(log_request("shop", "1.1.0", [log_record(NOW), log_record(NOW, route="/x")]))
    assert read.spans == [] and read.rejected_count == 0


def test_bad_records_are_refused_alone_with_the_reason() -> None:
    short = log_record(NOW, exception=ERROR)
    short.trace_id = b"\x01" * 5
    ancient = log_record(10**9, exception=ERROR)
    nul = log_record(NOW, exception=("ValueError", "bad\x00", ""))
    many = log_record(NOW, exception=ERROR)
    many.attributes.extend(attributes(**{f"a{n}": n for n in range(1_001)}))
    good = log_record(NOW, exception=ERROR)
    read = read_logs(log_request("shop", "1.1.0", [short, ancient, nul, many, good]))
    assert len(read.spans) == 1 and read.rejected_count == 4
    assert read.what == "log records"
    assert "log records refused: the trace id is not 16 bytes" in read.message()
    assert "log records refused: the time is out of range" in read.message()


def test_a_resource_without_a_version_refuses_its_records() -> None:
    message = log_request("shop", "1.1.0", [log_record(NOW, exception=ERROR)] * 3)
    del message.resource_logs[0].resource.attributes[1]
    read = read_logs(message)
    assert read.rejected_count == 3
    assert read.message() == "3 log records refused: their resource has no service.version"


def test_otlp_json_logs_with_hex_ids_are_read() -> None:
    document = json_format.MessageToDict(
        log_request("shop", "1.1.0", [log_record(NOW, exception=ERROR, trace=1)])
    )
    written = document["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]
    written.update({"traceId": "ab" * 16, "spanId": "cd" * 8})
    decoded = decode_logs(json.dumps(document).encode(), "application/json")
    [facts] = read_logs(decoded).spans
    assert facts.trace_id == "ab" * 16
