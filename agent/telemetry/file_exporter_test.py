from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from agent.telemetry.file_exporter import (
    FileSpanExporter,
    TraceFileProcessor,
    _iso,
    read_trace,
    trace_path,
)


@pytest.fixture
def memory() -> Iterator[tuple[trace.Tracer, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "test"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider.get_tracer("test"), exporter
    provider.shutdown()


def _trace_id(span: ReadableSpan) -> str:
    context = span.get_span_context()
    assert context is not None
    return trace.format_trace_id(context.trace_id)


def test_a_trace_exported_in_two_batches_lands_in_one_file(
    tmp_path: Path, memory: tuple[trace.Tracer, InMemorySpanExporter]
) -> None:
    tracer, spans = memory
    with (
        tracer.start_as_current_span("invoke_agent detective") as root,
        tracer.start_as_current_span("chat m", attributes={"a.list": (1, 2)}),
    ):
        pass
    first_batch = list(spans.get_finished_spans())
    spans.clear()
    with (
        tracer.start_as_current_span(
            "invoke_agent detective",
            context=trace.set_span_in_context(root),
        ),
        tracer.start_as_current_span("execute_tool t") as tool,
    ):
        tool.add_event("something", {"k": "v"})
    second_batch = list(spans.get_finished_spans())

    exporter = FileSpanExporter(tmp_path)
    assert exporter.export(first_batch) is SpanExportResult.SUCCESS
    assert exporter.export(second_batch) is SpanExportResult.SUCCESS

    trace_id = _trace_id(first_batch[0])
    files = list(tmp_path.glob("trace_*.json"))
    assert files == [tmp_path / f"trace_{trace_id}.json"]
    stored = read_trace(tmp_path, trace_id)
    assert [s["name"] for s in stored] == [
        "invoke_agent detective",
        "chat m",
        "invoke_agent detective",
        "execute_tool t",
    ]
    root_span = stored[0]
    assert root_span["parent_span_id"] is None
    assert root_span["trace_id"] == trace_id
    assert stored[1]["parent_span_id"] == root_span["span_id"]
    assert stored[2]["parent_span_id"] == root_span["span_id"]
    assert stored[3]["parent_span_id"] == stored[2]["span_id"]
    assert stored[1]["attributes"] == {"a.list": [1, 2]}
    assert stored[3]["events"][0]["name"] == "something"
    assert stored[3]["events"][0]["attributes"] == {"k": "v"}
    assert stored[3]["events"][0]["timestamp"].endswith("+00:00")


def test_span_fields(tmp_path: Path, memory: tuple[trace.Tracer, InMemorySpanExporter]) -> None:
    tracer, spans = memory
    link_context = trace.SpanContext(trace_id=0xABC, span_id=0xDEF, is_remote=True)
    with tracer.start_as_current_span(
        "s", links=[trace.Link(link_context, {"why": "parent run"})]
    ) as span:
        span.set_status(trace.Status(trace.StatusCode.ERROR, "boom"))
    FileSpanExporter(tmp_path).export(spans.get_finished_spans())

    [stored] = read_trace(tmp_path, _trace_id(spans.get_finished_spans()[0]))
    assert stored["kind"] == "INTERNAL"
    assert stored["status"] == {"status_code": "ERROR", "description": "boom"}
    assert stored["resource"]["service.name"] == "test"
    assert stored["scope"] == "test"
    assert stored["start_time"].endswith("+00:00")
    assert stored["end_time_unix_nano"] >= stored["start_time_unix_nano"]
    assert stored["duration_ms"] == pytest.approx(
        (stored["end_time_unix_nano"] - stored["start_time_unix_nano"]) / 1e6
    )
    assert stored["links"] == [
        {
            "trace_id": f"{0xABC:032x}",
            "span_id": f"{0xDEF:016x}",
            "attributes": {"why": "parent run"},
        }
    ]


def test_file_is_a_json_list_of_one_span_per_line(
    tmp_path: Path, memory: tuple[trace.Tracer, InMemorySpanExporter]
) -> None:
    tracer, spans = memory
    with tracer.start_as_current_span("a"), tracer.start_as_current_span("b"):
        pass
    exporter = FileSpanExporter(tmp_path)
    exporter.export(spans.get_finished_spans()[:1])
    exporter.export(spans.get_finished_spans()[1:])

    [path] = tmp_path.glob("trace_*.json")
    text = path.read_text()
    parsed = json.loads(text)
    lines = text.splitlines()
    assert lines[0] == "[" and lines[-1] == "]"
    assert [json.loads(line.strip().rstrip(",")) for line in lines[1:-1]] == parsed
    assert [span["name"] for span in parsed] == ["a", "b"]  # by start time


def test_two_traces_go_to_two_files(
    tmp_path: Path, memory: tuple[trace.Tracer, InMemorySpanExporter]
) -> None:
    tracer, spans = memory
    with tracer.start_as_current_span("first"):
        pass
    with tracer.start_as_current_span("second"):
        pass
    FileSpanExporter(tmp_path).export(spans.get_finished_spans())

    first, second = spans.get_finished_spans()
    assert [s["name"] for s in read_trace(tmp_path, _trace_id(first))] == ["first"]
    assert [s["name"] for s in read_trace(tmp_path, _trace_id(second))] == ["second"]
    assert len(list(tmp_path.glob("trace_*.json"))) == 2


def test_a_re_exported_span_replaces_its_copy(
    tmp_path: Path, memory: tuple[trace.Tracer, InMemorySpanExporter]
) -> None:
    tracer, spans = memory
    with tracer.start_as_current_span("once"):
        pass
    exporter = FileSpanExporter(tmp_path)
    exporter.export(spans.get_finished_spans())
    exporter.export(spans.get_finished_spans())
    assert len(read_trace(tmp_path, _trace_id(spans.get_finished_spans()[0]))) == 1


def test_spans_written_by_another_writer_are_kept(
    tmp_path: Path, memory: tuple[trace.Tracer, InMemorySpanExporter]
) -> None:
    """The web process and the worker write the same trace: neither may lose spans."""
    tracer, spans = memory
    with tracer.start_as_current_span("request") as root:
        pass
    with tracer.start_as_current_span("worker", context=trace.set_span_in_context(root)):
        pass
    with tracer.start_as_current_span("later request", context=trace.set_span_in_context(root)):
        pass
    request, worker, later = spans.get_finished_spans()
    web = FileSpanExporter(tmp_path)
    other = FileSpanExporter(tmp_path)
    web.export([request])
    other.export([worker])
    web.export([later])

    names = [s["name"] for s in read_trace(tmp_path, _trace_id(request))]
    assert sorted(names) == ["later request", "request", "worker"]


def test_cache_eviction_falls_back_to_the_file(
    tmp_path: Path, memory: tuple[trace.Tracer, InMemorySpanExporter]
) -> None:
    tracer, spans = memory
    for name in ("a", "b", "a2"):
        with tracer.start_as_current_span(name):
            pass
    a, b, _ = spans.get_finished_spans()
    exporter = FileSpanExporter(tmp_path, cached_traces=1)
    exporter.export([a])
    exporter.export([b])  # evicts a's trace from the cache
    with tracer.start_as_current_span(
        "a child",
        context=trace.set_span_in_context(
            trace.NonRecordingSpan(
                a.get_span_context()  # type: ignore[arg-type]
            )
        ),
    ):
        pass
    exporter.export([spans.get_finished_spans()[-1]])
    assert [s["name"] for s in read_trace(tmp_path, _trace_id(a))] == ["a", "a child"]


def test_a_damaged_file_is_replaced(
    tmp_path: Path, memory: tuple[trace.Tracer, InMemorySpanExporter]
) -> None:
    tracer, spans = memory
    with tracer.start_as_current_span("fresh"):
        pass
    [span] = spans.get_finished_spans()
    trace_path(tmp_path, _trace_id(span)).write_text("{not json")
    FileSpanExporter(tmp_path).export([span])
    assert [s["name"] for s in read_trace(tmp_path, _trace_id(span))] == ["fresh"]


def test_a_file_holding_something_else_is_replaced(
    tmp_path: Path, memory: tuple[trace.Tracer, InMemorySpanExporter]
) -> None:
    tracer, spans = memory
    with tracer.start_as_current_span("fresh"):
        pass
    [span] = spans.get_finished_spans()
    path = trace_path(tmp_path, _trace_id(span))
    path.write_text('{"not": "a list"}')
    assert read_trace(tmp_path, _trace_id(span)) == []
    FileSpanExporter(tmp_path).export([span])
    assert [s["name"] for s in read_trace(tmp_path, _trace_id(span))] == ["fresh"]


def test_read_trace_of_an_unknown_trace_is_empty(tmp_path: Path) -> None:
    assert read_trace(tmp_path, "0" * 31 + "1") == []


@pytest.mark.parametrize("bad", ["../etc/passwd", "abc", "g" * 32, "0" * 33, ""])
def test_trace_ids_are_validated(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError, match="not a trace id"):
        read_trace(tmp_path, bad)


def test_trace_path_accepts_upper_case(tmp_path: Path) -> None:
    assert trace_path(tmp_path, "AB" * 16) == tmp_path / f"trace_{'ab' * 16}.json"


def test_export_after_shutdown_fails(
    tmp_path: Path, memory: tuple[trace.Tracer, InMemorySpanExporter]
) -> None:
    tracer, spans = memory
    with tracer.start_as_current_span("late"):
        pass
    exporter = FileSpanExporter(tmp_path)
    exporter.shutdown()
    assert exporter.export(spans.get_finished_spans()) is SpanExportResult.FAILURE
    assert exporter.force_flush() is True


def test_write_errors_fail_the_export_and_leave_no_temp_file(
    tmp_path: Path,
    memory: tuple[trace.Tracer, InMemorySpanExporter],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tracer, spans = memory
    with tracer.start_as_current_span("doomed"):
        pass

    def refuse(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("agent.telemetry.file_exporter.os.replace", refuse)
    exporter = FileSpanExporter(tmp_path)
    assert exporter.export(spans.get_finished_spans()) is SpanExportResult.FAILURE
    assert [p.name for p in tmp_path.iterdir() if p.name != ".lock"] == []


def test_concurrent_exports_lose_no_span(
    tmp_path: Path, memory: tuple[trace.Tracer, InMemorySpanExporter]
) -> None:
    tracer, spans = memory
    roots = []
    for index in range(3):
        with tracer.start_as_current_span(f"root {index}") as root:
            roots.append(root)
    for index in range(120):
        parent = trace.set_span_in_context(roots[index % 3])
        with tracer.start_as_current_span(f"child {index}", context=parent):
            pass
    finished = list(spans.get_finished_spans())
    batches = [finished[i : i + 5] for i in range(0, len(finished), 5)]
    # Two exporters, as two processes would have, plus threads within each.
    exporters = [FileSpanExporter(tmp_path), FileSpanExporter(tmp_path)]
    threads = [
        threading.Thread(target=exporters[i % 2].export, args=(batch,))
        for i, batch in enumerate(batches)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    total = 0
    for root in roots:
        stored = read_trace(tmp_path, _trace_id(root))  # type: ignore[arg-type]
        assert len({s["span_id"] for s in stored}) == len(stored)
        total += len(stored)
    assert total == len(finished)
    assert not list(tmp_path.glob("*.tmp"))


def test_works_behind_a_batch_span_processor(tmp_path: Path) -> None:
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(FileSpanExporter(tmp_path)))
    tracer = provider.get_tracer("test")
    with (
        tracer.start_as_current_span("root") as root,
        tracer.start_as_current_span("child"),
    ):
        pass
    provider.force_flush()
    trace_id = trace.format_trace_id(root.get_span_context().trace_id)
    assert [s["name"] for s in read_trace(tmp_path, trace_id)] == ["root", "child"]
    provider.shutdown()


class _Counting(FileSpanExporter):
    def __init__(self, traces_dir: Path) -> None:
        super().__init__(traces_dir)
        self.batches: list[list[str]] = []

    def export(self, spans: Any) -> SpanExportResult:
        self.batches.append([span.name for span in spans])
        return super().export(spans)


def _provider(processor: TraceFileProcessor) -> trace.Tracer:
    provider = TracerProvider()
    provider.add_span_processor(processor)
    return provider.get_tracer("test")


def test_a_trace_is_written_once_when_its_root_ends(tmp_path: Path) -> None:
    exporter = _Counting(tmp_path)
    processor = TraceFileProcessor(exporter, delay_s=60)  # only flushes write
    tracer = _provider(processor)
    with tracer.start_as_current_span("root") as root:
        for name in ("chat", "tool", "chat again"):
            with tracer.start_as_current_span(name):
                pass
        trace_id = trace.format_trace_id(root.get_span_context().trace_id)
    # A remote parent makes a local root too (a web request continuing a traceparent).
    remote = trace.NonRecordingSpan(
        trace.SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=trace.TraceFlags(1))
    )
    with tracer.start_as_current_span("request", context=trace.set_span_in_context(remote)):
        pass
    processor.force_flush()

    assert len(exporter.batches) == 1
    assert sorted(exporter.batches[0]) == ["chat", "chat again", "request", "root", "tool"]
    assert [s["name"] for s in read_trace(tmp_path, trace_id)] == [
        "root",
        "chat",
        "tool",
        "chat again",
    ]
    processor.shutdown()


def test_an_unfinished_trace_is_written_after_the_delay(tmp_path: Path) -> None:
    exporter = _Counting(tmp_path)
    processor = TraceFileProcessor(exporter, delay_s=0.05)
    tracer = _provider(processor)
    with tracer.start_as_current_span("a long run") as root:
        with tracer.start_as_current_span("first call"):
            pass
        trace_id = trace.format_trace_id(root.get_span_context().trace_id)
        deadline = time.monotonic() + 5
        while not read_trace(tmp_path, trace_id) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [s["name"] for s in read_trace(tmp_path, trace_id)] == ["first call"]
    processor.shutdown()  # writes what is left, then stops
    assert [s["name"] for s in read_trace(tmp_path, trace_id)] == ["a long run", "first call"]
    assert not processor._thread.is_alive()
    assert processor.force_flush() is True  # after shutdown: nothing to do, no waiting


def test_timestamps_read_as_datetime_writes_them() -> None:
    # `_iso` builds the text itself; it must be datetime's to the character, rounding
    # (half to even on the float), whole seconds without a fraction, and carries included.
    rng = random.Random(7)
    now = 1_795_781_887_863_235_865
    cases = [0, 1, 999, 1000, 500, 1500, 2500, 999_999_500, 999_999_999, now]
    cases += [now - now % 1_000_000_000 + k for k in (0, 500, 1500, 999_999_499, 999_999_501)]
    cases += [rng.randrange(0, 4_102_444_800_000_000_000) for _ in range(20_000)]
    cases += [now + rng.randrange(0, 10**10) for _ in range(20_000)]
    for ns in cases:
        assert _iso(ns) == datetime.fromtimestamp(ns / 1e9, tz=UTC).isoformat(), ns
    assert _iso(None) is None
    assert _iso(-1_500) == datetime.fromtimestamp(-1_500 / 1e9, tz=UTC).isoformat()
