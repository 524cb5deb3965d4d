"""A real HTTP receiver of webhooks for the tests: a server on loopback, in a thread, that
records what it gets and answers as the test scripts it (a status, after a delay)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    url: str = ""
    received: list[Received] = field(default_factory=list)
    # (status, delay in seconds) for each request in turn; the last one repeats.
    script: list[tuple[int, float]] = field(default_factory=lambda: [(200, 0.0)])

    def next_answer(self) -> tuple[int, float]:
        return self.script.pop(0) if len(self.script) > 1 else self.script[0]


@contextmanager
def running_receiver() -> Iterator[Receiver]:
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            state.received.append(Received(self.path, dict(self.headers.items()), body))
            status, delay = state.next_answer()
            time.sleep(delay)
            answer = b'{"ok": true}' if status < 300 else b"receiver says no"
            try:
                self.send_response(status)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (the timeout test)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/detective"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
