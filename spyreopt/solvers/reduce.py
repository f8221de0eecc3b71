"""Exact reductions of a Formulation, with the map back to the original assignment.

Any backend may solve ``reduce_formulation(f).formulation`` instead of ``f``:
for every feasible reduced assignment ``a``, ``expand(a)`` is feasible in ``f``
with the same objective, and the reduced optimum equals the original optimum.
Node indices are kept (an eliminated node stays as a one-candidate,
edgeless placeholder), so buffers of nodes keep their keys.

Reductions, applied until none applies:

* bound pruning (with ``upper_bound``, the objective of a known feasible
  assignment): candidates and edge pairs whose lower bound exceeds it are
  removed / forbidden; this turns the IOPDDL 1e18 "infinite" entries into
  forbidden pairs;
* arc consistency: a candidate with no allowed partner on some edge goes;
* dominance: candidate ``s`` goes when some ``t`` is no worse in cost, memory,
  every incident edge row (where ``s`` is allowed) and every max-term part;
* folding: self-loops and edges to a one-candidate node become unary costs;
  parallel edges are summed;
* followers: when an edge allows exactly one ``v`` candidate per ``u``
  candidate, ``v`` is merged into ``u`` (its edges re-attach to ``u``; its
  memory moves to a self-loop on ``u`` over ``v``'s interval);
* leaf and series elimination of nodes whose memory does not depend on their
  choice: the node's best choice is folded into its neighbour's costs (leaf)
  or into a new edge between its two neighbours (series).

Nodes and edges that a max term reads are never merged or eliminated. Integer
arithmetic is exact: an operation whose result would leave int64 is skipped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from spyreopt.errors import InfeasibleError, SolverError
from spyreopt.model.formulation import Affine, BufferKey, Edge, Formulation, MaxTerm, Node, Solution

I64_MAX = np.iinfo(np.int64).max
I64_MIN = np.iinfo(np.int64).min


def _sat_add(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int64 a + b saturated at the int64 range, and where it saturated."""
    a, b = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64))
    with np.errstate(over="ignore"):
        s = a + b
    hi = (a > 0) & (b > 0) & (s < 0)
    lo = (a < 0) & (b < 0) & (s >= 0)
    s = np.where(hi, I64_MAX, np.where(lo, I64_MIN, s))
    return s, hi | lo


@dataclass
class _N:
    keep: list[int]  # original candidate index of each current candidate
    costs: np.ndarray
    usages: np.ndarray
    interval: tuple[int, int]
    frozen: bool  # read by a max term: never merged or eliminated
    edges: set[int] = field(default_factory=set)
    gone: bool = False  # eliminated: its choice follows from other nodes


@dataclass
class _E:
    u: int
    v: int
    costs: np.ndarray  # [S_u, S_v]
    allowed: np.ndarray  # bool [S_u, S_v]
    usages: np.ndarray | None
    interval: tuple[int, int]
    origin: BufferKey | None  # the original buffer this edge's memory stands for
    protected: bool  # read by a max term


@dataclass
class _T:
    node: int
    alternatives: list[tuple[np.ndarray, list[tuple[int, np.ndarray]]]]


