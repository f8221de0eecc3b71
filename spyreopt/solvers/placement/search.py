"""Exact placement by search over canonical solutions (after MiniMalloc, Moffitt 2023).

Any valid placement can be settled downward until every free buffer rests at
its *floor*: the lowest aligned offset above the buffers under it that overlap
it in time. Listed by increasing offset, a settled placement is a sequence in
which each buffer sits exactly at the floor left by the ones before it. So the
search only decides which buffer goes next: it goes to its floor, and offsets
never decrease along a branch. That is complete, and far smaller than
searching over offsets.

Pruning, checked per candidate in O(changed sections):
- section bound: buffers live together (a section) are stacked above the
  lowest floor among them, so that floor plus their bytes must fit in capacity;
  since offsets never decrease, no buffer may go above capacity minus the bytes
  still to place in any section;
- dominance: no buffer goes at or above the top some unplaced buffer would
  have at its floor, as that buffer could drop into the gap below, which a
  sibling branch covers;
- decomposition: when no unplaced buffer crosses a section boundary, the sides
  are independent and are solved one after the other;
- symmetry: of two buffers with the same lifetime stacked directly one on the
  other, only one order is searched.
Static orders are searched side by side: each order's search is resumable and
runs a slice of ``SLICE`` nodes in turn, so one unlucky order does not stall the
search, and no node is searched twice. (Restarting one deterministic order with
a doubled node budget repeats every node of the attempt before; searching them
side by side costs the number of orders times the nodes of the luckiest one.)
The first order to finish decides: a placement, or a proof that none exists.
Where it ends depends on the input only (slices count nodes, not seconds).

Pre-placed buffers join the sequence at their given offset, which is legal
while the floor the placed buffers leave for them is not above it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

from spyreopt.solvers.placement.sweep import Sweep
from spyreopt.solvers.placement.types import Buffer

FOUND, NOT_FOUND, OUT_OF_TIME = range(3)
SLICE = 256  # nodes an order searches before the next order's turn

# Static orders (all keys descending): W lifetime width, A area (width x size),
# T largest live-bytes total among the buffer's sections.
_ORDERS = ("WAT", "TAW", "TWA")


def search_place(
    buffers: Sequence[Buffer], capacity: int, time_limit: float, sw: Sweep
) -> tuple[str, list[int] | None, dict]:
    """(status, offsets by index, stats): "placed", "infeasible" (proved), or "timeout"."""
    deadline = time.monotonic() + time_limit
    searches = [_CanonicalSearch(buffers, capacity, deadline, sw, order) for order in _ORDERS]
    status, done = _side_by_side(searches)
    stats = {"nodes": sum(x.nodes for x in searches), "orders": len(searches), "order": done.order}
    if status == FOUND:
        return "placed", list(done.solution), stats
    return ("infeasible" if status == NOT_FOUND else "timeout"), None, stats


def _side_by_side(searches: list[_CanonicalSearch]) -> tuple[int, _CanonicalSearch]:
    """Resume each search for a slice in turn until one ends: (its status, it)."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 4 * searches[0].n + 1000))
    runs = [x.run() for x in searches]
    try:
        while True:
            for x, run in zip(searches, runs):
                try:
                    next(run)
                except StopIteration as end:
                    return end.value, x
    finally:
        for run in runs:
            run.close()
        sys.setrecursionlimit(limit)


def _twins(buffers: Sequence[Buffer]) -> list[list[int]]:
    """For each buffer, the free buffers with its lifetime and alignment that it may not rest directly on.

    Two such buffers stacked one directly on the other can swap places (every
    other buffer overlaps both or neither in time), so only one order is
    searched: bigger below, then lower index below. Sizes must be multiples of
    the alignment, or the swap could misalign the upper one. The order agrees
    with every static order's tie-break, so the preferred branch stays first.
    """
    groups: dict[tuple[int, int, int], list[int]] = {}
    for i, b in enumerate(buffers):
        if b.offset is None and b.size % b.alignment == 0:
            groups.setdefault((b.lower, b.upper, b.alignment), []).append(i)
    twins: list[list[int]] = [[] for _ in buffers]
    for members in groups.values():
        for i in members:
            twins[i] = [j for j in members if (-buffers[j].size, j) > (-buffers[i].size, i)]
    return twins


