"""The analytic Spyre cost model (DESIGN section 5). Units: ns and bytes.

Every term is rounded to whole picoseconds (``ps``) before it is summed, so the
planner's objective is exact integer arithmetic and every backend agrees.

Device-memory traffic is charged per byte, per DMA request (a short contiguous
run costs a whole request) and per stream (the latency before its first
request). Compute overlaps memory only as far as double buffering lets it: an
op whose per-core stream is a few tiles overlaps little (``overlap_fraction``).
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


def transfer_ns(c: Coefficients, nbytes: float, requests: float = 0, streams: float = 0) -> float:
    """One direction of device-memory traffic: bytes, DMA requests, and the first-request latency of each stream."""
    return nbytes / c.hbm_bytes_per_ns + c.hbm_request_ns * requests + c.hbm_latency_ns * streams


def mixed_ns(c: Coefficients, read_bytes: float, write_bytes: float, fraction: float = 1.0) -> float:
    """Read/write turnaround: paid on the smaller direction while both stream at once (``fraction`` of the op)."""
    return c.hbm_mixed_ns_per_byte * fraction * min(read_bytes, write_bytes)


def hbm_ns(c: Coefficients, read_bytes: float, write_bytes: float) -> float:
    """Device-memory time of long runs (no request or latency terms): the public figure's form."""
    return transfer_ns(c, read_bytes + write_bytes) + mixed_ns(c, read_bytes, write_bytes)


def overlap_fraction(c: Coefficients, stream_bytes_per_core: float) -> float:
    """How much of an op streams while it computes: double buffering over ``stream / tile`` tiles."""
    if c.overlap_tile_bytes <= 0:
        return 1.0
    return stream_bytes_per_core / (stream_bytes_per_core + c.overlap_tile_bytes)


def overlap(c: Coefficients, compute: float, mem: float, fraction: float = 1.0) -> float:
    return compute + mem - c.overlap_gamma * fraction * min(compute, mem)


def relayout_ns(
    c: Coefficients, runs_per_core: int, split: int, span_per_core: int, link_bytes: int = 0, hops: int = 0
) -> float:
    """The slower of a core gathering its runs and span and the busiest ring link carrying its bytes,
    after the farthest fragment's ring latency."""
    per_run = c.relayout_run_ns + c.relayout_run_log_ns * log2(max(split, 1))
    gather = max(runs_per_core * per_run, 0.0) + span_per_core / c.relayout_bytes_per_ns
    return hops * c.relayout_hop_ns + max(gather, link_bytes / c.relayout_link_bytes_per_ns)


def restick_ns(c: Coefficients, staged_bytes: int, requests: int) -> float:
    """A restickify stages its data through device memory: bytes both ways, DMA requests, a fixed round trip."""
    return staged_bytes / c.restick_bytes_per_ns + requests * c.restick_run_ns + c.restick_latency_ns


def psum_ns(c: Coefficients, bytes_per_owner: int, k_split: int) -> float:
    return (k_split - 1) * bytes_per_owner / c.psum_bytes_per_ns if k_split > 1 else 0.0
