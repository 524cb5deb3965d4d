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

`TraceFileProcessor` feeds the exporter from the tracer provider: it keeps a trace's spans
until the trace is finished and writes it, once, on a thread of its own.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the thread lock still holds in-process
    fcntl = None  # type: ignore[assignment]

SpanDict = dict[str, Any]
# A span's sort key (start time, span id) and its JSON text, encoded once.
_EncodedSpan = tuple[tuple[int, str], str]

_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
# What `json.dumps(span, ensure_ascii=False)` writes, without building an encoder per span
# (dumps makes a new one whenever an option differs from its defaults). No circular check:
# a span is dicts, lists and scalars we built, never a cycle.
_SPAN_JSON = json.JSONEncoder(ensure_ascii=False, check_circular=False)
# "YYYY-MM-DDTHH:MM:SS" of recent whole seconds (UTC), for `_iso`.
_second_prefixes: dict[int, str] = {}
_SECONDS_KEPT = 256
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
    """`datetime.fromtimestamp(ns / 1e9, tz=UTC).isoformat()`, the same text, with the
    date and time of the second made once per second: the datetime and its UTC offset were
    an eighth of a trace file's cost (15 timestamps a trace)."""
    if ns is None:
        return None
    if ns < 0:
        return datetime.fromtimestamp(ns / 1e9, tz=UTC).isoformat()
    # As datetime.fromtimestamp splits the float: whole seconds, and microseconds rounded
    # half to even (Python's round() on a float), carried into the next second at 10**6.
    fraction, whole = math.modf(ns / 1e9)
    micros = round(fraction * 1e6)
    second = int(whole)
    if micros >= 1_000_000:
        micros -= 1_000_000
        second += 1
    prefix = _second_prefixes.get(second)
    if prefix is None:
        if len(_second_prefixes) >= _SECONDS_KEPT:
            _second_prefixes.clear()
        prefix = datetime.fromtimestamp(second, tz=UTC).isoformat()[:-6]
        _second_prefixes[second] = prefix
    if micros:
        return f"{prefix}.{micros:06d}+00:00"
    return f"{prefix}+00:00"


def _attributes(attributes: Any) -> Any:
    """The attributes as the JSON encoder takes them, without copying: the SDK's
    BoundedAttributes keeps a plain dict (frozen once the span ended), and the C encoder
    writes its tuples as lists. A copy per span was a third of the exporter's work."""
    if not attributes:
        return {}
    inner = getattr(attributes, "_dict", None)
    return inner if isinstance(inner, dict) else dict(attributes)


def span_to_dict(span: ReadableSpan, resource: dict[str, Any] | None) -> SpanDict:
    """The span as the file holds it; without its `resource` when that is None (the
    exporter adds the resource's JSON, encoded once, to each line)."""
    context = span.get_span_context()
    assert context is not None  # an SDK span always has one
    start, end = span.start_time, span.end_time
    duration_ms = (end - start) / 1e6 if start is not None and end is not None else None
    status: dict[str, Any] = {"status_code": span.status.status_code.name}
    if span.status.description:
        status["description"] = span.status.description
    data = {
        "name": span.name,
        "trace_id": f"{context.trace_id:032x}",
        "span_id": f"{context.span_id:016x}",
        "parent_span_id": f"{span.parent.span_id:016x}" if span.parent else None,
        "kind": span.kind.name,
        "start_time": _iso(start),
        "end_time": _iso(end),
        "start_time_unix_nano": start,
        "end_time_unix_nano": end,
        "duration_ms": duration_ms,
        "status": status,
        # The span's own BoundedAttributes: `span.attributes` wraps it in a read-only proxy,
        # which would have to be copied item by item.
        "attributes": _attributes(getattr(span, "_attributes", None) or span.attributes),
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
                "trace_id": f"{link.context.trace_id:032x}",
                "span_id": f"{link.context.span_id:016x}",
                "attributes": _attributes(link.attributes),
            }
            for link in span.links
        ],
        "scope": span.instrumentation_scope.name if span.instrumentation_scope else None,
    }
    if resource is not None:
        data["resource"] = resource
    return data


def _start_key(span: SpanDict) -> tuple[int, str]:
    return (span.get("start_time_unix_nano") or 0, span.get("span_id") or "")


def _encode(span: SpanDict, resource_json: str | None = None) -> _EncodedSpan:
    # One line per span, so the file is the concatenation of spans each encoded once,
    # however many batches come. Not indented: `indent` makes `json` fall back from its C
    # encoder to pure Python, which cost the exporter thread more than half of its time.
    text = _SPAN_JSON.encode(span)
    if resource_json is not None:  # the same for every span of a process: encoded once
        text = f'{text[:-1]}, "resource": {resource_json}}}'
    return _start_key(span), "  " + text


class _CachedTrace:
    __slots__ = ("fingerprint", "spans")

    def __init__(self, fingerprint: tuple[int, int, int], spans: dict[str, _EncodedSpan]) -> None:
        self.fingerprint = fingerprint
        self.spans = spans


