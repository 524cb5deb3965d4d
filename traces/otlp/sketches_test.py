from __future__ import annotations

import random

import pytest
from ddsketch import DDSketch

from traces.otlp.aggregate import new_sketch
from traces.otlp.sketches import dump_sketch, load_sketch, merge_into, quantile_of


def sketch_of(values: list[float]) -> DDSketch:
    made = new_sketch()
    for value in values:
        made.add(value)
    return made


@pytest.mark.parametrize("seed", range(5))
def test_merging_the_messages_is_the_librarys_merge(seed: int) -> None:
    rng = random.Random(seed)
    first = [rng.lognormvariate(3, 1) for _ in range(rng.randint(1, 500))]
    second = [rng.lognormvariate(4, 2) for _ in range(rng.randint(1, 500))] + [0.0, 1e-9]
    merged = load_sketch(merge_into(dump_sketch(sketch_of(first)), sketch_of(second)))
    library = sketch_of(first)
    library.merge(sketch_of(second))
    assert merged.count == library.count == len(first) + len(second)
    for q in (0.0, 0.5, 0.95, 0.99, 1.0):
        assert merged.get_quantile_value(q) == pytest.approx(library.get_quantile_value(q))


def test_an_empty_side_changes_nothing() -> None:
    full = sketch_of([12.0, 40.0, 41.0])
    assert load_sketch(merge_into(dump_sketch(new_sketch()), full)).count == 3
    kept = load_sketch(merge_into(dump_sketch(full), new_sketch()))
    assert kept.count == 3 and kept.get_quantile_value(0.5) == pytest.approx(40.0, rel=0.02)


def test_another_mapping_goes_through_the_library_which_refuses_it() -> None:
    coarse = DDSketch(0.05)
    coarse.add(100.0)
    with pytest.raises(ValueError, match="different parameters"):
        merge_into(dump_sketch(coarse), sketch_of([100.0, 200.0]))


@pytest.mark.parametrize("seed", range(5))
def test_a_quantile_read_off_the_message_is_the_librarys(seed: int) -> None:
    rng = random.Random(seed)
    values = [rng.lognormvariate(3, 1.5) for _ in range(rng.randint(1, 300))]
    values += [0.0] * rng.randint(0, 20)
    data = merge_into(dump_sketch(sketch_of(values[:5])), sketch_of(values[5:]))
    library = load_sketch(data)
    for q in (0.0, 0.01, 0.5, 0.95, 0.99, 1.0):
        assert quantile_of(data, q) == library.get_quantile_value(q)
    assert quantile_of(dump_sketch(new_sketch()), 0.95) is None
    # Negative values are the library's to read.
    negative = dump_sketch(sketch_of([-5.0, 3.0, 8.0]))
    assert quantile_of(negative, 0.0) == load_sketch(negative).get_quantile_value(0.0) < 0
