from __future__ import annotations

from django.urls import path

from releases import views

app_name = "releases"

# Included at the site's root: release pages live under /releases/. A release's own page
# (sources/release_urls.py: it shows the sources' detail), the run pages (assessments/urls.py)
# and the review desk (review/urls.py) share this namespace, `releases:`, so every address and
# name users and templates know stays as it was (detective_site/urls.py joins the four).
urlpatterns = [
    path("releases/", views.release_list, name="list"),
]
