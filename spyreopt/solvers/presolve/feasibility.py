"""Proving a Formulation infeasible before search, with a diagnosis a person can act on.

Every node must hold at least its smallest-usage candidate while live, so if
those minima alone exceed the limit at some step, no assignment fits. The
diagnosis names the step, the buffers (nodes) live there, the bytes over, and
the smallest limit that would fit every step.
"""

from __future__ import annotations

import numpy as np

from spyreopt.errors import InfeasibleError
from spyreopt.model.formulation import Formulation
from spyreopt.solvers.presolve.limits import memory_limit


def min_usage_profile(f: Formulation) -> np.ndarray:
    prof = np.zeros(max(f.num_steps, 1), dtype=object)  # Python ints: usages may be huge
    for n in f.nodes:
        lo, hi = n.interval
        if hi > lo:
            prof[lo:hi] += int(n.usages.min())
    return prof


def check_usage_feasible(f: Formulation) -> None:
    """Raise InfeasibleError with a diagnosis if the minimum possible usage already exceeds the limit."""
    limit = memory_limit(f)
    if limit is None:
        return
    prof = min_usage_profile(f)
    worst = int(np.argmax(prof))
    peak = int(prof[worst])
    if peak <= limit:
        return
    live = [
        (n.name, int(n.usages.min()))
        for n in f.nodes
        if n.interval[0] <= worst < n.interval[1] and int(n.usages.min()) > 0
    ]
    live.sort(key=lambda x: -x[1])
    shown = ", ".join(f"{name} ({size})" for name, size in live[:8]) + (" ..." if len(live) > 8 else "")
    raise InfeasibleError(
        f"{f.name}: infeasible at time step {worst}: the live buffers need at least {peak}, the limit is {limit} "
        f"({peak - limit} over); buffers: {shown}; the smallest limit that would fit is {peak}",
        {
            "time_step": worst,
            "usage": peak,
            "limit": limit,
            "over": peak - limit,
            "buffers": live,
            "min_capacity": peak,
        },
    )
