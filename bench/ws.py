"""A minimal websocket client (RFC 6455, text frames), enough to watch a run page's socket.

The benchmarks open a hundred of these at once from one asyncio loop; each records when
every message arrived (`time.monotonic_ns()`, comparable with the model server's
timestamps). No TLS, no extensions, no fragmentation on send; received fragments are
joined.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import struct
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_MESSAGE_BYTES = 8 * 1024 * 1024

OP_CONTINUATION, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


class HandshakeError(Exception):
    pass


def accept_key(key: str) -> str:
    digest = hashlib.sha1((key + GUID).encode()).digest()  # RFC 6455 fixes SHA-1 here
    return base64.b64encode(digest).decode()


def encode_frame(opcode: int, payload: bytes, *, mask: bytes | None = None) -> bytes:
    """One final frame, masked as a client must (`mask`: 4 bytes, random by default)."""
    mask = mask if mask is not None else os.urandom(4)
    head = bytes([0x80 | opcode])
    length = len(payload)
    if length < 126:
        head += bytes([0x80 | length])
    elif length < 1 << 16:
        head += bytes([0x80 | 126]) + struct.pack("!H", length)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", length)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return head + mask + masked


async def read_frame(reader: asyncio.StreamReader) -> tuple[bool, int, bytes]:
    """(final, opcode, payload) of the next frame from the server (unmasked)."""
    first, second = await reader.readexactly(2)
    length = second & 0x7F
    if length == 126:
        (length,) = struct.unpack("!H", await reader.readexactly(2))
    elif length == 127:
        (length,) = struct.unpack("!Q", await reader.readexactly(8))
    if length > MAX_MESSAGE_BYTES:
        raise ValueError(f"frame of {length} bytes")
    mask = await reader.readexactly(4) if second & 0x80 else None
    payload = await reader.readexactly(length)
    if mask is not None:
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bool(first & 0x80), first & 0x0F, payload


@dataclass
class Received:
    at_ns: int
    text: str


@dataclass
class WebSocket:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    messages: list[Received] = field(default_factory=list)
    close_code: int | None = None

    @classmethod
    async def connect(
        cls, url: str, *, origin: str, cookie: str = "", timeout_s: float = 10.0
    ) -> WebSocket:
        parts = urlsplit(url)
        if parts.scheme != "ws" or parts.hostname not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("only ws:// on loopback")
        port = parts.port or 80
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection(parts.hostname, port)
            key = base64.b64encode(os.urandom(16)).decode()
            lines = [
                f"GET {parts.path or '/'} HTTP/1.1",
                f"Host: {parts.hostname}:{port}",
                "Upgrade: websocket",
                "Connection: Upgrade",
                f"Sec-WebSocket-Key: {key}",
                "Sec-WebSocket-Version: 13",
                f"Origin: {origin}",
            ]
            if cookie:
                lines.append(f"Cookie: {cookie}")
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
            await writer.drain()
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        status = head.split("\r\n", 1)[0]
        if " 101 " not in f"{status} ":
            writer.close()
            raise HandshakeError(f"the server answered {status!r}")
        if accept_key(key) not in head:
            writer.close()
            raise HandshakeError("wrong Sec-WebSocket-Accept")
        return cls(reader, writer)

    async def send_text(self, text: str) -> None:
        self.writer.write(encode_frame(OP_TEXT, text.encode()))
        await self.writer.drain()

    async def listen(self) -> None:
        """Record messages until the server closes the socket (or the connection drops)."""
        parts: list[bytes] = []
        try:
            while True:
                final, opcode, payload = await read_frame(self.reader)
                if opcode == OP_CLOSE:
                    self.close_code = struct.unpack("!H", payload[:2])[0] if payload else 1005
                    self.writer.write(encode_frame(OP_CLOSE, payload[:2]))
                    return
                if opcode == OP_PING:
                    self.writer.write(encode_frame(OP_PONG, payload))
                    continue
                if opcode in (OP_TEXT, OP_BINARY, OP_CONTINUATION):
                    parts.append(payload)
                    if final:
                        text = b"".join(parts).decode("utf-8", "replace")
                        self.messages.append(Received(time.monotonic_ns(), text))
                        parts = []
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            self.writer.close()

    def close(self) -> None:
        self.writer.close()
