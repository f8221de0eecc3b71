"""The few facts every reduction reads: the memory limit, liveness, and int64-safe sums."""

from __future__ import annotations

import numpy as np

from spyreopt.model.formulation import Formulation

I64_MAX = np.iinfo(np.int64).max
I64_MIN = np.iinfo(np.int64).min
BIG = I64_MAX  # stands for "not allowed" in tables compared pair by pair


def memory_limit(f: Formulation) -> int | None:
    """The byte budget every time step must respect: the usage limit and the placement capacity, whichever is lower."""
    limits = [x for x in (f.usage_limit, f.placement.capacity if f.placement else None) if x is not None]
    return min(limits) if limits else None


def live(interval: tuple[int, int]) -> bool:
    """Whether a buffer over ``interval`` ever occupies memory."""
    return interval[1] > interval[0]


def sat_add(a, b) -> tuple[np.ndarray, np.ndarray]:
    """int64 ``a + b`` saturated at the int64 range, and where it saturated."""
    a, b = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64))
    with np.errstate(over="ignore"):
        s = a + b
    hi = (a > 0) & (b > 0) & (s < 0)
    lo = (a < 0) & (b < 0) & (s >= 0)
    s = np.where(hi, I64_MAX, np.where(lo, I64_MIN, s))
    return s, hi | lo