@dataclass
class Reduction:
    """A reduced Formulation and the maps between its assignments and the original's."""

    original: Formulation
    formulation: Formulation
    keep: list[list[int]]  # per node: original index of each reduced candidate
    steps: list[tuple]  # eliminations in order: (v, parents, {parent values: v value})
    edge_origin: list[BufferKey | None]
    dominated_by: dict[tuple[int, int], int]
    stats: dict

    def expand(self, assignment) -> tuple[int, ...]:
        """The original assignment a reduced assignment stands for (same objective, same memory)."""
        x = [self.keep[i][int(s)] for i, s in enumerate(assignment)]
        for v, parents, table in reversed(self.steps):
            x[v] = table[tuple(x[p] for p in parents)]
        return tuple(x)

    def expand_offsets(self, offsets: dict[BufferKey, int]) -> dict[BufferKey, int]:
        """Offsets keyed by the original buffers (a merged node's memory rides on a self-loop)."""
        out = {}
        for key, off in offsets.items():
            orig = key if key[0] == "node" else self.edge_origin[key[1]]
            if orig is None:
                raise ValueError(f"reduced buffer {key} has no original buffer")
            out[orig] = off
        return out

    def project_offsets(self, offsets: dict[BufferKey, int]) -> dict[BufferKey, int]:
        """Original offsets keyed by the reduced buffers (the inverse of ``expand_offsets``)."""
        reduced = {orig: ("edge", k) for k, orig in enumerate(self.edge_origin) if orig is not None}
        return {reduced.get(key, key): off for key, off in offsets.items() if key[0] == "node" or key in reduced}

    def project(self, assignment) -> tuple[int, ...] | None:
        """A reduced assignment no worse than a feasible original one (a warm start), or None.

        Dominated candidates are replaced by their dominators; None when the
        assignment uses a candidate pruned as infeasible or above the bound.
        """
        gone = {step[0] for step in self.steps}
        out = []
        for i, s in enumerate(assignment):
            if i in gone:
                out.append(0)
                continue
            s = int(s)
            index = {c: r for r, c in enumerate(self.keep[i])}
            while s not in index:
                if (i, s) not in self.dominated_by:
                    return None
                s = self.dominated_by[(i, s)]
            out.append(index[s])
        return tuple(out)


