"""Shared device-memory reads: which bytes of an operand several cores read at once.

When a division does not split a dim an operand is indexed by, several cores
read the very same slice (an m split of a matmul replicates the weight's
reads). The published Spyre decode measurements say the device does not pay
for each copy: device memory serves each distinct byte once and delivers it to
every reader, and a core receives such shared data at a limited rate. So the
cost model charges a read as ``max(distinct bytes over device memory, the
busiest core's shared bytes over its delivery rate)`` (``analytic.read_ns``),
and the simulator multicasts identical slices the same way.

Only identical slices are shared (the slices of a division's grid either
coincide or are disjoint); partial overlaps are charged per core.

Inside a tiled loop an operand without the tiled dim, unless staged, is read
again every iteration (``tiling_rules.rereads``): its distinct bytes, requests
and shared bytes all count once per tile, as ``OpCandidates.hbm_read_bytes``
counts them. That re-read is what staging saves.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from spyreopt.model.candidates import Layout, OpCandidates, dma_requests
from spyreopt.model.layout import box_padded_bytes
from spyreopt.model.tiling_rules import rereads


@dataclass(frozen=True)
class ReadSharing:
    """One operand's device-memory read under one layout, in one stick."""

    distinct_bytes: int  # each distinct slice once
    distinct_requests: int
    shared_per_core: tuple[tuple[int, int], ...]  # (core, bytes of its slice that other cores read too)


def read_sharing(cands: OpCandidates, lay: Layout, j: int, stick: int) -> ReadSharing:
    """How the cores of ``lay`` read operand j (stored with stick dim ``stick``) from device memory, every
    iteration's re-read counted."""
    key = ("sharing", lay.division.factors, lay.stick, lay.tile, j, stick)  # what it depends on, never an id
    held = cands._sizes.get(key)
    if held is not None:
        return held
    base = cands.g.tensors[cands.refs[j].base]
    eb, sb = base.elem_bytes, cands.hw.stick_bytes
    again = rereads(cands.space, lay.tile, j)
    readers = Counter(box for _, box in lay.reads[j])
    distinct = sum(box_padded_bytes(b, stick, eb, sb) for b in readers)
    requests = sum(dma_requests(b, base.shape, stick, eb, cands.hw) for b in readers)
    shared = tuple((c, box_padded_bytes(b, stick, eb, sb) * again if readers[b] > 1 else 0) for c, b in lay.reads[j])
    out = ReadSharing(distinct * again, requests * again, shared)
    cands._sizes[key] = out
    return out


def busiest_shared(sharings: list[ReadSharing]) -> int:
    """The most shared bytes one core receives over several operands."""
    per_core: dict[int, int] = {}
    for s in sharings:
        for c, nbytes in s.shared_per_core:
            per_core[c] = per_core.get(c, 0) + nbytes
    return max(per_core.values(), default=0)
