"""Global guidance for the annealer: Lagrangian memory prices and message passing.

Local moves cannot cross between two good plans that differ everywhere (on
the IOPDDL instances, the best plan differs from a greedy one in most units,
in one connected piece full of cycles). Without the memory limit the problem
is a pairwise MRF over units whose LP relaxation is tight, and TRW-S (sequential
tree-reweighted message passing, Kolmogorov 2006) finds such global optima.
The memory limit is priced in: a price per time step turns every byte a
candidate keeps live into cost, and prices follow projected subgradient steps
(Polyak step towards the best valid cost) on the over-full steps. Each round's
labeling is repaired into a valid plan (free memory where cheapest per byte)
and descended; the best valid plan seeds the annealer.

Max terms are linearised at the current plan (the alternative that is the max
there), so the MRF is only a guide: every plan is scored by the exact
incremental state.
"""

from __future__ import annotations

import numpy as np

from spyreopt.solvers.anneal_model import NEAR, CompiledModel
from spyreopt.solvers.anneal_state import SearchState

DECAY = 0.9  # price kept by a time step with room, per round


class PricedMRF:
    """The unit MRF with prices: unary vectors, pair tables, and TRW-S messages kept warm."""

    def __init__(self, model: CompiledModel, anchor: np.ndarray):
        m = self.m = model
        n = m.n
        self.base_unary = [np.minimum(m.unary[u] + NEAR * m.unary_bad[u], NEAR) for u in range(n)]
        pair: dict[tuple[int, int], np.ndarray] = {}
        for p in m.pairs:
            cost = p.cost if p.bad is None else np.where(p.bad > 0, NEAR, p.cost)
            pair[(p.u, p.v)] = pair.get((p.u, p.v), 0.0) + cost
        alt = m.alt_values(np.append(anchor, 0))
        for js in m.term_alts:  # linearise each max term at the anchor
            if not js:
                continue
            unary_parts, pair_parts = m.alts[js[int(np.argmax(alt[js]))]]
            for w, vec in unary_parts:
                self.base_unary[w] = self.base_unary[w] + vec
            for a, b, table in pair_parts:
                pair[(a, b)] = pair.get((a, b), 0.0) + table
        self.pair_keys = sorted(pair)
        self.tables = [pair[k] for k in self.pair_keys]
        self.base_tables = [t.copy() for t in self.tables]
        self.adj: list[list[tuple[int, int, bool]]] = [[] for _ in range(n)]  # (other, pair index, self is u)
        for k, (u, v) in enumerate(self.pair_keys):
            self.adj[u].append((v, k, True))
            self.adj[v].append((u, k, False))
        # messages: msg[(k, True)] is u -> v over S_v; msg[(k, False)] is v -> u over S_u
        self.msg = {}
        for k, (u, v) in enumerate(self.pair_keys):
            self.msg[(k, True)] = np.zeros(int(m.sizes[v]))
            self.msg[(k, False)] = np.zeros(int(m.sizes[u]))
        fwd = [sum(1 for o, _, _ in self.adj[u] if o > u) for u in range(n)]
        bwd = [sum(1 for o, _, _ in self.adj[u] if o < u) for u in range(n)]
        self.gamma = [1.0 / max(fwd[u], bwd[u], 1) for u in range(n)]
        # memory pieces for prices: node pieces weigh a unary, edge pieces a pair table
        self.unit_pieces: list[list[tuple[np.ndarray, int, int]]] = [[] for _ in range(n)]
        self.pair_pieces: list[list[tuple[np.ndarray, int, int]]] = [[] for _ in self.pair_keys]
        index = {k: i for i, k in enumerate(self.pair_keys)}
        for pc in m.pieces:
            if pc.v < 0:
                self.unit_pieces[pc.u].append((pc.usage.astype(np.float64), pc.lo, pc.hi))
            elif (pc.u, pc.v) in index:
                self.pair_pieces[index[(pc.u, pc.v)]].append((pc.usage.astype(np.float64), pc.lo, pc.hi))
        self.unary = list(self.base_unary)

    def set_prices(self, prices: np.ndarray) -> None:
        """Unary and pair costs plus price x bytes over each piece's interval."""
        cum = np.concatenate([[0.0], np.cumsum(prices)])
        self.unary = [
            u + sum(use * (cum[hi] - cum[lo]) for use, lo, hi in pieces) if pieces else u
            for u, pieces in zip(self.base_unary, self.unit_pieces)
        ]
        self.tables = [
            t + sum(use * (cum[hi] - cum[lo]) for use, lo, hi in pieces) if pieces else t
            for t, pieces in zip(self.base_tables, self.pair_pieces)
        ]

    def _belief(self, u: int) -> np.ndarray:
        b = self.unary[u].copy()
        for _, k, is_u in self.adj[u]:
            b += self.msg[(k, not is_u)]
        return b

    def _send(self, u: int, forward: bool) -> None:
        b = self.gamma[u] * self._belief(u)
        for o, k, is_u in self.adj[u]:
            if (o > u) != forward:
                continue
            table = self.tables[k] if is_u else self.tables[k].T
            out = np.min((b - self.msg[(k, not is_u)])[:, None] + table, axis=0)
            self.msg[(k, is_u)] = out - out.min()

    def sweep(self) -> None:
        """One forward and one backward TRW-S pass."""
        n = self.m.n
        for u in range(n):
            self._send(u, True)
        for u in range(n - 1, -1, -1):
            self._send(u, False)

    def lower_bound(self) -> float:
        """A lower bound on the priced MRF's minimum, valid for any messages.

        Messages reparametrise the energy without changing it (unary plus
        incoming messages, pair table minus the two messages along it), and
        the sum of the minima of the reparametrised terms is below the minimum
        of their sum.
        """
        total = sum(float(self._belief(u).min()) for u in range(self.m.n))
        for k, table in enumerate(self.tables):
            total += float((table - self.msg[(k, True)][None, :] - self.msg[(k, False)][:, None]).min())
        return total

    def labeling(self) -> np.ndarray:
        """Forward pass: each unit's best candidate given earlier choices and later messages."""
        n = self.m.n
        x = np.zeros(n, dtype=np.int64)
        for u in range(n):
            score = self.unary[u].copy()
            for o, k, is_u in self.adj[u]:
                if o < u:
                    table = self.tables[k]
                    score += table[:, x[o]] if is_u else table[x[o], :]
                else:
                    score += self.msg[(k, not is_u)]
            x[u] = int(np.argmin(score))
        return x


