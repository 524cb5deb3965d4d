import gc

from detective_site.heap import freeze_startup_heap


def test_what_is_alive_is_frozen_and_garbage_is_not() -> None:
    gc.unfreeze()
    kept = [object() for _ in range(1000)]
    cycle: list[object] = []
    cycle.append(cycle)
    del cycle  # garbage: collected first, never frozen
    try:
        freeze_startup_heap()
        assert gc.get_freeze_count() >= len(kept)
        assert gc.collect() == 0  # nothing was left to find
    finally:
        gc.unfreeze()
