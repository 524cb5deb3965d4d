from __future__ import annotations

from django.test import override_settings

from releases.runner import in_process_url


def test_the_in_process_url_is_one_the_site_answers() -> None:
    with override_settings(DEBUG=True, ALLOWED_HOSTS=[], SECURE_SSL_REDIRECT=False):
        assert in_process_url() == "http://127.0.0.1"
    with override_settings(DEBUG=False, ALLOWED_HOSTS=["localhost"], SECURE_SSL_REDIRECT=False):
        assert in_process_url() == "http://localhost"
    # Production: a real host name, and https (http would be redirected).
    production = {"DEBUG": False, "SECURE_SSL_REDIRECT": True}
    with override_settings(ALLOWED_HOSTS=[".detective.example.com"], **production):
        assert in_process_url() == "https://detective.example.com"
    with override_settings(ALLOWED_HOSTS=["*"], **production):
        assert in_process_url() == "https://127.0.0.1"
