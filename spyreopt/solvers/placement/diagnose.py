"""Infeasibility that needs no search: a buffer too big, pre-placed buffers that clash, or too many live bytes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from spyreopt.solvers.placement.sweep import Sweep
from spyreopt.solvers.placement.types import Buffer
from spyreopt.solvers.placement.validate import validate


@dataclass(frozen=True)
class Diagnosis:
    """A readable reason and the numbers behind it (time step, bytes over, buffers involved)."""

    message: str
    details: dict = field(default_factory=dict)


def peak(buffers: Sequence[Buffer], sw: Sweep) -> tuple[int, int]:
    """(live bytes, section index) at the busiest instant; live bytes bound any capacity from below."""
    live = sw.live_bytes(buffers)
    k = max(range(len(live)), key=live.__getitem__)
    return live[k], k


def diagnose(buffers: Sequence[Buffer], capacity: int, sw: Sweep) -> Diagnosis | None:
    """Why no placement can exist, when that is evident without search; else None."""
    for b in buffers:
        if b.size > capacity:
            return Diagnosis(
                f"buffer {b.id!r} needs {b.size} bytes, more than the capacity {capacity}",
                {"buffer_ids": [b.id], "over_by": b.size - capacity, "lower_bound": b.size},
            )
    fixed = [b for b in buffers if b.offset is not None]
    issues = validate(fixed, {b.id: b.offset for b in fixed}, capacity)
    if issues:
        shown = "; ".join(issue.message for issue in issues[:3])
        more = f" (and {len(issues) - 3} more)" if len(issues) > 3 else ""
        return Diagnosis(
            f"pre-placed buffers cannot be honoured: {shown}{more}",
            {"buffer_ids": sorted({i for issue in issues for i in issue.ids})},
        )
    live, k = peak(buffers, sw)
    if live > capacity:
        members = sorted(sw.sections[k], key=lambda i: (-buffers[i].size, i))
        largest = ", ".join(f"{buffers[i].id} ({buffers[i].size})" for i in members[:5])
        return Diagnosis(
            f"at time {sw.section_time[k]}, {len(members)} live buffers need {live} bytes, "
            f"{live - capacity} more than the capacity {capacity}; largest: {largest}; "
            f"any placement needs at least {live} bytes",
            {
                "time": sw.section_time[k],
                "live_bytes": live,
                "over_by": live - capacity,
                "buffer_ids": [buffers[i].id for i in members],
                "lower_bound": live,
            },
        )
    return None
