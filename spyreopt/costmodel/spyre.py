"""The Spyre cost of a plan, in one place: how the analytic terms compose into an op's time.

Every consumer of the cost calls these functions: the Problem's candidate and
pair tables (so the Formulation), the exact per-op breakdown, the plan check
(``own_parts``, ``edge_parts``, ``op_time``) and the coefficient fit
(``op_ns``). They take coefficient-free quantities (bytes, DMA requests,
streams, runs, ...) as numpy arrays and combine the formulas of
``costmodel.analytic``.

The planner's form rounds each part to whole picoseconds (``to_ps``) before it
is summed, so the objective is exact integer arithmetic; the fit's form
(``op_ns``) is the same composition per op in real numbers, so its
least-squares residuals stay smooth in the coefficients.

An op's cost, per candidate (layout x residency x balance branch):

* additive: launch overhead + partial sums of a k split + the refills of a
  batched matmul's items after the first (``analytic.batch_refill_ns``) + restickify of the
  graph inputs and weights it reads in another stick + the output write of a
  k split (after the partial sums) + per incoming edge its relayout or
  restickify;
* overlapped: ``time(compute, mem)`` with ``mem`` = its own device-memory
  reads and write + per incoming edge its device-memory read, where
  ``time = compute + mem - gamma * f * min(compute, mem)`` (``op_time``).

A device-memory read is ``analytic.read_ns``: its distinct bytes cross device
memory once however many cores read them, and the busiest core receives the
bytes it shares with other cores at ``hbm_shared_bytes_per_ns`` (the published
decode projections: an m split does not read the weight once per core). An op
on one core (``alone``) streams its write while it reads and pays no per-request
controller overhead (no other core's requests interleave): its write adds no time
(the published one-core softmax moves 8.4 MB in 32.5 µs). Each core moves its share of the op's own
reads and write through its own DMA engine (``analytic.core_floor_ns``): that share over the per-core
rate floors the op's own device-memory time, a lone core's write included (the sweep's one-core copy
moves 67 MB in 1,574 µs, 43 GB/s; 0 in the shipped default: no floor).

The device-memory turnaround ``a * f * min(r, w)`` is concave; the planner
resolves it with two twin candidates charging ``a*f*r`` (branch "r") or
``a*f*w`` (branch "w"), the fit takes the min directly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spyreopt.costmodel import loops
from spyreopt.costmodel.analytic import (
    PS_PER_NS,
    batch_refill_ns,
    core_floor_ns,
    mixed_ns,
    overlap,
    overlap_fraction,
    psum_ns,
    read_ns,
    relayout_ns,
    restick_ns,
    transfer_ns,
)
from spyreopt.costmodel.coefficients import Coefficients

MODES = ("inplace", "relayout", "restickify", "hbm", "spill")
FORBIDDEN = -1
INPLACE, RELAYOUT, RESTICKIFY, HBM, SPILL = range(5)
RESIDENCIES = ("hbm", "lx", "lx+hbm")
BRANCHES = ("-", "r", "w")


def to_ps(ns) -> np.ndarray:
    """Nanoseconds to whole picoseconds, half to even (exactly ``int(round(ns * 1000))`` per element)."""
    return np.round(np.asarray(ns, dtype=np.float64) * PS_PER_NS).astype(np.int64)


def op_time(c: Coefficients, compute, mem, fraction, *, integer: bool = True) -> np.ndarray:
    """``compute + mem - gamma*f*min(compute, mem)``; in integers (ps), as the max of two affine forms
    (``round(g1*compute) + mem`` and ``compute + round(g1*mem)``, g1 = 1 - gamma*f), the exact epigraph
    the Formulation's max terms hold."""
    if not integer:
        return overlap(c, compute, mem, fraction)
    g1 = 1.0 - c.overlap_gamma * np.asarray(fraction, dtype=np.float64)
    return np.maximum(scaled(g1, compute) + mem, compute + scaled(g1, mem))


