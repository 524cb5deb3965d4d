"""A version saved before the format existed (with a "/") no longer breaks the pages."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from releases.converters import VersionConverter
from releases.models import Release


def test_a_plain_version_is_its_own_url_segment() -> None:
    converter = VersionConverter()
    assert converter.to_url("v2.1.0+build_7") == "v2.1.0+build_7"
    assert converter.to_python("v2.1.0+build_7") == "v2.1.0+build_7"
    assert reverse("releases:detail", args=["v2.1.0"]) == "/releases/v2.1.0/"


def test_a_slash_or_percent_goes_and_comes_back() -> None:
    converter = VersionConverter()
    for version in ["v1/2", "50%/off", "a%2Fb"]:
        assert converter.to_python(converter.to_url(version)) == version


@pytest.mark.django_db
def test_the_release_list_and_page_work_with_an_old_bad_version(admin_client: Client) -> None:
    # A row from before the rule (bulk_create skips save(), which validates).
    Release.objects.bulk_create([Release(version="v1/2", title="From before the format")])
    Release.objects.create(version="v2.0.0")
    listing = admin_client.get("/releases/")
    assert listing.status_code == 200
    url = reverse("releases:detail", args=["v1/2"])
    assert f'href="{url}"' in listing.content.decode()
    page = admin_client.get(url)
    assert page.status_code == 200
    assert "From before the format" in page.content.decode()
    assert admin_client.get("/").status_code == 200
