"""The coefficient-free quantities of an op's layouts and of an edge's layout pairs, as arrays.

These are what ``costmodel.spyre`` turns into time: bytes, DMA requests,
restickify traffic, relayout runs and ring traffic. They depend on shapes,
dtypes, views and the hardware only, never on names, so the Problem computes
them once per op signature (``candidates.op_signature``) and per pair of
signatures, and every op or edge with the same signature shares them; across
Problems too (``model.memo``, keyed by the layouts' tokens), so the stitched
whole graph and its plan check reuse what the segments computed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.costmodel.spyre import EdgeQuantities
from spyreopt.model import memo
from spyreopt.model.candidates import OpCandidates
from spyreopt.model.division import reduction_split
from spyreopt.model.edge_analysis import analyse_edge, restick_traffic
from spyreopt.model.graph_parts import Tensor
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.sharing import busiest_shared, read_sharing


@dataclass(frozen=True)
class LayoutQuantities:
    """Per layout of one op (arrays over its layouts; ``[L, operands]`` for the leaf restickify terms)."""

    compute_ns: np.ndarray
    psum_ns: np.ndarray
    footprint: np.ndarray
    write_bytes: np.ndarray
    write_requests: np.ndarray
    stream_bytes: np.ndarray
    split: np.ndarray
    leaf_bytes: np.ndarray  # distinct bytes of graph inputs and weights read (``model.sharing``)
    leaf_requests: np.ndarray
    leaf_shared: np.ndarray  # the busiest core's bytes of those reads that other cores read too
    leaf_restick_bytes: np.ndarray
    leaf_restick_requests: np.ndarray
    leaf_restick: np.ndarray
    reads_leaf: bool  # the op reads a graph input or weight: its device-memory read stream starts anyway
    held: np.ndarray  # LX bytes per core held whatever the residency: a loop's accumulator and staged operands
    alone: np.ndarray  # bool: one core (it streams reads and writes at once, without other cores' requests between)
    cores: np.ndarray  # cores of the division: they share the op's own device-memory traffic


def layout_quantities(oc: OpCandidates, leaf: tuple[bool, ...]) -> LayoutQuantities:
    """``leaf[j]``: operand j is a graph input or weight (read from device memory, stored stick-on-last)."""
    held = memo.tokens(oc.layouts)
    key = None if held is None else ("layouts", held, leaf)
    return memo.derived(key, lambda: _layout_quantities(oc, leaf))


def _layout_quantities(oc: OpCandidates, leaf: tuple[bool, ...]) -> LayoutQuantities:
    n, nj = len(oc.layouts), len(leaf)
    lb, lr = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    rb, rr = np.zeros((n, nj), dtype=np.int64), np.zeros((n, nj), dtype=np.int64)
    rs = np.zeros((n, nj), dtype=bool)
    ls = np.zeros(n, dtype=np.int64)
    for li, lay in enumerate(oc.layouts):
        sharings = []
        for j in range(nj):
            if not leaf[j]:
                continue
            stored = len(oc.g.tensors[oc.refs[j].base].shape) - 1
            need = stored if lay.required[j] is None else lay.required[j]
            sharings.append(read_sharing(oc, lay, j, need))
            lb[li] += sharings[-1].distinct_bytes
            lr[li] += sharings[-1].distinct_requests
            if need != stored:
                rb[li, j], rr[li, j] = restick_traffic(oc, lay, j, stored, need, None)
                rs[li, j] = True
        ls[li] = busiest_shared(sharings)
    lays = oc.layouts
    alone = np.array([x.division.cores == 1 for x in lays], dtype=bool)
    return LayoutQuantities(
        compute_ns=np.array([x.compute_ns for x in lays], dtype=np.float64),
        psum_ns=np.array([x.psum_ns for x in lays], dtype=np.float64),
        footprint=np.array([x.footprint for x in lays], dtype=np.int64),
        write_bytes=np.array([x.write_bytes for x in lays], dtype=np.int64),
        write_requests=np.where(alone, 0, [x.write_requests for x in lays]).astype(np.int64),
        stream_bytes=np.array([x.stream_bytes for x in lays], dtype=np.int64),
        split=np.array([reduction_split(oc.space, x.division) > 1 for x in lays], dtype=bool),
        leaf_bytes=lb,
        leaf_requests=np.where(alone, 0, lr),
        leaf_shared=ls,
        leaf_restick_bytes=rb,
        leaf_restick_requests=rr,
        leaf_restick=rs,
        reads_leaf=any(leaf),
        held=np.array([_held(x) for x in lays], dtype=np.int64),
        alone=alone,
        cores=np.array([x.division.cores for x in lays], dtype=np.int64),
    )


def edge_quantities(
    prod: OpCandidates, cons: OpCandidates, j: int, tensor: Tensor, hw: HardwareSpec, coef: Coefficients
) -> EdgeQuantities:
    """Every (producer layout, consumer layout) pair of operand j: reads, restickify traffic, slice matching.
    (``tensor`` is the producer's output, so the layouts' tokens, which carry the op keys, key it too.)"""
    ku, kv = memo.tokens(prod.layouts), memo.tokens(cons.layouts)
    key = None if ku is None or kv is None else ("edge", ku, kv, j)
    return memo.derived(key, lambda: _edge_quantities(prod, cons, j, tensor, hw, coef))


def _edge_quantities(
    prod: OpCandidates, cons: OpCandidates, j: int, tensor: Tensor, hw: HardwareSpec, coef: Coefficients
) -> EdgeQuantities:
    """Vectorised over the pairs: the reads depend on the consumer layout and the stick read (the producer's
    one of at most two), the restickify traffic also on the producer's write, and the slice analysis only on
    both untiled bases (a tiled layout slices like its base), so each is computed once and broadcast."""
    shape = (len(prod.layouts), len(cons.layouts))
    ints = {k: np.zeros(shape, dtype=np.int64) for k in _INT_FIELDS}
    flags = {k: np.zeros(shape, dtype=bool) for k in ("inplace", "relayout_legal")}
    stick_u = np.array([x.stick for x in prod.layouts], dtype=np.int64)
    need = [x.required[j] for x in cons.layouts]
    need_v = np.array([-1 if x is None else x for x in need], dtype=np.int64)
    restick = (need_v[None, :] >= 0) & (need_v[None, :] != stick_u[:, None])
    write = np.array([x.write_bytes for x in prod.layouts], dtype=np.int64)
    write_req = np.array([x.write_requests for x in prod.layouts], dtype=np.int64)
    for s in sorted({int(x) for x in stick_u}):
        rows = np.flatnonzero(stick_u == s)
        reads = np.zeros((3, shape[1]), dtype=np.int64)
        for b, lay_v in enumerate(cons.layouts):
            sharing = read_sharing(cons, lay_v, j, s if need[b] is None else need[b])  # the copy in the needed stick
            reads[:, b] = (
                sharing.distinct_bytes,
                sharing.distinct_requests if lay_v.division.cores > 1 else 0,
                busiest_shared([sharing]),
            )
        for k, row in zip(("read_bytes", "read_requests", "read_shared"), reads):
            ints[k][rows, :] = row
        for b in np.flatnonzero((need_v >= 0) & (need_v != s)).tolist():
            lay_v = cons.layouts[b]
            hb, hr = restick_traffic(cons, lay_v, j, s, need[b], None)
            ints["hbm_restick_bytes"][rows, b], ints["hbm_restick_requests"][rows, b] = hb, hr
            rb, rr = cons.hbm_read_bytes(lay_v, j, s), cons.hbm_read_requests(lay_v, j, s)
            ints["lx_restick_bytes"][rows, b] = rb + write[rows]  # a resident producer writes its slices out first
            ints["lx_restick_requests"][rows, b] = rr + write_req[rows]
            ints["restick_copy"][rows, b] = cons.max_read_bytes(lay_v, j, need[b])  # written in the needed stick
    base_u = np.array([_base(x, a) for a, x in enumerate(prod.layouts)], dtype=np.int64)
    base_v = np.array([_base(x, b) for b, x in enumerate(cons.layouts)], dtype=np.int64)
    keys = (base_u[:, None] * shape[1] + base_v[None, :]).ravel()
    where = np.flatnonzero(~restick.ravel())  # row-major, as the pairs were once visited one by one
    found, first, inverse = np.unique(keys[where], return_index=True, return_inverse=True)
    values = np.zeros((len(found), len(_SLICE_FIELDS) + 2), dtype=np.int64)
    for n, pos in enumerate(where[first].tolist()):
        a, b = divmod(pos, shape[1])
        ea = analyse_edge(prod.layouts[a], cons, cons.layouts[b], j, tensor, hw, coef)
        values[n] = [ea.inplace, ea.relayout_legal] + [getattr(ea, attr) for attr in _SLICE_FIELDS.values()]
    for c, k in enumerate(("inplace", "relayout_legal")):
        flags[k].ravel()[where] = values[inverse, c].astype(bool)
    for c, k in enumerate(_SLICE_FIELDS, start=2):
        ints[k].ravel()[where] = values[inverse, c]
    return EdgeQuantities(restick=restick, **flags, **ints)


def _held(lay) -> int:
    """LX bytes a tiled layout holds whatever its output's residency: an accumulator, staged operands."""
    if lay.tile is None:
        return 0
    return lay.tile.staged_bytes + (lay.tile.tile_bytes if lay.tile.accumulate else 0)


def _base(lay, index: int) -> int:
    return index if lay.tile is None else lay.tile.base


# quantity -> ``EdgeAnalysis`` field: what the slices of a layout pair decide, so a tiled pair copies all of them
# from its untiled bases (one list, so a field added here cannot be left at zero for tiled pairs)
_SLICE_FIELDS = {
    "runs": "runs", "fan_in": "fan_in", "copy": "copy_bytes", "link": "link_bytes", "hops": "hops",
    "ingress": "ingress_bytes",
}  # fmt: skip
_INT_FIELDS = (
    "read_bytes", "read_requests", "read_shared", "hbm_restick_bytes", "hbm_restick_requests", "lx_restick_bytes",
    "lx_restick_requests", "restick_copy", "runs", "fan_in", "copy", "link", "hops", "ingress",
)  # fmt: skip