def scaled(g1, x) -> np.ndarray:
    """``round(g1 * x)`` in integers, half to even: one side of the op-time epigraph."""
    return np.round(np.asarray(g1) * np.asarray(x, dtype=np.float64)).astype(np.int64)


# ---- an op's own parts, per candidate ---------------------------------------------------
@dataclass(frozen=True)
class OwnQuantities:
    """Coefficient-free quantities of an op's own work, one entry per candidate (or per op for the fit)."""

    compute_ns: np.ndarray  # from the layout (see ``analytic.matmul_compute_ns`` / ``vector_compute_ns``)
    psum_ns: np.ndarray
    leaf_bytes: np.ndarray  # distinct bytes of graph inputs and weights read from device memory
    leaf_requests: np.ndarray
    leaf_shared: np.ndarray  # the busiest core's bytes of those reads that other cores share
    leaf_streams: np.ndarray  # 1 when the op reads a graph input or weight (its read stream starts anyway)
    leaf_restick_bytes: np.ndarray  # [..., operands]: staged restickify traffic of each leaf operand (0: none)
    leaf_restick_requests: np.ndarray
    leaf_restick: np.ndarray  # [..., operands] bool: that leaf operand is restickified
    write_bytes: np.ndarray  # 0 when the output stays in scratchpad only
    write_requests: np.ndarray
    alone: np.ndarray  # bool: one core, whose write streams while it reads (duplex), so it adds no time
    cores: np.ndarray  # cores sharing the op's own reads and write (``analytic.core_floor_ns``)
    split: np.ndarray  # bool: a k split (the write follows the partial sums, not overlapped)
    stream_bytes: np.ndarray  # sets the overlap fraction
    branch: np.ndarray  # 0 "-" (exact min), 1 "r", 2 "w"


@dataclass(frozen=True)
class OwnParts:
    overhead: np.ndarray
    psum: np.ndarray
    restick: np.ndarray
    split_write: np.ndarray
    compute: np.ndarray
    mem: np.ndarray  # overlapped device-memory time of the op's own traffic (+ its balance term)
    fraction: np.ndarray

    @property
    def additive(self) -> np.ndarray:
        return self.overhead + self.psum + self.restick + self.split_write


def own_parts(c: Coefficients, q: OwnQuantities) -> OwnParts:
    """The costs of an op's candidates that do not depend on its incoming edges."""
    write = np.asarray(q.write_bytes)
    wrote = (write > 0).astype(np.int64)
    write_t = to_ps(transfer_ns(c, write, np.asarray(q.write_requests) * wrote, wrote))
    overlapped_write = np.where(q.split | q.alone, 0, write)
    mem = to_ps(read_ns(c, q.leaf_bytes, q.leaf_requests, q.leaf_streams, q.leaf_shared))
    mem = mem + np.where(q.split | q.alone, 0, write_t)
    mem = np.maximum(mem, to_ps(core_floor_ns(c, q.leaf_bytes, write, q.cores)))  # each core's own DMA
    frac = overlap_fraction(c, q.stream_bytes)
    # the turnaround on min(reads, write); the "r" twin charges it on the reads, the "w" twin on the write
    r_side = np.where(q.branch == 2, overlapped_write, q.leaf_bytes)
    w_side = np.where(q.branch == 1, q.leaf_bytes, overlapped_write)
    mem = mem + to_ps(mixed_ns(c, r_side, w_side, frac))
    restick = to_ps(restick_ns(c, q.leaf_restick_bytes, q.leaf_restick_requests))
    restick = np.where(q.leaf_restick, restick, 0).sum(axis=-1)
    shape = np.shape(q.compute_ns)
    overhead = np.broadcast_to(to_ps(np.float64(c.op_overhead_ns)), shape)
    split_write = np.where(q.split, write_t, 0)
    return OwnParts(overhead, to_ps(q.psum_ns), restick, split_write, to_ps(q.compute_ns), mem, frac)