class _Reducer:
    def __init__(self, f: Formulation, upper_bound: int | None):
        self.f = f
        self.ub = upper_bound
        self.mem = f.usage_limit is not None or f.placement is not None
        frozen: set[int] = set()
        protected: set[int] = set()
        for m in f.max_terms:
            frozen.add(m.node)
            for alt in m.alternatives:
                for k, _ in alt.edge_parts:
                    protected.add(k)
                    frozen.update((f.edges[k].u, f.edges[k].v))
        self.nodes = [
            _N(
                list(range(n.num_candidates)),
                n.costs.astype(np.int64),
                n.usages.astype(np.int64),
                n.interval,
                i in frozen,
            )
            for i, n in enumerate(f.nodes)
        ]
        self.edges: dict[int, _E] = {}
        self._next = 0
        for k, e in enumerate(f.edges):
            allowed = np.ones(e.costs.shape, bool) if e.allowed is None else e.allowed.astype(bool).copy()
            usages = None if e.usages is None else e.usages.astype(np.int64)
            self._add_edge(
                _E(e.u, e.v, e.costs.astype(np.int64), allowed, usages, e.interval, ("edge", k), k in protected)
            )
        self.terms = [
            _T(
                m.node,
                [
                    (a.unary.astype(np.int64), [(k, t.astype(np.int64)) for k, t in a.edge_parts])
                    for a in m.alternatives
                ],
            )
            for m in f.max_terms
        ]
        self.steps: list[tuple] = []
        self.dominated_by: dict[tuple[int, int], int] = {}
        self.counts = {k: 0 for k in ("bound", "arc", "dominated", "folded", "parallel", "follower", "leaf", "series")}

    # ---- bookkeeping -----------------------------------------------------
    def _add_edge(self, e: _E) -> int:
        k = self._next
        self._next += 1
        self.edges[k] = e
        self.nodes[e.u].edges.add(k)
        self.nodes[e.v].edges.add(k)
        return k

    def _drop_edge(self, k: int) -> None:
        e = self.edges.pop(k)
        self.nodes[e.u].edges.discard(k)
        self.nodes[e.v].edges.discard(k)

    def _live(self, interval: tuple[int, int]) -> bool:
        return self.mem and interval[1] > interval[0]

    def _edge_memory(self, e: _E) -> bool:
        return e.usages is not None and self._live(e.interval) and bool((e.usages[e.allowed] != 0).any())

    def _oriented(self, k: int, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Edge k's cost, allowed and usage tables with node i on the rows (loops: [S, 1] diagonals)."""
        e = self.edges[k]
        if e.u == e.v:
            diag = lambda t: None if t is None else np.diagonal(t).copy()[:, None]  # noqa: E731
            return diag(e.costs), diag(e.allowed), diag(e.usages)
        if e.u == i:
            return e.costs, e.allowed, e.usages
        return e.costs.T, e.allowed.T, None if e.usages is None else e.usages.T

    def _restrict(self, i: int, mask: np.ndarray) -> None:
        """Keep only node i's candidates where mask is True (every table follows)."""
        n = self.nodes[i]
        if mask.all():
            return
        if not mask.any():
            raise InfeasibleError(
                f"node {self.f.nodes[i].name}: no candidate is feasible"
                + ("" if self.ub is None else f" within the upper bound {self.ub}"),
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
        for t in self.terms:
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

    def _add_unary(self, i: int, vec: np.ndarray) -> bool:
        total, over = _sat_add(self.nodes[i].costs, vec)
        if over.any():
            return False
        self.nodes[i].costs = total
        return True

    def _placeholder(self, v: int, usage: int) -> None:
        n = self.nodes[v]
        n.gone, n.keep = True, [0]
        n.costs, n.usages = np.zeros(1, np.int64), np.array([usage], np.int64)

    def _memory_choice_free(self, v: int) -> int | None:
        """The usage every candidate of v has (0 when memory does not matter), or None if they differ."""
        n = self.nodes[v]
        if not self._live(n.interval) or not (n.usages != 0).any():
            return 0
        return int(n.usages[0]) if (n.usages == n.usages[0]).all() else None

    # ---- reductions --------------------------------------------------------
    def bound_prune(self) -> bool:
        """Drop candidates and forbid pairs whose lower bound exceeds the upper bound."""
        if self.ub is None:
            return False
        min_node = {i: int(n.costs.min()) for i, n in enumerate(self.nodes)}
        min_edge = {}
        for k, e in self.edges.items():
            costs, allowed, _ = self._oriented(k, e.u)
            if not allowed.any():
                raise InfeasibleError(
                    f"edge between {self.f.nodes[e.u].name} and {self.f.nodes[e.v].name}: no allowed pair"
                )
            min_edge[k] = int(costs[allowed].min())
        base = sum(min_node.values()) + sum(min_edge.values())
        for t in self.terms:
            base += max(int(u.min()) + sum(int(tab.min()) for _, tab in parts) for u, parts in t.alternatives)
        slack = self.ub - base  # every candidate and pair may add at most this above its minimum
        if slack < 0:
            raise InfeasibleError(f"lower bound {base} exceeds the upper bound {self.ub}")
        changed = False
        for i, n in enumerate(self.nodes):
            extra = [int(c) - min_node[i] for c in n.costs]
            for k in n.edges:
                costs, allowed, _ = self._oriented(k, i)
                masked = np.where(allowed, costs, I64_MAX)
                rowmin = masked.min(axis=1)
                extra = [x + int(r) - min_edge[k] for x, r in zip(extra, rowmin)]
            mask = np.array([x <= slack for x in extra])
            if not mask.all():
                self.counts["bound"] += int((~mask).sum())
                self._record_drop(i, mask, None)
                self._restrict(i, mask)
                changed = True
        for k, e in self.edges.items():
            if e.u == e.v:
                continue  # a loop's pairs are its node's candidates, pruned above
            room = slack + min_edge[k] + min_node[e.u] + min_node[e.v]
            if room >= I64_MAX:
                continue
            pair, _ = _sat_add(e.costs, self.nodes[e.u].costs[:, None])
            pair, _ = _sat_add(pair, self.nodes[e.v].costs[None, :])
            bad = e.allowed & (pair > room)
            if bad.any():
                e.allowed = e.allowed & ~bad
                changed = True
        return changed

    def arc_consistency(self) -> bool:
        changed = False
        for i, n in enumerate(self.nodes):
            mask = np.ones(len(n.keep), bool)
            for k in n.edges:
                _, allowed, _ = self._oriented(k, i)
                mask &= allowed.any(axis=1)
            if not mask.all():
                self.counts["arc"] += int((~mask).sum())
                self._record_drop(i, mask, None)
                self._restrict(i, mask)
                changed = True
        return changed

    def _record_drop(self, i: int, mask: np.ndarray, dominator: np.ndarray | None) -> None:
        if dominator is None:
            return
        keep = self.nodes[i].keep
        for s in np.flatnonzero(~mask):
            self.dominated_by[(i, keep[s])] = keep[int(dominator[s])]

    def dominance(self) -> bool:
        changed = False
        for i, n in enumerate(self.nodes):
            if n.gone or len(n.keep) < 2:
                continue
            # better[t, s]: t is no worse than s in every respect
            better = n.costs[:, None] <= n.costs[None, :]
            if self._live(n.interval):
                better &= n.usages[:, None] <= n.usages[None, :]
            for k in n.edges:
                costs, allowed, usages = self._oriented(k, i)
                ok = allowed[:, None, :] & (costs[:, None, :] <= costs[None, :, :])
                if usages is not None and self._live(self.edges[k].interval):
                    ok &= usages[:, None, :] <= usages[None, :, :]
                better &= (ok | ~allowed[None, :, :]).all(axis=2)
            for t in self.terms:
                for unary, parts in t.alternatives:
                    if t.node == i:
                        better &= unary[:, None] <= unary[None, :]
                    for k, table in parts:
                        e = self.edges[k]
                        if i not in (e.u, e.v):
                            continue
                        _, allowed, _ = self._oriented(k, i)
                        tab = np.diagonal(table)[:, None] if e.u == e.v else (table if e.u == i else table.T)
                        ok = tab[:, None, :] <= tab[None, :, :]
                        better &= (ok | ~allowed[None, :, :]).all(axis=2)
            size = len(n.keep)
            idx = np.arange(size)
            # t removes s when t is no worse and either strictly better somewhere or an earlier tie
            strict = better & (~better.T | (idx[:, None] < idx[None, :]))
            np.fill_diagonal(strict, False)
            dominated = strict.any(axis=0)
            if dominated.any():
                # the dominator of a removed s: a kept candidate that beats it (one exists by transitivity)
                kept = ~dominated
                dominator = np.argmax(strict & kept[:, None], axis=0)
                self.counts["dominated"] += int(dominated.sum())
                self._record_drop(i, kept, dominator)
                self._restrict(i, kept)
                changed = True
        return changed

    def fold_edges(self) -> bool:
        """Self-loops and edges to a one-candidate node become unary costs of the other end."""
        changed = False
        for k in list(self.edges):
            e = self.edges.get(k)
            if e is None or e.protected:
                continue
            if e.u == e.v:
                n = self.nodes[e.u]
                costs, allowed, usages = self._oriented(k, e.u)
                if self._edge_memory(e):
                    # memory over the node's own lifetime is node memory when no address is placed
                    if self.f.placement is not None or e.interval != n.interval:
                        continue
                    merged, over = _sat_add(n.usages, usages[:, 0])
                    if over.any():
                        continue
                    n.usages = merged
                if not self._add_unary(e.u, costs[:, 0]):
                    continue
                self._drop_edge(k)
                self._restrict(e.u, allowed[:, 0])
            elif len(self.nodes[e.v].keep) == 1 or len(self.nodes[e.u].keep) == 1:
                i, j = (e.u, e.v) if len(self.nodes[e.v].keep) == 1 else (e.v, e.u)
                costs, allowed, usages = self._oriented(k, i)
                if not self._add_unary(i, costs[:, 0]):
                    continue
                self._drop_edge(k)
                if self._edge_memory(e):  # the pair's memory now depends on i alone
                    self._add_loop(i, usages[:, 0], e.interval, e.origin)
                self._restrict(i, allowed[:, 0])
            else:
                continue
            self.counts["folded"] += 1
            changed = True
        return changed

    def _add_loop(self, i: int, usage: np.ndarray, interval: tuple[int, int], origin: BufferKey | None) -> None:
        """Memory depending on node i alone, live over ``interval``: a zero-cost self-loop."""
        size = len(self.nodes[i].keep)
        self._add_edge(
            _E(
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

    def merge_parallel(self) -> bool:
        """Sum edges over the same nodes; memory carriers only without placement and over one interval."""
        groups: dict[tuple, list[int]] = {}
        for k, e in self.edges.items():
            memory = self._edge_memory(e)
            if e.protected or (memory and self.f.placement is not None) or (e.u == e.v and not memory):
                continue
            groups.setdefault((min(e.u, e.v), max(e.u, e.v), e.interval if memory else None), []).append(k)
        changed = False
        for (u, v, interval), ks in groups.items():
            if len(ks) < 2:
                continue
            shape = (len(self.nodes[u].keep), len(self.nodes[v].keep))
            costs, usages = np.zeros(shape, np.int64), np.zeros(shape, np.int64)
            allowed = np.ones(shape, bool)
            over = np.zeros(shape, bool)
            for k in ks:
                e = self.edges[k]
                c, a, us = (e.costs, e.allowed, e.usages) if u == v else self._oriented(k, u)
                costs, o1 = _sat_add(costs, c)
                usages, o2 = _sat_add(usages, 0 if us is None else us)
                allowed &= a
                over |= o1 | o2
            if (over & allowed).any():
                continue
            for k in ks:
                self._drop_edge(k)
            memory = interval is not None
            self._add_edge(_E(u, v, costs, allowed, usages if memory else None, interval or (0, 0), None, False))
            self.counts["parallel"] += len(ks) - 1
            changed = True
        return changed

    def _mergeable(self, v: int) -> bool:
        n = self.nodes[v]
        return not n.gone and not n.frozen and not any(self.edges[k].protected for k in n.edges)

    def merge_followers(self) -> bool:
        """Merge v into u when an edge allows exactly one candidate of v per candidate of u."""
        changed = False
        for k in list(self.edges):
            e = self.edges.get(k)
            if e is None or e.protected or e.u == e.v:
                continue
            for u, v in ((e.u, e.v), (e.v, e.u)):
                _, allowed, _ = self._oriented(k, u)
                if self._mergeable(v) and (allowed.sum(axis=1) == 1).all():
                    if self._merge_into(u, v, k, allowed.argmax(axis=1)):
                        self.counts["follower"] += 1
                        changed = True
                    break
        return changed

    def _merge_into(self, u: int, v: int, k: int, follow: np.ndarray) -> bool:
        """v takes candidate follow[a] whenever u takes a: fold v's costs, edges and memory into u."""
        nu, nv = self.nodes[u], self.nodes[v]
        costs, _, usages = self._oriented(k, u)
        rows = np.arange(len(nu.keep))
        unary, over = _sat_add(nv.costs[follow], costs[rows, follow])
        total, over2 = _sat_add(nu.costs, unary)
        if over.any() or over2.any():
            return False
        nu.costs = total
        e = self.edges[k]
        self._drop_edge(k)
        if self._edge_memory(e):
            self._add_loop(u, usages[rows, follow], e.interval, e.origin)
        usage = self._memory_choice_free(v)
        merged, over = _sat_add(nu.usages, nv.usages[follow])
        if usage is None and nu.interval == nv.interval and self.f.placement is None and not over.any():
            nu.usages = merged  # same lifetime, no addresses: one buffer
            usage = 0
        elif usage is None:
            self._add_loop(u, nv.usages[follow], nv.interval, ("node", v))
            usage = 0
        for j in list(nv.edges):
            other = self.edges[j]
            c, a, us = self._oriented(j, v)
            self._drop_edge(j)
            if other.u == other.v:  # a loop of v: its diagonal follows u
                c, a = np.diag(c[follow, 0]), np.where(np.eye(len(follow), dtype=bool), a[follow, 0][:, None], True)
                us = None if us is None else np.diag(us[follow, 0])
                self._add_edge(_E(u, u, c, a, us, other.interval, other.origin, False))
                continue
            w = other.v if other.u == v else other.u
            c, a, us = c[follow], a[follow], None if us is None else us[follow]
            if w == u:  # a parallel edge between u and v becomes a loop on u
                c = np.diag(c[rows, rows])
                a = np.where(np.eye(len(rows), dtype=bool), a[rows, rows][:, None], True)
                us = None if us is None else np.diag(us[rows, rows])
                self._add_edge(_E(u, u, c, a, us, other.interval, other.origin, False))
            else:
                self._add_edge(_E(u, w, c, a, us, other.interval, other.origin, False))
        self.steps.append((v, (u,), {(nu.keep[a],): nv.keep[b] for a, b in enumerate(follow)}))
        self._placeholder(v, usage)
        return True

    def eliminate(self) -> bool:
        """Leaf and series elimination of nodes whose memory does not depend on their choice."""
        changed = False
        for v, n in enumerate(self.nodes):
            if not self._mergeable(v) or len(n.edges) not in (1, 2):
                continue
            usage = self._memory_choice_free(v)
            ks = sorted(n.edges)
            if usage is None or any(self.edges[k].u == self.edges[k].v or self._edge_memory(self.edges[k]) for k in ks):
                continue
            ends = [self.edges[k].v if self.edges[k].u == v else self.edges[k].u for k in ks]
            if len(ks) == 1:
                ok = self._eliminate_leaf(v, ks[0], ends[0])
            elif ends[0] != ends[1]:
                ok = self._eliminate_series(v, ks, ends)
            else:
                continue
            if ok:
                self._placeholder(v, usage)
                changed = True
        return changed

    def _eliminate_leaf(self, v: int, k: int, u: int) -> bool:
        costs, allowed, _ = self._oriented(k, u)
        total, over = _sat_add(costs, self.nodes[v].costs[None, :])
        if (over & allowed).any() or not allowed.any(axis=1).all():
            return False  # rows without a partner go first, by arc consistency
        total = np.where(allowed, total, I64_MAX)
        best = total.argmin(axis=1)
        if not self._add_unary(u, total[np.arange(len(best)), best]):
            return False
        self._drop_edge(k)
        self.steps.append((v, (u,), {(self.nodes[u].keep[a],): self.nodes[v].keep[b] for a, b in enumerate(best)}))
        self.counts["leaf"] += 1
        return True

    def _eliminate_series(self, v: int, ks: list[int], ends: list[int]) -> bool:
        u, w = ends
        c1, a1, _ = self._oriented(ks[0], u)  # [S_u, S_v]
        c2, a2, _ = self._oriented(ks[1], v)  # [S_v, S_w]
        total, over = _sat_add(c1[:, :, None], self.nodes[v].costs[None, :, None])
        total, over2 = _sat_add(total, c2[None, :, :])
        allowed = a1[:, :, None] & a2[None, :, :]
        if ((over | over2) & allowed).any():
            return False
        total = np.where(allowed, total, I64_MAX)
        best = total.argmin(axis=1)  # [S_u, S_w]
        pair_allowed = allowed.any(axis=1)
        cost = np.take_along_axis(total, best[:, None, :], axis=1)[:, 0, :]
        if not pair_allowed.any():
            return False
        cost = np.where(pair_allowed, cost, cost[pair_allowed].max())  # any finite value: never chosen
        for k in ks:
            self._drop_edge(k)
        self._add_edge(_E(u, w, cost, pair_allowed, None, (0, 0), None, False))
        keep_u, keep_v, keep_w = self.nodes[u].keep, self.nodes[v].keep, self.nodes[w].keep
        table = {(keep_u[a], keep_w[c]): keep_v[best[a, c]] for a in range(len(keep_u)) for c in range(len(keep_w))}
        self.steps.append((v, (u, w), table))
        self.counts["series"] += 1
        return True

    # ---- driver ------------------------------------------------------------
    def run(self) -> Reduction:
        passes = 0
        while True:
            passes += 1
            changed = False
            for op in (
                self.bound_prune,
                self.arc_consistency,
                self.fold_edges,
                self.merge_parallel,
                self.merge_followers,
                self.eliminate,
                self.dominance,
            ):
                changed |= op()
            if not changed:
                break
        return self._build(passes)

    def _build(self, passes: int) -> Reduction:
        f = self.f
        nodes = tuple(
            Node(f.nodes[i].name, n.costs.copy(), n.usages.copy(), n.interval) for i, n in enumerate(self.nodes)
        )
        order = sorted(self.edges)
        index = {k: r for r, k in enumerate(order)}
        edges = []
        for k in order:
            e = self.edges[k]
            edges.append(
                Edge(
                    e.u,
                    e.v,
                    e.costs.copy(),
                    None if e.allowed.all() else e.allowed.copy(),
                    None if e.usages is None else e.usages.copy(),
                    e.interval,
                )
            )
        terms = tuple(
            MaxTerm(
                t.node,
                tuple(
                    Affine(unary.copy(), tuple((index[k], tab.copy()) for k, tab in parts))
                    for unary, parts in t.alternatives
                ),
            )
            for t in self.terms
        )
        reduced = Formulation(
            nodes, tuple(edges), f.usage_limit, terms, f.placement, f.cost_unit_us, f.name + "-reduced"
        )
        active = [i for i, n in enumerate(self.nodes) if len(n.keep) > 1]
        stats = {
            "passes": passes,
            "nodes": len(f.nodes),
            "active_nodes": len(active),
            "candidates_before": sum(n.num_candidates for n in f.nodes),
            "candidates_after": sum(len(n.keep) for n in self.nodes),
            "edges_before": len(f.edges),
            "edges_after": len(edges),
            **self.counts,
        }
        return Reduction(
            original=f,
            formulation=reduced,
            keep=[list(n.keep) for n in self.nodes],
            steps=list(self.steps),
            edge_origin=[self.edges[k].origin for k in order],
            dominated_by=dict(self.dominated_by),
            stats=stats,
        )


def reduce_formulation(f: Formulation, *, upper_bound: int | None = None) -> Reduction:
    """Apply every exact reduction until none applies.

    ``upper_bound`` is the objective of an assignment known to be feasible
    (for instance the greedy backend's); with it, anything that cannot be
    part of a solution at least as good is removed.
    """
    return _Reducer(f, upper_bound).run()


def solve_reduced(f: Formulation, backend: str = "greedy", *, time_limit: float, seed: int = 0, **options) -> Solution:
    """Solve ``f`` through its reduction: greedy bound, reduce, solve, map back.

    Greedy (at most a quarter of the time) gives the upper bound and, projected,
    the warm start of the backend, which gets the rest of the time. The answer is
    the better of the mapped-back solution and greedy's, in terms of ``f``.
    """
    from spyreopt.solvers.registry import solve_formulation  # the registry is the one way to a backend

    start = time.perf_counter()
    notes: list[str] = []
    first: Solution | None = None
    try:
        first = solve_formulation(f, "greedy", time_limit=time_limit / 4, seed=seed)
    except (SolverError, InfeasibleError) as exc:
        notes.append(f"no greedy bound ({exc}); reduced without one")
    if first is not None and f.violations(first.assignment, first.offsets):
        notes.append("greedy plan invalid; reduced without a bound")
        first = None
    red = reduce_formulation(f, upper_bound=None if first is None else first.objective)
    g = red.formulation
    if backend != "greedy" and first is not None and (proj := red.project(first.assignment)) is not None:
        offsets = red.project_offsets(first.offsets)
        if not g.violations(proj, offsets):
            options.setdefault("hint", Solution(proj, offsets, "feasible", g.evaluate(proj)))
    remaining = time_limit - (time.perf_counter() - start)
    inner = solve_formulation(g, backend, time_limit=remaining, seed=seed, **options) if remaining > 0 else None
    if inner is None or len(inner.assignment) != len(g.nodes):
        why = (
            "time spent on the bound and the reduction"
            if inner is None
            else f"{backend} {inner.status}: {inner.message}"
        )
        if first is None:
            raise SolverError(f"no solution of the reduced problem ({why}) and no greedy plan")
        notes.append(f"no solution of the reduced problem ({why}); greedy's plan returned")
        sol = first
    else:
        assignment = red.expand(inner.assignment)
        sol = Solution(
            assignment,
            red.expand_offsets(inner.offsets),
            inner.status,
            f.evaluate(assignment),
            bound=inner.bound,  # the reduced optimum is the original optimum
            stats={"reduced": inner.stats},
            message=inner.message,
        )
        problems = f.violations(sol.assignment, sol.offsets)
        if problems:  # the expansion is exact, so this is a bug: never return it as a plan
            raise SolverError(f"{backend} on the reduced problem, mapped back, is invalid: {'; '.join(problems[:3])}")
        if first is not None and first.objective < sol.objective:
            notes.append(
                f"{backend} on the reduced problem ({sol.objective}) is worse than greedy; greedy's plan returned"
            )
            sol = Solution(first.assignment, first.offsets, "feasible", first.objective, bound=inner.bound)
    sol.stats["reduction"] = red.stats
    sol.stats["backend"] = backend
    if first is not None:
        sol.stats["greedy_objective"] = first.objective
    sol.message = "; ".join([m for m in [sol.message, *notes] if m])
    sol.seconds = time.perf_counter() - start
    return sol
