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
Static orders are tried in turn with doubling node budgets (restarts), so one
unlucky order does not stall the search.

Pre-placed buffers join the sequence at their given offset, which is legal
while the floor the placed buffers leave for them is not above it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

from spyreopt.solvers.placement.sweep import Sweep
from spyreopt.solvers.placement.types import Buffer

FOUND, NOT_FOUND, OUT_OF_NODES, OUT_OF_TIME = range(4)

# Static orders (all keys descending): W lifetime width, A area (width x size),
# T largest live-bytes total among the buffer's sections.
_ORDERS = ("WAT", "TAW", "TWA")


def search_place(
    buffers: Sequence[Buffer], capacity: int, time_limit: float, sw: Sweep
) -> tuple[str, list[int] | None, dict]:
    """(status, offsets by index, stats): "placed", "infeasible" (proved), or "timeout"."""
    search = _CanonicalSearch(buffers, capacity, time.monotonic() + time_limit, sw)
    status = search.solve()
    stats = {"nodes": search.nodes, "attempts": search.attempts}
    if status == FOUND:
        return "placed", list(search.solution), stats
    return ("infeasible" if status == NOT_FOUND else "timeout"), None, stats


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

    def __init__(self, buffers: Sequence[Buffer], capacity: int, deadline: float, sw: Sweep):
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
        self.nodes = 0
        self.attempts = 0
        self.budget = 0
        self.order = _ORDERS[0]
        self.twins = _twins(buffers)

    def solve(self) -> int:
        """Round robin over the static orders with doubling node budgets, until one attempt ends."""
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 4 * self.n + 1000))
        try:
            budget = max(self.n, 1)
            while True:
                budget *= 2
                for order in _ORDERS:
                    self.budget, self.order = budget, order
                    self.attempts += 1
                    status = self._solve_parts(list(range(self.n)), 0, len(self.sw.sections))
                    if status != OUT_OF_NODES:
                        return status
        finally:
            sys.setrecursionlimit(limit)

    def _solve_parts(self, members: list[int], lo: int, hi: int) -> int:
        """Split the unplaced `members` at boundaries of sections [lo, hi) that none of them cross."""
        cuts, first, last, offset = self.cuts, self.sw.first, self.sw.last, self.offset
        points = [lo] + [k + 1 for k in range(lo, hi - 1) if cuts[k] == 0] + [hi]
        for a, b in zip(points, points[1:]):
            part = [i for i in members if offset[i] < 0 and first[i] < b and a < last[i]]
            if part:
                status = self._search(part, a, b, self._rank(part), 0, -1)
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

    def _search(self, members: list[int], lo: int, hi: int, rank: dict[int, int], cur: int, cur_rank: int) -> int:
        """Try each unplaced member next, at its floor, in (floor, rank) order."""
        self.nodes += 1
        self.budget -= 1
        if self.budget < 0:
            return OUT_OF_NODES
        if self.nodes & 63 == 0 and time.monotonic() > self.deadline:
            return OUT_OF_TIME
        offset, minoff, fixed, size = self.offset, self.minoff, self.fixed, self.size
        # Above `highest` some section's unplaced bytes cannot fit; at or above lowest_top is dominated.
        highest = self.capacity - max(self.total[lo:hi])
        cands = []
        lowest_top = -1
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
            if any(offset[j] >= 0 and offset[j] + size[j] == c for j in self.twins[i]):
                continue  # symmetric to placing i first, then its twin right on top
            status = self._place(members, lo, hi, rank, i, c, r)
            if status != NOT_FOUND or fixed[i] >= 0:
                return status  # nothing can go below a pre-placed buffer once it is placed
        return NOT_FOUND

    def _place(self, members: list[int], lo: int, hi: int, rank: dict[int, int], i: int, c: int, r: int) -> int:
        """Place buffer i at c, go on if the changed sections still fit, then undo."""
        offset, minoff, fixed, size, align = self.offset, self.minoff, self.fixed, self.size, self.align
        first, last, total = self.sw.first, self.sw.last, self.total
        offset[i] = c
        top = c + size[i]
        changed: list[tuple[int, int]] = []
        ok = True
        win_lo, win_hi, raised_max = first[i], last[i], top
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
        if ok and self._sections_fit(win_lo, win_hi, first[i], last[i], raised_max):
            status = self._recurse(members, lo, hi, rank, i, c, r)
        else:
            status = NOT_FOUND
        for s in range(first[i], last[i]):
            total[s] += size[i]
        for j, m in reversed(changed):
            minoff[j] = m
        offset[i] = -1
        return status

    def _sections_fit(self, win_lo: int, win_hi: int, own_lo: int, own_hi: int, raised_max: int) -> bool:
        """Whether each section whose floor may have risen still holds its unplaced bytes.

        Only sections in the window of raised floors can have changed. Outside
        the placed buffer's own sections a floor rose to at most `raised_max`,
        so sections with that much room are skipped.
        """
        cap, total, minoff, offset, sections = self.capacity, self.total, self.minoff, self.offset, self.sw.sections
        for s in range(win_lo, win_hi):
            t = total[s]
            if t == 0:
                continue
            room = cap - t
            if room >= raised_max and not own_lo <= s < own_hi:
                continue
            for j in sections[s]:
                if offset[j] < 0 and minoff[j] <= room:
                    break
            else:
                return False
        return True

    def _recurse(self, members: list[int], lo: int, hi: int, rank: dict[int, int], i: int, c: int, r: int) -> int:
        """Search on from i at c, splitting into independent parts if i was the last to cross a boundary."""
        self.solution[i] = c
        first, last, cuts = self.sw.first, self.sw.last, self.cuts
        split = False
        for k in range(first[i], last[i] - 1):
            cuts[k] -= 1
            split = split or cuts[k] == 0
        try:
            if split:
                return self._solve_parts(members, lo, hi)
            return self._search(members, lo, hi, rank, c, r)
        finally:
            for k in range(first[i], last[i] - 1):
                cuts[k] += 1
