from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from releases.views import home

urlpatterns = [
    path("", home, name="home"),
    path("", include("releases.urls")),
    path("api/", include("releases.api_urls")),
    path("evals/", include("evals.urls")),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
]

admin.site.site_header = "Detective administration"
admin.site.site_title = "Detective admin"
admin.site.index_title = "Releases, runs and evaluations"