class _CanonicalSearch:
    """Depth-first search over canonical placements; state is undone on backtrack."""

    def __init__(self, buffers: Sequence[Buffer], capacity: int, deadline: float, sw: Sweep, order: str):
        self.n = len(buffers)
        self.capacity = capacity
        self.deadline = deadline
        self.sw = sw
        self.size = [b.size for b in buffers]
        self.align = [b.alignment for b in buffers]
        self.fixed = [-1 if b.offset is None else b.offset for b in buffers]
        self.width = [b.upper - b.lower for b in buffers]
        self.offset = [-1] * self.n  # current partial placement
        self.solution = [-1] * self.n
        self.minoff = [0] * self.n  # floor left by placed buffers, aligned
        self.total = sw.live_bytes(buffers)  # unplaced bytes per section
        self.cuts = sw.cut_counts()  # unplaced buffers crossing each section boundary
        self.plain = all(a == 1 for a in self.align) and all(x < 0 for x in self.fixed)
        self.nodes = 0
        self.order = order
        self.twins = _twins(buffers)

    def run(self):
        """The whole search as a generator: it pauses every ``SLICE`` nodes and returns the status."""
        return (yield from self._solve_parts(list(range(self.n)), 0, len(self.sw.sections)))

    def _solve_parts(self, members: list[int], lo: int, hi: int):
        """Split the unplaced `members` at boundaries of sections [lo, hi) that none of them cross."""
        cuts, first, last, offset = self.cuts, self.sw.first, self.sw.last, self.offset
        points = [lo] + [k + 1 for k in range(lo, hi - 1) if cuts[k] == 0] + [hi]
        for a, b in zip(points, points[1:]):
            part = [i for i in members if offset[i] < 0 and first[i] < b and a < last[i]]
            if part:
                status = yield from self._search(part, a, b, self._rank(part), 0, -1)
                if status != FOUND:
                    return status
        return FOUND

    def _rank(self, members: list[int]) -> dict[int, int]:
        """Position of each member in the current static order (ties by index)."""
        first, last, total, width, size = self.sw.first, self.sw.last, self.total, self.width, self.size
        keys = {
            "W": lambda i: width[i],
            "A": lambda i: width[i] * size[i],
            "T": lambda i: max(total[first[i] : last[i]]),
        }
        ordered = sorted(members, key=lambda i: (*(-keys[c](i) for c in self.order), i))
        return {i: r for r, i in enumerate(ordered)}

    def _search(self, members: list[int], lo: int, hi: int, rank: dict[int, int], cur: int, cur_rank: int):
        """Try each unplaced member next, at its floor, in (floor, rank) order."""
        self.nodes += 1
        if self.nodes % SLICE == 0:
            if time.monotonic() > self.deadline:
                return OUT_OF_TIME
            yield  # the next order's turn
        offset, minoff, fixed, size = self.offset, self.minoff, self.fixed, self.size
        # Above `highest` some section's unplaced bytes cannot fit; at or above lowest_top is dominated.
        highest = self.capacity - max(self.total[lo:hi])
        cands = []
        lowest_top = -1
        if self.plain:  # the same scan without pre-placed buffers (the hot loop)
            for i in members:
                if offset[i] < 0:
                    c = minoff[i]
                    t = c + size[i]
                    if t < lowest_top or lowest_top < 0:
                        lowest_top = t
                    if cur <= c <= highest and c < lowest_top:
                        cands.append((c, rank[i], i))
        else:
            for i in members:
                if offset[i] >= 0:
                    continue
                c = fixed[i]
                if c < 0:
                    c = minoff[i]
                elif c < cur or (c == cur and rank[i] < cur_rank):
                    return NOT_FOUND  # a pre-placed buffer passed by can never be placed
                if c + size[i] < lowest_top or lowest_top < 0:
                    lowest_top = c + size[i]
                if cur <= c <= highest and c < lowest_top:
                    cands.append((c, rank[i], i))
        if lowest_top < 0:
            return FOUND  # every member placed; `_recurse` recorded each offset on the way
        highest = min(highest, lowest_top - 1)
        cands.sort()
        for c, r, i in cands:
            if c > highest:
                break
            if c == cur and r < cur_rank:
                continue
            twins = self.twins[i]
            if twins and any(offset[j] >= 0 and offset[j] + size[j] == c for j in twins):
                continue  # symmetric to placing i first, then its twin right on top
            status = yield from self._place(members, lo, hi, rank, i, c, r)
            if status != NOT_FOUND or fixed[i] >= 0:
                return status  # nothing can go below a pre-placed buffer once it is placed
        return NOT_FOUND

    def _place(self, members: list[int], lo: int, hi: int, rank: dict[int, int], i: int, c: int, r: int):
        """Place buffer i at c, go on if the changed sections still fit, then undo."""
        offset, minoff, fixed, size, align = self.offset, self.minoff, self.fixed, self.size, self.align
        first, last, total = self.sw.first, self.sw.last, self.total
        offset[i] = c
        top = c + size[i]
        changed: list[tuple[int, int]] = []
        ok = True
        win_lo, win_hi, raised_max = first[i], last[i], top
        if self.plain:  # the same steps with every alignment 1 and nothing pre-placed (the hot loop)
            for j in self.sw.overlaps[i]:
                if offset[j] < 0:
                    m = minoff[j]
                    if m < top:
                        changed.append((j, m))
                        minoff[j] = top
                        if first[j] < win_lo:
                            win_lo = first[j]
                        if last[j] > win_hi:
                            win_hi = last[j]
        else:
            for j in self.sw.overlaps[i]:
                if offset[j] < 0 and minoff[j] < top:
                    changed.append((j, minoff[j]))
                    a = align[j]
                    m = top if top % a == 0 else top + a - top % a
                    minoff[j] = m
                    ok = ok and not 0 <= fixed[j] < m
                    raised_max = max(raised_max, m)
                    win_lo = min(win_lo, first[j])
                    win_hi = max(win_hi, last[j])
        for s in range(first[i], last[i]):
            total[s] -= size[i]
        if ok and self._sections_fit(win_lo, win_hi, first[i], last[i], raised_max, top):
            status = yield from self._recurse(members, lo, hi, rank, i, c, r)
        else:
            status = NOT_FOUND
        for s in range(first[i], last[i]):
            total[s] += size[i]
        for j, m in reversed(changed):
            minoff[j] = m
        offset[i] = -1
        return status

    def _sections_fit(self, win_lo: int, win_hi: int, own_lo: int, own_hi: int, raised_max: int, top: int) -> bool:
        """Whether each section whose floor may have risen still holds its unplaced bytes.

        Only sections in the window of raised floors can have changed. Outside
        the placed buffer's own sections a floor rose to at most `raised_max`,
        so sections with that much room are skipped. In its own sections every
        unplaced buffer overlaps it, so rests at or above its `top`: less room
        than that fails without a look at the members.
        """
        cap, total, minoff, offset, sections = self.capacity, self.total, self.minoff, self.offset, self.sw.sections
        for s in range(win_lo, win_hi):
            t = total[s]
            if t == 0:
                continue
            room = cap - t
            if own_lo <= s < own_hi:
                if room < top:
                    return False
            elif room >= raised_max:
                continue
            for j in sections[s]:
                if offset[j] < 0 and minoff[j] <= room:
                    break
            else:
                return False
        return True

    def _recurse(self, members: list[int], lo: int, hi: int, rank: dict[int, int], i: int, c: int, r: int):
        """Search on from i at c, splitting into independent parts if i was the last to cross a boundary."""
        self.solution[i] = c
        first, last, cuts = self.sw.first, self.sw.last, self.cuts
        split = False
        for k in range(first[i], last[i] - 1):
            cuts[k] -= 1
            split = split or cuts[k] == 0
        try:
            if split:
                return (yield from self._solve_parts(members, lo, hi))
            return (yield from self._search(members, lo, hi, rank, c, r))
        finally:
            for k in range(first[i], last[i] - 1):
                cuts[k] += 1