def repair(state: SearchState) -> bool:
    """Free memory at the fullest step, cheapest added cost per freed byte first, until valid."""
    m = state.m
    limit = m.limit
    if limit is None:
        return state.nbad == 0
    covering = _covering_units(m)
    while True:
        t = int(np.argmax(state.prof))
        over = int(state.prof[t]) - limit
        if over <= 0:
            return state.nbad == 0
        best = None
        for u in covering[t]:
            lk = state.look(u)
            nt = m.tables[u]
            inside = (nt.mem_lo <= t) & (t < nt.mem_hi)
            freed = -lk.mem[inside].sum(axis=0)
            ok = freed > 0
            if lk.bad is not None:
                ok &= lk.bad <= 0
            if not ok.any():
                continue
            rate = np.where(ok, (lk.cost - lk.cost[state.a[u]]) / np.maximum(freed, 1), np.inf)
            s = int(np.argmin(rate))
            if best is None or rate[s] < best[0]:
                best = (float(rate[s]), lk, s)
        if best is None:
            return False
        state.apply(best[1], best[2])


def _covering_units(m: CompiledModel) -> list[list[int]]:
    """Units with a memory piece live at each time step."""
    if getattr(m, "_covering", None) is None:
        cover: list[set[int]] = [set() for _ in range(m.num_steps)]
        for pc in m.pieces:
            for t in range(pc.lo, pc.hi):
                cover[t].add(pc.u)
                if pc.v >= 0:
                    cover[t].add(pc.v)
        m._covering = [sorted(c) for c in cover]
    return m._covering


def descend(state: SearchState, movable: np.ndarray, passes: int = 3) -> None:
    """Best single-unit moves (within memory) in index order until a pass changes nothing."""
    for _ in range(passes):
        changed = False
        for u in movable:
            lk = state.look(int(u))
            masked = np.where(state.allowed(lk), lk.cost, np.inf)
            s = int(np.argmin(masked))
            if masked[s] < lk.cost[state.a[u]]:
                state.apply(lk, s)
                changed = True
        if not changed:
            return


def guide(state: SearchState, movable: np.ndarray, rounds: int, sweeps: int, deadline: float, clock) -> dict:
    """Priced rounds from the state's (valid) assignment; returns the best valid plan seen.

    Prices adapt per time step: a step over the limit in this round's
    labeling doubles its price (plus a base price), a step with room lets
    its price decay. Prices so climb to any scale in a few rounds and then
    hover where labelings sit just around the limit, which is where repair
    and descent find the best valid plans. ``clock`` is read only to stop at
    ``deadline``; the rounds decide the result.
    """
    m = state.m
    best = state.assignment.copy()
    best_cost = state.cost
    best_round = -1
    mrf = PricedMRF(m, best)
    limit = float(m.limit) if m.limit is not None else None
    prices = np.zeros(m.num_steps)
    base = abs(best_cost) / (limit * m.num_steps) if limit else 0.0
    bound = -np.inf
    done = 0
    last = None
    cut = False
    for r in range(rounds):
        if clock() > deadline:
            cut = True
            break
        done += 1
        if limit is not None:
            mrf.set_prices(prices)
        for _ in range(sweeps):
            mrf.sweep()
        labels = mrf.labeling()
        bound = max(bound, mrf.lower_bound() - (0.0 if limit is None else float(prices.sum()) * limit))
        if last is not None and limit is None and np.array_equal(labels, last):
            break
        last = labels
        state.reset(labels)
        over = None if limit is None else state.prof > limit
        if repair(state):
            descend(state, movable)
            if state.cost < best_cost:
                best, best_cost, best_round = state.assignment.copy(), state.cost, r
        if over is not None:
            prices = np.where(over, 2.0 * prices + base, DECAY * prices)
    state.reset(best)
    return {"best": best, "cost": best_cost, "rounds": done, "best_round": best_round, "bound": bound, "cut": cut}
