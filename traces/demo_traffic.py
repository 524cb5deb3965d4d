"""The demo's production traffic through the real path: each demo release of the demo shop
(`demo_shop`) deployed into a folder of its own from the code its commit wrote, run as its own
process (`python -m demo_shop.serve`) with the OpenTelemetry SDK's variables pointing at the
site's `/otlp` and an ingestion token of the shop, sent a burst of requests, its exporter
flushed. What the site keeps of it (the Errors & traces tab, the verdict's new error group)
came in as a user's spans do.

An ingestion token is made for the run and revoked after it (its secret is never shown).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

import demo_shop
from releases.models import Release, Service
from sources import services as sources_services

__all__ = ["DemoTrafficError", "Served", "drive"]

# Where `python -m demo_shop.serve` finds the package.
PROJECT = Path(demo_shop.__file__).resolve().parent.parent
# A version's process: Django's and the SDK's imports, the burst, the flush.
RUN_TIMEOUT = 180


class DemoTrafficError(RuntimeError):
    pass


@dataclass(frozen=True)
class Served:
    version: str
    requests: int
    errors: int
    spans: int


def _releases() -> tuple[Service, list[Release]]:
    service = Service.objects.filter(name=demo_shop.SERVICE).first()
    releases = [
        Release.objects.filter(service=service, version=version).first()
        for version in demo_shop.VERSIONS
    ]
    if service is None or None in releases:
        raise DemoTrafficError(
            f"The demo's {demo_shop.SERVICE} releases are missing: run `manage.py seed_demo` first."
        )
    return service, [r for r in releases if r is not None]


def _check_site(url: str) -> None:
    try:
        httpx.post(f"{url}/otlp/v1/traces", content=b"", timeout=10)
    except httpx.HTTPError as exc:
        raise DemoTrafficError(f"No Detective answers at {url} ({exc}); start it first.") from None


def environment(url: str, secret: str, service: Service, version: str) -> dict[str, str]:
    """The SDK's variables as docs/using/errors-and-traces.md gives them; the site's own
    OTEL_* (its telemetry's) are not the shop's."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return {
        **inherited,
        "OTEL_SERVICE_NAME": service.slug,
        "OTEL_RESOURCE_ATTRIBUTES": (
            f"service.version={version},deployment.environment.name=production"
        ),
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"{url}/otlp",
        "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer%20{secret}",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
        "PYTHONUNBUFFERED": "1",
    }


def _serve(code: Path, requests: int, env: dict[str, str]) -> dict[str, Any]:
    argv = [sys.executable, "-m", "demo_shop.serve", "--code", str(code)]
    try:
        done = subprocess.run(
            [*argv, "--requests", str(requests)],
            cwd=PROJECT,
            env=env,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise DemoTrafficError(f"The demo shop did not finish in {RUN_TIMEOUT} s.") from None
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        # The exporter's own log says why (a refusal's reason, a connection error).
        said = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise DemoTrafficError(f"The demo shop's spans were not all taken: {said}")
    summary: dict[str, Any] = json.loads(lines[-1])
    return summary


def drive(url: str, requests: int, log: Callable[[str], None] = lambda _: None) -> list[Served]:
    """Each demo version of the shop run and sent `requests` requests of each route, oldest
    first; what each served and exported. Raises DemoTrafficError."""
    url = url.rstrip("/")
    service, releases = _releases()
    _check_site(url)
    token, secret = sources_services.create_token("demo traffic (manage.py demo_traffic)", service)
    served = []
    try:
        with tempfile.TemporaryDirectory(prefix="detective-shop-") as folder:
            for release in releases:
                code = demo_shop.deploy(release.version, Path(folder) / release.version)
                log(f"Running {service.name} {release.version} ...")
                summary = _serve(code, requests, environment(url, secret, service, release.version))
                errors = sum(n for code, n in summary["statuses"].items() if int(code) >= 500)
                served.append(
                    Served(release.version, summary["requests"], errors, summary["spans_exported"])
                )
    finally:
        sources_services.revoke_token(token)
    return served
