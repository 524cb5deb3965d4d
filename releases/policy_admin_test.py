"""The risk policy in the admin: thresholds edited as fields, each save a new version."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from assessments import filing
from releases import services, verdicts
from releases.models import Release, RiskPolicy
from risk.policy import PolicySettings

pytestmark = pytest.mark.django_db


def form_data(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"note": "Stricter error rate after the March incident"}
    for name, value in PolicySettings().model_dump(mode="json").items():
        if isinstance(value, bool):
            if value:
                data[name] = "on"
        elif name in ("metric_settings", "route_metric_settings"):
            data[name] = json.dumps(value)
        elif isinstance(value, dict):
            data[name] = "\n".join(f"{area}: {', '.join(words)}" for area, words in value.items())
        elif isinstance(value, list):
            data[name] = "\n".join(value)
        elif value is not None and name.startswith(
            ("error_rate_", "p95_rise_", "skipped_share_", "metric_confidence")
        ):
            data[name] = value * 100  # edited as percentages
        elif value is not None:
            data[name] = value
    data.update(overrides)
    return data


def test_version_1_is_the_default_policy() -> None:
    policy = verdicts.current_policy()
    assert policy.version == 1
    assert verdicts.settings_of(policy) == PolicySettings()


def test_editing_a_policy_in_the_admin_saves_a_new_version(admin_client: Client) -> None:
    v1 = verdicts.current_policy()
    page = admin_client.get(f"/admin/releases/riskpolicy/{v1.pk}/change/")
    assert page.status_code == 200
    assert b'name="error_rate_high_above"' in page.content
    response = admin_client.post(
        f"/admin/releases/riskpolicy/{v1.pk}/change/",
        form_data(error_rate_high_above="3", error_rate_medium_at_or_above="1"),
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    assert list(RiskPolicy.objects.values_list("version", flat=True)) == [2, 1]
    v1.refresh_from_db()
    assert v1.thresholds["error_rate_high_above"] == 0.05  # the old version stands
    v2 = verdicts.current_policy()
    assert (v2.version, v2.thresholds["error_rate_high_above"]) == (2, 0.03)
    # The nested and listed settings come back as they went in.
    saved, defaults = verdicts.settings_of(v2), PolicySettings()
    assert saved.metric_settings == defaults.metric_settings
    assert saved.route_metric_settings == defaults.route_metric_settings
    assert saved.schema_change_patterns == defaults.schema_change_patterns
    assert (saved.critical_paths, saved.metric_confidence) == (defaults.critical_paths, 0.95)
    # Shown as the site shows them: percentages, and the areas as lines of words.
    again = admin_client.get(f"/admin/releases/riskpolicy/{v2.pk}/change/").content.decode()
    assert 'name="error_rate_high_above" value="3.0"' in again
    areas = re.search(r'name="critical_areas"[^>]*>([^<]*)<', again)
    assert areas and "payments: payment" in areas.group(1) and "{&quot;" not in areas.group(1)
    assert v2.note == "Stricter error rate after the March incident"
    assert v2.created_by is not None and v2.created_by.username == "admin"


def test_an_inconsistent_threshold_is_refused_with_the_field(admin_client: Client) -> None:
    v1 = verdicts.current_policy()
    response = admin_client.post(
        f"/admin/releases/riskpolicy/{v1.pk}/change/", form_data(error_rate_high_above="700")
    )
    assert response.status_code == 200
    assert b"At most 100 %." in response.content
    assert RiskPolicy.objects.count() == 1
    areas = admin_client.post(
        f"/admin/releases/riskpolicy/{v1.pk}/change/",
        form_data(critical_areas="payments: payment, refund\nauth"),
    )
    assert areas.status_code == 200
    assert b"Line 2 (&quot;auth&quot;) is not &quot;area: word, word&quot;." in areas.content
    assert RiskPolicy.objects.count() == 1


def test_a_report_records_the_version_it_was_judged_under(
    make_release: Callable[..., Release],
) -> None:
    release = make_release("v1.0.0", deployment_metrics={"error_rate": 0.04})
    first = filing.file_risk_report(release=release, severity="medium", findings=["x"])
    services.new_policy_version(PolicySettings(error_rate_high_above=0.03), note="stricter")
    second = filing.file_risk_report(release=release, severity="high", findings=["x"])
    assert (first.policy.version, first.policy_severity) == (1, "medium")
    assert (second.policy.version, second.policy_severity) == (2, "high")


def test_policies_cannot_be_deleted(admin_client: Client) -> None:
    v1 = verdicts.current_policy()
    assert admin_client.get(f"/admin/releases/riskpolicy/{v1.pk}/delete/").status_code == 403


def test_thresholds_out_of_order_are_refused_and_say_why(admin_client: Client) -> None:
    v1 = verdicts.current_policy()
    response = admin_client.post(
        f"/admin/releases/riskpolicy/{v1.pk}/change/",
        form_data(error_rate_medium_at_or_above="0.9", error_rate_high_above="0.01"),
    )
    assert response.status_code == 200
    assert b"The error rate thresholds are out of order" in response.content
    assert b"Medium must start below high" in response.content
    assert RiskPolicy.objects.count() == 1
    with pytest.raises(ValueError, match="out of order"):
        services.new_policy_version(
            PolicySettings(p95_ms_medium_above=2000, p95_ms_high_above=1500), note="inverted"
        )
    assert RiskPolicy.objects.count() == 1


def test_the_list_marks_the_version_in_force_and_a_version_shows_what_changed(
    admin_client: Client,
) -> None:
    v1 = verdicts.current_policy()
    v2 = services.new_policy_version(PolicySettings(error_rate_high_above=0.03), note="stricter")
    listing = admin_client.get("/admin/releases/riskpolicy/").content.decode()
    assert "In force" in listing
    # One row is in force (the icon Django draws for True), the older one is not.
    assert listing.count("icon-yes.svg") == 1 and listing.count("icon-no.svg") == 1
    page = admin_client.get(f"/admin/releases/riskpolicy/{v2.pk}/change/").content.decode()
    assert "Against v1:" in page
    assert "<code>error_rate_high_above</code>: 0.05 → 0.03" in page
    first = admin_client.get(f"/admin/releases/riskpolicy/{v1.pk}/change/").content.decode()
    assert "The first version: nothing before it." in first
