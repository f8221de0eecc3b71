"""Node merging: nodes whose candidate is forced by a neighbour's move as one unit.

An edge (u, v) *maps* u to v when, for every usable candidate of u, at most
one candidate of v avoids a forbidden or near-forbidden cost (a pair cost at
or above ``near``, e.g. the IOPDDL contest's 1e18 entries, or a node cost that
high). Then in every plan without such a cost, v's candidate is a function of
u's, and v can be merged into u: the unit keeps u's candidates and records,
for each, the candidate of every member. Merging repeats on the merged tables
(a merge can create new mappings) until nothing maps. Single-candidate nodes
merge into any neighbour. On the IOPDDL instances this turns 816 nodes into a
few hundred units, and a move of a unit is the compound move that changes a
whole chain of dependent nodes at once.

Candidates of a unit that already pay a near-forbidden cost inside the unit
are dropped. Memory is not part of the criterion: it is exact for the cost
terms only, and the memory of every member is carried by its unit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spyreopt.model.formulation import Formulation


@dataclass
class Units:
    """A partition of the nodes into units; ``maps[u][j, c]`` is member j's candidate when unit u picks c."""

    members: list[np.ndarray]  # int64 node ids, root first
    maps: list[np.ndarray]  # int64 [members, S_unit]
    unit_of: np.ndarray  # int64 [nodes]
    slot_of: np.ndarray  # int64 [nodes]: row of the node in its unit's map

    @classmethod
    def build(cls, n: int, groups: list[tuple[list[int], np.ndarray]]) -> Units:
        unit_of = np.zeros(n, dtype=np.int64)
        slot_of = np.zeros(n, dtype=np.int64)
        for u, (members, _) in enumerate(groups):
            for j, m in enumerate(members):
                unit_of[m], slot_of[m] = u, j
        return cls([np.array(m, dtype=np.int64) for m, _ in groups], [mp for _, mp in groups], unit_of, slot_of)

    @property
    def count(self) -> int:
        return len(self.members)

    def expand(self, ua) -> np.ndarray:
        """Node assignment of a unit assignment."""
        a = np.zeros(len(self.unit_of), dtype=np.int64)
        for u, (members, mp) in enumerate(zip(self.members, self.maps)):
            a[members] = mp[:, ua[u]]
        return a

    def contract(self, a) -> np.ndarray | None:
        """Unit assignment of a node assignment, or None when some unit cannot express it."""
        a = np.asarray(a, dtype=np.int64)
        out = np.zeros(self.count, dtype=np.int64)
        for u, (members, mp) in enumerate(zip(self.members, self.maps)):
            hits = np.flatnonzero((mp == a[members][:, None]).all(axis=0))
            if not len(hits):
                return None
            out[u] = hits[0]
        return out

    def split_conflicts(self, a, sizes: np.ndarray) -> Units:
        """Dissolve into single nodes every unit that cannot express assignment ``a``."""
        a = np.asarray(a, dtype=np.int64)
        groups: list[tuple[list[int], np.ndarray]] = []
        for members, mp in zip(self.members, self.maps):
            if (mp == a[members][:, None]).all(axis=0).any():
                groups.append((members.tolist(), mp))
            else:
                groups.extend(([int(m)], np.arange(int(sizes[m]), dtype=np.int64)[None, :]) for m in members)
        return Units.build(len(a), groups)


def singletons(f: Formulation) -> Units:
    return Units.build(
        len(f.nodes), [([i], np.arange(n.num_candidates, dtype=np.int64)[None, :]) for i, n in enumerate(f.nodes)]
    )


def merge_units(f: Formulation, near: float) -> Units:
    """Merge along mapping edges until none is left (see module docstring)."""
    n = len(f.nodes)
    clip = float(near)
    unary: dict[int, np.ndarray] = {i: np.minimum(nd.costs.astype(np.float64), clip) for i, nd in enumerate(f.nodes)}
    members: dict[int, list[int]] = {i: [i] for i in range(n)}
    maps: dict[int, list[np.ndarray]] = {
        i: [np.arange(nd.num_candidates, dtype=np.int64)] for i, nd in enumerate(f.nodes)
    }
    adj: dict[int, dict[int, np.ndarray]] = {i: {} for i in range(n)}  # adj[u][v]: [S_u, S_v], dead = >= near
    for e in f.edges:
        table = np.minimum(e.costs.astype(np.float64), clip)
        if e.allowed is not None:
            table = np.where(e.allowed, table, clip)
        if e.u == e.v:
            unary[e.u] = unary[e.u] + np.diagonal(table)
            continue
        adj[e.u][e.v] = adj[e.u].get(e.v, 0.0) + table
        adj[e.v][e.u] = adj[e.u][e.v].T
    queue = sorted((u, v) for u in adj for v in adj[u])
    while queue:
        u, v = queue.pop()
        if u not in adj or v not in adj[u]:
            continue
        phi = _mapping(unary[u], adj[u][v], unary[v], clip)
        if phi is None:
            continue
        # merge v into u: v's members follow u through phi
        rows = np.arange(len(phi))
        unary[u] = unary[u] + unary[v][phi] + adj[u][v][rows, phi]
        members[u].extend(members.pop(v))
        maps[u].extend(mp[phi] for mp in maps.pop(v))
        del adj[u][v]
        for w, table in adj.pop(v).items():
            if w == u:
                continue
            moved = table[phi, :]
            del adj[w][v]
            adj[u][w] = adj[u][w] + moved if w in adj[u] else moved
            adj[w][u] = adj[u][w].T
        del unary[v]
        queue.extend((u, w) for w in adj[u])
        queue.extend((w, u) for w in adj[u])
    groups = []
    for root in sorted(members):
        live = np.flatnonzero(unary[root] < clip)
        if not len(live):
            live = np.arange(len(unary[root]))
        mp = np.stack(maps[root])[:, live]
        groups.append((members[root], mp))
    return Units.build(n, groups)


def _mapping(unary_u: np.ndarray, table: np.ndarray, unary_v: np.ndarray, clip: float) -> np.ndarray | None:
    """phi with phi[s_u] the only usable candidate of v for each usable s_u, or None."""
    if len(unary_v) == 1:
        return np.zeros(len(unary_u), dtype=np.int64)
    usable = (table < clip) & (unary_v < clip)[None, :]
    live = unary_u < clip
    if (usable[live].sum(axis=1) > 1).any():
        return None
    return np.argmin(table + unary_v[None, :], axis=1).astype(np.int64)
