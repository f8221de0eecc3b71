"""Global guidance for the annealer: Lagrangian memory prices and message passing.

Local moves cannot cross between two good plans that differ everywhere (on
the IOPDDL instances, the best plan differs from a greedy one in most units,
in one connected piece full of cycles). Without the memory limit the problem
is a pairwise MRF over units whose LP relaxation is tight, and TRW-S (sequential
tree-reweighted message passing, Kolmogorov 2006) finds such global optima.
The memory limit is priced in, Lagrangian style: a price per time step turns
every byte a candidate keeps live into cost, and prices rise on the steps a
round's labeling overfills and decay elsewhere (see ``guide``). Each round's
labeling is repaired into a valid plan (free memory where cheapest per byte)
and descended; the best valid plan seeds the annealer.

A max term over several pair tables is not pairwise, so rounds alternate
between two MRFs. One splits the term's parts into factors (one pair with the
unary parts on its ends, every other pair on its own) and takes the max over
alternatives of each: exact for a term over one pair, an upper bound
otherwise, so nothing costly looks free. The other keeps, of each term, the
alternative that is the max in the best plan so far: exact near that plan,
and it sees which of compute and memory time is hidden under the other. The
MRFs are only guides: every plan is scored by the exact incremental state.
"""

from __future__ import annotations

import numpy as np

from spyreopt.solvers.anneal.model import NEAR, CompiledModel
from spyreopt.solvers.anneal.state import SearchState

DECAY = 0.9  # price kept by a time step with room, per round
DESCEND_WITHIN = 1.25  # descend only repaired plans within this factor of the best (the others rarely win)
REPAIR_MOVES_PER_UNIT = 4  # a repair gives up after this many moves per unit (plus 16): it is cycling (repairs
# that succeed took at most 5 moves on every built-in workload); a deterministic bound, the clock only a safety net


