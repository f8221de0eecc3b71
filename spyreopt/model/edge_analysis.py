"""What it takes for a consumer layout to read a producer layout's output: in place, a relayout over the
ring (legality: destination cores a multiple of source cores, fan-in within the limit; its traffic and
time), or a restickify through device memory.

Split from ``model.candidates`` (the layouts of one op): these are rules about a pair of layouts.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from spyreopt.costmodel import analytic as cm
from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.model.candidates import Layout, OpCandidates
from spyreopt.model.graph_parts import Tensor
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.layout import contiguous_runs


@dataclass(frozen=True)
class EdgeAnalysis:
    """What it takes for a consumer layout to read a producer layout's resident output."""

    inplace: bool
    relayout_legal: bool
    relayout_ns: float
    fan_in: int
    copy_bytes: int  # per-core LX bytes of the consumer-side copy (relayout)
    why: str  # reason a relayout is illegal, for diagnostics
    runs: int = 0  # contiguous runs one consumer core gathers (relayout)
    link_bytes: int = 0  # bytes over the busiest directed ring link (relayout)
    hops: int = 0  # the longest way a fragment travels around the ring (relayout)
    ingress_bytes: int = 0  # bytes the busiest consumer core takes in from other cores (relayout)


def analyse_edge(
    prod_lay: Layout, cons: OpCandidates, cons_lay: Layout, j: int, tensor: Tensor, hw: HardwareSpec, coef: Coefficients
) -> EdgeAnalysis:
    reads = cons_lay.reads[j]
    own = prod_lay.owner_boxes
    sb = hw.stick_bytes
    inplace = all(own.get(c) == box for c, box in reads)
    src, dst = len(own), cons_lay.division.cores
    copy = cons.max_read_bytes(cons_lay, j, prod_lay.stick)
    fan_in, runs, why = _fan_in_and_runs(prod_lay, reads, tensor, sb)
    legal, reason = True, ""
    if dst % src:
        legal, reason = False, f"destination cores {dst} not a multiple of source cores {src}"
    elif fan_in > hw.relayout_fan_in:
        legal, reason = False, f"fan-in {fan_in} exceeds {hw.relayout_fan_in}"
    if not legal or inplace:
        return EdgeAnalysis(inplace, legal, 0.0, fan_in, copy, reason or why, runs)
    link, hops, ingress = ring_traffic(prod_lay, reads, tensor, hw)
    ns = float(cm.relayout_ns(coef, runs, fan_in, ingress, link, hops))
    return EdgeAnalysis(inplace, legal, ns, fan_in, copy, why, runs, link, hops, ingress)


def ring_traffic(prod_lay: Layout, reads, tensor: Tensor, hw: HardwareSpec) -> tuple[int, int, int]:
    """(bytes over the busiest directed ring link, longest hop count, most bytes one consumer core takes in
    from other cores) when every consumer core gathers its fragments from the owner cores, each the shorter
    way round (ties clockwise).

    Vectorised over (consumer core, owner slice): per dim, the overlap of each consumer box with each
    owner range (padded to sticks on the stick dim); their outer product is every fragment's bytes.
    A pure function of the slices' content, so pairs of layouts that slice alike (the same divisions on
    another op, another edge) share one computation (``_ring``).
    """
    own = tuple(prod_lay.owner_boxes.items())
    return _ring(own, reads, prod_lay.stick, tensor.elem_bytes, hw.cores, hw.stick_bytes)


