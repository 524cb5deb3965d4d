"""A span exporter that keeps each trace in its own JSON file.

`<traces dir>/trace_<trace id>.json` holds a JSON list of every span of one trace, sorted
by start time, one span per line (`grep` finds a span, `jq` or the trace page shows it).
A conversation's trace outlives any one export batch (each send_message adds
spans minutes apart), so a batch is merged into the file already there: spans are keyed by
span id, and a re-exported span replaces its earlier copy.

Cost matters (the agent runs with tracing always on): the exporter keeps the spans of the
traces it wrote recently in memory, so a batch costs one serialisation and one atomic write
per trace it touches, not a re-read of the file. The cache is trusted only while the file
on disk is the one we wrote (same size, mtime and inode); another process writing the same
trace (the web server and the worker share trace ids) makes us read the file again.

Writers are serialised by a thread lock and, across processes, by an advisory lock file in
the traces directory. Files are replaced atomically (temp file + os.replace), so a reader
never sees half a trace.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import format_span_id, format_trace_id

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the thread lock still holds in-process
    fcntl = None  # type: ignore[assignment]

SpanDict = dict[str, Any]
# A span's sort key (start time, span id) and its JSON text, encoded once.
_EncodedSpan = tuple[tuple[int, str], str]

_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
LOCK_FILE = ".lock"
DEFAULT_CACHED_TRACES = 64


def trace_path(traces_dir: Path, trace_id: str) -> Path:
    """The file of one trace. Rejects anything but 32 hex digits, since trace ids come
    from URLs and a path must never be built from arbitrary text."""
    normalised = trace_id.strip().lower()
    if not _TRACE_ID.match(normalised):
        raise ValueError(f"not a trace id: {trace_id!r}")
    return Path(traces_dir) / f"trace_{normalised}.json"


def read_trace(traces_dir: Path, trace_id: str) -> list[SpanDict]:
    """Every span of a trace, sorted by start time; empty when the trace has no file."""
    path = trace_path(traces_dir, trace_id)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    spans = json.loads(text)
    return spans if isinstance(spans, list) else []


def _iso(ns: int | None) -> str | None:
    if ns is None:
        return None
    return datetime.fromtimestamp(ns / 1e9, tz=UTC).isoformat()


def _value(value: Any) -> Any:
    # Attribute sequences arrive as tuples; JSON wants lists.
    if isinstance(value, tuple | list):
        return [_value(item) for item in value]
    return value


def _attributes(attributes: Any) -> dict[str, Any]:
    if not attributes:
        return {}
    return {key: _value(value) for key, value in attributes.items()}


def span_to_dict(span: ReadableSpan, resource: dict[str, Any]) -> SpanDict:
    context = span.get_span_context()
    assert context is not None  # an SDK span always has one
    start, end = span.start_time, span.end_time
    duration_ms = (end - start) / 1e6 if start is not None and end is not None else None
    status: dict[str, Any] = {"status_code": span.status.status_code.name}
    if span.status.description:
        status["description"] = span.status.description
    return {
        "name": span.name,
        "trace_id": format_trace_id(context.trace_id),
        "span_id": format_span_id(context.span_id),
        "parent_span_id": format_span_id(span.parent.span_id) if span.parent else None,
        "kind": span.kind.name,
        "start_time": _iso(start),
        "end_time": _iso(end),
        "start_time_unix_nano": start,
        "end_time_unix_nano": end,
        "duration_ms": duration_ms,
        "status": status,
        "attributes": _attributes(span.attributes),
        "events": [
            {
                "name": event.name,
                "timestamp": _iso(event.timestamp),
                "timestamp_unix_nano": event.timestamp,
                "attributes": _attributes(event.attributes),
            }
            for event in span.events
        ],
        "links": [
            {
                "trace_id": format_trace_id(link.context.trace_id),
                "span_id": format_span_id(link.context.span_id),
                "attributes": _attributes(link.attributes),
            }
            for link in span.links
        ],
        "scope": span.instrumentation_scope.name if span.instrumentation_scope else None,
        "resource": resource,
    }


def _start_key(span: SpanDict) -> tuple[int, str]:
    return (span.get("start_time_unix_nano") or 0, span.get("span_id") or "")


def _encode(span: SpanDict) -> _EncodedSpan:
    # One line per span, so the file is the concatenation of spans each encoded once,
    # however many batches come. Not indented: `indent` makes `json` fall back from its C
    # encoder to pure Python, which cost the exporter thread more than half of its time.
    return _start_key(span), "  " + json.dumps(span, ensure_ascii=False)


class _CachedTrace:
    __slots__ = ("fingerprint", "spans")

    def __init__(self, fingerprint: tuple[int, int, int], spans: dict[str, _EncodedSpan]) -> None:
        self.fingerprint = fingerprint
        self.spans = spans


class FileSpanExporter(SpanExporter):
    def __init__(self, traces_dir: Path, *, cached_traces: int = DEFAULT_CACHED_TRACES) -> None:
        self.traces_dir = Path(traces_dir)
        self.traces_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, _CachedTrace] = OrderedDict()
        self._cached_traces = cached_traces
        # Resources are shared by every span of a provider: convert each once.
        self._resources: dict[int, tuple[Resource, dict[str, Any]]] = {}
        self._shutdown = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown:
            return SpanExportResult.FAILURE
        by_trace: dict[str, list[SpanDict]] = {}
        for span in spans:
            data = span_to_dict(span, self._resource_dict(span.resource))
            by_trace.setdefault(data["trace_id"], []).append(data)
        try:
            with self._lock, self._file_lock():
                for trace_id, new_spans in by_trace.items():
                    self._merge(trace_id, new_spans)
        except OSError:
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self._shutdown = True
        with self._lock:
            self._cache.clear()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        # Every export is written before it returns: nothing is ever pending here.
        return True

    def _resource_dict(self, resource: Resource) -> dict[str, Any]:
        cached = self._resources.get(id(resource))
        if cached is not None and cached[0] is resource:
            return cached[1]
        converted = _attributes(resource.attributes)
        self._resources[id(resource)] = (resource, converted)
        return converted

    @contextmanager
    def _file_lock(self) -> Iterator[None]:
        if fcntl is None:  # pragma: no cover
            yield
            return
        with open(self.traces_dir / LOCK_FILE, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _merge(self, trace_id: str, new_spans: list[SpanDict]) -> None:
        path = trace_path(self.traces_dir, trace_id)
        spans = self._current_spans(trace_id, path)
        for span in new_spans:
            spans[span["span_id"]] = _encode(span)
        ordered = sorted(spans.values(), key=lambda encoded: encoded[0])
        text = "[\n" + ",\n".join(encoded[1] for encoded in ordered) + "\n]\n"
        fingerprint = self._write(path, text)
        self._remember(trace_id, _CachedTrace(fingerprint, spans))

    def _current_spans(self, trace_id: str, path: Path) -> dict[str, _EncodedSpan]:
        try:
            stat = path.stat()
        except FileNotFoundError:
            return {}
        cached = self._cache.get(trace_id)
        if cached is not None and cached.fingerprint == _fingerprint(stat):
            return cached.spans
        try:
            existing = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            # A damaged file must not stop new spans from being written.
            existing = []
        if not isinstance(existing, list):
            existing = []
        return {
            span["span_id"]: _encode(span)
            for span in existing
            if isinstance(span, dict) and "span_id" in span
        }

    def _write(self, path: Path, text: str) -> tuple[int, int, int]:
        fd, tmp_name = tempfile.mkstemp(dir=self.traces_dir, prefix=f".{path.stem}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(tmp_name, path)
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise
        return _fingerprint(path.stat())

    def _remember(self, trace_id: str, entry: _CachedTrace) -> None:
        self._cache[trace_id] = entry
        self._cache.move_to_end(trace_id)
        while len(self._cache) > self._cached_traces:
            self._cache.popitem(last=False)


def _fingerprint(stat: os.stat_result) -> tuple[int, int, int]:
    return (stat.st_size, stat.st_mtime_ns, stat.st_ino)
