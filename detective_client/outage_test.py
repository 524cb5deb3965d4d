"""Issue 37, item 3: both wait loops ride out a Detective that goes away (a web server
restarted under `up`) and comes back: connection refused and 5xx answers are asked again with
a back-off until the wait's own deadline, one line per outage, and the job ends with the verdict
or the decision."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from typing import Any

from detective_client.cli import main
from detective_client.cli_test import verdict_json
from detective_client.conftest import TOKEN, Double, _handler

OUTAGE_LINE = "Detective did not answer ("


class Site:
    """The double, served on one port that can be closed and opened again."""

    def __init__(self) -> None:
        self.state = Double()
        self.state.releases[("shop", "1.4.0")] = {"service": "shop", "version": "1.4.0"}
        self.server: ThreadingHTTPServer | None = None
        self.port = self._serve(0)
        self.state.url = f"http://127.0.0.1:{self.port}"

    def _serve(self, port: int) -> int:
        self.server = ThreadingHTTPServer(("127.0.0.1", port), _handler(self.state))
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()
        return int(self.server.server_address[1])

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def start(self) -> None:
        self._serve(self.port)


def in_background(argv: list[str], url: str) -> tuple[threading.Thread, dict[str, Any]]:
    outcome: dict[str, Any] = {}

    def run() -> None:
        out, err = io.StringIO(), io.StringIO()
        environment = {"DETECTIVE_TOKEN": TOKEN, "DETECTIVE_URL": url}
        outcome["code"] = main(argv, environment=environment, out=out, err=err)
        outcome["out"], outcome["err"] = out.getvalue(), err.getvalue()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def until(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the condition was never met"
        time.sleep(0.02)


def test_a_wait_for_a_decision_survives_two_restarts_and_gets_the_decision() -> None:
    site = Site()
    decided = verdict_json("decided", "high", decision={"kind": "accept", "by": "rm"})
    # Restarting: first nothing listens, then the site answers 503 twice while it starts.
    site.state.verdicts = [
        (503, {"error": "starting"}),
        (503, {"error": "starting"}),
        (200, verdict_json("needs_person", "high")),
        (200, verdict_json("needs_person", "high")),
        (200, verdict_json("needs_person", "high")),
        (200, decided),
    ]
    site.stop()
    thread, outcome = in_background(
        ["verdict", "1.4.0", "--service", "shop", "--wait", "60", "--interval", "0.05",
         "--wait-for-decision", "60"],
        site.state.url,
    )  # fmt: skip
    time.sleep(1.5)  # the job asks into the outage: refused connections
    site.start()
    # The person's page is reached; then the site restarts again while the job waits.
    until(lambda: any(r.path.endswith("/waiting") for r in site.state.received))
    site.stop()
    time.sleep(1.5)
    site.start()
    thread.join(60)
    assert not thread.is_alive()
    assert outcome["code"] == 1, outcome  # the decision's high, at the bar
    assert "severity high, decided" in outcome["out"]
    assert outcome["err"].count(OUTAGE_LINE) == 2, outcome["err"]  # one line per outage
    site.stop()


def test_an_outage_past_the_deadline_is_still_no_verdict() -> None:
    site = Site()
    site.state.verdicts = [(200, verdict_json("running", None))]
    site.stop()
    started = time.monotonic()
    thread, outcome = in_background(
        ["verdict", "1.4.0", "--service", "shop", "--wait", "1.5", "--interval", "0.05"],
        site.state.url,
    )
    thread.join(30)
    assert outcome["code"] == 3
    assert outcome["err"].count(OUTAGE_LINE) == 1
    assert "Detective did not answer at" in outcome["err"]  # the summary's what to do
    assert time.monotonic() - started < 10  # it gave up at its deadline, not later


def test_a_4xx_is_not_an_outage() -> None:
    site = Site()
    site.state.verdicts = [(200, verdict_json("running", None))]
    site.state.refuse[("GET", "/verdict")] = (403, {"error": "another service's token"})
    thread, outcome = in_background(
        ["verdict", "1.4.0", "--service", "shop", "--wait", "30"], site.state.url
    )
    thread.join(30)
    assert outcome["code"] == 3 and OUTAGE_LINE not in outcome["err"]
    assert len(site.state.received) == 1
    site.stop()
