"""Time structure of a placement problem, computed once and shared by the methods.

A *section* is a set of buffers live together at one instant. Only the sets
live just before some buffer ends are kept: every other instant's live set is
a subset of one of them, so they are enough for the live-bytes bounds and the
pairwise overlaps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spyreopt.solvers.placement.types import Buffer


@dataclass(frozen=True)
class Sweep:
    """Sections, per-buffer section ranges and time overlaps of a list of buffers (by index)."""

    sections: list[list[int]]  # buffer indices live in each section
    section_time: list[int]  # an instant at which that section's buffers are all live
    first: list[int]  # first section index of each buffer
    last: list[int]  # one past its last section index
    overlaps: list[list[int]]  # buffers whose lifetime intersects each buffer's

    def live_bytes(self, buffers: Sequence[Buffer]) -> list[int]:
        """Sum of live sizes in each section."""
        return [sum(buffers[i].size for i in members) for members in self.sections]

    def cut_counts(self) -> list[int]:
        """For each boundary between sections k and k+1, how many buffers span it."""
        cuts = [0] * max(len(self.sections) - 1, 0)
        for lo, hi in zip(self.first, self.last):
            for k in range(lo, hi - 1):
                cuts[k] += 1
        return cuts


def sweep(buffers: Sequence[Buffer]) -> Sweep:
    """Scan lifetimes in time order; ends at an instant are processed before starts."""
    events: list[tuple[int, int, int]] = []  # (time, 0 = end / 1 = start, index)
    for i, b in enumerate(buffers):
        events.append((b.lower, 1, i))
        events.append((b.upper, 0, i))
    events.sort()
    n = len(buffers)
    first = [0] * n
    last = [0] * n
    overlaps: list[list[int]] = [[] for _ in range(n)]
    sections: list[list[int]] = []
    section_time: list[int] = []
    live: set[int] = set()
    last_start = 0
    section_closed = True  # no start since the last section was recorded
    for t, kind, i in events:
        if kind == 0:
            if not section_closed:
                sections.append(sorted(live))
                section_time.append(last_start)
                section_closed = True
            live.discard(i)
            last[i] = len(sections)
        else:
            for j in live:
                overlaps[i].append(j)
                overlaps[j].append(i)
            live.add(i)
            first[i] = len(sections)
            last_start = t
            section_closed = False
    return Sweep(sections, section_time, first, last, [sorted(o) for o in overlaps])
