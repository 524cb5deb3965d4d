"""`manage.py local_model`'s options: what an operator gets without saying."""

from __future__ import annotations

from detective_site.management.commands.local_model import Command


def test_serve_runs_one_thread_unless_told() -> None:
    # Two threads on two shared cores fell to 0.9-3.1 tokens/s under load where one kept 10.8
    # (issue 40; decision 2026-11-29-one-server-thread).
    parser = Command().create_parser("manage.py", "local_model")
    assert parser.parse_args(["serve"]).threads == 1
    assert parser.parse_args(["serve", "--threads", "2"]).threads == 2