class PricedMRF:
    """The unit MRF with prices: unary vectors, pair tables, and TRW-S messages kept warm.

    Max terms enter as grouped maxima, or, with ``anchor`` (a unit assignment),
    as their alternative that is the max at the anchor.
    """

    def __init__(self, model: CompiledModel, anchor: np.ndarray | None = None):
        m = self.m = model
        n = m.n
        self.base_unary = [np.minimum(m.unary[u] + NEAR * m.unary_bad[u], NEAR) for u in range(n)]
        pair: dict[tuple[int, int], np.ndarray] = {}
        for p in m.pairs:
            cost = p.cost if p.bad is None else np.where(p.bad > 0, NEAR, p.cost)
            pair[(p.u, p.v)] = pair.get((p.u, p.v), 0.0) + cost
        alt = None if anchor is None else m.alt_values(np.append(anchor, 0))
        for js in m.term_alts:
            if not js:
                continue
            chosen = [js[int(np.argmax(alt[js]))]] if alt is not None else js
            for scope, table in _max_term_factors(m, chosen):
                if len(scope) == 1:
                    self.base_unary[scope[0]] = self.base_unary[scope[0]] + table
                else:
                    pair[scope] = pair.get(scope, 0.0) + table
        self.pair_keys = sorted(pair)
        self.base_tables = [pair[k] for k in self.pair_keys]
        self.tables = list(self.base_tables)
        self.tables_t = [np.ascontiguousarray(t.T) for t in self.tables]
        # message 2k runs u -> v (over S_v), message 2k + 1 runs v -> u (over S_u), for pair k = (u, v)
        self.msg = []
        for u, v in self.pair_keys:
            self.msg += [np.zeros(int(m.sizes[v])), np.zeros(int(m.sizes[u]))]
        self.incoming: list[list[int]] = [[] for _ in range(n)]
        self.sends: list[list[tuple[int, int, int, bool]]] = [[] for _ in range(n)]  # (out, back, k, u is first)
        for k, (u, v) in enumerate(self.pair_keys):
            self.incoming[v].append(2 * k)
            self.incoming[u].append(2 * k + 1)
            self.sends[u].append((2 * k, 2 * k + 1, k, True))
            self.sends[v].append((2 * k + 1, 2 * k, k, False))
        self.forward = [[x for x in self.sends[u] if self._other(u, x) > u] for u in range(n)]
        self.backward = [[x for x in self.sends[u] if self._other(u, x) < u] for u in range(n)]
        self.gamma = [1.0 / max(len(self.forward[u]), len(self.backward[u]), 1) for u in range(n)]
        # memory pieces for prices: node pieces weigh a unary, edge pieces a pair table
        self.unit_pieces: list[list[tuple[np.ndarray, int, int]]] = [[] for _ in range(n)]
        self.pair_pieces: dict[int, list[tuple[np.ndarray, int, int]]] = {}
        index = {key: k for k, key in enumerate(self.pair_keys)}
        for pc in m.pieces:
            if pc.v < 0:
                self.unit_pieces[pc.u].append((pc.usage.astype(np.float64), pc.lo, pc.hi))
            elif (pc.u, pc.v) in index:
                self.pair_pieces.setdefault(index[(pc.u, pc.v)], []).append((pc.usage.astype(np.float64), pc.lo, pc.hi))
        self.unary = list(self.base_unary)

    def _other(self, u: int, send: tuple[int, int, int, bool]) -> int:
        a, b = self.pair_keys[send[2]]
        return b if send[3] else a

    def set_prices(self, prices: np.ndarray) -> None:
        """Unary and pair costs plus price x bytes over each piece's interval."""
        cum = np.concatenate([[0.0], np.cumsum(prices)])
        self.unary = [
            u + sum(use * (cum[hi] - cum[lo]) for use, lo, hi in pieces) if pieces else u
            for u, pieces in zip(self.base_unary, self.unit_pieces)
        ]
        for k, pieces in self.pair_pieces.items():
            self.tables[k] = self.base_tables[k] + sum(use * (cum[hi] - cum[lo]) for use, lo, hi in pieces)
            self.tables_t[k] = np.ascontiguousarray(self.tables[k].T)

    def _send(self, u: int, sends: list[tuple[int, int, int, bool]]) -> None:
        if not sends:
            return
        msg = self.msg
        b = self.unary[u].copy()
        for j in self.incoming[u]:
            b += msg[j]
        b *= self.gamma[u]
        for out, back, k, first in sends:
            table = self.tables[k] if first else self.tables_t[k]
            best = ((b - msg[back])[:, None] + table).min(axis=0)
            msg[out] = best - best.min()

    def sweep(self) -> None:
        """One forward and one backward TRW-S pass."""
        for u in range(self.m.n):
            self._send(u, self.forward[u])
        for u in range(self.m.n - 1, -1, -1):
            self._send(u, self.backward[u])

    def labeling(self) -> np.ndarray:
        """Forward pass: each unit's best candidate given earlier choices and later messages."""
        x = np.zeros(self.m.n, dtype=np.int64)
        for u in range(self.m.n):
            score = self.unary[u].copy()
            for out, back, k, first in self.sends[u]:
                o = self._other(u, (out, back, k, first))
                if o < u:
                    score += self.tables[k][:, x[o]] if first else self.tables[k][x[o], :]
                else:
                    score += self.msg[back]
            x[u] = int(np.argmin(score))
        return x


def _max_term_factors(m: CompiledModel, alts: list[int]) -> list[tuple[tuple[int, ...], np.ndarray]]:
    """A max term as factors whose sum is at least the max: max_j sum_g x_jg <= sum_g max_j x_jg.

    The main group is the pair with the largest entries plus the unary parts on
    its two units (or, without pairs, the unary parts of one unit); every other
    pair and every other unit is a group of its own.
    """
    parts: list[dict[tuple[int, ...], np.ndarray]] = []
    for j in alts:
        unary_parts, pair_parts = m.alts[j]
        d: dict[tuple[int, ...], np.ndarray] = {}
        for w, vec in unary_parts:
            d[(w,)] = d.get((w,), 0.0) + vec
        for a, b, table in pair_parts:
            d[(a, b)] = d.get((a, b), 0.0) + table
        parts.append(d)
    scopes = sorted({k for d in parts for k in d})
    pairs = [k for k in scopes if len(k) == 2]
    main = max(pairs, key=lambda k: max(float(d[k].max()) for d in parts if k in d)) if pairs else scopes[0]
    groups = {k: (main if set(k) <= set(main) else k) for k in scopes}
    out = []
    for g in dict.fromkeys(groups.values()):
        shape = tuple(int(m.sizes[u]) for u in g)
        best = None
        for d in parts:
            val = np.zeros(shape)
            for k, x in d.items():
                if groups[k] != g:
                    continue
                val = val + (x if k == g else (x[:, None] if k[0] == g[0] else x[None, :]))
            best = val if best is None else np.maximum(best, val)
        out.append((g, best))
    return out


