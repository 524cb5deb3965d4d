from __future__ import annotations

from django.urls import path

from releases import views

app_name = "releases"

# Included at the site's root: release pages live under /releases/. The run pages
# (assessments/urls.py) and the review desk (review/urls.py) share this namespace, `releases:`,
# so every address and name users and templates know stays as it was
# (detective_site/urls.py joins the three).
urlpatterns = [
    path("releases/", views.release_list, name="list"),
    path("releases/<version:version>/", views.release_detail, name="detail"),
    # Another service's releases: the default service's keep the short addresses above.
    path(
        "services/<slug:service>/releases/<version:version>/",
        views.release_detail,
        name="service_detail",
    ),
]
