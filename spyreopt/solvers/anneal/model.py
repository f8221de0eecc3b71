"""A Formulation compiled for fast local search over units (see ``anneal.units``).

Every term is rewritten over units: a node cost becomes a vector over its
unit's candidates, an edge between two units a pair table, an edge inside a
unit a vector. Every term that depends on unit ``u`` is a *factor*: a table
whose rows are indexed by another unit's candidate (one row when it depends on
``u`` alone) and whose columns are ``u``'s candidates. All of ``u``'s factors
are stacked into one matrix, so the cost of every candidate of ``u`` with the
rest fixed is one fancy-index gather and one sum, whatever the degree of
``u``: that is what keeps a Python inner loop fast.

Factors come in groups: group 0 holds the plain objective (unary costs and
pair tables); each alternative of a max term touching ``u`` is one more group,
so a max term's value per candidate is a max over its groups.

Costs are float64 and clipped at ``NEAR`` (2**50): costs that high (the
contest's 1e18 "never do this" entries) are near-forbidden, every sum of a few
of them stays exact, and any plan worth keeping pays none. Forbidden pairs are
counted in a separate table (a count, not a cost), so compound moves may pass
through a forbidden intermediate state without infinities in the cost. The
reported objective is always ``Formulation.evaluate``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spyreopt.model.formulation import Formulation
from spyreopt.solvers.anneal.units import Units
from spyreopt.solvers.presolve.limits import memory_limit

NEAR = float(2**50)


@dataclass
class UnitTables:
    """Gather data of one unit; ``other == count`` points at the constant 0 entry of the assignment."""

    table: np.ndarray  # float64 [rows, S]: every factor stacked
    base: np.ndarray  # int64 [factors + pieces]: first row of each factor, then of each memory piece
    other: np.ndarray  # int64 [factors + pieces]: unit whose candidate selects the row (count: constant)
    factors: int  # number of cost factors (the rest of base/other index mem_table)
    plain: int  # factors [0, plain) form group 0
    bad: np.ndarray | None  # float64 [rows of plain factors, S]: forbidden-pair counts, None if none
    group_starts: np.ndarray | None  # int64 [alts]: start of each max-term group among factors[plain:]
    alt_ids: np.ndarray | None  # int64 [alts]: flat index of each group's alternative
    term_starts: np.ndarray | None  # int64 [terms]: start of each term among the groups
    # memory: pieces (a usage table over an interval), then elementary segments of their union
    mem_table: np.ndarray | None  # int64 [rows, S]
    mem_lo: np.ndarray | None  # int64 [pieces]
    mem_hi: np.ndarray | None
    seg_bounds: np.ndarray | None  # int64 [segments + 1], absolute time steps
    cover: np.ndarray | None  # int64 [segments, pieces]


@dataclass
class Pair:
    u: int
    v: int
    cost: np.ndarray  # float64 [S_u, S_v], clipped
    bad: np.ndarray | None  # float64 [S_u, S_v] forbidden counts


@dataclass
class Piece:
    """Memory over [lo, hi): a vector over unit u's candidates (v < 0) or a [S_u, S_v] table."""

    u: int
    v: int
    usage: np.ndarray
    lo: int
    hi: int