def repair(state: SearchState, covering: list[list[int]], stop=lambda: False, max_moves: int | None = None) -> bool:
    """Free memory at the fullest step, cheapest added cost per freed byte first, until valid (or ``stop()``,
    or ``max_moves`` moves: False).

    ``covering[t]`` lists the units with memory live at step t (``covering_units``). A move that frees one
    step can fill another, so the loop need not end by itself: ``max_moves`` bounds it deterministically,
    ``stop`` on the clock (issue 16: a layernorm 2048x8192 cycled here for an hour under a 1 s limit).
    """
    m = state.m
    limit = m.limit
    if limit is None:
        return state.nbad == 0
    moves = 0
    while not stop():
        t = int(np.argmax(state.prof))
        over = int(state.prof[t]) - limit
        if over <= 0:
            return state.nbad == 0
        if max_moves is not None and moves >= max_moves:
            return False
        moves += 1
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
    return False


def covering_units(m: CompiledModel) -> list[list[int]]:
    """Units with a memory piece live at each time step."""
    cover: list[set[int]] = [set() for _ in range(m.num_steps)]
    for pc in m.pieces:
        for t in range(pc.lo, pc.hi):
            cover[t].add(pc.u)
            if pc.v >= 0:
                cover[t].add(pc.v)
    return [sorted(c) for c in cover]


def descend(state: SearchState, movable: np.ndarray, stop=lambda: False) -> None:
    """Best single-unit moves (within memory) until none improves (or ``stop()``): every unit
    once, then the neighbours of every unit that moved."""
    m = state.m
    queue = [int(u) for u in movable]
    queued = set(queue)
    while queue and not stop():
        u = queue.pop(0)
        queued.discard(u)
        lk = state.look(u)
        masked = np.where(state.allowed(lk), lk.cost, np.inf)
        s = int(np.argmin(masked))
        if masked[s] < lk.cost[state.a[u]]:
            state.apply(lk, s)
            for w in m.neighbours[u].tolist():
                if w not in queued and m.sizes[w] > 1:
                    queue.append(w)
                    queued.add(w)


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
    mrfs = [PricedMRF(m)]
    if any(m.term_alts):
        mrfs.append(PricedMRF(m, best))
    covering = covering_units(m)
    limit = float(m.limit) if m.limit is not None else None
    prices = np.zeros(m.num_steps)
    base = max(abs(best_cost), 1.0) / (limit * m.num_steps) if limit else 0.0
    done = 0
    last = last_prices = None
    cut = False
    for r in range(rounds):
        if clock() > deadline:
            cut = True
            break
        done += 1
        mrf = mrfs[r % len(mrfs)]
        if limit is not None:
            mrf.set_prices(prices)
        for _ in range(sweeps):
            mrf.sweep()
        if clock() > deadline:
            cut = True
            break
        labels = mrf.labeling()
        if last is not None and np.array_equal(labels, last) and np.array_equal(prices, last_prices):
            break  # converged: every further round would repeat this one
        last, last_prices = labels, prices
        state.reset(labels)
        over = None if limit is None else state.prof > limit
        moves = REPAIR_MOVES_PER_UNIT * len(state.a) + 16
        if repair(state, covering, lambda: clock() > deadline, moves) and state.cost <= DESCEND_WITHIN * best_cost:
            descend(state, movable, lambda: clock() > deadline)
            if state.cost < best_cost:
                best, best_cost, best_round = state.assignment.copy(), state.cost, r
                if len(mrfs) > 1:
                    mrfs[1] = PricedMRF(m, best)
        if over is not None:
            prices = np.where(over, 2.0 * prices + base, DECAY * prices)
    state.reset(best)
    return {"best": best, "cost": best_cost, "rounds": done, "best_round": best_round, "cut": cut}
