"""Random Formulations for testing backends on every feature of the standard form.

Plain numpy generators (seeded), used by tests and by the hypothesis strategies.
Every instance has a zero-memory candidate per node whose pairs are all allowed,
so a feasible assignment always exists.
"""

from __future__ import annotations

from itertools import product

import numpy as np

from spyreopt.model.formulation import Affine, Edge, Formulation, MaxTerm, Node, Placement


def random_formulation(
    seed: int = 0,
    *,
    num_nodes: int = 6,
    max_candidates: int = 4,
    edge_prob: float = 0.4,
    forbid_prob: float = 0.2,
    max_terms: bool = True,
    edge_usage: bool = True,
    tight: float = 0.6,
    placement: bool = False,
    inplace: bool = False,
) -> Formulation:
    """A DAG-shaped instance: nodes in schedule order, buffers live from producer to last consumer.

    ``tight`` scales the memory limit between 0 (only zero-memory candidates fit)
    and 1 (everything fits). ``inplace``: some nodes' buffers end at their last consumer, which may write over
    them (a tail edge with alias pairs, as ``model.inplace`` builds them; at most one donor per consumer).
    """
    rng = np.random.default_rng(seed)
    sizes = [int(rng.integers(1, max_candidates + 1)) for _ in range(num_nodes)]
    pairs = [(u, v) for v in range(num_nodes) for u in range(v) if rng.random() < edge_prob]
    last_use = list(range(1, num_nodes + 1))
    for u, v in pairs:
        last_use[u] = max(last_use[u], v + 1)
    nodes = []
    for i, s in enumerate(sizes):
        usages = rng.integers(0, 5, size=s) * 128
        usages[0] = 0  # the zero-memory fallback
        nodes.append(
            Node(f"n{i}", rng.integers(0, 100, size=s).astype(np.int64), usages.astype(np.int64), (i, last_use[i]))
        )
    edges = []
    for u, v in pairs:
        su, sv = sizes[u], sizes[v]
        allowed = rng.random((su, sv)) >= forbid_prob
        allowed[0, :] = True
        allowed[:, 0] = True
        usages = None
        if edge_usage:
            usages = (rng.integers(0, 3, size=(su, sv)) * 128).astype(np.int64)
            usages[0, :] = 0
            usages[:, 0] = 0
        edges.append(Edge(u, v, rng.integers(0, 50, size=(su, sv)).astype(np.int64), allowed, usages, (v, v + 1)))
    if inplace:
        nodes, edges = _with_tails(rng, nodes, edges, pairs)
    terms = []
    if max_terms:
        for i in range(num_nodes):
            if rng.random() < 0.5:
                continue
            incoming = [k for k, e in enumerate(edges) if e.v == i]
            alts = []
            for _ in range(2):
                parts = tuple((k, rng.integers(0, 40, size=edges[k].costs.shape).astype(np.int64)) for k in incoming)
                alts.append(Affine(rng.integers(0, 60, size=sizes[i]).astype(np.int64), parts))
            terms.append(MaxTerm(i, tuple(alts)))
    peak = sum(int(n.usages.max()) for n in nodes) + sum(int(e.usages.max()) for e in edges if e.usages is not None)
    limit = int(peak * tight) // 128 * 128
    return Formulation(
        nodes=tuple(nodes),
        edges=tuple(edges),
        usage_limit=limit,
        max_terms=tuple(terms),
        placement=Placement(limit, 128) if placement else None,
        cost_unit_us=1.0,
        name=f"random-{seed}",
    )


def _with_tails(rng, nodes: list[Node], edges: list[Edge], pairs) -> tuple[list[Node], list[Edge]]:
    """Half the nodes whose last consumer is a later node hand their buffer's last step to a tail edge; the
    consumer writes over it in a random 60% of the pairs where both hold memory."""
    nodes, edges = list(nodes), list(edges)
    taken: set[int] = set()
    for u, n in enumerate(list(nodes)):
        v = n.interval[1] - 1
        if v <= u or v in taken or (u, v) not in pairs or rng.random() < 0.5:
            continue
        taken.add(v)
        nodes[u] = Node(n.name, n.costs, n.usages, (u, v))
        alias = (rng.random((len(n.usages), len(nodes[v].usages))) < 0.6) & (n.usages[:, None] > 0)
        alias &= nodes[v].usages[None, :] > 0
        usage = np.where(alias, 0, n.usages[:, None]).astype(np.int64)
        zero = np.zeros(alias.shape, dtype=np.int64)
        edges.append(Edge(u, v, zero, None, usage, (v, v + 1), ("node", u), alias))
    return nodes, edges


def iopddl_document(intervals, costs, usages, edge_nodes=(), edge_costs=(), limit=None, name="t") -> dict:
    """A hand-written IOPDDL contest document (the JSON's shape), for tests of loaders and judges."""
    problem = {
        "name": name,
        "nodes": {"intervals": [list(iv) for iv in intervals], "costs": costs, "usages": usages},
        "edges": {"nodes": [list(e) for e in edge_nodes], "costs": list(edge_costs)},
    }
    if limit is not None:
        problem["usage_limit"] = limit
    return {"problem": problem}


def unplaced_optimum(f: Formulation) -> int | None:
    """The optimum of a tiny formulation by enumeration: allowed pairs and the usage limit hold, addresses are not
    placed (None when no assignment is feasible). The exact reference the backends' tests compare against."""

    def holds(a: tuple[int, ...]) -> bool:
        if not all(e.is_allowed(a[e.u], a[e.v]) for e in f.edges):
            return False
        return f.usage_limit is None or max(f.usage_profile(a), default=0) <= f.usage_limit

    feasible = (f.evaluate(a) for a in product(*(range(n.num_candidates) for n in f.nodes)) if holds(a))
    return min(feasible, default=None)
