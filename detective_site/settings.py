"""Django settings, built from the validated environment (see config.py and
docs/using/configuration.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from detective_site.config import BASE_DIR, CHANNELS_FILE_NAME, load_config, secure_data_dir

CONFIG = load_config()
DATABASES = CONFIG.databases()
secure_data_dir(
    CONFIG.data_dir,
    [CONFIG.data_dir / CHANNELS_FILE_NAME]
    + [
        Path(database["NAME"])
        for database in DATABASES.values()
        if database["ENGINE"].endswith("sqlite3") and database["NAME"] != ":memory:"
    ],
)

DEBUG = CONFIG.debug
SECRET_KEY = CONFIG.effective_secret_key()
ALLOWED_HOSTS = CONFIG.effective_allowed_hosts()
DATA_DIR = CONFIG.data_dir

INSTALLED_APPS = [
    "daphne",  # first: `runserver` serves ASGI (http + websockets)
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "django_tasks",
    "django_tasks_db",
    # The loaders are configured below, so use the config that does not rewrite TEMPLATES.
    "template_partials.apps.SimpleAppConfig",
    "releases",
    "assessments",
    "review",
    "evals",
    "webhooks",
    "sources",
    "traces",
    # For its commands: `up`, `local_model`.
    "detective_site",
    "bench",  # `manage.py bench`
]

MIDDLEWARE = [
    # Outermost: the release API's errors (404, 405, 500 ...) answer JSON, not pages.
    "detective_site.api_errors.ApiErrorsMiddleware",
    # First: what the database cannot store never reaches a view (see hostile_input.py).
    "detective_site.hostile_input.HostileInputMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # In production whitenoise serves the collected static files; in development the ASGI
    # application serves them from the apps' static directories (see asgi.py).
    *([] if DEBUG else ["whitenoise.middleware.WhiteNoiseMiddleware"]),
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "detective_site.urls"
ASGI_APPLICATION = "detective_site.asgi.application"

_template_loaders: list[Any] = [
    "django.template.loaders.filesystem.Loader",
    "django.template.loaders.app_directories.Loader",
]
if not DEBUG:
    _template_loaders = [("django.template.loaders.cached.Loader", _template_loaders)]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
            # template_partials' loader lets views render "page.html#partial-name".
            "loaders": [("template_partials.loader.Loader", _template_loaders)],
            "builtins": ["template_partials.templatetags.partials"],
        },
    }
]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

CHANNEL_LAYERS = CONFIG.channel_layers()

# Assessments (assessments/runner/): the key external callers of the release API may use, the
# API the agent's tools call (unset: this site, whose address `up` gives the worker), and how
# long a running assessment may go without a heartbeat before it is marked failed.
DETECTIVE_API_KEY = CONFIG.api_key.get_secret_value() if CONFIG.api_key else None
DETECTIVE_API_URL = CONFIG.api_url
DETECTIVE_RUN_STALE_SECONDS = CONFIG.run_stale_seconds
DETECTIVE_TRACE_RETENTION_DAYS = CONFIG.trace_retention_days
DETECTIVE_OTLP_MAX_IN_FLIGHT = CONFIG.otlp_max_in_flight
DETECTIVE_OTLP_HOLD_HOURS = CONFIG.otlp_hold_hours
# How long a run's database calls are retried while the database does not answer
# (assessments/runner/database.py); under the stale limit, so the sweep never takes a run
# that is only waiting for its database.
DETECTIVE_RUN_DATABASE_WAIT = CONFIG.run_database_wait
# The whole assessment's deadline (each model call has its own: agent/config.py).
DETECTIVE_RUN_DEADLINE = CONFIG.run_deadline
# Webhooks go outward only, except to these networks (webhooks/targets.py); one delivery
# attempt takes at most WEBHOOK_TIMEOUT_S in all, so it holds a shared worker no longer.
WEBHOOK_ALLOWED_NETWORKS = CONFIG.webhook_allowed_networks
WEBHOOK_TIMEOUT_S = CONFIG.webhook_timeout
# Review labels exported as eval scenarios; `run_evals` reads them beside evals/scenarios/.
DETECTIVE_REVIEW_SCENARIOS_DIR = CONFIG.effective_review_scenarios_dir()

TASKS = {
    "default": {
        "BACKEND": "django_tasks_db.DatabaseBackend",
        "QUEUES": ["default"],
    }
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
# One date format everywhere, the admin included, with the zone (detective_site/formats/).
FORMAT_MODULE_PATH = ["detective_site.formats"]
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}

if CONFIG.behind_https_proxy:
    # Production (DEBUG=false set): served over HTTPS behind a proxy that terminates TLS and
    # sets X-Forwarded-Proto (see docs/using/production.md). `up` with DEBUG unset serves plain
    # HTTP itself.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SECURE_HSTS_SECONDS = 60 * 60 * 24 * 365
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
    },
    "filters": {
        # One warning per database outage, not a traceback per 503 (detective_site/errors.py).
        "database_outage": {"()": "detective_site.errors.DatabaseOutageLogFilter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "filters": ["database_outage"],
        },
    },
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {
        "django": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "releases": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "evals": {"handlers": ["console"], "level": "INFO", "propagate": False},
    },
}
