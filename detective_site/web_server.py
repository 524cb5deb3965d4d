"""The web server `up` runs: daphne, answering requests whose headers are too large.

Twisted, under daphne, drops the connection without a word when one header line passes
16 KB (a 60 KB `Authorization` header), and answers a bare 400 with no body when all headers
together do. Both now get `431 Request Header Fields Too Large` with a short text, and the
connection is half-closed after it, so the client reads the answer even while it is still
sending; what it sends after that is discarded. Run as `python -m detective_site.web_server`
with daphne's own arguments.
"""

from __future__ import annotations

import contextlib
from typing import Any

# daphne.server installs the asyncio reactor on import; it must come before anything that
# could install Twisted's default one.
import daphne.server  # noqa: F401  isort:skip
from twisted.web import http  # isort:skip

HEADERS_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"Content-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: %d\r\n"
    b"Connection: close\r\n"
    b"\r\n%s"
)
MESSAGE = b"Request header fields too large: send smaller headers (at most 16 KB in all).\n"
# How long a refused client may go on sending before the connection is closed anyway.
DISCARD_SECONDS = 5.0
REFUSED = "_detective_refused"


def refuse_headers(channel: Any) -> None:
    """Answer 431 on this connection and stop reading requests from it."""
    if getattr(channel, REFUSED, False):
        return
    setattr(channel, REFUSED, True)
    channel.transport.write(HEADERS_TOO_LARGE % (len(MESSAGE), MESSAGE))
    with contextlib.suppress(AttributeError, NotImplementedError):
        channel.transport.loseWriteConnection()
    from twisted.internet import reactor

    reactor.callLater(DISCARD_SECONDS, channel.transport.loseConnection)  # type: ignore[attr-defined]


def install() -> None:
    """Patch twisted's HTTPChannel (daphne's HTTP protocol) once."""
    channel_class: Any = http.HTTPChannel
    if getattr(channel_class, "_detective_patched", False):
        return
    channel_class._detective_patched = True
    original_data_received = channel_class.dataReceived
    original_line_received = channel_class.lineReceived

    def data_received(self: Any, data: bytes) -> None:
        if getattr(self, REFUSED, False):
            return None
        return original_data_received(self, data)

    def line_received(self: Any, line: bytes) -> Any:
        if getattr(self, REFUSED, False):
            return None
        if self._receivedHeaderSize + len(line) > self.totalHeadersSize:
            refuse_headers(self)
            return None
        return original_line_received(self, line)

    def line_length_exceeded(self: Any, line: bytes) -> None:
        refuse_headers(self)

    channel_class.dataReceived = data_received
    channel_class.lineReceived = line_received
    channel_class.lineLengthExceeded = line_length_exceeded


def main() -> None:
    install()
    from daphne.cli import CommandLineInterface

    CommandLineInterface.entrypoint()


if __name__ == "__main__":
    main()