class FileSpanExporter(SpanExporter):
    def __init__(self, traces_dir: Path, *, cached_traces: int = DEFAULT_CACHED_TRACES) -> None:
        self.traces_dir = Path(traces_dir)
        self.traces_dir.mkdir(parents=True, exist_ok=True)
        self._dir = str(self.traces_dir)
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, _CachedTrace] = OrderedDict()
        self._cached_traces = cached_traces
        # Resources are shared by every span of a provider: convert each once.
        self._resources: dict[int, tuple[Resource, str]] = {}
        self._lock_fd: int | None = None
        self._shutdown = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown:
            return SpanExportResult.FAILURE
        by_trace: dict[str, list[_EncodedSpan]] = {}
        for span in spans:
            data = span_to_dict(span, None)
            encoded = _encode(data, self._resource_json(span.resource))
            by_trace.setdefault(data["trace_id"], []).append((data["span_id"], encoded))
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
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        # Every export is written before it returns: nothing is ever pending here.
        return True

    def _resource_json(self, resource: Resource) -> str:
        cached = self._resources.get(id(resource))
        if cached is not None and cached[0] is resource:
            return cached[1]
        encoded = json.dumps(dict(resource.attributes), ensure_ascii=False)
        self._resources[id(resource)] = (resource, encoded)
        return encoded

    @contextmanager
    def _file_lock(self) -> Iterator[None]:
        if fcntl is None:  # pragma: no cover
            yield
            return
        # Opened once and kept: an open and a close per export cost more than the lock.
        if self._lock_fd is None:
            self._lock_fd = os.open(
                os.path.join(self._dir, LOCK_FILE), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644
            )
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _merge(self, trace_id: str, new_spans: list[tuple[str, _EncodedSpan]]) -> None:
        # trace_id was formatted by us (32 hex digits): no need for trace_path's check.
        path = os.path.join(self._dir, f"trace_{trace_id}.json")
        spans = self._current_spans(trace_id, path)
        for span_id, encoded in new_spans:
            spans[span_id] = encoded
        ordered = sorted(spans.values(), key=lambda encoded: encoded[0])
        text = "[\n" + ",\n".join(encoded[1] for encoded in ordered) + "\n]\n"
        fingerprint = self._write(path, text)
        self._remember(trace_id, _CachedTrace(fingerprint, spans))

    def _current_spans(self, trace_id: str, path: str) -> dict[str, _EncodedSpan]:
        # access() first: a new trace (most of them) has no file, and the exception os.stat
        # raises then, message and all, cost more than the check.
        if not os.access(path, os.F_OK):
            return {}
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            return {}
        cached = self._cache.get(trace_id)
        if cached is not None and cached.fingerprint == _fingerprint(stat):
            return cached.spans
        try:
            with open(path, encoding="utf-8") as handle:
                existing = json.load(handle)
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

    def _write(self, path: str, text: str) -> tuple[int, int, int]:
        # A fixed temporary name per process is enough: writers of this directory hold the
        # lock file, and tempfile.mkstemp's random names cost more than the write.
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                data = memoryview(text.encode("utf-8"))
                while data:
                    data = data[os.write(fd, data) :]
                # The file keeps its inode, size and mtime through the rename.
                fingerprint = _fingerprint(os.fstat(fd))
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except BaseException:
            with suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        return fingerprint

    def _remember(self, trace_id: str, entry: _CachedTrace) -> None:
        self._cache[trace_id] = entry
        self._cache.move_to_end(trace_id)
        while len(self._cache) > self._cached_traces:
            self._cache.popitem(last=False)


def _fingerprint(stat: os.stat_result) -> tuple[int, int, int]:
    return (stat.st_size, stat.st_mtime_ns, stat.st_ino)


class TraceFileProcessor(SpanProcessor):
    """Hands finished traces to a FileSpanExporter, one write per trace, on a thread of its own.

    A span that ends is only put aside (a list append under a lock: what the traced code
    pays). When the trace's local root ends (a span with no parent, or a remote one: the
    assessment's `invoke_workflow`, a web request continuing a traceparent) the trace is
    ready; the writer thread wakes every `delay_s` and writes each ready trace with one merge
    into its file. Spans of a trace whose root has not ended are written once they have waited
    `delay_s` too, so a long run's file grows as it goes. `force_flush` writes everything now.

    The BatchSpanProcessor this replaces wrote whatever its batch held, so a trace that
    straddled two batches was merged and written twice.
    """

    def __init__(self, exporter: FileSpanExporter, *, delay_s: float = 1.0) -> None:
        self.exporter = exporter
        self._delay_s = delay_s
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._open: dict[int, list[ReadableSpan]] = {}
        self._since: dict[int, float] = {}
        self._ready: list[ReadableSpan] = []
        self._flushes: list[threading.Event] = []
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="trace-files", daemon=True)
        self._thread.start()

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None or not context.trace_flags.sampled:
            return
        trace_id = context.trace_id
        parent = span.parent
        with self._lock:
            pending = self._open.get(trace_id)
            if pending is None:
                pending = self._open[trace_id] = []
                self._since[trace_id] = time.monotonic()
            pending.append(span)
            if parent is None or parent.is_remote:
                self._ready.extend(pending)
                del self._open[trace_id], self._since[trace_id]

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        done = threading.Event()
        with self._lock:
            if self._stopping:
                return True
            self._flushes.append(done)
            self._wake.notify()
        return done.wait(timeout_millis / 1000)

    def shutdown(self) -> None:
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
            self._wake.notify()
        self._thread.join()
        self.exporter.shutdown()

    def _take(self) -> tuple[list[ReadableSpan], list[threading.Event], bool]:
        with self._lock:
            if not (self._flushes or self._stopping):
                self._wake.wait(self._delay_s)
            flushing = bool(self._flushes) or self._stopping
            now = time.monotonic()
            spans, self._ready = self._ready, []
            for trace_id in [
                t for t, since in self._since.items() if flushing or now - since >= self._delay_s
            ]:
                spans.extend(self._open.pop(trace_id))
                del self._since[trace_id]
            flushes, self._flushes = self._flushes, []
            return spans, flushes, self._stopping

    def _run(self) -> None:
        while True:
            spans, flushes, stopping = self._take()
            if spans:
                self.exporter.export(spans)
            for done in flushes:
                done.set()
            if stopping:
                return
