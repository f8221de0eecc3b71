"""The incremental state of the local search: unit assignment, cost, memory profile.

A *look* at unit ``i`` gives, for every candidate of ``i`` with the rest fixed,
the search cost, the number of forbidden pairs, the values of the max-term
alternatives touching ``i`` and the memory change of each of ``i``'s memory
pieces. Applying a candidate uses the look it was chosen from, so nothing is
recomputed and nothing outside ``i``'s factors, max terms and memory
interval is touched. Compound moves apply several changes and then either
commit them or roll them back from a journal.
"""

from __future__ import annotations

import numpy as np

from spyreopt.solvers.anneal.model import CompiledModel

_sum = np.add.reduce  # ndarray.sum without its Python wrapper: this is the inner loop


class Look:
    """Candidate vectors of one node (see module docstring)."""

    __slots__ = ("node", "cost", "bad", "groups", "mem")

    def __init__(self, node: int, cost: np.ndarray, bad, groups, mem):
        self.node = node
        self.cost = cost  # float64 [S]
        self.bad = bad  # float64 [S] forbidden-pair count, or None
        self.groups = groups  # float64 [alts, S] max-term alternative parts, or None
        self.mem = mem  # int64 [pieces, S] usage change per piece vs. the current candidate, or None


class SearchState:
    def __init__(self, model: CompiledModel, assignment):
        self.m = model
        self.a = np.zeros(model.n + 1, dtype=np.int64)  # a[n] == 0: the row of constant factors
        self.journal: list[tuple] = []
        self.reset(assignment)

    def reset(self, assignment) -> None:
        """Start over from a unit assignment (recomputes every incremental quantity exactly)."""
        model = self.m
        self.a[: model.n] = np.asarray(assignment, dtype=np.int64)
        self.prof = model.profile(self.a)
        self.alt = model.alt_values(self.a)
        self.cost = model.search_cost(self.a)
        self.nbad = model.forbidden_count(self.a)
        self.journal.clear()

    @property
    def assignment(self) -> np.ndarray:
        return self.a[: self.m.n]

    def look(self, i: int) -> Look:
        nt = self.m.tables[i]
        a = self.a
        cur = int(a[i])
        idx = nt.base + a[nt.other]  # cost factors first, then memory pieces (one gather of the assignment)
        rows = nt.table[idx[: nt.factors]]
        groups = None
        if nt.group_starts is None:
            cost = _sum(rows, axis=0)
        else:
            cost = _sum(rows[: nt.plain], axis=0)
            groups = np.add.reduceat(rows[nt.plain :], nt.group_starts, axis=0)
            alts = groups + (self.alt[nt.alt_ids] - groups[:, cur])[:, None]
            cost += _sum(np.maximum.reduceat(alts, nt.term_starts, axis=0), axis=0)
        bad = None if nt.bad is None else _sum(nt.bad[idx[: nt.plain]], axis=0)
        mem = None
        if nt.mem_table is not None:
            mem = nt.mem_table[idx[nt.factors :]]
            mem -= mem[:, cur : cur + 1]
        return Look(i, cost, bad, groups, mem)

    def fits(self, lk: Look) -> np.ndarray | None:
        """Candidates whose memory change keeps every touched step within the limit (None: all).

        A step already over the limit (inside a compound move) only rejects
        candidates that add memory there.
        """
        if lk.mem is None:
            return None
        nt = self.m.tables[lk.node]
        limit = self.m.limit
        if len(nt.mem_lo) == 1:
            head = limit - int(self.prof[nt.mem_lo[0] : nt.mem_hi[0]].max())
            return lk.mem[0] <= max(head, 0)
        b = nt.seg_bounds
        seg_max = np.maximum.reduceat(self.prof[b[0] : b[-1]], b[:-1] - b[0])
        head = np.maximum(limit - seg_max, 0)
        return ((nt.cover @ lk.mem) <= head[:, None]).all(axis=0)

    def allowed(self, lk: Look) -> np.ndarray:
        """Candidates that keep every pair allowed and fit in memory."""
        ok = np.ones(len(lk.cost), dtype=bool) if lk.bad is None else lk.bad <= 0
        fit = self.fits(lk)
        return ok if fit is None else ok & fit

    def apply(self, lk: Look, s: int, journal: bool = False) -> float:
        """Move node lk.node to candidate s; returns the search-cost change."""
        i = lk.node
        nt = self.m.tables[i]
        cur = int(self.a[i])
        delta = float(lk.cost[s] - lk.cost[cur])
        self.cost += delta
        dbad = 0.0 if lk.bad is None else float(lk.bad[s] - lk.bad[cur])
        self.nbad += dbad
        dalt = None
        if lk.groups is not None:
            dalt = lk.groups[:, s] - lk.groups[:, cur]
            self.alt[nt.alt_ids] += dalt
        dmem = None
        if lk.mem is not None:
            dmem = lk.mem[:, s]
            for p in np.flatnonzero(dmem):
                self.prof[nt.mem_lo[p] : nt.mem_hi[p]] += dmem[p]
        self.a[i] = s
        if journal:
            self.journal.append((i, cur, delta, dbad, dalt, dmem))
        return delta

    def rollback(self) -> None:
        for i, cur, delta, dbad, dalt, dmem in reversed(self.journal):
            nt = self.m.tables[i]
            self.a[i] = cur
            self.cost -= delta
            self.nbad -= dbad
            if dalt is not None:
                self.alt[nt.alt_ids] -= dalt
            if dmem is not None:
                for p in np.flatnonzero(dmem):
                    self.prof[nt.mem_lo[p] : nt.mem_hi[p]] -= dmem[p]
        self.journal.clear()

    def journal_valid(self) -> bool:
        """After a compound move: no forbidden pair, and every step it added memory to within the limit."""
        if self.nbad > 0:
            return False
        limit = self.m.limit
        if limit is None:
            return True
        for i, _, _, _, _, dmem in self.journal:
            if dmem is None:
                continue
            nt = self.m.tables[i]
            for p in np.flatnonzero(dmem > 0):
                if self.prof[nt.mem_lo[p] : nt.mem_hi[p]].max() > limit:
                    return False
        return True
