"""A torch-spyre capture graph as a Formulation, and the answers back (``docs/torch-spyre.md``).

Node ``i`` is buffer ``i``; a candidate is ``(division, resident, shares)``: ``shares`` is the in-place
parent whose slot a resident buffer takes, or None. A spilled candidate costs the buffer's spill traffic
(bytes) and holds nothing; a resident one costs 0 and holds its per-core footprint over its live steps
``[uses[0], uses[-1] + 1)`` at one address. Every buffer keeps all its divisions spilled too, since a
resident parent's gate reads its children's divisions.

Edges join each parent in the graph to its child: a pair is forbidden where the parent is resident and
the pair of divisions is not in the child's match list (torch-spyre's slicing gate), or where the child
takes the parent's slot without the parent resident, a matching pair and equal footprints. In-place reuse
is the Formulation's tail edge: a parent with an in-place child ends one step early, and the edge holds
its footprint over the handoff step ``[t, t + 1)`` at its address, except for the pairs where the child
takes the slot (``Edge.alias``: the child's buffer is then at the parent's address from ``t`` on). A
parent used only at ``t`` has no node buffer: the edge alone holds it (a plain edge buffer), and when
the child takes the slot the parent's address is the child's. A parent hands its slot to one child: its
first in-place child in file order (``Model.restricted`` names any other; none in the published captures).

``objective="time"`` prices the same candidates with the fitted cost model instead
(``formats.torch_spyre_time``): predicted device-memory time of the spill traffic, ties toward fewer cores.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from spyreopt.errors import FormatError
from spyreopt.formats.torch_spyre import Answer, CaptureBuffer, CaptureGraph
from spyreopt.model.formulation import BufferKey, Edge, Formulation, Node, Placement, Solution

STICK = 128


def footprint(b: CaptureBuffer, d: int) -> int:
    """Per-core bytes under division ``d``: ``ceil(size / product of output splits)`` in whole sticks."""
    per_core = -(-b.size // prod(f for _, f in b.divisions[d].output))
    return -(-per_core // STICK) * STICK


def spill_bytes(b: CaptureBuffer) -> int:
    """Device-memory traffic torch-spyre charges a buffer kept off chip (0 for a size of -1)."""
    return 0 if b.size < 0 else (max(0, len(b.uses) - 1) + (0 if b.boundary_cost else 1)) * b.size


@dataclass(frozen=True)
class Model:
    graph: CaptureGraph
    capacity: int  # bytes, whole sticks
    formulation: Formulation
    candidates: tuple[tuple[tuple[int, bool, int | None], ...], ...]  # per node: (division, resident, shares)
    tail_edge: dict[int, int]  # parent node -> its tail edge
    restricted: tuple[str, ...]  # in-place pairs not modelled (a parent hands its slot to one child)
    objective: str


def build(graph: CaptureGraph, capacity: int, objective: str = "spill", coefficients=None) -> Model:
    """The Formulation of ``graph`` at ``capacity`` bytes (rounded down to whole sticks)."""
    if objective not in ("spill", "time"):
        raise FormatError(f"objective must be 'spill' or 'time', got {objective!r}")
    cap = capacity // STICK * STICK
    bufs = graph.buffers
    index = graph.by_name()
    heir, restricted = _heirs(graph)
    cands = []
    for i, b in enumerate(bufs):
        c = [(d, False, None) for d in range(len(b.divisions))]
        if b.residency_reason is None and b.size > 0:
            for d in range(len(b.divisions)):
                if footprint(b, d) <= cap:
                    c.append((d, True, None))
                    c += [(d, True, p) for p in _donors(graph, i, d, heir, cap)]
        cands.append(tuple(c))
    if objective == "time":
        from spyreopt.formats.torch_spyre_time import node_costs  # the cost model loads only for this objective

        costs = node_costs(graph, cands, coefficients)
    else:
        costs = [[0 if r else spill_bytes(b) for _, r, _ in c] for b, c in zip(bufs, cands)]
    nodes = []
    for i, (b, c) in enumerate(zip(bufs, cands)):
        lo, hi = b.uses[0], b.uses[-1] + 1
        if i in heir:
            hi -= 1  # the handoff step is the tail edge's
        usage = np.array([footprint(b, d) if r else 0 for d, r, _ in c], dtype=np.int64)
        nodes.append(Node(b.name, np.array(costs[i], dtype=np.int64), usage, (lo, hi)))
    edges, tails = [], {}
    for v, child in enumerate(bufs):
        for name in dict.fromkeys(child.parents):
            u = index.get(name)
            if u is None:
                continue  # outside the problem
            if heir.get(u) == v:
                tails[u] = len(edges)
            edges.append(_edge(graph, u, v, cands, heir.get(u) == v))
    f = Formulation(
        nodes=tuple(nodes),
        edges=tuple(edges),
        usage_limit=cap,
        placement=Placement(cap, STICK),
        cost_unit_us=1.0,
        name=f"torch-spyre {graph.label}",
    )
    return Model(graph, cap, f, tuple(cands), tails, restricted, objective)


def _heirs(graph: CaptureGraph) -> tuple[dict[int, int], tuple[str, ...]]:
    """parent node -> the child that may take its slot; the in-place pairs left out."""
    index = graph.by_name()
    heir: dict[int, int] = {}
    left = []
    for v, b in enumerate(graph.buffers):
        for name in b.in_place_parents:
            u = index.get(name)
            if u is None:
                continue
            p = graph.buffers[u]
            if p.residency_reason is not None or p.size < 0 or b.residency_reason is not None or b.size < 0:
                continue  # one of them never resides: nothing to share
            if u in heir:
                left.append(f"{name}->{b.name}")
                continue
            heir[u] = v
    return heir, tuple(left)


def _donors(graph: CaptureGraph, v: int, d: int, heir: dict[int, int], cap: int) -> list[int]:
    """Parents whose slot buffer ``v`` under division ``d`` can take: same footprint under a matching pair."""
    b = graph.buffers[v]
    index = graph.by_name()
    out = []
    for name in dict.fromkeys(b.in_place_parents):
        u = index.get(name)
        if u is None or heir.get(u) != v:
            continue
        p = graph.buffers[u]
        size = footprint(b, d)
        if any(c == d and footprint(p, pd) == size for pd, c in b.matches.get(name, ())) and size <= cap:
            out.append(u)
    return out


def _edge(graph: CaptureGraph, u: int, v: int, cands, tail: bool) -> Edge:
    p, c = graph.buffers[u], graph.buffers[v]
    match = np.zeros((len(p.divisions), len(c.divisions)), dtype=bool)
    for pd, cd in c.matches.get(p.name, ()):
        match[pd, cd] = True
    pd, pr, _ = (np.array(x) for x in zip(*cands[u]))
    cd, _, share = zip(*cands[v])
    cd, takes = np.array(cd), np.array([s == u for s in share])
    fp_p = np.array([footprint(p, d) for d in range(len(p.divisions))], dtype=np.int64)[pd]
    fp_c = np.array([footprint(c, d) for d in range(len(c.divisions))], dtype=np.int64)[cd]
    resident = pr.astype(bool)[:, None]
    same = fp_p[:, None] == fp_c[None, :]
    allowed = (~resident | match[np.ix_(pd, cd)]) & (~takes[None, :] | (resident & same))
    zeros = np.zeros(allowed.shape, dtype=np.int64)
    if not tail:
        return Edge(u, v, zeros, allowed)
    usage = np.where(resident & ~takes[None, :], fp_p[:, None], 0).astype(np.int64)
    t = c.uses[0]
    if len(p.uses) == 1:  # the parent lives only at the handoff step: the edge is its buffer, no node to tie to
        return Edge(u, v, zeros, allowed, usage, (t, t + 1))
    alias = allowed & resident & takes[None, :]
    return Edge(u, v, zeros, allowed, usage, (t, t + 1), ("node", u), alias)


# ---- answers -------------------------------------------------------------------------
def answers(model: Model, sol: Solution) -> list[Answer]:
    """The ``solved`` entries of a solution: each resident buffer at its address (a parent whose node ends
    before it starts sits at its tail's address, or at its heir's when the heir takes its slot)."""
    out = []
    for i, (b, s) in enumerate(zip(model.graph.buffers, sol.assignment)):
        d, resident, _ = model.candidates[i][s]
        out.append(Answer(b.name, d, _address(model, sol, i) if resident else None, resident))
    return out


def _address(model: Model, sol: Solution, i: int) -> int:
    keys: list[BufferKey] = [("node", i)]
    if i in model.tail_edge:
        keys.append(("edge", model.tail_edge[i]))
        keys.append(("node", model.formulation.edges[model.tail_edge[i]].v))
    for key in keys:
        if key in sol.offsets:
            return int(sol.offsets[key])
    raise FormatError(f"{model.graph.label} buffer {model.graph.buffers[i].name!r}: resident without an address")


def spill_all(model: Model) -> Solution:
    """The plan that keeps every buffer off chip under its committed division 0: always valid."""
    a = tuple(c.index((0, False, None)) for c in model.candidates)
    return Solution(a, {}, "feasible", model.formulation.evaluate(a))


def encode(model: Model, given: list[Answer] | tuple[Answer, ...]) -> Solution | None:
    """Answers (a capture's reference) as a Solution of the model, or None when they are not one of its
    plans (a division pair, share or address the model cannot hold); checked by the caller."""
    by = {a.name: a for a in given}
    f = model.formulation
    assignment = []
    for i, b in enumerate(model.graph.buffers):
        a = by.get(b.name)
        if a is None:
            return None
        share = None
        if a.resident:
            for p in b.in_place_parents:
                q = by.get(p)
                j = model.graph.by_name().get(p)
                if q is not None and j is not None and q.resident and q.address == a.address:
                    share = j
        want = (a.division, a.resident, share)
        if want not in model.candidates[i]:
            if share is None or (a.division, True, None) not in model.candidates[i]:
                return None
            want = (a.division, True, None)
        assignment.append(model.candidates[i].index(want))
    offsets: dict[BufferKey, int] = {}
    for spec in f.buffers(assignment):
        kind, k = spec.key
        owner = k if kind == "node" else f.edges[k].u
        address = by[model.graph.buffers[owner].name].address
        if address is None:
            return None
        offsets[spec.key] = address
    return Solution(tuple(assignment), offsets, "feasible", f.evaluate(assignment))
