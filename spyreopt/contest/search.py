"""The contest search: usage prices per time step (Lagrangian relaxation) over TRW-S and exact forest moves.

One round: minimise cost + usage x price (summed over each segment's live
steps) with a TRW-S pass (``trws``) whose decoding seeds an exact
induced-forest DP plus a spanning-forest proposal; then make a copy feasible
(repair at the peak step) and polish it with one-node moves that respect the
hard limit; keep the best feasible. Prices first grow where the relaxed
solution overflows (until a feasible solution exists), then follow projected
subgradient steps sized by the gap between the best feasible cost and the
dual value (Polyak), as in the contest winner's usage-constrained relaxation.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from spyreopt.contest import kernels as K
from spyreopt.contest import trws as T
from spyreopt.contest.reduce import Reduced
from spyreopt.contest.region import improve, pick_region

REGION_START = 32  # free groups in the first exact region step (HiGHS finishes such a MILP in well under a second)
REGION_SHARE = 0.1  # of the time left: the most one region step may take
REGION_SECONDS_MIN = 0.5  # ... but at least this (a MILP's set-up)
EXACT_SHARE = 0.1  # of the search's time so far: the most its exact region steps may have taken (they pay rarely)
RESTART_AFTER = 5  # stalls (``stall_max`` rounds each) without a gain before the relaxation restarts from an elite
RESTART_SIGMA = 0.5  # spread of the log-normal noise on the prices at a restart
ELITES = 4


@dataclass(frozen=True)
class Graph:
    """CSR adjacency of the merged edges: for node i, entries ptr[i]:ptr[i+1]."""

    ptr: np.ndarray
    nbr: np.ndarray
    edg: np.ndarray
    fst: np.ndarray  # True when node i is the edge's first node (row of the table)
    rev: np.ndarray  # the entry of the same edge in the neighbour's list
    moff: np.ndarray  # offsets of the TRW-S message along each entry (neighbour's strategies)


def build_graph(r: Reduced) -> Graph:
    m = len(r.ea)
    src = np.concatenate([r.ea, r.eb])
    dst = np.concatenate([r.eb, r.ea])
    eid = np.concatenate([np.arange(m), np.arange(m)])
    fst = np.concatenate([np.ones(m, bool), np.zeros(m, bool)])
    o = np.argsort(src, kind="stable")
    ptr = np.zeros(r.n + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=r.n), out=ptr[1:])
    nbr, edg, fst = dst[o].astype(np.int64), eid[o].astype(np.int64), fst[o]
    at = np.zeros((2, m), np.int64)  # adjacency entry of each edge at its first / second node
    at[np.where(fst, 0, 1), edg] = np.arange(len(edg))
    rev = np.where(fst, at[1, edg], at[0, edg]).astype(np.int64)
    moff = np.zeros(len(nbr) + 1, np.int64)
    np.cumsum(r.k[nbr], out=moff[1:])
    return Graph(ptr, nbr, edg, fst, rev, moff)


@dataclass
class Result:
    """Best feasible assignment of one search (reduced numbering), with its history."""

    x: np.ndarray | None
    cost: float
    rounds: int
    seconds_to_best: float
    cut_by_clock: bool
    seed: int


class Search:
    """State of one seeded search over a reduced instance."""

    def __init__(self, r: Reduced, g: Graph, seed: int):
        self.r, self.g, self.seed = r, g, seed
        self.rng = np.random.default_rng(seed)
        self.x = np.zeros(r.n, np.int64)
        self.lam = np.zeros(r.horizon, np.float64)
        self.best_x: np.ndarray | None = None
        self.best = np.inf
        self.near, self.grow, self.add, self.decay = 0.02, 0.5, 0.01, 0.97
        self.share = 0.5
        self.warm = 10
        self.polyak, self.theta, self.best_dual, self.stall, self.stall_max = True, 1.0, -np.inf, 0, 20
        self.msg = np.zeros(g.moff[-1], np.float64)
        self.region = REGION_START  # groups in the next exact region step: grows when HiGHS finishes, halves if not
        self.elites: list[tuple[float, np.ndarray]] = []
        self.exact_steps = self.exact_gains = self.restarts = 0
        self.exact_seconds = 0.0
        self.clock_touched = False  # a region step stopped by HiGHS's time limit: the run depends on the clock

    # ---- pieces ---------------------------------------------------------
    def _pens(self) -> np.ndarray:
        r = self.r
        c = np.concatenate([[0.0], np.cumsum(self.lam)])
        return K.penalties(c, r.k, r.off, r.segptr, r.seglo, r.seghi, r.segoff, r.segu)

    def _dp(self, pens: np.ndarray) -> int:
        """An exact induced-forest step, then a spanning-forest proposal kept when it lowers the priced cost."""
        r, g = self.r, self.g
        adj = (r.k, r.off, r.cost, g.ptr, g.nbr, g.edg, g.fst, r.eoff, r.ecost)
        perm = self.rng.permutation(r.n)
        ins, tree = K.induced_forest(perm, r.k, g.ptr, g.nbr)
        y = K.tree_dp(self.x, pens, perm, ins, tree, 0.5, *adj)
        changed = int((y != self.x).sum())
        self.x = y
        ins, tree = K.spanning_forest(self.rng.permutation(len(r.ea)), r.k, g.ptr, g.nbr, g.edg)
        y = K.tree_dp(self.x, pens, perm, ins, tree, self.share, *adj)
        priced = (r.k, r.off, r.cost, r.ea, r.eb, r.eoff, r.ecost)
        if K.priced_cost(y, pens, *priced) < K.priced_cost(self.x, pens, *priced):
            changed += int((y != self.x).sum())
            self.x = y
        return changed

    def _trws(self, pens: np.ndarray) -> None:
        """A TRW-S forward and backward pass on cost + prices; its decoding, improved by forest DP, replaces x
        when it lowers the priced cost."""
        r, g = self.r, self.g
        y = np.zeros(r.n, np.int64)
        T.trws_iterate(self.msg, g.moff, g.rev, r.cost + pens, 1, y, r.k, r.off, g.ptr, g.nbr, g.edg, g.fst,
                       r.eoff, r.ecost)  # fmt: skip
        self._dp_from(y, pens)

    def _dp_from(self, y: np.ndarray, pens: np.ndarray) -> None:
        """Forest DP from y; kept in place of x when it lowers the priced cost."""
        r = self.r
        old = self.x
        self.x = y
        for _ in range(2):
            if self._dp(pens) == 0:
                break
        priced = (r.k, r.off, r.cost, r.ea, r.eb, r.eoff, r.ecost)
        if K.priced_cost(self.x, pens, *priced) >= K.priced_cost(old, pens, *priced):
            self.x = old

    def _polyak_step(self, prof: np.ndarray, pens: np.ndarray) -> None:
        """Projected subgradient step on the prices, sized by the gap to the best feasible cost (Polyak)."""
        r = self.r
        sub = (prof - r.usage_limit).astype(np.float64)
        sub[(self.lam <= 0) & (sub < 0)] = 0.0
        norm = float(sub @ sub)
        if norm == 0.0:
            return
        dual = self.cost(self.x) + float(pens[r.off[:-1] + self.x].sum()) - float(self.lam.sum()) * r.usage_limit
        if dual > self.best_dual:
            self.best_dual, self.stall = dual, 0
        else:
            self.stall += 1
            if self.stall >= self.stall_max:
                self.theta, self.stall = max(self.theta / 2, 1e-3), 0
        gap = max(self.best - dual, 0.01 * abs(self.best))
        np.maximum(self.lam + self.theta * gap / norm * sub, 0.0, out=self.lam)

    def cost(self, x: np.ndarray) -> float:
        r = self.r
        return K.total_cost(x, r.k, r.off, r.cost, r.ea, r.eb, r.eoff, r.ecost)

    def profile(self, x: np.ndarray) -> np.ndarray:
        r = self.r
        return K.profile(x, r.segptr, r.seglo, r.seghi, r.segoff, r.segu, r.horizon)

    def feasible_copy(self, x: np.ndarray, prof: np.ndarray, passes: int = 50) -> np.ndarray | None:
        """Repair a copy of x to the limit and polish it; None when repair cannot reach the limit."""
        r, g = self.r, self.g
        y = x.copy()
        segs = (r.segptr, r.seglo, r.seghi, r.segoff, r.segu)
        adj = (g.ptr, g.nbr, g.edg, g.fst, r.eoff, r.ecost)
        if not K.repair(y, prof, r.usage_limit, r.k, r.off, r.cost, *segs, *adj):
            return None
        order = self.rng.permutation(r.n)
        K.polish(y, self.profile(y), r.usage_limit, order, passes, r.k, r.off, r.cost, *segs, *adj)
        return y

    def lean_start(self) -> np.ndarray:
        """Per group, the strategy with least usage x length (then least cost): feasible whenever anything is."""
        r = self.r
        seg_group = np.repeat(np.arange(r.n), np.diff(r.segptr))
        weight = np.zeros(len(r.cost))
        lens = (r.seghi - r.seglo).astype(np.float64)
        for g_seg, j in zip(seg_group, range(len(r.seglo))):
            weight[r.off[g_seg] : r.off[g_seg + 1]] += r.segu[r.segoff[j] : r.segoff[j + 1]] * lens[j]
        x = np.zeros(r.n, np.int64)
        for gi in range(r.n):
            a, b = r.off[gi], r.off[gi + 1]
            x[gi] = int(np.lexsort((r.cost[a:b], weight[a:b]))[0])
        return x

    # ---- the loop -------------------------------------------------------
    def run(
        self,
        deadline: float,
        max_rounds: int,
        on_best: Callable[[float, int], None] | None = None,
        stop: Callable[[], bool] | None = None,
        explore: bool = True,
    ) -> Result:
        """Rounds until ``max_rounds``, the deadline (``cut_by_clock``) or ``stop()`` (checked every round).

        ``explore``: once the prices settle, exact region steps and restarts from elites (``_exact_step``,
        ``_restart``); without it the rounds only follow the prices (the ``trws`` backend's start: a round
        budget alone then decides the answer)."""
        r = self.r
        t0 = self.t0 = time.monotonic()
        t_best = 0.0
        lean = self.lean_start()
        if (self.profile(lean) <= r.usage_limit).all():
            y = self.feasible_copy(lean, self.profile(lean), passes=50)
            self.best, self.best_x = self.cost(y), y
            t_best = time.monotonic() - t0
        zero = np.zeros(len(r.cost))
        for _ in range(self.warm):
            if time.monotonic() > deadline:
                break
            self._trws(zero)
        for _ in range(3):
            if time.monotonic() > deadline or self._dp(zero) == 0:
                break
        prof = self.profile(self.x)
        live = float(prof.sum())
        step = self.cost(self.x) / max(float(live), 1.0)  # price scale: usage priced like the average cost
        rounds, cut = 0, False
        limit = r.usage_limit
        pens = zero
        near = 1.0 + self.near
        since = 0
        for rounds in range(1, max_rounds + 1):
            if time.monotonic() > deadline:
                cut = True
                rounds -= 1
                break
            if stop is not None and stop():
                rounds -= 1
                break
            peak = prof.max() if len(prof) else 0
            if peak <= near * limit or (self.best_x is None and rounds % 50 == 0):
                y = self.feasible_copy(self.x, prof, passes=3)
                if y is not None:
                    c = self.cost(y)
                    self._elite(c, y)
                    if c < self.best:
                        self.best, self.best_x, t_best = c, y, time.monotonic() - t0
                        since = 0
                        if on_best is not None:
                            on_best(c, rounds)
            since += 1
            if (
                explore and self.best_x is not None and since >= self.stall_max
            ):  # the prices have settled: act on the incumbent
                if self._exact_step(deadline):
                    self.best, t_best, since = self.cost(self.best_x), time.monotonic() - t0, 0
                    if on_best is not None:
                        on_best(self.best, rounds)
                elif since >= self.stall_max * RESTART_AFTER:
                    self._restart()
                    since = 0
            if self.polyak and self.best_x is not None:
                self._polyak_step(prof, pens)
            else:
                rel = (prof - limit) / limit
                over = rel > 0
                self.lam[over] = (
                    self.lam[over] * (1.0 + self.grow * np.minimum(rel[over], 1.0)) + step * self.add * rel[over]
                )
                self.lam[~over] *= self.decay
            pens = self._pens()
            self._trws(pens)
            self._dp(pens)
            prof = self.profile(self.x)
        if self.best_x is not None:  # a last, longer polish of the best
            y = self.feasible_copy(self.best_x, self.profile(self.best_x), passes=50)
            if y is not None and self.cost(y) < self.best:
                self.best, self.best_x = self.cost(y), y
        return Result(self.best_x, self.best, rounds, t_best, cut or self.clock_touched, self.seed)

    # ---- after the prices settle ------------------------------------------
    def _elite(self, c: float, y: np.ndarray) -> None:
        """Keep the ``ELITES`` cheapest distinct feasible solutions seen: the restarts' starting points."""
        if any(c == e and np.array_equal(y, z) for e, z in self.elites):
            return
        self.elites = sorted([*self.elites, (c, y)], key=lambda t: t[0])[:ELITES]

    def _exact_step(self, deadline: float) -> bool:
        """The MILP over a region where the relaxation disagrees with the incumbent, the rest fixed; True when
        it found a cheaper feasible solution (then the incumbent)."""
        now = time.monotonic()
        left = deadline - now
        if left <= 0 or self.exact_seconds > EXACT_SHARE * (now - self.t0):
            return False
        binding = np.flatnonzero(self.lam > 0)  # where the prices say memory binds; by turns with the graph alone
        step = int(binding[self.rng.integers(len(binding))]) if len(binding) and self.exact_steps % 2 == 0 else None
        region = pick_region(self.r, self.g.ptr, self.g.nbr, self.best_x, self.x, self.region, self.rng, step)
        if len(region) < 2:
            return False
        step = improve(self.r, self.best_x, self.cost, region, min(left, max(REGION_SECONDS_MIN, REGION_SHARE * left)))
        self.exact_steps += 1
        self.exact_seconds += time.monotonic() - now
        if step.finished:
            self.region = min(int(self.region * 1.5) + 1, int((self.r.k > 1).sum()))
        else:
            self.clock_touched = True
            self.region = max(self.region // 2, 2)
        if step.improved:
            self.exact_gains += 1
            self.best_x = step.x
            self._elite(self.cost(step.x), step.x)
        return step.improved

    def _restart(self) -> None:
        """Leave the settled prices: start the relaxation again from an elite, its prices scattered (log-normal
        noise) and its messages cleared, so the next rounds explore another part of the space."""
        self.restarts += 1
        _, z = self.elites[int(self.rng.integers(len(self.elites)))]
        self.x = z.copy()
        self.lam *= self.rng.lognormal(0.0, RESTART_SIGMA, len(self.lam))
        self.msg[:] = 0.0
        self.theta, self.best_dual, self.stall = 1.0, -np.inf, 0
