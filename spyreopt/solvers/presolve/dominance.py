"""Dominance over candidates: a candidate no better than another in every table that reads it goes.

Candidate ``s'`` of node ``i`` is dropped when a kept ``s`` is no worse in
every table that reads node ``i``: its cost, its usage (when memory is
constrained and the node is live), and for every incident edge, pair by pair
against the other end's possible candidates, the pair cost, the pair usage and
every max-term table on that edge (a pair allowed for ``s'`` must be allowed
for ``s``), and the unary of every max term of ``i`` (``max`` is monotone, so
max terms cannot increase; with addresses, both alias the same pairs). Replacing ``s'`` by ``s`` keeps an
assignment feasible (every buffer keeps its offset and shrinks or vanishes) and no worse.
Identical candidates keep the lowest index (counted as "merged").
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict, deque

import numpy as np

from spyreopt.model.formulation import Formulation
from spyreopt.solvers.presolve.limits import BIG, live
from spyreopt.solvers.presolve.masks import Domains, arc_consistency


def _node_tables(f: Formulation, memory: bool) -> tuple[list[list[np.ndarray]], list[list[np.ndarray]]]:
    """Per node: max-term unaries; per edge: every table read pair by pair (cost, usage, max-term parts)."""
    unaries: list[list[np.ndarray]] = [[] for _ in f.nodes]
    tables: list[list[np.ndarray]] = []
    for e in f.edges:
        ts = [e.costs]
        if memory and e.usages is not None and live(e.interval):
            ts.append(e.usages)
        if f.placement is not None and e.alias is not None:  # an alias ties addresses: keep it exactly
            ts += [e.alias.astype(np.int64), -e.alias.astype(np.int64)]
        tables.append(ts)
    for m in f.max_terms:
        for alt in m.alternatives:
            unaries[m.node].append(alt.unary)
            for k, table in alt.edge_parts:
                tables[k].append(table)
    return unaries, tables


def _profile(f: Formulation, dom: Domains, i: int, memory: bool, unaries, tables) -> tuple[np.ndarray, np.ndarray]:
    """Every value candidate choice at node i can influence, one row per candidate in the domain."""
    n = f.nodes[i]
    rows = dom.domain(i)
    blocks = [n.costs[rows, None]]
    if memory and live(n.interval):
        blocks.append(n.usages[rows, None])
    blocks.extend(u[rows, None] for u in unaries[i])
    for k in f.incident_edges(i):
        e = f.edges[k]
        if e.u == e.v:
            ok = np.diagonal(dom.allowed[k])[rows]
            blocks.extend(np.where(ok, np.diagonal(t)[rows], BIG)[:, None] for t in tables[k])
            continue
        if e.u == i:
            cols = dom.domain(e.v)
            ok = dom.allowed[k][np.ix_(rows, cols)]
            blocks.extend(np.where(ok, t[np.ix_(rows, cols)], BIG) for t in tables[k])
        else:
            cols = dom.domain(e.u)
            ok = dom.allowed[k][np.ix_(cols, rows)].T
            blocks.extend(np.where(ok, t[np.ix_(cols, rows)].T, BIG) for t in tables[k])
    return rows, np.hstack(blocks).astype(np.int64)


class _Comparisons:
    """``better`` of a profile, remembered for the last ``KEPT`` profiles: the nodes of repeated layers have
    equal profiles, and comparing every pair of rows is most of dominance's work. A hit is checked equal
    element for element, so it returns exactly what the comparison would."""

    KEPT = 64

    def __init__(self) -> None:
        self.held: OrderedDict[bytes, tuple[np.ndarray, np.ndarray]] = OrderedDict()

    def better(self, prof: np.ndarray) -> np.ndarray:
        """[s, t]: row s is no worse than row t in every column."""
        key = hashlib.blake2b(prof.tobytes(), digest_size=16, person=repr(prof.shape).encode()[:16]).digest()
        held = self.held.get(key)
        if held is not None and np.array_equal(held[0], prof):
            self.held.move_to_end(key)
            return held[1]
        out = np.array([(prof[s] <= prof).all(axis=1) for s in range(len(prof))])
        self.held[key] = (prof, out)
        while len(self.held) > self.KEPT:
            self.held.popitem(last=False)
        return out


def prune_dominated(f: Formulation, dom: Domains, memory: bool, deadline: float | None = None) -> str | None:
    """Dominance to a fixpoint (module docstring), interleaved with arc consistency; stops early (still
    exact, ``dom.cut_by_clock`` set) at ``deadline``."""
    unaries, tables = _node_tables(f, memory)
    neighbours = [
        sorted({f.edges[k].u for k in f.incident_edges(i)} | {f.edges[k].v for k in f.incident_edges(i)})
        for i in range(len(f.nodes))
    ]
    seen = _Comparisons()
    queue = deque(range(len(f.nodes)))
    queued = set(queue)
    budget = 20 * len(f.nodes) + 100
    while queue and budget > 0:
        budget -= 1
        if deadline is not None and time.perf_counter() > deadline:
            dom.cut_by_clock = True
            break
        i = queue.popleft()
        queued.discard(i)
        if dom.masks[i].sum() < 2:
            continue
        rows, prof = _profile(f, dom, i, memory, unaries, tables)
        better = seen.better(prof)
        equal = better & better.T
        order = np.arange(len(rows))
        beats = (better & ~better.T) | (equal & (order[:, None] < order[None, :]))
        dropped = beats.any(axis=0)
        if not dropped.any():
            continue
        kept = ~dropped
        for t in np.flatnonzero(dropped):
            s = int(np.flatnonzero(kept & better[:, t])[0])
            dom.replaced[i][int(rows[t])] = int(rows[s])
            dom.counts["merged" if equal[s, t] else "dominated"] += 1
        dom.masks[i][rows[dropped]] = False
        changed = {i}
        conflict = arc_consistency(f, dom, [i], changed)
        if conflict:
            return conflict
        for j in sorted(changed):
            for nb in neighbours[j]:
                if nb not in queued:
                    queued.add(nb)
                    queue.append(nb)
    return None
