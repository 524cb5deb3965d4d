from __future__ import annotations

import threading

from traces.shedding import InFlight


def test_past_the_bound_a_request_gets_no_slot_until_one_is_given_back() -> None:
    gate = InFlight()
    with gate.slot(2) as first, gate.slot(2) as second, gate.slot(2) as third:
        assert (first, second, third) == (True, True, False)
        assert gate.count == 2
    assert gate.count == 0
    with gate.slot(2) as again:
        assert again is True


def test_a_slot_is_given_back_when_the_ingestion_raises() -> None:
    gate = InFlight()
    try:
        with gate.slot(1) as taken:
            assert taken
            raise RuntimeError("the database went away")
    except RuntimeError:
        pass
    assert gate.count == 0


def test_threads_never_hold_more_slots_than_the_bound() -> None:
    gate = InFlight()
    seen: list[int] = []
    start = threading.Barrier(8)

    def work() -> None:
        start.wait()
        for _ in range(200):
            with gate.slot(3) as taken:
                if taken:
                    seen.append(gate.count)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen and max(seen) <= 3 and gate.count == 0
