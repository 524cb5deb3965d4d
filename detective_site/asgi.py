"""The ASGI application: Django for HTTP, Channels consumers for websockets."""

from __future__ import annotations

import os

import django
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "detective_site.settings")
django.setup(set_prefix=False)

from assessments.runner.process import freeze_startup_heap, instrument_web  # noqa: E402

# Before the application is built: the instrumentor adds its middleware to the settings.
instrument_web()
django_http_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from detective_site.routing import websocket_urlpatterns  # noqa: E402
from detective_site.telemetry import trace_websockets  # noqa: E402
from risk.judge import warm_up_in_background  # noqa: E402

# A run's summary judges its release's metrics: numpy (the rank test's, 0.2-0.5 s; scipy is
# never on that path) is imported now rather than in the first such request.
warm_up_in_background()

# Development: the ASGI server serves static files straight from the apps (like runserver).
# Production: whitenoise serves the collected files (see MIDDLEWARE).
http_app = ASGIStaticFilesHandler(django_http_app) if settings.DEBUG else django_http_app

application = ProtocolTypeRouter(
    {
        "http": http_app,
        "websocket": trace_websockets(
            AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))
        ),
    }
)

# Last, once everything the server needs is loaded (see assessments/runner/process.py).
freeze_startup_heap()
