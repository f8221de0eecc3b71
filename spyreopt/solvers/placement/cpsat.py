"""Placement as a CP-SAT model: one rectangle per buffer, lifetime x address, no two overlapping.

Deterministic by construction: one worker, a fixed seed, and a deterministic
time budget; the wall-clock limit is only a guard so that `time_limit` holds
on a slow machine.
"""

from __future__ import annotations

from collections.abc import Sequence

from ortools.sat.python import cp_model

from spyreopt.rates import PLACEMENT_DTIME_PER_SECOND
from spyreopt.solvers.placement.types import Buffer


def cpsat_place(
    buffers: Sequence[Buffer],
    capacity: int,
    time_limit: float,
    seed: int,
    *,
    minimize_height: bool = False,
    hint: Sequence[int] | None = None,
) -> tuple[str, list[int] | None, dict]:
    """(status, offsets by index, stats); with minimize_height, the lowest heap found within capacity."""
    model = cp_model.CpModel()
    starts = []
    slots: dict[int, cp_model.IntVar] = {}  # free buffer index -> offset / alignment
    time_boxes = []
    address_boxes = []
    for i, b in enumerate(buffers):
        if b.offset is not None:
            start = model.new_constant(b.offset)
        else:
            slots[i] = model.new_int_var(0, max((capacity - b.size) // b.alignment, -1), f"slot{i}")
            start = slots[i] * b.alignment if b.alignment > 1 else slots[i]
        starts.append(start)
        time_boxes.append(model.new_fixed_size_interval_var(b.lower, b.upper - b.lower, f"t{i}"))
        address_boxes.append(model.new_fixed_size_interval_var(start, b.size, f"a{i}"))
    model.add_no_overlap_2d(time_boxes, address_boxes)
    # Redundant live-bytes bound: strengthens propagation on tight instances.
    model.add_cumulative(time_boxes, [b.size for b in buffers], capacity)
    height = None
    if minimize_height:
        height = model.new_int_var(0, capacity, "height")
        for b, start in zip(buffers, starts):
            model.add(height >= start + b.size)
        model.minimize(height)
    if hint is not None:
        for i, slot in slots.items():
            model.add_hint(slot, hint[i] // buffers[i].alignment)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = seed
    solver.parameters.max_time_in_seconds = max(time_limit, 0.01)
    solver.parameters.max_deterministic_time = max(time_limit * PLACEMENT_DTIME_PER_SECOND, 0.001)
    code = solver.solve(model)
    stats = {
        "cpsat_status": solver.status_name(code),
        "wall_time": solver.wall_time,
        "deterministic_time": solver.deterministic_time,
        "branches": solver.num_branches,
    }
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        offsets = [int(solver.value(s)) for s in starts]
        if height is not None:
            stats["proved_optimal"] = code == cp_model.OPTIMAL
            stats["best_bound"] = int(solver.best_objective_bound)
        return "placed", offsets, stats
    if code == cp_model.INFEASIBLE:
        return "infeasible", None, stats
    return "timeout", None, stats