# ---- an edge's parts, per (producer candidate, consumer layout) ------------------------------
@dataclass(frozen=True)
class EdgeQuantities:
    """Coefficient-free quantities of one producer->consumer operand over (producer layout, consumer layout)."""

    restick: np.ndarray  # bool: the consumer needs another stick than the producer writes
    read_bytes: np.ndarray  # distinct bytes of the device-memory read (of the copy in the needed stick if restickified)
    read_requests: np.ndarray
    read_shared: np.ndarray  # the busiest consumer core's bytes of that read that other cores share
    hbm_restick_bytes: np.ndarray  # restickify staged traffic when the producer wrote device memory only
    hbm_restick_requests: np.ndarray
    lx_restick_bytes: np.ndarray  # ... when the producer's output is resident (it writes its slices out first)
    lx_restick_requests: np.ndarray
    restick_copy: np.ndarray  # per-core LX bytes of the restickified copy
    inplace: np.ndarray  # bool: each consumer core reads exactly the slice its own producer core holds
    relayout_legal: np.ndarray  # bool
    runs: np.ndarray  # relayout: contiguous runs one consumer core gathers
    fan_in: np.ndarray
    copy: np.ndarray  # relayout copy, LX bytes per core
    link: np.ndarray  # bytes over the busiest ring link
    hops: np.ndarray
    ingress: np.ndarray  # bytes the busiest consumer core takes in from other cores


@dataclass(frozen=True)
class EdgeParts:
    """Arrays over (producer candidate, consumer layout); ``mode`` is FORBIDDEN where no mode exists."""

    mode: np.ndarray
    extra: np.ndarray  # relayout or restickify time, additive
    read: np.ndarray  # device-memory read time, inside the consumer's op time
    read_bytes: np.ndarray
    copy: np.ndarray  # LX bytes per core of a consumer-side copy
    restick: np.ndarray
    fan_in: np.ndarray


def edge_parts(c: Coefficients, q: EdgeQuantities, rows: np.ndarray, residency: np.ndarray, streams: int) -> EdgeParts:
    """Each edge mode and its cost: ``rows`` maps each producer candidate to its layout row of ``q``,
    ``residency`` its residency (index into RESIDENCIES); ``streams`` is 1 unless the consumer reads a
    graph input or weight anyway (one latency per op).

    Device memory only: the consumer reads it there (restickified first if it needs another stick).
    Resident: restickify when the stick differs, else in place when the slices match, else a relayout
    when legal and (the tensor is only on chip, or it beats the device-memory read), else the spill
    (``lx+hbm``: read back the written copy), else forbidden.
    """
    take = lambda a: np.asarray(a)[rows]  # noqa: E731
    restick, read_b = take(q.restick), take(q.read_bytes)
    read_ps = to_ps(read_ns(c, read_b, take(q.read_requests), streams, take(q.read_shared)))
    legal, inplace = take(q.relayout_legal), take(q.inplace)
    moving = legal & ~inplace
    relayout_ps = np.where(
        moving, to_ps(relayout_ns(c, take(q.runs), take(q.fan_in), take(q.ingress), take(q.link), take(q.hops))), 0
    )
    res = np.asarray(residency)[:, None]
    hbm, lx = res == 0, res == 1
    relayout = moving & (lx | (relayout_ps <= read_ps))
    conds = [hbm, restick, inplace, relayout, res == 2]
    mode = np.select(conds, [HBM, RESTICKIFY, INPLACE, RELAYOUT, SPILL], FORBIDDEN)
    hbm_rs = np.where(restick, to_ps(restick_ns(c, take(q.hbm_restick_bytes), take(q.hbm_restick_requests))), 0)
    lx_rs = to_ps(restick_ns(c, take(q.lx_restick_bytes), take(q.lx_restick_requests)))
    zero = np.zeros_like(read_ps)
    extra = np.select(conds, [hbm_rs, lx_rs, zero, relayout_ps, zero], 0)
    reads = (mode == HBM) | (mode == SPILL)
    copy = np.select(conds, [zero, take(q.restick_copy), zero, take(q.copy), zero], 0)
    fan = np.select(conds, [zero, zero, np.ones_like(zero), take(q.fan_in), zero], 0)
    return EdgeParts(mode, extra, np.where(reads, read_ps, 0), np.where(reads, read_b, 0), copy, restick, fan)


