from __future__ import annotations

from bench.live import latencies


def test_each_word_counts_once_from_its_first_arrival() -> None:
    messages = [
        (5_000_000, "<span>I'll [t=1000000] </span>"),
        (9_000_000, "<span>fetch [t=2000000] </span>"),
        # The step's whole text comes again at the end: not new words.
        (20_000_000, "I'll [t=1000000] fetch [t=2000000] "),
    ]
    assert latencies(messages) == [4.0, 7.0]
    assert latencies([(1, "no words here")]) == []
