from __future__ import annotations

import asyncio

import pytest

from bench.ws import (
    OP_CLOSE,
    OP_PING,
    OP_TEXT,
    WebSocket,
    accept_key,
    encode_frame,
    read_frame,
)


def test_the_accept_key_is_the_rfc_example() -> None:
    assert accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


def unmask(frame: bytes) -> bytes:
    """A client frame as a server would read it (masked -> plain, mask bit cleared)."""
    length = frame[1] & 0x7F
    offset = 2 + {126: 2, 127: 8}.get(length, 0)
    mask, payload = frame[offset : offset + 4], frame[offset + 4 :]
    plain = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([frame[0], frame[1] & 0x7F]) + frame[2:offset] + plain


@pytest.mark.parametrize("size", [0, 5, 125, 126, 70_000])
async def test_frames_round_trip(size: int) -> None:
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    frame = encode_frame(OP_TEXT, payload, mask=b"\x01\x02\x03\x04")
    assert frame[1] & 0x80  # a client masks
    reader = asyncio.StreamReader()
    reader.feed_data(unmask(frame))
    assert await read_frame(reader) == (True, OP_TEXT, payload)


async def test_listen_records_messages_and_answers_pings_and_close() -> None:
    received: list[bytes] = []

    async def server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        key = "dGhlIHNhbXBsZSBub25jZQ=="
        writer.write(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Accept: "
            + accept_key(key).encode()
            + b"\r\n\r\n"
        )
        # fragments: "hel" + "lo", a ping, then a close with code 1000
        writer.write(bytes([0x01, 3]) + b"hel" + bytes([0x80, 2]) + b"lo")
        writer.write(bytes([0x80 | OP_PING, 1]) + b"p")
        writer.write(bytes([0x80 | OP_CLOSE, 2]) + (1000).to_bytes(2, "big"))
        await writer.drain()
        received.append(await reader.read(100))
        writer.close()

    async with await asyncio.start_server(server, "127.0.0.1", 0) as listening:
        port = listening.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\n\r\n")
        await reader.readuntil(b"\r\n\r\n")
        socket = WebSocket(reader, writer)
        await asyncio.wait_for(socket.listen(), 5)
    assert [m.text for m in socket.messages] == ["hello"]
    assert socket.close_code == 1000


async def test_only_loopback() -> None:
    with pytest.raises(ValueError, match="loopback"):
        await WebSocket.connect("ws://example.com/ws/", origin="http://example.com")
