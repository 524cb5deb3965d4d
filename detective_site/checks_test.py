from __future__ import annotations

from pytest_django import Settings

from detective_site.checks import WILDCARD_HOSTS, wildcard_allowed_hosts


def test_a_wildcard_in_allowed_hosts_is_a_deploy_warning(settings: Settings) -> None:
    settings.ALLOWED_HOSTS = ["detective.example.com", "*"]
    (warning,) = wildcard_allowed_hosts()
    assert warning.id == WILDCARD_HOSTS and "'*'" in warning.msg


def test_named_hosts_pass(settings: Settings) -> None:
    settings.ALLOWED_HOSTS = ["detective.example.com", ".example.org"]
    assert wildcard_allowed_hosts() == []
