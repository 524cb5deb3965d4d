"""Latency sketches kept as DDSketch's own protobuf, merged where they are stored.

A request's batch adds its sketch to each route minute it touches. Merging through the
library (`DDSketchProto.from_proto`, then `merge`, then `to_proto`) rebuilds the stored sketch
bin by bin (`from_proto` adds each of its ~150 bins with `add`); in the OTLP benchmark that was
a third of the view's time. Every sketch here has the same mapping (`new_sketch`: 1 % relative
accuracy), so two serialised sketches merge by adding their dense bin counts index for index,
which is the library's own `DenseStore.merge` done on the message. A sketch of another mapping
or with sparse bins (none that Detective writes) goes through the library instead, which
refuses two mappings as it always did.
"""

from __future__ import annotations

import bisect
import functools
import itertools
from typing import Any

from ddsketch import DDSketch
from ddsketch.pb.ddsketch_pb2 import DDSketch as SketchMessage
from ddsketch.pb.ddsketch_pb2 import Store
from ddsketch.pb.proto import DDSketchProto, KeyMappingProto

__all__ = ["dump_sketch", "load_sketch", "merge_into", "quantile_of"]


def load_sketch(data: bytes) -> DDSketch:
    message = SketchMessage()
    message.ParseFromString(bytes(data))
    return DDSketchProto.from_proto(message)  # type: ignore[no-any-return]


def dump_sketch(sketch: DDSketch) -> bytes:
    return DDSketchProto.to_proto(sketch).SerializeToString()  # type: ignore[no-any-return]


def _trimmed(store: Store) -> tuple[int, list[float]]:
    """The store's first non-empty bin's index and its counts up to the last non-empty one
    (a DenseStore pads its bins in chunks of 128)."""
    counts = list(store.contiguousBinCounts)
    first = next((i for i, c in enumerate(counts) if c), len(counts))
    last = len(counts) - next((i for i, c in enumerate(reversed(counts)) if c), len(counts))
    return store.contiguousBinIndexOffset + first, counts[first:last]


def _add(into: Store, other: Store) -> None:
    mine, theirs = _trimmed(into), _trimmed(other)
    if not theirs[1]:
        return
    if not mine[1]:
        mine = theirs
        theirs = (theirs[0], [])
    low = min(mine[0], theirs[0])
    high = max(mine[0] + len(mine[1]), theirs[0] + len(theirs[1]))
    counts = [0.0] * (high - low)
    for offset, values in (mine, theirs):
        for index, count in enumerate(values, offset - low):
            counts[index] += count
    into.Clear()
    into.contiguousBinIndexOffset = low
    into.contiguousBinCounts.extend(counts)


def merge_into(stored: bytes, sketch: DDSketch) -> bytes:
    """`stored` (a serialised sketch) with `sketch` added, serialised."""
    mine = SketchMessage()
    mine.ParseFromString(bytes(stored))
    theirs = DDSketchProto.to_proto(sketch)
    sparse = any(
        store.binCounts
        for store in (mine.positiveValues, mine.negativeValues, theirs.positiveValues)
    )
    if sparse or mine.mapping != theirs.mapping:
        merged = load_sketch(stored)
        merged.merge(sketch)
        return dump_sketch(merged)
    _add(mine.positiveValues, theirs.positiveValues)
    _add(mine.negativeValues, theirs.negativeValues)
    mine.zeroCount += theirs.zeroCount
    return mine.SerializeToString()  # type: ignore[no-any-return]


@functools.lru_cache(maxsize=8)
def _mapping(gamma: float, offset: float, interpolation: int) -> Any:
    message = SketchMessage().mapping
    message.gamma, message.indexOffset, message.interpolation = gamma, offset, interpolation
    return KeyMappingProto.from_proto(message)


def quantile_of(data: bytes, quantile: float) -> float | None:
    """The stored sketch's value at `quantile`, as `load_sketch(data).get_quantile_value`
    gives it, read off the message: the policy reads a p95 per route and minute (thousands of
    sketches), and loading each took 1.15 ms where this takes 0.04 ms (2,000 sketches of 50
    values, load average 3.4). A sketch with negative values or sparse bins (none Detective
    writes) goes through the library."""
    message = SketchMessage()
    message.ParseFromString(bytes(data))
    positive = message.positiveValues
    if (
        message.negativeValues.contiguousBinCounts
        or message.negativeValues.binCounts
        or (positive.binCounts)
    ):
        return load_sketch(data).get_quantile_value(quantile)  # type: ignore[no-any-return]
    running = list(itertools.accumulate(positive.contiguousBinCounts))
    total = (running[-1] if running else 0.0) + message.zeroCount
    if total == 0 or not 0 <= quantile <= 1:
        return None
    rank = quantile * (total - 1)
    if rank < message.zeroCount:
        return 0.0
    # The library's DenseStore.key_at_rank: the first bin whose running count passes the rank.
    index = bisect.bisect_right(running, rank - message.zeroCount)
    mapping = _mapping(
        message.mapping.gamma, message.mapping.indexOffset, message.mapping.interpolation
    )
    return float(mapping.value(min(index, len(running) - 1) + positive.contiguousBinIndexOffset))
