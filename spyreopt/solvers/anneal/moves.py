"""The moves of the annealer, each evaluated incrementally on a SearchState.

Moves act on units (a node, or a chain of nodes whose candidates force each
other, see ``anneal.units``):

* ``single``: heat-bath choice of one unit's candidate (a Metropolis step that
  never wastes a proposal: the new candidate is drawn with probability
  proportional to exp(-cost / T) among those that keep the plan valid);
* ``flood``: force one unit to a different candidate, then greedily
  re-optimise its neighbours along edges, breadth first, a bounded number of
  units; the compound change is accepted as a whole (Metropolis);
* ``flip``: the same with the first unit moved across residency (a candidate
  with memory to one without, or back);
* ``pair``: move both ends of an edge jointly to a pair with a different
  table entry (e.g. a relayout instead of in-place use), chosen from the exact
  joint table of the two units;
* ``window``: an LNS window: a tree of units re-solved exactly by dynamic
  programming with the rest fixed.

All random draws come from one seeded stream, so a run is a pure function of
the formulation, the start and the seed.
"""

from __future__ import annotations

import math

import numpy as np

from spyreopt.solvers.anneal.model import CompiledModel
from spyreopt.solvers.anneal.state import Look, SearchState


class Stream:
    """Batched uniform draws from a numpy Generator (one Python call per draw, no per-draw numpy)."""

    def __init__(self, rng: np.random.Generator, batch: int = 8192):
        self.rng = rng
        self.batch = batch
        self.buf = rng.random(batch).tolist()
        self.k = 0

    def uniform(self) -> float:
        if self.k == self.batch:
            self.buf = self.rng.random(self.batch).tolist()
            self.k = 0
        self.k += 1
        return self.buf[self.k - 1]

    def index(self, n: int) -> int:
        return min(int(self.uniform() * n), n - 1)


def boltzmann(cost: np.ndarray, ok: np.ndarray, temp: float, u: float) -> int:
    """Index drawn with weight exp(-(cost - min) / temp) among ok entries (-1 if none)."""
    if not ok.any():
        return -1
    masked = np.where(ok, cost, np.inf)
    low = masked.min()
    if temp <= 0:
        return int(np.argmin(masked))
    w = np.exp((low - masked) / temp)
    c = np.cumsum(w)
    return min(int(np.searchsorted(c, u * c[-1], side="right")), len(c) - 1)


