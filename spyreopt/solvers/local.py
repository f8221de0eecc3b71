"""Local views of a Formulation for search backends: the cost of every candidate
of one node with the rest of the assignment fixed, and the live-usage profile.

Local costs are float64 (a heuristic's comparison), the reported objective is
always ``Formulation.evaluate`` (exact integers).
"""

from __future__ import annotations

import numpy as np

from spyreopt.model.formulation import Formulation
from spyreopt.solvers.presolve.limits import memory_limit

INF = float("inf")


class LocalView:
    """Per-node candidate costs and memory deltas against a current assignment."""

    def __init__(self, f: Formulation):
        self.f = f
        n = len(f.nodes)
        self.incident = [f.incident_edges(i) for i in range(n)]
        # max terms whose value depends on node i: its own, or one reading an incident edge
        touching: list[set[int]] = [set() for _ in range(n)]
        for t, m in enumerate(f.max_terms):
            touching[m.node].add(t)
            for alt in m.alternatives:
                for k, _ in alt.edge_parts:
                    touching[f.edges[k].u].add(t)
                    touching[f.edges[k].v].add(t)
        self.terms = [sorted(s) for s in touching]
        self.floats: dict[tuple, np.ndarray] = {}
        self.node_costs = [self.as_float(n_.costs) for n_ in f.nodes]
        self.edge_costs = [self.as_float(e.costs) for e in f.edges]
        self.has_memory = f.usage_limit is not None or f.placement is not None
        self.limit = memory_limit(f)

    def as_float(self, a: np.ndarray) -> np.ndarray:
        """``a`` as float64, read-only, converted once per memory it views: tables shared by edges of equal
        signatures (and the presolve's views of them) are converted once. Keyed by address, shape, strides and
        dtype, which name the values while ``f`` holds every table."""
        key = (a.__array_interface__["data"][0], a.shape, a.strides, a.dtype.str)
        out = self.floats.get(key)
        if out is None:
            out = self.floats[key] = a.astype(np.float64)
            out.setflags(write=False)
        return out

    # ---- costs -------------------------------------------------------------
    def _edge_row(self, k: int, i: int, a) -> np.ndarray:
        """Edge k's cost as a vector over node i's candidates, the other end fixed."""
        e = self.f.edges[k]
        table = self.edge_costs[k]
        if e.u == i and e.v == i:
            return np.diagonal(table).copy()
        return table[:, a[e.v]] if e.u == i else table[a[e.u], :]

    def _allowed_row(self, k: int, i: int, a) -> np.ndarray | None:
        e = self.f.edges[k]
        if e.allowed is None:
            return None
        if e.u == i and e.v == i:
            return np.diagonal(e.allowed).copy()
        return e.allowed[:, a[e.v]] if e.u == i else e.allowed[a[e.u], :]

    def _table_row(self, k: int, table: np.ndarray, i: int, a) -> np.ndarray | float:
        e = self.f.edges[k]
        if e.u == i and e.v == i:
            return np.diagonal(table).astype(np.float64)
        if e.u == i:
            return table[:, a[e.v]].astype(np.float64)
        if e.v == i:
            return table[a[e.u], :].astype(np.float64)
        return float(table[a[e.u], a[e.v]])

    def candidate_costs(self, i: int, a) -> np.ndarray:
        """Objective terms that depend on node i, per candidate of i (inf when a pair is forbidden)."""
        f = self.f
        vec = self.node_costs[i].copy()
        for k in self.incident[i]:
            vec += self._edge_row(k, i, a)
            allowed = self._allowed_row(k, i, a)
            if allowed is not None:
                vec[~allowed] = INF
        for t in self.terms[i]:
            m = f.max_terms[t]
            best = None
            for alt in m.alternatives:
                val = alt.unary.astype(np.float64) if m.node == i else float(alt.unary[a[m.node]])
                for k, table in alt.edge_parts:
                    val = val + self._table_row(k, table, i, a)
                val = np.broadcast_to(np.asarray(val, dtype=np.float64), vec.shape)
                best = val if best is None else np.maximum(best, val)
            if best is not None:
                vec += best
        return vec

    # ---- memory ------------------------------------------------------------
    def profile(self, a) -> np.ndarray:
        prof = np.zeros(max(self.f.num_steps, 1), dtype=np.int64)
        for b in self.f.buffers(a):
            prof[b.lower : b.upper] += b.size
        return prof

    def usage_delta(self, i: int, a, s: int) -> list[tuple[int, int, int]]:
        """(lower, upper, bytes) changes of the profile if node i moves to candidate s."""
        f = self.f
        old = a[i]
        if old == s:
            return []
        out = []
        n = f.nodes[i]
        if n.interval[1] > n.interval[0] and n.usages[s] != n.usages[old]:
            out.append((n.interval[0], n.interval[1], int(n.usages[s]) - int(n.usages[old])))
        for k in self.incident[i]:
            e = f.edges[k]
            if e.usages is None or e.interval[1] <= e.interval[0]:
                continue
            su, sv = a[e.u], a[e.v]
            nu, nv = (s if e.u == i else su), (s if e.v == i else sv)
            d = int(e.usages[nu, nv]) - int(e.usages[su, sv])
            if d:
                out.append((e.interval[0], e.interval[1], d))
        return out

    def fits_after(self, prof: np.ndarray, delta: list[tuple[int, int, int]]) -> bool:
        """Whether the profile stays within the limit after a change (checks only touched steps)."""
        if self.limit is None or not delta:
            return True
        touched: dict[int, int] = {}
        for lo, hi, d in delta:
            for t in range(lo, hi):
                touched[t] = touched.get(t, 0) + d
        return all(prof[t] + d <= self.limit for t, d in touched.items() if d > 0)

    @staticmethod
    def apply(prof: np.ndarray, delta: list[tuple[int, int, int]]) -> None:
        for lo, hi, d in delta:
            prof[lo:hi] += d
