"""The release managers' pages: add a release, correct one, upload its reports. Thin: the form
reads, the services validate and store."""

from __future__ import annotations

from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from releases.models import Release
from sources.forms import ReleaseForm
from sources.services import IngestError, Origin, save_by_hand

INGEST = "sources.ingest_release"


def _save(request: HttpRequest, form: ReleaseForm, release: Release | None) -> HttpResponse | None:
    if not form.is_valid():
        return None
    upload = form.cleaned_data["metrics_file"]
    try:
        saved = save_by_hand(
            form.release_fields(),
            form.summary(release),
            Origin("form", user=request.user),
            junit_files=[(item.name, item) for item in form.cleaned_data["junit"]],
            metrics_file=(upload.name, upload.read()) if upload else None,
            metrics_window=form.cleaned_data["metrics_window"],
        )
    except IngestError as exc:
        form.add_error(None, exc.message)
        return None
    return redirect(saved.get_absolute_url())


@permission_required(INGEST, raise_exception=True)
@require_http_methods(["GET", "POST"])
def release_new(request: HttpRequest) -> HttpResponse:
    form = ReleaseForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and (done := _save(request, form, None)):
        return done
    return render(request, "sources/release_form.html", {"form": form, "release": None})


@permission_required(INGEST, raise_exception=True)
@require_http_methods(["GET", "POST"])
def release_edit(request: HttpRequest, pk: int) -> HttpResponse:
    release = get_object_or_404(Release.objects.select_related("service"), pk=pk)
    if request.method == "POST":
        form = ReleaseForm(
            request.POST, request.FILES, initial=ReleaseForm.for_release(release).initial
        )
    else:
        form = ReleaseForm.for_release(release)
    # A release is its service and version: correcting it changes everything else.
    for name in ("service", "version"):
        form.fields[name].disabled = True
    if request.method == "POST" and (done := _save(request, form, release)):
        return done
    return render(request, "sources/release_form.html", {"form": form, "release": release})
