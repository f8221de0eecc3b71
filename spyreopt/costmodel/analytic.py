"""The analytic Spyre cost model's formulas (DESIGN section 5). Units: ns and bytes.

Each formula is defined once here and works on scalars and numpy arrays alike
(the fit evaluates them over thousands of ops at once); ``costmodel.spyre``
composes them into an op's time. The planner rounds every composed term to
whole picoseconds (``ps``) before it is summed, so its objective is exact
integer arithmetic and every backend agrees.

Device-memory traffic is charged per byte, per DMA request (a short contiguous
run costs a whole request) and per stream (the latency before its first
request). Compute overlaps memory only as far as double buffering lets it: an
op whose per-core stream is a few tiles overlaps little (``overlap_fraction``).
"""

from __future__ import annotations

from math import log2

import numpy as np

from spyreopt.costmodel.coefficients import Coefficients

PS_PER_NS = 1000
COST_UNIT_US = 1e-6  # one fixed-point unit is one picosecond


def ps(ns: float) -> int:
    return int(round(ns * PS_PER_NS))


def pe_efficiency(c: Coefficients, rows_per_core):
    """PE-array row underfill: about 0.50 at 2 rows, 0.63 at 4, 0.72 at 8."""
    rows = np.asarray(rows_per_core, dtype=np.float64)
    return np.clip(1.0 - c.pt_underfill_c * rows ** (-c.pt_underfill_p), 0.05, 1.0)


def matmul_compute_ns(c: Coefficients, macs_per_core, rows_per_core):
    return macs_per_core / (c.macs_per_ns_per_core * pe_efficiency(c, rows_per_core))


def batch_refill_ns(c: Coefficients, refill_elems, cores):
    """A batched matmul whose right operand differs per batch item runs each item as its own matmul: every
    item after the first refills the PE array from its left operand (``(items - 1) x rows x k`` elements,
    ``OpCandidates.batch_refill_elems``), spread over the cores; 0 for a plain matmul."""
    return np.asarray(refill_elems, dtype=np.float64) / np.maximum(cores, 1) * c.matmul_batch_ns_per_elem


def vector_compute_ns(c: Coefficients, elems_per_core, transcendental, stick_reduce):
    weight = np.where(transcendental, c.transcendental_weight, 1.0)
    penalty = np.where(stick_reduce, c.stick_reduce_penalty, 1.0)
    return elems_per_core * weight * penalty / c.vector_elems_per_ns_per_core


def compute_ns(c: Coefficients, matmul, work, rows, transcendental, stick_reduce):
    """Per-core compute of an op: a matmul's MACs on the PE array, or vector work (elements)."""
    return np.where(matmul, matmul_compute_ns(c, work, rows), vector_compute_ns(c, work, transcendental, stick_reduce))


def transfer_ns(c: Coefficients, nbytes, requests=0, streams=0):
    """One direction of device-memory traffic: bytes, DMA requests, and the first-request latency of each stream."""
    return nbytes / c.hbm_bytes_per_ns + c.hbm_request_ns * requests + c.hbm_latency_ns * streams


def read_ns(c: Coefficients, distinct_bytes, requests=0, streams=0, shared_bytes=0):
    """A device-memory read several cores may share: each distinct byte crosses device memory once, and the
    busiest core receives its shared bytes at ``hbm_shared_bytes_per_ns`` (``model.sharing``)."""
    return np.maximum(transfer_ns(c, distinct_bytes, requests, streams), shared_bytes / c.hbm_shared_bytes_per_ns)


def core_floor_ns(c: Coefficients, read_bytes, write_bytes, cores):
    """The least time of an op's own device-memory traffic: each core moves its share of the reads and the
    write through its own DMA engine at ``1 / hbm_core_ns_per_byte`` (a lone core's write included), however
    fast the aggregate bandwidth (0: no floor)."""
    share = (np.asarray(read_bytes, dtype=np.float64) + np.asarray(write_bytes)) / np.maximum(cores, 1)
    return share * c.hbm_core_ns_per_byte


def mixed_ns(c: Coefficients, read_bytes, write_bytes, fraction=1.0):
    """Read/write turnaround: paid on the smaller direction while both stream at once (``fraction`` of the op)."""
    return c.hbm_mixed_ns_per_byte * fraction * np.minimum(read_bytes, write_bytes)


def hbm_ns(c: Coefficients, read_bytes, write_bytes):
    """Device-memory time of long runs (no request or latency terms): the public figure's form."""
    return transfer_ns(c, read_bytes + write_bytes) + mixed_ns(c, read_bytes, write_bytes)


def overlap_fraction(c: Coefficients, stream_bytes_per_core):
    """How much of an op streams while it computes: double buffering over ``stream / tile`` tiles."""
    if c.overlap_tile_bytes <= 0:
        return np.ones_like(np.asarray(stream_bytes_per_core, dtype=np.float64))
    return stream_bytes_per_core / (stream_bytes_per_core + c.overlap_tile_bytes)


def overlap(c: Coefficients, compute, mem, fraction=1.0):
    return compute + mem - c.overlap_gamma * fraction * np.minimum(compute, mem)


def _log2(split) -> np.ndarray:
    """log2 of each split, by ``math.log2`` on the few distinct values (the scalar library's rounding)."""
    split = np.maximum(np.asarray(split), 1)
    if split.ndim == 0:
        return np.float64(log2(int(split)))
    values, inverse = np.unique(split, return_inverse=True)
    return np.array([log2(int(v)) for v in values], dtype=np.float64)[inverse].reshape(split.shape)


def relayout_ns(c: Coefficients, runs_per_core, split, ingress_bytes, link_bytes=0, hops=0):
    """The slower of a core gathering its runs and taking in its bytes from other cores and the busiest ring
    link carrying its bytes, after the farthest fragment's ring latency."""
    per_run = c.relayout_run_ns + c.relayout_run_log_ns * _log2(split)
    gather = np.maximum(runs_per_core * per_run, 0.0) + ingress_bytes / c.relayout_bytes_per_ns
    return hops * c.relayout_hop_ns + np.maximum(gather, link_bytes / c.relayout_link_bytes_per_ns)


def restick_ns(c: Coefficients, staged_bytes, requests):
    """A restickify stages its data through device memory: bytes both ways, DMA requests, a fixed round trip."""
    return staged_bytes / c.restick_bytes_per_ns + requests * c.restick_run_ns + c.restick_latency_ns


def psum_ns(c: Coefficients, bytes_per_owner, k_split):
    """The partial-sum reduction of a k split over the ring (0 without one)."""
    return np.where(np.asarray(k_split) > 1, (np.asarray(k_split) - 1) * bytes_per_owner / c.psum_bytes_per_ns, 0.0)
