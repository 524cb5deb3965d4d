"""What a process of the site sets up once: tracing and metrics, Django's request spans, and
its start-up heap frozen.

The web server (asgi.py), the task worker, `run_evals` and the benchmark's driver take these
steps; a run configures the telemetry too (`assess`), and the in-process API (`in_process.py`)
instruments Django as the web server does. The apps' own commands need them, so they live
beside the seam, below the site's wiring.

**Telemetry.** Spans go to `<data dir>/traces`, where the run page's trace view reads them.
DETECTIVE_TELEMETRY=off turns it all off (the test suite does, and installs its own).
`instrument_web` adds Django's request spans, which continue an incoming `traceparent`
header, so the API calls the agent's tools make during a run land in the run's trace. Only
requests that do something are traced by default: the release API (the agent's tools),
Reassess and Cancel (they start and stop runs). Page views, static files, the admin and the
login page would be most of the traces, each of one empty span. DETECTIVE_TRACE_PAGES=true
traces every request; OTEL_PYTHON_DJANGO_EXCLUDED_URLS (or OTEL_PYTHON_EXCLUDED_URLS), when
set, is the instrumentor's own list and replaces ours.

**The start-up heap.** What a process has loaded once it is ready (Django, the apps,
OpenTelemetry, the agent: about 127,000 objects) lives as long as the process, yet every full
collection walks all of it: a pause of about 90 ms on this machine, landing on whichever page
or trial allocates when it falls due (benchmark 5: the p95 of the eval pages was that pause).
Frozen, a full collection walks only what was made since: a few milliseconds. A process-wide
step, so only entry points take it, once they have loaded what they need.
"""

from __future__ import annotations

import gc
import os
from collections.abc import MutableMapping
from pathlib import Path

from django.conf import settings

from agent.telemetry import TelemetryConfig, configure_telemetry
from agent.telemetry.setup import active_telemetry

TELEMETRY_ENV = "DETECTIVE_TELEMETRY"
TRACE_PAGES_ENV = "DETECTIVE_TRACE_PAGES"
EXCLUDED_URLS_ENVS = ("OTEL_PYTHON_DJANGO_EXCLUDED_URLS", "OTEL_PYTHON_EXCLUDED_URLS")
# Matched against the request's absolute URL without its query: everything but the API,
# Reassess and Cancel.
DEFAULT_EXCLUDED_URLS = r"^[a-z]+://[^/]+/(?!api/|releases/[^/]+/reassess$|runs/[^/]+/cancel$)"

_web_instrumented = False


def telemetry_enabled() -> bool:
    return os.environ.get(TELEMETRY_ENV, "").strip().lower() not in {"0", "off", "false", "no"}


def configure_process_telemetry() -> None:
    """Tracing and metrics for this process, once (see the module's docstring)."""
    if telemetry_enabled() and active_telemetry() is None:
        configure_telemetry(TelemetryConfig(data_dir=Path(settings.DATA_DIR)))


def flush_telemetry() -> None:
    telemetry = active_telemetry()
    if telemetry is not None:
        telemetry.force_flush()


def excluded_urls(environ: MutableMapping[str, str] | None = None) -> str | None:
    """What the Django instrumentor leaves out: None lets it read its own variables."""
    env = os.environ if environ is None else environ
    if any(env.get(name, "").strip() for name in EXCLUDED_URLS_ENVS):
        return None
    if env.get(TRACE_PAGES_ENV, "").strip().lower() in {"1", "true", "yes", "on"}:
        return ""
    return DEFAULT_EXCLUDED_URLS


def instrument_web() -> None:
    """The process's telemetry and Django's request spans, once; before the application is
    built (the instrumentor adds its middleware to the settings)."""
    global _web_instrumented
    if _web_instrumented:
        return
    _web_instrumented = True
    from opentelemetry.instrumentation.django import DjangoInstrumentor

    if not telemetry_enabled():
        return
    configure_process_telemetry()
    instrumentor = DjangoInstrumentor()
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument(excluded_urls=excluded_urls())


def freeze_startup_heap() -> None:
    gc.collect()
    gc.freeze()
