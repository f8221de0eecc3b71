"""The analytic Spyre cost model (DESIGN section 5). Units: ns and bytes.

Every term is rounded to whole picoseconds (``ps``) before it is summed, so the
planner's objective is exact integer arithmetic and every backend agrees.
"""

from __future__ import annotations

from math import log2

from spyreopt.costmodel.coefficients import Coefficients

PS_PER_NS = 1000
COST_UNIT_US = 1e-6  # one fixed-point unit is one picosecond


def ps(ns: float) -> int:
    return int(round(ns * PS_PER_NS))


def pe_efficiency(c: Coefficients, rows_per_core: int) -> float:
    """PE-array row underfill: about 0.50 at 2 rows, 0.63 at 4, 0.72 at 8."""
    return max(min(1.0 - c.pt_underfill_c * rows_per_core ** (-c.pt_underfill_p), 1.0), 0.05)


def matmul_compute_ns(c: Coefficients, macs_per_core: float, rows_per_core: int) -> float:
    return macs_per_core / (c.macs_per_ns_per_core * pe_efficiency(c, rows_per_core))


def vector_compute_ns(c: Coefficients, elems_per_core: float, transcendental: bool, stick_reduce: bool) -> float:
    weight = c.transcendental_weight if transcendental else 1.0
    penalty = c.stick_reduce_penalty if stick_reduce else 1.0
    return elems_per_core * weight * penalty / c.vector_elems_per_ns_per_core


def hbm_ns(c: Coefficients, read_bytes: float, write_bytes: float) -> float:
    return (read_bytes + write_bytes) / c.hbm_bytes_per_ns + c.hbm_mixed_ns_per_byte * min(read_bytes, write_bytes)


def overlap(c: Coefficients, compute: float, mem: float) -> float:
    return compute + mem - c.overlap_gamma * min(compute, mem)


def relayout_ns(c: Coefficients, runs_per_core: int, split: int, span_per_core: int) -> float:
    per_run = c.relayout_run_ns + c.relayout_run_log_ns * log2(max(split, 1))
    return max(runs_per_core * per_run, 0.0) + span_per_core / c.relayout_bytes_per_ns


def restick_ns(c: Coefficients, payload_bytes: int, runs: int) -> float:
    return payload_bytes / c.restick_bytes_per_ns + runs * c.restick_run_ns


def psum_ns(c: Coefficients, bytes_per_owner: int, k_split: int) -> float:
    return (k_split - 1) * bytes_per_owner / c.psum_bytes_per_ns if k_split > 1 else 0.0
