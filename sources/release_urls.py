"""The release page's routes, in the `releases:` namespace beside the list (releases/urls.py):
detective_site/urls.py joins them, so the addresses and names stay the release pages'."""

from __future__ import annotations

from django.urls import path

from sources import release_page

urlpatterns = [
    path("releases/<version:version>/", release_page.release_detail, name="detail"),
    # Another service's releases: the default service's keep the short address above.
    path(
        "services/<slug:service>/releases/<version:version>/",
        release_page.release_detail,
        name="service_detail",
    ),
]
