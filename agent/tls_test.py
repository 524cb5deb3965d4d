import ssl

import httpx
import pytest
import respx

from agent.tls import async_client, shared_ssl_context


def test_one_context_verifying_certificates_is_shared() -> None:
    context = shared_ssl_context()
    assert context is shared_ssl_context()
    assert context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] > 0  # the CA bundle is loaded


@pytest.mark.asyncio
async def test_clients_take_their_options_and_the_shared_context() -> None:
    async with async_client(timeout=7.0) as client:
        assert client.timeout == httpx.Timeout(7.0)
        pool = client._transport._pool  # type: ignore[attr-defined]
        assert pool._ssl_context is shared_ssl_context()
        with respx.mock:
            respx.get("https://example.test/").respond(204)
            assert (await client.get("https://example.test/")).status_code == 204
