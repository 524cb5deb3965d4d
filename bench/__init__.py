"""Benchmarks: `uv run manage.py bench` (see suite.py for the list, harness.py for how)."""
