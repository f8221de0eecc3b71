"""Cost tables of a Problem's candidates, and the Formulation built from them.

An op's table (its own costs per candidate) depends only on its signature,
which operands are graph inputs or weights, and its candidate list; an edge's
table (mode and costs per candidate pair) only on both endpoints' signatures,
the operand, and both candidate lists. The Problem memoises both on those
keys, so a stack of identical layers computes each table once, and the
Formulation shares the (read-only) arrays between identical nodes and edges.
All arithmetic is ``costmodel.spyre``'s, vectorised over candidates.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from spyreopt.costmodel import spyre
from spyreopt.costmodel.analytic import COST_UNIT_US, mixed_ns
from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.model.formulation import Affine, Edge, Formulation, MaxTerm, Node, Placement
from spyreopt.model.geometry import LayoutQuantities
from spyreopt.model.inplace import donors, tail_edges
from spyreopt.model.staging import stage_edge_index, stage_edges
from spyreopt.model.tiling import guard_edges, node_interval


def frozen(a: np.ndarray) -> np.ndarray:
    """A shared table: read-only, so no backend can change it under another node."""
    a.setflags(write=False)
    return a


@dataclass(frozen=True)
class OpTable:
    """One op's own costs per candidate (ps), its scratchpad use and its leaf reads."""

    parts: spyre.OwnParts
    additive: np.ndarray
    usage: np.ndarray
    leaf_bytes: np.ndarray
    g1: np.ndarray  # 1 - gamma * fraction: the overlap factor of the op-time epigraph
    alt_mem: np.ndarray  # unary sides of the op-time epigraph: round(g1*compute) + mem ...
    alt_comp: np.ndarray  # ... and compute + round(g1*mem)


def op_table(
    c: Coefficients, lq: LayoutQuantities, layout: np.ndarray, residency: np.ndarray, branch: np.ndarray
) -> OpTable:
    """``layout``, ``residency`` and ``branch`` (codes of ``spyre.RESIDENCIES`` / ``BRANCHES``) per candidate."""
    kept = residency == 1  # "lx": the output is never written to device memory
    q = spyre.OwnQuantities(
        compute_ns=lq.compute_ns[layout],
        psum_ns=lq.psum_ns[layout],
        leaf_bytes=lq.leaf_bytes[layout],
        leaf_requests=lq.leaf_requests[layout],
        leaf_shared=lq.leaf_shared[layout],
        leaf_streams=np.full(len(layout), int(lq.reads_leaf), dtype=np.int64),
        leaf_restick_bytes=lq.leaf_restick_bytes[layout],
        leaf_restick_requests=lq.leaf_restick_requests[layout],
        leaf_restick=lq.leaf_restick[layout],
        write_bytes=np.where(kept, 0, lq.write_bytes[layout]),
        alone=lq.alone[layout],
        cores=lq.cores[layout],
        write_requests=lq.write_requests[layout],
        split=lq.split[layout],
        stream_bytes=lq.stream_bytes[layout],
        branch=branch,
    )
    parts = spyre.own_parts(c, q)
    usage = np.where(residency == 0, lq.held[layout], lq.footprint[layout])
    g1 = 1.0 - c.overlap_gamma * parts.fraction
    alt_mem = frozen(spyre.scaled(g1, parts.compute) + parts.mem)
    alt_comp = frozen(parts.compute + spyre.scaled(g1, parts.mem))
    return OpTable(parts, frozen(parts.additive), frozen(usage), q.leaf_bytes, g1, alt_mem, alt_comp)


@dataclass(frozen=True)
class EdgeTable:
    """One edge's modes and costs: compact over (producer layout x residency, consumer layout), and
    expanded over candidate pairs for the Formulation."""

    parts: spyre.EdgeParts
    pu: np.ndarray  # producer candidate -> row of ``parts``
    pv: np.ndarray  # consumer candidate -> column (its layout)
    mix: np.ndarray  # balance term on the read, charged to the consumer's "r" twins
    r_twin: np.ndarray  # per consumer candidate
    extra: np.ndarray  # [S_u, S_v] additive cost
    allowed: np.ndarray | None  # None: every pair
    copy: np.ndarray  # [S_u, S_v] LX bytes per core
    mem: np.ndarray  # [S_u, S_v] device-memory read time inside the consumer's op time
    mem_scaled: np.ndarray  # round(g1_v * mem): the other side of the epigraph