# ---- the same composition per op, unrounded, for the fit ---------------------------------------
def op_ns(
    c: Coefficients,
    v: dict[str, np.ndarray],
    relayout: dict[str, np.ndarray],
    relayout_op: np.ndarray,
    reads: dict[str, np.ndarray],
    read_op: np.ndarray,
):
    """Per op (arrays over ops), ns: its total, relayout and restickify time from its quantities summed over
    its candidate and edges (``v``: compute terms, ``r_bytes`` the distinct bytes it reads, ``w_``/``sw_``
    bytes, requests and streams of overlapped and split writes, ``core_bytes`` its own reads and write per
    core, ``refill`` a batched matmul's refill elements over ``cores``, ``rs_`` restickify traffic and count, ``stream``), its device-memory reads (``reads``: bytes, requests, streams, shared per read, ``read_op``
    its op's row: the leaf reads as one, then each edge's) and its relayout edges.

    The planner's ``own_parts`` + ``edge_parts`` + ``op_time`` in real numbers: each read is ``read_ns``,
    writes are transfers, the balance term takes ``min(r, w)`` directly, each restickify pays its own round trip.
    """
    tiles = v.get("tiles", np.ones(len(v["work"])))
    compute = loops.tiled_compute_ns(
        c, v["matmul"] > 0, v["work"], v["rows"], v["trans"] > 0, v["sred"] > 0, tiles, v.get("rows_tiled", 0) > 0
    )
    if "acc_elems" in v:  # a loop over a matmul's k adds each further tile's partial result
        compute = compute + loops.accumulate_ns(c, v["acc_elems"], tiles)
    frac = overlap_fraction(c, v["stream"])
    read_t, leaf_t = np.zeros(len(compute)), np.zeros(len(compute))
    each = read_ns(c, reads["bytes"], reads["req"], reads["streams"], reads["shared"])
    np.add.at(read_t, read_op, each)
    first = np.r_[True, read_op[1:] != read_op[:-1]] if len(read_op) else np.zeros(0, dtype=bool)
    np.add.at(leaf_t, read_op[first], each[first])  # an op's first read is its leaf reads (``fit._op_terms``)
    write_t = transfer_ns(c, v["w_bytes"], v["w_req"], v["w_streams"])
    mem = read_t + write_t + mixed_ns(c, v["r_bytes"], v["w_bytes"], frac)
    if "core_bytes" in v:  # the per-core floor of its own reads and write, as ``own_parts`` (edge reads on top)
        mem = mem + np.maximum(v["core_bytes"] * c.hbm_core_ns_per_byte - leaf_t - write_t, 0.0)
    split_write = transfer_ns(c, v["sw_bytes"], v["sw_req"], v["sw_streams"])
    count = v["rs_count"]
    restick = np.where(count > 0, restick_ns(c, v["rs_bytes"], v["rs_req"]) + (count - 1) * c.restick_latency_ns, 0.0)
    edge = relayout_ns(c, relayout["runs"], relayout["fan_in"], relayout["ingress"], relayout["link"], relayout["hops"])
    moves = np.zeros(len(compute))
    np.add.at(moves, relayout_op, edge)
    psum = psum_ns(c, v["psum_bytes"], v["ksplit"]) + batch_refill_ns(c, v["refill"], v["cores"])
    if "iter_streams" in v:
        psum = psum + loops.iteration_ns(c, tiles, v["iter_streams"])
    total = c.op_overhead_ns + psum + split_write + restick + moves + op_time(c, compute, mem, frac, integer=False)
    return {"op": total, "relayout": moves, "restickify": restick}
