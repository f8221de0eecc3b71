"""Best-fit placement: fast and usually good, never a proof of anything.

Buffers are taken in a fixed order and each goes into the smallest free gap,
among the buffers already placed that overlap it in time, that holds it
(aligned); the space above the highest such buffer counts as the loosest gap,
so holes are filled before the heap grows. Several orders are tried, because
each suits a different kind of instance. Cost: O(n * k log k) per order for k
overlaps per buffer, which keeps it cheap enough to call inside annealing loops.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from spyreopt.solvers.placement.sweep import Sweep
from spyreopt.solvers.placement.types import Buffer


def best_fit(buffers: Sequence[Buffer], capacity: int, sw: Sweep) -> list[int] | None:
    """Offsets by buffer index from the first order that fits in capacity, or None."""
    for key in _orders(buffers, sw):
        offsets = _place_in_order(buffers, capacity, sw, key)
        if offsets is not None:
            return offsets
    return None


def best_fit_lowest(buffers: Sequence[Buffer], sw: Sweep) -> list[int]:
    """Offsets without a capacity limit, from the order that ends lowest."""
    # Room for every buffer stacked, with its worst alignment padding, above every pre-placed one.
    unbounded = sum(b.size + b.alignment for b in buffers) + max((b.offset or 0) + b.size for b in buffers)
    candidates = [_place_in_order(buffers, unbounded, sw, key) for key in _orders(buffers, sw)]
    return min((c for c in candidates if c is not None), key=lambda c: _height(buffers, c))


def _height(buffers: Sequence[Buffer], offsets: list[int]) -> int:
    return max(o + b.size for o, b in zip(offsets, buffers))


def _orders(buffers: Sequence[Buffer], sw: Sweep) -> Iterator[Callable[[int], tuple]]:
    """Big first; busiest time first; long-lived first; in time order."""
    yield lambda i: (-buffers[i].size, buffers[i].lower - buffers[i].upper, i)
    live = sw.live_bytes(buffers)
    busiest = [max(live[sw.first[i] : sw.last[i]]) for i in range(len(buffers))]
    yield lambda i: (-busiest[i], -buffers[i].size, i)
    yield lambda i: (buffers[i].lower - buffers[i].upper, -buffers[i].size, i)
    yield lambda i: (buffers[i].lower, -buffers[i].size, i)


def _place_in_order(
    buffers: Sequence[Buffer], capacity: int, sw: Sweep, key: Callable[[int], tuple]
) -> list[int] | None:
    offsets = [-1 if b.offset is None else b.offset for b in buffers]
    for i in sorted((i for i in range(len(buffers)) if offsets[i] < 0), key=key):
        b = buffers[i]
        taken = sorted((offsets[j], offsets[j] + buffers[j].size) for j in sw.overlaps[i] if offsets[j] >= 0)
        best_start, best_gap = -1, capacity + 1
        floor = 0
        for lo, hi in taken + [(capacity, capacity)]:
            # The top gap is ranked loosest (capacity) so that holes fill first.
            gap = lo - floor if lo < capacity else capacity
            start = -(-floor // b.alignment) * b.alignment
            if start + b.size <= lo and gap < best_gap:
                best_start, best_gap = start, gap
            floor = max(floor, hi)
        if best_start < 0:
            return None
        offsets[i] = best_start
    return offsets
