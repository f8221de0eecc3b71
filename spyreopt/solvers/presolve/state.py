"""The mutable state of the reduction chain: nodes, edges and max terms as the reductions rewrite them.

Node indices never change (an eliminated node stays as a one-candidate
placeholder); edges are keyed by an increasing integer so that new edges
(merged, re-attached) get fresh keys. ``formulation()`` freezes the state into
a ``Formulation`` with the edges in key order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from spyreopt.errors import InfeasibleError
from spyreopt.model.formulation import Affine, BufferKey, Edge, Formulation, MaxTerm, Node
from spyreopt.solvers.presolve.limits import sat_add
from spyreopt.solvers.presolve.masks import Domains


def _int64(a: np.ndarray) -> np.ndarray:
    """``a`` as int64, shared when it is already: the state replaces its arrays, never writes into them."""
    return a if a.dtype == np.int64 else a.astype(np.int64)


def _frozen(a: np.ndarray) -> np.ndarray:
    """A read-only view of a state array for a frozen Formulation (no copy: the state never writes into one)."""
    v = a.view()
    v.setflags(write=False)
    return v


@dataclass
class NodeState:
    keep: list[int]  # original candidate index of each current candidate
    costs: np.ndarray
    usages: np.ndarray
    interval: tuple[int, int]
    frozen: bool  # read by a max term: never merged or eliminated
    edges: set[int] = field(default_factory=set)
    gone: bool = False  # eliminated: its choice follows from other nodes


@dataclass
class EdgeState:
    u: int
    v: int
    costs: np.ndarray  # [S_u, S_v]
    allowed: np.ndarray  # bool [S_u, S_v]
    usages: np.ndarray | None
    interval: tuple[int, int]
    origin: BufferKey | None  # the original buffer this edge's memory stands for
    protected: bool  # read by a max term, or part of an in-place reuse (a tail, or the buffer one continues)
    tail: BufferKey | None = None  # ``Edge.tail``, an edge named by its state key
    alias: np.ndarray | None = None  # ``Edge.alias``


@dataclass
class TermState:
    node: int
    alternatives: list[tuple[np.ndarray, list[tuple[int, np.ndarray]]]]


class State:
    """The formulation being reduced: nodes keep their index, edges are added and dropped by key."""

    def __init__(self, f: Formulation):
        self.f = f
        self.mem = f.usage_limit is not None or f.placement is not None
        frozen: set[int] = set()
        protected: set[int] = set()
        for m in f.max_terms:
            frozen.add(m.node)
            for alt in m.alternatives:
                for k, _ in alt.edge_parts:
                    protected.add(k)
                    frozen.update((f.edges[k].u, f.edges[k].v))
        for k, e in enumerate(f.edges):  # in-place reuse ties addresses: its edges and nodes stay as they are
            if e.tail is not None:
                protected.update([k] + ([e.tail[1]] if e.tail[0] == "edge" else []))
                frozen.update((e.u, e.v))
        self.nodes = [
            NodeState(
                list(range(n.num_candidates)),
                _int64(n.costs),
                _int64(n.usages),
                n.interval,
                i in frozen,
            )
            for i, n in enumerate(f.nodes)
        ]
        self.edges: dict[int, EdgeState] = {}
        self._next = 0
        for k, e in enumerate(f.edges):
            allowed = np.ones(e.costs.shape, bool) if e.allowed is None else e.allowed.astype(bool).copy()
            usages = None if e.usages is None else _int64(e.usages)
            alias = None if e.alias is None else e.alias.astype(bool).copy()
            self.add_edge(  # state keys start as the edge indices, so a tail naming an edge stays valid
                EdgeState(
                    e.u,
                    e.v,
                    _int64(e.costs),
                    allowed,
                    usages,
                    e.interval,
                    ("edge", k),
                    k in protected,
                    e.tail,
                    alias,
                )
            )
        self.terms = [
            TermState(
                m.node,
                [(_int64(a.unary), [(k, _int64(t)) for k, t in a.edge_parts]) for a in m.alternatives],
            )
            for m in f.max_terms
        ]
        self.terms_of: list[list[int]] = [[] for _ in f.nodes]  # the terms reading each node (their edges stay)
        for r, t in enumerate(self.terms):
            touched = {t.node}
            for _, parts in t.alternatives:
                touched.update(x for k, _ in parts for x in (self.edges[k].u, self.edges[k].v))
            for i in sorted(touched):
                self.terms_of[i].append(r)
        self.steps: list[tuple] = []
        self.dominated_by: dict[tuple[int, int], int] = {}
        self.counts = {
            k: 0 for k in ("bound", "arc", "lp", "dominated", "folded", "parallel", "follower", "leaf", "series")
        }

    # ---- bookkeeping -----------------------------------------------------
    def add_edge(self, e: EdgeState) -> int:
        k = self._next
        self._next += 1
        self.edges[k] = e
        self.nodes[e.u].edges.add(k)
        self.nodes[e.v].edges.add(k)
        return k

    def drop_edge(self, k: int) -> None:
        e = self.edges.pop(k)
        self.nodes[e.u].edges.discard(k)
        self.nodes[e.v].edges.discard(k)

    def live_mem(self, interval: tuple[int, int]) -> bool:
        return self.mem and interval[1] > interval[0]

    def edge_memory(self, e: EdgeState) -> bool:
        return e.usages is not None and self.live_mem(e.interval) and bool((e.usages[e.allowed] != 0).any())

    def oriented(self, k: int, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Edge k's cost, allowed and usage tables with node i on the rows (loops: [S, 1] diagonals)."""
        e = self.edges[k]
        if e.u == e.v:
            diag = lambda t: None if t is None else np.diagonal(t).copy()[:, None]  # noqa: E731
            return diag(e.costs), diag(e.allowed), diag(e.usages)
        if e.u == i:
            return e.costs, e.allowed, e.usages
        return e.costs.T, e.allowed.T, None if e.usages is None else e.usages.T

    def restrict(self, i: int, mask: np.ndarray) -> None:
        """Keep only node i's candidates where mask is True (every table follows)."""
        n = self.nodes[i]
        if mask.all():
            return
        if not mask.any():
            raise InfeasibleError(
                f"node {self.f.nodes[i].name}: no candidate is feasible",
                {"node": i},
            )
        n.keep = [c for c, m in zip(n.keep, mask) if m]
        n.costs, n.usages = n.costs[mask], n.usages[mask]
        for k in n.edges:
            e = self.edges[k]
            rows = mask if e.u == i else slice(None)
            cols = mask if e.v == i else slice(None)
            e.costs, e.allowed = e.costs[rows][:, cols], e.allowed[rows][:, cols]
            if e.usages is not None:
                e.usages = e.usages[rows][:, cols]
            if e.alias is not None:
                e.alias = e.alias[rows][:, cols]
        for r in self.terms_of[i]:
            t = self.terms[r]
            for a, (unary, parts) in enumerate(t.alternatives):
                if t.node == i:
                    unary = unary[mask]
                new_parts = []
                for k, table in parts:
                    e = self.edges[k]
                    rows = mask if e.u == i else slice(None)
                    cols = mask if e.v == i else slice(None)
                    new_parts.append((k, table[rows][:, cols]))
                t.alternatives[a] = (unary, new_parts)

    def add_unary(self, i: int, vec: np.ndarray) -> bool:
        total, over = sat_add(self.nodes[i].costs, vec)
        if over.any():
            return False
        self.nodes[i].costs = total
        return True

    def placeholder(self, v: int, usage: int) -> None:
        n = self.nodes[v]
        n.gone, n.keep = True, [0]
        n.costs, n.usages = np.zeros(1, np.int64), np.array([usage], np.int64)

    def memory_choice_free(self, v: int) -> int | None:
        """The usage every candidate of v has (0 when memory does not matter), or None if they differ."""
        n = self.nodes[v]
        if not self.live_mem(n.interval) or not (n.usages != 0).any():
            return 0
        return int(n.usages[0]) if (n.usages == n.usages[0]).all() else None

    # ---- reductions --------------------------------------------------------
    def add_loop(self, i: int, usage: np.ndarray, interval: tuple[int, int], origin: BufferKey | None) -> None:
        """Memory depending on node i alone, live over ``interval``: a zero-cost self-loop."""
        size = len(self.nodes[i].keep)
        self.add_edge(
            EdgeState(
                i,
                i,
                np.zeros((size, size), np.int64),
                np.ones((size, size), bool),
                np.diag(usage).astype(np.int64),
                interval,
                origin,
                False,
            )
        )

    def mergeable(self, v: int) -> bool:
        n = self.nodes[v]
        return not n.gone and not n.frozen and not any(self.edges[k].protected for k in n.edges)

    # ---- the frozen form, and the shared domain rules applied to it ------
    def formulation(self, name: str) -> tuple[Formulation, list[int]]:
        """The state as a Formulation (same node indices) and the edge key of each of its edges."""
        f = self.f
        nodes = tuple(
            Node(f.nodes[i].name, _frozen(n.costs), _frozen(n.usages), n.interval) for i, n in enumerate(self.nodes)
        )
        order = sorted(self.edges)
        index = {k: r for r, k in enumerate(order)}
        edges = tuple(
            Edge(
                e.u,
                e.v,
                _frozen(e.costs),
                None if e.allowed.all() else _frozen(e.allowed),
                None if e.usages is None else _frozen(e.usages),
                e.interval,
                e.tail if e.tail is None or e.tail[0] == "node" else ("edge", index[e.tail[1]]),
                None if e.alias is None else _frozen(e.alias),
            )
            for e in (self.edges[k] for k in order)
        )
        terms = tuple(
            MaxTerm(
                t.node,
                tuple(
                    Affine(_frozen(unary), tuple((index[k], _frozen(tab)) for k, tab in parts))
                    for unary, parts in t.alternatives
                ),
            )
            for t in self.terms
        )
        return Formulation(nodes, edges, f.usage_limit, terms, f.placement, f.cost_unit_us, name), order

    def apply(self, dom: Domains, order: list[int]) -> bool:
        """Keep what ``dom`` (computed on ``formulation()``) keeps; whether anything went."""
        if dom.conflict is not None:
            raise InfeasibleError(dom.conflict)
        changed = False
        for r, k in enumerate(order):
            e = self.edges[k]
            if e.u == e.v:
                allowed = dom.allowed[r] | ~np.eye(len(dom.masks[e.u]), dtype=bool)  # a loop reads its diagonal
            else:
                allowed = dom.allowed[r]
            new = e.allowed & allowed
            if not np.array_equal(new, e.allowed):
                e.allowed = new
                changed = True
        for i, mask in enumerate(dom.masks):
            keep = self.nodes[i].keep
            for t, s in dom.replaced[i].items():
                self.dominated_by[(i, keep[t])] = keep[s]
            if not mask.all():
                self.restrict(i, mask)
                changed = True
        for ours, theirs in (("bound", "bound"), ("arc", "unsupported"), ("dominated", "dominated"), ("lp", "lp")):
            self.counts[ours] += dom.counts.get(theirs, 0)
        self.counts["dominated"] += dom.counts["merged"]
        return changed
