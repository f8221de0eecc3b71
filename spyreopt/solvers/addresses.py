"""Addresses for an assignment: the one path from a Formulation to the placement engine.

Every backend that does not place buffers itself calls ``place_assignment``; a
failed placement is repaired by ``spill_until_placed``, which moves the buffer
that lives longest at the tightest step to a candidate without memory.
"""

from __future__ import annotations

import time

import numpy as np

from spyreopt.errors import InfeasibleError
from spyreopt.model.formulation import BufferKey, Formulation, fill_members
from spyreopt.solvers.local import LocalView
from spyreopt.solvers.placement import Buffer, place


def _buffer_id(key: BufferKey) -> str:
    return f"{key[0]}:{key[1]}"


def place_assignment(
    f: Formulation, assignment, *, time_limit: float = 5.0, seed: int = 0, method: str = "auto"
) -> dict[BufferKey, int] | None:
    """Offsets for every buffer of the assignment, or None when it cannot be placed in time. Buffers that
    share an address (a tail, an in-place output) are placed as one (``Formulation.address_groups``)."""
    if f.placement is None:
        return {}
    specs = f.address_groups(assignment)
    if not specs:
        return {}
    align = f.placement.alignment
    buffers = [Buffer(_buffer_id(b.key), b.lower, b.upper, b.size, alignment=align) for b in specs]
    result = place(buffers, f.placement.capacity, method=method, time_limit=max(time_limit, 0.05), seed=seed)
    if result.status != "placed" or result.offsets is None:
        return None
    return fill_members(specs, {b.key: int(result.offsets[_buffer_id(b.key)]) for b in specs})


def spill_until_placed(
    f: Formulation, view: LocalView, assignment: list[int], *, deadline: float, seed: int = 0
) -> tuple[list[int], dict[BufferKey, int], int]:
    """Place the assignment's buffers; on failure spill one buffer and retry.

    Spilling picks, at the step of peak usage, the live node buffer whose
    lifetime ends last (farthest next use) and moves its node to the cheapest
    candidate that frees that buffer and keeps every pair allowed. Returns the
    repaired assignment, its offsets, and the number of spills.
    """
    spills = 0
    while True:
        remaining = max(deadline - time.perf_counter(), 0.05)
        offsets = place_assignment(f, assignment, time_limit=min(remaining, 10.0), seed=seed)
        if offsets is not None:
            return assignment, offsets, spills
        if not _spill_one(f, view, assignment):
            raise InfeasibleError(
                f"{f.name}: the buffers cannot be placed within {f.placement.capacity} bytes and no buffer can be spilled"
            )
        spills += 1


def _spill_one(f: Formulation, view: LocalView, a: list[int]) -> bool:
    prof = view.profile(a)
    order = np.argsort(-prof, kind="stable")
    for t in order[:3]:
        live = [b for b in f.buffers(a) if b.lower <= t < b.upper and b.key[0] == "node"]
        live.sort(key=lambda b: (-b.upper, -b.size, b.key[1]))
        for b in live:
            i = b.key[1]
            costs = view.candidate_costs(i, a)
            usages = f.nodes[i].usages
            options = [s for s in range(len(costs)) if usages[s] < usages[a[i]] and np.isfinite(costs[s])]
            if options:
                a[i] = min(options, key=lambda s: (costs[s], usages[s], s))
                return True
    return False