@lru_cache(maxsize=1 << 16)
def _ring(own, reads, stick: int, eb: int, n: int, sb: int) -> tuple[int, int, int]:
    ranges, owner, bounds = _owners(own)
    cores, reach = _readers(reads)
    rank = len(ranges)
    nbytes = np.full((len(reads),) + (1,) * rank, sb, dtype=np.int64)
    for d in range(rank):
        (lo, hi), (r0, r1) = reach[d], bounds[d]
        ext = np.maximum(np.minimum(hi, r1) - np.maximum(lo, r0), 0)
        if d == stick:
            ext = -(-ext * eb // sb)
        nbytes = nbytes * ext.reshape((len(reads),) + (1,) * d + (-1,) + (1,) * (rank - d - 1))
    dst = np.broadcast_to(cores.reshape((-1,) + (1,) * rank), nbytes.shape)
    src = np.broadcast_to(owner[None], nbytes.shape)
    moves = (nbytes > 0) & (src >= 0) & (src != dst)
    o, c, b = src[moves], dst[moves], nbytes[moves]
    right, left = (c - o) % n, (o - c) % n
    hops = int(np.minimum(right, left).max(initial=0))
    ingress = int(np.bincount(c, weights=b, minlength=n).max(initial=0)) if len(c) else 0
    cw, ccw = np.zeros(2 * n + 1, dtype=np.int64), np.zeros(2 * n + 1, dtype=np.int64)
    way = right <= left  # clockwise: links o -> o+1 ...; else counter-clockwise, indexed by source core minus one
    np.add.at(cw, o[way], b[way])
    np.add.at(cw, o[way] + right[way], -b[way])
    np.add.at(ccw, c[~way], b[~way])
    np.add.at(ccw, c[~way] + left[~way], -b[~way])
    return max(_arc_max(cw, n), _arc_max(ccw, n)), hops, ingress


@lru_cache(maxsize=1 << 12)
def _owners(own: tuple) -> tuple[tuple, np.ndarray, tuple]:
    """The producer's side of a pair, from its ``(core, box)`` items: per dim its distinct ranges (sorted),
    the owner core of each cell of their grid (-1: none), and per dim the ranges' bounds as row vectors."""
    rank = len(own[0][1])
    ranges = tuple(tuple(sorted({box[d] for _, box in own})) for d in range(rank))
    where = [{r: x for x, r in enumerate(rs)} for rs in ranges]
    owner = np.full([len(rs) for rs in ranges], -1, dtype=np.int64)
    for c, box in own:
        owner[tuple(where[d][box[d]] for d in range(rank))] = c
    bounds = tuple(tuple(np.array([r[k] for r in rs], dtype=np.int64)[None, :] for k in (0, 1)) for rs in ranges)
    return ranges, owner, bounds


@lru_cache(maxsize=1 << 12)
def _readers(reads: tuple) -> tuple[np.ndarray, tuple]:
    """The consumer's side of a pair, from its ``(core, box)`` reads: the cores, and per dim the boxes'
    bounds as column vectors."""
    rank = len(reads[0][1])
    cores = np.array([c for c, _ in reads], dtype=np.int64)
    reach = tuple(
        tuple(np.array([box[d][k] for _, box in reads], dtype=np.int64)[:, None] for k in (0, 1)) for d in range(rank)
    )
    return cores, reach


def _arc_max(diff: np.ndarray, n: int) -> int:
    run = np.cumsum(diff[: 2 * n])
    return int((run[:n] + run[n:]).max())


def _fan_in_and_runs(prod_lay: Layout, reads, tensor: Tensor, sb: int) -> tuple[int, int, str]:
    """Per dim, the most producer slices one consumer slice overlaps (fan-in is their product)."""
    own_ranges = _owners(tuple(prod_lay.owner_boxes.items()))[0]
    return _fan(own_ranges, _read_ranges(reads), prod_lay.stick, tensor.elem_bytes, sb)


@lru_cache(maxsize=1 << 12)
def _read_ranges(reads: tuple) -> tuple:
    return tuple(tuple(sorted({box[d] for _, box in reads})) for d in range(len(reads[0][1])))


@lru_cache(maxsize=1 << 16)
def _fan(own_ranges: tuple, read_ranges: tuple, stick: int, eb: int, sb: int) -> tuple[int, int, str]:
    fan = 1
    frag_ext, whole_ext = [], []
    for d in range(len(own_ranges)):
        worst, worst_frag, worst_whole = 0, 1, 1
        for lo, hi in read_ranges[d]:
            hits = [(a, b) for a, b in own_ranges[d] if a < hi and lo < b]
            if len(hits) > worst:
                a, b = hits[0]
                worst, worst_frag, worst_whole = len(hits), min(hi, b) - max(lo, a), b - a
        fan *= max(worst, 1)
        frag_ext.append(worst_frag)
        whole_ext.append(worst_whole)
    frag = tuple((0, e) for e in frag_ext)
    whole = tuple((0, e) for e in whole_ext)
    runs = fan * contiguous_runs(frag, whole, stick, eb, sb)
    return fan, runs, ""


def restick_traffic(
    cands: OpCandidates, lay: Layout, j: int, stored: int, need: int, producer: Layout | None
) -> tuple[int, int]:
    """(bytes, DMA requests) a restickify of operand j stages through device memory.

    The consumer cores read their slices in the stored stick and transpose them. A
    resident producer (``producer`` given) first writes its slices out; a tensor
    already in device memory is written back in the needed stick, and the op then
    reads that copy like any device-memory operand.
    """
    nbytes, requests = cands.hbm_read_bytes(lay, j, stored), cands.hbm_read_requests(lay, j, stored)
    if producer is not None:
        return nbytes + producer.write_bytes, requests + producer.write_requests
    return nbytes + cands.hbm_read_bytes(lay, j, need), requests + cands.hbm_read_requests(lay, j, need)