class CompiledModel:
    """Everything the search reads, precomputed once per Formulation and unit partition."""

    def __init__(self, f: Formulation, units: Units):
        self.f = f
        self.units = units
        self.n = n = units.count
        self.sizes = np.array([mp.shape[1] for mp in units.maps], dtype=np.int64)
        self.num_steps = max(f.num_steps, 1)
        self.limit: int | None = memory_limit(f)
        self.unary = [np.zeros(int(s)) for s in self.sizes]
        self.unary_bad = [np.zeros(int(s)) for s in self.sizes]
        self.node_usage = [np.zeros(int(s), dtype=np.int64) for s in self.sizes]  # members' own memory
        self.pairs: list[Pair] = []
        self.pieces: list[Piece] = []
        self.alts: list[tuple[list[tuple[int, np.ndarray]], list[tuple[int, int, np.ndarray]]]] = []
        self.term_of_alt: list[int] = []
        self._compose()
        self.neighbours = [set() for _ in range(n)]
        for p in self.pairs:
            self.neighbours[p.u].add(p.v)
            self.neighbours[p.v].add(p.u)
        for _, pair_parts in self.alts:
            for u, v, _ in pair_parts:
                self.neighbours[u].add(v)
                self.neighbours[v].add(u)
        self.neighbours = [np.array(sorted(s), dtype=np.int64) for s in self.neighbours]
        self._pairs_of: list[list[Pair]] = [[] for _ in range(n)]
        for p in self.pairs:
            self._pairs_of[p.u].append(p)
            self._pairs_of[p.v].append(p)
        self._pieces_of: list[list[Piece]] = [[] for _ in range(n)]
        for p in self.pieces:
            self._pieces_of[p.u].append(p)
            if p.v >= 0:
                self._pieces_of[p.v].append(p)
        self._terms_of: list[set[int]] = [set() for _ in range(n)]
        for j, (unary_parts, pair_parts) in enumerate(self.alts):
            t = self.term_of_alt[j]
            for w, _ in unary_parts:
                self._terms_of[w].add(t)
            for a, b, _ in pair_parts:
                self._terms_of[a].add(t)
                self._terms_of[b].add(t)
        self.tables = [self._compile(u) for u in range(n)]

    # ---- terms over units --------------------------------------------------------
    def _member_map(self, node: int) -> tuple[int, np.ndarray]:
        u = int(self.units.unit_of[node])
        return u, self.units.maps[u][self.units.slot_of[node]]

    def _compose(self) -> None:
        f = self.f
        pair_cost: dict[tuple[int, int], np.ndarray] = {}
        pair_bad: dict[tuple[int, int], np.ndarray] = {}
        for i, nd in enumerate(f.nodes):
            u, mp = self._member_map(i)
            self.unary[u] += np.minimum(nd.costs[mp].astype(np.float64), NEAR)
            if nd.interval[1] > nd.interval[0] and nd.usages.any():
                self.node_usage[u] += nd.usages[mp]
                self.pieces.append(Piece(u, -1, nd.usages[mp].astype(np.int64), *nd.interval))
        for e in f.edges:
            (u, mu), (v, mv) = self._member_map(e.u), self._member_map(e.v)
            cost = np.minimum(e.costs.astype(np.float64), NEAR)
            bad = None if e.allowed is None else (~e.allowed).astype(np.float64)
            live_usage = e.usages is not None and e.interval[1] > e.interval[0] and e.usages.any()
            if u == v:
                self.unary[u] += cost[mu, mv]
                if bad is not None:
                    self.unary_bad[u] += bad[mu, mv]
                if live_usage:
                    self.pieces.append(Piece(u, -1, e.usages[mu, mv].astype(np.int64), *e.interval))
                continue
            if u > v:
                u, v, mu, mv, cost = v, u, mv, mu, cost.T
                bad = None if bad is None else bad.T
                usage = e.usages.T if live_usage else None
            else:
                usage = e.usages if live_usage else None
            key = (u, v)
            pair_cost[key] = pair_cost.get(key, 0.0) + cost[np.ix_(mu, mv)]
            if bad is not None:
                pair_bad[key] = pair_bad.get(key, 0.0) + bad[np.ix_(mu, mv)]
            if usage is not None:
                self.pieces.append(Piece(u, v, usage[np.ix_(mu, mv)].astype(np.int64), *e.interval))
        for key in sorted(pair_cost):
            self.pairs.append(Pair(*key, pair_cost[key], pair_bad.get(key)))
        for t, m in enumerate(f.max_terms):
            for alt in m.alternatives:
                u, mp = self._member_map(m.node)
                unary_parts = [(u, np.minimum(alt.unary[mp].astype(np.float64), NEAR))]
                pair_parts = []
                for k, part in alt.edge_parts:
                    e = f.edges[k]
                    (a, ma), (b, mb) = self._member_map(e.u), self._member_map(e.v)
                    table = np.minimum(part.astype(np.float64), NEAR)
                    if a == b:
                        unary_parts.append((a, table[ma, mb]))
                    elif a < b:
                        pair_parts.append((a, b, table[np.ix_(ma, mb)]))
                    else:
                        pair_parts.append((b, a, table.T[np.ix_(mb, ma)]))
                self.alts.append((unary_parts, pair_parts))
                self.term_of_alt.append(t)
        self.term_alts: list[list[int]] = [[] for _ in f.max_terms]
        for j, t in enumerate(self.term_of_alt):
            self.term_alts[t].append(j)

    # ---- per-unit gather tables ------------------------------------------------------
    def _compile(self, u: int) -> UnitTables:
        n = self.n
        size = int(self.sizes[u])
        tables: list[np.ndarray] = [self.unary[u][None, :]]
        others: list[int] = [n]
        bads: list[np.ndarray] = [self.unary_bad[u][None, :]]
        any_bad = bool(self.unary_bad[u].any())
        for p in self._pairs_of[u]:
            table, other = (p.cost.T, p.v) if p.u == u else (p.cost, p.u)
            tables.append(np.ascontiguousarray(table))
            others.append(other)
            if p.bad is not None:
                any_bad = True
                bads.append(np.ascontiguousarray(p.bad.T if p.u == u else p.bad))
            else:
                bads.append(np.zeros_like(table))
        plain = len(tables)
        group_starts, alt_ids, term_starts = [], [], []
        for t in sorted(self._terms_of[u]):
            alts = self.term_alts[t]
            term_starts.append(len(group_starts))
            for j in alts:
                unary_parts, pair_parts = self.alts[j]
                group_starts.append(len(tables) - plain)
                alt_ids.append(j)
                tables.append(np.zeros((1, size)))
                others.append(n)
                for w, vec in unary_parts:
                    if w == u:
                        tables.append(vec[None, :])
                        others.append(n)
                for a, b, table in pair_parts:
                    if u == a:
                        tables.append(np.ascontiguousarray(table.T))
                        others.append(b)
                    elif u == b:
                        tables.append(table)
                        others.append(a)
        rows = np.array([len(t) for t in tables], dtype=np.int64)
        has_terms = bool(group_starts)
        memory = self._compile_memory(u)
        mem_base, mem_other = memory.pop("mem_base"), memory.pop("mem_other")
        return UnitTables(
            table=np.ascontiguousarray(np.vstack(tables)),
            base=np.concatenate([[0], np.cumsum(rows)[:-1], mem_base]).astype(np.int64),
            other=np.concatenate([others, mem_other]).astype(np.int64),
            factors=len(tables),
            plain=plain,
            bad=np.ascontiguousarray(np.vstack(bads)) if any_bad else None,
            group_starts=np.array(group_starts, dtype=np.int64) if has_terms else None,
            alt_ids=np.array(alt_ids, dtype=np.int64) if has_terms else None,
            term_starts=np.array(term_starts, dtype=np.int64) if has_terms else None,
            **memory,
        )

    def _compile_memory(self, u: int) -> dict:
        n = self.n
        none = dict.fromkeys(("mem_table", "mem_lo", "mem_hi", "seg_bounds", "cover"))
        none.update(mem_base=np.zeros(0, dtype=np.int64), mem_other=np.zeros(0, dtype=np.int64))
        if self.limit is None:
            return none
        mine = []
        for p in self._pieces_of[u]:
            if p.u == u and p.v < 0:
                mine.append((p.usage[None, :], n, p.lo, p.hi))
            elif p.u == u:
                mine.append((np.ascontiguousarray(p.usage.T), p.v, p.lo, p.hi))
            elif p.v == u:
                mine.append((p.usage, p.u, p.lo, p.hi))
        if not mine:
            return none
        rows = np.array([len(p[0]) for p in mine], dtype=np.int64)
        lo = np.array([p[2] for p in mine], dtype=np.int64)
        hi = np.array([p[3] for p in mine], dtype=np.int64)
        bounds = np.unique(np.concatenate([lo, hi]))
        cover = ((lo[None, :] <= bounds[:-1, None]) & (bounds[:-1, None] < hi[None, :])).astype(np.int64)
        return dict(
            mem_table=np.ascontiguousarray(np.vstack([p[0] for p in mine])),
            mem_base=np.concatenate([[0], np.cumsum(rows)[:-1]]).astype(np.int64),
            mem_other=np.array([p[1] for p in mine], dtype=np.int64),
            mem_lo=lo,
            mem_hi=hi,
            seg_bounds=bounds,
            cover=cover,
        )

    # ---- whole-assignment quantities (once per restart, not in the loop) ----
    def alt_values(self, a: np.ndarray) -> np.ndarray:
        out = np.zeros(len(self.alts))
        for j, (unary_parts, pair_parts) in enumerate(self.alts):
            out[j] = sum(float(vec[a[w]]) for w, vec in unary_parts) + sum(
                float(t[a[x], a[y]]) for x, y, t in pair_parts
            )
        return out

    def search_cost(self, a: np.ndarray) -> float:
        """The clipped objective the search tracks incrementally."""
        total = sum(float(vec[a[u]]) for u, vec in enumerate(self.unary))
        total += sum(float(p.cost[a[p.u], a[p.v]]) for p in self.pairs)
        alt = self.alt_values(a)
        total += sum(float(alt[js].max()) for js in self.term_alts if js)
        return total

    def forbidden_count(self, a: np.ndarray) -> int:
        count = sum(int(b[a[u]]) for u, b in enumerate(self.unary_bad))
        return count + sum(int(p.bad[a[p.u], a[p.v]]) for p in self.pairs if p.bad is not None)

    def profile(self, a: np.ndarray) -> np.ndarray:
        prof = np.zeros(self.num_steps, dtype=np.int64)
        for p in self.pieces:
            prof[p.lo : p.hi] += int(p.usage[a[p.u]] if p.v < 0 else p.usage[a[p.u], a[p.v]])
        return prof