def edge_table(
    c: Coefficients,
    q: spyre.EdgeQuantities,
    u_cands: list,
    v_cands: list,
    v_fraction_by_layout: np.ndarray,
    v_g1: np.ndarray,
    v_reads_leaf: bool,
    loop: LoopClasses | None = None,
) -> EdgeTable:
    ukeys = sorted({(x.layout, x.residency) for x in u_cands})
    row = {k: n for n, k in enumerate(ukeys)}
    pu = np.array([row[(x.layout, x.residency)] for x in u_cands], dtype=np.int64)
    pv = np.array([x.layout for x in v_cands], dtype=np.int64)
    rows = np.array([k[0] for k in ukeys], dtype=np.int64)
    res = np.array([spyre.RESIDENCIES.index(k[1]) for k in ukeys], dtype=np.int64)
    parts = spyre.edge_parts(c, q, rows, res, 0 if v_reads_leaf else 1)
    if loop is not None:
        parts = loop_parts(c, q, parts, rows, res, 0 if v_reads_leaf else 1, loop)
    read = parts.read_bytes.astype(np.float64)  # the consumer's "r" twin charges the turnaround on this read
    mix = spyre.to_ps(mixed_ns(c, read, read, v_fraction_by_layout[None, :]))
    r_twin = np.array([x.branch == "r" for x in v_cands], dtype=bool)
    grid = np.ix_(pu, pv)
    ok = parts.mode[grid] != spyre.FORBIDDEN
    mem = parts.read[grid] + np.where(r_twin[None, :], mix[grid], 0)
    return EdgeTable(
        parts, pu, pv, mix, r_twin,
        frozen(parts.extra[grid]), None if ok.all() else frozen(ok), frozen(parts.copy[grid]),
        frozen(mem), frozen(spyre.scaled(v_g1[None, :], mem)),
    )  # fmt: skip


@dataclass(frozen=True)
class LoopClasses:
    """An edge's tiling relations over (producer layout, consumer layout): see ``tiling.edge_loop_classes``."""

    inner: np.ndarray  # bool: both ends tile the tensor's same dim with the same count (on chip allowed)
    touched: np.ndarray  # bool: some end is tiled
    tiles_u: np.ndarray  # per producer layout, its tile count (0: untiled)
    tiles_v: np.ndarray  # per consumer layout


def loop_parts(
    c: Coefficients, q: spyre.EdgeQuantities, parts: spyre.EdgeParts, rows, res, streams, loop: LoopClasses
) -> spyre.EdgeParts:
    """The edge's modes under the loop rules: an edge touching a tiled op stays on chip only inside a loop
    (then its copy is one tile) and otherwise goes through device memory; no restickify touches a loop; a
    loop's device-memory output feeds no op of the same tile count (it ends its loop)."""
    none = np.zeros_like(q.inplace)
    device = spyre.edge_parts(c, replace(q, inplace=none, relayout_legal=none), rows, res, streams)
    inner, touched = loop.inner[rows], loop.touched[rows]
    boundary = touched & ~inner
    pick = {f: np.where(boundary, getattr(device, f), getattr(parts, f)) for f in vars(parts)}
    mode = pick["mode"]
    tu = loop.tiles_u[rows][:, None]
    cut = touched & (mode == spyre.RESTICKIFY)
    cut |= (tu > 0) & (res[:, None] == 0) & (tu == loop.tiles_v[None, :])
    pick["mode"] = np.where(cut, spyre.FORBIDDEN, mode)
    tiles = np.maximum(loop.tiles_v, 1)[None, :]
    pick["copy"] = np.where(inner, pick["copy"] // tiles, pick["copy"])
    return spyre.EdgeParts(**pick)


def build_formulation(problem) -> Formulation:
    """The Problem's Formulation: a node per op, an edge per producer->consumer operand, the tails of in-place
    reuse (``model.inplace``), loop guards, staging edges, and a max term per op."""
    nodes, edges = [], []
    tables = [problem.op_table(i) for i in range(len(problem.ops))]
    found = donors(problem)
    ends = {d.producer: d.consumer for d in found if d.stage is None}  # a donor's buffer ends at its writer
    for i, (o, t) in enumerate(zip(problem.ops, tables)):
        lo, hi = node_interval(problem, i)
        nodes.append(Node(o.name, t.additive, t.usage, (lo, ends.get(i, hi))))
    etabs = [problem.edge_table(k) for k in range(len(problem.edges))]
    for e, t in zip(problem.edges, etabs):
        edges.append(Edge(e.producer, e.consumer, t.extra, t.allowed, t.copy, (e.consumer, e.consumer + 1)))
    edges.extend(tail_edges(problem, found))
    edges.extend(guard_edges(problem))
    holder = stage_edge_index(problem, len(edges))
    kept_ends = {d.stage: d.consumer for d in found if d.stage is not None}
    edges.extend(stage_edges(problem, kept_ends))  # then the kept slices' tails: ``staging.stage_edge_index``
    edges.extend(tail_edges(problem, found, {s: holder[(s,)] for s in range(len(problem.stages))}))
    terms = []
    for i, t in enumerate(tables):
        incoming = problem.in_edges[i]
        alt_mem = Affine(t.alt_mem, tuple((k, etabs[k].mem) for k in incoming))
        alt_comp = Affine(t.alt_comp, tuple((k, etabs[k].mem_scaled) for k in incoming))
        terms.append(MaxTerm(i, (alt_mem, alt_comp)))
    cap = problem.hw.planner_lx_bytes
    return Formulation(
        nodes=tuple(nodes),
        edges=tuple(edges),
        usage_limit=cap,
        max_terms=tuple(terms),
        placement=Placement(cap, problem.hw.stick_bytes),
        cost_unit_us=COST_UNIT_US,
        name=problem.graph.name,
    )
