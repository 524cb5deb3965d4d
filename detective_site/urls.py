from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import URLPattern, include, path

from assessments import api_urls as report_api_urls
from assessments import urls as run_urls
from assessments.assess_api import router as assess_router
from releases import urls as release_urls
from releases.views import home
from review import urls as review_urls
from sources import api_urls as release_api_urls
from sources import release_urls as release_page_urls
from sources.api import api as ingestion_api
from sources.bundle import post_bundle

# The API's root is a page of the site: for a signed-in user, like every other page. The
# OpenAPI document and its browsable page hold no data and are for tools (a CI job, a client
# generator) that have no browser session: open to all.
SIGNED_IN_API_PAGES = frozenset({"api-root"})

# A CI job asks for an assessment through the ingestion API (same token, same document), but
# starting a run is assessments' and sources stands below it: the site mounts the one on the
# other.
ingestion_api.add_router("", assess_router)


def _api_urls() -> list[URLPattern]:
    """The ingestion API's routes. Its endpoints check their own token, so the site's login
    (LoginRequiredMiddleware) must not send them to the login page: django-ninja cannot mark
    its views itself (vitalik/django-ninja#1461), so they are marked here."""
    patterns, _app_name, _namespace = ingestion_api.urls
    for pattern in patterns:
        if pattern.name not in SIGNED_IN_API_PAGES:
            pattern.callback.login_required = False  # type: ignore[union-attr]
    return patterns


@login_not_required
def favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    # Resolved per request: with DEBUG off the static files' manifest exists only once `up`
    # has collected them, after this module is imported.
    return HttpResponsePermanentRedirect(static("img/favicon.svg"))


urlpatterns = [
    path("", home, name="home"),
    # One namespace, `releases:`, for the pages of four apps: the addresses and names stay.
    path(
        "",
        include(
            (
                release_urls.urlpatterns
                + release_page_urls.urlpatterns
                + run_urls.urlpatterns
                + review_urls.urlpatterns,
                release_urls.app_name,
            )
        ),
    ),
    # Before the ingestion API: one ingestion stored whole or not at all (sources/bundle.py).
    path("api/releases/bundle", post_bundle, name="ingest_bundle"),
    # One namespace, `api:`, for the release API: its reads are sources', filing a run's report
    # is assessments'.
    path(
        "api/",
        include(
            (
                release_api_urls.urlpatterns + report_api_urls.urlpatterns,
                release_api_urls.app_name,
            )
        ),
    ),
    path("api/", include("sources.drilldown.urls")),
    path("api/", include("traces.api_urls")),
    path("api/", include((_api_urls(), "ingest"))),
    path("sources/", include("sources.urls")),
    # OTLP/HTTP's own paths under the base an exporter is given (`…/otlp` + `/v1/traces`).
    path("otlp/", include("traces.urls")),
    path("traces/", include("traces.page_urls")),
    path("evals/", include("evals.urls")),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    # Browsers ask for /favicon.ico whatever the page says (the admin's pages say nothing).
    path("favicon.ico", favicon, name="favicon"),
]

admin.site.site_header = "Detective administration"
admin.site.site_title = "Detective admin"
admin.site.index_title = "Releases, runs and evaluations"
# The app list beside every page took a third of 1280 px from the change lists, which then cut
# their last columns (issue 37); the breadcrumbs and the index lead to every model.
admin.site.enable_nav_sidebar = False

# A database that does not answer is a 503 with a short page, any other error the 500 page.
handler500 = "detective_site.errors.handler500"
