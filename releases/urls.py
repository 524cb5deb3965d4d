from __future__ import annotations

from django.urls import path, register_converter

from releases import review_views, run_views, views
from releases.converters import VersionConverter

register_converter(VersionConverter, "version")

app_name = "releases"

# Included at the site's root: release pages live under /releases/, a run under /runs/.
urlpatterns = [
    path("releases/", views.release_list, name="list"),
    path("releases/<version:version>/", views.release_detail, name="detail"),
    path("releases/<version:version>/reassess", run_views.reassess, name="reassess"),
    # Another service's releases: the default service's keep the short addresses above.
    path(
        "services/<slug:service>/releases/<version:version>/",
        views.release_detail,
        name="service_detail",
    ),
    path(
        "services/<slug:service>/releases/<version:version>/reassess",
        run_views.reassess,
        name="service_reassess",
    ),
    path("runs/<uuid:pk>/", run_views.run_detail, name="run"),
    path("runs/<uuid:pk>/cancel", run_views.cancel, name="run_cancel"),
    path("review/", review_views.review_queue, name="review"),
    path("review/reports/<int:pk>/decide", review_views.decide, name="review_decide"),
    path("review/decisions/<int:pk>/export", review_views.export, name="review_export"),
    path(
        "review/decisions/<int:pk>/scenario.toml",
        review_views.scenario_file,
        name="review_scenario",
    ),
]