class Moves:
    def __init__(self, state: SearchState, stream: Stream, flood_size: int = 8, window_size: int = 40):
        self.s = state
        self.window_size = window_size
        self.m: CompiledModel = state.m
        self.r = stream
        self.flood_size = flood_size
        self.movable = np.flatnonzero(self.m.sizes > 1)
        self.flippable = np.array(
            [i for i in self.movable if len(np.unique(self.m.node_usage[i] > 0)) > 1], dtype=np.int64
        )
        self._pairs()

    def _pairs(self) -> None:
        """Pairs of movable units joined by a pair table.

        ``pair_keys``/``pair_tables`` list each pair once (u < v) for the pair
        move; ``dp_tables[(i, j)]`` is the [S_i, S_j] table (with forbidden
        entries at +inf, raw, and forbidden counts) in both orientations, for
        window moves.
        """
        m = self.m
        self.pair_keys = []
        self.pair_tables = []
        self.dp_tables: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        for p in m.pairs:
            if m.sizes[p.u] < 2 or m.sizes[p.v] < 2:
                continue
            bad = np.zeros_like(p.cost) if p.bad is None else p.bad
            self.pair_keys.append((p.u, p.v))
            self.pair_tables.append((p.cost, bad))
            self.dp_tables[(p.u, p.v)] = (np.where(bad > 0, np.inf, p.cost), p.cost, bad)
            self.dp_tables[(p.v, p.u)] = tuple(np.ascontiguousarray(x.T) for x in self.dp_tables[(p.u, p.v)])

    # ---- acceptance ------------------------------------------------------------
    def _metropolis(self, delta: float, temp: float) -> bool:
        if delta <= 0:
            return True
        if temp <= 0:
            return False
        return self.r.uniform() < math.exp(-delta / temp)

    def _finish(self, delta: float, temp: float) -> bool:
        """Commit a journaled compound move if valid and accepted, else roll it back."""
        s = self.s
        if s.journal_valid() and self._metropolis(delta, temp):
            s.journal.clear()
            return True
        s.rollback()
        return False

    # ---- moves -------------------------------------------------------------------
    def single(self, temp: float) -> bool:
        i = int(self.movable[self.r.index(len(self.movable))])
        lk = self.s.look(i)
        cur = int(self.s.a[i])
        pick = boltzmann(lk.cost, self.s.allowed(lk), temp, self.r.uniform())
        if pick < 0 or pick == cur:
            return False
        self.s.apply(lk, pick)
        return True

    def flood(self, temp: float) -> bool:
        i = int(self.movable[self.r.index(len(self.movable))])
        lk = self.s.look(i)
        ok = np.ones(len(lk.cost), dtype=bool) if lk.bad is None else lk.bad <= 0
        ok[self.s.a[i]] = False
        return self._compound(lk, ok, temp)

    def flip(self, temp: float) -> bool:
        if not len(self.flippable):
            return self.flood(temp)
        i = int(self.flippable[self.r.index(len(self.flippable))])
        lk = self.s.look(i)
        use = self.m.node_usage[i]
        ok = (use > 0) != (use[self.s.a[i]] > 0)
        if lk.bad is not None:
            ok &= lk.bad <= 0
        return self._compound(lk, ok, temp)

    def _compound(self, lk: Look, ok: np.ndarray, temp: float) -> bool:
        """Move lk.node to a candidate among ok, re-optimise neighbours, accept as a whole."""
        s = self.s
        pick = boltzmann(lk.cost, ok, temp, self.r.uniform())
        if pick < 0:
            return False
        delta = s.apply(lk, pick, journal=True)
        delta += self._reoptimise(list(self.m.neighbours[lk.node]), {lk.node})
        return self._finish(delta, temp)

    def _reoptimise(self, queue: list[int], seen: set[int]) -> float:
        """Greedy best moves of queued nodes, spreading along edges from every node that moved."""
        s, sizes = self.s, self.m.sizes
        delta = 0.0
        visits = 0
        while queue and visits < self.flood_size:
            j = int(queue.pop(0))
            if j in seen or sizes[j] < 2:
                continue
            seen.add(j)
            visits += 1
            lk = s.look(j)
            masked = np.where(s.allowed(lk), lk.cost, np.inf)
            best = int(np.argmin(masked))
            if masked[best] < lk.cost[s.a[j]]:
                delta += s.apply(lk, best, journal=True)
                queue.extend(self.m.neighbours[j].tolist())
        return delta

    def pair(self, temp: float) -> bool:
        if not self.pair_keys:
            return self.flood(temp)
        p = self.r.index(len(self.pair_keys))
        u, v = self.pair_keys[p]
        table, bad = self.pair_tables[p]
        s = self.s
        au, av = int(s.a[u]), int(s.a[v])
        lu, lv = s.look(u), s.look(v)
        # joint cost: each node's vector without this pair's table, plus the table itself
        joint = (lu.cost - table[:, av])[:, None] + (lv.cost - table[au, :])[None, :] + table
        ok = (table != table[au, av]) & (bad <= 0)
        if lu.bad is not None:
            ok &= ((lu.bad - bad[:, av]) <= 0)[:, None]
        if lv.bad is not None:
            ok &= ((lv.bad - bad[au, :]) <= 0)[None, :]
        ok[au, :] = False
        ok[:, av] = False
        pick = boltzmann(joint.ravel(), ok.ravel(), temp, self.r.uniform())
        if pick < 0:
            return False
        su, sv = divmod(pick, table.shape[1])
        delta = s.apply(lu, su, journal=True)
        delta += s.apply(s.look(v), sv, journal=True)
        return self._finish(delta, temp)

    def window(self, temp: float) -> bool:
        """Re-solve a tree of units exactly (min-sum dynamic programming) with the rest fixed.

        Max terms spanning several window edges and the joint memory use are
        not in the DP (each unit only keeps candidates that fit on their own);
        the exact change is evaluated when the result is applied, as for any
        compound move.
        """
        s = self.s
        order, parent = self._grow_tree()
        if len(order) < 2:
            return self.flood(temp)
        pick = self._solve_tree(order, parent)
        delta = 0.0
        for i in order:
            if pick[i] != s.a[i]:
                delta += s.apply(s.look(i), pick[i], journal=True)
        if not s.journal:
            return False
        return self._finish(delta, temp)

    def _grow_tree(self) -> tuple[list[int], dict[int, int]]:
        """Units reached from a random root, each added only when it links to exactly one unit
        already in: the window's pair tables then form a tree."""
        m, r = self.m, self.r
        root = int(self.movable[r.index(len(self.movable))])
        parent = {root: -1}
        order = [root]
        blocked: set[int] = set()
        frontier = [int(j) for j in m.neighbours[root]]
        while frontier and len(order) < self.window_size:
            j = frontier.pop(r.index(len(frontier)))
            if j in parent or j in blocked or m.sizes[j] < 2:
                continue
            links = [t for t in m.neighbours[j].tolist() if t in parent]
            if len(links) != 1 or (j, links[0]) not in self.dp_tables:
                blocked.add(j)
                continue
            parent[j] = links[0]
            order.append(j)
            frontier.extend(int(t) for t in m.neighbours[j] if t not in parent)
        return order, parent

    def _solve_tree(self, order: list[int], parent: dict[int, int]) -> dict[int, int]:
        """Best candidate of every window unit: leaves-first min-sum, then choices root-first."""
        s = self.s
        a = s.a
        children: dict[int, list[int]] = {i: [] for i in order}
        for c in order[1:]:
            children[parent[c]].append(c)
        unary = {}
        for i in order:
            lk = s.look(i)
            u = lk.cost.copy()  # minus the pair tables inside the window, which the DP adds back
            bad = None if lk.bad is None else lk.bad.copy()
            for j in children[i] + ([parent[i]] if parent[i] >= 0 else []):
                _, cost, pair_bad = self.dp_tables[(i, j)]
                u -= cost[:, a[j]]
                if bad is not None:
                    bad -= pair_bad[:, a[j]]
            ok = s.fits(lk)
            if bad is not None:
                ok = (bad <= 0) if ok is None else ok & (bad <= 0)
            if ok is not None:
                u[~ok] = np.inf
            unary[i] = u
        choice_of: dict[int, np.ndarray] = {}
        for c in reversed(order[1:]):
            p = parent[c]
            table = self.dp_tables[(p, c)][0] + unary[c][None, :]
            best = np.argmin(table, axis=1)
            choice_of[c] = best
            unary[p] = unary[p] + table[np.arange(len(best)), best]
        pick = {order[0]: int(np.argmin(unary[order[0]]))}
        for c in order[1:]:
            pick[c] = int(choice_of[c][pick[parent[c]]])
        return pick
